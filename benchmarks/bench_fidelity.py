"""Fidelity of the three models on real vLLM measurements (issue 14).

Fits M/M/c, the load-dependent queue and the engine simulation on the lowest stable stages of
each variant of the KubeCon NA 2025 inference-perf demo (one vLLM replica on an H100; see
``../shared/realdata/inference-perf-kubecon-na-2025/README.md``) and predicts the held-out
stable stages, the saturation plateau, the over-capacity stages and the highest rate meeting
TTFT p99 <= 200 ms. Prints the per-variant table and the median |error| against the targets.

Run: ``python benchmarks/bench_fidelity.py [PATH]`` (default: ``../shared/realdata/...``
beside the repository). The targets are printed, not asserted: this is a benchmark.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from capbook.fidelity import fidelity, fidelity_summary, kubecon_variants
from capbook.importers import read_sweep

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "inference-perf-kubecon-na-2025"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else DEFAULT
    if not root.is_dir():
        print(f"bench_fidelity: {root} not found (the shared real data are not beside the repository); skipped")
        return 0
    t = time.perf_counter()
    sweeps = [read_sweep(p) for p in kubecon_variants(root)]
    table = fidelity(sweeps)
    wall = time.perf_counter() - t
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    held = table[table["check"].isin(["heldout", "plateau"])].copy()
    idx = ["variant", "check", "stage", "quantity"]
    wide = held.pivot_table(index=idx, columns="model", values="error", aggfunc="first", dropna=False)
    wide = (wide[["mmc", "load_dependent", "simulation"]] * 100).round(1)
    meas = held.groupby(idx, sort=False)["measured"].first()
    wide.insert(0, "measured", meas.reindex(wide.index).astype(float).round(4))
    wide = wide.dropna(subset=["measured"])
    print("Relative error in % (predicted / measured - 1), per held-out stage and plateau:")
    print(wide.to_string())
    flags = table[table["check"].isin(["over_capacity", "bracket"])]
    print("\nOver-capacity flags and TTFT p99 <= 200 ms bracket (ok = holds):")
    print(flags.pivot_table(index=["variant", "check", "stage"], columns="model", values="ok",
                            aggfunc="first").to_string())
    summ = fidelity_summary(table)
    print("\nMedian |error| over variants and stages, against the issue's targets:")
    s = summ.copy()
    s["median_abs_error"] = (s["median_abs_error"] * 100).round(1)
    print(s.to_string(index=False))
    print(f"\nwall time {wall:.1f} s for {len(sweeps)} variants")
    # measured up to saturation: every stage fitted (in-sample for the plateau, by construction)
    from capbook.engine import fit_engine

    print("\nFitted on every stage, saturated ones included (what `capbook predict` does with a full sweep):")
    for sw in sweeps:
        sat = fit_engine(sw).saturation_rps()
        plateau = float(sw.saturated["request_throughput_rps"].median())
        print(f"  {sw.name:34s} simulated saturation {sat:6.1f} req/s, measured plateau {plateau:6.1f} "
              f"({100 * (sat / plateau - 1):+.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
