"""Hostile inputs to ``capbook plan`` and ``capbook compare`` (issue 28): every numeric flag in a
physical range, history files checked row by row, idle hours forecast as zeros, memory bounded,
outputs never overwritten unless capbook wrote them and never left half-written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capbook.app.cli import main

ROOT = Path(__file__).resolve().parents[1]
SWEEP = str(ROOT / "data" / "sweeps" / "illustrative_chat.csv")
HISTORY = ROOT / "data" / "gateway" / "hourly.csv"
FAST = ["--no-sim", "--no-autoscale"]


def _log(path: Path, *, days: int = 28, idle_hours=(), output_tokens=None, input_tokens=None, seed: int = 1) -> Path:
    """A small canonical request log: ``days`` days of a daily-peaked load, 15 to 60 requests an
    hour, no requests in ``idle_hours`` (hour indices from the start)."""
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2026-01-05", tz="UTC")
    frames = []
    for h in range(days * 24):
        if h in idle_hours:
            continue
        n = int(rng.poisson(15 + 45 * np.exp(-((h % 24 - 15) ** 2) / 18))) + 1
        t = start + pd.to_timedelta(h * 3600 + np.sort(rng.uniform(0, 3600, n)), unit="s")
        inp = rng.integers(100, 2000, n) if input_tokens is None else np.full(n, input_tokens)
        out = rng.integers(50, 500, n) if output_tokens is None else np.full(n, output_tokens)
        first = t + pd.to_timedelta(0.3, unit="s")
        frames.append(pd.DataFrame({"arrival_time": t, "input_tokens": inp, "output_tokens": out, "model": "chat",
                                    "tier": "interactive", "status": "served", "first_token_time": first,
                                    "end_time": first + pd.to_timedelta(5.0, unit="s"), "tenant": "web"}))
    pd.concat(frames, ignore_index=True).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def log28(tmp_path_factory):
    return _log(tmp_path_factory.mktemp("log") / "log28.parquet")


@pytest.fixture(scope="module")
def history4(tmp_path_factory):
    """The first four weeks of the sample gateway's history."""
    h = pd.read_csv(HISTORY)
    t = pd.to_datetime(h["period_start"], utc=True)
    p = tmp_path_factory.mktemp("hist") / "h4.csv"
    h[t < t.min() + pd.Timedelta(weeks=4)].to_csv(p, index=False)
    return p


@pytest.fixture(scope="module")
def peak_log(tmp_path_factory):
    """The gateway's three busiest hours under another name (so no history is chosen for it)."""
    p = tmp_path_factory.mktemp("peak") / "peak.parquet"
    p.write_bytes((ROOT / "data" / "gateway" / "peak_hours.parquet").read_bytes())
    return p


def _run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "internal error" not in out.err, out.err
    return code, out.out, out.err


# -- 1. numeric flags: finite, in range, the flag named ------------------------------------------
_BAD_NUMBERS = [
    ("--horizon", "nan"), ("--horizon", "-1"), ("--horizon", "inf"), ("--scale", "inf"), ("--scale", "0"),
    ("--scale", "1e6"), ("--quantile", "1"), ("--quantile", "nan"), ("--headroom", "5"), ("--headroom", "0"),
    ("--horizon", "abc"),
]
_PLAN_ONLY = [("--growth", "1e6"), ("--growth", "-0.9"), ("--growth", "nan"), ("--spares", "-1"), ("--spares", "1.5"),
              ("--spares", "1e9"), ("--zones", "0"), ("--zones", "inf")]


@pytest.mark.parametrize("command, flag, value", [("plan", *c) for c in _BAD_NUMBERS + _PLAN_ONLY]
                         + [("compare", *c) for c in _BAD_NUMBERS])
def test_numeric_flags_are_refused_naming_the_flag(capsys, tmp_path, command, flag, value):
    code, _, err = _run(capsys, [command, flag, value, "--out", str(tmp_path / "o"), *(FAST if command == "plan"
                                                                                       else ["--no-sim"])])
    assert code == 2
    assert f"{flag} {value!r}" in err and "must be" in err, err
    assert not (tmp_path / "o").exists()


