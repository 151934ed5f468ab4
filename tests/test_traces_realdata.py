"""capbook.logs.requestlog on the real public traces in ../shared/traces: duplicates, time units, hour
coverage, and files that are not request logs.

Oracles: the files read with the csv/json standard library and numpy in the test, and the
figures of ../shared/traces/README.md. Every test skips when ../shared is absent.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import math

import numpy as np
import pandas as pd
import pytest

from capbook.logs.requestlog import read_requests


def _azure_seconds(path):
    """Unix seconds (6 fractional digits: the 7th, 100 ns, is below capbook's microseconds),
    and the token columns, read with the standard library."""
    t, cin, cout = [], [], []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            date, _, frac = r["TIMESTAMP"].partition(".")
            base = dt.datetime.strptime(date, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
            t.append(int(base.timestamp()) * 10**6 + int(frac[:6].ljust(6, "0")))
            cin.append(int(r["ContextTokens"]))
            cout.append(int(r["GeneratedTokens"]))
    return np.array(t, dtype=np.int64), np.array(cin), np.array(cout)


def _full_hour_counts(t_s: np.ndarray, weights=None) -> np.ndarray:
    """Per-hour sums over the clock hours [first, last arrival] covers entirely (numpy)."""
    first, end = math.ceil(t_s.min() / 3600), math.floor(t_s.max() / 3600)
    keep = (t_s >= first * 3600) & (t_s < end * 3600)
    idx = (np.floor(t_s[keep] / 3600) - first).astype(int)
    w = None if weights is None else weights[keep]
    return np.bincount(idx, weights=w, minlength=max(end - first, 0))


# --------------------------------------------------------------------------------------------
# Azure 2023: under an hour each, so no full clock hour
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,minutes", [("AzureLLMInferenceTrace_code.csv", 57.3),
                                          ("AzureLLMInferenceTrace_conv.csv", 58.4)])
def test_azure_has_no_full_hour(shared_dir, name, minutes):
    log = read_requests(shared_dir / "traces" / name)
    cov = log.coverage()
    caveat = f"the log covers 0 full hours ({minutes} min): peak-to-mean over hours is not defined"
    assert cov["full_hours"] == 0 and cov["caveat"] == caveat
    ptm = log.peak_to_mean()
    assert ptm[["peak", "mean", "ratio"]].isna().all().all() and (ptm["caveat"] == caveat).all()
    s = log.summary()
    assert s["full_hours"] == 0 and s["caveats"] == [caveat]
    assert s["notes"] == [f"no model, tier or status column: every row gets model "
                          f"'{name.split('.')[0]}', tier 'interactive', status 'served'"]
    # the hourly table still has both partial clock hours (capbook.plan.steps reads it)
    assert len(log.hourly(by=())) == 2 and log.hourly(full_hours_only=True).empty


def test_azure_code_as_epoch_numbers_in_every_unit(shared_dir, tmp_path):
    path = shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv"
    us, cin, cout = _azure_seconds(path)
    reference = read_requests(path).to_pandas()["arrival_time"].astype("int64").to_numpy() // 1000
    assert (reference == us).all()
    for unit, values, fmt in (("s", us / 1e6, "%.6f"), ("ms", us / 1e3, "%.3f"), ("us", us, "%d")):
        p = tmp_path / f"code_{unit}.csv"
        pd.DataFrame({"arrival_time": values, "input_tokens": cin, "output_tokens": cout}).to_csv(
            p, index=False, float_format=fmt)
        log = read_requests(p)
        assert log.format == "canonical" and log.rows == 8819
        got = log.to_pandas()["arrival_time"].astype("int64").to_numpy() // 1000
        assert (got == us).all(), unit
        assert [n for n in log.notes if "detected from magnitude" in n][0].endswith(
            f"timestamps read as epoch {dict(s='seconds', ms='milliseconds', us='microseconds')[unit]} "
            f"(detected from magnitude; pass time_unit= to override)")
    # the seconds file read as milliseconds: 8,819 requests in 3.4 s
    with pytest.raises(ValueError, match=r"8819 requests in 3.44 s is 2,567 requests per second for the "
                                         r"whole log: suspiciously fast, as if seconds were read as "
                                         r"milliseconds.*pass time_unit='s'"):
        read_requests(tmp_path / "code_s.csv", time_unit="ms")
    # the date-time strings of the original file have no unit
    with pytest.raises(ValueError, match=r"column 'TIMESTAMP' holds date-times \('2023-11-16 18:17:03.9799600'\), "
                                         r"not numbers: time_unit= applies to numeric timestamps only"):
        read_requests(path, time_unit="ms")
    # and the milliseconds file read as microseconds
    with pytest.raises(ValueError, match=r"as if milliseconds were read as microseconds.*pass time_unit='ms'"):
        read_requests(tmp_path / "code_ms.csv", time_unit="us")


# --------------------------------------------------------------------------------------------
# Mooncake: bursts of identical rows kept; milliseconds from the start
# --------------------------------------------------------------------------------------------
def test_mooncake_conversation_keeps_its_duplicate(shared_dir):
    path = shared_dir / "traces" / "conversation_trace.jsonl"
    lines = path.read_text().splitlines()
    log = read_requests(path)
    assert log.rows == len(lines) == 12031 and log.dropped == 0  # README: 12,031 requests
    assert [r["action"] for r in log.report] == ["kept"] and log.report[0]["rows"] == 1
    assert sum("identical to an earlier row" in n for n in log.notes) == 1
    tin = sum(json.loads(l)["input_length"] for l in lines)
    assert tin == 144_793_823 and log.hourly()["input_tokens"].sum() == tin  # README total
    assert log.coverage()["full_hours"] == 0  # 0 -> 3,536,999 ms: under an hour
    assert log.summary()["caveats"] == ["the log covers 0 full hours (58.9 min): peak-to-mean over "
                                        "hours is not defined"]


@pytest.mark.parametrize("name,rows,days", [("synthetic_trace.jsonl", 3993, 11.8),
                                            ("conversation_trace.jsonl", 12031, 40.9)])
def test_mooncake_milliseconds_read_as_seconds_is_caught(shared_dir, name, rows, days):
    path = shared_dir / "traces" / name
    with pytest.raises(ValueError, match=rf"{rows} requests over {days} days is .* requests per hour: "
                                         rf"suspiciously slow, as if milliseconds were read as seconds "
                                         rf"\(the 'timestamp' column was read as seconds .*\)\. If the "
                                         rf"times are milliseconds, pass time_unit='ms'"):
        read_requests(path, time_unit="s")
    # and the reverse mistake (milliseconds read as microseconds): the whole log in seconds
    with pytest.raises(ValueError, match=r"suspiciously fast, as if milliseconds were read as "
                                         r"microseconds.*pass time_unit='ms'"):
        read_requests(path, time_unit="us")
    assert read_requests(path, time_unit="ms").rows == rows


def test_mooncake_as_a_canonical_csv_of_relative_milliseconds(shared_dir, tmp_path):
    recs = [json.loads(l) for l in (shared_dir / "traces" / "synthetic_trace.jsonl").read_text().splitlines()]
    p = tmp_path / "synthetic.csv"
    pd.DataFrame({"arrival_time": [r["timestamp"] for r in recs],
                  "input_tokens": [r["input_length"] for r in recs],
                  "output_tokens": [r["output_length"] for r in recs]}).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"too small for Unix epoch times .*pass time_unit='s' \(or 'ms'"):
        read_requests(p)
    log = read_requests(p, time_unit="ms")
    ref = read_requests(shared_dir / "traces" / "synthetic_trace.jsonl")
    assert (log.to_pandas()["arrival_time"].to_numpy() == ref.to_pandas()["arrival_time"].to_numpy()).all()
    assert log.span_s == pytest.approx(1022.025)  # README: 0 -> 1,022,025 ms


# --------------------------------------------------------------------------------------------
# BurstGPT slices: about 10 hours, so a few full hours and no daily shape
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,hours", [("burstgpt_slice.csv", 9), ("burstgpt3_slice.csv", 10)])
def test_burstgpt_peak_to_mean_over_full_hours(shared_dir, name, hours):
    path = shared_dir / "traces" / "burstgpt" / name
    with open(path, newline="") as f:
        recs = list(csv.DictReader(f))
    t = np.array([float(r["Timestamp"]) for r in recs])
    tok = np.array([int(r["Request tokens"]) + int(r["Response tokens"]) for r in recs], dtype=float)
    counts = _full_hour_counts(t)
    tokens = _full_hour_counts(t, tok)
    assert len(counts) == hours
    log = read_requests(path)
    ptm = log.peak_to_mean()
    assert (ptm["full_hours"] == hours).all()
    assert ptm.loc["requests", "peak"] == counts.max() and ptm.loc["requests", "mean"] == pytest.approx(counts.mean())
    assert ptm.loc["total_tokens", "ratio"] == pytest.approx(tokens.max() / tokens.mean(), rel=1e-12)
    cav = log.coverage()["caveat"]
    assert cav.startswith(f"the log covers {hours} full hours (") and "shorter than a day: no daily shape" in cav
    assert log.summary()["caveats"] == [cav]


# --------------------------------------------------------------------------------------------
# every real log: no NaN or inf without a caveat next to it
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv",
                                  "conversation_trace.jsonl", "synthetic_trace.jsonl",
                                  "burstgpt/burstgpt_slice.csv", "burstgpt/burstgpt3_slice.csv"])
def test_no_silent_nan_in_the_summary(shared_dir, name):
    s = read_requests(shared_dir / "traces" / name).summary()
    ptm = s["peak_to_mean"]
    for measure, row in ptm.iterrows():
        if any(pd.isna(row[c]) for c in ("peak", "mean", "ratio", "peak_hour")):
            assert row["caveat"], (name, measure)
    assert math.isfinite(s["rate_rps"]) and math.isfinite(s["arrivals"]["ca2"])
    json.dumps({k: s[k] for k in ("notes", "caveats", "coverage", "full_hours", "report")})
