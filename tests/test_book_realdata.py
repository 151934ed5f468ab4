"""The book reads right on a reader's data: ``capbook book`` on real public logs and a real sweep.

Two end-to-end builds (marked ``book_build``, several minutes each): the Azure 2023
conversation trace with the inference-perf KubeCon "chunking and prefix caching" sweep, and
Mooncake's production conversation trace with the plain vLLM sweep of the same study. Both
sweeps are open-loop (rate) sweeps. Every chapter page of each site is scanned for what a
reader must never see: ``nan``, ``inf``, ``None`` or ``NaT`` where a number or a sentence should
be, Python warnings and tracebacks, stderr output, glue that did not resolve, and sentences
that describe the sample data. Each failure names the page and the offending sentence.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from capbook.app.bookbuild import chapter_files
from capbook.app.cli import main

BUILDS = {
    "azure_conv": ("traces/AzureLLMInferenceTrace_conv.csv",
                   "realdata/inference-perf-kubecon-na-2025/vllm+chunking_and_prefix_caching"),
    "mooncake_conv": ("traces/conversation_trace.jsonl",
                      "realdata/inference-perf-kubecon-na-2025/vllm"),
}

#: A missing or undefined value printed where a number or a word should be.
MISSING = re.compile(r"(?<![\w.+\-])(-?inf|-?Inf|nan|NaN|NaT|None)(?![\w\-])")
#: A Python warning or traceback that reached the page.
WARNING = re.compile(r"\b(\w+Warning\b|Traceback \(most recent call last\))")
#: Sentences that describe the sample data (regressions: each was printed on a reader's data once).
SAMPLE_ONLY = [
    "The sample gateway is small",
    "the sample traffic gives",
    "The sample log holds four weeks",
    "hit the gateway's max_tokens cap",
    "it is a batch job",
    "bursts of calls fired within a second",
    "the generated gateway served its two models",
    "The agent calls, only",
    "Interactive traffic follows the working day",
    "covers four weeks of a gateway",
    "On the sample log the pooled plan's queueing budget holds",
    "The sweep of the book's illustrative replica",
    "Through the book's illustrative sweep",
    "We use the illustrative sweep at its 32 slots",
]
#: Pages that read the request log, and pages that read the sweep: each must name the reader's file.
READS_LOG = ("know_your_traffic", "variability", "replay_trace", "autoscaling", "forecast_tokens", "backtesting",
             "capstone_plan", "what_capacity_costs")
READS_SWEEP = ("know_your_traffic", "variability", "sweep_to_slots", "textbook_breaks", "mixed_workloads",
               "capstone_plan")
_GLUE_ROLE = re.compile(r"\{glue(?::text)?\}`([^`]+)`")


def visible_text(html: str) -> list[str]:
    """The lines a reader sees on a page: no scripts, styles or code *input* (outputs stay)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    for tag in soup.select("div.cell_input, div.cell.tag_remove-input > div.cell_input"):
        tag.decompose()
    # code blocks written in the prose (``` fences) are code, not sentences; cell outputs are kept
    for tag in soup.select("div.highlight"):
        if not tag.find_parent(class_="cell_output"):
            tag.decompose()
    main_part = soup.select_one("main") or soup.select_one("article") or soup
    return [" ".join(line.split()) for line in main_part.get_text("\n").splitlines() if line.strip()]


def scan_page(name: str, html: str) -> list[str]:
    """Problems on one page, each as 'page: offending sentence'."""
    from bs4 import BeautifulSoup

    problems = []
    lines = visible_text(html)
    for line in lines:
        for pattern, what in ((MISSING, "missing value"), (WARNING, "warning")):
            m = pattern.search(line)
            if m:
                lo = max(0, m.start() - 120)
                problems.append(f"{name}: {what} {m.group(0)!r} in: …{line[lo:m.end() + 120]}…")
        for phrase in SAMPLE_ONLY:
            if phrase in line:
                problems.append(f"{name}: sentence about the sample data: {line[:300]}")
    soup = BeautifulSoup(html, "html.parser")
    for err in soup.select("div.output.stderr, div.stderr"):
        problems.append(f"{name}: stderr output: {' '.join(err.get_text().split())[:300]}")
    for err in soup.select("div.output.traceback, div.traceback"):
        problems.append(f"{name}: error output: {' '.join(err.get_text().split())[:300]}")
    return problems


def scan_notebook(path: Path) -> list[str]:
    """Problems in an executed chapter: glue that does not resolve or format, stderr and errors."""
    from myst_nb.core.variables import format_plain_text

    nb = nbformat.read(path, as_version=4)
    name = path.stem
    glued, problems = {}, []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                prefix = meta.get("mime_prefix", "")
                glued[meta["name"]] = {k[len(prefix):]: v for k, v in out.get("data", {}).items()}
            elif out.output_type == "stream" and out.name == "stderr":
                problems.append(f"{name}: stderr in cell {cell.id}: {' '.join(out.text.split())[:300]}")
            elif out.output_type == "error":
                problems.append(f"{name}: error in cell {cell.id}: {out.ename}: {out.evalue[:300]}")
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for m in _GLUE_ROLE.finditer(cell.source):
            key, _, spec = m.group(1).partition(":")
            if key not in glued:
                problems.append(f"{name}: glue key {key!r} (cell {cell.id}) was never glued")
                continue
            try:
                text = format_plain_text(glued[key].get("text/plain", ""), spec)
            except Exception as exc:  # what myst-nb would turn into a warning and an empty span
                problems.append(f"{name}: glue {key}:{spec} (cell {cell.id}) does not format: {exc}")
                continue
            if MISSING.search(text) or not text.strip():
                problems.append(f"{name}: glue {key} (cell {cell.id}) renders as {text!r}")
    return problems


