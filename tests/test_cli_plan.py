"""The command line on plans: exit status, terminal codes, and messages that speak flags.

- ``capbook plan`` exits 3 when it writes a plan that is NOT VERIFIED, 0 when verified, 2 on bad
  input (nothing written); ``simulate`` exits 3 when the replicas do not meet the objectives.
- No terminal control sequences reach a stream that is not a terminal, nor any when NO_COLOR is set.
- ``--json`` and every message name flags, never the package's Python keywords.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from capbook.app import cli, messages
from capbook.app.cli import main
from capbook.app.messages import cli_message

ROOT = Path(__file__).resolve().parents[1]

#: A Python keyword hint as the package spells it: ``pass name=`` / ``name=True`` / ``name='x'``.
KEYWORD = re.compile(r"\b(?:pass|set)\s+[a-z_]+\s*=|\b[a-z]+_[a-z_]+\s*=\s*(?:True|False|None|'|\"|\{|\d|\)|$)")


def _plan(capsys, tmp_path, *args):
    code = main(["plan", "--no-autoscale", "--out", str(tmp_path / "out"), *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


# -- exit status ---------------------------------------------------------------------------------
def test_a_plan_not_verified_is_written_and_exits_3(capsys, tmp_path):
    """An objective no fleet can meet (p99 prefill alone is longer than the TTFT objective): the plan
    is written, marked NOT VERIFIED, and the status says so."""
    code, out, err = _plan(capsys, tmp_path, "--slo", "ttft=0.05")
    assert code == 3, err
    assert "NOT VERIFIED" in out.splitlines()[0]
    assert (tmp_path / "out" / "plan.md").is_file() and (tmp_path / "out" / "plan.csv").is_file()
    assert "NOT VERIFIED" in (tmp_path / "out" / "plan.md").read_text()
    assert "capbook plan: the plan is NOT VERIFIED (exit status 3)" in err


def test_a_skipped_simulation_exits_0_and_bad_input_exits_2_writing_nothing(capsys, tmp_path):
    code, out, err = _plan(capsys, tmp_path, "--no-sim")
    assert code == 0, err
    assert "not verified by simulation" in out.splitlines()[0]
    code, out, err = _plan(capsys, tmp_path / "bad", "--quantile", "2")
    assert code == 2 and "--quantile" in err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("command, words", [
    ("plan", ("3 when the plan is written but NOT VERIFIED", "2 on invalid input", "0 when")),
    ("simulate", ("3 when they do not", "0 when the replicas meet", "2 on invalid input")),
])
def test_help_states_the_exit_status(capsys, command, words):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for w in words:
        assert w in out, w


# -- terminal codes ------------------------------------------------------------------------------
RED = "\x1b[31m"
RESET = "\x1b[0m"
LINK = "\x1b]8;;http://x\x07"


def test_plain_text_drops_colours_cursor_moves_and_hyperlinks():
    text = f"{RED}bad{RESET} row {LINK}here\x1b]8;;\x07 \x1b[2K\x1b[1A done \x1bc"
    assert cli.plain_text(text) == "bad row here  done "
    assert "\x1b" not in cli.plain_text(text)


class _Tty:
    """A stream that says it is a terminal and records what it is given."""

    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_codes_reach_a_terminal_but_not_a_pipe_nor_a_no_color_terminal(monkeypatch, capsys):
    def command(args):
        print(f"{RED}coloured{RESET} out")
        print(f"{RED}coloured err", file=__import__("sys").stderr)
        return 0

    monkeypatch.setattr(cli, "_run_command", lambda args, argv: command(args))
    assert main(["trace", "x.csv"]) == 0  # captured: not a terminal
    cap = capsys.readouterr()
    assert cap.out == "coloured out\n" and cap.err == "coloured err\n"
    tty_out, tty_err = _Tty(), _Tty()
    monkeypatch.setattr("sys.stdout", tty_out)
    monkeypatch.setattr("sys.stderr", tty_err)
    monkeypatch.delenv("NO_COLOR", raising=False)
    main(["trace", "x.csv"])
    assert RED in tty_out.text and RED in tty_err.text
    tty_out.text = tty_err.text = ""
    monkeypatch.setenv("NO_COLOR", "1")
    main(["trace", "x.csv"])
    assert tty_out.text == "coloured out\n" and tty_err.text == "coloured err\n"


def test_a_name_with_terminal_codes_is_printed_and_written_without_them(capsys, tmp_path):
    """A model name in the user's log carrying a colour code: the error names the model, without the code."""
    log = pd.read_parquet(ROOT / "data" / "requests" / "sample_requests.parquet").head(3000)
    log["model"] = f"{RED}evil{RESET}"
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    code = main(["trace", str(path)])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "\x1b" not in cap.out + cap.err
    assert "evil" in cap.out