def test_one_zone_is_explained_with_the_flag(capsys, tmp_path, log28):
    code, _, err = _run(capsys, ["plan", "--requests", str(log28), "--sweep", SWEEP, "--zones", "1", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 2 and "--zones 1" in err and "zones=" not in err


@pytest.mark.parametrize("horizon, history, weeks, limit", [
    ("52", "h4", "4 weeks", "at most 12"),       # a year from four weeks
    ("1000", "sample", "26 weeks", "at most 26"),  # the sample gateway's 26 weeks
])
def test_horizon_beyond_the_history_is_refused(capsys, tmp_path, peak_log, history4, horizon, history, weeks, limit):
    argv = ["plan", "--horizon", horizon, *FAST, "--out", str(tmp_path / "o")]
    if history == "h4":
        argv += ["--requests", str(peak_log), "--history", str(history4)]
    code, _, err = _run(capsys, argv)
    assert code == 2
    assert f"--horizon {horizon}" in err and weeks in err and limit in err, err
    assert "lead_time_weeks" not in err


def test_twelve_weeks_from_four_is_planned_and_marked_rough(capsys, tmp_path, log28):
    code, out, _ = _run(capsys, ["plan", "--requests", str(log28), "--sweep", SWEEP, "--horizon", "12", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 0 and "12 weeks ahead is further than the 4 weeks of history" in out


def test_growth_of_a_short_log_stays_finite(capsys, tmp_path, peak_log):
    """--growth 1e6 ended in "c must be >= 1"; the largest allowed growth plans a finite fleet."""
    code, out, _ = _run(capsys, ["plan", "--requests", str(peak_log), "--growth", "1", "--horizon", "4", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 0 and "grown 100 % a week" in out
    plan = pd.read_csv(tmp_path / "o" / "plan.csv")
    assert np.isfinite(pd.to_numeric(plan["value"], errors="coerce").dropna()).all()


@pytest.mark.parametrize("kw, name", [
    ({"lead_time_weeks": float("nan")}, "lead_time_weeks"), ({"demand_scale": float("inf")}, "demand_scale"),
    ({"growth_per_week": 2.0}, "growth_per_week"), ({"demand_scale": 1e5}, "demand_scale"),
    ({"lead_time_weeks": 100}, "lead_time_weeks"),
])
def test_package_refuses_with_the_parameter_name(kw, name):
    from capbook.app import datasets
    from capbook.plan.steps import capacity_plan

    with pytest.raises(ValueError, match=name):
        capacity_plan(**datasets.plan_inputs().arguments, simulate=False, **kw)


# -- 2. history files -----------------------------------------------------------------------------
def _bad_history(src: Path, dst: Path, how: str) -> Path:
    h = pd.read_csv(src)
    if how == "time":
        h.loc[5, "period_start"] = "2026-01-05 25:00"
    elif how == "off_hour":
        h.loc[5, "period_start"] = "2026-01-05T01:30:00Z"
    elif how == "duplicate":
        h = pd.concat([h, h.iloc[[7]]], ignore_index=True)
    elif how == "tokens":
        h.loc[10, "output_tokens"] = 10 ** 15
    elif how == "requests":
        h.loc[10, "requests"] = 10 ** 12
    elif how == "throttled":
        h.loc[10, "throttled"] = h.loc[10, "requests"] + 1
    elif how == "text":
        h["input_tokens"] = h["input_tokens"].astype(object)
        h.loc[10, "input_tokens"] = "many"
    h.to_csv(dst, index=False)
    return dst


@pytest.mark.parametrize("how, expect", [
    ("time", ["column 'period_start'", "line 7", "'2026-01-05 25:00'", "ISO-8601"]),
    ("off_hour", ["column 'period_start'", "line 7", "not on the hour"]),
    ("duplicate", ["lines 9 and", "hour 2026-01-05T02:00Z", "model 'chat'", "tenant 'agents'", "not summed"]),
    ("tokens", ["column 'output_tokens'", "line 12", "10,000,000 tokens per request"]),
    ("requests", ["column 'requests'", "line 12", "ceiling"]),
    ("throttled", ["column 'throttled'", "line 12"]),
    ("text", ["column 'input_tokens'", "line 12", "'many'"]),
])
def test_bad_history_rows_are_named(capsys, tmp_path, peak_log, history4, how, expect):
    bad = _bad_history(history4, tmp_path / f"h_{how}.csv", how)
    code, _, err = _run(capsys, ["plan", "--requests", str(peak_log), "--history", str(bad), *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 2 and f"--history {bad}: " in err, err
    assert f"{bad}: {bad}" not in err and "--format" not in err
    for part in expect:
        assert part in err, (part, err)


def test_history_of_another_model_names_both(capsys, tmp_path, peak_log, history4):
    h = pd.read_csv(history4)
    h["model"] = "other"
    p = tmp_path / "other.csv"
    h.to_csv(p, index=False)
    code, _, err = _run(capsys, ["plan", "--requests", str(peak_log), "--history", str(p), *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 2
    assert "no rows for the request log's model(s) ['chat']" in err and "['other']" in err
    assert "--history" in err and "--model" in err and "non-empty mapping" not in err
    code, _, err = _run(capsys, ["plan", "--requests", str(peak_log), "--history", str(p), "--model", "other",
                                 *FAST, "--out", str(tmp_path / "o")])
    assert code == 2 and "no requests of model 'other'" in err


# -- 3. idle hours are zeros, and forecast --------------------------------------------------------
def test_idle_hours_in_a_log_are_forecast(capsys, tmp_path):
    log = _log(tmp_path / "gap.parquet", idle_hours=(300, 301))
    code, out, _ = _run(capsys, ["plan", "--requests", str(log), "--sweep", SWEEP, "--scale", "100", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 0
    assert "forecast not possible" not in out and "Planned peak (P90 peak hour, sqrt_h)" in out
    assert "2 hour(s) with no output tokens (2026-01-17 12:00, 2026-01-17 13:00 UTC): hours of no demand, not gaps, and forecast" in out


def test_missing_history_hours_are_zeros_with_a_note(capsys, tmp_path, peak_log, history4):
    h = pd.read_csv(history4)
    gone = ["2026-01-12T03:00:00Z", "2026-01-12T04:00:00Z"]
    p = tmp_path / "gap.csv"
    h[~h["period_start"].isin(gone)].to_csv(p, index=False)
    code, out, _ = _run(capsys, ["plan", "--requests", str(peak_log), "--history", str(p), *FAST,
                                 "--out", str(tmp_path / "o")])
    assert code == 0 and "forecast not possible" not in out
    assert f"{p} has no row for 2 hour(s) inside its span (2026-01-12 03:00, 2026-01-12 04:00 UTC)" in out


# -- 4. memory bounded at the reader's token cap --------------------------------------------------
def test_answers_at_the_token_cap_beyond_any_fleet_are_refused_before_any_model(capsys, tmp_path, peak_log):
    """40 requests/s of 9,999,999 output tokens each need 210,000 replicas: refused at once (this
    case hung in the load-dependent model and then crashed in the engine's backlog run)."""
    d = pd.read_parquet(peak_log)
    d["output_tokens"] = 9_999_999
    log = tmp_path / "big.parquet"
    d.to_parquet(log)
    code, out, err = _run(capsys, ["plan", "--requests", str(log), "--out", str(tmp_path / "o")])
    assert code == 2 and "replicas by the sweep's rating" in err and "--scale" in err and out == ""


def test_long_prompts_at_the_token_cap_plan_in_bounded_memory(tmp_path, peak_log):
    """Every prompt 9,999,999 tokens on the gateway's busiest hours: tens of thousands of
    replicas; the load-dependent model (memory ∝ replicas × slots) is left out with a note."""
    d = pd.read_parquet(peak_log)
    d["input_tokens"] = 9_999_999
    log = tmp_path / "long.parquet"
    d.to_parquet(log)
    # the child's own peak: /proc's VmHWM (ru_maxrss of a child started by fork or vfork from this
    # process carries this process's peak across the exec, so it measured pytest's memory)
    code = ("import os, re, resource, sys; from capbook.app.cli import main; "
            f"rc = main(['plan', '--requests', {str(log)!r}, '--no-sim', '--no-autoscale', '--out', "
            f"{str(tmp_path / 'o')!r}]); "
            "st = '/proc/self/status'; "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open(st).read()) if os.path.exists(st) else None; "
            "print(rc, int(hwm.group(1)) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    rc, rss_kb = map(int, r.stdout.strip().splitlines()[-1].split())
    assert rc == 0, r.stderr
    assert "load-dependent model not used" in r.stdout
    assert rss_kb < 600_000, rss_kb


def test_a_week_too_big_to_simulate_is_skipped_with_a_note(capsys, tmp_path):
    code, _, err = _run(capsys, ["plan", "--scale", "2", "--no-sim", "--out", str(tmp_path / "o")])
    assert code == 0 and "week not simulated" in err and "30,000,000" in err
    assert not (tmp_path / "o" / "schedule.csv").exists()


# -- 5. outputs ----------------------------------------------------------------------------------
def test_out_that_is_a_file_is_refused_first(capsys, tmp_path):
    f = tmp_path / "afile"
    f.write_text("keep me")
    for cmd in (["plan", *FAST], ["compare", "--no-sim"]):
        code, out, err = _run(capsys, [*cmd, "--out", str(f)])
        assert code == 2 and f"--out {f}" in err and "is a file" in err and out == ""
    assert f.read_text() == "keep me"


def test_out_name_too_long_is_refused(capsys, tmp_path):
    long = tmp_path / ("x" * 300)
    code, out, err = _run(capsys, ["plan", *FAST, "--out", str(long)])
    assert code == 2 and "--out" in err and "255" in err and out == ""


def test_foreign_files_are_not_replaced_without_force(capsys, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "plan.md").write_text("my notes")
    code, _, err = _run(capsys, ["plan", *FAST, "--out", str(out)])
    assert code == 2 and "plan.md" in err and "--force" in err
    assert (out / "plan.md").read_text() == "my notes"
    code, _, _ = _run(capsys, ["plan", *FAST, "--out", str(out), "--force"])
    assert code == 0 and (out / "plan.md").read_text() != "my notes"
    manifest = json.loads((out / ".capbook-outputs.json").read_text())
    assert set(manifest["files"]) == {"plan.csv", "plan.md", "tenants.csv"}
    code, _, _ = _run(capsys, ["plan", *FAST, "--out", str(out)])   # its own files: replaced
    assert code == 0
    (out / "plan.csv").write_text("edited by hand")                  # changed since: not replaced
    code, _, err = _run(capsys, ["plan", *FAST, "--out", str(out)])
    assert code == 2 and "plan.csv" in err
    assert sorted(p.name for p in out.iterdir()) == [".capbook-outputs.json", "plan.csv", "plan.md", "tenants.csv"]


def test_an_interrupted_write_leaves_the_old_file(capsys, tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert _run(capsys, ["plan", *FAST, "--out", str(out)])[0] == 0
    before = (out / "plan.md").read_text()
    real = os.replace

    def interrupted(src, dst):
        if str(dst).endswith("plan.md"):
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    assert main(["plan", *FAST, "--scale", "1.5", "--out", str(out)]) == 130
    capsys.readouterr()
    assert (out / "plan.md").read_text() == before
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("rows, expect", [
    ("one", ["forecast from the hourly history", "fitted weekly growth", "-50 % to +100 %"]),
    ("all", ["replicas by the sweep's rating", "more than the 100,000", "--scale and --growth"]),
])
def test_huge_but_allowed_history_values_are_refused_not_crashed(capsys, tmp_path, peak_log, history4, rows, expect):
    """1e15 tokens from 1e9 requests an hour pass the reader's bounds; the plan refuses them."""
    h = pd.read_csv(history4)
    at = [2000] if rows == "one" else slice(None)
    h.loc[at, ["requests", "input_tokens", "output_tokens"]] = [10 ** 9, 10 ** 15, 10 ** 15]
    p = tmp_path / "big.csv"
    h.to_csv(p, index=False)
    code, out, err = _run(capsys, ["plan", "--requests", str(peak_log), "--history", str(p), "--out",
                                   str(tmp_path / "o")])
    assert code == 2 and out == "", err
    for part in expect:
        assert part in err, (part, err)


def test_engine_with_requests_longer_than_its_window_says_so():
    """Requests of 9,999,999 output tokens never finish in the engine's backlog run: that was an
    IndexError inside the plan; it is a ValueError the plan turns into a note."""
    import dataclasses

    from capbook.engine.stepmodel import fitted_engine as _fitted_engine
    from capbook.engine.predict import predict
    from capbook.sweeps.sweep import load_sample_sweep

    sw = load_sample_sweep("illustrative_chat")
    eng = dataclasses.replace(_fitted_engine(sw), prompt_tokens=1000.0, output_tokens=9_999_999.0,
                              output_quantiles=None, prompt_p99=None)
    with pytest.raises(ValueError, match="finished 0 of .* requests of 9,999,999 output tokens outlast it"):
        predict(sw, 1.0, ttft_p99_target_s=1.0, seed=1, requests=2000, models=("simulation",), engine=eng)


def test_out_that_cannot_be_written_is_refused_first(capsys, tmp_path, monkeypatch):
    import tempfile

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)   # as a read-only folder would (tests may run as root)
    code, out, err = _run(capsys, ["plan", *FAST, "--out", str(tmp_path / "new" / "o")])
    assert code == 2 and out == ""
    assert f"--out {tmp_path / 'new' / 'o'}: cannot write in {tmp_path} (Permission denied)" in err
    assert not (tmp_path / "new").exists()
