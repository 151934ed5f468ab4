"""Benchmark: capbook's vectorised Erlang C against the straightforward reference.

Evaluates Erlang C on c = 1..2000 servers × 20 utilisations (0.05, 0.10, …, 0.95 and 0.99)
with :func:`capbook.queueing.erlang_c` and with the reference most texts print: a log-space
sum over k in pure Python, one (c, ρ) pair at a time. Both run in this process; the script
prints the speed ratio and the largest relative difference.

Target (issue 2): at least 1000× faster, relative difference below 1e-10.

Part 2 (issue 29): one scalar call, as every solver makes it in a loop. The scalar fast path
(``math``-module terms) against the same call through the array kernel (the path every scalar
call took before), on the 40 requests/s example's sizes; target: at least 20× faster, the
same value to 1e-12.

Run: ``.venv/bin/python benchmarks/bench_erlang.py``
"""
from __future__ import annotations

import math
import time

import numpy as np

from capbook.queueing import erlang_c

C_MAX = 2000
UTILISATIONS = np.r_[np.arange(1, 20) * 0.05, 0.99]


def reference_erlang_c(c: int, a: float) -> float:
    """Erlang C by the textbook sum, in log space to avoid overflow (pure Python)."""
    rho = a / c
    log_terms = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)]
    log_last = c * math.log(a) - math.lgamma(c + 1) - math.log(1 - rho)
    m = max(max(log_terms), log_last)
    denom = sum(math.exp(t - m) for t in log_terms) + math.exp(log_last - m)
    return math.exp(log_last - m) / denom


def main() -> None:
    cs = np.arange(1, C_MAX + 1)
    c_grid, u_grid = np.meshgrid(cs, UTILISATIONS, indexing="ij")
    a_grid = c_grid * u_grid

    t0 = time.perf_counter()
    ref = np.array([[reference_erlang_c(int(c), float(c * u)) for u in UTILISATIONS] for c in cs])
    t_ref = time.perf_counter() - t0

    erlang_c(c_grid, a_grid)  # warm-up (imports, first-call overhead)
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        got = erlang_c(c_grid, a_grid)
    t_cap = (time.perf_counter() - t0) / reps

    mask = ref > 1e-300
    rel = np.abs(got[mask] - ref[mask]) / ref[mask]
    ratio = t_ref / t_cap
    print(f"grid: c = 1..{C_MAX} x {len(UTILISATIONS)} utilisations = {c_grid.size:,} values")
    print(f"reference (pure-Python log-space sum): {t_ref:8.3f} s")
    print(f"capbook (vectorised, incomplete gamma): {t_cap * 1e3:8.3f} ms")
    print(f"speed ratio: {ratio:,.0f}x  (target >= 1000x)")
    print(f"largest relative difference: {rel.max():.2e}  (target < 1e-10)")
    ok = ratio >= 1000 and rel.max() < 1e-10
    ok = scalar_part() and ok
    print("PASS" if ok else "FAIL")


def scalar_part() -> bool:
    pairs = [(c, 0.9 * c) for c in (17, 19, 544, 608)]           # replicas or slots at 90 % load
    n = 20_000
    worst = 0.0
    t_fast = t_arr = 0.0
    for c, a in pairs:
        ca, aa = np.array([c]), np.array([a])
        erlang_c(c, a), erlang_c(ca, aa)                           # warm-up
        t0 = time.perf_counter()
        for _ in range(n):
            v = erlang_c(c, a)
        t_fast += time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(n // 20):
            w = erlang_c(ca, aa)[0]
        t_arr += (time.perf_counter() - t0) * 20
        worst = max(worst, abs(v - w) / w)
    per_fast, per_arr = t_fast / (n * len(pairs)) * 1e6, t_arr / (n * len(pairs)) * 1e6
    ratio = per_arr / per_fast
    print(f"\none scalar erlang_c call: fast path {per_fast:.2f} us, through the array kernel {per_arr:.1f} us: "
          f"{ratio:,.0f}x  (target >= 20x); largest relative difference {worst:.1e} (target <= 1e-12)")
    return ratio >= 20 and worst <= 1e-12


if __name__ == "__main__":
    main()
