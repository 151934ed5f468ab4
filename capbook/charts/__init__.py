"""One chart theme and the chart helpers used throughout the book.

Every chart in the book is an Altair chart built here or styled by :func:`use_theme`, so the
book looks like one book. The palette is colour-blind safe (Okabe–Ito).
"""
from __future__ import annotations

import altair as alt

__all__ = ["PALETTE", "THEME_NAME", "theme_config", "use_theme", "slider", "WIDTH", "HEIGHT"]

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


def use_theme() -> None:
    """Prepare a chapter's display: the capbook Altair theme and plain numbers.

    Enables the capbook theme for every chart drawn afterwards and, inside IPython, shows numpy
    scalars as plain numbers (``0.9`` rather than ``np.float64(0.9)``). The latter matters for
    myst-nb ``glue``: a glued ``np.float64`` would otherwise reach the page as text that the
    ``{glue:text}`name:.2f``` formatter cannot parse.
    """
    alt.theme.enable(THEME_NAME)
    _plain_numpy_scalars()


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
