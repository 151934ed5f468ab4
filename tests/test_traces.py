"""Tests of capbook.logs.requestlog: adapters on the real public traces, validation, statistics.

Oracles: figures read from the files with the csv/json standard library and numpy in the test
(row counts, spans, token means and totals, duplicates), the values in ../shared/traces/README.md,
and pandas/numpy computations on small logs built here.
"""
from __future__ import annotations

import collections
import csv
import datetime as dt
import json
import math
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from capbook.logs.requestlog import (
    LOG_FORMATS,
    Mapping,
    RequestLog,
    detect_log_format,
    load_sample_requests,
    read_requests,
)

T0 = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _azure_times(rows, key="TIMESTAMP"):
    """Seconds since the Unix epoch, parsed with the standard library (7th digit dropped)."""
    out = []
    for r in rows:
        s = r[key]
        date, _, frac = s.partition(".")
        base = dt.datetime.strptime(date, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
        out.append(base.timestamp() + (int(frac[:6].ljust(6, "0")) / 1e6 if frac else 0.0))
    return np.array(out)


def _canonical_frame(n=500, seed=0, span_s=6 * 3600, gap=None):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, span_s, n))
    if gap is not None:  # remove every arrival in [gap0, gap1) seconds
        t = t[(t < gap[0]) | (t >= gap[1])]
    n = len(t)
    return pd.DataFrame({
        "arrival_time": T0 + pd.to_timedelta(np.round(t * 1e6).astype(np.int64), unit="us"),
        "input_tokens": rng.integers(1, 5000, n),
        "output_tokens": rng.integers(1, 900, n),
        "model": rng.choice(["m-large", "m-small"], n),
        "tier": rng.choice(["interactive", "batch"], n, p=[0.8, 0.2]),
        "status": rng.choice(["served", "throttled", "failed"], n, p=[0.9, 0.07, 0.03]),
    })


def _write_csv(df: pd.DataFrame, path) -> str:
    out = df.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.DatetimeTZDtype):
            out[c] = out[c].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    out.to_csv(path, index=False)
    return str(path)


