"""capbook.charts.capstone: the rating explorer's browser formula equals the package's; the capstone's
charts (the explorer and CapacityPlan.chart) compile without Vega warnings or conflicting scales."""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from capbook.charts.capstone import rating_explorer
from capbook.sweeps.replicas import ReplicaRating, replicas_for_tokens


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


# --- the plan's chart (CapacityPlan.chart): no conflicting scales, labels that fit, units ---

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plan_spec():
    from capbook.app import datasets
    from capbook.plan.steps import SLO, capacity_plan
    from capbook.sweeps.sweep import load_sample_sweep

    inputs = datasets.plan_inputs(datasets.load_gateway(), load_sample_sweep())
    return capacity_plan(**inputs.arguments, slo=SLO(), lead_time_weeks=4, simulate=False).chart().to_dict()


def _scale_groups(spec, channel):
    """The scales a channel uses, grouped by the views that share one: Vega-Lite merges a group's
    scales into one (and warns, keeping one, when they differ) unless a ``resolve`` makes the
    channel's scale independent. Returns (this view's shared signatures, finished groups)."""
    shared, groups = [], []
    enc = spec.get("encoding", {}).get(channel)
    if isinstance(enc, dict) and "field" in enc:
        shared.append(json.dumps({"type": enc.get("type"), "scale": enc.get("scale")}, sort_keys=True))
    independent = spec.get("resolve", {}).get("scale", {}).get(channel) == "independent"
    for key in ("layer", "vconcat", "hconcat", "concat"):
        for sub in spec.get(key, []):
            sub_shared, sub_groups = _scale_groups(sub, channel)
            groups += sub_groups
            if independent:
                groups.append(sub_shared)
            else:
                shared += sub_shared
    return shared, groups


def _conflicts(spec, channel):
    shared, groups = _scale_groups(spec, channel)
    return [set(g) for g in groups + [shared] if len(set(g)) > 1]


def test_plan_chart_has_no_conflicting_colour_scale(plan_spec):
    assert plan_spec["resolve"]["scale"]["color"] == "independent"
    assert _conflicts(plan_spec, "color") == []
    # the checker does catch the conflict the chart used to have (one colour scale for both panels)
    shared = dict(plan_spec, resolve={})
    assert _conflicts(shared, "color") != []


@pytest.mark.skipif(shutil.which("node") is None and not (ROOT / ".venv/bin/node").exists()
                    or not (ROOT / "tools/vl_warnings.mjs").exists()
                    or not (ROOT / "site/node_modules/vega-lite").exists(),
                    reason="needs node, tools/vl_warnings.mjs and the site's vega-lite")
def test_capstone_charts_compile_without_vega_warnings(plan_spec, tmp_path):
    node = str(ROOT / ".venv/bin/node") if (ROOT / ".venv/bin/node").exists() else shutil.which("node")
    explorer = rating_explorer(13_000, 65_000, 2_400, 6_000, headroom=0.8).to_dict()
    path = tmp_path / "specs.json"
    path.write_text(json.dumps([plan_spec, explorer]))
    run = subprocess.run([node, str(ROOT / "tools/vl_warnings.mjs"), str(path)], capture_output=True, text=True)
    assert run.stdout + run.stderr == "" and run.returncode == 0, run.stdout + run.stderr


def test_plan_chart_axes_have_titles_and_labels_that_fit(plan_spec):
    water, bars = plan_spec["vconcat"]
    for layer in water["layer"]:
        x = layer["encoding"]["x"]
        assert x["title"] and x["axis"]["labelAngle"] == 0
        assert "labelExpr" in x["axis"]            # stage names on two lines
    assert water["layer"][0]["encoding"]["y"]["title"] == "replicas"
    assert bars["encoding"]["x"]["title"] and bars["encoding"]["y"]["title"]
    # the two-line labels: no line longer than the longest word pair of a stage name
    expr = water["layer"][0]["encoding"]["x"]["axis"]["labelExpr"]
    table = json.loads(expr.split("[datum.label]")[0])
    assert set(table) == {"token load", "Erlang C (not verified)", "burst headroom", "failure spare", "total"}
    assert all(len(line) <= 16 for lines in table.values() for line in lines)
