"""The replica's hardware flags of predict, plan, simulate and compare: --gpu, --tensor-parallel,
--model, --gpu-memory-utilization and --max-model-len."""
from __future__ import annotations

import json
from pathlib import Path

from capbook.app.cli import main

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "data" / "sweeps" / "llama8b_l4_chat.csv"


def test_predict_prints_every_assumption_with_its_flag(capsys):
    assert main(["predict", "--sweep", str(SWEEP), "--rate", "1", "--gpu", "H100", "--model", "llama-3.1-8b",
                 "--tensor-parallel", "1", "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("assume")]
    text = "\n".join(lines)
    assert "model meta-llama/Llama-3.1-8B-Instruct" in text and "--model llama-3.1-8b" in text
    assert "GPU H100-SXM-80GB" in text and "--gpu H100 (read as H100-SXM-80GB)" in text
    assert "max_model_len 8,192 tokens (--max-model-len)" in text
    for flag in ("--tensor-parallel", "--gpu-memory-utilization", "--kv-cache-tokens"):
        assert flag in text
    # H100 at 0.9: 79.18 GiB x 0.85 less 16.06 GB of weights over 128 KiB a token
    kv = int((79.18 * 2 ** 30 * 0.85 - 8.03e9 * 2) // 131072)
    assert f"KV cache {kv:,} tokens" in text
    assert f"KV cache {kv:,} tokens" in out.split("assume")[0]  # the engine model uses it


def test_predict_json_has_the_hardware(capsys):
    assert main(["predict", "--sweep", str(SWEEP), "--rate", "1", "--json", "--gpu-memory-utilization", "0.8"]) == 0
    d = json.loads(capsys.readouterr().out)
    hw = d["hardware"]
    # the sample sweep records its model and GPU (Llama-3.1-8B on one L4)
    assert hw["gpu"] == "L4" and hw["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert hw["gpu_memory_utilization"] == 0.8 and hw["sources"]["gpu_memory_utilization"] == "--gpu-memory-utilization"
    assert hw["kv_cache_tokens"] == int((24e9 * 0.75 - 8.03e9 * 2) // 131072)
    assert any("--gpu-memory-utilization" in a for a in hw["assumptions"])


def test_unknown_gpu_or_model_is_a_clear_error(capsys):
    assert main(["predict", "--sweep", str(SWEEP), "--rate", "1", "--gpu", "H101"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capbook predict: --gpu 'H101': not a GPU capbook knows") and "H100-SXM-80GB" in err
    assert main(["predict", "--sweep", str(SWEEP), "--rate", "1", "--model", "llama-9b"]) == 2
    assert "--model 'llama-9b': not a model architecture capbook knows" in capsys.readouterr().err
    assert main(["predict", "--sweep", str(SWEEP), "--rate", "1", "--gpu-memory-utilization", "1.5"]) == 2
    assert "--gpu-memory-utilization '1.5'" in capsys.readouterr().err
    assert main(["simulate", "--replicas", "2", "--gpu", "B300X"]) == 2
    assert "--gpu 'B300X'" in capsys.readouterr().err
    assert main(["compare", "--max-model-len", "0"]) == 2
    assert "--max-model-len '0'" in capsys.readouterr().err


def test_plan_model_flag_names_the_log_model_and_the_architecture(tmp_path, capsys):
    out = tmp_path / "plan"
    assert main(["plan", "--no-sim", "--no-autoscale", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                 "--gpu", "L4", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    # the sample log has one model, 'chat': planned on the named architecture, with a note
    assert "the request log has one model, 'chat'" in err
    md = (out / "plan.md").read_text()
    assert "## Hardware and model" in md
    section = md.split("## Hardware and model")[1].split("## ")[0]
    assert "GPU L4" in section and "--gpu L4" in section and "KV cache" in section


def test_plan_model_flag_that_is_neither(tmp_path, capsys):
    assert main(["plan", "--no-sim", "--no-autoscale", "--model", "no-such-model", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "--model 'no-such-model': not a model of the request log" in err and "chat" in err