# --------------------------------------------------------------------------------------------
# real traces
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,rows,span", [
    ("AzureLLMInferenceTrace_code.csv", 8819, 3435.948),
    ("AzureLLMInferenceTrace_conv.csv", 19366, 3501.722),
])
def test_azure2023_matches_stdlib_reading(shared_dir, name, rows, span):
    path = shared_dir / "traces" / name
    with open(path, newline="") as f:
        recs = list(csv.DictReader(f))
    t = _azure_times(recs)
    cin = np.array([int(r["ContextTokens"]) for r in recs])
    cout = np.array([int(r["GeneratedTokens"]) for r in recs])
    log = read_requests(path)
    assert log.format == "azure2023" and detect_log_format(path) == "azure2023"
    assert log.rows == len(recs) == rows  # README: 8,819 and 19,366 rows
    assert log.span_s == pytest.approx(t[-1] - t[0], abs=1e-6)
    assert log.span_s == pytest.approx(span, abs=1e-3)
    assert log.start == pd.Timestamp(t[0], unit="s", tz="UTC").round("us")
    df = log.to_pandas()
    assert str(df["arrival_time"].dtype) == "datetime64[ns, UTC]"
    assert df["input_tokens"].dtype == np.int64
    assert df["input_tokens"].sum() == cin.sum() and df["output_tokens"].sum() == cout.sum()
    assert (df["status"] == "served").all() and (df["tier"] == "interactive").all()
    ts = log.token_stats()
    assert ts.loc["input_tokens", "mean"] == pytest.approx(cin.mean(), rel=1e-12)
    assert ts.loc["output_tokens", "p99"] == pytest.approx(np.percentile(cout, 99), rel=1e-12)
    assert ts.loc["output_tokens", "max"] == cout.max()
    # hourly sums against a pure-Python bucketing of the same timestamps
    hours = collections.Counter((t // 3600).astype(int))
    h = log.hourly(by=())
    assert list(h["requests"]) == [hours[k] for k in sorted(hours)]


def test_azure_code_burstiness_matches_readme(shared_dir):
    log = read_requests(shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv")
    a = log.arrival_stats(windows=(1, 60))
    # README: IAT CV 13.15, IDC 13.18 (1 s) and 160.5 (60 s); no zero gaps
    assert math.sqrt(a["ca2"]) == pytest.approx(13.151, abs=0.001)
    assert a["idc"][1.0] == pytest.approx(13.182, abs=0.001)
    assert a["idc"][60.0] == pytest.approx(160.543, abs=0.001)
    assert a["zero_gap_share"] == 0.0 and not a["clumped"] and a["caveat"] == ""


def test_mooncake_conversation_duplicate_and_clumping(shared_dir):
    path = shared_dir / "traces" / "conversation_trace.jsonl"
    lines = path.read_text().splitlines()
    counts = collections.Counter(lines)
    dup_lines = [i + 1 for i, l in enumerate(lines) if counts[l] > 1]
    assert len(dup_lines) == 2  # the file holds one exact duplicate pair
    # two identical requests in the same millisecond are normal: kept, counted in a note
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = read_requests(path)
    assert kept.rows == len(lines) == 12031 and kept.dropped == 0
    assert kept.report == [{"column": "(all columns)", "field": "(row)", "reason": "duplicated row",
                            "rows": 1, "first_rows": [dup_lines[1]], "action": "kept"}]
    note = [n for n in kept.notes if "identical" in n]
    assert len(note) == 1 and f"data row {dup_lines[1]}" in note[0] and "drop_invalid=True" in note[0]
    assert kept.hourly()["requests"].sum() == 12031
    with pytest.warns(UserWarning, match="1 of 12031 rows dropped"):
        log = read_requests(path, drop_invalid=True)
    assert log.format == "mooncake" and log.rows == 12030 and log.dropped == 1
    assert log.report[0]["reason"] == "duplicated row" and log.report[0]["first_rows"] == [dup_lines[1]]
    assert log.report[0]["action"] == "dropped (first copy kept)"
    recs = [json.loads(l) for i, l in enumerate(lines) if i + 1 != dup_lines[1]]
    ts = np.array([r["timestamp"] for r in recs]) / 1000.0
    assert log.span_s == pytest.approx(ts.max() - ts.min(), abs=1e-9)
    assert log.token_stats().loc["input_tokens", "mean"] == pytest.approx(
        np.mean([r["input_length"] for r in recs]), rel=1e-12)
    a = log.arrival_stats(windows=(1, 60))
    gaps = np.diff(np.sort(ts))
    assert a["zero_gap_share"] == pytest.approx(np.mean(gaps == 0), abs=1e-12)
    assert a["ca2"] == pytest.approx(gaps.var() / gaps.mean() ** 2, rel=1e-9)
    assert a["distinct_times"] == len(np.unique(ts)) == 1180  # README: 1,180 distinct
    assert a["clumped"] and "zero" in a["caveat"] and a["resolution_s"] == 0.001
    assert a["mean_batch"] == pytest.approx(12030 / 1180)


def test_mooncake_synthetic_and_ms_read_as_seconds(shared_dir):
    path = shared_dir / "traces" / "synthetic_trace.jsonl"
    recs = [json.loads(l) for l in path.read_text().splitlines()]
    log = read_requests(path)
    assert log.rows == len(recs) == 3993
    assert log.span_s == pytest.approx(1022.025, abs=1e-9)  # README: 0 -> 1,022,025 ms
    assert log.token_stats().loc["output_tokens", "mean"] == pytest.approx(
        np.mean([r["output_length"] for r in recs]), rel=1e-12)
    wrong = Mapping(arrival_time="timestamp", input_tokens="input_length",
                    output_tokens="output_length", time_unit="s")
    with pytest.raises(ValueError, match="milliseconds were read as seconds.*pass time_unit='ms'"):
        read_requests(path, mapping=wrong)
    # the check can be switched off when the times really are that slow
    assert read_requests(path, mapping=wrong, check_units=False).span_s == pytest.approx(1022025.0)


@pytest.mark.parametrize("name", ["burstgpt_slice.csv", "burstgpt3_slice.csv"])
def test_burstgpt_by_column_name(shared_dir, name):
    path = shared_dir / "traces" / "burstgpt" / name
    with open(path, newline="") as f:
        recs = list(csv.DictReader(f))
    t = np.array([float(r["Timestamp"]) for r in recs])
    log = read_requests(path)
    assert log.format == "burstgpt" and log.rows == len(recs) == 400
    assert log.span_s == pytest.approx(t.max() - t.min())
    assert log.start == pd.Timestamp(t.min(), unit="s", tz="UTC")
    df = log.to_pandas()
    assert df["model"].value_counts().to_dict() == collections.Counter(r["Model"] for r in recs)
    failed = sum(int(r["Response tokens"]) == 0 for r in recs)
    assert (df["status"] == "failed").sum() == failed
    assert df["input_tokens"].sum() == sum(int(r["Request tokens"]) for r in recs)
    if "Elapsed time" in recs[0]:  # release 3: end_time = arrival + elapsed
        assert "end_time" in log.columns
        served = [float(r["Elapsed time"]) for r in recs if int(r["Response tokens"]) > 0]
        svc = log.service_times()
        assert svc["source"] == "measured" and svc["requests"] == len(served)
        assert svc["mean_s"] == pytest.approx(np.mean(served), rel=1e-12)
        assert svc["cs2"] == pytest.approx(np.var(served) / np.mean(served) ** 2, rel=1e-9)
    else:
        assert "end_time" not in log.columns
        with pytest.raises(ValueError, match="no end_time"):
            log.service_cv2()


def test_servegen_descriptors_are_rejected_clearly(shared_dir):
    folder = shared_dir / "traces" / "servegen" / "language" / "m-large"
    for path in (folder / "chunk-0-trace.csv", folder / "chunk-*-trace.csv"):
        with pytest.raises(ValueError, match="ServeGen per-client rate descriptor .*not a request log; "
                                             "capbook reads request logs with one row per request"):
            read_requests(path)
        with pytest.raises(ValueError, match="ServeGen per-client rate descriptor"):
            read_requests(path, format="canonical")


# --------------------------------------------------------------------------------------------
# formats the shared folder lacks: Azure 2024, LiteLLM, canonical
# --------------------------------------------------------------------------------------------
def test_azure2024_timestamps_with_offset(tmp_path):
    stamps = ["2024-05-12 00:00:00+00:00", "2024-05-12 00:00:00.001163+00:00",
              "2024-05-12 00:00:01.5+00:00", "2024-05-12 01:59:59.999999+00:00"]
    path = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for k, s in enumerate(stamps):
            w.writerow([s, 100 + k, 10 + k])
    assert detect_log_format(path) == "azure2024"
    log = read_requests(path)
    expect = [dt.datetime.fromisoformat(s) for s in stamps]
    got = log.to_pandas()["arrival_time"]
    assert [x.to_pydatetime() for x in got] == expect
    h = log.hourly()
    assert list(h["requests"]) == [3, 1] and list(h["input_tokens"]) == [303, 103]


def _litellm_frame():
    start = pd.Timestamp("2025-01-06 09:00:00")
    rows = []
    rng = np.random.default_rng(3)
    for k in range(40):
        st_ = start + pd.Timedelta(seconds=float(k * 7.5))
        ok = k % 10 != 3
        first = st_ + pd.Timedelta(milliseconds=200 + 10 * k) if ok else None
        end = (first + pd.Timedelta(milliseconds=1000 + 50 * k)) if ok else st_ + pd.Timedelta(seconds=0.3)
        rows.append({
            "request_id": f"chatcmpl-{k}", "call_type": "acompletion", "api_key": "hashed",
            "spend": 0.001 * k, "total_tokens": 0, "prompt_tokens": int(rng.integers(10, 2000)),
            "completion_tokens": int(rng.integers(1, 500)) if ok else 0,
            "startTime": st_.isoformat(sep=" "), "endTime": end.isoformat(sep=" "),
            "completionStartTime": first.isoformat(sep=" ") if first is not None else "",
            "model": "azure/gpt-4o-2024-08-06",
            "model_group": "" if k % 4 == 0 else "gpt-4o",
            "user": "u1", "team_id": "team-a" if k % 2 else "team-b",
            "status": "success" if ok else "failure",
        })
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_litellm_spend_logs(tmp_path, ext):
    df = _litellm_frame()
    path = tmp_path / f"spend_logs.{ext}"
    if ext == "csv":
        df.to_csv(path, index=False)
    else:
        d2 = df.copy()
        for c in ("startTime", "endTime"):
            d2[c] = pd.to_datetime(d2[c], format="ISO8601")
        d2["completionStartTime"] = pd.to_datetime(d2["completionStartTime"].replace("", None),
                                                   format="ISO8601")
        d2.to_parquet(path, index=False)
    log = read_requests(path)
    assert log.format == "litellm"
    out = log.to_pandas()
    assert len(out) == 40
    assert (out["status"] == "failed").sum() == 4 and (out["status"] == "served").sum() == 36
    # model_group where given, else the deployment's model
    assert (out["model"] == "azure/gpt-4o-2024-08-06").sum() == 10
    assert set(out["tenant"]) == {"team-a", "team-b"}
    per_tenant = log.hourly(by=("tenant",))
    assert per_tenant.groupby("tenant")["requests"].sum().to_dict() == {"team-a": 20, "team-b": 20}
    with pytest.raises(ValueError, match="unknown column"):
        log.token_stats(by="region")
    assert out["first_token_time"].isna().sum() == 4
    served = df[df["status"] == "success"]
    dur = (pd.to_datetime(served["endTime"], format="ISO8601")
           - pd.to_datetime(served["startTime"], format="ISO8601")).dt.total_seconds()
    assert log.service_cv2() == pytest.approx(dur.var(ddof=0) / dur.mean() ** 2, rel=1e-9)


def test_canonical_round_trip_parquet_and_csv(tmp_path):
    df = _canonical_frame()
    df["tenant"] = np.where(np.arange(len(df)) % 3 == 0, "t1", "t2")
    pq_path = tmp_path / "log.parquet"
    df.to_parquet(pq_path, index=False)
    a = read_requests(pq_path).to_pandas()
    pd.testing.assert_frame_equal(a, df.astype({"model": object, "tier": object, "status": object,
                                                "tenant": object}), check_dtype=False)
    b = read_requests(_write_csv(df, tmp_path / "log.csv"), progress=True).to_pandas()
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    df.loc[[3, 4], "tenant"] = None
    df.to_parquet(pq_path, index=False)
    per_tenant = read_requests(pq_path).hourly(by=("tenant",)).groupby("tenant")["requests"].sum()
    assert per_tenant["(none)"] == 2 and per_tenant.sum() == len(df)
    assert str(b["arrival_time"].dtype) == "datetime64[ns, UTC]"


def test_glob_of_daily_files(tmp_path):
    df = _canonical_frame(400, span_s=2 * 86400)
    day = df["arrival_time"].dt.floor("D")
    for k, (d, part) in enumerate(df.groupby(day)):
        part.to_parquet(tmp_path / f"day{k}.parquet", index=False)
    log = read_requests(tmp_path / "day*.parquet")
    assert log.rows == len(df) and log.hourly()["output_tokens"].sum() == df["output_tokens"].sum()


def test_generic_mapping_numeric_epoch_and_format(tmp_path):
    path = tmp_path / "gateway.tsv"
    path.write_text("ts_ms\tprompt\tcompletion\tengine\tlane\n"
                    "1000\t5\t7\tA\tbatch\n2500\t6\t8\tB\tinteractive\n3600000\t7\t9\tA\tbatch\n")
    m = Mapping(arrival_time="ts_ms", input_tokens="prompt", output_tokens="completion",
                model="engine", tier="lane", time_unit="ms", epoch="2025-02-03 10:00:00")
    log = read_requests(path, mapping=m)
    df = log.to_pandas()
    base = pd.Timestamp("2025-02-03 10:00:00", tz="UTC")
    assert list(df["arrival_time"]) == [base + pd.Timedelta(milliseconds=v) for v in (1000, 2500, 3600000)]
    assert list(df["model"]) == ["A", "B", "A"] and list(df["tier"]) == ["batch", "interactive", "batch"]
    # an epoch with a zone offset is converted to UTC
    m_tz = replace_unit(m, "ms")
    from dataclasses import replace

    log_tz = read_requests(path, mapping=replace(m_tz, epoch="2025-02-03 12:00:00+02:00"))
    assert log_tz.start == base + pd.Timedelta(seconds=1)
    fmt_path = tmp_path / "eu.csv"
    fmt_path.write_text("when,in,out\n03/02/2025 10:00:01,1,2\n03/02/2025 10:00:02,3,4\n")
    m2 = Mapping(arrival_time="when", input_tokens="in", output_tokens="out",
                 time_format="%d/%m/%Y %H:%M:%S", default_model="mine")
    log2 = read_requests(fmt_path, mapping=m2)
    assert log2.start == pd.Timestamp("2025-02-03 10:00:01", tz="UTC") and log2.span_s == 1.0
    assert list(log2.to_pandas()["model"]) == ["mine", "mine"]


def test_mapping_rejects_bad_arguments():
    with pytest.raises(ValueError, match="time_unit"):
        Mapping(arrival_time="a", input_tokens="b", output_tokens="c", time_unit="minutes")
    with pytest.raises(ValueError, match="status_values"):
        Mapping(arrival_time="a", input_tokens="b", output_tokens="c", status_values={"ok": "fine"})
    with pytest.raises(ValueError, match="epoch"):
        Mapping(arrival_time="a", input_tokens="b", output_tokens="c", epoch="yesterday-ish")
    with pytest.raises(ValueError, match="^format must be one of 'auto', 'canonical'"):
        read_requests("x.csv", format="splunk")
    # one registry: every format is a FileFormat whose reader is its column Mapping; "auto" is
    # not a format but the instruction to detect one
    assert "auto" not in LOG_FORMATS and list(LOG_FORMATS)[0] == "canonical"
    # (per-request results: a function of the file's columns that builds the Mapping)
    assert all(f.name == k and f.description and (isinstance(f.read, Mapping) and f.read.name == k
                                                  or k == "per-request" and callable(f.read))
               for k, f in LOG_FORMATS.items())
    m = LOG_FORMATS["per-request"].read(["send_time_ms", "ttft_ms", "latency_ms", "prompt_tokens",
                                         "output_tokens"])
    assert (m.arrival_time, m.ttft, m.duration, m.time_unit, m.duration_unit) == \
        ("send_time_ms", "ttft_ms", "latency_ms", "ms", "ms")


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------
def test_missing_column_names_file_and_column(tmp_path):
    df = _canonical_frame(20).drop(columns=["output_tokens"])
    p = _write_csv(df, tmp_path / "nocol.csv")
    with pytest.raises(ValueError) as exc:
        read_requests(p, format="canonical")
    assert "nocol.csv" in str(exc.value) and "'output_tokens'" in str(exc.value)


@pytest.mark.parametrize("column,value,reason", [
    ("arrival_time", "2026-03-02T25:99:00Z", "unparseable timestamp"),
    ("arrival_time", "", "missing timestamp"),
    ("input_tokens", "-3", "negative token count"),
    ("output_tokens", "12.5", "fractional token count"),
    ("output_tokens", "nan", "NaN token count"),
    ("input_tokens", "many", "unparseable token count"),
    ("status", "ok", "unknown status"),
    ("model", "", "missing model"),
])
def test_bad_value_reported_with_first_rows(tmp_path, column, value, reason):
    df = _canonical_frame(50)
    p = tmp_path / "bad.csv"
    _write_csv(df, p)
    lines = p.read_text().splitlines()
    header = lines[0].split(",")
    for row in (7, 31):  # data rows 7 and 31 (file lines 8 and 32)
        cells = lines[row].split(",")
        cells[header.index(column)] = value
        lines[row] = ",".join(cells)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as exc:
        read_requests(p)
    msg = str(exc.value)
    assert str(p) in msg and repr(column) in msg and reason in msg
    assert "row 7 " in msg and "row 31 " in msg and "2 rows" in msg
    with pytest.warns(UserWarning, match="2 of 50 rows dropped"):
        log = read_requests(p, drop_invalid=True)
    assert log.rows == 48 and log.dropped == 2
    (rep,) = log.report
    assert rep["rows"] == 2 and reason in rep["reason"] and [r for r, _ in rep["first_rows"]] == [7, 31]
    keep = df.drop(index=[6, 30]).reset_index(drop=True)
    assert log.to_pandas()["input_tokens"].tolist() == keep["input_tokens"].tolist()


def test_parquet_nan_and_fraction_in_float_column(tmp_path):
    df = _canonical_frame(30)
    df["output_tokens"] = df["output_tokens"].astype(float)
    df.loc[4, "output_tokens"] = np.nan
    df.loc[9, "output_tokens"] = 3.25
    p = tmp_path / "f.parquet"
    df.to_parquet(p, index=False)
    with pytest.raises(ValueError) as exc:
        read_requests(p)
    # a null in a Parquet float column is a missing value; 3.25 is fractional
    assert "row 5 " in str(exc.value) and "row 10 (" in str(exc.value)
    assert "fractional token count" in str(exc.value)


def test_unsorted_rows(tmp_path):
    df = _canonical_frame(40)
    df.iloc[[10, 11]] = df.iloc[[11, 10]].to_numpy()
    p = _write_csv(df, tmp_path / "unsorted.csv")
    with pytest.raises(ValueError, match=r"not sorted by arrival time\); first offending data rows: \[12\]"):
        read_requests(p)
    with pytest.warns(UserWarning, match="sorted by arrival"):
        log = read_requests(p, sort=True)
    assert log.rows == 40 and log.dropped == 0
    assert log.to_pandas()["arrival_time"].is_monotonic_increasing
    a = log.arrays()
    assert np.all(np.diff(a.arrival_s) >= 0)


def test_duplicated_rows(tmp_path):
    df = _canonical_frame(30)
    dup = pd.concat([df.iloc[:12], df.iloc[[11]], df.iloc[12:]], ignore_index=True)
    p = _write_csv(dup, tmp_path / "dup.csv")
    # kept by default (no request-id column tells them apart), stated in a note and the report
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = read_requests(p)
    assert kept.rows == 31 and kept.dropped == 0 and kept.hourly()["requests"].sum() == 31
    assert kept.report[0]["action"] == "kept" and kept.report[0]["first_rows"] == [13]
    assert any("1 row is identical to an earlier row" in n and "data row 13" in n for n in kept.notes)
    assert kept.summary()["report"][0]["action"] == "kept"
    with pytest.warns(UserWarning, match=r"1 of 31 rows dropped \(0 invalid, 1 duplicates\)"):
        log = read_requests(p, drop_invalid=True)
    assert log.rows == 30 and log.report[0]["reason"] == "duplicated row"
    assert log.report[0]["action"] == "dropped (first copy kept)"
    assert log.hourly()["requests"].sum() == 30
    # two different requests at the same instant are not duplicates
    same_t = df.copy()
    same_t.loc[5, "arrival_time"] = same_t.loc[4, "arrival_time"]
    assert read_requests(_write_csv(same_t, tmp_path / "tie.csv")).rows == 30


def test_malformed_csv_rows(tmp_path):
    header = "arrival_time,input_tokens,output_tokens,model,tier,status\n"
    ok = "2026-01-01T00:00:{:02d}Z,1,2,m,interactive,served\n"
    near = tmp_path / "near.csv"
    near.write_text(header + ok.format(0) + ok.format(1).replace("served", "served,x,y") + ok.format(2))
    with pytest.raises(ValueError, match=r"near.csv: line 3 of the file \('2026.*,x,y'\) has more than 6 "
                                         r"fields where the header has 6: a ragged row"):
        read_requests(near)
    far = tmp_path / "far.csv"
    rows = [ok.format(k % 60).replace("00:00:", f"{k // 3600:02d}:{k // 60 % 60:02d}:") for k in range(30_000)]
    rows[25_000] = rows[25_000].replace("served", "served,x,y")
    far.write_text(header + "".join(rows))
    with pytest.raises(ValueError, match=r"far.csv: line 25002 of the file .* has more than 6 fields "
                                         r"where the header has 6") as exc:
        read_requests(far)
    assert "strict_mode" not in str(exc.value) and "Possible fixes" not in str(exc.value)


def test_empty_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for fmt in ("canonical", "auto"):
        with pytest.raises(ValueError, match=r"empty.csv: the file is empty \(0 bytes\)"):
            read_requests(empty, format=fmt)
    header = tmp_path / "header.csv"
    header.write_text("arrival_time,input_tokens,output_tokens,model,tier,status\n")
    with pytest.raises(ValueError, match="header.csv: the file holds a header but no rows"):
        read_requests(header)
    unknown = tmp_path / "unknown_header.csv"  # emptiness is said before the columns
    unknown.write_text("when,prompt,completion\n")
    with pytest.raises(ValueError, match="holds a header but no rows"):
        read_requests(unknown)
    for name in ("e.jsonl", "e.parquet"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(ValueError, match=rf"{name}: the file is empty \(0 bytes\)"):
            read_requests(tmp_path / name)
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n \n\n")
    with pytest.raises(ValueError, match="blank.jsonl: the file is empty"):
        read_requests(blank)
    pq.write_table(pa.table({"arrival_time": pa.array([], pa.timestamp("us", tz="UTC")),
                             "input_tokens": pa.array([], pa.int64()),
                             "output_tokens": pa.array([], pa.int64())}), tmp_path / "none.parquet")
    with pytest.raises(ValueError, match=r"none.parquet: the file holds columns .* but no rows"):
        read_requests(tmp_path / "none.parquet")
    with pytest.raises(FileNotFoundError, match="nothere.csv"):
        read_requests(tmp_path / "nothere.csv")


def test_bad_row_past_the_first_million(tmp_path):
    n = 1_200_000
    bad_row = 1_100_007  # 1-based data row
    t = T0.value // 1000 + np.arange(n, dtype=np.int64) * 250_000  # one request per 0.25 s
    inp = np.full(n, 100, dtype=np.int64)
    inp[bad_row - 1] = -1
    table = pa.table({
        "arrival_time": pa.array(t, type=pa.timestamp("us", tz="UTC")),
        "input_tokens": inp, "output_tokens": np.full(n, 10, dtype=np.int64),
        "model": pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), pa.array(["m"])),
        "tier": pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), pa.array(["interactive"])),
        "status": pa.DictionaryArray.from_arrays(np.zeros(n, np.int8), pa.array(["served"])),
    })
    p = tmp_path / "big.parquet"
    pq.write_table(table, p)
    with pytest.raises(ValueError) as exc:
        read_requests(p)
    assert f"row {bad_row} ('-1')" in str(exc.value) and "negative token count" in str(exc.value)
    # the same log as CSV with Unix seconds and a Mapping (row numbers there come from a
    # streaming scan of DuckDB's parallel CSV reader)
    c = tmp_path / "big.csv"
    import duckdb

    duckdb.sql(f"COPY (SELECT epoch_us(arrival_time) / 1e6 AS ts, input_tokens AS prompt, "
               f"output_tokens AS completion FROM read_parquet('{p}')) TO '{c}' (HEADER)")
    m = Mapping(arrival_time="ts", input_tokens="prompt", output_tokens="completion", time_unit="s")
    with pytest.raises(ValueError, match=f"column 'prompt'.*row {bad_row} \\('-1'\\)"):
        read_requests(c, mapping=m)


