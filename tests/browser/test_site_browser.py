"""The built site in a real browser: offline, interactive with no kernel, no broken links.

Every page of ``_build/html`` is opened in headless Chromium from a local server. A page fails
on any request to a host other than that server, any console error or uncaught exception, a
chart container (Altair's ``div[id^="altair-viz"]`` / ``.vega-embed``) without a drawn svg or
canvas, a chart wider than its column, sideways scrolling at a 1280-pixel window, math that
MathJax did not typeset, an empty widget area or a widget without the "live only in a kernel"
note, a broken internal link, anchor or image, a console warning (Vega's "Conflicting scale
property" and the like), axis labels that overlap (also with each slider at either end), a
slider showing an unrounded value, and glued numbers drawn bold. A screenshot of each page is saved under
``_build/screenshots/``. Two more tests move a Vega slider and check the chart redraws, and
search the site with Sphinx's offline index.
"""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

CHART_SELECTOR = 'div[id^="altair-viz"], .vega-embed'
MAX_WAIT_MS = 20_000
#: Screenshots stop at this height (the API reference is about 100,000 px tall).
MAX_SHOT_PX = 16_000


# ----------------------------------------------------------------------------- helpers
class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)


class LinkChecker:
    """Fetches each local URL once (over HTTP, from the same server) and remembers the answer."""

    def __init__(self, base: str, root: Path):
        self.base, self.root = base, root
        self._status: dict[str, int] = {}
        self._ids: dict[str, set[str]] = {}

    def status(self, url: str) -> int:
        if url not in self._status:
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    self._status[url] = r.status
            except urllib.error.HTTPError as e:
                self._status[url] = e.code
        return self._status[url]

    def ids(self, url: str) -> set[str]:
        if url not in self._ids:
            path = self.root / unquote(urlsplit(url).path).lstrip("/")
            if path.is_dir():
                path = path / "index.html"
            parser = _Ids()
            parser.feed(path.read_text(encoding="utf-8", errors="replace"))
            self._ids[url] = parser.ids
        return self._ids[url]

    def problems(self, links: list[str], images: list[str]) -> list[str]:
        out = []
        for href in sorted(set(links)):
            url, frag = urldefrag(href)
            code = self.status(url)
            if code != 200:
                out.append(f"broken link {href} (HTTP {code})")
            elif frag and url.endswith((".html", "/")) and unquote(frag) not in self.ids(url):
                out.append(f"broken anchor {href} (no element with id '{unquote(frag)}')")
        for src in sorted(set(images)):
            code = self.status(urldefrag(src)[0])
            if code != 200:
                out.append(f"broken image {src} (HTTP {code})")
        return out


@pytest.fixture(scope="session")
def links(server, site) -> LinkChecker:
    return LinkChecker(server, site)


class Recorder:
    """Records, for one page, every request, console error and uncaught exception."""

    def __init__(self, page, base: str):
        self.base = base
        self.foreign: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        page.on("request", self._request)
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", self._response)
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught exception: {e}"))

    def _request(self, request):
        url = request.url
        if url.startswith(("data:", "blob:", "about:")):
            return
        if not url.startswith(self.base):
            self.foreign.append(url)

    def _response(self, response):
        if response.url.startswith(self.base) and response.status >= 400:
            self.failed.append(f"{response.url} (HTTP {response.status})")

    def _console(self, msg):
        # A warning is a fault too: Vega logs "Conflicting scale property", "Infinite extent" and
        # the like as warnings, each a chart that does not draw what its author meant.
        loc = msg.location or {}
        if msg.type == "warning" and msg.text.startswith("strict mode:") and "jupyter-widgets" in loc.get("url", ""):
            return  # ajv, inside the widget manager, on the widget schema it ships: not the page's
        if msg.type in ("error", "warning"):
            self.errors.append(f"console {msg.type}: {msg.text} "
                               f"[{loc.get('url', '')}:{loc.get('lineNumber', '')}]")

    def problems(self) -> list[str]:
        return ([f"request outside the site: {u}" for u in self.foreign]
                + [f"failed request: {u}" for u in self.failed]
                + self.errors)


#: Runs before the page's scripts: keeps the Vega view of every chart vega-embed draws, so the
#: tests can read the scene graph (the drawn labels and their boxes) of a canvas chart.
KEEP_VIEWS_JS = """(() => {
  window.__capbookViews = [];
  let wrapped;
  Object.defineProperty(window, 'vegaEmbed', {
    configurable: true,
    get() { return wrapped; },
    set(embed) {
      wrapped = embed && Object.assign(function (el, spec, opt) {
        const done = embed(el, spec, opt);
        if (done && done.then) done.then(r => window.__capbookViews.push(r.view));
        return done;
      }, embed);
    },
  });
})();"""

