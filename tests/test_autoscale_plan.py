"""The plan through the week: design week, forecast schedule, the policies raced, ``capbook plan``'s
schedule.csv and autoscaling rows, the headroom rule."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook.app import datasets
from capbook.autoscale.policies import ReplicaModel, Static
from capbook.autoscale.schedule import (PLAN_CANDIDATES, design_week, forecast_schedule, headroom_check, hour_of_week,
                                    log_rate_cv, plan_autoscaling, race_policies, standard_policies, _lengths)
from capbook.app.cli import main
from capbook.cost.costs import FleetCurve, week_demand
from capbook.paths import data_dir
from capbook.plan.steps import capacity_plan
from capbook.logs.requestlog import read_requests


@pytest.fixture(scope="module")
def inputs():
    return datasets.plan_inputs()


@pytest.fixture(scope="module")
def plan(inputs):
    return capacity_plan(**inputs.arguments, simulate=False)


@pytest.fixture(scope="module")
def small(inputs):
    """The sample plan at a twentieth of the demand: the same shape, a fleet of a few replicas."""
    return capacity_plan(**inputs.arguments, simulate=False, demand_scale=0.05)


def test_hour_of_week_counts_from_monday_midnight_utc():
    t = pd.to_datetime(["2026-01-05T00:30Z", "2026-01-05T23:00Z", "2026-01-11T23:59Z", "2026-01-12T01:00Z"])
    assert hour_of_week(t).tolist() == [0, 23, 167, 1]


def test_design_week_is_the_forecast_shape_at_the_planned_peak(plan):
    week = design_week(plan)
    wd = week_demand(plan)
    assert len(week) == 168
    # the busiest hour is the plan's peak; every hour keeps the point forecast's proportion
    assert week["output_tps"].max() == pytest.approx(plan.output_tps, rel=1e-12)
    assert week["request_rate"].max() == pytest.approx(plan.request_rate, rel=1e-12)
    np.testing.assert_allclose(week["output_tps"] / week["output_tps"].max(), wd.point / wd.point.max(), rtol=1e-12)
    assert week["hour_of_week"].tolist() == hour_of_week(wd.hours).tolist()
    assert "forecast week" in week.attrs["note"]
    # a higher quantile scales the same shape up to that quantile's peak
    w99 = design_week(plan, quantile=0.99)
    assert w99["output_tps"].max() == pytest.approx(wd.peak(0.99))
    with pytest.raises(ValueError, match="shape must hold 168"):
        design_week(plan, shape=[1.0] * 24)


def test_without_a_forecast_the_week_is_the_borrowed_servegen_shape(inputs):
    log = read_requests(data_dir() / datasets.GATEWAY_LOG)
    p = capacity_plan(log, inputs.arguments["sweep"], simulate=False)      # three hours: no forecast
    week = design_week(p)
    assert "ServeGen" in week.attrs["note"] and "borrowed" in week.attrs["note"]
    shape = datasets.load_demand_shape().to_numpy()[:1008].reshape(168, 6).mean(axis=1)
    np.testing.assert_allclose(week["output_tps"], shape / shape.max() * p.output_tps, rtol=1e-12)


def test_forecast_schedule_is_the_plans_own_sizing_hour_by_hour(plan, inputs):
    week = design_week(plan)
    sched = forecast_schedule(plan, inputs.arguments["sweep"], week)
    curve = FleetCurve(plan, inputs.arguments["sweep"])
    assert sched.replicas.size == 168
    assert sched.lead_s == plan.fleet.lag_min * 60.0
    # the busiest hour gets the static plan's count; others what the pipeline buys for them
    assert sched.replicas.max() == plan.total == sched.replicas[int(week["output_tps"].idxmax())]
    for h in (0, 40, 100, 150):
        assert sched.replicas[h] == curve.replicas(float(week["output_tps"].iloc[h]))
    # more demand never gets fewer replicas
    order = np.argsort(week["output_tps"].to_numpy(), kind="stable")
    assert np.all(np.diff(sched.replicas[order]) >= 0)


def test_the_standard_policies_are_the_seven_the_book_races(plan, inputs):
    pol = standard_policies(plan, inputs.arguments["sweep"])
    assert list(pol) == ["static", "schedule", "slot utilisation", "GPU utilisation", "waiting",
                         "TTFT and goodput", "schedule + waiting"]
    assert pol["static"].replicas == plan.total
    assert set(PLAN_CANDIDATES) <= set(pol)


def test_race_counts_static_gpu_hours_and_keeps_the_cheapest_policy_that_meets(small, inputs):
    sweep, log = inputs.arguments["sweep"], inputs.arguments["log"]
    week = design_week(small)
    day = int(week["request_rate"].idxmax()) // 24
    pol = standard_policies(small, sweep, week)
    race = race_policies(small, sweep, log, {k: pol[k] for k in ("static", "schedule", "waiting", "GPU utilisation")},
                         week=week, hours=slice(24 * day, 24 * day + 24), prices=2.0)
    t = race.table.set_index("policy")
    # a static fleet's GPU-hours need no simulation: replicas × hours × GPUs; the simulation agrees
    assert race.static_gpu_hours == small.total * 24
    assert t.loc["static", "gpu_hours"] == pytest.approx(race.static_gpu_hours, rel=1e-9)
    assert t.loc["static", "saved"] == pytest.approx(0.0, abs=1e-9)
    assert (t["usd"] == t["gpu_hours"] * 2.0).all()
    # every policy saw the same arrivals
    assert t["requests"].nunique() == 1
    # GPU utilisation reads busy at any load: it never scales below the others
    assert t.loc["GPU utilisation", "gpu_hours"] > t.loc["waiting", "gpu_hours"]
    ok = t[t["meets"] & (t["gpu_hours"] < race.static_gpu_hours)]
    assert race.best == (None if ok.empty else ok["gpu_hours"].idxmin())
    # the schedule keeps its hour-of-week positions on a slice of the week
    ticks = race.results["schedule"].ticks
    first = int(ticks["target"].iloc[0])
    assert first == pol["schedule"].at(24 * day * 3600.0 + 15.0 + pol["schedule"].lead_s)
    with pytest.raises(ValueError, match="hours must be a slice"):
        race_policies(small, sweep, log, {"static": Static(3)}, week=week, hours=slice(100, 200))


def test_plan_autoscaling_rows_and_schedule_frame(small, inputs):
    sweep, log = inputs.arguments["sweep"], inputs.arguments["log"]
    a = plan_autoscaling(small, sweep, log, candidates=("schedule", "waiting"), rate_cv=0.0)
    rows = a.table()
    assert (rows["step"] == "autoscaling").all()
    q = dict(zip(rows["quantity"], rows["value"]))
    assert q["GPU-hours per week (static)"] == small.total * 168
    auto = q["GPU-hours per week (autoscaled)"]
    if a.policy is None:
        assert auto == q["GPU-hours per week (static)"]
    else:
        assert auto == pytest.approx(float(a.race.table.set_index("policy").loc[a.policy, "gpu_hours"]))
        assert auto < q["GPU-hours per week (static)"]
        assert a.race.table.set_index("policy").loc[a.policy, "meets"]
    frame = a.schedule_frame()
    assert list(frame.columns) == ["hour_of_week", "replicas"]
    assert frame["hour_of_week"].tolist() == list(range(168))
    # the frame is the schedule re-indexed by hour of week (the design week starts on a Monday here)
    how = a.race.week["hour_of_week"].to_numpy()
    assert dict(zip(frame["hour_of_week"], frame["replicas"])) == dict(zip(how.tolist(), a.schedule.replicas.tolist()))
    text = a.render()
    assert "Autoscaling through the week" in text and "schedule.csv" in text
    with pytest.raises(ValueError, match="unknown candidate policy 'nope'"):
        plan_autoscaling(small, sweep, log, candidates=("nope",))
    with pytest.raises(ValueError, match="rate_cv must be"):
        plan_autoscaling(small, sweep, log, candidates=("waiting",), rate_cv="loud")


def test_log_rate_cv_measures_the_plans_traffic(plan, inputs):
    from capbook.sim.arrivals import rate_cv_from_log

    f = inputs.arguments["log"].frame
    f = f[(f["model"] == plan.source["model"]) & (f["tier"] == plan.source["tier"])]
    t = (f["arrival_time"] - f["arrival_time"].min()).dt.total_seconds().to_numpy()
    assert log_rate_cv(plan, inputs.arguments["log"]) == pytest.approx(rate_cv_from_log(t, 60.0, 600.0))


def test_plan_cli_writes_schedule_and_autoscaling_rows(tmp_path, capsys):
    out = tmp_path / "plan"
    assert main(["plan", "--no-sim", "--scale", "0.05", "--prices", str(data_dir() / "prices" / "illustrative.csv"),
                 "--out", str(out)]) == 0
    cap = capsys.readouterr()
    text = cap.out
    assert "simulating the forecast week under 3 scaling policies" in cap.err      # progress, not the plan
    assert "Autoscaling through the week" in text
    sched = pd.read_csv(out / "schedule.csv")
    assert list(sched.columns) == ["hour_of_week", "replicas"] and len(sched) == 168
    t = pd.read_csv(out / "plan.csv")
    a = t[t["step"] == "autoscaling"].set_index("quantity")["value"]
    total = int(float(t[(t["step"] == "fleet") & (t["quantity"] == "total replicas")]["value"].iloc[0]))
    assert f"{total} replicas" in text.splitlines()[0]                            # the headline comes first
    assert float(a["GPU-hours per week (static)"]) == total * 168
    assert 0 < float(a["GPU-hours per week (autoscaled)"]) <= total * 168
    assert float(a["USD per week (static, on demand)"]) == pytest.approx(total * 168 * 2.20)
    assert sched["replicas"].max() == total
    # --no-autoscale: no simulated week, no schedule
    out2 = tmp_path / "plan2"
    assert main(["plan", "--no-sim", "--no-autoscale", "--out", str(out2)]) == 0
    assert not (out2 / "schedule.csv").exists()
    assert "autoscaling" not in set(pd.read_csv(out2 / "plan.csv")["step"])
    # a bad lag names its flag
    capsys.readouterr()
    assert main(["plan", "--no-sim", "--lag", "-3", "--out", str(tmp_path / "bad")]) == 2
    assert "--lag '-3'" in capsys.readouterr().err


def test_the_lag_flag_reaches_the_burst_headroom_and_the_week(tmp_path):
    rows = {}
    for lag in ("2", "30"):
        out = tmp_path / lag
        assert main(["plan", "--no-sim", "--no-autoscale", "--lag", lag, "--out", str(out)]) == 0
        t = pd.read_csv(out / "plan.csv")
        rows[lag] = float(t[(t["step"] == "fleet") & (t["quantity"] == "burst headroom")]["value"].iloc[0])
    assert rows["30"] > rows["2"]


def test_headroom_rule_holds_where_it_was_sized_and_breaks_beyond(plan, inputs):
    rep = ReplicaModel.from_plan(plan, inputs.arguments["sweep"])
    lengths = _lengths(plan, inputs.arguments["log"])
    # the plan's ramp and lag (0.5 req/s per minute, 8 min): the rule's headroom holds p99 TTFT
    held = headroom_check(rep, lengths, 20.0, ramps_per_min=(0.5,), lags_min=(8.0,), planned=(0.5, 8.0))
    assert held["held"].all() and (held["ttft_p99_s"] <= 1.0).all()
    assert int(held["headroom_replicas"].iloc[0]) >= 1
    # headroom sized for the plan, reality four times faster with twice the lag: it breaks
    broke = headroom_check(rep, lengths, 20.0, ramps_per_min=(4.0,), lags_min=(16.0,), planned=(0.5, 8.0))
    assert not broke["held"].any() and (broke["ttft_p99_s"] > 1.0).all()
    # the same ramp and lag with the rule applied to them (ramp × lag of what happens) holds
    sized = headroom_check(rep, lengths, 20.0, ramps_per_min=(4.0,), lags_min=(16.0,))
    assert sized["held"].all()
    assert int(sized["headroom_replicas"].iloc[0]) > int(broke["headroom_replicas"].iloc[0])


def test_the_target_the_book_advises_meets_where_a_hot_target_does_not(plan, inputs):
    """Scale at 60-70 % of the slots (the book's advice): the busiest day meets its objectives;
    at 90 % the fleet runs too hot to absorb the climb and the queue shows in TTFT."""
    from capbook.autoscale.policies import ReactiveWaiting

    sweep, log = inputs.arguments["sweep"], inputs.arguments["log"]
    week = design_week(plan)
    day = int(week["request_rate"].idxmax()) // 24
    race = race_policies(plan, sweep, log, {"65 %": ReactiveWaiting(0.65), "90 %": ReactiveWaiting(0.9)},
                         week=week, hours=slice(24 * day, 24 * day + 24))
    t = race.table.set_index("policy")
    assert t.loc["65 %", "meets"] and t.loc["65 %", "worst_hour_ttft_p99_s"] <= plan.slo.ttft_target_s
    assert not t.loc["90 %", "meets"]
    assert t.loc["90 %", "worst_hour_ttft_p99_s"] > 10 * plan.slo.ttft_target_s
    assert t.loc["90 %", "gpu_hours"] < t.loc["65 %", "gpu_hours"]


def test_provisioning_lag_is_the_sum_of_its_parts():
    from capbook.autoscale.policies import ProvisioningLag
    from capbook.plan.fleet import ScaleUpLag

    lag = ProvisioningLag.from_scale_up_lag(ScaleUpLag(), scv=0.25)
    # detect is the control loop's job: the parts are node 3, image pull 1, weights 2, model load 1 minutes
    assert lag.components == {"node": 180.0, "image pull": 60.0, "weights download": 120.0, "model load": 60.0}
    assert lag.mean == 420.0 and lag.variance == pytest.approx(0.25 * (180**2 + 60**2 + 120**2 + 60**2))
    x = lag.sample(np.random.default_rng(3), 400_000)
    assert x.mean() == pytest.approx(420.0, rel=0.005)
    assert x.var() == pytest.approx(lag.variance, rel=0.03)
    assert (x > 0).all()
    assert np.all(ProvisioningLag({"node": 60.0}, scv=0.0).sample(np.random.default_rng(0), 5) == 60.0)
    with pytest.raises(ValueError, match="add up to 0"):
        ProvisioningLag({"node": 0.0})
    with pytest.raises(ValueError, match="components"):
        ProvisioningLag({})


def test_when_no_fleet_can_meet_the_objectives_the_section_says_so(inputs):
    """The p99 prompt's prefill alone exceeds a 0.3 s TTFT objective: the plan finds no fleet size
    meets it, and the autoscaling section says no policy can help instead of ranking them."""
    from capbook.plan.steps import SLO

    p = capacity_plan(**inputs.arguments, slo=SLO(ttft_target_s=0.3), demand_scale=0.05, sim_requests=2000)
    assert p.verification.status == "impossible"
    a = plan_autoscaling(p, inputs.arguments["sweep"], inputs.arguments["log"], candidates=("waiting",), rate_cv=0.0)
    assert a.policy is None and a.autoscaled_gpu_hours == a.static_gpu_hours
    text = a.render()
    assert "As the plan found, no fleet size can meet the objectives" in text
    assert "No scaling policy can help" in text
    assert not a.race.table["meets"].any()