def test_seconds_read_as_milliseconds_and_out_of_range(tmp_path):
    p = tmp_path / "fast.csv"
    t = np.arange(5000) * 0.02  # 50 requests/s, in seconds
    pd.DataFrame({"t": t, "i": 5, "o": 5}).to_csv(p, index=False)
    m = Mapping(arrival_time="t", input_tokens="i", output_tokens="o", time_unit="ms")
    with pytest.raises(ValueError, match="seconds were read as milliseconds.*the 't' column was read as "
                                         "milliseconds.*If the times are seconds, pass time_unit='s'"):
        read_requests(p, mapping=m)
    # Unix milliseconds read as seconds land thousands of years ahead
    p2 = tmp_path / "unix.csv"
    pd.DataFrame({"t": 1_735_000_000_000 + np.arange(100) * 1000, "i": 5, "o": 5}).to_csv(p2, index=False)
    with pytest.raises(ValueError, match=r"outside 1970-2100: the 't' column was read as seconds.*"
                                         r"If the times are milliseconds, pass time_unit='ms'"):
        read_requests(p2, mapping=replace_unit(m, "s"))
    assert read_requests(p2, mapping=m).start == pd.Timestamp(1_735_000_000_000, unit="ms", tz="UTC")


def replace_unit(m: Mapping, unit: str) -> Mapping:
    from dataclasses import replace

    return replace(m, time_unit=unit)