#: Axis and legend labels that overlap or touch (two drawn labels of one axis less than 4 px
#: apart: "1,8002,000"), and slider values shown with more than four decimals.
LABELS_REPORT_JS = r"""() => {
  const out = [];
  function walk(node, chart, fn) {
    if (!node) return;
    if (node.marktype) fn(node, chart);
    for (const it of node.items || []) walk(it, chart, fn);
  }
  (window.__capbookViews || []).forEach((view, i) => {
    walk(view.scenegraph().root, i + 1, (mark, chart) => {
      if (mark.role !== 'axis-label' && mark.role !== 'legend-label') return;
      const shown = (mark.items || []).filter(t => t.text !== '' && t.text != null
          && (t.opacity === undefined || t.opacity > 0) && t.bounds && !t.bounds.empty());
      for (let a = 0; a < shown.length; a++) for (let b = a + 1; b < shown.length; b++) {
        const p = shown[a].bounds, q = shown[b].bounds;
        const dx = Math.min(p.x2, q.x2) - Math.max(p.x1, q.x1);
        const dy = Math.min(p.y2, q.y2) - Math.max(p.y1, q.y1);
        if (dx > -4 && dy > 1) out.push(`chart #${chart}: ${mark.role}s "${shown[a].text}" and "${shown[b].text}" overlap or touch`);
      }
    });
  });
  document.querySelectorAll('.vega-bind label > span:not(.vega-bind-name), .vega-bind output').forEach(v => {
    if (/\d\.\d{5,}/.test(v.textContent)) out.push(`slider shows an unrounded value ${v.textContent.trim()}`);
  });
  return out;
}"""

#: Glued values (myst-nb's span.pasted-text) read as the text around them, not in bold.
GLUE_WEIGHT_JS = """() => Array.from(document.querySelectorAll('p span.pasted-text, li span.pasted-text'))
  .filter(s => getComputedStyle(s).fontWeight !== getComputedStyle(s.parentElement).fontWeight)
  .map(s => s.textContent.slice(0, 40))"""


def open_page(context, base: str, path: str):
    page = context.new_page()
    page.add_init_script(KEEP_VIEWS_JS)
    rec = Recorder(page, base)
    page.goto(base + path, wait_until="networkidle", timeout=60_000)
    return page, rec


def wait_for_charts(page) -> None:
    """Wait until every chart container holds a drawn svg or canvas (or time runs out)."""
    try:
        page.wait_for_function(
            """(sel) => Array.from(document.querySelectorAll(sel)).every(el => {
                   const g = el.querySelector('canvas, svg.marks, svg[class*="marks"]');
                   if (!g) return false;
                   const r = g.getBoundingClientRect();
                   return r.width > 0 && r.height > 0;
               })""",
            arg=CHART_SELECTOR,
            timeout=MAX_WAIT_MS,
        )
    except Exception:  # reported below, container by container
        pass


CHART_REPORT_JS = """(sel) => {
  const col = document.querySelector('article.bd-article') || document.querySelector('main');
  const colRight = col ? col.getBoundingClientRect().right : window.innerWidth;
  return Array.from(document.querySelectorAll(sel)).map((el, i) => {
    const g = el.querySelector('canvas, svg.marks, svg[class*="marks"]');
    const r = g ? g.getBoundingClientRect() : null;
    const out = el.closest('.cell_output, .output') || el.parentElement;
    const err = el.querySelector('.error');
    return {
      name: el.id || ('chart #' + (i + 1)),
      drawn: !!g && r.width > 0 && r.height > 0,
      error: err ? err.textContent.slice(0, 200) : null,
      right: r ? r.right : 0,
      colRight: colRight,
      scrolls: out ? out.scrollWidth > out.clientWidth + 1 : false,
    };
  });
}"""

