"""capbook.charts.autoscaling: the rows each chart embeds, and what the lag slider shows.

The headroom chart's filter is read from its spec and run in Python on the rows the page embeds:
at every position of the slider it must show exactly the grid's rows of that lag, one per ramp.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from capbook.autoscale.policies import ReplicaModel, Schedule, Scaling, Static, simulate_autoscaling
from capbook.autoscale.schedule import PolicyRace, headroom_check
from capbook.charts.autoscaling import (HEADROOM_FILTER, TTFT_CEILING_S, TTFT_FLOOR_S, day_chart, day_rows, headroom_chart, headroom_rows,
                                        week_shapes_chart)


class _Datum:
    def __init__(self, row):
        self.__dict__.update(row)


def _shown(spec, lag: float) -> list[dict]:
    """The bar layer's rows at a slider position: its filter evaluated in Python."""
    layer = next(l for l in spec["layer"] if l.get("mark", {}).get("type") == "bar")
    name = layer.get("data", spec.get("data", {})).get("name") or spec["data"]["name"]
    rows = spec["datasets"][name]
    (flt,) = [t["filter"] for t in layer["transform"] if "filter" in t]
    assert flt == HEADROOM_FILTER
    return [r for r in rows if eval(flt, {"abs": abs}, {"datum": _Datum(r), "lag": lag})]


def _hand_grid():
    ramps, lags = (0.5, 1.0, 2.0), (4.0, 8.0, 12.0)
    rows = []
    for lag in lags:
        for ramp in ramps:
            gained = ramp * lag
            rows.append({"ramp_per_min": ramp, "lag_min": lag, "headroom_replicas": 3,
                         "ttft_p99_s": 0.5 if gained <= 8 else 10.0 * gained, "goodput": 1.0 if gained <= 8 else 0.7,
                         "held": gained <= 8, "gpu_hours": 1.0})
    return pd.DataFrame(rows)


def test_headroom_slider_shows_the_rows_of_its_lag():
    grid = _hand_grid()
    spec = headroom_chart(grid, ttft_target_s=1.0, lag_min=8.0).to_dict()
    p = {q["name"]: q for q in spec["params"]}["lag"]
    assert p["value"] == 8.0 and p["bind"]["input"] == "range"
    assert (p["bind"]["min"], p["bind"]["max"], p["bind"]["step"]) == (4.0, 12.0, 4.0)
    for lag in (4.0, 8.0, 12.0):
        shown = _shown(spec, lag)
        want = grid[grid["lag_min"] == lag]
        assert [r["ramp_per_min"] for r in shown] == list(want["ramp_per_min"])
        assert [r["ttft_p99_s"] for r in shown] == list(want["ttft_p99_s"])
        assert [r["verdict"] for r in shown] == ["held" if h else "broke" for h in want["held"]]
    # 2 req/s per minute for 12 minutes gains 24 req/s: the hand grid's one broken row at 12 min is the fastest ramp
    assert [r["verdict"] for r in _shown(spec, 12.0)] == ["held", "broke", "broke"]
    # the bars start at the bottom of the log axis (a log scale has no zero)
    bar = next(l for l in spec["layer"] if l.get("mark", {}).get("type") == "bar")
    assert bar["encoding"]["y2"] == {"datum": 0.25} and bar["encoding"]["y"]["scale"]["domain"][0] == 0.25
    # the objective is the dashed rule
    assert any(r.get("ttft_s") == 1.0 for d in spec["datasets"].values() for r in d)


def test_slider_positions_the_browser_computes_find_their_rows():
    # lags of 3.65 min steps: the browser's min + k * step need not be the grid's value to the last bit
    grid = _hand_grid()
    grid["lag_min"] = grid["lag_min"].map({4.0: 3.65, 8.0: 7.3, 12.0: 3 * 3.65})
    spec = headroom_chart(grid, ttft_target_s=1.0).to_dict()
    p = {q["name"]: q for q in spec["params"]}["lag"]
    for k in range(3):
        at = p["bind"]["min"] + k * p["bind"]["step"]
        assert len(_shown(spec, at)) == 3, at


