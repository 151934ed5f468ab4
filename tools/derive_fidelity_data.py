"""Derive ``data/realdata/fidelity_sweeps.csv``: real open-loop rate sweeps beyond the KubeCon demo.

Usage::

    python tools/derive_fidelity_data.py SHARED            # write the table
    python tools/derive_fidelity_data.py SHARED --check    # exit 1 if the committed table differs

``SHARED`` is the ``../shared`` data folder. Each dataset of :data:`DATASETS` is read with
:func:`capbook.sweeps.importers.read_sweep` (the filter and load axis given there); its levels
(``.table``) and saturated stages (``.saturated``) are concatenated, a ``dataset`` column is added
with the hardware the source's README states (``model`` as a Hugging Face id, ``gpu``,
``tensor_parallel``), and only the columns of ``tools/derive_kubecon.py`` are kept (no file
paths). Rows are sorted by dataset and requested rate; floats are written with ``repr`` so the
table is byte-for-byte reproducible. ``data/README.md`` gives the sources, licences and columns;
:func:`capbook.app.datasets.load_fidelity_sweeps` reads it.

Only permissively licensed sources with several load levels are used: the SGLang
``bench_serving`` runs of datacrunch-research/h200-benchmarks (MIT). llm-d-benchmark exp-7
(Apache-2.0) is not: it has one request rate per setup, so nothing can be held out.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "data" / "realdata" / "fidelity_sweeps.csv"

#: (dataset name, folder under SHARED, read_sweep filter, model HF id, GPU, tensor parallel).
#: Hardware from ../shared/sweeps/README.md (upstream sglang/experiments/*.sh).
DATASETS = [
    ("sglang-llama70b-h200-tp4", "sweeps/sglang/datacrunch-h200",
     {"params_b": "70", "workload": "random 1024/1024"}, "meta-llama/Llama-3.3-70B-Instruct", "H200-SXM-141GB", 4),
    ("sglang-llama405b-h200-tp8", "sweeps/sglang/datacrunch-h200",
     {"params_b": "405", "workload": "random 1024/1024"}, "meta-llama/Llama-3.1-405B-Instruct", "H200-SXM-141GB", 8),
]


def derive(shared) -> "pandas.DataFrame":  # noqa: F821
    """The derived table (one row per level of every dataset of :data:`DATASETS` under ``shared``)."""
    import pandas as pd

    from capbook.sweeps.importers import read_sweep
    from tools.derive_kubecon import COLUMNS as KUBECON_COLUMNS  # noqa: E402

    frames = []
    for name, rel, where, model, gpu, tp in DATASETS:
        path = Path(shared) / rel
        if not path.exists():
            raise SystemExit(f"{path}: not found (SHARED should be the ../shared data folder)")
        sw = read_sweep(path, where=dict(where), load="rate")
        parts = [sw.table] + ([sw.saturated] if sw.saturated is not None and len(sw.saturated) else [])
        df = pd.concat(parts, ignore_index=True)
        df["model"], df["gpu"], df["tensor_parallel"] = model, gpu, tp
        df = df.drop(columns=["dataset"], errors="ignore")  # the importer's prompt-set name (the filter says it)
        df.insert(0, "dataset", name)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    columns = ["dataset"] + [c for c in KUBECON_COLUMNS if c != "variant"]
    for c in columns:
        if c not in df:
            df[c] = None
    return df[columns].sort_values(["dataset", "request_rate_target"], kind="stable").reset_index(drop=True)


def to_csv_text(df) -> str:
    """The table as CSV text, formatted as ``tools/derive_kubecon.py`` does (floats by ``repr``)."""
    from tools.derive_kubecon import to_csv_text as kubecon_csv_text

    return kubecon_csv_text(df)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shared", type=Path, help="the ../shared data folder")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    from tools._outputs import write_or_check

    text = to_csv_text(derive(args.shared))
    return write_or_check(args.out, text, check=args.check, summary=f"{text.count(chr(10)) - 1} rows")


if __name__ == "__main__":
    raise SystemExit(main())
