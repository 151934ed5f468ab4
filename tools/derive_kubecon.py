"""Derive ``data/realdata/kubecon_inference_perf.csv`` from the KubeCon NA 2025 inference-perf data.

Usage::

    python tools/derive_kubecon.py PATH            # write the table
    python tools/derive_kubecon.py PATH --check    # exit 1 if the committed table differs

``PATH`` is the folder copied from kubernetes-sigs/inference-perf at commit
7de5ef2ed6f7934e0ecbc8297e593f79e68430c0, ``demos/kubecon-na-2025/`` (one sub-folder per
vLLM variant, each with ``results/stage_N_lifecycle_metrics.json`` and ``manifests.yaml``).
Each variant is read with :func:`capbook.sweeps.importers.read_sweep`; its levels (``.table``) and
saturated stages (``.saturated``) are concatenated, a ``variant`` column (the sweep name) is
added, and only the columns the models of :mod:`capbook.engine.predict` and the protocol of
:mod:`capbook.engine.fidelity` read are kept (no file paths). Rows are sorted by variant and requested
rate; floats are written as the shortest text that reads back to the same double (Python's
``repr``), so the table is byte-for-byte reproducible and loses nothing.
``data/README.md`` describes the columns; :func:`capbook.app.datasets.load_kubecon_sweeps` reads it.
"""
from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "data" / "realdata" / "kubecon_inference_perf.csv"

#: Columns kept, in order. Absent ones (an older importer) are written empty.
COLUMNS = [
    "variant", "point", "request_rate_target", "saturated", "saturation_reason",
    # the sweep-table metrics (capbook.sweeps.sweep.METRIC_COLUMNS)
    "concurrency", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p95_s", "tpot_p99_s",
    "request_throughput_rps", "output_throughput_tps", "mean_input_tokens", "mean_output_tokens",
    "num_requests",
    # what the engine fit and the protocol read besides
    "mean_e2e_s", "mean_ttft_s", "schedule_delay_mean_s", "achieved_rate_rps", "failed_requests",
    "load_kind", "concurrency_source",
    "output_tokens_min", "output_tokens_p1", "output_tokens_p5", "output_tokens_p10", "output_tokens_p25",
    "output_tokens_p50", "output_tokens_p75", "output_tokens_p90", "output_tokens_p95", "output_tokens_p99",
    "output_tokens_max", "input_tokens_p50", "input_tokens_p99",
    # the TPOT caveat: the reported p50 and the factor the importer rescaled by
    "tpot_reported_p50_s", "tpot_rescale",
    # configuration and engine limits
    "model", "gpu", "tensor_parallel", "engine", "precision", "quantization", "kv_cache_dtype",
    "max_num_seqs", "chunked_prefill", "prefix_caching", "max_num_batched_tokens", "max_model_len",
    "gpu_memory_utilization", "num_speculative_tokens", "speculative_method", "engine_v1", "engine_args",
]


def _cell(v) -> str:
    """One value as CSV text: empty for missing, repr for floats (exact), True/False, integers."""
    import numpy as np

    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return "" if math.isnan(f) else repr(f)
    return str(v)


def derive(root) -> "pandas.DataFrame":  # noqa: F821
    """The derived table (one row per stage of every variant under ``root``)."""
    import pandas as pd

    from capbook.engine.fidelity import kubecon_variants
    from capbook.sweeps.importers import read_sweep

    variants = kubecon_variants(root)
    if not variants:
        raise SystemExit(f"{root}: no variant folder with a results/ sub-folder")
    frames = []
    for path in variants:
        sw = read_sweep(path)
        parts = [sw.table] + ([sw.saturated] if sw.saturated is not None and len(sw.saturated) else [])
        df = pd.concat(parts, ignore_index=True)
        df.insert(0, "variant", sw.name)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    for c in COLUMNS:
        if c not in df:
            df[c] = None
    df = df[COLUMNS].sort_values(["variant", "request_rate_target"], kind="stable").reset_index(drop=True)
    return df


def to_csv_text(df) -> str:
    """The table as CSV text (fixed float formatting, ``\\n`` line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(df.columns))
    for row in df.itertuples(index=False):
        w.writerow([_cell(v) for v in row])
    return buf.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="the demos/kubecon-na-2025 folder (six variant sub-folders)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    from tools._outputs import write_or_check

    text = to_csv_text(derive(args.root))
    return write_or_check(args.out, text, check=args.check, summary=f"{text.count(chr(10)) - 1} rows")


if __name__ == "__main__":
    raise SystemExit(main())
