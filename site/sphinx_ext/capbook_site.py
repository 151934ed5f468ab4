"""Small Sphinx extension for the capbook site (loaded through ``sphinx.local_extensions``).

Jupyter Book 1.x always loads ``sphinx_thebe``, which puts two scripts on every page even when
live code is off: a configuration snippet naming thebe's CDN address and ``sphinx-thebe.js``. In
this build the snippet is added twice, and the second copy throws
``Identifier 'THEBE_JS_URL' has already been declared`` in the browser console. The book has no
live code (``launch_buttons.thebe: false``: it would contact a Binder server), so when thebe is
off this extension drops both scripts from every page, and in any case removes exact duplicate
inline scripts.
"""
from __future__ import annotations


def _thebe_enabled(app) -> bool:
    options = app.config.html_theme_options or {}
    return bool((options.get("launch_buttons") or {}).get("thebe"))


def _tidy_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    drop_thebe = not _thebe_enabled(app)
    kept, seen = [], set()
    for js in scripts:
        filename = getattr(js, "filename", None) or (js if isinstance(js, str) else "")
        body = (getattr(js, "attributes", None) or {}).get("body", "")
        if drop_thebe and ("THEBE_JS_URL" in body or str(filename).endswith("sphinx-thebe.js")):
            continue
        key = (str(filename), body)
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _tidy_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
