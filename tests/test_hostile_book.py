"""Nothing in a reader's data runs: not in ``capbook book``, not in the published site.

A reader's file names, models, tiers and tenants reach three parsers: MyST (the data note on the
first page, Markdown outputs), HTML (tables, plan documents, the page itself) and the inline
``<script>`` elements holding the charts' and widgets' JSON. The payloads of
``tests/hostile_data.py`` try each: Jinja2 through MyST's ``substitution`` extension (they
``touch`` the file named by ``$CAPBOOK_PWNED``), roles, directives, math, Markdown links,
elements with event handlers, and a ``</script>`` that would end a chart's script.

The fast tests check each escaping step with the real parser; the one full hostile book build
(marked ``book_build``) runs ``capbook book`` on the sample gateway renamed with the payloads and
under hostile paths, then scans every page with an HTML parser and opens every page in headless
Chromium (skipped without Chromium, except under ``CI=true``), where no dialog may open. That
build also holds the end-to-end checks of a ``capbook book`` site (the note, the marker file, no
traceback on any chapter, the capstone's plan) that a separate build on the sample data used to
repeat.
"""
from __future__ import annotations

import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hostile_data as H
from capbook.app.bookbuild import ROOT, _prepare_source, chapter_files, data_note

MYST_EXTENSIONS = ["amsmath", "colon_fence", "deflist", "dollarmath", "substitution", "html_image"]


@pytest.fixture
def marker(tmp_path, monkeypatch) -> Path:
    """The file the Jinja payloads create if they run (``$CAPBOOK_PWNED``)."""
    path = tmp_path / "PWNED"
    monkeypatch.setenv(H.MARKER_ENV, str(path))
    return path


def hostile_source() -> dict:
    """A ``datasets.data_source()`` whose every path and reading option carries payloads."""
    return {"requests": "/d/a` " + H.JINJA + " `b" + H.SCRIPT + H.MD_IMAGE,
            "sweep": H.SVG + "\n\n" + H.JINJA + "\u2028",
            "history": H.RST + "\n" + H.MD_LINK + " {raw}`html` <b>",
            "prices": H.MATH + H.IMG + " $x$ {{'{%'}}",
            "sample": False,
            "requests_options": {"time_unit": H.JINJA, "drop_invalid": True},
            "sweep_options": {"where": {"config": H.JINJA_STMT + H.SCRIPT}}}


def myst_to_html(text: str) -> str:
    """``text`` through MyST's docutils parser with the book's extensions (substitutions evaluated)."""
    from docutils.core import publish_string
    from myst_parser.parsers.docutils_ import Parser

    settings = {"myst_enable_extensions": MYST_EXTENSIONS, "report_level": 4, "halt_level": 5,
                "output_encoding": "unicode", "raw_enabled": True}
    return publish_string(text, parser=Parser(), writer_name="html5", settings_overrides=settings)