# --------------------------------------------------------------------------------------------
# statistics on small logs with pandas/numpy oracles
# --------------------------------------------------------------------------------------------
def test_hourly_complete_index_and_sums(tmp_path):
    df = _canonical_frame(800, span_s=10 * 3600, gap=(3 * 3600, 5 * 3600 + 10))
    p = tmp_path / "gap.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    h = log.hourly()
    assert list(h.columns) == ["period_start", "model", "tier", "requests", "throttled",
                               "input_tokens", "output_tokens"]
    groups = df[["model", "tier"]].drop_duplicates()
    hours = pd.date_range(df["arrival_time"].min().floor("h"), df["arrival_time"].max().floor("h"), freq="h")
    assert len(h) == len(hours) * len(groups)
    oracle = (df.assign(period_start=df["arrival_time"].dt.floor("h"),
                        thr=(df["status"] == "throttled").astype(int))
              .groupby(["period_start", "model", "tier"])
              .agg(requests=("input_tokens", "size"), throttled=("thr", "sum"),
                   input_tokens=("input_tokens", "sum"), output_tokens=("output_tokens", "sum")))
    full = h.set_index(["period_start", "model", "tier"])
    got = full.loc[oracle.index]
    assert (got.to_numpy() == oracle.to_numpy()).all()
    # the empty hours are rows of zeros, not gaps
    empty = full.drop(index=oracle.index)
    assert len(empty) >= 2 * len(groups) and (empty.to_numpy() == 0).all()
    m = log.per_minute(by=("tier",))
    assert m["requests"].sum() == len(df)
    assert len(m) == (int((df["arrival_time"].max().floor("min") - df["arrival_time"].min().floor("min"))
                          / pd.Timedelta("1min")) + 1) * df["tier"].nunique()
    assert log.aggregate(900, by=())["output_tokens"].sum() == df["output_tokens"].sum()
    with pytest.raises(ValueError, match="unknown column"):
        log.hourly(by=("region",))
    with pytest.raises(ValueError, match="no tenant column"):
        log.hourly(by=("tenant",))


