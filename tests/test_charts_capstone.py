"""capbook.charts.capstone: the rating explorer's browser formula equals the package's."""
from __future__ import annotations

import math
import re

import pytest

from capbook.charts.capstone import rating_explorer
from capbook.replicas import ReplicaRating, replicas_for_tokens


def _spec():
    return rating_explorer(13_000, 65_000, 2_400, 6_000, headroom=0.8, max_scale=2.0).to_dict()


def test_sliders_are_bound_range_inputs():
    params = {p["name"]: p for p in _spec()["params"]}
    assert set(params) == {"headroom", "ratio"}
    assert params["headroom"]["value"] == 0.8 and params["headroom"]["bind"]["input"] == "range"
    assert params["ratio"]["value"] == 5.0 and params["ratio"]["bind"]["max"] == 20.0


def test_browser_formula_is_the_linear_mix():
    spec = _spec()
    layer = spec["layer"][0]
    calc = {t["as"]: t["calculate"] for t in layer["transform"] if "calculate" in t}
    rows = spec["datasets"][layer["data"]["name"]]
    assert rows[0]["scale"] == 0.05 and rows[-1]["scale"] == 2.0
    expr = calc["replicas"].replace("ceil", "math.ceil")
    for row in rows[::7]:
        for headroom, ratio in ((0.8, 5.0), (0.6, 12.0), (1.0, 1.0)):
            got = eval(expr, {"math": math}, {"datum": type("D", (), row)(), "headroom": headroom, "ratio": ratio})
            out = row["scale"] * 13_000
            want = replicas_for_tokens(out, ratio * out, ReplicaRating(2_400, 6_000), headroom=headroom).replicas
            assert got == want, (row, headroom, ratio)
    assert re.search(r"2,400 out / 6,000 in", spec["title"])


@pytest.mark.parametrize("kw, name", [({"output_tps": 0}, "output_tps"), ({"rating_input_tps": -1}, "rating_input_tps"),
                                      ({"headroom": 0.3}, "headroom"), ({"max_scale": "2"}, "max_scale")])
def test_bad_arguments_name_themselves(kw, name):
    args = {"output_tps": 1.0, "input_tps": 1.0, "rating_output_tps": 1.0, "rating_input_tps": 1.0}
    extra = {k: v for k, v in kw.items() if k not in args}
    args.update({k: v for k, v in kw.items() if k in args})
    with pytest.raises(ValueError, match=name):
        rating_explorer(**args, **extra)