def check_site(out: Path, log: Path, sweep: Path) -> list[str]:
    """Every problem of a built site (pages and kept notebooks)."""
    problems = []
    for p in chapter_files():
        page = out / "book" / f"{p.stem}.html"
        if not page.is_file():
            problems.append(f"{p.stem}: page missing")
            continue
        html = page.read_text(encoding="utf-8")
        problems += scan_page(p.stem, html)
        text = "\n".join(visible_text(html))
        if p.stem in READS_LOG and log.name not in text:
            problems.append(f"{p.stem}: the page never names the reader's log {log.name}")
        if p.stem in READS_SWEEP and sweep.name not in text:
            problems.append(f"{p.stem}: the page never names the reader's sweep {sweep.name}")
        nb = out / "notebooks" / p.name
        problems += scan_notebook(nb) if nb.is_file() else [f"{p.stem}: executed notebook not kept"]
    return problems


@pytest.fixture(scope="module", params=sorted(BUILDS))
def real_build(request, shared_dir, tmp_path_factory):
    """One ``capbook book`` build on a real log and a real open-loop sweep (minutes)."""
    mp = pytest.MonkeyPatch()
    for k in ("CAPBOOK_REQUESTS", "CAPBOOK_SWEEP", "CAPBOOK_REQUESTS_FORMAT"):
        mp.delenv(k, raising=False)
    log_rel, sweep_rel = BUILDS[request.param]
    log, sweep = shared_dir / log_rel, shared_dir / sweep_rel
    if not log.exists() or not sweep.exists():
        pytest.skip(f"{log} or {sweep} is not in ../shared")
    out = tmp_path_factory.mktemp(request.param) / "site"
    code = main(["book", "--requests", str(log), "--sweep", str(sweep), "--out", str(out), "--keep"])
    mp.undo()
    return request.param, code, out, log, sweep


@pytest.mark.book_build
def test_book_reads_right_on_real_data(real_build, capsys):
    name, code, out, log, sweep = real_build
    assert code == 0, f"capbook book failed on {log.name} + {sweep.name}:\n{capsys.readouterr().err[-2000:]}"
    problems = check_site(out, log, sweep)
    assert not problems, f"{len(problems)} problems in the {name} build:\n" + "\n".join(problems)


@pytest.mark.book_build
def test_a_real_build_says_what_the_log_allows(real_build):
    """The site names the reader's log, and the forecasting chapters and the capstone say why a
    log of an hour or two cannot be forecast (rather than forecasting the sample data)."""
    name, code, out, log, sweep = real_build
    assert code == 0
    marker = json.loads((out / ".capbook-book.json").read_text())
    assert set(marker) >= {"requests", "sweep", "sample", "built"} and marker["sample"] is False
    intro = re.sub(r"<[^>]+>", "", (out / "book" / "intro.html").read_text())
    assert "The data this copy of the book was built from" in intro and log.name in intro
    for page in ("forecast_tokens", "backtesting"):
        text = re.sub(r"<[^>]+>", "", (out / "book" / f"{page}.html").read_text())
        assert re.search(re.escape(log.name) + r"\) covers \d+ hours?", text), page
        assert "needs 20 whole weeks" in text, page
    plan_page = re.sub(r"<[^>]+>", "", (out / "book" / "capstone_plan.html").read_text())
    assert "forecast not possible" in plan_page


def test_the_scan_catches_what_it_must():
    """The scanner flags each kind of problem (so a clean scan means something)."""
    page = """<html><body><main>
      <p>The log holds 19,366 requests over nan days.</p>
      <p>The queue waits inf s.</p>
      <div class="cell"><div class="cell_input"><pre>x = None  # code input is not prose</pre></div>
        <div class="cell_output"><div class="output stream highlight-myst-ansi"><div class="highlight">
          <pre>/tmp/x.py:8: RuntimeWarning: divide by zero</pre></div></div>
        <div class="output stderr"><pre>oops</pre></div></div></div>
      <p>The sample gateway is small: a replica or two carry it.</p>
      <p>Information about influx, Nonetheless a NaNometre.</p>
    </main></body></html>"""
    problems = scan_page("p", page)
    text = "\n".join(problems)
    assert "'nan'" in text and "'inf'" in text and "RuntimeWarning" in text and "stderr output" in text
    assert "sample data" in text and "x = None" not in text
    assert len(problems) == 5, problems


def test_the_notebook_scan_catches_missing_and_bad_glue(tmp_path):
    from myst_nb import glue  # noqa: F401  (the real glue output format is what the scan reads)

    def glue_output(name, text):
        return nbformat.v4.new_output("display_data", data={f"application/papermill.record/text/plain": text},
                                      metadata={"scrapbook": {"name": name,
                                                              "mime_prefix": "application/papermill.record/"}})

    code = nbformat.v4.new_code_cell("")
    code.outputs = [glue_output("good", "1.5"), glue_output("bad", "nan"), glue_output("word", "'n/a'"),
                    nbformat.v4.new_output("stream", name="stderr", text="UserWarning: careful")]
    md = nbformat.v4.new_markdown_cell("{glue:text}`good:.1f` {glue:text}`bad:.2f` {glue:text}`gone` "
                                       "{glue:text}`word:.0f`")
    nb = nbformat.v4.new_notebook(cells=[code, md])
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    problems = "\n".join(scan_notebook(path))
    assert "'gone'" in problems and "renders as 'nan'" in problems and "does not format" in problems
    assert "stderr" in problems and "good" not in problems
