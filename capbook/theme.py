"""One chart theme and the chart helpers used throughout the book (re-exported by ``capbook.charts``).

Every chart in the book is an Altair chart built here or styled by :func:`use_theme`, so the
book looks like one book. The palette is colour-blind safe (Okabe–Ito).

Names from a reader's data (models, tiers, tenants, file names) reach the page inside a
chart's data, its titles and its tooltips, and inside tables. :func:`use_theme` makes both
inert: charts are drawn by the renderer :data:`RENDERER_NAME`, which writes the chart's JSON
into the page's inline ``<script>`` with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
(:func:`script_safe_json`), so a name holding ``</script>`` stays text; and pandas ``Styler``
tables are shown with their values and labels HTML-escaped (:func:`escaped_styler_html`).
"""
from __future__ import annotations

import html
import json

import altair as alt

__all__ = ["PALETTE", "THEME_NAME", "RENDERER_NAME", "theme_config", "use_theme", "slider", "WIDTH", "HEIGHT",
           "script_safe_json", "escaped_styler_html"]

#: Okabe–Ito colour-blind-safe palette, in the order series are coloured.
PALETTE = [
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # green
    "#CC79A7",  # purple
    "#E69F00",  # orange
    "#56B4E9",  # sky
    "#F0E442",  # yellow
    "#000000",  # black
]

#: Default chart size in pixels, chosen to fit the book's content column without scrolling
#: (the plot plus axes stays under about 650 px, leaving room for the chart's "..." menu).
WIDTH = 520
HEIGHT = 300

THEME_NAME = "capbook"
#: The Altair renderer :func:`use_theme` enables: Altair's HTML renderer with script-safe JSON.
RENDERER_NAME = "capbook"

_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def theme_config() -> dict:
    """Return the Vega-Lite ``config`` dictionary of the capbook theme."""
    return {
        "config": {
            "view": {"continuousWidth": WIDTH, "continuousHeight": HEIGHT, "stroke": None},
            "font": _FONT,
            "background": "white",
            "range": {"category": PALETTE},
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 13,
                "titleFontWeight": "normal",
                "gridColor": "#e6e6e6",
                "domainColor": "#888",
                "tickColor": "#888",
            },
            # Legends go under the plot, three entries to a row: a legend on the right adds up
            # to 250 px and pushed charts past the book's content column (about 690 px at a
            # 1280-px window; the browser test in tests/browser checks every chart fits).
            "legend": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "orient": "bottom",
                "direction": "horizontal",
                "columns": 3,
                "labelLimit": 160,
            },
            "title": {"fontSize": 15, "anchor": "start", "fontWeight": "bold"},
            "line": {"strokeWidth": 2.5},
            "point": {"size": 50, "filled": True},
            "bar": {"color": PALETTE[0]},
            "rule": {"color": "#444"},
        }
    }


@alt.theme.register(THEME_NAME, enable=False)
def _capbook_theme() -> alt.theme.ThemeConfig:  # pragma: no cover - exercised via use_theme
    return theme_config()  # type: ignore[return-value]


#: What :func:`script_safe_json` writes for each character that could end or bend a script.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_safe_json(text: str) -> str:
    r"""JSON text made safe inside an HTML ``<script>``: ``<``, ``>``, ``&``, U+2028, U+2029 as ``\uXXXX``.

    In JSON these characters occur only inside strings, where the escape means the same
    character, so the value is unchanged; but no ``</script>``, ``<!--`` or line separator is
    left for the HTML parser (or an old JavaScript one) to act on.

    Examples
    --------
    >>> script_safe_json('{"model": "x</script><script>alert(1)</script>"}')
    '{"model": "x\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e"}'
    >>> import json; json.loads(script_safe_json(json.dumps(["a<b & c>d\u2028"]))) == ["a<b & c>d\u2028"]
    True
    """
    for ch, esc in _SCRIPT_ESCAPES.items():
        text = text.replace(ch, esc)
    return text


