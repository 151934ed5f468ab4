"""Benchmark: hourly tokens per model and tier from a 20-million-row Parquet request log.

capbook (``read_requests(path).hourly()``: the validating DuckDB pass plus the hourly table)
against plain pandas (``pd.read_parquet`` then ``groupby``), in the same run. Each side runs in
its own subprocess so that its peak resident memory (``VmHWM`` of ``/proc/self/status``; not
``ru_maxrss``, which Linux keeps across fork and exec, so a subprocess started right after the
log was generated reported the generator's peak) is its own. The two hourly
tables are checked equal before any number is printed.

Target: capbook at least 5x faster than pandas, with bounded memory. Times start after the
imports (``capbook.logs.requestlog`` on one side, ``pandas`` and ``pyarrow.parquet`` on the other); the
CPU time (user + system, all threads) is printed beside the wall time because on a busy
machine the wall time mostly measures the wait for a core.

The log is generated once (deterministically, by DuckDB from a hash of the row number) and
cached in ``benchmarks/.cache/`` (git-ignored). Usage::

    .venv/bin/python benchmarks/bench_traces.py [--rows 20000000] [--repeat 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"

CAPBOOK_CODE = r"""
import json, resource, sys, time
from capbook.logs.requestlog import read_requests
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
log = read_requests(sys.argv[1])
h = log.hourly(by=("model", "tier"))
dt = time.perf_counter() - t0
h.to_parquet(sys.argv[2])
ru = resource.getrusage(resource.RUSAGE_SELF)
hwm = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"seconds": dt, "peak_rss_mb": hwm / 1024, "cpu_s": ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime,
                  "rows": log.rows}))
"""

PANDAS_CODE = r"""
import json, resource, sys, time
import pandas as pd
import pyarrow.parquet
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
df = pd.read_parquet(sys.argv[1])
df["throttled"] = (df["status"] == "throttled").astype("int64")
h = (df.groupby([df["arrival_time"].dt.floor("h").rename("period_start"), "model", "tier"], observed=True)
       .agg(requests=("input_tokens", "size"), throttled=("throttled", "sum"),
            input_tokens=("input_tokens", "sum"), output_tokens=("output_tokens", "sum"))
       .reset_index())
dt = time.perf_counter() - t0
h.to_parquet(sys.argv[2])
ru = resource.getrusage(resource.RUSAGE_SELF)
hwm = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({"seconds": dt, "peak_rss_mb": hwm / 1024, "cpu_s": ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime,
                  "rows": int(len(df))}))
"""


def make_log(rows: int) -> Path:
    """Generate (once) a canonical request log of ``rows`` rows over 28 days, plain Parquet."""
    import duckdb

    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"requests_{rows}.parquet"
    if path.exists():
        return path
    span_us = 28 * 86400 * 10**6
    step = span_us // rows
    tmp = path.with_suffix(".tmp")
    t0 = time.perf_counter()
    # arrival i at i*step plus a jitter below step: sorted, deterministic; tokens from hashes
    duckdb.sql(f"""
        COPY (
          SELECT make_timestamptz(CAST(1767571200000000 + i * {step} + hash(i) % {step} AS BIGINT)) AS arrival_time,
                 CAST(1 + hash(i + 1) % 4000 AS BIGINT) AS input_tokens,
                 CAST(1 + hash(i + 2) % 1000 AS BIGINT) AS output_tokens,
                 CASE WHEN hash(i + 3) % 10 < 7 THEN 'chat-70b' ELSE 'chat-8b' END AS model,
                 CASE WHEN hash(i + 4) % 10 < 8 THEN 'interactive' ELSE 'batch' END AS tier,
                 CASE WHEN hash(i + 5) % 100 < 2 THEN 'throttled' ELSE 'served' END AS status
          FROM range({rows}) t(i) ORDER BY i
        ) TO '{tmp}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)
    """)
    tmp.rename(path)
    print(f"generated {path} ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
    return path


def run(code: str, path: Path, out: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code, str(path), str(out)], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=2, help="runs per side; the fastest counts")
    args = ap.parse_args()
    import pandas as pd

    path = make_log(args.rows)
    cap_out, pd_out = CACHE / "hourly_capbook.parquet", CACHE / "hourly_pandas.parquet"
    caps, pds = [], []
    for _ in range(args.repeat):  # alternate, so that background load hits both sides alike
        caps.append(run(CAPBOOK_CODE, path, cap_out))
        pds.append(run(PANDAS_CODE, path, pd_out))
    a = pd.read_parquet(cap_out)
    b = pd.read_parquet(pd_out)
    a = a[a["requests"] > 0].sort_values(["period_start", "model", "tier"]).reset_index(drop=True)
    b = b.sort_values(["period_start", "model", "tier"]).reset_index(drop=True)
    cols = ["requests", "throttled", "input_tokens", "output_tokens"]
    assert len(a) == len(b) and (a[cols].to_numpy() == b[cols].to_numpy()).all(), "results differ"
    assert (a["period_start"].to_numpy() == b["period_start"].dt.tz_convert("UTC").to_numpy()).all()
    c = min(caps, key=lambda d: d["seconds"])
    p = min(pds, key=lambda d: d["seconds"])
    ratio = p["seconds"] / c["seconds"]
    print(f"log: {args.rows:,} rows, {path.stat().st_size / 1e6:.0f} MB Parquet; "
          f"{len(a):,} hourly rows (model x tier); cores: {os.cpu_count()}")
    print(f"capbook (validate + hourly, DuckDB): {c['seconds']:7.2f} s wall, {c['cpu_s']:7.2f} s CPU, "
          f"peak RSS {c['peak_rss_mb']:6.0f} MB")
    print(f"pandas  (read_parquet + groupby)   : {p['seconds']:7.2f} s wall, {p['cpu_s']:7.2f} s CPU, "
          f"peak RSS {p['peak_rss_mb']:6.0f} MB")
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} cores"
          + ("  (a busy machine: wall times are inflated, compare CPU times too)" if load > os.cpu_count() else ""))
    print(f"all runs (s): capbook {[round(d['seconds'], 2) for d in caps]}, "
          f"pandas {[round(d['seconds'], 2) for d in pds]}")
    print(f"CPU-time ratio pandas/capbook: {p['cpu_s'] / c['cpu_s']:.1f}x")
    print(f"speed ratio pandas/capbook: {ratio:.1f}x (target >= 5x); "
          f"memory ratio: {p['peak_rss_mb'] / c['peak_rss_mb']:.1f}x")


if __name__ == "__main__":
    main()
