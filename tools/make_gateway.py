"""Generate the sample gateway of the running example (fixed seed): ``data/gateway/``.

The gateway serves one chat model (``chat``, the book's illustrative replica) to an interactive
tier (tenants ``web``, ``mobile``, ``agents``) and a batch tier (tenant ``etl``). Its busiest
interactive hour of the history is exactly the running example's **40 requests per
second** (144,000 requests in the hour). Two files:

* ``hourly.csv``: 26 weeks of hourly sums per model, tier and tenant (requests, throttled,
  input and output tokens) — the history the forecast reads;
* ``peak_hours.parquet``: every request of the three busiest consecutive hours of the busiest
  day (15:00–18:00 UTC), in the canonical request-log schema — what the burstiness, the length
  distributions, the busiest 60 minutes and the replay read.

The hourly rows of those three hours are the sums of the log's rows, so the two files agree.

How the hours are made: each tenant's requests per hour = level × 2 % weekly growth
(compounding hour by hour) × the weekly shape of :func:`capbook.forecast.tokens.weekly_profile`
(mobile's afternoon peak two hours later) × log-normal noise (σ = 0.08), scaled so that the
busiest interactive hour of the 26 weeks is 144,000 requests; ``etl`` runs a nightly job at 01:00
UTC (45 minutes at 3 requests/s) and a weekday job at 16:20 (30 minutes at 4 requests/s).
``agents`` has a quota of 19,000 requests an hour: the requests after the quota is used up are
refused (``throttled``; they stay in ``requests``, which counts demand). Tokens per request are
log-normal (interactive input σ = 0.8 clipped to 16–4,096 — the tier's prompt limit, longer
prompts are cut at the gateway — with mean 1,500, output σ = 0.9
capped at ``max_tokens`` = 2,048 with mean 300; batch input median 2,500, σ = 0.6, output
median 120, σ = 0.5, capped at 512); hourly token sums outside the log's hours are drawn from
the normal approximation of those sums.

Inside the log's hours, ``web`` and ``mobile`` arrive as a Poisson process (uniform given the
hour's count), ``agents`` in bursts of 3 to 40 calls within two seconds, ``etl`` at its job's
steady rate. Served requests get ``first_token_time`` = arrival + 20 ms + input / 5,996 tokens/s
+ an exponential wait (mean 50 ms) and ``end_time`` = first token + (output − 1) × 40 ms (the
illustrative replica at its 32 slots); 0.2 % fail.

Run ``python tools/make_gateway.py`` from the repository root (``--check`` compares with the
committed files instead of writing); the output is the same bytes with the same numpy, pandas
and pyarrow versions.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capbook.forecast.tokens import weekly_profile  # noqa: E402

SEED = 20261201
START = pd.Timestamp("2026-01-05 00:00:00", tz="UTC")  # a Monday
WEEKS = 26
MODEL = "chat"
OUT = ROOT / "data" / "gateway"
PEAK_REQUESTS_PER_HOUR = 144_000  # the running example's 40 requests/s
GROWTH = 0.02
NOISE = 0.08
SHARES = {"web": 0.55, "mobile": 0.30, "agents": 0.15}
AGENT_QUOTA = 19_000  # requests per hour
LOG_HOURS = 3  # the busiest consecutive hours of the busiest day are kept as rows
JOBS = ((1.0, 45, 3.0, False), (16 + 20 / 60, 30, 4.0, True))  # start hour, minutes, req/s, weekdays only
PREFILL_TPS = 5_996.0
PROMPT_CAP = 4_096  # the chat tier's prompt limit: longer prompts are cut at the gateway
TPOT_S = 0.040


def _mu_for_mean(mean: float, sigma: float, lo: float, hi: float) -> float:
    """Log-scale location of a log-normal whose mean after clipping to [lo, hi] is ``mean``."""
    from scipy.stats import norm

    def clipped_mean(mu: float) -> float:
        a, b = (np.log(lo) - mu) / sigma, (np.log(hi) - mu) / sigma
        body = np.exp(mu + sigma**2 / 2) * (norm.cdf(b - sigma) - norm.cdf(a - sigma))
        return float(lo * norm.cdf(a) + body + hi * norm.sf(b))

    lo_mu, hi_mu = np.log(mean) - 3.0, np.log(mean) + 1.0
    for _ in range(100):
        mid = 0.5 * (lo_mu + hi_mu)
        lo_mu, hi_mu = (mid, hi_mu) if clipped_mean(mid) < mean else (lo_mu, mid)
    return 0.5 * (lo_mu + hi_mu)


#: (log-scale location, shape, low clip, high clip) of input and output tokens per tier.
LENGTHS = {
    "interactive": {"input": (_mu_for_mean(1500, 0.8, 16, PROMPT_CAP), 0.8, 16, PROMPT_CAP),
                    "output": (_mu_for_mean(300, 0.9, 1, 2048), 0.9, 1, 2048)},
    "batch": {"input": (np.log(2500), 0.6, 64, 32_000), "output": (np.log(120), 0.5, 1, 512)},
}


def _draw(rng, tier: str, kind: str, n: int) -> np.ndarray:
    mu, sigma, lo, hi = LENGTHS[tier][kind]
    return np.clip(np.round(rng.lognormal(mu, sigma, n)), lo, hi).astype(np.int64)


def _moments(tier: str, kind: str, rng) -> tuple[float, float]:
    x = _draw(rng, tier, kind, 400_000).astype(float)
    return float(x.mean()), float(x.std())


def hourly_counts(rng) -> pd.DataFrame:
    """Requests per hour and tenant over the whole history (before throttling)."""
    n = WEEKS * 168
    t = np.arange(n)
    growth = (1 + GROWTH) ** (t / 168.0)
    out = {}
    for tenant in SHARES:
        shape = np.tile(weekly_profile(peak_hour_utc=16.5 if tenant == "mobile" else 14.5), WEEKS)
        out[tenant] = SHARES[tenant] * shape * growth * np.exp(rng.normal(0.0, NOISE, n))
    inter = sum(out.values())
    scale = PEAK_REQUESTS_PER_HOUR / inter.max()
    counts = {k: np.round(v * scale).astype(np.int64) for k, v in out.items()}
    peak = int(np.argmax(inter))
    total = sum(c[peak] for c in counts.values())
    counts["web"][peak] += PEAK_REQUESTS_PER_HOUR - total  # exactly 144,000 in the busy hour
    etl = np.array([len(_job_arrivals(h)) for h in range(n)], dtype=np.int64)
    counts["etl"] = etl
    return pd.DataFrame(counts), peak


def _arrivals(rng, tenant: str, hour_s: float, n: int) -> np.ndarray:
    """Arrival times (s from START) of ``n`` requests of ``tenant`` in the hour at ``hour_s``."""
    if tenant in ("web", "mobile"):
        return hour_s + np.sort(rng.random(n)) * 3600.0
    if tenant == "agents":
        sizes = []
        while sum(sizes) < n:
            sizes.append(int(min(3 + rng.geometric(1 / 6.0), 40)))
        sizes[-1] -= sum(sizes) - n
        starts = rng.random(len(sizes)) * (3600.0 - 2.0)
        t = np.repeat(starts, sizes) + rng.random(n) * 2.0
        return hour_s + np.sort(t)
    raise ValueError(tenant)


def _job_arrivals(hour_index: int) -> np.ndarray:
    """Arrival times of the etl jobs' requests in one hour (steady rate, one per 1/rate s)."""
    out = []
    h0 = hour_index * 3600.0
    d = hour_index // 24
    for start_h, minutes, rate, weekdays in JOBS:
        if weekdays and d % 7 >= 5:
            continue
        s = d * 86400.0 + start_h * 3600.0
        t = s + np.arange(int(minutes * 60 * rate)) / rate
        out.append(t[(t >= h0) & (t < h0 + 3600.0)])
    return np.concatenate(out) if out else np.zeros(0)