def test_headroom_rows_are_the_grid():
    grid = _hand_grid().sample(frac=1.0, random_state=1)        # any order in, sorted by lag and ramp out
    rows = headroom_rows(grid)
    assert len(rows) == 9 and list(rows["lag_min"]) == sorted(rows["lag_min"])
    assert list(rows["label"].unique()) == ["+3"]
    back = rows.set_index(["ramp_per_min", "lag_min"])["ttft_p99_s"]
    for _, r in grid.iterrows():
        assert back[(r["ramp_per_min"], r["lag_min"])] == r["ttft_p99_s"]


@pytest.mark.parametrize("change, name", [
    (lambda g: g.drop(columns="held"), "grid"),
    (lambda g: g.iloc[:-1], "grid"),                                              # a ramp missing at one lag
    (lambda g: pd.concat([g, g.iloc[:1]]), "grid"),                               # a row twice
    (lambda g: g.assign(lag_min=g["lag_min"].replace(12.0, 20.0)), "grid"),       # uneven lags
    (lambda g: g.assign(ttft_p99_s=g["ttft_p99_s"].where(g.index != 0, math.nan)), "grid"),
    (lambda g: g.assign(ttft_p99_s=g["ttft_p99_s"].where(g.index != 0, -1.0)), "grid"),
])
def test_bad_grids_name_themselves(change, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        headroom_rows(change(_hand_grid()))


@pytest.mark.parametrize("kwargs, name", [
    ({"ttft_target_s": 0}, "ttft_target_s"),
    ({"ttft_target_s": 1.0, "lag_min": 5.0}, "lag_min"),
])
def test_bad_chart_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        headroom_chart(_hand_grid(), **kwargs)


def test_zero_and_infinite_p99_are_drawn_at_the_ends_of_the_scale():
    g = _hand_grid()
    g.loc[0, "ttft_p99_s"], g.loc[8, "ttft_p99_s"] = 0.0, math.inf
    rows = headroom_rows(g)
    first, last = rows.iloc[0], rows.iloc[-1]
    assert (first["ttft_shown_s"], first["ttft_text"]) == (TTFT_FLOOR_S, "0.00 s")
    assert (last["ttft_shown_s"], last["ttft_text"]) == (TTFT_CEILING_S, "∞ s")
    headroom_chart(g, ttft_target_s=1.0).to_dict()                    # and the page can hold them (no inf in the JSON)


def test_headroom_chart_embeds_a_computed_grid():
    """A small real grid: the page holds exactly the rows headroom_check computed."""
    rep = ReplicaModel(8, 2.0)
    grid = headroom_check(rep, None, 4.0, ramps_per_min=(0.5, 2.0), lags_min=(2.0, 4.0), planned=(0.5, 2.0),
                          ramp_min=10.0)
    spec = headroom_chart(grid, ttft_target_s=1.0, lag_min=2.0).to_dict()
    for lag in (2.0, 4.0):
        shown = _shown(spec, lag)
        want = grid[grid["lag_min"] == lag].sort_values("ramp_per_min")
        assert [r["ttft_p99_s"] for r in shown] == pytest.approx(list(want["ttft_p99_s"]), rel=1e-12)
        assert [r["held"] for r in shown] == list(want["held"])
        assert {r["headroom_replicas"] for r in shown} == set(want["headroom_replicas"])


def _small_race():
    rep = ReplicaModel(4, 2.0)
    rates = np.array([2.0, 6.0])
    from capbook.sim.arrivals import RateArrivals

    arr = RateArrivals(rates, 600.0)
    results = {}
    for name, p in {"static": Static(5), "schedule": Schedule([2, 5], step_s=600.0)}.items():
        results[name] = simulate_autoscaling(arr, rep, p, Scaling(lag_s=60.0, max_replicas=10), report_s=600.0, seed=1)
    return PolicyRace(pd.DataFrame(), results, pd.DataFrame(), Scaling(), "hand-made")


def test_day_rows_follow_the_results():
    race = _small_race()
    demand, rows = day_rows(race, bin_min=5.0, first_hour=6.0)
    h = race.results["static"].hours
    # one row per report bin, and one more closing the last bin at its end (600 s later)
    assert list(demand["hour"]) == pytest.approx(list(6.0 + h["start_s"] / 3600.0) + [6.0 + 1200 / 3600.0])
    assert list(demand["rate"]) == list(h["rate"]) + [h["rate"].iloc[-1]]
    assert list(dict.fromkeys(rows["policy"])) == ["static", "schedule"]
    assert set(rows.loc[rows["policy"] == "static", "serving"]) == {5.0}
    # the schedule's mean serving per 5-minute bin equals the ticks' mean
    t = race.results["schedule"].ticks
    b = (t["time_s"] // 300).astype(int)
    want = t.groupby(b)["serving"].mean().to_numpy()
    assert rows.loc[rows["policy"] == "schedule", "serving"].to_numpy() == pytest.approx(want)
    spec = day_chart(race, static_replicas=5, bin_min=5.0, first_hour=6.0).to_dict()
    assert len(spec["vconcat"]) == 2
    assert any(r == {"replicas": 5, "label": "static fleet: 5 replicas"} for d in spec["datasets"].values() for r in d)


def test_day_chart_names_what_was_simulated_and_every_policy_whole():
    spec = day_chart(_small_race(), subtitle="simulated: a modelled replica").to_dict()
    top, bottom = spec["vconcat"]
    assert top["title"] == {"text": "Demand, and the replicas each policy kept serving",
                            "subtitle": "simulated: a modelled replica"}
    assert top["encoding"]["x"]["title"] == "time of day, hours"
    assert top["encoding"]["y"]["title"] == "requests/s"
    lines = bottom if "mark" in bottom else bottom["layer"][0]
    assert lines["encoding"]["color"]["legend"]["labelLimit"] == 0    # "schedule + waiting", not "…"
    assert lines["encoding"]["y"]["title"] == "replicas serving"


def test_headroom_chart_subtitle_and_a_rounded_lag_caption():
    spec = headroom_chart(_hand_grid(), ttft_target_s=1.0, subtitle="simulated: a modelled replica").to_dict()
    assert spec["title"]["subtitle"] == "simulated: a modelled replica"
    calc = [t["calculate"] for l in spec["layer"] for t in l.get("transform", []) if "calculate" in t]
    assert calc == ["'scale-up lag ' + format(lag, '.4~g') + ' min: the bars are the ramps'"]


@pytest.mark.parametrize("call, name", [
    (lambda: day_rows(object()), "race"),
    (lambda: day_rows(_small_race(), bin_min=0), "bin_min"),
    (lambda: day_rows(_small_race(), first_hour=-1), "first_hour"),
    (lambda: day_chart(_small_race(), static_replicas=0), "static_replicas"),
    (lambda: week_shapes_chart({}), "series"),
    (lambda: week_shapes_chart({"a": np.ones(24)}), "series"),
])
def test_bad_day_arguments_name_themselves(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_week_shapes_are_shares_of_their_peak():
    spec = week_shapes_chart({"a": np.arange(168) + 1.0, "b": np.full(168, 3.0)}).to_dict()
    rows = next(iter(spec["datasets"].values()))
    a = [r["share_of_peak"] for r in rows if r["series"] == "a"]
    assert a[-1] == 1.0 and a[0] == pytest.approx(1 / 168)
    assert {r["share_of_peak"] for r in rows if r["series"] == "b"} == {1.0}
    assert spec["encoding"]["color"]["legend"]["labelLimit"] == 0      # whole series names
    assert spec["encoding"]["x"]["title"] == "hour of the week, hours from its start"
