"""Benchmark: capbook's fleet simulator against SimPy, and the continuous-batching engine's speed.

1. Shared-queue M/M/c: c = 544 slots (17 replicas x 32), λ = 40 req/s, mean service 12.25 s
   (ρ = 0.90), 200,000 requests. The same arrival and service draws go to
   :class:`capbook.sim.slotsim.Simulation` (FCFS fast path) and to a textbook SimPy model (a
   ``simpy.Resource`` of capacity c, one process per customer), timed in this process. Both
   must give the same waits (largest difference below 1e-6 s) and capbook must be at least
   30x faster.
2. Continuous batching: 20 replicas x 32 slots, TPOT from the ``illustrative_chat`` sample
   sweep (load-dependent), lognormal prompt and output lengths, Poisson arrivals at 85 % of
   the fleet's nominal capacity, join-shortest-queue routing, 1,000,000 requests. Reports
   requests simulated per second of wall time.

SimPy is an optional benchmark-only dependency and is kept out of the project's ``.venv``:

    .venv/bin/python benchmarks/bench_sim.py --setup   # once: benchmarks/.venv-simpy with simpy
    .venv/bin/python benchmarks/bench_sim.py           # runs both parts

SimPy is pure Python, so the script imports it from that venv's ``site-packages`` into this
process (same interpreter, same timer). Without it, part 1 is skipped with a message.
``--requests N`` shrinks part 2 for a quick look.
"""
from __future__ import annotations

import argparse
import glob
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from capbook.sim.arrivals import PoissonArrivals
from capbook.sim.distributions import Lognormal
from capbook.sim.slotsim import ContinuousBatching, FixedService, FleetSpec, Simulation
from capbook.sweeps.sweep import load_sample_sweep

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "benchmarks" / ".venv-simpy"

REPLICAS, SLOTS = 17, 32
RATE, SERVICE_S, N = 40.0, 12.25, 200_000


def setup_venv() -> int:
    print(f"creating {VENV} with simpy (kept out of the project's .venv)")
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "simpy>=4,<5"], check=True)
    return 0


def import_simpy():
    try:
        import simpy  # noqa: F401
        return simpy
    except ImportError:
        pass
    for sp in glob.glob(str(VENV / "lib" / "python*" / "site-packages")):
        sys.path.append(sp)
    try:
        import simpy
        return simpy
    except ImportError:
        return None


def simpy_waits(simpy, interarrival: np.ndarray, service: np.ndarray, c: int) -> np.ndarray:
    """The textbook SimPy M/M/c: a source process and one process per customer."""
    n = interarrival.size
    waits = np.empty(n)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=c)
    gaps, svc = interarrival.tolist(), service.tolist()

    def customer(i):
        arrived = env.now
        with server.request() as req:
            yield req
            waits[i] = env.now - arrived
            yield env.timeout(svc[i])

    def source():
        for i in range(n):
            yield env.timeout(gaps[i])
            env.process(customer(i))

    env.process(source())
    env.run()
    return waits


def part1(target: float = 30.0) -> bool:
    print(f"== 1. shared-queue M/M/c: c = {REPLICAS * SLOTS}, λ = {RATE:g}/s, "
          f"mean service {SERVICE_S} s, {N:,} requests ==")
    rng = np.random.default_rng(2026)
    gaps = rng.exponential(1 / RATE, N)
    service = rng.exponential(SERVICE_S, N)
    times = np.cumsum(gaps)
    fleet = FleetSpec(REPLICAS, SLOTS, FixedService(service), routing="pooled")
    t0, c0 = time.perf_counter(), time.process_time()
    res = Simulation(fleet, times, seed=0).run()
    t_cap, c_cap = time.perf_counter() - t0, time.process_time() - c0
    print(f"capbook: {t_cap:8.3f} s wall, {c_cap:8.3f} s CPU   P(wait) = {np.mean(res.wait > 0):.4f}, mean wait = {res.wait.mean():.4f} s")
    simpy = import_simpy()
    if simpy is None:
        print("SimPy not available: skipping the comparison (run with --setup once to install it "
              f"into {VENV.relative_to(ROOT)})")
        return True
    t0, c0 = time.perf_counter(), time.process_time()
    w_ref = simpy_waits(simpy, gaps, service, REPLICAS * SLOTS)
    t_ref, c_ref = time.perf_counter() - t0, time.process_time() - c0
    diff = float(np.max(np.abs(w_ref - res.wait)))
    ratio = c_ref / c_cap      # CPU time: robust to other processes sharing the machine
    print(f"SimPy {simpy.__version__}: {t_ref:8.3f} s wall, {c_ref:8.3f} s CPU   P(wait) = {np.mean(w_ref > 0):.4f}, mean wait = {w_ref.mean():.4f} s")
    print(f"largest |wait difference|: {diff:.2e} s  (target < 1e-6)")
    print(f"speed ratio (CPU time): {ratio:,.1f}x, wall time: {t_ref / t_cap:,.1f}x  (target >= {target:g}x)")
    return diff < 1e-6 and ratio >= target


def part2(n: int) -> None:
    sweep = load_sample_sweep("illustrative_chat")
    replicas, slots = 20, 32
    svc = ContinuousBatching(sweep, input_tokens=Lognormal(1500, 1.0), output_tokens=Lognormal(300, 1.5))
    hold = 1500 / sweep.prefill_rate_tps + 299 * float(sweep.tpot(slots))
    rate = 0.85 * replicas * slots / hold
    print(f"\n== 2. continuous batching: {replicas} replicas x {slots} slots, TPOT from the "
          f"'{sweep.name}' sweep, λ = {rate:.1f}/s, jsq, {n:,} requests ==")
    fleet = FleetSpec(replicas, slots, svc, routing="jsq")
    t0, c0 = time.perf_counter(), time.process_time()
    res = Simulation(fleet, PoissonArrivals(rate), n_requests=n, seed=1).run()
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = res.summary(ttft_target_s=1.0, tpot_target_s=0.05, warmup_s=600)
    print(f"wall time {el:.2f} s ({n / el:,.0f} requests/s); CPU time {cpu:.2f} s "
          f"({n / cpu:,.0f} requests simulated per CPU second)")
    print(f"(p99 TTFT {s['ttft_p99_s']:.3f} s, p50 TPOT {s['tpot_p50_s'] * 1e3:.1f} ms, "
          f"slot utilisation {s['utilisation']:.3f}, goodput share {s['goodput_share']:.4f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="create benchmarks/.venv-simpy with simpy")
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests in part 2")
    args = ap.parse_args()
    if args.setup:
        return setup_venv()
    ok = part1()
    part2(args.requests)
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
