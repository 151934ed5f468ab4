"""Big logs: the plan's busy hours and the autoscaling week's aggregates come from SQL.

The replay (:func:`capbook.plan.replay.replay_requests`) counts the requests per hour on the log's
engine and reads only the rows of the busiest hours; the autoscaling week reads the counts per
minute and the (input, output) pairs of the plan's traffic. These tests hold that the SQL path
gives exactly what the pandas path (the whole log in a DataFrame) gives, on the sample log and on
a small hostile log, and that a log above the 5,000,000 rows :meth:`RequestLog.to_pandas` refuses
plans without ever reading the whole log (on DuckDB and on Spark).
"""
from __future__ import annotations

import types
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from capbook.autoscale import schedule as ap
from capbook.logs import requestlog as traces
from capbook.plan.replay import replay_requests
from capbook.logs.requestlog import read_requests

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "requests" / "sample_requests.parquet"


def _same_replay(log, frame, rate, n, model, tier):
    a = replay_requests(frame, rate, n, model=model, tier=tier)       # the whole log in pandas
    b = replay_requests(log, rate, n, model=model, tier=tier)         # hours from SQL
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.attrs == b.attrs
    return b


def _same_week_inputs(log, frame, model, tier):
    plan = types.SimpleNamespace(source={"model": model, "tier": tier})
    assert ap.log_rate_cv(plan, frame) == ap.log_rate_cv(plan, log)
    la, lb = ap._lengths(plan, frame), ap._lengths(plan, log)
    assert la.tiers == lb.tiers
    np.testing.assert_array_equal(la.shares, lb.shares)
    for k in la.tiers:
        np.testing.assert_array_equal(la.pairs[k][0], lb.pairs[k][0])
        np.testing.assert_array_equal(la.pairs[k][1], lb.pairs[k][1])


@pytest.fixture(scope="module")
def sample():
    log = read_requests(SAMPLE)
    return log, log.to_pandas()


@pytest.mark.parametrize("model,tier,n", [("chat-70b", "interactive", 30_000), ("chat-8b", "batch", 5_000),
                                          (None, None, 12_345), ("chat-8b", None, 10**7)])
def test_sample_log_replays_the_same_rows(sample, model, tier, n):
    log, frame = sample
    data = _same_replay(log, frame, 40.0, n, model, tier)
    assert 0 < len(data) <= n
    if tier is not None:
        assert set(data["tier"]) == {tier}


