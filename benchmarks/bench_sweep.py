"""Benchmark: Sweep.tpot interpolation overhead and the sweep generator's speed.

The simulator and the load-dependent queue model call :meth:`capbook.sweeps.sweep.Sweep.tpot` and
:attr:`~capbook.sweeps.sweep.Sweep.prefill_rate_tps` inside their loops, so the public, validating
call must stay close to the bare ``numpy.interp`` it wraps. This script times both in this
process for a scalar, a 64-point vector and a million points, and prints the ratios; it also
times the regeneration of every sample sweep (``capbook.engine.servingmodel``).

Target (issue 3): Sweep.tpot within 3x of numpy.interp on a scalar and within 1.5x on 1e6
points (a few microseconds of validation per call); all sample sweeps regenerated in about
4 s of CPU time (wall time grows when the machine is shared).

Run: ``.venv/bin/python benchmarks/bench_sweep.py``
"""
from __future__ import annotations

import time
import timeit

import numpy as np

from capbook.engine.servingmodel import SAMPLE_SPECS, sample_sweep_csv
from capbook.sweeps.sweep import load_sample_sweep


def best(fn, number: int, repeat: int = 5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    s = load_sample_sweep("illustrative_chat")
    n = s.concurrency
    y = s.table["tpot_p50_s"].to_numpy(float)
    cases = [
        ("scalar", 17.5, 20000),
        ("64 points", np.linspace(1, 64, 64), 5000),
        ("1e6 points", np.random.default_rng(0).uniform(1, 64, 1_000_000), 5),
    ]
    for label, x, number in cases:
        assert np.allclose(s.tpot(x), np.interp(x, n, y))
        a = best(lambda: s.tpot(x), number)
        b = best(lambda: np.interp(x, n, y), number)
        print(f"Sweep.tpot {label:>10}: {a * 1e6:10.2f} us   numpy.interp {b * 1e6:10.2f} us   ratio {a / b:5.2f}")
    t0 = time.perf_counter()
    for name in SAMPLE_SPECS:
        sample_sweep_csv(name)
    print(f"regenerating {len(SAMPLE_SPECS)} sample sweeps: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
