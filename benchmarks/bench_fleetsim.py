"""Benchmark: the fleet simulator (capbook.sim.fleetsim) on the sample gateway's busiest hour.

1. **The busiest hour.** The sample gateway's log (``data/gateway``), its busiest hours stacked
   and time-scaled to the sample plan's peak (:func:`capbook.plan.replay.replay_requests`, as the
   plan's fleet simulation replays them), one hour of it (about 160,000 requests at 44 requests/s),
   through the plan's serving fleet of engine replicas fitted to the ``illustrative_chat`` sweep
   (continuous batching, chunked prefill, the KV cache, the fitted step cost) behind the pooled
   router. Reports wall and CPU time, simulated requests per second, engine steps per second, and
   checks the target: under 60 s on this machine.
2. **The same core against SimPy** (:mod:`benchmarks.bench_sim`, part 1): capbook's slot mode
   against a textbook SimPy M/M/c, the same draws, CPU-time ratio (target: at least 30x). Needs
   ``benchmarks/.venv-simpy`` (``bench_sim.py --setup`` once); skipped with a message without it.

The reference run for the ratio (SimPy) runs in this process; the fleet's own figure is a rate.

    .venv/bin/python benchmarks/bench_fleetsim.py            # both parts
    .venv/bin/python benchmarks/bench_fleetsim.py --hours 0.25   # a quick look
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_S = 60.0
SIMPY_TARGET = 30.0


def part1(hours: float, replicas: int | None) -> bool:
    from capbook.app import datasets
    from capbook.engine.stepmodel import fit_engine
    from capbook.sim.fleetsim import simulate_fleet
    from capbook.plan.steps import capacity_plan
    from capbook.plan.replay import replay_requests

    inp = datasets.plan_inputs()
    a = inp.arguments
    plan = capacity_plan(**a)                   # its verified serving count and peak rate (~8 s)
    rate = plan.request_rate
    n = int(round(rate * 3600 * hours))
    data = replay_requests(a["log"], rate, n, model=plan.source["model"],
                           tier=None if plan.source["tier"] == "all tiers" else plan.source["tier"])
    if replicas is None:
        replicas = plan.serving
    engine = fit_engine(a["sweep"])
    print(f"== 1. the sample gateway's busiest hour{'' if hours == 1 else f's x {hours:g}'}: {len(data):,} requests "
          f"at {rate:.2f} requests/s through {replicas} engine replicas (pooled router) ==")
    t0, c0 = time.perf_counter(), time.process_time()
    run = simulate_fleet(engine, data, replicas=replicas, router="pooled", seed=2026)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = run.summary(plan.slo.ttft_target_s, plan.slo.tpot_target_s, plan.slo.ttft_quantile)
    steps = int(run.engine_steps)
    print(f"wall {wall:.2f} s, CPU {cpu:.2f} s: {len(data) / cpu:,.0f} requests and {steps / cpu:,.0f} engine steps "
          f"simulated per CPU second ({steps:,} steps in all)")
    print(f"(p99 TTFT {s['ttft_p99_s']:.3f} s, p99 TPOT {1e3 * s['tpot_p99_s']:.1f} ms, goodput "
          f"{100 * s['goodput_share']:.2f} %, slot utilisation {100 * s['slot_utilisation']:.1f} %)")
    limit = TARGET_S * hours
    ok = wall < limit
    print(f"target: under {limit:g} s wall -> {'met' if ok else 'MISSED'} ({wall / limit:.2f} of the budget)")
    return ok


def part2() -> bool:
    import bench_sim

    print()
    if bench_sim.import_simpy() is None:
        print("== 2. SimPy ratio: skipped (SimPy not installed; run benchmarks/bench_sim.py --setup once) ==")
        return True
    print("== 2. the same event core in slot mode against SimPy ==")
    return bench_sim.part1(target=SIMPY_TARGET)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=1.0, help="hours of the busiest traffic to simulate (1)")
    ap.add_argument("--replicas", type=int, default=None, help="serving replicas (default: the sample plan's)")
    ap.add_argument("--no-simpy", action="store_true", help="skip part 2")
    args = ap.parse_args()
    ok = part1(args.hours, args.replicas)
    if not args.no_simpy:
        ok = part2() and ok
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