def generate(seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return ``(hourly, log)``: the hourly history and the busiest hours' request rows."""
    rng = np.random.default_rng(seed)
    counts, peak = hourly_counts(rng)
    n = len(counts)
    day = peak // 24
    inter = (counts["web"] + counts["mobile"] + counts["agents"]).to_numpy()[day * 24:(day + 1) * 24]
    first = int(np.argmax(np.convolve(inter, np.ones(LOG_HOURS), mode="valid")))
    log_hours = range(day * 24 + first, day * 24 + first + LOG_HOURS)
    rows, hourly = [], []
    mom = {(tier, kind): _moments(tier, kind, np.random.default_rng(seed + 1))
           for tier in LENGTHS for kind in ("input", "output")}
    for tenant in ("web", "mobile", "agents", "etl"):
        tier = "batch" if tenant == "etl" else "interactive"
        req = counts[tenant].to_numpy().copy()
        thr = np.maximum(req - AGENT_QUOTA, 0) if tenant == "agents" else np.zeros(n, dtype=np.int64)
        sums = {}
        for kind in ("input", "output"):
            m, s = mom[(tier, kind)]
            sums[kind] = np.maximum(np.round(req * m + np.sqrt(req) * s * rng.standard_normal(n)), 0).astype(np.int64)
        for h in log_hours:
            t = _job_arrivals(h) if tenant == "etl" else _arrivals(rng, tenant, h * 3600.0, int(req[h]))
            k = len(t)
            req[h] = k
            inp, out = _draw(rng, tier, "input", k), _draw(rng, tier, "output", k)
            sums["input"][h], sums["output"][h] = int(inp.sum()), int(out.sum())
            status = np.full(k, "served", dtype=object)
            if tenant == "agents" and k > AGENT_QUOTA:
                status[AGENT_QUOTA:] = "throttled"  # arrivals are sorted: the last ones of the hour
            thr[h] = int((status == "throttled").sum())
            rows.append(pd.DataFrame({"t": t, "input_tokens": inp, "output_tokens": out, "tier": tier,
                                      "status": status, "tenant": tenant}))
        hourly.append(pd.DataFrame({
            "period_start": (START + pd.to_timedelta(np.arange(n), unit="h")).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "model": MODEL, "tier": tier, "tenant": tenant, "requests": req, "throttled": thr,
            "input_tokens": sums["input"], "output_tokens": sums["output"]}))
    hourly = pd.concat(hourly, ignore_index=True)
    hourly = hourly[hourly["requests"] > 0].sort_values(["period_start", "tier", "tenant"], kind="stable")
    hourly = hourly.reset_index(drop=True)

    df = pd.concat(rows, ignore_index=True)
    df["t_ms"] = np.floor(df["t"].to_numpy() * 1000.0).astype(np.int64)
    df = df.sort_values(["t_ms", "tier", "tenant"], kind="stable").reset_index(drop=True)
    status = df["status"].to_numpy(object).copy()
    failed = (rng.random(len(df)) < 0.002) & (status == "served")
    status[failed] = "failed"
    out_tok = df["output_tokens"].to_numpy(np.int64).copy()
    served = status == "served"
    ttft = 0.02 + df["input_tokens"].to_numpy() / PREFILL_TPS + rng.exponential(0.05, len(df))
    ftt_ms = df["t_ms"].to_numpy() + np.round(ttft * 1000).astype(np.int64)
    end_ms = ftt_ms + np.round(np.maximum(out_tok - 1, 0) * TPOT_S * 1000).astype(np.int64)
    out_tok[failed] = 0

    def ts(ms: np.ndarray, mask: np.ndarray | None = None) -> pd.Series:
        s = pd.Series(pd.to_datetime(START.value // 1_000_000 + ms, unit="ms", utc=True))
        if mask is not None:
            s[~mask] = pd.NaT
        return s.dt.as_unit("ms")

    log = pd.DataFrame({
        "arrival_time": ts(df["t_ms"].to_numpy()),
        "input_tokens": df["input_tokens"].to_numpy(np.int64),
        "output_tokens": out_tok,
        "model": MODEL,
        "tier": df["tier"].to_numpy(object),
        "status": status,
        "first_token_time": ts(ftt_ms, served),
        "end_time": ts(end_ms, served),
        "tenant": df["tenant"].to_numpy(object),
    })
    # a failed request produced no tokens: the hour's output sum counts what the log counts
    fail_out = pd.Series(df["output_tokens"].to_numpy()[failed],
                         index=pd.MultiIndex.from_arrays([df["t_ms"].to_numpy()[failed] // 3_600_000,
                                                          df["tenant"].to_numpy()[failed]]))
    if len(fail_out):
        per = fail_out.groupby(level=[0, 1]).sum()
        starts = (START + pd.to_timedelta(per.index.get_level_values(0), unit="h")).strftime("%Y-%m-%dT%H:%M:%SZ")
        for (ps, tenant), v in zip(zip(starts, per.index.get_level_values(1)), per.to_numpy()):
            m = (hourly["period_start"] == ps) & (hourly["tenant"] == tenant)
            hourly.loc[m, "output_tokens"] -= int(v)
    return hourly, log


def write(hourly: pd.DataFrame, log: pd.DataFrame, out: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT / "tools"))
    from make_request_log import write as write_log

    out.mkdir(parents=True, exist_ok=True)
    hourly.to_csv(out / "hourly.csv", index=False, lineterminator="\n")
    write_log(log, out / "peak_hours.parquet")
    return [out / "hourly.csv", out / "peak_hours.parquet"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args()
    hourly, log = generate(args.seed)
    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for new in write(hourly, log, Path(tmp)):
                old = args.out / new.name
                if not old.is_file() or old.read_bytes() != new.read_bytes():
                    sys.exit(f"{old} differs from what tools/make_gateway.py generates")
        print(f"{args.out}: up to date")
        return
    for p in write(hourly, log, args.out):
        print(f"wrote {p}: {p.stat().st_size / 1e6:.2f} MB")
    print(f"{len(hourly):,} hourly rows, {len(log):,} requests")


if __name__ == "__main__":
    main()
