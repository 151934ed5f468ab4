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

from capbook import cli
from capbook.cli import cli_message, main

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
    for f in (ROOT / "capbook").glob("*.py"):
        if f.name == "cli.py":
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
    for pattern, repl in cli._FLAG_HINTS:
        if callable(repl):
            continue
        for f in re.findall(r"--[a-z][a-z0-9-]*", repl):
            assert f in flags, (pattern, f)


@pytest.mark.parametrize("message, flag", [
    ("the fleet simulation was skipped (simulate=False)", "(--no-sim)"),
    ("not binding (model or GPU not recognised; pass kv_cache_tokens=)", "pass --kv-cache-tokens N)"),
    ("has no end_time column; pass sweep= (a capbook.sweep.Sweep) or prefill_rate_tps= and tpot_s=",
     "pass --sweep PATH with --slots S or --prefill-rate TPS and --tpot SECONDS"),
    ("The file has columns ['a']; pass format= or a capbook.traces.Mapping naming the columns", "pass --format FORMAT"),
    ("pass time_unit='s' (or 'ms', 'us', 'ns'), or set Mapping.time_unit", "pass --time-unit s (or 'ms', 'us', 'ns')"),
])
def test_new_hints(message, flag):
    out = cli_message(message)
    assert flag in out
    assert not KEYWORD.search(out) and "capbook.sweep.Sweep" not in out and "Mapping" not in out


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
