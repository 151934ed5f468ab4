"""Fidelity of the engine model on every real sweep in ../shared (issue 31; issue 14 before it).

Part 1, every dataset (:func:`capbook.engine.fidelity.shared_fidelity`): the six KubeCon NA 2025 vLLM
variants (inference-perf, Llama-3.1-8B on one H100), the two SGLang H200 sweeps (Llama-3.3-70B
TP4, Llama-3.1-405B TP8), vLLM's benchmark_serving on a 70B TP8 A100 replica, the AIPerf
closed-loop sweeps (Qwen3.6 on an H100; the InferenceMAX agentic replay of Kimi-K2.5 on MI355X)
and inference-benchmarker's constant-rate sweep of Gemma on an RTX PRO 6000. Each is fitted on its
lowest three stable levels and asked about every other level (open loop: at the requested rate;
closed loop: at the concurrency, with the closed-loop simulation) and about its saturation.
Printed per dataset, then the median over datasets against the issue's targets.

Part 2, the KubeCon variants with all three models of :mod:`capbook.engine.predict` (the table of the
chapter *Where the textbook breaks*).

Run: ``python benchmarks/bench_fidelity.py [SHARED]`` (default: ``$CAPBOOK_SHARED``, else
``../shared`` beside the repository). The targets are printed, not asserted: this is a benchmark.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pandas as pd

from capbook.engine.fidelity import (TARGETS, WORST_SATURATION_TARGET, biggest_misses, datasets_summary, fidelity,
                              fidelity_summary, kubecon_variants, shared_fidelity)
from capbook.sweeps.importers import read_sweep

DEFAULT = Path(os.environ.get("CAPBOOK_SHARED") or Path(__file__).resolve().parents[2] / "shared")


def _pct(x):
    return "" if pd.isna(x) else f"{100 * x:+.0f}%"


def _abs_pct(x):
    return "" if pd.isna(x) else f"{100 * abs(x):.0f}%"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else DEFAULT
    if not root.is_dir():
        print(f"bench_fidelity: {root} not found (the shared real data are not beside the repository); skipped")
        return 0
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 500)
    pd.set_option("display.max_colwidth", 60)
    t = time.perf_counter()
    rows, per, skipped = shared_fidelity(root)
    wall = time.perf_counter() - t
    if per.empty:
        print(f"bench_fidelity: no sweep of 4 levels or more under {root}; skipped ({len(skipped)} left out)")
        return 0

    print(f"Part 1: every real sweep in {root} with at least 4 levels of one configuration: fit on the lowest 3 "
          "stable levels, predict the rest\n")
    show = pd.DataFrame({
        "dataset": per["dataset"], "tool": per["tool"], "model": per["model"].str.rsplit("/", n=1).str[-1],
        "GPU": per["gpu"], "loop": per["loop"], "fitted": per["fitted"], "predicted": per["predicted"],
        "sat meas": per["saturation_measured"].round(3),
        "sat pred": [f"refused >{lim:.3g}" if ref else f"{v:.4g}" for v, ref, lim in
                     zip(per["saturation_predicted"], per["saturation_refused"], per["limit_rps"])],
        "sat err": per["saturation_error"].map(_pct), "served max": per["highest_served"].round(3),
        "|err| thr": per["throughput_rps_median_abs_error"].map(_abs_pct),
        "|err| E2E": per["e2e_mean_s_median_abs_error"].map(_abs_pct),
        "|err| TTFT p50": per["ttft_p50_s_median_abs_error"].map(_abs_pct),
        "|err| TTFT p99": per["ttft_p99_s_median_abs_error"].map(_abs_pct),
    })
    print(show.to_string(index=False))
    print("\n(sat meas: open loop, the median completion rate of the levels that are not stable and show a queue "
          "(TTFT p50, schedule delay or mean E2E up); closed loop, the throughput plateau; blank when the sweep "
          "reaches none. |err|: median over the dataset's "
          "predicted levels; blank when the files record no such quantity or no level is left to predict)")

    print("\nRefusals (the fit may not be asked that far; capbook.engine.stepmodel.ExtrapolationError):")
    for _, r in per.iterrows():
        if r["saturation_refused"] or r["refused_levels"]:
            print(f"  {r['dataset']}: {r['refused_levels']} level(s) past {r['limit_rps']:.3g} req/s refused"
                  + (f"; saturation refused (the simulation unrefused would say {r['saturation_unrefused']:.3g} req/s, "
                     f"measured {r['saturation_measured']:.3g}, highest served {r['highest_served']:.3g}): "
                     f"{r['saturation_refused']}" if r["saturation_refused"] else ""))

    print("\nLevels that are not stable (and why):")
    for _, r in per.iterrows():
        print(f"  {r['dataset']}: {r['unstable'] or 'none'}")

    print("\nBiggest miss per dataset (predicted / measured - 1):")
    big = biggest_misses(rows)
    for _, r in big.iterrows():
        if r["quantity"] == "saturation_rps":
            where = "the plateau"
        else:
            lvl = "burst" if pd.isna(r["level"]) else f"{r['level']:g}"
            where = f"level {lvl} ({'stable' if r['stable'] else 'not stable'})"
        print(f"  {r['dataset']:34s} {r['loop']:6s} {where:26s} "
              f"{r['quantity']:14s} predicted {r['predicted']:.4g}, measured {r['measured']:.4g} ({_pct(r['error'])})")

    print("\nSummary: median over datasets of each dataset's median |error|, against the issue's targets:")
    s = datasets_summary(per)
    s["median_abs_error"] = [("" if pd.isna(v) else f"{100 * v:.1f} %") for v in s["median_abs_error"]]
    s["target"] = [("" if pd.isna(v) else f"{100 * v:.0f} %") for v in s["target"]]
    s["met"] = [("" if v is None or pd.isna(v) else str(v)) for v in s["met"]]
    print(s.to_string(index=False))
    print(f"(targets: {', '.join(f'{k} {100 * v:.0f} %' for k, v in TARGETS.items())}; worst saturation "
          f"{100 * WORST_SATURATION_TARGET:.0f} %)")

    # what the refused extrapolations would have said: a diagnostic for the engine, not the score
    t2 = time.perf_counter()
    rows_u, per_u, _ = shared_fidelity(root, refuse=False)
    wall += time.perf_counter() - t2
    refused = per.loc[per["saturation_refused"].astype(bool) | (per["refused_levels"] > 0), "dataset"].tolist()
    if refused:
        print("\nDiagnostic, not the score: the refused datasets with the refusals ignored (the simulated engine's "
              "own numbers past its limit):")
        u = per_u[per_u["dataset"].isin(refused)]
        print(pd.DataFrame({
            "dataset": u["dataset"], "sat meas": u["saturation_measured"].round(3),
            "sat sim": u["saturation_predicted"].round(3), "sat err": u["saturation_error"].map(_pct),
            "served max": u["highest_served"].round(3),
            "|err| thr": u["throughput_rps_median_abs_error"].map(_abs_pct),
            "|err| E2E": u["e2e_mean_s_median_abs_error"].map(_abs_pct),
            "|err| TTFT p50": u["ttft_p50_s_median_abs_error"].map(_abs_pct),
            "|err| TTFT p99": u["ttft_p99_s_median_abs_error"].map(_abs_pct)}).to_string(index=False))
        big_u = biggest_misses(rows_u[rows_u["dataset"].isin(refused)])
        for _, r in big_u.iterrows():
            lvl = ("the plateau" if r["quantity"] == "saturation_rps" else "level burst" if pd.isna(r["level"])
                   else f"level {r['level']:g}")
            print(f"  biggest: {r['dataset']:34s} {lvl:14s} {r['quantity']:14s} predicted {r['predicted']:.4g}, "
                  f"measured {r['measured']:.4g} ({_pct(r['error'])})")
        su = datasets_summary(per_u)
        print("  all datasets, refusals ignored: " + ", ".join(
            f"{q} {100 * v:.1f} %" for q, v in zip(su["quantity"], su["median_abs_error"]) if pd.notna(v)))

    print(f"\nSkipped ({len(skipped)}):")
    for name, why in skipped:
        print(f"  {name}: {why}")
    print(f"\nwall time {wall:.1f} s for {len(per)} datasets")

    # -- part 2: the KubeCon variants, three models ------------------------------------------------
    kube = root / "realdata" / "inference-perf-kubecon-na-2025"
    if not kube.is_dir():
        return 0
    t = time.perf_counter()
    sweeps = [read_sweep(p) for p in kubecon_variants(kube)]
    table = fidelity(sweeps)
    wall = time.perf_counter() - t
    print("\nPart 2: the KubeCon variants with the three models (issue 14's protocol); median |error| over "
          "variants and stages:")
    summ = fidelity_summary(table)
    summ["median_abs_error"] = (summ["median_abs_error"] * 100).round(1)
    print(summ.to_string(index=False))
    print(f"wall time {wall:.1f} s for {len(sweeps)} variants")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