# -- messages speak flags ------------------------------------------------------------------------
def _package_hints() -> list[str]:
    """Every ``pass NAME=`` hint written in the package's messages, to the end of its line of text."""
    found = set()
    for f in (ROOT / "capbook").rglob("*.py"):
        if f.name in ("cli.py", "messages.py"):
            continue
        for m in re.finditer(r"pass ([a-z_]+=[^\"\n]*)", f.read_text(encoding="utf-8")):
            hint = re.sub(r"\{[^}]*!r\}", "'ms'", m.group(1))  # an f-string's repr: a quoted value
            found.add("pass " + hint)
    return sorted(found)


#: Hints of the Python API that no command reaches (a Python argument the CLI never passes).
NOT_FROM_THE_CLI = {"trend", "max_rows"}


def test_every_keyword_hint_of_the_package_is_a_flag_on_the_command_line():
    hints = _package_hints()
    assert len(hints) > 10  # the scan finds them
    left = []
    for h in hints:
        name = h.split()[1].split("=")[0]
        if name in NOT_FROM_THE_CLI:
            continue
        text = cli_message(f"something is off; {h}")
        if re.search(rf"\b{name}\s*=", text) or "capbook." in text:
            left.append((h, text))
    assert not left, left


def test_the_flags_the_hints_name_exist(capsys):
    """A hint may only name a flag some command has."""
    flags = set()
    parser = cli.build_parser()
    for action in parser._subparsers._group_actions[0].choices.values():
        for a in action._actions:
            flags.update(o for o in a.option_strings if o.startswith("--"))
    for pattern, repl in messages._FLAG_HINTS:
        if callable(repl):
            continue
        for f in re.findall(r"--[a-z][a-z0-9-]*", repl):
            assert f in flags, (pattern, f)


@pytest.mark.parametrize("message, flag", [
    ("the fleet simulation was skipped (simulate=False)", "(--no-sim)"),
    ("not binding (model or GPU not recognised; pass kv_cache_tokens=)", "pass --kv-cache-tokens N)"),
    ("has no end_time column; pass sweep= (a capbook.sweeps.sweep.Sweep) or prefill_rate_tps= and tpot_s=",
     "pass --sweep PATH with --slots S or --prefill-rate TPS and --tpot SECONDS"),
    ("The file has columns ['a']; pass format= or a capbook.logs.requestlog.Mapping naming the columns", "pass --format FORMAT"),
    ("pass time_unit='s' (or 'ms', 'us', 'ns'), or set Mapping.time_unit", "pass --time-unit s (or 'ms', 'us', 'ns')"),
])
def test_new_hints(message, flag):
    out = cli_message(message)
    assert flag in out
    assert not KEYWORD.search(out) and "capbook.sweeps.sweep.Sweep" not in out and "Mapping" not in out


