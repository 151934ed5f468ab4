"""Benchmark: a week of the sample gateway through the autoscaling simulator.

1. **The week.** The sample plan's design week (the forecast week scaled so that its busiest hour
   is the plan's 44.4 requests/s peak; about 14.6 million requests) through
   :func:`capbook.autoscale.policies.simulate_autoscaling` under the waiting-requests policy with the
   plan's 8-minute lag: wall time and requests simulated per second. Target: under 60 s on two
   cores (the issue's figure; the simulator itself uses one).
2. **The price of scaling, as a ratio.** The busiest day's arrivals and holding times, with a
   static fleet of the plan's size, through the autoscaling simulator and through the plain
   c-server FCFS recursion of :mod:`capbook.sim.slotsim` (its fast path: no control loop, no replica
   states), timed in this process on the same draws. Both must give the same start times; the
   ratio is what the control loop, the replica bookkeeping and the per-hour report cost.

Run: ``.venv/bin/python benchmarks/bench_autoscale.py`` (``--hours N`` for a shorter week).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from capbook.app import datasets
from capbook.sim.arrivals import ArrivalStream
from capbook.autoscale.policies import ReactiveWaiting, ReplicaModel, Scaling, Static, simulate_autoscaling
from capbook.autoscale.schedule import design_week, week_arrivals
from capbook.plan.steps import capacity_plan
from capbook.sim.slotsim import _fcfs_recursion

TARGET_S = 60.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=int, default=168, help="hours of the week to simulate (default 168)")
    args = ap.parse_args(argv)

    inp = datasets.plan_inputs()
    plan = capacity_plan(**inp.arguments, simulate=False)
    sweep = inp.arguments["sweep"]
    week = design_week(plan).iloc[: args.hours]
    arr = week_arrivals(plan, inp.arguments["log"], week)
    rep = ReplicaModel.from_plan(plan, sweep)
    print(f"plan: {plan.total} replicas x {rep.slots} slots, peak {plan.request_rate:.1f} requests/s; "
          f"week: {len(week)} hours, mean {week['request_rate'].mean():.1f} requests/s")

    # 1. the week under the waiting policy
    sc = Scaling(lag_s=plan.fleet.lag_min * 60.0, min_replicas=plan.spare + 1, max_replicas=2 * plan.total,
                 initial_replicas=plan.total)
    t0 = time.perf_counter()
    res = simulate_autoscaling(arr, rep, ReactiveWaiting(0.65, extra=plan.spare), sc, seed=2026)
    wall = time.perf_counter() - t0
    s = res.summary()
    verdict = "PASS" if wall < TARGET_S * args.hours / 168 else "FAIL"
    print(f"week: {s['requests']:,} requests in {wall:.1f} s = {s['requests'] / wall:,.0f} requests/s; "
          f"{s['gpu_hours']:,.0f} GPU-hours (static {plan.total * len(week):,}), goodput {s['goodput']:.5f}, "
          f"{s['scale_events']} scale events -> {verdict} (target < {TARGET_S * args.hours / 168:.0f} s)")

    # 2. the busiest day, static fleet, same draws: autoscaling simulator vs the plain FCFS recursion
    rng = np.random.default_rng(7)
    day = int(np.argmax(week["request_rate"].to_numpy())) // 24
    times = arr.times_between(rng, 86400.0 * day, 86400.0 * (day + 1)) - 86400.0 * day
    inp_t, out_t, _ = arr.lengths.sample(rng, times.size)
    hold, first = rep.draw(rng, times.size, inp_t, out_t)
    t0 = time.perf_counter()
    ref_start = _fcfs_recursion(times, hold, plan.total * rep.slots)
    t_ref = time.perf_counter() - t0

    fixed = ReplicaModel(rep.slots, service=1.0)             # the same holding times, in request order
    fixed.draw = lambda rng_, n, *a: (hold[:n], np.zeros(n))
    t0 = time.perf_counter()
    r2 = simulate_autoscaling(ArrivalStream(times), fixed, Static(plan.total),
                              Scaling(initial_replicas=plan.total, max_replicas=plan.total), record=True, seed=0)
    t_auto = time.perf_counter() - t0
    same = np.allclose(r2.records["start"].to_numpy(), ref_start, rtol=0, atol=1e-9)
    print(f"busiest day, static {plan.total} replicas, {times.size:,} requests: FCFS recursion {t_ref:.2f} s, "
          f"autoscaling simulator {t_auto:.2f} s: ratio {t_auto / t_ref:.2f}x; same start times: {same}")
    return 0 if verdict == "PASS" and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