class _ScriptSafeEncoder(json.JSONEncoder):
    """``json.dumps(spec, cls=_ScriptSafeEncoder)``: a chart's JSON as :func:`script_safe_json` writes it."""

    def encode(self, o):
        return script_safe_json(super().encode(o))


def _register_renderer() -> None:
    from altair.utils.display import HTMLRenderer

    if RENDERER_NAME in alt.renderers.names():
        return
    alt.renderers.register(RENDERER_NAME, HTMLRenderer(
        mode="vega-lite", template="universal", vega_version=alt.VEGA_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION, vegalite_version=alt.VEGALITE_VERSION,
        json_kwds={"cls": _ScriptSafeEncoder}))


_register_renderer()


def escaped_styler_html(styler) -> str:
    """The HTML of a pandas ``Styler`` with every value, index and column label HTML-escaped.

    pandas does not escape a ``Styler``'s cells or labels (``to_html`` of a DataFrame does): a
    tenant named ``<img src=x onerror=...>`` would become an element. Each formatter the
    chapter set (``.format({"utilisation": "{:.1%}"})``) still formats; its text is then escaped.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"share": [0.25]}, index=pd.Index(["<b>web</b>"], name="tenant"))
    >>> out = escaped_styler_html(df.style.format({"share": "{:.0%}"}))
    >>> "&lt;b&gt;web&lt;/b&gt;" in out and "<b>" not in out and "25%" in out
    True
    """
    s = styler._copy(deepcopy=True)
    for attr in ("_display_funcs", "_display_funcs_index", "_display_funcs_columns",
                 "_display_funcs_index_names", "_display_funcs_column_names"):
        funcs = getattr(s, attr)
        default = funcs.default_factory
        for key, f in list(funcs.items()):
            funcs[key] = _escaping(f)
        funcs.default_factory = (lambda d=default: _escaping(d()))
    return s.to_html()


def _escaping(f):
    return lambda value: html.escape(str(f(value)))


def use_theme() -> None:
    """Prepare a chapter's display: the capbook Altair theme, safe HTML and plain numbers.

    Enables the capbook theme and the renderer :data:`RENDERER_NAME` (charts' JSON script-safe)
    for every chart drawn afterwards and, inside IPython, shows pandas ``Styler`` tables with
    escaped values and labels (:func:`escaped_styler_html`) and numpy scalars as plain numbers
    (``0.9`` rather than ``np.float64(0.9)``). The latter matters for myst-nb ``glue``: a glued
    ``np.float64`` would otherwise reach the page as text that the ``{glue:text}`name:.2f```
    formatter cannot parse.
    """
    alt.theme.enable(THEME_NAME)
    alt.renderers.enable(RENDERER_NAME)
    _plain_numpy_scalars()
    _escaped_stylers()


def _escaped_stylers() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        return
    ip = get_ipython()
    if ip is None:
        return
    ip.display_formatter.formatters["text/html"].for_type_by_name(
        "pandas.io.formats.style", "Styler", escaped_styler_html)


def _plain_numpy_scalars() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        return
    ip = get_ipython()
    if ip is None:
        return
    import numpy as np

    fmt = ip.display_formatter.formatters["text/plain"]
    # the pretty printer looks a printer up by the exact type first: register each scalar type
    for t in (np.float16, np.float32, np.float64, np.longdouble):
        fmt.for_type(t, lambda obj, p, cycle: p.text(repr(float(obj))))
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        fmt.for_type(t, lambda obj, p, cycle: p.text(repr(int(obj))))
    fmt.for_type(np.bool_, lambda obj, p, cycle: p.text(repr(bool(obj))))


def slider(name: str, value: float, min: float, max: float, step: float, label: str) -> alt.Parameter:
    """A Vega-Lite parameter bound to a range slider (interactive on the static site).

    Parameters
    ----------
    name : str
        Parameter name used in Vega expressions.
    value, min, max, step : float
        Initial value and slider range, in the units of ``label``.
    label : str
        Text shown beside the slider (state the unit).
    """
    return alt.param(
        name=name, value=value, bind=alt.binding_range(min=min, max=max, step=step, name=label + " ")
    )