def test_token_stats_against_numpy(tmp_path):
    df = _canonical_frame(997, seed=5)
    p = tmp_path / "s.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    ts = log.token_stats(output_cap=700, input_cap=4000)
    for kind in ("input_tokens", "output_tokens"):
        x = df[kind].to_numpy()
        for q in (50, 95, 99):
            assert ts.loc[kind, f"p{q}"] == pytest.approx(np.percentile(x, q), rel=1e-12)
        assert ts.loc[kind, "mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert ts.loc["output_tokens", "share_above_cap"] == pytest.approx(np.mean(df["output_tokens"] > 700))
    assert ts.loc["input_tokens", "share_above_cap"] == pytest.approx(np.mean(df["input_tokens"] > 4000))
    only = log.token_stats(output_cap=700)
    assert pd.isna(only.loc["input_tokens", "share_above_cap"])
    by = log.token_stats(by="model")
    x = df.loc[df["model"] == "m-small", "output_tokens"]
    assert by.loc[("m-small", "output_tokens"), "p95"] == pytest.approx(np.percentile(x, 95))
    with pytest.raises(ValueError, match="output_cap"):
        log.token_stats(output_cap=-1)


def test_arrival_stats_poisson_and_idc_with_empty_windows(tmp_path):
    rng = np.random.default_rng(11)
    n = 20_000
    t = np.cumsum(rng.exponential(0.5, n))  # Poisson, 2 requests/s
    df = pd.DataFrame({"arrival_time": T0 + pd.to_timedelta(np.round(t * 1e6).astype(np.int64), unit="us"),
                       "input_tokens": 10, "output_tokens": 10, "model": "m", "tier": "interactive",
                       "status": "served"})
    p = tmp_path / "poisson.parquet"
    df.to_parquet(p, index=False)
    a = read_requests(p).arrival_stats(windows=(1, 10, 60))
    tu = np.round(t * 1e6) / 1e6
    gaps = np.diff(tu)
    assert a["ca2"] == pytest.approx(gaps.var() / gaps.mean() ** 2, rel=1e-9)
    # a Poisson process: Ca2 and IDC near 1 (sampling error of Ca2 with 20,000 gaps ~ 0.03)
    # (IDC at 1 s and 10 s from 10,000 and 1,000 windows: standard errors about 0.014 and 0.045)
    assert abs(a["ca2"] - 1) < 0.1 and abs(a["idc"][1.0] - 1) < 0.1 and abs(a["idc"][10.0] - 1) < 0.25
    for w in (1, 10, 60):
        rel = tu - tu[0]
        c = np.bincount(np.floor(rel / w).astype(int), minlength=int(rel[-1] // w) + 1)
        assert a["idc"][float(w)] == pytest.approx(c.var() / c.mean(), rel=1e-9)
    with pytest.raises(ValueError, match="windows"):
        read_requests(p).arrival_stats(windows=(0,))


def test_service_cv2_from_sweep_numbers_against_numpy(tmp_path):
    # a sweep's two numbers given explicitly (the log no longer probes objects for them)
    df = _canonical_frame(600, seed=8)
    p = tmp_path / "svc.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    keep = df[df["status"] != "failed"]
    tpot = 0.02 + 0.0005 * 32
    T = keep["input_tokens"] / 5000.0 + keep["output_tokens"] * tpot
    got = log.service_cv2(prefill_rate_tps=5000.0, tpot_s=tpot)
    assert got == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    svc = log.service_times(prefill_rate_tps=5000.0, tpot_s=tpot)
    assert svc["source"] == "given rates" and svc["concurrency"] is None and svc["tpot_s"] == tpot
    with pytest.raises(ValueError, match="prefill_rate_tps"):
        log.service_cv2(object(), concurrency=1)  # not a Sweep: refused, not probed
    with pytest.raises(ValueError, match="give both"):
        log.service_cv2(tpot_s=tpot)
    for bad in ("5000", True, float("nan"), 0):
        with pytest.raises(ValueError, match="^prefill_rate_tps"):
            log.service_cv2(prefill_rate_tps=bad, tpot_s=tpot)


def test_service_cv2_with_the_real_sweep_class(tmp_path):
    from capbook.sweeps.sweep import load_sample_sweep

    sw = load_sample_sweep()
    df = _canonical_frame(300, seed=2)
    p = tmp_path / "svc2.parquet"
    df.to_parquet(p, index=False)
    keep = df[df["status"] != "failed"]
    T = keep["input_tokens"] / sw.prefill_rate_tps + keep["output_tokens"] * float(sw.tpot(16))
    log = read_requests(p)
    got = log.service_cv2(sw, concurrency=16)
    assert got == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    svc = log.service_times(sw, concurrency=16)
    assert svc["source"] == "sweep" and svc["concurrency"] == 16 and svc["tpot_s"] == float(sw.tpot(16))
    with pytest.raises(ValueError, match="concurrency"):
        log.service_cv2(sw)  # at which concurrency: the sweep has no S to guess from
    with pytest.raises(ValueError, match="not both"):
        log.service_cv2(sw, concurrency=16, tpot_s=0.02)


def test_peak_to_mean_and_arrays(tmp_path):
    df = _canonical_frame(900, seed=4, span_s=8 * 3600)
    p = tmp_path / "ptm.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    ptm = log.peak_to_mean()
    # oracle: pandas hourly sums without the partial first and last hour (00:00:0x and 07:59:xx)
    assert df["arrival_time"].iloc[0] > T0 and df["arrival_time"].iloc[-1] < T0 + pd.Timedelta("8h")
    hh = df.set_index("arrival_time").resample("h")[["input_tokens", "output_tokens"]].sum().iloc[1:-1]
    tot = hh["input_tokens"] + hh["output_tokens"]
    assert len(tot) == 6 and (ptm["full_hours"] == 6).all()
    assert ptm.loc["total_tokens", "ratio"] == pytest.approx(tot.max() / tot.mean())
    assert ptm.loc["total_tokens", "peak_hour"] == tot.idxmax()
    assert ptm.loc["total_tokens", "mean"] == pytest.approx(tot.mean())
    assert "6 full hours" in ptm.loc["requests", "caveat"] and "shorter than a day" in ptm.loc["requests", "caveat"]
    inter = df[df["tier"] == "interactive"].set_index("arrival_time").resample("h").size().iloc[1:-1]
    assert log.peak_to_mean(tier="interactive").loc["requests", "peak"] == inter.max()
    with pytest.raises(ValueError, match="tier='gold'"):
        log.peak_to_mean(tier="gold")
    a = log.arrays()
    assert len(a) == 900 and a.arrival_s[0] == 0.0 and a.start == df["arrival_time"].iloc[0]
    exp = (df["arrival_time"] - df["arrival_time"].iloc[0]).dt.total_seconds().to_numpy()
    np.testing.assert_allclose(a.arrival_s, exp, atol=1e-6)
    assert a.input_tokens.dtype == np.int64 and list(a.tier) == list(df["tier"])
    s = log.summary()
    assert s["rows"] == 900 and s["service"] is None and s["status"]["served"] == (df["status"] == "served").sum()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3 * 86400 * 10**6), st.integers(0, 10**6), st.integers(0, 10**5),
                          st.sampled_from(["a", "b"]), st.sampled_from(["interactive", "batch"])),
                min_size=1, max_size=60))