WIDGET_REPORT_JS = """() => {
  const views = Array.from(document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]'));
  function near(el, n, dir) {
    let s = el, text = '';
    for (let i = 0; i < n && s; i++) { s = s[dir]; if (s) text += ' ' + s.textContent; }
    return text;
  }
  return views.map((v, i) => {
    const area = v.previousElementSibling;
    const rendered = !!area && area.classList.contains('widget-subarea');
    const box = rendered ? area.getBoundingClientRect() : null;
    const outputs = rendered ? Array.from(area.querySelectorAll('.widget-output')) : [];
    const cell = v.closest('.cell') || v.parentElement;
    const note = near(cell, 3, 'previousElementSibling') + near(cell, 3, 'nextElementSibling');
    return {
      index: i + 1,
      rendered: rendered,
      height: box ? box.height : 0,
      controls: rendered ? area.querySelectorAll('.jupyter-widgets, input, select, button, [role=slider]').length : 0,
      emptyOutputs: outputs.filter(o => o.textContent.trim() === '' && !o.querySelector('img, svg, canvas')).length,
      kernelNote: /kernel/i.test(note),
    };
  });
}"""


def page_problems(page, rec: Recorder, links: LinkChecker) -> list[str]:
    problems: list[str] = []
    wait_for_charts(page)
    for c in page.evaluate(CHART_REPORT_JS, CHART_SELECTOR):
        if not c["drawn"]:
            problems.append(f"chart {c['name']} has no rendered svg or canvas"
                            + (f": {c['error']}" if c["error"] else ""))
        elif c["right"] > c["colRight"] + 1:
            problems.append(f"chart {c['name']} is wider than the content column "
                            f"(right edge {c['right']:.0f} px > {c['colRight']:.0f} px)")
        elif c["scrolls"]:
            problems.append(f"chart {c['name']} (with its menu) is wider than its output area, "
                            "which scrolls sideways")
    problems += page.evaluate(LABELS_REPORT_JS)
    bold = page.evaluate(GLUE_WEIGHT_JS)
    if bold:
        problems.append(f"{len(bold)} glued value(s) drawn in another weight than their sentence, "
                        f"e.g. {bold[0]!r}")
    # Math: every page with TeX must have been typeset by the vendored MathJax.
    if page.locator("span.math, div.math").count():
        try:
            # attached, not visible: the first formula may sit in a folded solution
            page.wait_for_selector("mjx-container", state="attached", timeout=MAX_WAIT_MS)
        except Exception:
            problems.append("page has math but MathJax typeset none of it")
    for w in page.evaluate(WIDGET_REPORT_JS):
        if not w["rendered"] or w["height"] < 10 or w["controls"] == 0:
            problems.append(f"widget #{w['index']} has no static rendering (empty widget area)")
        if w["emptyOutputs"]:
            problems.append(f"widget #{w['index']} shows {w['emptyOutputs']} empty output area(s)")
        if not w["kernelNote"]:
            problems.append(f"widget #{w['index']} has no note nearby saying it is live only in a kernel")
    # Exercises' solutions and quiz answers stay folded until the reader opens them.
    folded = page.evaluate("""() => ({
      solutions: Array.from(document.querySelectorAll('div.solution')).filter(el =>
        Array.from(el.children).some(c => !c.classList.contains('admonition-title')
                                          && c.getBoundingClientRect().height > 0)).length,
      dropdowns: document.querySelectorAll('details.sd-dropdown[open]').length,
    })""")
    if folded["solutions"]:
        problems.append(f"{folded['solutions']} exercise solution(s) shown unfolded on page load")
    if folded["dropdowns"]:
        problems.append(f"{folded['dropdowns']} dropdown(s) (quiz answers) open on page load")
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    if overflow > 1:
        problems.append(f"page scrolls sideways by {overflow} px at a {page.viewport_size['width']} px window")
    hrefs = page.evaluate("() => Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    imgs = page.evaluate("""() => Array.from(document.images, i => ({src: i.currentSrc || i.src,
                              ok: i.complete && i.naturalWidth > 0}))""")
    local = [h for h in hrefs if h.startswith(links.base)]
    problems += links.problems(local, [i["src"] for i in imgs if i["src"].startswith(links.base)])
    problems += [f"image did not load: {i['src']}" for i in imgs if not i["ok"] and i["src"]]
    return problems


def slider_extremes_problems(page) -> list[str]:
    """Labels that overlap, or slider values unrounded, with a slider at either end of its range."""
    found: list[str] = []
    sliders = page.locator(".vega-bindings input[type=range]")
    for i in range(sliders.count()):
        for key in ("End", "Home"):
            sliders.nth(i).focus()
            page.keyboard.press(key)
            page.wait_for_timeout(250)  # Vega redraws on the next animation frame
            found += [f"{p} (slider {i + 1} at its {'maximum' if key == 'End' else 'minimum'})"
                      for p in page.evaluate(LABELS_REPORT_JS)]
    return list(dict.fromkeys(found))


def screenshot_name(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "__", path.removesuffix(".html")) + ".png"


# ----------------------------------------------------------------------------- tests
def launch_problems(page, page_path: str, site: Path) -> list[str]:
    """A chapter (a notebook) offers JupyterLab on Binder and its .ipynb for download."""
    source = site / "_sources" / (page_path.removesuffix(".html") + ".ipynb")
    if not source.is_file():
        return []
    hrefs = page.evaluate("() => Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    notebook = page_path.removesuffix(".html") + ".ipynb"
    problems = []
    if not any("mybinder.org/v2/" in h and f"urlpath=lab/tree/{notebook}" in h for h in hrefs):
        problems.append(f"no Binder launch button opening {notebook} in JupyterLab")
    if not any(h.endswith("_sources/" + notebook) for h in hrefs):
        problems.append(f"no download link for {notebook}")
    return problems


def test_page(page_path, browser_context, server, links, screenshot_dir, site):
    page, rec = open_page(browser_context, server, page_path)
    try:
        problems = page_problems(page, rec, links) + launch_problems(page, page_path, site)
        problems += [p for p in slider_extremes_problems(page) if p.split(" (slider")[0] not in problems]
        height = page.evaluate("() => document.documentElement.scrollHeight")
        clip = None if height <= MAX_SHOT_PX else {
            "x": 0, "y": 0, "width": page.viewport_size["width"], "height": MAX_SHOT_PX}
        page.screenshot(path=str(screenshot_dir / screenshot_name(page_path)), full_page=True,
                        clip=clip, timeout=60_000)
        problems += rec.problems()
    finally:
        page.close()
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)


def _first_page_with_slider(site: Path, pages: list[str]) -> str | None:
    for path in pages:
        if re.search(r'"input":\s*"range"', (site / path).read_text(encoding="utf-8", errors="replace")):
            return path
    return None


SNAPSHOT_JS = """(input) => {
  const chart = input.closest('.vega-embed');
  if (!chart) return null;
  const c = chart.querySelector('canvas');
  if (c) return c.toDataURL();
  const s = chart.querySelector('svg');
  return s ? s.outerHTML : null;
}"""


def test_vega_slider_redraws_chart(browser_context, server, site, pages):
    path = _first_page_with_slider(site, pages)
    if path is None:
        pytest.fail("no page of the site has a chart with a Vega-Lite slider "
                    "(alt.param(bind=alt.binding_range(...))); the book needs at least one")
    page, rec = open_page(browser_context, server, path)
    try:
        wait_for_charts(page)
        slider = page.locator(".vega-bindings input[type=range]").first
        slider.wait_for(state="visible", timeout=MAX_WAIT_MS)
        before = slider.evaluate(SNAPSHOT_JS)
        assert before, f"{path}: the slider is not inside a drawn chart"
        value_before = slider.input_value()
        slider.focus()
        page.keyboard.press("End")  # a real key press: moves the thumb to the maximum
        value_after = slider.input_value()
        assert value_after != value_before, f"{path}: pressing End did not move the slider"
        page.wait_for_function(
            "([input, before]) => { const c = input.closest('.vega-embed');"
            " const cv = c.querySelector('canvas');"
            " const now = cv ? cv.toDataURL() : c.querySelector('svg').outerHTML;"
            " return now !== before; }",
            arg=[slider.element_handle(), before],
            timeout=MAX_WAIT_MS,
        )
        assert not rec.problems(), "\n".join(rec.problems())
    finally:
        page.close()


def test_search_works_offline(browser_context, server, site):
    """Sphinx's own index (searchindex.js) answers a query with no server-side search."""
    if not (site / "search.html").is_file():
        pytest.fail("the site has no search.html")
    page, rec = open_page(browser_context, server, "search.html?q=Erlang")
    try:
        results = page.locator("#search-results ul.search li")
        results.first.wait_for(timeout=MAX_WAIT_MS)
        hits = results.evaluate_all("els => els.map(e => e.querySelector('a').href)")
        assert any("glossary" in h for h in hits), f"searching 'Erlang' did not find the glossary: {hits}"
        assert all(h.startswith(server) for h in hits)
        page.goto(server + "search.html?q=zqxjvbwk", wait_until="networkidle")
        page.wait_for_function(
            "() => /did not match|no documents|0 (page|result)/i.test("
            "document.querySelector('#search-results')?.textContent || '')",
            timeout=MAX_WAIT_MS,
        )
        assert page.locator("#search-results ul.search li").count() == 0
        assert not rec.problems(), "\n".join(rec.problems())
    finally:
        page.close()