def test_json_outputs_speak_flags_and_keep_the_users_names(capsys, tmp_path):
    """predict --json on a sweep whose model and GPU capbook does not know: the note about the KV
    cache names --kv-cache-tokens; names from the file are left as they are."""
    d = pd.read_csv(ROOT / "data" / "sweeps" / "illustrative_chat.csv")
    d["model"], d["gpu"] = "mystery_model=True", "mystery-gpu"
    path = tmp_path / "s.csv"
    d.to_csv(path, index=False)
    code = main(["predict", "--sweep", str(path), "--rate", "1", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    text = json.dumps(data["notes"])
    assert "--kv-cache-tokens N" in text and "kv_cache_tokens=" not in text
    assert not KEYWORD.search(text), text
    assert cli._clean_json({"model": "mystery_model=True", "notes": ["pass drop_invalid=True"]}) == \
        {"model": "mystery_model=True", "notes": ["pass --drop-invalid"]}


# -- GPU-hours are replicas × GPUs per replica × hours --------------------------------------------
PRICES = ROOT / "data" / "prices" / "illustrative.csv"


def _rows(out: Path) -> dict:
    t = pd.read_csv(out / "plan.csv")
    return {(s, q): v for s, q, v in zip(t["step"], t["quantity"], t["value"])}


def test_gpu_hours_count_every_gpu_of_a_tp4_replica_when_tp_comes_from_the_flag(capsys, tmp_path):
    """A TP4 sweep that does not record its tensor parallelism, priced with --tensor-parallel 4: the
    autoscaling rows count the same 4 GPUs per replica as the cost rows (they counted one)."""
    d = pd.read_csv(ROOT / "data" / "sweeps" / "llama70b_h100_tp4_chat.csv")
    d["tensor_parallel"] = None
    sweep = tmp_path / "tp4.csv"
    d.to_csv(sweep, index=False)
    out = tmp_path / "plan"
    code = main(["plan", "--no-sim", "--scale", "0.05", "--sweep", str(sweep), "--prices", str(PRICES),
                 "--gpu", "H100-SXM-80GB", "--tensor-parallel", "4", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    r = _rows(out)
    total = int(float(r[("fleet", "total replicas")]))
    assert int(float(r[("cost", "GPUs")])) == 4 * total
    static = float(r[("autoscaling", "GPU-hours per week (static)")])
    assert static == 4 * total * 168
    # the autoscaling dollars and the cost rows' dollars are the same fleet's
    assert float(r[("autoscaling", "USD per week (static, on demand)")]) == pytest.approx(
        float(r[("cost", "USD per week")]))
    assert "GPU-hours are replicas × 4 GPUs per replica × hours." in text
    assert f"Static plan: {static:,.0f} GPU-hours per week" in text


def test_hours_are_replica_hours_and_named_so_when_gpus_per_replica_are_unknown(tmp_path):
    from capbook.autoscale.schedule import plan_autoscaling
    from capbook.plan.steps import capacity_plan
    from capbook.sweeps.sweep import Sweep

    inputs = datasets_inputs()
    d = pd.read_csv(ROOT / "data" / "sweeps" / "llama70b_h100_tp4_chat.csv")
    tp4 = Sweep(d, name="tp4")
    d["tensor_parallel"] = None
    blind = Sweep(d, name="tp?")
    log = inputs.arguments["log"]
    plans = {s.name: capacity_plan(log, s, simulate=False, demand_scale=0.05) for s in (tp4, blind)}
    a4 = plan_autoscaling(plans["tp4"], tp4, log, candidates=("waiting",), rate_cv=0.0)
    assert a4.gpus_per_replica == 4 and a4.static_gpu_hours == 4 * plans["tp4"].total * 168
    q4 = dict(zip(a4.table()["quantity"], a4.table()["value"]))
    assert q4["GPU-hours per week (static)"] == a4.static_gpu_hours and q4["GPUs per replica"] == 4
    a1 = plan_autoscaling(plans["tp?"], blind, log, candidates=("waiting",), rate_cv=0.0)
    assert a1.gpus_per_replica is None and a1.hours_unit == "replica-hours"
    t = a1.table()
    assert not t["quantity"].str.contains("GPU-hours").any() and not (t["unit"] == "GPU-hours").any()
    assert dict(zip(t["quantity"], t["value"]))["replica-hours per week (static)"] == plans["tp?"].total * 168
    text = a1.render()
    assert "GPU-hours" not in text.replace("for GPU-hours", "")
    assert "replica-hours" in text and "--tensor-parallel" in text
    # given GPUs per replica, the same plan counts them
    a2 = plan_autoscaling(plans["tp?"], blind, log, candidates=("waiting",), rate_cv=0.0, gpus=4)
    assert a2.static_gpu_hours == 4 * a1.static_gpu_hours and a2.hours_unit == "GPU-hours"


def datasets_inputs():
    from capbook.app import datasets

    return datasets.plan_inputs()


# -- tenant tables: the top tenants, one "all others" row, a floor instead of 0 ----------------------
@pytest.fixture(scope="module")
def per_user_log(tmp_path_factory):
    """The sample gateway's first two hours with a tenant per user: 3,000 users with Zipf-like
    shares (a few heavy, thousands seen a few times), and 40 users seen only in the quieter hour."""
    import numpy as np

    g = pd.read_parquet(ROOT / "data" / "gateway" / "peak_hours.parquet")
    g = g[g["arrival_time"] < g["arrival_time"].min().floor("h") + pd.Timedelta(hours=2)].reset_index(drop=True)
    rng = np.random.default_rng(30)
    w = 1.0 / np.arange(1, 3001) ** 1.1
    g["tenant"] = [f"user-{k:05d}" for k in rng.choice(3000, size=len(g), p=w / w.sum())]
    inter = g.index[g["tier"] == "interactive"]
    hour = g.loc[inter, "arrival_time"].dt.floor("h")
    busiest = hour.value_counts().idxmax()
    quiet = inter[(hour != busiest).to_numpy()]
    g.loc[quiet[:40], "tenant"] = [f"night-{k:02d}" for k in range(40)]   # only in the quieter hour
    path = tmp_path_factory.mktemp("peruser") / "log.parquet"
    g.to_parquet(path)
    return path, g


@pytest.fixture(scope="module")
def per_user_plan(per_user_log):
    from capbook.plan.steps import capacity_plan
    from capbook.sweeps.sweep import load_sample_sweep
    from capbook.logs.requestlog import read_requests

    path, _ = per_user_log
    return capacity_plan(read_requests(path), load_sample_sweep("illustrative_chat"), simulate=False)


def test_a_per_user_log_lists_the_top_tenants_and_one_all_others_row(per_user_log, per_user_plan):
    import numpy as np
    from capbook.plan.steps import TOP_TENANTS

    _, g = per_user_log
    p, lim = per_user_plan, per_user_plan.limits
    inter = g[(g["tier"] == "interactive") & (g["model"] == p.source["model"])].copy()
    n = inter["tenant"].nunique()
    assert len(p.tpm) == n > 2000                                     # every tenant has a limit
    t = lim.table
    assert len(t) == TOP_TENANTS + 1
    assert t.index[-1] == f"all others ({n - TOP_TENANTS:,} tenants)" and t["tenants"].iloc[-1] == n - TOP_TENANTS
    # the listed ones are the largest demands, in order
    top = p.tpm.sort_values("demand", ascending=False).index[:TOP_TENANTS]
    assert list(t.index[:-1]) == list(top)
    assert (p.tpm.loc[top, "group"] == "top").all() and (p.tpm.drop(top)["group"] == "all others").all()
    # the pool's demand: the p99 minute of the others' tokens together, grown as the peak grew
    growth = p.output_tps / p.observed_peak_output_tps
    inter["tok"] = inter["input_tokens"] + inter["output_tokens"]
    rest = inter[~inter["tenant"].isin(top)]
    minutes = pd.date_range(inter["arrival_time"].min().floor("min"), inter["arrival_time"].max().floor("min"),
                            freq="1min")
    per_min = rest.set_index("arrival_time")["tok"].resample("1min").sum().reindex(minutes, fill_value=0)
    assert t["demand"].iloc[-1] == pytest.approx(per_min.quantile(0.99) * growth, rel=1e-9)
    # pooled, the others need far less than the sum of their own p99 minutes
    assert t["demand"].iloc[-1] < p.tpm.drop(top)["demand"].sum()
    # max-min fair per tenant: the pool stands for its tenants, so every capped entry is capped at the
    # same level per tenant (the pool at k times it), and an entry under its demand is never below it
    capped = t[t["limit"] < np.floor(t["demand"]) - 1]
    level = (capped["limit"] / capped["tenants"])
    assert level.max() - level.min() <= 1.0 + 1e-9 * level.max(), capped
    if len(capped):
        free = t[~t.index.isin(capped.index)]
        assert (free["limit"] / free["tenants"] <= level.max() + 1).all()
    # what the plan shows fits the budget; no tenant's own limit is above the pool's
    assert t["limit"].sum() <= 0.9 * p.capacity_tpm
    assert p.tpm.drop(top)["limit"].max() <= max(t["limit"].iloc[-1], lim.floor_tpm)
    # the floor: one p99 prompt plus one p99 output of the planned traffic
    q = inter[["input_tokens", "output_tokens"]].quantile(0.99)
    assert abs(lim.floor_tpm - np.ceil(q.sum())) <= 1
    assert (p.tpm["limit"] >= lim.floor_tpm).all() and (p.tpm["limit"] > 0).all()


def test_a_tenant_absent_from_the_busiest_hour_gets_the_stated_floor_not_0(per_user_plan):
    p, lim = per_user_plan, per_user_plan.limits
    night = p.tpm[p.tpm.index.str.startswith("night-")]
    assert len(night) == 40
    assert (night["demand"] == 0).all()                 # their p99 minute is 0 ...
    assert (night["limit"] == lim.floor_tpm).all()      # ... and their limit the floor
    assert night["at_floor"].all()
    text = p.render()
    section = text.split("Per-tenant limits (tokens per minute)")[1].split("\n\n")[1]
    assert len(section.splitlines()) == 2 + len(lim.table)   # header, index name, 21 rows: not thousands
    assert f"No limit is below {lim.floor_tpm:,} tokens per minute" in text
    assert "never 0" in text and "all others (" in text
    rows = p.table()
    assert (rows["quantity"].str.startswith("limit for ")).sum() == len(lim.table)
    assert not ((rows["quantity"].str.startswith("limit for ")) & (rows["value"].astype(str) == "0")).any()


def test_plan_writes_every_tenants_limit_to_tenants_csv(per_user_log, per_user_plan, capsys, tmp_path):
    path, _ = per_user_log
    out = tmp_path / "o"
    code = main(["plan", "--requests", str(path), "--no-sim", "--no-autoscale", "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    t = pd.read_csv(out / "tenants.csv")
    assert list(t.columns) == ["tenant", "demand", "limit", "granted_share", "at_floor", "group"]
    assert len(t) == len(per_user_plan.tpm) and (t["limit"] >= per_user_plan.limits.floor_tpm).all()
    md = (out / "plan.md").read_text()
    assert md.count("| user-") <= 20 and "all others (" in md
    assert "tenants.csv" in cap.out


# -- the busiest hour: trace and plan name the same window ------------------------------------------
def test_busiest_window_is_the_largest_sliding_sum_of_whole_minutes():
    """Against a brute force over every 60-minute window of random minutes."""
    import numpy as np

    from capbook.logs.stats import busiest_window

    rng = np.random.default_rng(7)
    t = pd.date_range("2026-03-02 08:00", periods=300, freq="1min", tz="UTC")
    pm = pd.DataFrame({"period_start": t, "requests": rng.poisson(20, 300),
                       "input_tokens": rng.poisson(3000, 300), "output_tokens": rng.poisson(500, 300)})
    w = busiest_window(pm, 300 * 60.0)
    sums = [pm["output_tokens"].iloc[i:i + 60].sum() for i in range(241)]
    i = int(np.argmax(sums))
    assert w["start"] == t[i] and w["end"] == t[i] + pd.Timedelta(hours=1) and not w["whole_log"]
    assert w["output_tokens"] == sums[i] and w["requests"] == pm["requests"].iloc[i:i + 60].sum()
    assert w["output_tps"] == sums[i] / 3600 and w["request_rate"] == w["requests"] / 3600
    # by requests, another window
    r = busiest_window(pm, 300 * 60.0, measure="requests")
    assert r["requests"] == max(pm["requests"].iloc[i:i + 60].sum() for i in range(241))
    # a log shorter than an hour: its whole span, rates over the span
    short = busiest_window(pm.iloc[:40], 39 * 60.0 + 30)
    assert short["whole_log"] and short["seconds"] == 39 * 60.0 + 30
    assert short["requests"] == pm["requests"].iloc[:40].sum()
    with pytest.raises(ValueError, match="measure"):
        busiest_window(pm, 3600.0, measure="tokens")


def _burst_log(tmp_path) -> Path:
    """Three hours at 2 requests/s with a burst to 6 requests/s from 15:30 to 16:30: the busiest clock
    hour (15:00 or 16:00) holds half the burst, the busiest 60 minutes all of it."""
    import numpy as np

    rng = np.random.default_rng(3)
    t0 = pd.Timestamp("2026-06-25 14:59:00", tz="UTC")
    secs = np.sort(rng.uniform(0, 3 * 3600 + 120, 2 * (3 * 3600 + 120)))
    burst = np.sort(rng.uniform(31 * 60, 91 * 60, 4 * 3600))
    t = np.concatenate([secs, burst])
    n = len(t)
    f = pd.DataFrame({"arrival_time": t0 + pd.to_timedelta(t, unit="s"),
                      "input_tokens": rng.integers(200, 2000, n), "output_tokens": rng.integers(50, 400, n),
                      "model": "m", "tier": "interactive"}).sort_values("arrival_time")
    path = tmp_path / "burst.parquet"
    f.to_parquet(path)
    return path


def test_trace_and_plan_report_the_same_busiest_60_minutes_and_name_the_clock_hour(capsys, tmp_path):
    path = _burst_log(tmp_path)
    assert main(["trace", str(path), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    b = s["busiest_60min"]
    assert b["start"].startswith("2026-06-25T15:3") and not b["whole_log"]
    clock = {r["measure"]: r for r in s["peak_to_mean"]}["requests"]
    assert clock["peak"] < b["requests"]          # the clock hour holds only part of the burst
    assert main(["trace", str(path)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^peak hour clock hour 2026-06-25 1[56]:00–1[67]:00 UTC", text, re.M), text
    assert re.search(rf"busiest 60 minutes by output tokens 2026-06-25 {b['start'][11:16]}–", text), text
    assert f"{b['requests']:,} requests" in text
    out = tmp_path / "plan"
    assert main(["plan", "--requests", str(path), "--no-sim", "--no-autoscale", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    r = _rows(out)
    assert r[("forecast", "observed peak hour: busiest 60 minutes by output tokens")] == b["start"][:19] + "Z"
    assert int(r[("forecast", "observed peak hour, requests")]) == b["requests"]
    assert float(r[("forecast", "observed peak hour, output")]) == pytest.approx(b["output_tps"], rel=1e-12)
    assert f"{b['requests']:,} requests of the planned traffic" in text and "not a clock hour" in text


def test_trace_and_plan_agree_on_a_real_log_shorter_than_an_hour(shared_dir, capsys, tmp_path):
    log = shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv"
    assert main(["trace", str(log), "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["busiest_60min"]
    assert b["whole_log"] and b["requests"] == 8819
    assert b["request_rate"] == pytest.approx(8819 / 3435.95, rel=1e-3)   # over the span, not 3600 s
    assert main(["plan", "--requests", str(log), "--no-sim", "--no-autoscale", "--out", str(tmp_path / "p")]) == 0
    text = capsys.readouterr().out
    r = _rows(tmp_path / "p")
    assert int(r[("forecast", "observed peak hour, requests")]) == 8819
    assert "less than an hour, so its whole span stands for it" in text


def test_plan_on_a_real_log_and_sweep_speaks_flags_only(shared_dir, capsys, tmp_path):
    """Azure's conversation log on vLLM's 70B TP8 sweep (TP read from its folder): every line
    printed or written names flags, never a keyword argument or a Python attribute."""
    sweep = shared_dir / "sweeps/vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
    log = shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if not sweep.exists():
        pytest.skip(f"{sweep} is not in {shared_dir}")
    base = ["plan", "--requests", str(log), "--sweep", str(sweep), "--no-sim", "--no-autoscale",
            "--prices", str(PRICES), "--gpu", "A100-SXM-80GB"]
    # the folder (01_tp8_pp1) and the suite's table beside the results record TP 8: no flag needed
    out = tmp_path / "b"
    assert main([*base, "--out", str(out)]) == 0
    cap = capsys.readouterr()
    r = _rows(out)
    assert int(float(r[("cost", "GPUs")])) == 8 * int(float(r[("fleet", "total replicas")]))
    for text in (cap.out, cap.err, (out / "plan.md").read_text(), (out / "plan.csv").read_text()):
        assert not KEYWORD.search(text), KEYWORD.search(text)
        assert not re.search(r"\bsweep\.[a-z_]+\b", text) and "\x1b" not in text