def test_hourly_conserves_requests_and_tokens(tmp_path_factory, rows):
    rows = sorted(rows)
    df = pd.DataFrame(rows, columns=["t", "input_tokens", "output_tokens", "model", "tier"])
    df.insert(0, "arrival_time", T0 + pd.to_timedelta(df.pop("t"), unit="us"))
    df["status"] = "served"
    p = tmp_path_factory.mktemp("h") / "h.parquet"
    df.to_parquet(p, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        log = read_requests(p, drop_invalid=True)
    h = log.hourly()
    assert h["requests"].sum() == log.rows
    assert h["input_tokens"].sum() == df.drop_duplicates()["input_tokens"].sum()
    n_hours = (df["arrival_time"].max().floor("h") - df["arrival_time"].min().floor("h")) / pd.Timedelta("1h") + 1
    assert len(h) == n_hours * len(h[["model", "tier"]].drop_duplicates())


def test_sample_log_is_generated_and_documented(repo_root):
    log = load_sample_requests()
    assert log.format == "canonical" and log.dropped == 0
    assert log.span_s > 27 * 86400
    df = log.hourly()
    assert set(df["model"]) == {"chat-70b", "chat-8b"} and set(df["tier"]) == {"interactive", "batch"}
    assert df["throttled"].sum() > 0
    assert set(log.columns) >= {"first_token_time", "end_time", "tenant"}
    assert "sample_requests.parquet" in (repo_root / "data" / "README.md").read_text()
    assert (repo_root / "data" / "requests" / "sample_requests.parquet").stat().st_size < 5e6


# --------------------------------------------------------------------------------------------
# the minimal canonical layout, numeric epoch times, request ids, coverage, bad files
# --------------------------------------------------------------------------------------------
def test_canonical_needs_only_time_and_tokens(tmp_path):
    df = _canonical_frame(50)[["arrival_time", "input_tokens", "output_tokens"]]
    p = _write_csv(df, tmp_path / "gateway.csv")
    log = read_requests(p)
    assert log.format == "canonical" and log.rows == 50
    out = log.to_pandas()
    assert set(out["model"]) == {"gateway"} and set(out["tier"]) == {"interactive"}
    assert set(out["status"]) == {"served"}
    assert log.notes[0] == ("no model, tier or status column: every row gets model 'gateway', "
                            "tier 'interactive', status 'served'")
    h = log.hourly()  # capbook.plan.steps groups this by model and tier
    assert {"model", "tier"} <= set(h.columns) and h["requests"].sum() == 50
    # a column that is present keeps its values, and only the others are noted
    df2 = _canonical_frame(50)[["arrival_time", "input_tokens", "output_tokens", "model"]]
    log2 = read_requests(_write_csv(df2, tmp_path / "m.csv"))
    assert log2.notes == ["no tier or status column: every row gets tier 'interactive', status 'served'"]
    assert set(log2.to_pandas()["model"]) == set(df2["model"])


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_numeric_epoch_seconds_ms_us_give_identical_times(tmp_path, ext):
    rng = np.random.default_rng(7)
    us = 1_767_571_200_000_000 + np.sort(rng.integers(0, 6 * 3600 * 10**6, 300))
    us[5] = us[4]  # a tie
    tokens = {"input_tokens": rng.integers(1, 900, 300), "output_tokens": rng.integers(1, 90, 300)}
    expect = pd.to_datetime(us, unit="us", utc=True)
    names = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
    for unit, values in (("s", us / 1e6), ("ms", us / 1e3), ("us", us)):
        df = pd.DataFrame({"arrival_time": values, **tokens})
        p = tmp_path / f"epoch_{unit}.{ext}"
        if ext == "csv":
            df.to_csv(p, index=False, float_format="%.6f")
        elif ext == "jsonl":
            df.to_json(p, orient="records", lines=True, double_precision=15)
        else:
            df.to_parquet(p, index=False)
        log = read_requests(p)
        got = log.to_pandas()["arrival_time"]
        assert (got.to_numpy() == expect.to_numpy()).all(), unit
        assert any(f"timestamps read as epoch {names[unit]} (detected from magnitude; pass "
                   f"time_unit= to override)" in n for n in log.notes)
        # the unit given explicitly reads the same and says so
        given = read_requests(p, time_unit=unit)
        assert (given.to_pandas()["arrival_time"].to_numpy() == expect.to_numpy()).all()
        assert any(f"(time_unit={unit!r})" in n for n in given.notes)


def test_integer_epoch_parquet_column_is_exact(tmp_path):
    ns = np.array([1_767_571_200_123_456_789, 1_767_571_201_000_000_499, 1_767_571_202_999_999_500])
    p = tmp_path / "ns.parquet"
    pd.DataFrame({"arrival_time": ns, "input_tokens": [1, 2, 3], "output_tokens": [1, 1, 1]}).to_parquet(p)
    got = read_requests(p).to_pandas()["arrival_time"]
    assert list(got.astype("int64")) == [1_767_571_200_123_457_000, 1_767_571_201_000_000_000,
                                         1_767_571_203_000_000_000]  # rounded to microseconds


def test_relative_or_mixed_numeric_times_ask_for_the_unit(tmp_path):
    rel = tmp_path / "rel.csv"
    pd.DataFrame({"arrival_time": [0, 1500, 3200], "input_tokens": 5, "output_tokens": 5}).to_csv(rel, index=False)
    with pytest.raises(ValueError, match=r"rel.csv: column 'arrival_time' holds numbers \(0 to 3,200 .*too "
                                         r"small for Unix epoch times.*pass time_unit='s'"):
        read_requests(rel)
    log = read_requests(rel, time_unit="ms")
    assert log.span_s == 3.2 and log.start == pd.Timestamp("1970-01-01", tz="UTC")
    assert any("fall in 1970" in n for n in log.notes)
    mixed = tmp_path / "mixed.csv"
    pd.DataFrame({"arrival_time": [1_767_571_200, 1_767_571_200_500], "input_tokens": 5,
                  "output_tokens": 5}).to_csv(mixed, index=False)
    with pytest.raises(ValueError, match="not Unix epoch times of one unit"):
        read_requests(mixed)
    with pytest.raises(ValueError, match=r"^time_unit must be one of 's', 'ms', 'us', 'ns'; got 'minutes'"):
        read_requests(rel, time_unit="minutes")


def test_timestamp_overflowing_its_unit_is_reported(tmp_path):
    p = tmp_path / "us.csv"
    us = 1_767_571_200_000_000 + np.arange(20) * 10**6
    pd.DataFrame({"ts": us, "i": 5, "o": 5}).to_csv(p, index=False)
    m = Mapping(arrival_time="ts", input_tokens="i", output_tokens="o", time_unit="s")
    with pytest.raises(ValueError, match=r"20 rows with timestamp out of range when read as seconds; "
                                         r"pass time_unit='ms' if they are finer"):
        read_requests(p, mapping=m)
    assert read_requests(p, mapping=m, time_unit="us").span_s == 19.0


def test_unit_mistakes_name_the_unit_to_try(tmp_path):
    # a seconds log of 2 hours (3,000 requests) read as milliseconds: 3,000 requests in 7.2 s
    p = tmp_path / "sec.csv"
    pd.DataFrame({"arrival_time": 1_767_571_200 + np.arange(3000) * 2.4, "input_tokens": 5,
                  "output_tokens": 5}).to_csv(p, index=False)
    assert read_requests(p).span_s == pytest.approx(7197.6)
    with pytest.raises(ValueError, match=r"3000 requests in 7.2 s is 417 requests per second for the "
                                         r"whole log: suspiciously fast, as if seconds were read as "
                                         r"milliseconds \(the 'arrival_time' column was read as "
                                         r"milliseconds .*\)\. If the times are seconds, pass "
                                         r"time_unit='s'; if they are right, pass check_units=False"):
        read_requests(p, time_unit="ms")
    assert read_requests(p, time_unit="ms", check_units=False).span_s == pytest.approx(7.1976)
    # 999 requests are too few to judge
    pd.read_csv(p).iloc[:999].to_csv(p, index=False)
    assert read_requests(p, time_unit="ms").rows == 999
    # relative milliseconds read as seconds: 40 requests over 11.6 days
    q = tmp_path / "ms.csv"
    pd.DataFrame({"arrival_time": np.arange(40) * 25_000, "input_tokens": 5, "output_tokens": 5}).to_csv(q, index=False)
    with pytest.raises(ValueError, match=r"suspiciously slow, as if milliseconds were read as seconds "
                                         r".*pass time_unit='ms'"):
        read_requests(q, time_unit="s")
    assert read_requests(q, time_unit="ms").span_s == 975.0


def test_repeated_request_id_raises_and_exact_copies_with_distinct_ids_are_fine(tmp_path):
    df = _canonical_frame(30)
    df.insert(0, "request_id", [f"req-{k}" for k in range(30)])
    ok = pd.concat([df.iloc[:12], df.iloc[[11]].assign(request_id="req-x"), df.iloc[12:]], ignore_index=True)
    log = read_requests(_write_csv(ok, tmp_path / "ok.csv"))  # same values, other id: two requests
    assert log.rows == 31 and log.report == [] and not any("identical" in n for n in log.notes)
    # row 13 repeats row 12 exactly; row 22 is another record (in arrival order) under req-3's id
    dup = pd.concat([df.iloc[:12], df.iloc[[11]], df.iloc[12:20], df.iloc[[20]].assign(request_id="req-3"),
                     df.iloc[20:]], ignore_index=True)
    p = _write_csv(dup, tmp_path / "dup.csv")
    with pytest.raises(ValueError) as exc:
        read_requests(p)
    msg = str(exc.value)
    assert ("column 'request_id' (request id): 2 ids appear on more than one row (2 rows more than "
            "one per id): the same request logged more than once; first: 'req-3' on rows [4, 22]; "
            "'req-11' on rows [12, 13]") in msg
    assert "pass drop_invalid=True" in msg
    # row 13 is both an exact copy and a repeated id: dropped once, listed under both reasons
    with pytest.warns(UserWarning, match=r"2 of 32 rows dropped \(0 invalid, 1 duplicates, 1 repeated request ids\)"):
        kept = read_requests(p, drop_invalid=True)
    assert kept.rows == 30 and kept.dropped == 2
    rep = [r for r in kept.report if r["field"] == "request_id"][0]
    assert rep["rows"] == 2 and rep["first_rows"] == [13, 22] and "first row of each id" in rep["action"]
    assert kept.hourly()["input_tokens"].sum() == df["input_tokens"].sum()
    assert kept.to_pandas()["input_tokens"].tolist() == df["input_tokens"].tolist()  # first of each id kept
    # an 'id' column counts too, and an empty id is no id
    df2 = df.rename(columns={"request_id": "id"})
    df2.loc[[1, 2], "id"] = ""
    assert read_requests(_write_csv(df2, tmp_path / "id.csv")).rows == 30


def test_litellm_request_id_is_checked(tmp_path):
    df = _litellm_frame()
    df.loc[7, "request_id"] = df.loc[6, "request_id"]
    p = tmp_path / "spend.csv"
    df.to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"column 'request_id' \(request id\): 1 id appears on more than one row .*"
                                         r"'chatcmpl-6' on rows \[7, 8\]"):
        read_requests(p)


