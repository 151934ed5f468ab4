"""Fast checks of the site configuration that need no browser and no build.

The browser tests (``tests/browser``) prove the built pages load nothing from outside; these
catch the usual causes early: a CDN address in ``_config.yml``, an asset path that does not
exist, npm pins that disagree with the Vega versions Altair's charts ask for, a citation key
or glossary term a chapter uses but nobody defined.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CDN_HOSTS = ("jsdelivr", "unpkg", "cdnjs", "googleapis", "gstatic", "fontawesome.com",
             "bootstrapcdn", "jquery.com", "mathjax.org", "polyfill.io", "require.js")


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


@pytest.fixture(scope="module")
def sphinx_config(config) -> dict:
    return config["sphinx"]["config"]


def _assets(sphinx_config) -> list[str]:
    js = [f if isinstance(f, str) else f[0] for f in sphinx_config.get("html_js_files", [])]
    css = [f if isinstance(f, str) else f[0] for f in sphinx_config.get("html_css_files", [])]
    return js + css + [sphinx_config["mathjax_path"]] + list(sphinx_config.get("nb_ipywidgets_js", {}))


def test_config_names_no_cdn(config, sphinx_config):
    text = (ROOT / "_config.yml").read_text().lower()
    for host in CDN_HOSTS:
        assert host not in text, f"_config.yml mentions {host!r}: the site must serve its own assets"
    for asset in _assets(sphinx_config):
        assert "//" not in asset and not asset.startswith("/"), (
            f"_config.yml loads {asset!r} from outside the site; serve it from site/vendor")
    assert "mathjax_path" in sphinx_config and "nb_ipywidgets_js" in sphinx_config, (
        "without mathjax_path and nb_ipywidgets_js Sphinx and myst-nb fall back to their CDN defaults")


def test_assets_exist_in_the_static_paths(sphinx_config):
    static = [ROOT / p for p in sphinx_config["html_static_path"]]
    assert all(not p.name == "_static" for p in static), "a root _static/ adds a script tag per .js file"
    assert not (ROOT / "_static").exists(), "a root _static/ folder makes Jupyter Book load every .js in it"
    vendored = (ROOT / "site" / "vendor" / "VERSIONS.json").is_file()
    for asset in _assets(sphinx_config):
        found = [p / asset for p in static if (p / asset).is_file()]
        if not found and not vendored:
            continue  # npm assets appear after `make setup`; capbook's own files are always there
        assert found, f"{asset} is in _config.yml but in none of {sphinx_config['html_static_path']}"
    for own in ("site/js/capbook-mathjax-compat.js", "site/css/capbook.css", "site/favicon.svg",
                "site/extra/favicon.ico", "site/sphinx_ext/capbook_site.py"):
        assert (ROOT / own).is_file(), f"{own} is missing"


def test_npm_pins_match_altair():
    from altair.vegalite.v6 import display

    pkg = json.loads((ROOT / "site" / "package.json").read_text())["dependencies"]
    lock = json.loads((ROOT / "site" / "package-lock.json").read_text())["packages"]
    for name, version in pkg.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"site/package.json: pin {name} exactly, not {version!r}"
        assert lock[f"node_modules/{name}"]["version"] == version, (
            f"site/package-lock.json has {name} {lock[f'node_modules/{name}']['version']}, "
            f"package.json pins {version}: run `npm install` in site/")
    # Altair gives a major ("6") for vega and vega-embed, an exact version for vega-lite.
    for name, want in [("vega", display.VEGA_VERSION), ("vega-lite", display.VEGALITE_VERSION),
                       ("vega-embed", display.VEGAEMBED_VERSION)]:
        have = pkg[name]
        assert have == want or have.startswith(want + "."), (
            f"site/package.json pins {name} {have} but altair {display.VEGALITE_VERSION} charts ask for {want}")
    versions = ROOT / "site" / "vendor" / "VERSIONS.json"
    if versions.is_file():
        assert json.loads(versions.read_text()) == pkg, "site/vendor is stale: run tools/vendor_assets.py"
        loader = (ROOT / "site" / "vendor" / "vega" / "capbook-vega.js").read_text()
        for want in (display.VEGA_VERSION, display.VEGALITE_VERSION, display.VEGAEMBED_VERSION):
            assert f'"{want}"' in loader


def test_launch_buttons_are_links_and_thebe_is_off(config):
    lb = config["launch_buttons"]
    assert not lb.get("thebe"), "thebe (live code) would load thebe and contact Binder from the page"
    assert lb["notebook_interface"] == "jupyterlab"
    for key in ("binderhub_url", "colab_url", "jupyterhub_url"):
        url = lb.get(key) or ""
        assert url == "" or url.startswith("https://"), f"launch_buttons.{key} = {url!r}"
    assert lb.get("binderhub_url"), "the book promises a Binder launch button"
    assert config["html"]["use_download_button"] and config["html"]["use_repository_button"]


# ----------------------------------------------------------------------------- book sources
def _book_markdown() -> dict[str, str]:
    """Markdown text of every page in book/: .md files and markdown cells of notebooks."""
    out = {}
    for path in sorted(BOOK.glob("*.md")):
        out[path.name] = path.read_text()
    for path in sorted(BOOK.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        out[path.name] = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    return out


def _bib():
    from pybtex.database import parse_file

    return parse_file(str(BOOK / "references.bib"))


def test_bibliography_entries_are_complete():
    bib = _bib()
    assert len(bib.entries) >= 15
    for key, e in bib.entries.items():
        f = {k.lower(): v for k, v in e.fields.items()}
        assert e.persons.get("author"), f"{key}: no author"
        assert "title" in f and re.fullmatch(r"(18|19|20)\d\d", f.get("year", "")), f"{key}: title or year"
        where = {"journal", "booktitle", "publisher", "eprint", "howpublished"} & set(f)
        assert where, f"{key}: say where it was published (journal, booktitle, publisher or arXiv eprint)"
        if "doi" in f:
            assert re.fullmatch(r"10\.\d{4,9}/\S+", f["doi"]), f"{key}: malformed DOI {f['doi']!r}"
        if "eprint" in f:
            assert re.fullmatch(r"\d{4}\.\d{4,5}", f["eprint"]), f"{key}: malformed arXiv id {f['eprint']!r}"


def test_every_cited_key_is_in_the_bibliography():
    keys = {k.lower() for k in _bib().entries}
    cite = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
    missing = [(page, k.strip()) for page, text in _book_markdown().items()
               for m in cite.finditer(text) for k in m.group(1).split(",")
               if k.strip().lower() not in keys]
    assert not missing, f"citations with no entry in book/references.bib: {missing}"


def glossary_terms() -> set[str]:
    text = (BOOK / "glossary.md").read_text()
    terms = set()
    for block in re.findall(r"```\{glossary\}\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.strip() and not line[0].isspace() and not line.startswith(":"):
                terms.add(line.strip().lower())
    return terms


def test_glossary_covers_the_book_notation():
    terms = glossary_terms()
    for must in ["λ", "μ", "c", "a", "ρ", "s", "t", "ttft", "tpot", "itl", "goodput", "ca²", "cs²",
                 "pinball loss", "erlang b", "erlang c", "slot", "offered load", "p90", "headroom",
                 "little's law", "allen–cunneen approximation", "coverage", "backtest"]:
        assert must in terms, f"the glossary has no entry {must!r}"


def test_every_term_link_has_a_glossary_entry():
    terms = glossary_terms()
    role = re.compile(r"\{term\}`([^`]+)`")
    missing = []
    for page, text in _book_markdown().items():
        for m in role.finditer(text):
            target = m.group(1)
            target = re.search(r"<([^>]+)>\s*$", target).group(1) if target.rstrip().endswith(">") else target
            if target.strip().lower() not in terms:
                missing.append((page, target))
    assert not missing, f"{{term}} links to entries book/glossary.md does not define: {missing}"


def test_toc_ends_with_the_reference_part():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    last = toc["parts"][-1]
    assert last["caption"] == "Reference"
    assert [c["file"] for c in last["chapters"]] == ["book/glossary", "book/bibliography", "book/api"]


def _time_to_learn(chapter: str) -> int:
    """Minutes a chapter states as its "Time to learn" (Prerequisites section)."""
    path = ROOT / f"{chapter}.ipynb"
    if not path.is_file():
        path = ROOT / f"{chapter}.md"
    text = path.read_text()
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
    m = re.search(r"Time to learn\W*(?:about\s*)?(\d+)\s*min", text, flags=re.I)
    assert m, f"{path.name}: no 'Time to learn: N minutes' in its Prerequisites"
    return int(m.group(1))


def test_intro_table_lists_every_part_with_its_time():
    """The landing page's table: one row per part, in _toc.yml order, time = sum of its chapters."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parts = [p for p in toc["parts"] if p["caption"] != "Reference"]
    intro = (BOOK / "intro.md").read_text()
    table = intro.split("| Part | What it teaches | Time |", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in table.strip().splitlines()[1:]]
    assert [r[0] for r in rows] == [p["caption"] for p in parts], (
        "book/intro.md: the parts table must have one row per part of _toc.yml, in order")
    for (caption, _, time), part in zip(rows, parts):
        want = sum(_time_to_learn(c["file"]) for c in part["chapters"])
        assert time == f"{want} minutes", (
            f"book/intro.md: part {caption!r} says {time!r}; its chapters' times to learn add up "
            f"to {want} minutes")