@pytest.mark.parametrize("model,tier", [("chat-70b", "interactive"), ("chat-8b", "all tiers")])
def test_sample_log_week_inputs_are_the_same(sample, model, tier):
    log, frame = sample
    _same_week_inputs(log, frame, model, tier)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Three models, two tiers, requests without tokens, hours with equal counts (ties that the
    earlier hour wins), arrivals tied to the millisecond, a start at 18:17 and an end mid-hour."""
    rng = np.random.default_rng(33)
    start = pd.Timestamp("2026-03-02 18:17:03.250", tz="UTC")
    rows = []
    # hours 0..9 from 18:00; hours 2 and 5 hold the same count, as do 3 and 7
    per_hour = [40, 90, 150, 120, 60, 150, 30, 120, 80, 25]
    for h, n in enumerate(per_hour):
        lo = start if h == 0 else start.floor("h") + pd.Timedelta(hours=h)
        hi = start.floor("h") + pd.Timedelta(hours=h + 1) if h < 9 else lo + pd.Timedelta(minutes=23)
        span_ms = int((hi - lo) / pd.Timedelta(milliseconds=1))
        ms = np.sort(rng.integers(0, span_ms, n))
        ms[5:9] = ms[5]                                      # four arrivals in one millisecond
        for k, m in enumerate(ms):
            rows.append({"arrival_time": lo + pd.Timedelta(milliseconds=int(m)),
                         "input_tokens": 0 if k % 11 == 3 else int(rng.integers(1, 3000)),
                         "output_tokens": 0 if k % 13 == 5 else int(rng.integers(1, 700)),
                         "model": ("m-a", "m-b", "m-c")[k % 3] if h != 4 else "m-a",
                         "tier": "batch" if k % 4 == 0 else "interactive",
                         "status": "failed" if k % 13 == 5 else "served"})
    df = pd.DataFrame(rows)
    df["arrival_time"] = df["arrival_time"].dt.as_unit("ms")
    path = tmp_path_factory.mktemp("hostile") / "hostile.parquet"
    df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("model", [None, "m-a", "m-b"])
@pytest.mark.parametrize("tier", [None, "interactive", "batch"])
@pytest.mark.parametrize("n", [1, 100, 260, 5_000])
def test_hostile_log_replays_the_same_rows(hostile, model, tier, n):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        log = read_requests(hostile, check_units=False)
    frame = log.to_pandas()
    data = _same_replay(log, frame, 7.5, n, model, tier)
    empty, of = data.attrs["without_tokens"]
    assert 0 < empty < of                                      # the log has requests without tokens
    assert (data["input_tokens"] >= 1).all() and (data["output_tokens"] >= 1).all()


@pytest.mark.parametrize("model,tier", [("m-a", "interactive"), ("m-c", "all tiers"), ("m-b", "batch")])
def test_hostile_log_week_inputs_are_the_same(hostile, model, tier):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        log = read_requests(hostile, check_units=False)
    _same_week_inputs(log, log.to_pandas(), model, tier)


def test_replay_ties_of_hour_counts_take_the_earlier_hour(hostile):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        log = read_requests(hostile, check_units=False)
    frame = log.to_pandas()
    # every row of the log: the hours of 150 requests come first, the earlier of them first
    data = replay_requests(log, 7.5, 10**6)
    counts = frame.assign(h=frame["arrival_time"].dt.floor("h")).query(
        "input_tokens >= 1 and output_tokens >= 1").groupby("h").size()
    assert len(data) == int(counts.sum())
    one = replay_requests(log, 7.5, int(counts.max()))        # one hour: the earlier of the two busiest
    assert one["period_start"].nunique() == 1
    assert one["period_start"].iloc[0] == 2 * 3600.0


# --------------------------------------------------------------------------------------------
# a log above the old 5,000,000-row guard plans without reading the whole log
# --------------------------------------------------------------------------------------------
MEDIUM_ROWS = 5_200_000


@pytest.fixture(scope="module")
def medium_log(tmp_path_factory) -> Path:
    """5.2 million rows over a week (about 8.6 requests/s), one model, two tiers, ms times."""
    path = tmp_path_factory.mktemp("medium") / "requests.parquet"
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    step_us = 7 * 86400 * 10**6 // MEDIUM_ROWS
    con.execute(f"""
    COPY (SELECT make_timestamp(((1767571200000000 + i * {step_us} + hash(i) % 50000) // 1000 * 1000)::BIGINT)
                     ::TIMESTAMPTZ AS arrival_time,
                 1 + hash(i * 7) % 3000 AS input_tokens, 1 + hash(i * 11) % 600 AS output_tokens,
                 'chat' AS model,
                 CASE WHEN hash(i * 5) % 10 = 0 THEN 'batch' ELSE 'interactive' END AS tier,
                 'served' AS status
          FROM range({MEDIUM_ROWS}) r(i) ORDER BY arrival_time)
    TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 200000)""")
    return path


def _forbid_whole_log(monkeypatch):
    def whole(self, *args, **kwargs):
        raise AssertionError("the plan read the whole log into memory")

    monkeypatch.setattr(traces.RequestLog, "to_pandas", whole)
    monkeypatch.setattr(traces.RequestLog, "arrays", whole)


def _plan_without_reading(path, engine, monkeypatch, **kw):
    from capbook.plan.steps import capacity_plan
    from capbook.sweeps.sweep import load_sample_sweep

    log = read_requests(path, engine=engine, **kw)
    assert log.rows == MEDIUM_ROWS
    with pytest.raises(ValueError, match="more than max_rows=5,000,000"):
        log.to_pandas()                      # pandas would refuse this log
    _forbid_whole_log(monkeypatch)
    sweep = load_sample_sweep("illustrative_chat")
    plan = capacity_plan(log, sweep, sim_requests=1_500, sim_seeds=1)
    assert plan.verification.sim["replayed_requests"] == 1_500
    return ap.log_rate_cv(plan, log), ap._lengths(plan, log), plan


def _sampled(lengths):
    """The interactive pairs are a hash sample of the 4.7 million: about a third of them."""
    n = lengths.pairs["interactive"][0].size
    assert ap.LENGTH_PAIRS_MAX / 2 < n <= ap.LENGTH_PAIRS_MAX
    assert lengths.mean_output_tokens == pytest.approx(301, rel=0.01)


def test_plan_above_the_pandas_guard_reads_no_whole_log(medium_log, monkeypatch):
    rate_cv, lengths, plan = _plan_without_reading(medium_log, "duckdb", monkeypatch)
    assert plan.total >= 1
    assert lengths.tiers == ["interactive"]
    _sampled(lengths)
    assert rate_cv >= 0.0


def test_plan_above_the_pandas_guard_on_spark(spark, medium_log, monkeypatch):
    rate_cv, lengths, plan = _plan_without_reading(medium_log, "spark", monkeypatch, spark_master="local[2]")
    assert plan.total >= 1
    _sampled(lengths)