def _hours_log(tmp_path, name, start, stop, n=600, seed=3):
    """Arrivals uniform in [start, stop] (timestamps) plus one at each end exactly."""
    rng = np.random.default_rng(seed)
    a, b = pd.Timestamp(start, tz="UTC"), pd.Timestamp(stop, tz="UTC")
    us = np.sort(np.r_[a.value // 1000, b.value // 1000,
                       rng.integers(a.value // 1000, b.value // 1000, n - 2)])
    df = pd.DataFrame({"arrival_time": pd.to_datetime(us, unit="us", utc=True),
                       "input_tokens": rng.integers(1, 500, n), "output_tokens": rng.integers(1, 50, n)})
    p = tmp_path / name
    df.to_parquet(p, index=False)
    return read_requests(p), df


def test_coverage_and_peak_to_mean_use_full_hours_only(tmp_path):
    # 18:17 -> 19:14: no hour covered (the Azure 2023 shape)
    log, _ = _hours_log(tmp_path, "short.parquet", "2023-11-16 18:17:03.98", "2023-11-16 19:14:19.93")
    cov = log.coverage()
    assert cov["full_hours"] == 0 and cov["first_full_hour"] is None and not cov["daily_shape"]
    assert cov["caveat"] == "the log covers 0 full hours (57.3 min): peak-to-mean over hours is not defined"
    ptm = log.peak_to_mean()
    assert ptm["ratio"].isna().all() and ptm["peak"].isna().all() and ptm["peak_hour"].isna().all()
    assert (ptm["caveat"] == cov["caveat"]).all() and (ptm["full_hours"] == 0).all()
    assert len(log.hourly(full_hours_only=True)) == 0 and len(log.hourly(by=())) == 2
    s = log.summary()
    assert s["full_hours"] == 0 and s["caveats"] == [cov["caveat"]]
    assert s["coverage"]["first_full_hour"] is None
    json.dumps(s["coverage"]), json.dumps(s["caveats"]), json.dumps(s["notes"])
    # exactly on the hour boundaries: both hours covered
    log2, df2 = _hours_log(tmp_path, "aligned.parquet", "2026-03-02 10:00", "2026-03-02 12:00")
    cov2 = log2.coverage()
    assert cov2["full_hours"] == 2 and cov2["first_full_hour"] == pd.Timestamp("2026-03-02 10:00", tz="UTC")
    assert cov2["last_full_hour"] == pd.Timestamp("2026-03-02 11:00", tz="UTC")
    assert "2 full hours (2.0 h): shorter than a day: no daily shape" in cov2["caveat"]
    per_h = df2[df2["arrival_time"] < pd.Timestamp("2026-03-02 12:00", tz="UTC")].set_index("arrival_time").resample("h").size()
    ptm2 = log2.peak_to_mean()
    assert ptm2.loc["requests", "peak"] == per_h.max() and ptm2.loc["requests", "mean"] == per_h.mean()
    h = log2.hourly(full_hours_only=True)
    assert list(h["period_start"].dt.hour) == [10, 11] and h["requests"].sum() == per_h.sum()
    # a single hour: defined, 1 by definition, and said so
    log3, _ = _hours_log(tmp_path, "one.parquet", "2026-03-02 09:59", "2026-03-02 11:01")
    assert log3.coverage()["full_hours"] == 1 and log3.peak_to_mean().loc["requests", "ratio"] == 1.0
    assert "single hour is 1 by definition" in log3.coverage()["caveat"]
    # two days: 47 full hours, the partial first and last hours left out, no caveat
    log4, df4 = _hours_log(tmp_path, "days.parquet", "2026-03-02 00:30", "2026-03-04 00:10", n=5000)
    cov4 = log4.coverage()
    assert cov4["full_hours"] == 47 and cov4["daily_shape"] and cov4["caveat"] == ""
    hh = df4.set_index("arrival_time").resample("h")[["input_tokens", "output_tokens"]].sum().iloc[1:-1]
    tot = hh.sum(axis=1)
    ptm4 = log4.peak_to_mean()
    assert len(tot) == 47 and ptm4.loc["total_tokens", "ratio"] == pytest.approx(tot.max() / tot.mean())
    assert (ptm4["caveat"] == "").all() and log4.summary()["caveats"] == []


def test_summary_caveats_for_degenerate_logs(tmp_path):
    p = tmp_path / "two.csv"
    p.write_text("arrival_time,input_tokens,output_tokens\n2026-01-01T00:00:00Z,1,2\n2026-01-01T00:00:00Z,3,4\n")
    s = read_requests(p).summary()
    assert s["arrivals"] is None and s["rate_rps"] == math.inf
    assert any("same instant" in c for c in s["caveats"]) and any("fewer than 3" in c for c in s["caveats"])
    assert any("0 full hours (0.0 s)" in c for c in s["caveats"])


def test_files_that_are_not_request_logs(tmp_path):
    def err(path, **kw):
        with pytest.raises(ValueError) as exc:
            read_requests(path, **kw)
        msg = str(exc.value)
        assert str(path) in msg and "Possible fixes" not in msg and "LINE 1" not in msg, msg
        return msg

    binary = tmp_path / "blob.csv"
    binary.write_bytes(bytes(range(256)) * 20)
    assert "the file holds binary data, not text" in err(binary)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("arrival_time,input_tokens,output_tokens\n2026-01-01T00:00:00Z,1,2 caf\xe9\n".encode("latin-1"))
    assert "is not UTF-8 text (byte 0xe9" in err(latin)
    pqfile = tmp_path / "real.parquet"
    _canonical_frame(5).to_parquet(pqfile)
    named_csv = tmp_path / "real.csv"
    named_csv.write_bytes(pqfile.read_bytes())
    assert "this is a Parquet file" in err(named_csv)
    text_pq = tmp_path / "text.parquet"
    text_pq.write_text("arrival_time,input_tokens\n1,2\n")
    assert "not a Parquet file" in err(text_pq) and "looks like text" in err(text_pq)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("arrival_time,input_tokens,output_tokens\n2026-01-01T00:00:00Z,1,2\n"
                      "2026-01-01T00:00:01Z,1\n2026-01-01T00:00:02Z,1,2\n")
    assert "line 3 of the file ('2026-01-01T00:00:01Z,1') has 2 fields where the header has 3" in err(ragged)
    badjson = tmp_path / "bad.jsonl"
    badjson.write_text('{"timestamp": 0, "input_length": 5, "output_length": 3}\n'
                       '{"timestamp": 5, "input_length": 5,\n')
    assert "malformed JSON at line 3 (unexpected end of data" in err(badjson)  # object of line 2 unclosed
    headerless = tmp_path / "nohead.csv"
    headerless.write_text("2026-01-01T00:00:00Z,1,2\n2026-01-01T00:00:01Z,3,4\n")
    assert "not a header: add a header row" in err(headerless)
    # a JSON array instead of JSON lines is read, element by element, with a note
    arr = tmp_path / "arr.jsonl"
    arr.write_text(json.dumps([{"timestamp": k * 1000, "input_length": 5 + k, "output_length": 3}
                               for k in range(4)]))
    log = read_requests(arr)
    assert log.format == "mooncake" and log.rows == 4 and log.span_s == 3.0
    assert any("one JSON array" in n for n in log.notes)


def test_globs_of_several_files(tmp_path):
    df = _canonical_frame(300, span_s=3 * 86400)
    parts = [g for _, g in df.groupby(df["arrival_time"].dt.floor("D"))]
    for k, part in enumerate(parts):
        _write_csv(part, tmp_path / f"day{k}.csv")
    log = read_requests(tmp_path / "day*.csv")
    assert log.rows == 300 and log.hourly()["input_tokens"].sum() == df["input_tokens"].sum()
    (tmp_path / "day9.csv").write_text("")
    with pytest.raises(ValueError, match=r"day9.csv: the file is empty \(0 bytes\)"):
        read_requests(tmp_path / "day*.csv")
    (tmp_path / "day9.csv").write_text("arrival_time,input_tokens\n2026-03-09T00:00:00Z,1\n")
    with pytest.raises(ValueError, match=r"day\*.csv: the files this pattern matches do not all have the same "
                                         r"columns: .*day9.csv differs"):
        read_requests(tmp_path / "day*.csv")
    with pytest.raises(FileNotFoundError, match="no file matches this pattern"):
        read_requests(tmp_path / "week*.csv")


# --------------------------------------------------------------------------------------------
# the split: reading and validation (traces), statistics (tracestats); arguments; data paths
# --------------------------------------------------------------------------------------------
def test_statistics_are_logstats_of_the_log(tmp_path):
    from capbook.logs.stats import LogStats

    df = _canonical_frame(400, seed=11, span_s=3 * 3600)
    p = tmp_path / "split.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    assert isinstance(log, RequestLog) and log.first_us < log.last_us
    stats = LogStats(log)
    pd.testing.assert_frame_equal(stats.hourly(), log.hourly())
    pd.testing.assert_frame_equal(stats.token_stats(by="tier"), log.token_stats(by="tier"))
    assert stats.coverage() == log.coverage()
    assert RequestLog.hourly.__doc__ == LogStats.hourly.__doc__
    # the canonical view is queryable directly
    n, = log.query_one("SELECT count(*) FROM req")
    assert n == log.rows == len(df)
    assert list(log.query("SELECT tier, count(*) AS n FROM req GROUP BY tier ORDER BY tier")["n"]) == \
        list(df.groupby("tier").size().sort_index())


@pytest.mark.parametrize("bad", ["3", True, float("nan")])
def test_statistics_refuse_text_bools_and_nan(tmp_path, bad):
    df = _canonical_frame(300, seed=12)
    p = tmp_path / "args.parquet"
    df.to_parquet(p, index=False)
    log = read_requests(p)
    with pytest.raises(ValueError, match="^period_s"):
        log.aggregate(bad)
    with pytest.raises(ValueError, match="^output_cap"):
        log.token_stats(output_cap=bad)
    with pytest.raises(ValueError, match="^windows"):
        log.arrival_stats(windows=[bad])
    with pytest.raises(ValueError, match="^threads"):
        read_requests(p, threads=bad)


def test_sample_requests_honour_capbook_data(tmp_path, monkeypatch):
    (tmp_path / "requests").mkdir()
    df = _canonical_frame(200, seed=13)
    df.to_parquet(tmp_path / "requests" / "sample_requests.parquet", index=False)
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    log = load_sample_requests()
    assert log.rows == 200 and log.path.startswith(str(tmp_path))
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="CAPBOOK_DATA"):
        load_sample_requests()