class Page(HTMLParser):
    """Tags, attributes, scripts and text of an HTML document, as the browser's parser splits them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self.text: list[str] = []
        self._script = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = {k.lower(): (v or "") for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "script":
            self._script = (a, [])

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def handle_data(self, data):
        (self._script[1] if self._script is not None else self.text).append(data)


def active_content(page: Page) -> list[str]:
    """What in a parsed page could run: event handlers, ``javascript:`` URLs, foreign scripts, and
    inline scripts that are neither JSON nor code with the payloads only inside string literals."""
    problems = []
    for tag, attrs in page.tags:
        for k, v in attrs.items():
            if k.startswith("on") and "alert(" in v:
                problems.append(f"<{tag} {k}={v!r}>")
            if k in ("href", "src", "action", "formaction") and v.strip().lower().startswith("javascript:"):
                problems.append(f"<{tag} {k}={v!r}>")
    for attrs, body in page.scripts:
        kind = attrs.get("type", "").lower()
        if "src" in attrs:
            if re.match(r"^([a-z]+:)?//", attrs["src"], re.I):
                problems.append(f"script from outside the site: {attrs['src']}")
            continue
        if re.search(r"<(/?script|!--)", body, re.I):
            problems.append(f"inline script holds a script tag or comment: {body[:200]!r}")
        if kind.endswith("json"):
            try:
                json.loads(body)
            except ValueError:
                problems.append(f"{kind} script is not JSON (cut short?): {body[:200]!r}")
        elif kind in ("", "text/javascript", "module", "text/x-thebe-config"):  # the theme's thebe settings
            code = re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`(?:[^`\\]|\\.)*`', '""', body)
            if "alert(" in code or "os.system" in code:
                problems.append(f"inline script runs data: {body[:200]!r}")
        else:
            problems.append(f"inline script of unknown type {kind!r}: {body[:200]!r}")
    return problems


# --------------------------------------------------------------------------------------------
# The data note (MyST)
# --------------------------------------------------------------------------------------------
def test_the_old_note_ran_code_so_the_check_can_fail(marker):
    # the note as it was: paths in backticks, which a backtick in the path ends
    myst_to_html(f"# T\n\n- request log: `a` {H.JINJA} `b`\n")
    assert marker.exists()


def test_data_note_is_inert_to_myst_and_html(tmp_path, marker):
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser
    from markdown_it.renderer import RendererHTML

    src = hostile_source()
    note = data_note(src, "2026-12-03 08:00 UTC")
    work = tmp_path / "src"
    work.mkdir()
    _prepare_source(work, note)          # the note at the top of the copied intro, as capbook book writes it
    intro = (work / "book" / "intro.md").read_text(encoding="utf-8")
    assert note in intro
    # the MyST tokens: the note is one HTML block; no substitution, code, math, role or link in it
    md = create_md_parser(MdParserConfig(enable_extensions=set(MYST_EXTENSIONS)), RendererHTML)
    tokens = [t for t in md.parse(note)]
    assert [t.type for t in tokens] == ["html_block"] and tokens[0].content == note
    # through MyST's docutils renderer (Jinja2 substitutions live): nothing ran, the text is the path
    out = myst_to_html("# Title\n\n" + note)
    assert not marker.exists()
    page = Page(out)
    in_note = [t for t, _ in page.tags[page.tags.index(("div", {"class": "admonition note capbook-data-note"})):]]
    assert set(in_note) <= {"div", "p", "code", "ul", "li", "main", "body", "html"}, in_note
    assert not active_content(page) and not page.scripts
    text = "".join(page.text)
    for what in ("requests", "history", "prices"):
        assert src[what] in text, what
    assert src["sweep"] in text and "time_unit='" + H.JINJA + "'" in text
    assert "The data this copy of the book was built from" in text and "skipped" in text
    assert "matches the published book" in data_note({"requests": "sample", "sweep": "sample", "sample": True}, "now")


# --------------------------------------------------------------------------------------------
# Charts, tables, the plan document, inline scripts
# --------------------------------------------------------------------------------------------
def test_chart_json_cannot_close_its_script():
    import altair as alt

    from capbook import charts

    names = [H.MODEL, H.TIER, *H.TENANTS.values(), "</SCRIPT >x", "<!--<script>"]
    df = pd.DataFrame({"name": names, "v": np.arange(len(names))})
    chart = alt.Chart(df).mark_bar().encode(x="name:N", y="v:Q", tooltip=["name:N"]).properties(title=H.SCRIPT)

    def html_of(chart):
        bundle = chart._repr_mimebundle_()
        return (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]

    with alt.renderers.enable("html"):             # Altair's own: the model name ends the script
        assert "inline script runs data" in " ".join(active_content(Page(html_of(chart))))
    charts.use_theme()
    assert alt.renderers.active == charts.RENDERER_NAME
    out = html_of(chart)
    page = Page(out)
    assert len(page.scripts) == 1 and not active_content(page), active_content(page)
    body = page.scripts[0][1]
    assert not re.search(r"</?script|<!--|\u2028", body, re.I)
    spec = json.loads(re.search(r"\}\)\((\{.*\}), \{", body, re.S).group(1))
    assert spec["title"] == H.SCRIPT
    assert sorted(spec["datasets"][next(iter(spec["datasets"]))], key=lambda r: r["v"])[0]["name"] == H.MODEL


def test_styler_tables_escape_values_and_labels():
    from capbook.charts import escaped_styler_html

    df = pd.DataFrame({"share" + H.IMG: [0.25, 0.5], "tenant": [H.TENANTS["mobile"], H.TIER]},
                      index=pd.Index([H.MODEL, "y"], name=H.SVG))
    raw = df.style.format({"share" + H.IMG: "{:.0%}"}).to_html()
    assert H.IMG in raw                       # pandas itself does not escape a Styler
    out = escaped_styler_html(df.style.format({"share" + H.IMG: "{:.0%}"}))
    page = Page(out)
    assert not active_content(page) and {t for t, _ in page.tags} <= {"style", "table", "thead", "tbody", "tr",
                                                                       "th", "td"}
    text = "".join(page.text)
    for s in (H.MODEL, H.SVG, H.IMG, H.TENANTS["mobile"], H.TIER, "25%", "50%"):
        assert s in text, s


def test_use_theme_shows_stylers_escaped_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    from capbook import charts

    shell = InteractiveShell.instance()
    try:
        charts.use_theme()
        data, _ = shell.display_formatter.format(pd.DataFrame({"t": [H.IMG]}).style)
        assert H.IMG not in data["text/html"] and html.escape(H.IMG) in data["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_the_plan_document_is_escaped_html(tmp_path):
    from capbook.plan.steps import capacity_plan
    from capbook.sweeps.sweep import load_sample_sweep
    from capbook.logs.requestlog import read_requests

    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 2 * 3600, 20_000))
    df = pd.DataFrame({
        "arrival_time": pd.Timestamp("2026-02-02", tz="UTC") + pd.to_timedelta(np.round(t * 1e6), unit="us"),
        "input_tokens": rng.integers(200, 3000, t.size), "output_tokens": rng.integers(20, 600, t.size),
        "model": H.MODEL, "tier": np.where(rng.random(t.size) < 0.8, "interactive", H.TIER),
        "tenant": rng.choice(list(H.TENANTS.values()), t.size), "status": "served"})
    log = tmp_path / ("[x](javascript:alert(2)) log[1] " + H.SVG + ".parquet")
    df.to_parquet(log, index=False)            # a name with [ ] is that file, not a glob pattern
    plan = capacity_plan(read_requests(log), load_sample_sweep("illustrative_chat"), simulate=False)
    assert not hasattr(plan, "_repr_markdown_")  # MyST would parse it, substitutions and all
    out = plan._repr_html_()
    page = Page(out)
    assert not active_content(page) and not page.scripts
    assert not {t for t, _ in page.tags} & {"svg", "img", "script", "a"}
    text = "".join(page.text)
    assert H.MODEL in text and str(log) in text


def test_inline_script_bodies_are_made_safe():
    import sys

    from sphinx.builders.html._assets import _JavaScript

    sys.path.insert(0, str(ROOT / "site" / "sphinx_ext"))
    try:
        import capbook_site
    finally:
        sys.path.remove(str(ROOT / "site" / "sphinx_ext"))
    state = {"state": {"m": {"outputs": [{"text/html": "</SCRIPT ><img src=x onerror=alert(6)><!--<script>" + H.MODEL}]}}}
    # myst-nb's own escaping: the exact text "</script>" only
    body = json.dumps(state).replace("</script>", r"<\/script>")
    scripts = [_JavaScript(None, type="application/vnd.jupyter.widget-state+json", body=body),
               _JavaScript("vega/vega.min.js"), _JavaScript(None, body='let s = "</script><!--";')]

    class App:
        class config:
            html_theme_options = {}

    ctx = {"script_files": scripts}
    capbook_site._tidy_scripts(App(), "p", "page.html", ctx, None)
    widget, asset, code = ctx["script_files"]
    assert asset is scripts[1]
    page = Page("".join(f'<script type="{js.attributes.get("type", "")}">{js.attributes["body"]}</script>'
                        for js in (widget, code)) + "<p>after</p>")
    assert len(page.scripts) == 2 and "".join(page.text) == "after" and not active_content(page)
    assert json.loads(page.scripts[0][1]) == json.loads(json.dumps(state))
    assert page.scripts[1][1] == r'let s = "\x3C/script>\x3C!--";'


# --------------------------------------------------------------------------------------------
# The one full hostile book build
# --------------------------------------------------------------------------------------------
def site_problems(out: Path) -> list[str]:
    """Every page of a built site, parsed: anything that could run, and payloads in the raw HTML."""
    problems = []
    for path in sorted(out.rglob("*.html")):
        rel = path.relative_to(out).as_posix()
        if rel.startswith(("_static/", "_sources/")):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        page = Page(text)
        problems += [f"{rel}: {p}" for p in active_content(page)]
        outside = re.sub(r"(<script\b[^>]*>).*?(</script)", r"\1\2", text, flags=re.S | re.I)
        for payload in ("<script>alert(", "<svg onload", "<img src=x onerror"):  # (as text they are escaped)
            if payload.lower() in outside.lower():
                problems.append(f"{rel}: unescaped {payload!r} in the page")
    return problems


def browser_problems(out: Path, shots: Path) -> tuple[list[str], int]:
    """Open every page in headless Chromium: dialogs opened and console errors naming the payloads."""
    import functools
    import http.server
    import threading

    from browser.conftest import CHROMIUM_ARGS, VIEWPORT, _QuietHandler, _Server, find_chromium, missing, site_pages
    from browser.test_site_browser import wait_for_charts

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package is not installed (pip install playwright; no `playwright install`)")
    chromium = find_chromium()
    if chromium is None:
        missing("Chromium is not installed: `apt-get install chromium`, or set CAPBOOK_CHROMIUM")
    httpd = _Server(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(out)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    problems, pages = [], site_pages(out)
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            try:
                for rel in pages + ["search.html?q=onerror"]:   # search shows snippets of the pages' text
                    page = browser.new_page(viewport=VIEWPORT)
                    dialogs, errors = [], []
                    page.on("dialog", lambda d, dialogs=dialogs: (dialogs.append(d.message), d.dismiss()))
                    page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                    page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                    page.goto(base + rel, wait_until="networkidle", timeout=60_000)
                    wait_for_charts(page)
                    page.wait_for_timeout(1000 if "?q=" in rel else 300)
                    if rel in ("book/intro.html", "book/know_your_traffic.html"):
                        page.screenshot(path=str(shots / (Path(rel).stem + ".png")), full_page=False)
                    page.close()
                    problems += [f"{rel}: dialog {m!r}" for m in dialogs]
                    problems += [f"{rel}: console error {e[:200]!r}" for e in errors
                                 if re.search(r"alert|onerror|onload|PWNED|script", e, re.I)]
            finally:
                browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    return problems, len(pages)


@pytest.mark.book_build
def test_one_full_hostile_book_build(tmp_path, marker, monkeypatch):
    from capbook.app.cli import main

    for k in ("CAPBOOK_REQUESTS", "CAPBOOK_SWEEP", "CAPBOOK_REQUESTS_FORMAT", "CAPBOOK_HISTORY", "CAPBOOK_PRICES"):
        monkeypatch.delenv(k, raising=False)
    paths = H.make_hostile_inputs(tmp_path / "in")
    out = tmp_path / "site"
    assert main(H.book_argv(paths, out)) == 0
    assert not marker.exists(), "a Jinja payload ran during the build"
    assert not list(tmp_path.rglob("PWNED*")) and not list(Path.cwd().glob("*PWNED*"))
    # what a capbook book site must hold (the checks of the former sample-data build)
    assert (out / "index.html").is_file()
    stamp = json.loads((out / ".capbook-book.json").read_text(encoding="utf-8"))
    assert set(stamp) >= {"requests", "sweep", "sample", "built"} and stamp["sample"] is False
    assert stamp["requests"] == str(paths["requests"].resolve())
    intro = "".join(Page((out / "book" / "intro.html").read_text(encoding="utf-8")).text)
    assert "The data this copy of the book was built from" in intro
    for what in ("requests", "sweep", "history", "prices"):
        assert str(paths[what].resolve()) in intro, f"the note does not name the {what} as written"
    assert "sort=True" in intro
    for p in chapter_files():
        page = (out / "book" / f"{p.stem}.html").read_text(encoding="utf-8")
        assert "Traceback" not in page, f"{p.stem} shows a traceback"
    plan_page = "".join(Page((out / "book" / "capstone_plan.html").read_text(encoding="utf-8")).text)
    assert "replicas" in plan_page and H.MODEL in plan_page     # the reader's model, as text
    traffic = "".join(Page((out / "book" / "know_your_traffic.html").read_text(encoding="utf-8")).text)
    assert H.TIER in traffic or H.MODEL in traffic
    # nothing from the data can run: every page parsed, then every page in a browser
    problems = site_problems(out)
    assert not problems, "\n".join(problems[:40])
    problems, n = browser_problems(out, tmp_path / "screenshots")
    assert n > 20 and not problems, "\n".join(problems[:40])
    assert not marker.exists()


def test_the_plan_markdown_carries_no_markup_from_names(tmp_path, marker, capsys):
    """plan.md is a document teams publish (a wiki, a repository): the model, tier, tenant and
    file names in it are escaped Markdown, so any CommonMark renderer (raw HTML on) shows them
    as text: no HTML, link, image or code span comes from them."""
    from markdown_it import MarkdownIt

    from capbook.app.cli import main

    paths = H.make_hostile_inputs(tmp_path / "in")
    out = tmp_path / "plan"
    code = main(["plan", "--requests", str(paths["requests"]), "--history", str(paths["history"]),
                 "--sweep", str(paths["sweep"]), "--tier", "all", "--no-sim", "--no-autoscale",
                 "--prices", str(paths["prices"]), "--gpu", "H100-SXM-80GB", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    text = (out / "plan.md").read_text(encoding="utf-8")
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(text)
    kinds = set()
    shown = []
    for t in tokens:
        kinds.add(t.type)
        for c in t.children or []:
            kinds.add(c.type)
            if c.type == "text":
                shown.append(c.content)
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "code_inline", "fence", "code_block"}, kinds
    shown = "".join(shown)
    for name in (H.TENANTS["agents"], H.TENANTS["web"], H.TENANTS["mobile"], H.MODEL):
        assert name.replace("\u2028", " ") in shown   # the names read as written
    assert not marker.exists()
