"""Tests of capbook.datasets: the sample data by default, the reader's files through env vars.

Oracles: the committed sample files read directly with pandas; small logs written here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capbook import datasets
from capbook.forecast import load_sample_series


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ("CAPBOOK_REQUESTS", "CAPBOOK_REQUESTS_FORMAT", "CAPBOOK_SWEEP", "CAPBOOK_DATA"):
        monkeypatch.delenv(k, raising=False)


def _log(path, hours, rate=0.2, seed=0, gap=None, models=("m-a",)):
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 * rate)
    t = np.sort(rng.uniform(0, hours * 3600, n))
    if gap is not None:
        t = t[(t < gap[0]) | (t >= gap[1])]
    df = pd.DataFrame({
        "arrival_time": pd.Timestamp("2026-03-02", tz="UTC") + pd.to_timedelta(np.round(t * 1e6), unit="us"),
        "input_tokens": rng.integers(10, 900, t.size), "output_tokens": rng.integers(1, 300, t.size),
        "model": rng.choice(list(models), t.size), "tier": "interactive", "status": "served",
    })
    df.to_parquet(path, index=False)
    return df


def test_sample_data_by_default():
    assert datasets.using_sample_data()
    src = datasets.data_source()
    assert src["sample"] is True and "sample" in src["requests"] and "sample" in src["sweep"]
    tok = datasets.load_token_series("weeks20", min_weeks=20)
    direct = pd.read_csv(datasets.data_dir() / "tokens" / "weeks20.csv")
    assert len(tok) == len(direct) == 20 * 168
    assert tok["output_tokens"].sum() == direct["output_tokens"].sum()
    assert "capbook_note" not in tok.attrs
    assert datasets.load_sweep().name == "illustrative_chat"


def test_reader_log_is_aggregated_when_long_enough(tmp_path, monkeypatch):
    df = _log(tmp_path / "log.parquet", hours=2 * 168)
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "log.parquet"))
    assert not datasets.using_sample_data()
    assert datasets.data_source()["requests"] == str(tmp_path / "log.parquet")
    tok = datasets.load_token_series("weeks20", min_weeks=2)
    assert tok.attrs["capbook_source"] == str(tmp_path / "log.parquet")
    assert tok["output_tokens"].sum() == df["output_tokens"].sum()
    assert len(datasets.load_requests().to_pandas()) == len(df)


def test_short_or_gappy_reader_log_falls_back_to_the_sample_with_a_note(tmp_path, monkeypatch, capsys):
    _log(tmp_path / "short.parquet", hours=30)
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "short.parquet"))
    tok = datasets.load_token_series("weeks20", min_weeks=2)
    sample = load_sample_series("weeks20")
    assert len(tok) == len(sample) and tok["output_tokens"].sum() == sample["output_tokens"].sum()
    out = capsys.readouterr().out
    assert "short.parquet" in out and "30 hours" in out and "needs 2 whole weeks" in out
    assert tok.attrs["capbook_note"] in out
    # without min_weeks the reader's own (short) hourly frame comes back
    assert len(datasets.load_token_series("weeks20")) == 30

    _log(tmp_path / "gap.parquet", hours=2 * 168 + 5, rate=0.05, gap=(100 * 3600, 103 * 3600))
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "gap.parquet"))
    tok = datasets.load_token_series(min_weeks=2)
    assert "no output tokens" in tok.attrs["capbook_note"]


def test_missing_reader_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "nope.parquet"))
    with pytest.raises((FileNotFoundError, ValueError), match="nope.parquet"):
        datasets.load_requests()


def test_reader_options_reach_the_readers(tmp_path, monkeypatch, repo_root):
    """capbook book passes its flags as JSON keyword arguments; every chapter reads with them."""
    from capbook import bookbuild

    d = tmp_path / "sweep"
    d.mkdir()
    base = pd.read_csv(repo_root / "data" / "sweeps" / "illustrative_chat.csv")
    base.to_csv(d / "a.csv", index=False)
    base.assign(concurrency=base["concurrency"] + 0.5, load_kind="rate",
                concurrency_source="littles_law").to_csv(d / "b.csv", index=False)
    env = bookbuild._data_env(None, "auto", d, {"drop_invalid": True}, {"load": "concurrency"})
    assert env["CAPBOOK_REQUESTS_OPTIONS"] is None  # no log given: its options are not passed
    for k, v in env.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    sw = datasets.load_sweep()
    assert np.allclose(sw.concurrency, base["concurrency"])  # the closed-loop points only
    assert datasets.data_source()["sweep_options"] == {"load": "concurrency"}
    note = bookbuild.data_note(datasets.data_source(), "now")
    assert "load='concurrency'" in note
    monkeypatch.delenv("CAPBOOK_SWEEP_OPTIONS")
    with pytest.raises(ValueError, match="load='concurrency' or load='rate'"):
        datasets.load_sweep()
    monkeypatch.setenv("CAPBOOK_SWEEP_OPTIONS", "[1, 2]")
    with pytest.raises(ValueError, match="CAPBOOK_SWEEP_OPTIONS must hold a JSON object"):
        datasets.load_sweep()
