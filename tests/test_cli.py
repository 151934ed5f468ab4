"""Tests of the ``capbook`` command line (``capbook trace``)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from capbook.cli import COMMANDS, build_parser, main


def _small_log(tmp_path, n=300, seed=1):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 7200, n))
    df = pd.DataFrame({
        "arrival_time": pd.Timestamp("2026-02-02", tz="UTC") + pd.to_timedelta(np.round(t * 1e6), unit="us"),
        "input_tokens": rng.integers(1, 3000, n), "output_tokens": rng.integers(1, 600, n),
        "model": "m", "tier": rng.choice(["interactive", "batch"], n), "status": "served",
    })
    p = tmp_path / "log.parquet"
    df.to_parquet(p, index=False)
    return p, df


def test_trace_prints_the_summary(tmp_path, capsys):
    p, df = _small_log(tmp_path)
    assert main(["trace", str(p), "--output-cap", "500"]) == 0
    out = capsys.readouterr().out
    assert "rows      300" in out and "format    canonical" in out
    assert f"{np.percentile(df['output_tokens'], 99):,.0f}" in out
    share = np.mean(df["output_tokens"] > 500) * 100
    assert f"{share:.2f}%" in out
    gaps = np.diff(df["arrival_time"].astype("int64").to_numpy() / 1e9)
    assert f"Ca2       {gaps.var() / gaps.mean() ** 2:.3f}" in out
    assert "Cs2       n/a" in out and "peak hour" in out


def test_trace_json_and_cs2_from_rates(tmp_path, capsys):
    p, df = _small_log(tmp_path)
    assert main(["trace", str(p), "--json", "--prefill-rate", "4000", "--tpot", "0.03"]) == 0
    s = json.loads(capsys.readouterr().out)
    T = df["input_tokens"] / 4000 + df["output_tokens"] * 0.03
    assert s["rows"] == 300 and s["service"]["source"] == "sweep"
    assert s["service"]["cs2"] == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    assert s["span_s"] == pytest.approx((df["arrival_time"].iloc[-1] - df["arrival_time"].iloc[0]).total_seconds())


def test_trace_with_a_sweep_file(tmp_path, repo_root, capsys):
    sweep_file = repo_root / "data" / "sweeps" / "illustrative_chat.csv"
    if not sweep_file.exists():
        pytest.skip("sample sweeps not generated")
    from capbook.importers import read_sweep

    sw = read_sweep(sweep_file)
    p, df = _small_log(tmp_path)
    assert main(["trace", str(p), "--json", "--sweep", str(sweep_file), "--concurrency", "16"]) == 0
    s = json.loads(capsys.readouterr().out)
    T = df["input_tokens"] / sw.prefill_rate_tps + df["output_tokens"] * float(sw.tpot(16))
    assert s["service"]["cs2"] == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    assert main(["trace", str(p), "--sweep", str(sweep_file)]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_trace_real_burstgpt(shared_dir, capsys):
    path = shared_dir / "traces" / "burstgpt" / "burstgpt3_slice.csv"
    with open(path, newline="") as f:
        n = sum(1 for _ in csv.DictReader(f))
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"rows      {n}" in out and "format    burstgpt" in out and "(measured;" in out


def test_trace_invalid_file_exits_2_with_the_reason(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("arrival_time,input_tokens,output_tokens,model,tier,status\n"
                 "2026-01-01T00:00:00Z,10,5,m,interactive,served\n"
                 "2026-01-01T00:00:01Z,-4,5,m,interactive,served\n"
                 "2026-01-01T00:00:02Z,10,5,m,interactive,served\n"
                 "2026-01-01T00:00:04Z,10,5,m,batch,served\n")
    assert main(["trace", str(p)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "negative token count" in err and "row 2" in err
    assert main(["trace", str(p), "--drop-invalid"]) == 0
    out = capsys.readouterr().out
    assert "1 of 4 dropped" in out and "negative token count" in out
    p.write_text("\n".join(p.read_text().splitlines()[:3]) + "\n")  # one valid row left
    assert main(["trace", str(p), "--drop-invalid"]) == 0
    assert "fewer than 3 requests" in capsys.readouterr().out
    assert main(["trace", str(tmp_path / "missing.csv")]) == 2
    assert main(["trace", str(p), "--tpot", "0.02"]) == 2


def test_parser_is_extensible():
    # other commands register by appending a function to COMMANDS
    assert callable(COMMANDS[0])
    parser = build_parser()
    args = parser.parse_args(["trace", "x.csv", "--format", "mooncake"])
    assert args.format == "mooncake" and args.func.__name__ == "run_trace"
    with pytest.raises(SystemExit):
        parser.parse_args(["trace", "x.csv", "--format", "nope"])
    assert main([]) == 2


def test_module_entry_point(tmp_path):
    p, _ = _small_log(tmp_path, n=50)
    r = subprocess.run([sys.executable, "-m", "capbook.cli", "trace", str(p)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "rows      50" in r.stdout
