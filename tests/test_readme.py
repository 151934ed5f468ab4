"""The README's Python examples run, and print what the README says they print."""
from __future__ import annotations

import doctest
import re

from conftest import ROOT

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def readme_examples(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block of a Markdown text."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def run_examples(text: str) -> list[str]:
    """Run every ```python block as a doctest, in one namespace; returns the failure reports."""
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    globs: dict = {"__name__": "README"}
    reports: list[str] = []
    for line, code in readme_examples(text):
        test = parser.get_doctest(code, globs, f"README.md:{line}", "README.md", line - 1)
        runner.run(test, out=reports.append, clear_globs=False)
    return reports


def test_every_python_example_is_checked():
    blocks = readme_examples((ROOT / "README.md").read_text(encoding="utf-8"))
    assert blocks, "README.md has no ```python example"
    for line, code in blocks:
        assert code.lstrip().startswith(">>> "), (
            f"README.md line {line}: write the example as >>> lines, each followed by what it "
            "prints, so that this test checks it")


def test_readme_examples_print_what_it_says():
    reports = run_examples((ROOT / "README.md").read_text(encoding="utf-8"))
    assert not reports, "\n".join(reports)


def test_a_wrong_figure_is_caught():
    text = "```python\n>>> from capbook import queueing as q\n>>> q.replicas_pooled(40, 32, 12.25, 0.5, 0.01)\n16\n```\n"
    (report,) = run_examples(text)
    assert "Expected:\n    16\nGot:\n    17" in report
