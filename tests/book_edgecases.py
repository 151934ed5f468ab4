"""Generated edge cases of a reader's data for the book (``capbook book``): request logs and sweeps.

Each generator writes one small file in a documented layout and returns its path:

* logs, in the canonical layout of :mod:`capbook.logs.requestlog` (Parquet): ``base`` (two models, two
  tiers, first-token and end times, no tenant column), ``one_tenant``, ``tenant_per_user`` (a
  tenant for each of thousands of users, with 1–2 requests each), ``one_model``, ``minutes``
  (ten minutes), ``weeks`` (three weeks at a low rate with a daily shape) and ``no_end_times``
  (only arrival time and the two token counts: no latency columns, model, tier or status),
  ``quiet`` (two days at a few requests an hour);
* sweeps: ``p50_only`` (a capbook sweep CSV with the median percentiles only), ``single_level``
  (one load level), ``open_from_8`` (three request rates, the lowest level near 8, none at 1),
  ``open_loop`` (vLLM ``bench serve`` JSON files at request rates, so the
  concurrency is Little's law's), ``closed_loop`` (the same at fixed ``max_concurrency``) and
  ``vllm_default`` (vLLM's default output: ``--metric-percentiles 99``, so medians, means and p99,
  no p95).

The sweeps are derived from the book's illustrative sample sweep so that their numbers are
those of a plausible replica; the logs are Poisson arrivals with lengths near the sweep's mix.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from capbook.paths import data_path

T0 = pd.Timestamp("2026-02-02", tz="UTC")


def _arrivals(rng, seconds: float, rate: float, *, daily: bool = False) -> np.ndarray:
    """Poisson arrival offsets (seconds) over ``seconds`` at ``rate`` requests/s (``daily``: a
    day-and-night shape by thinning)."""
    n = int(rate * seconds * 1.3) + 10
    t = np.cumsum(rng.exponential(1 / rate, n))
    t = t[t < seconds]
    if daily:
        keep = rng.random(t.size) < 0.55 + 0.45 * np.sin(2 * np.pi * (t / 86400.0 - 0.25))
        t = t[keep]
    return t


def _frame(rng, t: np.ndarray, *, models=("chat-a", "chat-b"), tiers=("interactive", "batch"),
           latency: bool = True) -> pd.DataFrame:
    n = t.size
    inp = rng.integers(200, 3000, n)
    out = rng.integers(20, 600, n)
    df = pd.DataFrame({"arrival_time": T0 + pd.to_timedelta(np.round(t * 1e6), unit="us"),
                       "input_tokens": inp, "output_tokens": out})
    if models is not None:
        df["model"] = rng.choice(list(models), n, p=None if len(models) == 1 else [0.7, 0.3][:len(models)])
    if tiers is not None:
        df["tier"] = rng.choice(list(tiers), n, p=None if len(tiers) == 1 else [0.85, 0.15][:len(tiers)])
        df["status"] = "served"
    if latency:
        ttft = 0.2 + inp / 8000.0
        df["first_token_time"] = df["arrival_time"] + pd.to_timedelta(np.round(ttft * 1e6), unit="us")
        df["end_time"] = df["first_token_time"] + pd.to_timedelta(np.round(out * 0.03 * 1e6), unit="us")
    return df


def _write(df: pd.DataFrame, folder: Path, name: str) -> Path:
    p = Path(folder) / f"{name}.parquet"
    df.to_parquet(p, index=False)
    return p


def log_base(folder, seed=1, hours=2.0, rate=2.0) -> Path:
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, hours * 3600, rate)), folder, "base")


def log_one_tenant(folder, seed=2) -> Path:
    rng = np.random.default_rng(seed)
    df = _frame(rng, _arrivals(rng, 2 * 3600, 2.0))
    df["tenant"] = "team-a"
    return _write(df, folder, "one_tenant")


def log_tenant_per_user(folder, seed=3) -> Path:
    """Every tenant has one or two requests: thousands of tenants, none with three."""
    rng = np.random.default_rng(seed)
    df = _frame(rng, _arrivals(rng, 2 * 3600, 1.0))
    df["tenant"] = [f"user-{i // 2 if i % 3 else i}" for i in range(len(df))]
    assert df["tenant"].value_counts().max() <= 2
    return _write(df, folder, "tenant_per_user")


def log_one_model(folder, seed=4) -> Path:
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, 2 * 3600, 2.0), models=("only-model",), tiers=("interactive",)),
                  folder, "one_model")


def log_minutes(folder, seed=5) -> Path:
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, 600, 3.0)), folder, "minutes")


def log_weeks(folder, seed=6) -> Path:
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, 21 * 86400, 0.05, daily=True)), folder, "weeks")


def log_no_end_times(folder, seed=7) -> Path:
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, 2 * 3600, 2.0), models=None, tiers=None, latency=False),
                  folder, "no_end_times")


def log_quiet(folder, seed=8) -> Path:
    """Two days at a few requests an hour (most hours' median rate rounds to 0.0 requests/s)."""
    rng = np.random.default_rng(seed)
    return _write(_frame(rng, _arrivals(rng, 2 * 86400, 0.004)), folder, "quiet")


LOGS = {"base": log_base, "quiet": log_quiet, "one_tenant": log_one_tenant, "tenant_per_user": log_tenant_per_user,
        "one_model": log_one_model, "minutes": log_minutes, "weeks": log_weeks, "no_end_times": log_no_end_times}


def _illustrative() -> pd.DataFrame:
    return pd.read_csv(data_path("sweeps", "illustrative_chat.csv"))


def sweep_p50_only(folder) -> Path:
    t = _illustrative()
    blank = [c for c in t.columns if c.endswith(("_p95_s", "_p99_s"))]     # the layout's columns, empty
    drop = [c for c in t.columns if c.endswith("_mean_s")]
    p = Path(folder) / "p50_only.csv"
    t.drop(columns=drop).assign(sweep="p50_only", **{c: np.nan for c in blank}).to_csv(p, index=False)
    return p


def sweep_single_level(folder) -> Path:
    t = _illustrative()
    p = Path(folder) / "single_level.csv"
    t[t["concurrency"] == 16].assign(sweep="single_level").to_csv(p, index=False)
    return p


def _vllm_json(row, *, max_concurrency=None, request_rate=None, percentiles=(99,)) -> dict:
    """One ``vllm bench serve --save-result`` summary for a row of the illustrative sweep."""
    n = int(row["num_requests"])
    e2e = float(row["e2e_mean_s"])
    d = {"date": "20260202-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
         "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": n,
         "request_rate": "inf" if request_rate is None else float(request_rate), "burstiness": 1.0,
         "max_concurrency": max_concurrency, "duration": n / float(row["request_throughput_rps"]),
         "completed": n, "failed": 0,
         "total_input_tokens": int(round(float(row["mean_input_tokens"]) * n)),
         "total_output_tokens": int(round(float(row["mean_output_tokens"]) * n)),
         "request_throughput": float(row["request_throughput_rps"]),
         "output_throughput": float(row["output_throughput_tps"]),
         "total_token_throughput": float(row["output_throughput_tps"]) * (1 + float(row["mean_input_tokens"])
                                                                        / float(row["mean_output_tokens"])),
         "mean_ttft_ms": 1e3 * float(row["ttft_mean_s"]), "median_ttft_ms": 1e3 * float(row["ttft_p50_s"]),
         "std_ttft_ms": 0.0, "mean_tpot_ms": 1e3 * float(row["tpot_mean_s"]),
         "median_tpot_ms": 1e3 * float(row["tpot_p50_s"]), "std_tpot_ms": 0.0,
         "mean_itl_ms": 1e3 * float(row["tpot_mean_s"]), "median_itl_ms": 1e3 * float(row["tpot_p50_s"]),
         "std_itl_ms": 0.0, "mean_e2el_ms": 1e3 * e2e, "median_e2el_ms": 1e3 * e2e, "std_e2el_ms": 0.0}
    for q in percentiles:
        for metric in ("ttft", "tpot", "itl", "e2el"):
            src = {"ttft": f"ttft_p{q}_s", "tpot": f"tpot_p{q}_s", "itl": f"tpot_p{q}_s"}.get(metric)
            d[f"p{q}_{metric}_ms"] = 1e3 * (float(row[src]) if src else e2e * 1.2)
    if max_concurrency is None:
        d.pop("max_concurrency")
    return d


def _vllm_folder(folder, name: str, points: list[dict]) -> Path:
    out = Path(folder) / name
    out.mkdir()
    for i, d in enumerate(points):
        (out / f"bench_{i:02d}.json").write_text(json.dumps(d), encoding="utf-8")
    return out


def sweep_vllm_default(folder) -> Path:
    t = _illustrative()
    rows = t[t["concurrency"].isin([1, 2, 4, 8, 16])]        # a short run: its top level is below 32
    return _vllm_folder(folder, "vllm_default", [_vllm_json(r, max_concurrency=int(r["concurrency"]))
                                                 for _, r in rows.iterrows()])


def sweep_closed_loop(folder) -> Path:
    t = _illustrative()
    rows = t[t["concurrency"].isin([1, 2, 4, 8, 16, 32, 48, 64])]
    return _vllm_folder(folder, "closed_loop", [_vllm_json(r, max_concurrency=int(r["concurrency"]),
                                                           percentiles=(50, 95, 99)) for _, r in rows.iterrows()])


def sweep_open_loop(folder) -> Path:
    """Request-rate runs: the offered rate is the measured throughput (below saturation)."""
    t = _illustrative()
    rows = t[t["concurrency"].isin([1, 2, 4, 8, 16, 32])]
    return _vllm_folder(folder, "open_loop", [_vllm_json(r, request_rate=round(float(r["request_throughput_rps"]), 3),
                                                         percentiles=(50, 95, 99)) for _, r in rows.iterrows()])


def sweep_open_from_8(folder) -> Path:
    """Three request rates: Little's-law levels of about 8, 16 and 32, none at 1 (as real open-loop runs often are)."""
    t = _illustrative()
    rows = t[t["concurrency"].isin([8, 16, 32])]
    return _vllm_folder(folder, "open_from_8", [_vllm_json(r, request_rate=round(float(r["request_throughput_rps"]), 3),
                                                               percentiles=(50, 95, 99)) for _, r in rows.iterrows()])


SWEEPS = {"p50_only": sweep_p50_only, "open_from_8": sweep_open_from_8, "single_level": sweep_single_level,
          "open_loop": sweep_open_loop,
          "closed_loop": sweep_closed_loop, "vllm_default": sweep_vllm_default}
