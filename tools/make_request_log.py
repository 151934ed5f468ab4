"""Generate the sample request log ``data/requests/sample_requests.parquet`` (fixed seed).

Four weeks of a gateway serving two models (``chat-70b``, ``chat-8b``) to an interactive tier
and a batch tier, in the canonical capbook schema (see ``data/README.md``):

* Interactive arrivals: a Poisson process whose rate follows a weekday/weekend daily shape, a
  2 % week-over-week growth and hour-to-hour log-normal noise, plus bursts of agent calls
  (3 to 40 requests within two seconds) that make arrivals burstier than Poisson.
* Batch arrivals: nightly jobs (01:00 UTC, plus one or two daytime jobs on weekdays) that submit
  requests at a steady rate for tens of minutes, mostly to the small model.
* Tokens: log-normal input and output lengths; interactive output is capped at 2,048 tokens
  (``max_tokens``), batch output at 512.
* Status: a tokens-per-minute limit per model and tier throttles requests in the busiest minutes
  (``throttled``); 0.2 % of requests fail (``failed``, zero output tokens). A throttled row keeps
  the output tokens the request *would* have produced: a real gateway cannot know them.
* ``first_token_time`` and ``end_time`` of served requests come from a simple serving model
  (prefill at 12,000 tokens/s plus a small queueing delay, then a fixed time per output token).

Run ``python tools/make_request_log.py`` from the repository root; the output is byte-for-byte
the same on every run with the same numpy and pyarrow versions.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20261130
START = pd.Timestamp("2026-01-05 00:00:00", tz="UTC")  # a Monday
DAYS = 28
MODELS = ("chat-70b", "chat-8b")
OUT = Path(__file__).resolve().parents[1] / "data" / "requests" / "sample_requests.parquet"

# interactive mean rate at the weekday peak, requests/s, per model (week 1)
PEAK_RATE = {"chat-70b": 0.15, "chat-8b": 0.08}
TPOT_S = {"chat-70b": 0.040, "chat-8b": 0.016}  # seconds per output token when served
PREFILL_TPS = 12_000.0


def _daily_shape(hour_of_day: np.ndarray, weekend: np.ndarray) -> np.ndarray:
    """Relative interactive rate by UTC hour: a morning ramp, an afternoon peak, a quiet night."""
    h = hour_of_day
    day = 0.18 + 0.82 * np.exp(-0.5 * ((h - 15.0) / 3.6) ** 2) + 0.25 * np.exp(-0.5 * ((h - 9.5) / 1.5) ** 2)
    return np.where(weekend, 0.45 * day, day)


def generate(seed: int = SEED) -> pd.DataFrame:
    """Return the sample log as a canonical DataFrame sorted by arrival time."""
    rng = np.random.default_rng(seed)
    n_min = DAYS * 24 * 60
    minute = np.arange(n_min)
    hour = minute // 60
    hod = (hour % 24).astype(float) + 0.5
    dow = (hour // 24) % 7
    weekend = dow >= 5
    week = minute / (7 * 24 * 60)
    growth = 1.02 ** week
    hour_noise = np.exp(rng.normal(0.0, 0.12, DAYS * 24) - 0.5 * 0.12**2)[hour]
    shape = _daily_shape(hod, weekend) * growth * hour_noise

    parts = []
    # --- interactive: Poisson per minute, uniform within the minute
    for m in MODELS:
        lam = PEAK_RATE[m] * 60.0 * shape
        counts = rng.poisson(lam)
        t = (np.repeat(minute, counts) + rng.random(counts.sum())) * 60.0
        parts.append(pd.DataFrame({"t": t, "model": m, "tier": "interactive",
                                   "tenant": rng.choice(["web", "mobile"], size=len(t), p=[0.7, 0.3])}))
        # agent bursts: 3-40 calls within 2 s
        bursts = rng.poisson(lam / 60.0 * 0.5)  # about half a burst per minute at the peak
        b_start = (np.repeat(minute, bursts) + rng.random(bursts.sum())) * 60.0
        size = np.minimum(3 + rng.geometric(1 / 6.0, size=len(b_start)), 40)
        bt = np.repeat(b_start, size) + rng.random(size.sum()) * 2.0
        parts.append(pd.DataFrame({"t": bt, "model": m, "tier": "interactive", "tenant": "agents"}))
    inter = pd.concat(parts, ignore_index=True)
    n_i = len(inter)
    inter["input_tokens"] = np.clip(np.round(rng.lognormal(np.log(800), 1.1, n_i)), 16, 32_000)
    inter["output_tokens"] = np.clip(np.round(rng.lognormal(np.log(220), 0.9, n_i)), 1, 2048)

    # --- batch jobs: nightly at 01:00 and one or two daytime jobs on weekdays
    jobs = []
    for d in range(DAYS):
        jobs.append((d * 86400 + 3600 + rng.uniform(0, 600), rng.uniform(1800, 3600)))
        if (d % 7) < 5:
            for _ in range(rng.integers(1, 3)):
                jobs.append((d * 86400 + rng.uniform(8, 20) * 3600, rng.uniform(600, 1800)))
    bparts = []
    for start, dur in jobs:
        rate = rng.uniform(0.4, 0.8)  # requests/s submitted by the job
        n = rng.poisson(rate * dur)
        t = start + np.sort(rng.random(n)) * dur
        model = np.where(rng.random(n) < 0.8, "chat-8b", "chat-70b")
        bparts.append(pd.DataFrame({"t": t, "model": model, "tier": "batch", "tenant": "etl"}))
    batch = pd.concat(bparts, ignore_index=True)
    n_b = len(batch)
    batch["input_tokens"] = np.clip(np.round(rng.lognormal(np.log(2500), 0.6, n_b)), 64, 32_000)
    batch["output_tokens"] = np.clip(np.round(rng.lognormal(np.log(120), 0.5, n_b)), 1, 512)

    df = pd.concat([inter, batch], ignore_index=True)
    df = df[df["t"] < DAYS * 86400.0]
    # millisecond resolution, like most gateway logs
    df["t_ms"] = np.floor(df["t"].to_numpy() * 1000.0).astype(np.int64)
    df = df.sort_values(["t_ms", "model", "tier"], kind="stable").reset_index(drop=True)
    df["input_tokens"] = df["input_tokens"].astype(np.int64)
    df["output_tokens"] = df["output_tokens"].astype(np.int64)

    # --- throttling: tokens-per-minute limit per model and tier
    status = np.full(len(df), "served", dtype=object)
    tokens = (df["input_tokens"] + df["output_tokens"]).to_numpy()
    key = (df["t_ms"] // 60_000).astype(str) + "|" + df["model"] + "|" + df["tier"]
    cum = pd.Series(tokens).groupby(key.to_numpy()).cumsum().to_numpy()
    per_min = pd.Series(tokens).groupby(key.to_numpy()).sum()
    for m in MODELS:
        for tier, q in (("interactive", 0.995), ("batch", 0.98)):
            sel = per_min[per_min.index.str.endswith(f"|{m}|{tier}")]
            if len(sel) == 0:
                continue
            limit = float(np.quantile(sel.to_numpy(), q))
            rows = (df["model"].to_numpy() == m) & (df["tier"].to_numpy() == tier) & (cum > limit)
            status[rows] = "throttled"
    failed = (rng.random(len(df)) < 0.002) & (status == "served")
    status[failed] = "failed"
    out_tok = df["output_tokens"].to_numpy().copy()
    out_tok[failed] = 0

    # --- serving times of served requests
    served = status == "served"
    tpot = np.where(df["model"].to_numpy() == "chat-70b", TPOT_S["chat-70b"], TPOT_S["chat-8b"])
    ttft = 0.08 + df["input_tokens"].to_numpy() / PREFILL_TPS + rng.exponential(0.05, len(df))
    ftt_ms = df["t_ms"].to_numpy() + np.round(ttft * 1000).astype(np.int64)
    end_ms = ftt_ms + np.round(out_tok * tpot * 1000).astype(np.int64)

    def ts(ms: np.ndarray, mask: np.ndarray | None = None) -> pd.Series:
        s = pd.Series(pd.to_datetime(START.value // 1_000_000 + ms, unit="ms", utc=True))
        if mask is not None:
            s[~mask] = pd.NaT
        return s.dt.as_unit("ms")

    return pd.DataFrame({
        "arrival_time": ts(df["t_ms"].to_numpy()),
        "input_tokens": df["input_tokens"].to_numpy(np.int64),
        "output_tokens": out_tok.astype(np.int64),
        "model": df["model"].to_numpy(object),
        "tier": df["tier"].to_numpy(object),
        "status": status,
        "first_token_time": ts(ftt_ms, served),
        "end_time": ts(end_ms, served),
        "tenant": df["tenant"].to_numpy(object),
    })


def write(df: pd.DataFrame, path: Path) -> None:
    """Write the log as compressed Parquet (timestamps delta-encoded, labels dictionary-encoded)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(None)  # no pandas metadata: a plain Parquet log
    pq.write_table(
        table, path, compression="zstd", compression_level=19,
        use_dictionary=["model", "tier", "status", "tenant"],
        column_encoding={c: "DELTA_BINARY_PACKED" for c in
                         ("arrival_time", "first_token_time", "end_time", "input_tokens", "output_tokens")},
        row_group_size=1_000_000,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    df = generate(args.seed)
    write(df, args.out)
    print(f"wrote {args.out}: {len(df):,} rows, {args.out.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
