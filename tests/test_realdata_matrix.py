"""Every real file through the command line, as a new user would run it.

``capbook trace`` on every request log in ``../shared/traces``; every result file and folder of
``../shared/sweeps`` and ``../shared/realdata`` read as a sweep; ``capbook plan`` on log × sweep
combinations that span every load generator. Each either works or exits 2 with one message in
CLI spelling that names the flag resolving it (or says plainly that the file is not what
capbook reads); never a traceback. Skipped when ``../shared`` is absent.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from capbook.app.cli import main
from capbook.app.messages import cli_message

#: Python keyword spelling that must not reach a CLI user (``pass drop_invalid=True``).
_KEYWORD = re.compile(r"\b[a-z_]+=(True|False|['\"{]|\s|$)")


def _assert_cli_message(err: str) -> None:
    assert "Traceback" not in err, err
    assert err.count("\n") <= 12, f"more than one message:\n{err}"
    rest = re.sub(r"--where [\w.-]+=\S+", "", err)
    m = _KEYWORD.search(rest)
    assert m is None, f"Python keyword {m.group(0)!r} in a CLI message:\n{err}"


# -- capbook trace on every log ----------------------------------------------------------------
LOGS = {
    "AzureLLMInferenceTrace_code.csv": 8_819,
    "AzureLLMInferenceTrace_conv.csv": 19_366,
    "conversation_trace.jsonl": 12_031,
    "synthetic_trace.jsonl": 3_993,
    "burstgpt/burstgpt_slice.csv": 400,
    "burstgpt/burstgpt3_slice.csv": 400,
}


@pytest.mark.parametrize("name, rows", sorted(LOGS.items()))
def test_trace_reads_every_real_log(shared_dir, name, rows, capsys):
    assert main(["trace", str(shared_dir / "traces" / name)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert re.search(rf"^rows\s+{rows:,}\b", out, re.M), out
    for bad in ("nan", "inf", "None"):
        assert not re.search(rf"\b{bad}\b", out), f"{bad!r} in the summary of {name}:\n{out}"


def test_trace_says_a_servegen_descriptor_is_not_a_request_log(shared_dir, capsys):
    files = sorted((shared_dir / "traces" / "servegen").rglob("chunk-*-trace.csv"))
    assert files
    for f in (files[0], files[-1]):
        assert main(["trace", str(f)]) == 2
        err = capsys.readouterr().err
        _assert_cli_message(err)
        assert "ServeGen" in err and "not a request log" in err, err


def test_trace_into_head_on_a_real_log(shared_dir):
    log = shared_dir / "traces" / "conversation_trace.jsonl"
    r = subprocess.run(f"'{sys.executable}' -m capbook.app.cli trace '{log}' | head -3", shell=True,
                       capture_output=True, text=True, timeout=300)
    assert len(r.stdout.splitlines()) == 3
    assert "Traceback" not in r.stderr and "Error" not in r.stderr, r.stderr


# -- every sweep file and folder -----------------------------------------------------------------
def _sweep_paths(shared: Path) -> list[Path]:
    roots = [shared / "sweeps", shared / "realdata"]
    files = sorted(p for r in roots for p in r.rglob("*")
                   if p.is_file() and p.suffix.lower() in (".json", ".jsonl", ".csv"))
    folders = sorted({p.parent for p in files} | {q for p in files for q in p.parents
                                                  if any(q == r or r in q.parents for r in roots)})
    return files + folders


def test_every_sweep_file_and_folder_reads_or_says_what_to_type(shared_dir):
    from capbook.sweeps.importers import read_points, read_sweep

    read, refused = [], []
    for p in _sweep_paths(shared_dir):
        try:
            sw = read_sweep(p)
        except ValueError as exc:
            msg = cli_message(str(exc))
            _assert_cli_message(msg)
            # a folder that holds sweeps is read with a flag; a file that is not a load point
            # (a config, a README, server-side metrics) says so and names itself
            assert ("--" in msg or "not" in msg or "no " in msg), f"{p}: {msg}"
            assert str(p) in msg or p.name in msg, f"{p}: the message does not name the path: {msg}"
            refused.append((p, msg))
            continue
        t = sw.table
        assert len(t) >= 1
        assert t["concurrency"].gt(0).all() and t["tpot_p50_s"].gt(0).all(), p
        read.append(p)
    assert len(read) >= 40, f"only {len(read)} paths read as sweeps"
    # every tool's results are read from its files (a mixed file is read with --load)
    formats = set()
    for p in read + [p for p, m in refused if "--load" in m]:
        if p.is_file():
            formats |= set(read_points(p)["format"].dropna())
    assert {"aiperf", "genai-perf", "vllm", "guidellm", "guidellm-csv", "llmperf", "inference-perf",
            "inference-benchmarker"} <= formats, formats


# -- capbook plan on log × sweep combinations ---------------------------------------------------
SW = "sweeps/"
RD = "realdata/inference-perf-kubecon-na-2025/"
COMBOS = [
    # (log, sweep, flags the user must add, generator)
    ("AzureLLMInferenceTrace_conv.csv", SW + "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot",
     ["--load", "concurrency"], "aiperf"),
    ("synthetic_trace.jsonl", SW + "aiperf/InferenceMAX_Rocm_Team/results/0601", [], "aiperf"),
    ("conversation_trace.jsonl", RD + "vllm+chunking_and_prefix_caching", [], "inference-perf"),
    ("AzureLLMInferenceTrace_code.csv", SW + "inference-perf/demos/kubecon-na-2025",
     ["--where", "config=vllm"], "inference-perf"),
    ("AzureLLMInferenceTrace_conv.csv",
     SW + "vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1", [], "vllm"),
    ("AzureLLMInferenceTrace_code.csv", SW + "guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv",
     ["--load", "rate"], "guidellm"),
    ("synthetic_trace.jsonl", SW + "guidellm/neuralmagic-guidellm", [], "guidellm"),
    ("burstgpt/burstgpt_slice.csv", SW + "llmperf/raw_data/summary/anyscale_70b.json", [], "llmperf"),
    ("conversation_trace.jsonl", SW + "inference-benchmarker/infervisor-plow/perf-data/harness/b2-ib/vllm/results",
     ["--load", "rate"], "inference-benchmarker"),
    ("synthetic_trace.jsonl", SW + "genai-perf/wellflat-k8s-dev/commit-e17e8f5", [], "genai-perf"),
]


def _plan_rows(out: Path) -> dict:
    t = pd.read_csv(out / "plan.csv")
    assert list(t.columns) == ["step", "quantity", "value", "unit"]
    return {(s, q): v for s, q, v in zip(t["step"], t["quantity"], t["value"])}


@pytest.mark.parametrize("log, sweep, flags, tool", COMBOS, ids=[f"{c[3]}-{Path(c[0]).stem[:14]}" for c in COMBOS])
def test_plan_on_real_log_and_sweep(shared_dir, tmp_path, capsys, log, sweep, flags, tool):
    args = ["plan", "--requests", str(shared_dir / "traces" / log), "--sweep", str(shared_dir / sweep)]
    if flags:
        # without the flag: exit 2, and the message names it
        assert main(args + ["--out", str(tmp_path / "no")]) == 2
        err = capsys.readouterr().err
        _assert_cli_message(err)
        assert flags[0] in err, err
    out = tmp_path / "plan"
    # the simulated week for the first pairing of each log (a few seconds to half a minute each)
    autoscale = [c[0] for c in COMBOS].index(log) == COMBOS.index((log, sweep, flags, tool))
    code = main(args + flags + ["--out", str(out)] + ([] if autoscale else ["--no-autoscale"]))
    text = capsys.readouterr()
    # 0: written and verified (or not simulated); 3: written, NOT VERIFIED, and the headline says so
    assert code == (3 if "NOT VERIFIED" in text.out.splitlines()[0] else 0), text.err
    assert "Traceback" not in text.err
    rows = _plan_rows(out)
    for key in [("objectives", "SLO"), ("replica", "slots (S)"), ("fleet", "total replicas"),
                ("simulation", "p99 TTFT")]:
        assert key in rows, f"plan.csv lacks {key}"
    total = int(float(rows[("fleet", "total replicas")]))
    assert total >= 1
    head = text.out.splitlines()[0]
    assert f"{total} replicas" in head, head
    p99 = float(rows[("simulation", "p99 TTFT")])
    good = float(rows[("simulation", "goodput")])
    md = (out / "plan.md").read_text()
    # the headline is verified by simulation: the simulation of that fleet meets the default objectives
    # (p99 TTFT <= 2 s, goodput >= 99 %), or the plan says loudly that it cannot
    if not (p99 <= 2.0 and good >= 0.99):
        assert re.search(r"cannot|not verified", head, re.I), text.out
    for bad in ("nan", "inf", "None"):
        assert not re.search(rf"\b{bad}\b", text.out), f"{bad!r} in the plan:\n{text.out}"
        assert not re.search(rf"\b{bad}\b", md), f"{bad!r} in plan.md"
    if autoscale:
        sched = pd.read_csv(out / "schedule.csv")
        assert list(sched.columns) == ["hour_of_week", "replicas"]
        assert sched["hour_of_week"].tolist() == list(range(168))
        assert (sched["replicas"] >= 1).all() and sched["replicas"].max() <= total
        # GPU-hours when the sweep says GPUs per replica, replica-hours (named so) when it does not
        unit = "GPU-hours" if ("autoscaling", "GPU-hours per week (static)") in rows else "replica-hours"
        static = float(rows[("autoscaling", f"{unit} per week (static)")])
        auto = float(rows[("autoscaling", f"{unit} per week (autoscaled)")])
        assert 0 < auto <= static, (auto, static)
        assert "Autoscaling through the week" in text.out
    else:
        assert not (out / "schedule.csv").exists()