def test_toc_numbers_the_chapters():
    """With ``parts:``, sphinx-external-toc ignores root ``options:``; numbering needs ``defaults:``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    assert "options" not in toc, "_toc.yml: root `options:` is ignored when the book has parts; use `defaults:`"
    default = toc.get("defaults", {}).get("numbered", False)
    for part in toc["parts"][:-1]:
        assert part.get("numbered", default), f"part {part['caption']!r} is not numbered"
    assert toc["parts"][-1].get("numbered") is False, "the Reference part should not be numbered"


def _documented_modules() -> set[str]:
    api = (BOOK / "api.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\.\. automodule:: ([\w.]+)", api, flags=re.M))


def test_every_python_reference_resolves_to_a_documented_object():
    """A ``{py:mod}``, ``{py:func}`` or ``{py:class}`` link in a chapter must name an object that
    exists, in a module book/api.md documents: otherwise ``jupyter-book build -n`` warns (and -W
    fails) only at the end of the site build, half an hour into CI."""
    import importlib

    documented = _documented_modules()
    role = re.compile(r"\{py:(mod|func|class|meth|attr|data)\}`~?([\w.]+)`")
    bad = []
    for page, text in _book_markdown().items():
        for m in role.finditer(text):
            kind, target = m.groups()
            if kind == "mod":
                if target not in documented:
                    bad.append((page, target, "the module is not in book/api.md"))
                    continue
                module, attrs = target, []
            else:
                parts = target.split(".")
                for i in range(len(parts) - 1, 0, -1):
                    if ".".join(parts[:i]) in documented:
                        module, attrs = ".".join(parts[:i]), parts[i:]
                        break
                else:
                    bad.append((page, target, "its module is not in book/api.md"))
                    continue
            obj = importlib.import_module(module)
            for a in attrs:
                if not hasattr(obj, a):
                    bad.append((page, target, f"{module} has no {'.'.join(attrs)}"))
                    break
                obj = getattr(obj, a)
    assert not bad, f"Python references the site build cannot resolve: {bad}"
