"""Small Sphinx extension for the capbook site (loaded through ``sphinx.local_extensions``).

Jupyter Book 1.x always loads ``sphinx_thebe``, which puts two scripts on every page even when
live code is off: a configuration snippet naming thebe's CDN address and ``sphinx-thebe.js``. In
this build the snippet is added twice, and the second copy throws
``Identifier 'THEBE_JS_URL' has already been declared`` in the browser console. The book has no
live code (``launch_buttons.thebe: false``: it would contact a Binder server), so when thebe is
off this extension drops both scripts from every page, and in any case removes exact duplicate
inline scripts.

It also makes the body of every inline script inert to the HTML parser (:func:`safe_script_body`).
myst-nb writes the ipywidgets state of a chapter, which holds the chapter's widget outputs and so
names from a reader's data, as JSON in ``<script type="application/vnd.jupyter.widget-state+json">``
and escapes only the exact text ``</script>``: ``</SCRIPT>``, ``</script >`` or ``<!--`` would
still end the script early or swallow the next one, and what follows would run.
"""
from __future__ import annotations

import re

#: Inline script types whose body is JSON (``application/json``, ``…+json``).
_JSON_TYPE = re.compile(r"^application/(.+\+)?json$", re.IGNORECASE)
#: In a script of code: the sequences the HTML parser acts on inside a script element.
_CODE_DANGER = re.compile(r"<(?=/script|!--|script)", re.IGNORECASE)


def safe_script_body(body: str, script_type: str | None) -> str:
    """An inline script's body that cannot end its ``<script>`` element or open another.

    A JSON body (``type`` ``application/json`` or ``application/…+json``) gets ``<``, ``>``,
    ``&``, U+2028 and U+2029 written as ``\\uXXXX`` (:func:`capbook.charts.script_safe_json`, as
    for the charts): JSON has these characters only inside strings, where the escape reads as
    the same character. In code, ``<`` before ``/script``,
    ``script`` or ``!--`` becomes ``\\x3C`` (such text can only sit in a string literal).

    Examples
    --------
    >>> safe_script_body('{"a": "</SCRIPT ><img src=x onerror=alert(1)>"}', "application/vnd.jupyter.widget-state+json")
    '{"a": "\\\\u003c/SCRIPT \\\\u003e\\\\u003cimg src=x onerror=alert(1)\\\\u003e"}'
    >>> safe_script_body('var s = "</script><!--";', None)
    'var s = "\\\\x3C/script>\\\\x3C!--";'
    """
    if script_type and _JSON_TYPE.match(script_type.strip()):
        from capbook.charts import script_safe_json

        return script_safe_json(body)
    return _CODE_DANGER.sub(r"\\x3C", body)


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
        if body:
            js = _with_body(js, safe_script_body(body, js.attributes.get("type")))
        kept.append(js)
    context["script_files"] = kept


def _with_body(js, body: str):
    if body == js.attributes.get("body"):
        return js
    return type(js)(js.filename, priority=js.priority, **{**js.attributes, "body": body})


def setup(app):
    app.connect("html-page-context", _tidy_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
