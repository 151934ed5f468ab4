"""Generate a big request log shaped like the sample gateway's (fixed seed), as Parquet.

For measuring ``capbook plan`` on logs of tens of millions of rows (issue 33): the default is a
week at a mean of 50 requests per second, about 30 million rows. The log has the sample
gateway's columns, model, tiers, tenants and statuses (:mod:`tools.make_gateway`: one model
``chat``; tenants ``web``, ``mobile``, ``agents`` in the interactive tier and ``etl`` in the
batch tier) and its shapes:

* requests per hour and tenant follow the weekly shape of
  :func:`capbook.forecast.tokens.weekly_profile` (mobile's afternoon peak two hours later) times
  log-normal noise (σ = 0.08), scaled so the interactive tier's mean over the span is ``rate``
  minus the batch jobs;
* inside an hour ``web`` and ``mobile`` arrive as a Poisson process (uniform given the hour's
  count), ``agents`` in bursts of 3 to 40 calls within two seconds, ``etl`` as the gateway's two
  jobs (nightly at 01:00 UTC, 45 minutes at 3 requests/s; weekdays at 16:20, 30 minutes at
  4 requests/s);
* tokens per request, first-token and end times, failures (0.2 %) as in the gateway; agents'
  requests beyond 1.2 times their mean hourly count in an hour are ``throttled``.

The file is written one hour at a time (one Parquet row group an hour), so generating it takes
memory for one hour's rows, not for the log. Times are milliseconds, UTC, from Monday
2026-01-05.

Run from the repository root, e.g. ``python tools/make_big_log.py /tmp/big/week.parquet``
(``--rows 4e6`` for a shorter span at the same rate, ``--rate``, ``--hours``, ``--seed``).
The same arguments give the same rows with the same numpy version. Never write it into the
repository.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from capbook.forecast.tokens import weekly_profile  # noqa: E402
from make_gateway import (MODEL, NOISE, PREFILL_TPS, SHARES, START, TPOT_S, _draw,  # noqa: E402
                          _job_arrivals)

SEED = 20261204
#: Mean requests per second over the span (all tenants).
RATE = 50.0
#: Hours of a week.
WEEK_HOURS = 168
#: Agents' hourly quota, as a multiple of their mean hourly count.
AGENT_QUOTA_FACTOR = 1.2

_SCHEMA = pa.schema([
    ("arrival_time", pa.timestamp("ms", tz="UTC")),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("model", pa.string()),
    ("tier", pa.string()),
    ("status", pa.string()),
    ("first_token_time", pa.timestamp("ms", tz="UTC")),
    ("end_time", pa.timestamp("ms", tz="UTC")),
    ("tenant", pa.string()),
])


def hourly_counts(hours: int, rate: float, rng: np.random.Generator) -> dict:
    """Requests per hour of each tenant (``etl``: the jobs' fixed counts) for ``hours`` hours."""
    t = np.arange(hours)
    etl = np.array([len(_job_arrivals(h)) for h in t], dtype=np.int64)
    out = {}
    for tenant, share in SHARES.items():
        shape = np.resize(weekly_profile(peak_hour_utc=16.5 if tenant == "mobile" else 14.5), hours)
        out[tenant] = share * shape * np.exp(rng.normal(0.0, NOISE, hours))
    inter = sum(out.values())
    want = max(rate * 3600.0 * hours - float(etl.sum()), 0.0)
    scale = want / float(inter.sum())
    counts = {k: np.round(v * scale).astype(np.int64) for k, v in out.items()}
    counts["etl"] = etl
    return counts


def _agent_arrivals(rng: np.random.Generator, hour_s: float, n: int) -> np.ndarray:
    """``n`` agents' calls in bursts of 3 to 40 within two seconds (vectorised)."""
    if n == 0:
        return np.zeros(0)
    sizes = np.minimum(3 + rng.geometric(1 / 6.0, size=n // 3 + 1), 40)
    ends = np.cumsum(sizes)
    k = int(np.searchsorted(ends, n)) + 1
    sizes = sizes[:k].copy()
    sizes[-1] -= int(ends[k - 1]) - n
    starts = rng.random(k) * (3600.0 - 2.0)
    return hour_s + np.sort(np.repeat(starts, sizes) + rng.random(n) * 2.0)


def one_hour(h: int, counts: dict, quota: int, rng: np.random.Generator) -> pa.Table:
    """The rows of hour ``h`` (from START), sorted by arrival, as an Arrow table."""
    parts = []
    for tenant in ("web", "mobile", "agents", "etl"):
        tier = "batch" if tenant == "etl" else "interactive"
        n = int(counts[tenant][h])
        if tenant == "etl":
            t = _job_arrivals(h)
        elif tenant == "agents":
            t = _agent_arrivals(rng, h * 3600.0, n)
        else:
            t = h * 3600.0 + np.sort(rng.random(n)) * 3600.0
        k = len(t)
        status = np.full(k, "served", dtype=object)
        if tenant == "agents" and k > quota:
            status[quota:] = "throttled"
        parts.append(pd.DataFrame({"t_ms": np.floor(t * 1000.0).astype(np.int64),
                                   "input_tokens": _draw(rng, tier, "input", k),
                                   "output_tokens": _draw(rng, tier, "output", k),
                                   "tier": tier, "status": status, "tenant": tenant}))
    df = pd.concat(parts, ignore_index=True).sort_values(["t_ms", "tier", "tenant"], kind="stable")
    n = len(df)
    t_ms = df["t_ms"].to_numpy()
    status = df["status"].to_numpy(object).copy()
    failed = (rng.random(n) < 0.002) & (status == "served")
    status[failed] = "failed"
    inp = df["input_tokens"].to_numpy(np.int64)
    out = df["output_tokens"].to_numpy(np.int64).copy()
    served = status == "served"
    ttft = 0.02 + inp / PREFILL_TPS + rng.exponential(0.05, n)
    ftt = t_ms + np.round(ttft * 1000).astype(np.int64)
    end = ftt + np.round(np.maximum(out - 1, 0) * TPOT_S * 1000).astype(np.int64)
    out[failed] = 0
    base = START.value // 1_000_000
    return pa.table({
        "arrival_time": pa.array(base + t_ms, pa.timestamp("ms", tz="UTC")),
        "input_tokens": pa.array(inp),
        "output_tokens": pa.array(out),
        "model": pa.array(np.full(n, MODEL, dtype=object), pa.string()),
        "tier": pa.array(df["tier"].to_numpy(object), pa.string()),
        "status": pa.array(status, pa.string()),
        "first_token_time": pa.array(base + ftt, pa.timestamp("ms", tz="UTC"), mask=~served),
        "end_time": pa.array(base + end, pa.timestamp("ms", tz="UTC"), mask=~served),
        "tenant": pa.array(df["tenant"].to_numpy(object), pa.string()),
    }, schema=_SCHEMA)


def make_big_log(path, *, rows: float | None = None, rate: float = RATE, hours: int | None = None,
                 seed: int = SEED, quiet: bool = True) -> int:
    """Write the log to ``path`` (Parquet, one row group an hour); returns its number of rows.

    Parameters
    ----------
    path : str or pathlib.Path
    rows : float, optional
        About how many rows: the span is ``rows / rate`` seconds, rounded to whole hours
        (default: ``hours``).
    rate : float
        Mean requests per second over the span.
    hours : int, optional
        Hours from Monday 2026-01-05 00:00 UTC (default: a week, 168).
    seed : int
    quiet : bool
        Print progress every 24 hours when False.
    """
    if rate <= 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate!r}")
    if rows is not None:
        if hours is not None:
            raise ValueError("give rows or hours, not both")
        hours = max(1, int(round(float(rows) / (rate * 3600.0))))
    hours = WEEK_HOURS if hours is None else int(hours)
    if hours < 1:
        raise ValueError(f"hours must be >= 1, got {hours}")
    rng = np.random.default_rng(seed)
    counts = hourly_counts(hours, rate, rng)
    quota = int(AGENT_QUOTA_FACTOR * counts["agents"].mean())
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    n = 0
    t0 = time.perf_counter()
    with pq.ParquetWriter(tmp, _SCHEMA, compression="zstd") as w:
        for h in range(hours):
            table = one_hour(h, counts, quota, rng)
            w.write_table(table, row_group_size=len(table) + 1)
            n += len(table)
            if not quiet and (h + 1) % 24 == 0:
                print(f"  {h + 1} of {hours} hours, {n:,} rows, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    tmp.replace(path)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the Parquet file to write (outside the repository, e.g. under /tmp)")
    ap.add_argument("--rows", type=float, default=None, help="about how many rows (sets the span at --rate)")
    ap.add_argument("--rate", type=float, default=RATE, help=f"mean requests per second (default {RATE:g})")
    ap.add_argument("--hours", type=int, default=None, help=f"hours to generate (default {WEEK_HOURS}, a week)")
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    if a.out.resolve().is_relative_to(ROOT):
        ap.error(f"{a.out}: write the big log outside the repository (e.g. under /tmp)")
    t0 = time.perf_counter()
    n = make_big_log(a.out, rows=a.rows, rate=a.rate, hours=a.hours, seed=a.seed, quiet=False)
    print(f"wrote {a.out}: {n:,} rows in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
