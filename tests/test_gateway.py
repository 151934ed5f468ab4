"""The sample gateway of the running example (data/gateway, tools/make_gateway.py) and the
plan's hourly history (``capacity_plan`` on a log of the busiest hours beside 26 weeks of sums)."""
from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capbook.app import datasets
from capbook.logs import requestlog as traces
from capbook.app.cli import main as cli_main
from capbook.forecast.tokens import HOURS_PER_WEEK, read_token_csv
from capbook.plan.steps import LogAggregates, capacity_plan
from capbook.sweeps.sweep import load_sample_sweep

ROOT = Path(__file__).resolve().parents[1]
HISTORY = ROOT / "data" / "gateway" / "hourly.csv"
LOG = ROOT / "data" / "gateway" / "peak_hours.parquet"


@pytest.fixture(scope="module")
def history() -> pd.DataFrame:
    return read_token_csv(HISTORY)


@pytest.fixture(scope="module")
def log():
    return traces.read_requests(LOG)


@pytest.fixture(scope="module")
def sample_plan():
    return capacity_plan(**datasets.plan_inputs().arguments)


def test_the_generator_gives_the_committed_files():
    out = subprocess.run([sys.executable, "tools/make_gateway.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout


def test_busiest_hour_is_the_running_examples_40_requests_per_second(history, log):
    inter = history[history["tier"] == "interactive"].groupby("period_start")["requests"].sum()
    assert inter.max() == 40 * 3600
    busiest = inter.idxmax()
    # the log holds that hour: its own count of the hour's interactive arrivals is 144,000 too
    t = log.to_pandas()
    in_hour = (t["arrival_time"] >= busiest) & (t["arrival_time"] < busiest + pd.Timedelta(hours=1))
    assert int((in_hour & (t["tier"] == "interactive")).sum()) == 144_000


def test_history_is_long_enough_for_the_calibrated_forecast_at_every_horizon(history):
    hours = history["period_start"].drop_duplicates().sort_values()
    assert len(hours) % HOURS_PER_WEEK == 0 and len(hours) // HOURS_PER_WEEK >= 20
    assert (hours.diff().dropna() == pd.Timedelta(hours=1)).all()
    assert set(history["tier"]) == {"interactive", "batch"}
    assert set(history["tenant"]) == {"web", "mobile", "agents", "etl"}
    thr = history.groupby("tenant")["throttled"].sum()
    assert thr["agents"] > 0 and thr.drop("agents").eq(0).all()  # the quota is the agents' only


def test_log_and_history_agree_on_the_logs_hours(history, log):
    from_log = log.hourly()
    from_log = from_log[from_log["requests"] > 0]
    hist = history.groupby(["period_start", "model", "tier"], as_index=False)[
        ["requests", "throttled", "input_tokens", "output_tokens"]].sum()
    merged = from_log.merge(hist, on=["period_start", "model", "tier"], suffixes=("_log", "_hist"), how="left")
    assert len(merged) == len(from_log) >= 3
    for c in ("requests", "throttled", "input_tokens", "output_tokens"):
        np.testing.assert_array_equal(merged[f"{c}_log"].to_numpy(), merged[f"{c}_hist"].to_numpy(), err_msg=c)
    # the log is the busiest day's busiest three consecutive hours of interactive demand
    inter = history[history["tier"] == "interactive"].groupby("period_start")["requests"].sum()
    day = inter[inter.index.normalize() == inter.idxmax().normalize()]
    best = day.rolling(3).sum().idxmax() - pd.Timedelta(hours=2)
    assert from_log["period_start"].min() == best


def test_lengths_are_the_running_examples_mix(log):
    t = log.to_pandas()
    t = t[(t["tier"] == "interactive") & (t["status"] != "failed")]
    assert t["input_tokens"].mean() == pytest.approx(1500, rel=0.01)
    assert t["output_tokens"].mean() == pytest.approx(300, rel=0.01)
    assert t["input_tokens"].max() == 4096 and t["output_tokens"].max() == 2048


def test_the_sample_plan_is_tens_of_replicas_with_a_number_per_horizon(sample_plan):
    p = sample_plan
    assert p.source["requests"] == datasets.SAMPLE_GATEWAY_LABEL
    assert p.source["model"] == "chat" and "illustrative_chat" in p.source["sweep"]
    assert p.total >= 20
    assert p.verification.status == "verified"
    assert {h: pk.method for h, pk in p.demand.peaks.items()} == {1: "calibrated", 4: "calibrated", 12: "calibrated"}
    by_h = p.horizons()["replicas_by_rating"]
    assert list(by_h) == sorted(by_h) and by_h.nunique() == 3
    # the planned peak grows from the observed 40 requests/s of the busiest hour
    assert p.demand.request_rate > 40
    assert any("hourly history" in n for n in p.traffic.notes)


def test_history_replaces_the_logs_own_hours_for_the_forecast(log, history):
    own = LogAggregates.of(log)
    with_hist = LogAggregates.of(log, history=HISTORY)
    assert own.history_label is None and with_hist.history_label == str(HISTORY)
    assert own.hourly["period_start"].nunique() == 3
    assert with_hist.hourly["period_start"].nunique() == 26 * HOURS_PER_WEEK
    # the same frame gives the same sums; tenants are summed over
    from_frame = LogAggregates.of(log, history=history)
    pd.testing.assert_frame_equal(from_frame.hourly.reset_index(drop=True), with_hist.hourly.reset_index(drop=True))
    # without the history, three hours cannot be forecast and the plan says so
    short = capacity_plan(own, load_sample_sweep("illustrative_chat"), simulate=False)
    assert short.demand.peaks[4].method == "observed"


def test_bad_history_is_refused_with_its_name(log, tmp_path, history):
    with pytest.raises(FileNotFoundError, match="history .*nope.csv: no such file"):
        LogAggregates.of(log, history=tmp_path / "nope.csv")
    with pytest.raises(ValueError, match=r"history: missing column\(s\) \['throttled'\]"):
        LogAggregates.of(log, history=history.drop(columns="throttled"))
    with pytest.raises(ValueError, match="history must be a path to an hourly CSV or a pandas DataFrame"):
        LogAggregates.of(log, history=42)
    with pytest.raises(ValueError, match="give it with the request log"):
        LogAggregates.of(LogAggregates.of(log), history=HISTORY)
    bad = tmp_path / "bad.csv"
    history.assign(requests=-1).head(5).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"bad.csv: column 'requests' is negative at lines 2, 3, 4, 5 and 6"):
        LogAggregates.of(log, history=bad)


def test_cli_history_flag(tmp_path, capsys, history):
    bad = tmp_path / "hist.csv"
    history.drop(columns="output_tokens").head(5).to_csv(bad, index=False)
    assert cli_main(["plan", "--requests", str(LOG), "--history", str(bad), "--no-sim",
                     "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--history" in err and "output_tokens" in err and "Traceback" not in err
    assert cli_main(["plan", "--requests", str(LOG), "--history", str(tmp_path / "missing.csv"), "--no-sim",
                     "--out", str(tmp_path / "o")]) == 2
    assert "--history" in capsys.readouterr().err
    assert cli_main(["plan", "--requests", str(LOG), "--history", str(HISTORY), "--no-sim", "--no-autoscale",
                     "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "calibrated" in out and "hourly history" in out
    rows = pd.read_csv(tmp_path / "o" / "plan.csv")
    total = rows[(rows["step"] == "fleet") & (rows["quantity"] == "total replicas")]["value"]
    assert len(total) == 1 and float(total.iloc[0]) >= 20


def test_reader_history_from_the_environment(tmp_path, monkeypatch):
    import shutil

    mine = tmp_path / "my-log.parquet"
    shutil.copy(LOG, mine)
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(mine))
    monkeypatch.delenv("CAPBOOK_HISTORY", raising=False)
    assert datasets.plan_log().history_label is None          # a reader's log alone: its own hours
    monkeypatch.setenv("CAPBOOK_HISTORY", str(HISTORY))
    sums = datasets.plan_log()
    assert sums.label == str(mine) and sums.history_label == str(HISTORY)
    assert sums.hourly["period_start"].nunique() == 26 * HOURS_PER_WEEK


def test_history_without_a_log_is_refused_by_name(tmp_path, capsys):
    for cmd in (["plan", "--no-sim"], ["book"]):
        assert cli_main([*cmd, "--history", str(HISTORY), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "--history applies to --requests LOG" in err and "Traceback" not in err


def test_book_passes_the_history_to_the_chapters():
    from capbook.app import bookbuild

    env = bookbuild._data_env(str(LOG), "auto", None, history=str(HISTORY))
    assert env["CAPBOOK_HISTORY"] == str(HISTORY.resolve()) and env["CAPBOOK_REQUESTS"] == str(LOG.resolve())
    with bookbuild._environ(env):          # what each chapter's kernel sees
        source = datasets.data_source()
    assert source["history"] == str(HISTORY.resolve())
    note = bookbuild.data_note(source, "2026-12-01 18:00 UTC")
    assert f"hourly history: {HISTORY.resolve()}" in html.unescape(re.sub(r"<[^>]+>", "", note))


def test_trace_hourly_writes_the_history_plan_reads(tmp_path, capsys, history):
    out = tmp_path / "hourly.csv"
    assert cli_main(["trace", str(LOG), "--hourly", str(out)]) == 0
    assert "hourly rows" in capsys.readouterr().err
    mine = read_token_csv(out)
    key = ["period_start", "model", "tier", "tenant"]
    counts = ["requests", "throttled", "input_tokens", "output_tokens"]
    idle = (mine[counts] == 0).all(axis=1)
    # every hour of the log's span is written for every group: the hours a group had no request
    # are zeros (so the file reads back as a history with no gaps), and the history has no
    # request for that group in that hour either
    assert idle.any() and mine.groupby(key[1:]).size().nunique() == 1
    both = history.merge(mine.loc[idle, key], on=key)
    assert (both[counts] == 0).all(axis=None)
    busy = mine.loc[~idle]
    want = history.merge(busy[key], on=key).sort_values(key).reset_index(drop=True)
    got = busy.sort_values(key).reset_index(drop=True)[list(want.columns)]
    pd.testing.assert_frame_equal(got, want, check_dtype=False)   # the log's hours, tenant by tenant
    assert cli_main(["trace", str(LOG), "--hourly", str(tmp_path / "no" / "such" / "dir.csv")]) == 2
    assert "--hourly" in capsys.readouterr().err
