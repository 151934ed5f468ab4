"""The chart theme and the notebook display set-up."""
from __future__ import annotations

import altair as alt
import numpy as np

from capbook import charts


def test_theme_applies_palette_and_size():
    charts.use_theme()
    try:
        spec = alt.Chart(alt.Data(values=[{"x": 1}])).mark_point().encode(x="x:Q").to_dict()
        assert spec["config"]["range"]["category"] == charts.PALETTE
        assert spec["config"]["view"]["continuousWidth"] == charts.WIDTH
    finally:
        alt.theme.enable("default")


def test_slider_is_a_bound_param():
    p = charts.slider("S", 32, 4, 128, 4, "slots S")
    d = p.param.to_dict()
    assert d["name"] == "S" and d["value"] == 32
    assert d["bind"]["input"] == "range" and d["bind"]["min"] == 4 and d["bind"]["max"] == 128


def test_numpy_scalars_display_as_plain_numbers_for_glue():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    charts.use_theme()
    try:
        fmt = ip.display_formatter
        assert fmt.format(np.float64(88.5))[0]["text/plain"] == "88.5"
        assert fmt.format(np.int64(3))[0]["text/plain"] == "3"
        assert float(fmt.format(np.float32(0.25))[0]["text/plain"]) == 0.25
    finally:
        alt.theme.enable("default")
