"""The built chapters' prose: no number typed that the page also computes.

A number the page computes (a glued value, a printed output, a table) must reach the prose
through myst-nb ``glue``, so it cannot drift from the code. This reads each chapter's built
HTML (no browser needed, only ``_build/html``): the numbers of its glued spans and cell outputs
are what the page computed; a number typed in its prose (paragraphs, list items, table cells
outside outputs; math and code excluded) whose value is among them fails the test. A value
written as a literal in the chapter's code (an input such as a 0.5 s target, also as 500 ms or
50 %) is chosen, not computed, and may be typed. Only
numbers with a decimal point, a thousands separator or three digits or more are compared
(:func:`capbook.app.bookcheck.computed_numbers`): small counts and section numbers are not.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from capbook.app.bookcheck import code_literals, computed_numbers, number_value

bs4 = pytest.importorskip("bs4")

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))
# Elements whose text is not prose a reader reads as typed.
NOT_PROSE = ("div.cell_input", "div.cell_output", "span.pasted-text", "span.pasted-inline",
             "span.math", "div.math", "code", "pre", "mjx-container", "script", "style",
             "div.bd-sidebar-primary", "div.bd-sidebar-secondary", "nav", "footer", "header",
             "span.caption-number", "div.prev-next-area", "a.reference.internal")


def typed_and_computed(html: str) -> tuple[list[tuple[str, str]], set[float]]:
    """(typed numbers with their sentence, values computed on the page) of one built page."""
    soup = bs4.BeautifulSoup(html, "html.parser")
    article = soup.select_one("article.bd-article") or soup
    computed = set()
    for el in article.select("span.pasted-text, div.cell_output"):
        computed |= {number_value(n) for n in computed_numbers(el.get_text(" "))}
    for sel in NOT_PROSE:
        for el in article.select(sel):
            el.decompose()
    typed = []
    for el in article.find_all(["p", "li", "td", "th", "dd"]):
        if el.find(["p", "li", "td"]):  # the innermost block holds the sentence
            continue
        text = " ".join(el.get_text(" ").split())
        typed += [(n, text) for n in sorted(computed_numbers(text))]
    return typed, computed


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_typed_number_the_page_computes(site, chapter):
    page = site / "book" / f"{chapter}.html"
    if not page.is_file():
        pytest.fail(f"{page} was not built")
    typed, computed = typed_and_computed(page.read_text(encoding="utf-8"))
    computed -= code_literals(ROOT / "book" / f"{chapter}.ipynb")
    clash = [(n, s) for n, s in typed if number_value(n) in computed]
    assert not clash, (f"book/{chapter}.ipynb types numbers its code computes; glue them "
                       "(glue('name', value, display=False) and {glue:text}`name`):\n  "
                       + "\n  ".join(f"{n}: …{s[:160]}…" for n, s in clash))


def test_the_check_sees_a_typed_number():
    html = ('<article class="bd-article"><div class="cell_output"><pre>coverage 98.2 %</pre></div>'
            '<p>It found <span class="pasted-text">97.0</span> % here and 98.2 % before.</p></article>')
    typed, computed = typed_and_computed(html)
    assert [n for n, _ in typed] == ["98.2"] and computed == {97.0, 98.2}
