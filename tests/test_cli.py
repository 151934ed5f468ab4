"""Tests of the ``capbook`` command line (``capbook trace``)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from capbook.app.cli import COMMANDS, build_parser, main


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
    assert s["rows"] == 300 and s["service"]["source"] == "given rates"
    assert s["service"]["cs2"] == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    assert s["span_s"] == pytest.approx((df["arrival_time"].iloc[-1] - df["arrival_time"].iloc[0]).total_seconds())


def test_trace_with_a_sweep_file(tmp_path, repo_root, capsys):
    sweep_file = repo_root / "data" / "sweeps" / "illustrative_chat.csv"
    if not sweep_file.exists():
        pytest.skip("sample sweeps not generated")
    from capbook.sweeps.importers import read_sweep

    sw = read_sweep(sweep_file)
    p, df = _small_log(tmp_path)
    assert main(["trace", str(p), "--json", "--sweep", str(sweep_file), "--slots", "16"]) == 0
    s = json.loads(capsys.readouterr().out)
    T = df["input_tokens"] / sw.prefill_rate_tps + df["output_tokens"] * float(sw.tpot(16))
    assert s["service"]["cs2"] == pytest.approx(T.var(ddof=0) / T.mean() ** 2, rel=1e-9)
    assert main(["trace", str(p), "--sweep", str(sweep_file)]) == 2
    assert "--slots" in capsys.readouterr().err


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
    r = subprocess.run([sys.executable, "-m", "capbook.app.cli", "trace", str(p)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "rows      50" in r.stdout


# -- flags for real data, and messages in CLI spelling ---------------------------------------
@pytest.mark.parametrize("message, flag", [
    ("Fix the file, or pass drop_invalid=True to drop these rows", "pass --drop-invalid to drop"),
    ("mixes them; pass load='concurrency' or load='rate' to read one sweep",
     "pass --load concurrency or --load rate"),
    ("holds 2 configurations; pass where={'config': 'vllm'} to read one", "pass --where config=vllm"),
    ("select one with where={'max_num_seqs': ...}", "--where max_num_seqs=VALUE"),
    ("pass repeats='mean' to average repeated runs, or where=... to choose",
     "pass --repeats mean to average repeated runs, or --where KEY=VALUE"),
    ("read the *_summary.json beside it or pass concurrency=", "pass --sweep-concurrency N"),
    ("timestamps look like milliseconds; pass time_unit='ms'", "pass --time-unit ms"),
    ("cannot recognise the format; pass format= one of ('azure2023', 'mooncake')", "pass --format one of"),
    ("not a pure prefill; pass input_tps", "pass --prefill-rate TPS"),
    ("or pass check_units=False if the span is right", "pass --no-unit-check if"),
    ("the engine limit is unknown; pass max_num_seqs=", "pass --max-num-seqs N"),
    ("concurrency [4096.0] outside the measured range [1, 64] of sweep 's'; pass extrapolate=True to "
     "extend the end segments linearly", "choose a value within the measured range"),
    ("lead_time_weeks=52 (a 52-week horizon) is further ahead; pass a lead_time_weeks of at most 12",
     "--horizon 52 (a 52-week horizon) is further ahead; pass a --horizon of at most 12"),
    ("check the log's token counts, demand_scale and growth_per_week", "check the log's token counts, --scale and --growth"),
    ("it holds ['other']; pass history= an hourly history of the log's model", "pass --history an hourly history"),
    ("zones=1: with every replica in one zone", "--zones 1: with every replica"),
    ("pass format= one of ('canonical',) or a capbook.logs.requestlog.Mapping naming your columns (a load",
     "or --columns arrival_time=COLUMN,input_tokens=COLUMN,output_tokens=COLUMN naming your columns"),
    ("they then count from 1970-01-01 (a capbook.logs.requestlog.Mapping with another epoch sets their start)",
     "(--columns ...,epoch=DATE sets their start)"),
    ("reads it as date-times; pass time_unit='s' (or 'ms', 'us', 'ns'), or set Mapping.time_unit",
     "pass --time-unit s (or 'ms', 'us', 'ns')"),
    ("series has 4 week(s); method='seasonal' with horizon_weeks=12 needs at least 14",
     "method='seasonal' with --horizon 12 needs"),
    ("to_pandas: the log has 6,470,000 rows, more than max_rows=5,000,000; aggregate with hourly() or pass "
     "max_rows=None", "more than the 5,000,000 rows capbook reads into memory for this step; give the busiest "
     "hours as --requests and the whole log's hourly sums as --history"),
])
def test_cli_messages_name_flags_not_keywords(message, flag):
    from capbook.app.messages import cli_message

    import re

    out = cli_message(message)
    assert flag in out, out
    # no Python keyword spelling is left (a --where KEY=VALUE names a column, which is fine)
    rest = re.sub(r"--where [\w.-]+=\S+", "", out)
    assert not any(k in rest for k in ("=True", "=False", "load='", "where={", "concurrency=", "format=",
                                      "time_unit", "input_tps", "max_num_seqs="))


def test_cli_messages_leave_ordinary_text_alone():
    from capbook.app.messages import cli_message

    text = "concurrency 16 is fine: TTFT p99 0.4 s at rate 3.2 requests/s (model llama, tier batch)"
    assert cli_message(text) == text


def test_sweep_and_log_flags_become_reader_keywords():
    from capbook.app.cli import _requests_options, _sweep_options

    args = build_parser().parse_args([
        "plan", "--requests", "x.csv", "--drop-invalid", "--time-unit", "ms", "--sort",
        "--sweep", "d", "--load", "rate", "--repeats", "mean", "--where", "config=vllm",
        "--where", "max_num_seqs = 128", "--max-num-seqs", "128", "--sweep-concurrency", "5"])
    assert _requests_options(args) == {"drop_invalid": True, "sort": True, "time_unit": "ms"}
    assert _sweep_options(args) == {"load": "rate", "repeats": "mean", "max_num_seqs": 128,
                                    "where": {"config": "vllm", "max_num_seqs": "128"},
                                    "concurrency": 5.0}
    bad = build_parser().parse_args(["book", "--sweep", "d", "--where", "config"])
    with pytest.raises(ValueError, match="--where 'config': write KEY=VALUE"):
        _sweep_options(bad)


def test_plan_sweep_flags_without_a_sweep_say_so(capsys):
    assert main(["plan", "--load", "rate"]) == 2
    assert "apply to --sweep PATH" in capsys.readouterr().err
    assert main(["plan", "--drop-invalid"]) == 2
    assert "apply to --requests LOG" in capsys.readouterr().err


def test_plan_mixed_sweep_names_the_load_flag(tmp_path, capsys, repo_root):
    # a folder holding closed-loop and open-loop points: the message names --load
    pts = pd.read_csv(repo_root / "data" / "sweeps" / "illustrative_chat.csv")
    a = pts.copy()
    b = pts.copy()
    b["load_kind"], b["concurrency_source"] = "rate", "littles_law"
    b["concurrency"] = b["concurrency"] + 0.5
    d = tmp_path / "sweep"
    d.mkdir()
    a.to_csv(d / "closed.csv", index=False)
    b.to_csv(d / "open.csv", index=False)
    log, _ = _small_log(tmp_path)
    assert main(["plan", "--requests", str(log), "--sweep", str(d), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--load concurrency" in err and "load='" not in err and "Traceback" not in err


def test_trace_piped_into_head_ends_quietly(tmp_path):
    p, _ = _small_log(tmp_path, n=2000)
    r = subprocess.run(f"{sys.executable} -m capbook.app.cli trace {p} | head -1", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.startswith("file"), r.stdout
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_an_internal_error_is_one_line_not_a_traceback(monkeypatch, capsys):
    import capbook.app.cli as cli

    def boom(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(cli, "run_trace", boom)
    monkeypatch.delenv("CAPBOOK_DEBUG", raising=False)
    parser = cli.build_parser()
    parser._subparsers._group_actions[0].choices["trace"].set_defaults(func=boom)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main(["trace", "x.csv"]) == 1
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError" in err and "CAPBOOK_DEBUG=1" in err
    assert "Traceback" not in err


def test_cli_messages_leave_paths_and_names_alone():
    from capbook.app.messages import cli_message

    msg = ("/data/SERVE--max_num_seqs=4-BENCH/run=0.json: several points; pass repeats='mean', or "
           "where={'config': 'SERVE--max_num_seqs=4-BENCH'} to choose")
    out = cli_message(msg)
    assert out.startswith("/data/SERVE--max_num_seqs=4-BENCH/run=0.json:"), out
    assert "--repeats mean" in out and "--where config=SERVE--max_num_seqs=4-BENCH" in out, out


# -- capbook predict ---------------------------------------------------------------------------
def _sample_sweep_csv():
    from capbook.paths import data_path

    path = data_path("sweeps", "llama8b_h100_chat.csv")
    if not path.exists():
        pytest.skip("sample sweeps not generated")
    return path


def test_predict_json_has_the_documented_keys(capsys):
    assert main(["predict", "--sweep", str(_sample_sweep_csv()), "--rate", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    model_keys = {"saturation_rps", "stable", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "e2e_mean_s",
                  "max_rate_rps"}
    assert model_keys | {"rate_rps", "arrivals", "model", "ttft_p99_target_s", "models", "engine",
                         "notes"} <= set(d)
    assert d["rate_rps"] == 2 and d["arrivals"] == "poisson" and d["model"] == "simulation"
    assert set(d["models"]) == {"mmc", "load_dependent", "simulation"}
    for m in d["models"].values():
        assert set(m) == model_keys
    assert d["stable"] is True and d["saturation_rps"] == d["models"]["simulation"]["saturation_rps"]
    assert d["models"]["mmc"]["saturation_rps"] > d["saturation_rps"]
    assert d["engine"]["slots"] >= 1 and isinstance(d["notes"], list)


def test_predict_text_names_the_three_models_and_the_limits(capsys):
    args = ["predict", "--sweep", str(_sample_sweep_csv()), "--rate", "2", "--ttft-p99-target", "0.5",
            "--arrivals", "uniform"]
    assert main(args) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    for model in ("mmc", "load_dependent", "simulation"):
        assert model in rows and rows[model][2] == "yes", out
        assert len(rows[model]) == 8  # saturation, stable, 3 latencies in ms, E2E, max rate
    assert "the plan relies on simulation" in out
    assert "slots (max_num_seqs" in out and "chunked prefill" in out and "uniform arrivals" in out
    assert "note      step cost fitted" in out
    assert "kv_cache_tokens=" not in out  # notes in flag spelling


def test_predict_past_capacity_is_not_an_error(capsys):
    assert main(["predict", "--sweep", str(_sample_sweep_csv()), "--rate", "500", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stable"] is False and d["ttft_p99_s"] is None and d["e2e_mean_s"] is None
    assert any("past the predicted capacity" in n for n in d["notes"])


@pytest.mark.parametrize("extra, flag", [
    (["--rate", "0"], "--rate"),
    (["--rate", "-3"], "--rate"),
    (["--rate", "fast"], "--rate"),
    (["--rate", "nan"], "--rate"),
    ([], "--rate"),
    (["--rate", "2", "--arrivals", "bursty"], "--arrivals"),
    (["--rate", "2", "--max-num-seqs", "0"], "--max-num-seqs"),
    (["--rate", "2", "--kv-cache-tokens", "1.5"], "--kv-cache-tokens"),
    (["--rate", "2", "--ttft-p99-target", "-1"], "--ttft-p99-target"),
    (["--rate", "2", "--seed", "x"], "--seed"),
    (["--rate", "2", "--where", "config"], "--where"),
])
def test_predict_input_errors_name_the_flag(capsys, extra, flag):
    assert main(["predict", "--sweep", str(_sample_sweep_csv())] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"capbook predict: {flag}") and err.count("\n") == 1, err
    assert "Traceback" not in err


def test_predict_missing_sweep_names_the_flag(tmp_path, capsys):
    assert main(["predict", "--sweep", str(tmp_path / "nope.csv"), "--rate", "2"]) == 2
    err = capsys.readouterr().err
    assert "--sweep" in err and "nope.csv" in err and err.count("\n") == 1
    assert main(["predict", "--rate", "2"]) == 2
    assert "--sweep PATH is required" in capsys.readouterr().err


def test_predict_fit_errors_speak_flags(capsys):
    assert main(["predict", "--sweep", str(_sample_sweep_csv()), "--rate", "2", "--kv-cache-tokens", "100"]) == 2
    err = capsys.readouterr().err
    assert "--kv-cache-tokens 100 cannot hold" in err and "kv_cache_tokens" not in err, err


# -- one spelling and one check for each flag across the commands ------------------------------
@pytest.mark.parametrize("extra, flag", [
    (["--output-cap", "0"], "--output-cap"),
    (["--output-cap", "2.5"], "--output-cap"),
    (["--prefill-rate", "nan", "--tpot", "0.02"], "--prefill-rate"),
    (["--prefill-rate", "4000", "--tpot", "-1"], "--tpot"),
    (["--prefill-rate", "4000", "--tpot", "fast"], "--tpot"),
    (["--sweep", "s.csv", "--slots", "0"], "--slots"),
    (["--sweep", "s.csv", "--slots", "inf"], "--slots"),
    (["--sweep", "s.csv", "--slots", "8", "--max-num-seqs", "True"], "--max-num-seqs"),
])
def test_trace_number_flags_are_checked_and_named(tmp_path, capsys, extra, flag):
    p, _ = _small_log(tmp_path, n=50)
    assert main(["trace", str(p), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"capbook trace: {flag} ") and "must be" in err and err.count("\n") == 1, err


def test_trace_reads_its_sweep_with_the_sweep_flags(tmp_path, repo_root, capsys):
    sweep_file = repo_root / "data" / "sweeps" / "illustrative_chat.csv"
    p, _ = _small_log(tmp_path, n=50)
    assert main(["trace", str(p), "--sweep", str(sweep_file), "--slots", "16", "--load", "rate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capbook trace: --sweep ") and "no 'rate' load points" in err, err  # --load read it
    assert main(["trace", str(p), "--where", "config=vllm"]) == 2
    assert "apply to --sweep PATH" in capsys.readouterr().err
    # the same flags, the same reader keywords, in every command that reads a sweep
    for command in (["trace", "x.csv"], ["plan"], ["book"], ["predict"]):
        args = build_parser().parse_args([*command, "--sweep", "d", "--where", "config=vllm",
                                          "--max-num-seqs", "64", "--sweep-concurrency", "4"])
        from capbook.app.cli import _sweep_options

        assert _sweep_options(args) == {"where": {"config": "vllm"}, "max_num_seqs": 64,
                                        "concurrency": 4.0}, command


def test_format_flag_lists_the_formats_only_when_wrong(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["plan", "--format", "nope"])
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and "burstgpt" in err and "canonical" in err


def test_trace_slots_outside_the_sweep_name_the_flag_and_range(tmp_path, capsys, repo_root):
    # a --slots the sweep did not measure: exit 2 naming --slots and the range, no Python keyword
    p, _ = _small_log(tmp_path)
    sweep_file = repo_root / "data" / "sweeps" / "illustrative_chat.csv"
    for slots in ("4096", "0.2"):
        assert main(["trace", str(p), "--sweep", str(sweep_file), "--slots", slots]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"capbook trace: --slots {slots}: ") and "[1, 64]" in err, err
        assert "choose a value within the measured range" in err and "extrapolate" not in err, err
    assert main(["trace", str(p), "--sweep", str(sweep_file), "--slots", "32"]) == 0


# Keyword hints in the sweep path's messages that the CLI never shows as they are, and why.
_HINTS_NOT_SHOWN = {
    ("sweeps/sweep.py", "q"): "q='mean' is a Python choice only: the CLI's objectives take percentiles",
    ("logs/stats.py", "sweep"): "LogSummary catches it and prints 'Cs2 n/a (...; pass --sweep and --slots, "
                                "or --prefill-rate and --tpot)'",
}


def test_every_keyword_hint_of_the_sweep_path_has_a_flag():
    # every "pass KEY=..." (or use/give/with/set) in a message of the modules `capbook trace|plan|
    # predict --sweep` reads through is rewritten to a flag by cli_message, or listed above with why
    import re
    from pathlib import Path

    import capbook
    from capbook.app.messages import cli_message

    root = Path(capbook.__file__).parent
    hint = re.compile(r"\b(?:pass|use|give|with|set)[ \t]+([a-z_][a-z0-9_]*)\s*=[^\n]*")
    found = []
    importers = sorted(str(p.relative_to(root)) for p in (root / "sweeps" / "importers").glob("*.py"))
    for name in (*importers, "sweeps/perrequest.py", "sweeps/sweep.py", "logs/stats.py", "app/cli.py",
                 "app/datasets.py"):
        for m in hint.finditer((root / name).read_text(encoding="utf-8")):
            key, text = m.group(1), re.sub(r"[\"')]+\s*(\)|,|\+)?\s*$", "", m.group(0))
            found.append((name, key))
            if (name, key) in _HINTS_NOT_SHOWN:
                continue
            out = cli_message(text)
            assert not re.search(rf"(?<![\w-]){key}\s*=", out), f"{name}: {text!r} -> {out!r}"
    assert ("sweeps/sweep.py", "extrapolate") in found and ("sweeps/importers/__init__.py", "load") in found, found
    assert set(_HINTS_NOT_SHOWN) <= set(found), "a listed hint is gone: drop it from _HINTS_NOT_SHOWN"
