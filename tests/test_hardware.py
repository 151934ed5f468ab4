"""capbook.engine.hardware: the tables, name reading, KV-cache sizes against engines' published figures,
the roofline floor by hand, server-log facts from real log lines, and the engines' defaults.

Known answers come from outside the code: vLLM's own start-up figures (llm-d-benchmark's
config_explorer/empirical-vllm-memory-results.md: Llama-3.1-8B on one H100 at 0.9 gives the KV
cache 51.38 GiB; Llama-3.3-70B-FP8 on two 32.0 GiB each; Qwen3-0.6B 64.45 GiB), log lines copied
from public issues and READMEs, and hand arithmetic.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from capbook.engine import stepmodel as engine
from capbook.engine.hardware import (ARCHITECTURES as MODELS, GPUS, Hardware, close_matches, engine_defaults, find_gpu, find_model,
                              gpu_count, hardware_for, name_dtype, parse_server_log, read_server_facts)

GIB = 2 ** 30


# -- the tables ----------------------------------------------------------------------------------
def test_every_entry_has_a_source_and_sane_figures():
    for g in GPUS.values():
        assert g.source and g.memory_gb > 0 and g.bandwidth_tbs > 0 and g.tflops["bf16"] > 0, g.name
        # dense figures: fp8 never more than twice bf16, fp4 never more than twice fp8
        assert g.tflops.get("fp8", 0) <= 2.05 * g.tflops["bf16"], g.name
        assert g.tflops.get("fp4", 0) <= 2.05 * g.tflops.get("fp8", g.tflops["bf16"]), g.name
    for m in MODELS.values():
        assert m.source.startswith("https://huggingface.co/"), m.name
        assert m.active_b <= m.params_b and m.layers > 0 and m.max_position_embeddings > 0, m.name
    assert len(GPUS) >= 20 and len(MODELS) >= 40
    from capbook.engine import hardware

    assert hardware.MODELS is MODELS  # the interface's name for the table


def test_sample_sweep_figures_are_the_tables():
    # the modelled sample sweeps were generated with these datasheet figures (data/README.md)
    from capbook.engine.servingmodel import GPUS as SG, LLMS

    assert SG is GPUS  # one table
    for name, bw, tf in (("A100-SXM-80GB", 2.039, 312.0), ("H100-SXM-80GB", 3.35, 989.0), ("L4", 0.300, 121.0),
                         ("A10", 0.600, 125.0), ("RTX-PRO-6000-Blackwell", 1.792, 500.0)):
        assert (SG[name].bandwidth_tbs, SG[name].tflops["bf16"]) == (bw, tf)
    g = LLMS["Gemma-12B"]
    assert (g.params_b, g.layers, g.kv_heads, g.head_dim) == (12.0, 48, 8, 256)


# -- names ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, want", [
    ("H100", "H100-SXM-80GB"), ("nvidia-h100-80gb", "H100-SXM-80GB"), ("NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"),
    ("H100 PCIe", "H100-PCIe-80GB"), ("H100 NVL 94GB", "H100-NVL-94GB"), ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("A100-SXM4-40GB", "A100-SXM-40GB"), ("NVIDIA-A100-SXM4-80GB", "A100-SXM-80GB"), ("A100-40GB", "A100-SXM-40GB"),
    ("nvidia-tesla-a100", "A100-SXM-40GB"), ("nvidia-a100-80gb", "A100-SXM-80GB"),
    ("A100 80GB PCIe", "A100-PCIe-80GB"), ("4xNVIDIA_L40S", "L40S"), ("NVIDIA-L40S", "L40S"), ("L40", "L40"),
    ("nvidia-l4", "L4"), ("NVIDIA-L4", "L4"), ("Tesla-T4", "T4"), ("nvidia-tesla-t4", "T4"), ("NVIDIA-A10G", "A10G"),
    ("NVIDIA A10", "A10"), ("nvidia-h200-141gb", "H200-SXM-141GB"), ("H200", "H200-SXM-141GB"), ("H20", "H20"),
    ("H800", "H800-SXM-80GB"), ("nvidia-b200", "B200"), ("nvidia-gb200", "GB200"), ("MI300X", "MI300X"),
    ("amd-mi325x", "MI325X"), ("mi355x", "MI355X"), ("Gaudi 3", "Gaudi3"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("RTX PRO 6000 Blackwell", "RTX-PRO-6000-Blackwell"), ("Standard_ND96asr_v4 x 1", "A100-SXM-40GB"),
    ("p4d.24xlarge", "A100-SXM-40GB"), ("p5.48xlarge", "H100-SXM-80GB"), ("g6e.12xlarge", "L40S"),
    ("a3-highgpu-8g", "H100-SXM-80GB"), ("H100-SXM-80GB", "H100-SXM-80GB"), ("A100-SXM-80GB", "A100-SXM-80GB"),
])
def test_gpu_names_from_the_wild(name, want):
    assert find_gpu(name).name == want


def test_gpu_counts_and_unknown_gpus():
    assert gpu_count("4xNVIDIA_L40S") == 4
    assert gpu_count("Standard_ND96asr_v4 x 1") == 8   # an ND96asr_v4 VM has eight A100 40 GB
    assert gpu_count("H100") is None
    for name in ("H101", "RTX 3090", "", None, "opt-125m"):
        assert find_gpu(name) is None
    assert any(n.startswith("H100") for n in close_matches("H101", "gpu"))


@pytest.mark.parametrize("name, want", [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"), ("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"),
    ("Meta-Llama-3-70B", "meta-llama/Meta-Llama-3-70B-Instruct"),
    ("results_serving_meta-llama-Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"),
    ("llama_3_3_70b_online_output", "meta-llama/Llama-3.3-70B-Instruct"),
    ("llama_405b_online_output", "meta-llama/Llama-3.1-405B-Instruct"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8", "meta-llama/Llama-3.1-70B-Instruct"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"), ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B"), ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
    ("google/gemma-2-9b-it", "google/gemma-2-9b-it"), ("gemma-3-27b", "google/gemma-3-27b-it"),
    ("microsoft/phi-4", "microsoft/phi-4"), ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1"),
    ("openai/gpt-oss-120b", "openai/gpt-oss-120b"), ("ibm-granite/granite-3.1-8b-instruct",
                                                      "ibm-granite/granite-3.3-8b-instruct"),
    ("Llama-2-70b-chat", "meta-llama/Llama-2-70b-chat-hf"),
])
def test_model_names_from_the_wild(name, want):
    assert find_model(name).name == want


def test_model_names_that_are_not_in_the_table():
    for name in ("facebook/opt-125m", "example_model", "nvidia/Qwen3.6-35B-A3B-NVFP4", "", None):
        assert find_model(name) is None
    # a family with a size given apart (a sweep's params_b column)
    assert find_model("llama", params_b=70).name == "meta-llama/Llama-3.3-70B-Instruct"
    assert name_dtype("meta-llama/Llama-3.1-405B-Instruct-FP8") == "fp8"
    assert name_dtype("TheBloke/Llama-2-7B-AWQ") == "awq" and name_dtype("llama-3.1-8b") is None


# -- the KV cache against the engines' own figures ----------------------------------------------
@pytest.mark.parametrize("model, tp, kv_gib_per_gpu", [
    ("meta-llama/Llama-3.1-8B-Instruct", 1, 51.38),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", 2, 32.0),
    ("Qwen/Qwen3-0.6B", 1, 64.45),
])
def test_kv_tokens_within_ten_percent_of_vllm_on_an_h100(model, tp, kv_gib_per_gpu):
    hw = hardware_for(model=model, gpu="H100", tensor_parallel=tp, gpu_memory_utilization=0.9)
    m = hw.model
    # vLLM's tokens: its KV memory over the KV bytes a token takes on one GPU (heads split by TP)
    per_gpu = 2 * m.layers * (m.kv_heads // tp) * m.head_dim * 2
    published = kv_gib_per_gpu * GIB / per_gpu
    assert abs(hw.kv_cache_tokens() / published - 1) < 0.10


def test_kv_of_latent_attention_and_replicated_heads():
    # DeepSeek-V3: one latent of 512 + 64 values per layer, 61 layers, fp8 weights, kept whole on
    # every rank: 8 x H200 hold 141 GiB x 0.85 - 671e9 / 8 bytes each
    hw = hardware_for(model="deepseek-ai/DeepSeek-V3", gpu="H200", tensor_parallel=8)
    per = 61 * 576 * 2
    free = 141 * GIB * 0.85 - 671e9 / 8
    assert hw.kv_cache_tokens() == int(free // per)
    # Llama-3.1-70B has 8 KV heads: at TP 16 each rank keeps one head (replicated), not half of one
    hw16 = hardware_for(model="llama-3.1-70b", gpu="H100", tensor_parallel=16)
    assert hw16.model.kv_bytes_per_token_per_gpu(16) == 2 * 80 * 1 * 128 * 2


def test_engine_wrappers_read_the_same_tables():
    assert engine.model_config("Llama-3.1-8B") == (8.03, 32, 8, 128)
    assert engine.gpu_memory_gb("nvidia-h100-80gb") == 80.0 and engine.gpu_memory_gb("XPU-48GB") == 48.0
    assert engine.kv_cache_tokens("Llama-3.1-8B", "H100") == hardware_for(model="llama-3.1-8b",
                                                                          gpu="H100").kv_cache_tokens()
    assert engine.kv_cache_tokens("unknown-model", "H100") is None


# -- the roofline floor by hand ------------------------------------------------------------------
def test_step_floor_by_hand():
    hw = hardware_for(model="llama-3.1-8b", gpu="H100", tensor_parallel=1)
    # one sequence with 1,000 tokens of context: 8.03e9 x 2 bytes of weights + 1,000 x 131,072
    # bytes of KV over 3.35 TB/s (memory bound)
    want = (8.03e9 * 2 + 1000 * 131072) / 3.35e12
    assert hw.step_time_floor(1, 1000, 0) == pytest.approx(want, rel=1e-12)
    # a prefill of 8,192 tokens: 2 x 8.03e9 x 8,193 FLOPs over 989 TFLOP/s (compute bound)
    assert hw.step_time_floor(1, 0, 8192) == pytest.approx(2 * 8.03e9 * 8193 / 989e12, rel=1e-12)
    # TP 4 on a 70B: a quarter of the weights and of the KV heads per GPU
    hw4 = hardware_for(model="llama-3.3-70b", gpu="H200", tensor_parallel=4)
    want4 = (70.6e9 * 2 / 4 + 64 * 2000 * 2 * 80 * 2 * 128 * 2) / 4.8e12
    assert hw4.step_time_floor(64, 2000, 0) == pytest.approx(want4, rel=1e-12)
    assert math.isnan(Hardware().step_time_floor(1, 1, 1))


def test_mixture_of_experts_reads_more_experts_as_the_batch_grows():
    m = find_model("mixtral-8x7b")
    one, many = m.weights_read(1), m.weights_read(64)
    assert one == pytest.approx(m.active_b, rel=1e-12)     # one token: its 2 experts of 8
    assert many == pytest.approx(m.params_b, rel=1e-3)     # 64 tokens touch all 8
    assert one < m.weights_read(4) < many


# -- server logs ---------------------------------------------------------------------------------
# lines copied from public logs: vllm-project/vllm PR #12569 (V1, 0.7.x); a vLLM 0.2x V1 start-up
# from noonghunna/club-3090 issue #295; SGLang 0.5.17 from a public run log; TGI 3.x router lines
V1_BLOCKS = """\
INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB
INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381
INFO 01-30 03:19:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x
"""
V1_TOKENS = """\
(APIServer pid=1) INFO 06-01 09:20:16 [utils.py:278] non-default args: {'model_tag': '~/.cache/huggingface/qwen3.6-27b-autoround-int4', 'host': '0.0.0.0', 'model': '~/.cache/huggingface/qwen3.6-27b-autoround-int4', 'trust_remote_code': True, 'dtype': 'float16', 'max_model_len': 262144, 'quantization': 'auto_round', 'tensor_parallel_size': 2, 'disable_custom_all_reduce': True, 'kv_cache_dtype': 'fp8_e5m2', 'enable_prefix_caching': True, 'max_num_batched_tokens': 8192, 'max_num_seqs': 2, 'enable_chunked_prefill': True}
(EngineCore pid=120) INFO 06-01 09:22:30 [kv_cache_utils.py:1733] GPU KV cache size: 620,944 tokens
(EngineCore pid=120) INFO 06-01 09:22:30 [kv_cache_utils.py:1734] Maximum concurrency for 262,144 tokens per request: 2.37x
"""
SGLANG = "max_total_num_tokens=171008, context_len=169000, available_gpu_mem=8.27 GB\n"
TGI = ("2025-07-04T12:36:09.356551Z  INFO text_generation_router_v3: backends/v3/src/lib.rs:137: Setting max batch "
       "total tokens to 52125\n")


def test_vllm_v0_style_blocks_times_the_block_size():
    f = parse_server_log(V1_BLOCKS, "server.log")
    assert f["kv_cache_tokens"][0] == 1381 * 16
    assert f["kv_cache_tokens"][1].startswith("server.log:2")
    # the concurrency line says the same: 2,048 tokens x 10.79 = 22,098 (rounded to 0.01x)
    assert abs(2048 * 10.79 / f["kv_cache_tokens"][0] - 1) < 0.001
    assert "67.7229 GB" in f["note:weights"][0]


def test_vllm_v1_kv_tokens_and_arguments():
    f = parse_server_log(V1_TOKENS, "vllm.log")
    assert f["kv_cache_tokens"] == (620944, "vllm.log:2")
    assert f["tensor_parallel"][0] == 2 and f["max_model_len"][0] == 262144 and f["max_num_seqs"][0] == 2
    assert f["kv_cache_dtype"][0] == "fp8_e5m2" and f["quantization"][0] == "auto_round"
    assert f["max_num_batched_tokens"][0] == 8192


def test_sglang_and_tgi_lines():
    s = parse_server_log(SGLANG, "s.log")
    assert s["kv_cache_tokens"][0] == 171008 and s["context_len"][0] == 169000 and s["engine"][0] == "sglang"
    t = parse_server_log(TGI, "t.log")
    assert t["kv_cache_tokens"][0] == 52125 and t["engine"][0] == "tgi"
    # TGI's JSON log format
    j = parse_server_log('{"level":"INFO","message":"Setting max batch total tokens to 133696"}', "j.log")
    assert j["kv_cache_tokens"][0] == 133696


def test_facts_beside_a_sweep(tmp_path):
    run = tmp_path / "results" / "run1"
    run.mkdir(parents=True)
    (run / "bench.json").write_text("{}")
    (tmp_path / "results" / "server.log").write_text(V1_TOKENS)
    (run / "cmd.txt").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 4 "
                                 "--gpu-memory-utilization 0.85\n")
    f = read_server_facts(run / "bench.json")
    # the nearer folder's command line wins for what it states; the log above gives the KV cache
    assert f["model"][0] == "meta-llama/Llama-3.1-8B-Instruct" and f["tensor_parallel"][0] == 4
    assert f["gpu_memory_utilization"][0] == 0.85 and f["gpu_memory_utilization"][1].endswith("cmd.txt:1")
    assert f["kv_cache_tokens"][0] == 620944 and "server.log:2" in f["kv_cache_tokens"][1]
    hw = hardware_for(path=run / "bench.json")
    assert hw.kv_cache_tokens() == 620944 and hw.tensor_parallel == 4
    assert any("recorded by the engine" in a and "server.log:2" in a for a in hw.assumptions())
    assert read_server_facts(tmp_path / "nothing-here") == {}


def test_facts_from_a_kubernetes_manifest(tmp_path):
    (tmp_path / "deploy.yaml").write_text("""\
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-h100-80gb
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4",
               "--max-model-len", "16384", "--gpu-memory-utilization", "0.92"]
        resources:
          limits:
            nvidia.com/gpu: 4
""")
    f = read_server_facts(tmp_path)
    assert f["gpu"][0] == "nvidia-h100-80gb" and f["tensor_parallel"][0] == 4 and f["max_model_len"][0] == 16384
    hw = hardware_for(path=tmp_path)
    assert hw.gpu.name == "H100-SXM-80GB" and hw.model.name == "meta-llama/Llama-3.1-70B-Instruct"
    assert hw.gpu_memory_utilization == 0.92 and hw.max_model_len == 16384


def test_hardware_for_errors_name_the_argument():
    with pytest.raises(ValueError, match="gpu='H101'.*close: .*H100"):
        hardware_for(gpu="H101")
    with pytest.raises(ValueError, match="model='llama-9b'"):
        hardware_for(model="llama-9b")


def test_assumptions_name_every_fact_and_its_flag():
    hw = hardware_for(model="llama-3.1-8b", gpu="nvidia-l4", gpu_memory_utilization=0.95)
    text = "\n".join(hw.assumptions())
    for word in ("--model", "--gpu", "--tensor-parallel", "--gpu-memory-utilization", "--max-model-len",
                 "weight dtype", "KV cache dtype", "--kv-cache-tokens", "131,072"):
        assert word in text
    # L4: 24 GB of GDDR (decimal), 0.95 - 0.05 of it less 16.06 GB of weights, 128 KiB a token
    assert hw.kv_cache_tokens() == int((24e9 * 0.90 - 8.03e9 * 2) // 131072)
    assert hw.as_dict()["kv_cache_tokens"] == hw.kv_cache_tokens()


# -- engine defaults ---------------------------------------------------------------------------
def test_vllm_defaults_by_version_and_gpu():
    d = engine_defaults("vllm", "0.11.0", "H100")
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (1024, 8192)
    d = engine_defaults("vllm 0.10.1", None, "A100-SXM4-80GB")   # 80 GB, but an A100
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (256, 2048)
    d = engine_defaults("vllm", "0.9.2", "L40S")                 # 48 GB
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (256, 2048)
    d = engine_defaults("vllm", "0.9.0", "MI300X")
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (1024, 8192)
    d = engine_defaults("vllm", "0.8.3", "A100-SXM4-40GB")       # 0.8.0-0.8.3: 1024 everywhere
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (1024, 2048)
    d = engine_defaults("vllm", "0.8.5", "L4")                   # PR #16158: back to 256 off H100/H200
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (256, 2048)
    d = engine_defaults("vllm", "0.8.5", "H100")                 # by name in 0.8
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (1024, 8192)
    d = engine_defaults("vllm (V0 engine)", None, "H100", max_model_len=8192)
    assert (d["max_num_seqs"], d["max_num_batched_tokens"], d["chunked_prefill"]) == (256, 8192, False)
    assert all(isinstance(v, str) and v for v in d["sources"].values())


def test_a_replica_asks_for_its_engine_defaults():
    hw = hardware_for(path=None, model="llama-3.1-8b", gpu="A100-SXM4-40GB")
    hw = Hardware(hw.model, hw.gpu, 1, 0.9, None, "bf16", "auto", None, {}, "vllm v0.8.3")
    assert hw.engine_defaults()["max_num_seqs"] == 1024
    s = Hardware(hw.model, hw.gpu, 1, 0.9, 4096, "bf16", "auto", 3000, {}, "sglang")
    assert s.engine_defaults()["max_num_seqs"] == 1500


def test_sglang_and_tgi_defaults():
    # SGLang: min(KV // 2, min(max(int(KV / context * 512), 2048), 4096))
    d = engine_defaults("sglang", kv_cache_tokens=171008, context_len=169000)
    assert d["max_num_seqs"] == min(171008 // 2, min(max(int(171008 / 169000 * 512), 2048), 4096)) == 2048
    d = engine_defaults("sglang", kv_cache_tokens=3000, context_len=4096)
    assert d["max_num_seqs"] == 1500
    assert engine_defaults("sglang")["max_num_seqs"] is None
    d = engine_defaults("tgi")
    assert (d["max_num_seqs"], d["max_num_batched_tokens"]) == (128, 4096)


# -- real sweeps in ../shared ------------------------------------------------------------------
def test_real_sweeps_name_their_hardware(shared_dir):
    from capbook.sweeps.importers import read_sweep

    p = shared_dir / "sweeps/vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
    hw = hardware_for(read_sweep(p), path=p)
    # an Azure ND96asr_v4 VM: eight A100 40 GB; TP 8 from the folder name
    assert hw.gpu.name == "A100-SXM-40GB" and hw.tensor_parallel == 8
    assert hw.model.name == "meta-llama/Llama-3.3-70B-Instruct"
    # per GPU 40 GiB x 0.85 less an eighth of 141.2 GB of weights, over 40 KiB a token
    assert hw.kv_cache_tokens() == int((40 * GIB * 0.85 - 70.6e9 * 2 / 8) // 40960)
    p = shared_dir / "sweeps/sglang/datacrunch-h200/sglang/outputs"
    sw = read_sweep(p, where={"params_b": 70, "workload": "random 1024/1024"}, load="rate")
    hw = hardware_for(sw, gpu="H200", tensor_parallel=4, path=p)
    assert hw.model.name == "meta-llama/Llama-3.3-70B-Instruct" and np.isfinite(hw.step_time_floor(1, 1, 0))


def test_weights_that_do_not_fit_and_no_tensor_parallelism_leave_the_kv_unknown():
    # 70.6B x 2 bytes = 141 GB of weights; one H200 gives 141 GiB x 0.85 = 128.7 GB
    hw = hardware_for(model="llama-3.3-70b", gpu="H200")
    assert hw.kv_cache_tokens() is None and "--tensor-parallel" in hw.kv_derivation()
    assert math.isnan(hw.step_time_floor(1, 100, 0))
    assert hardware_for(model="llama-3.3-70b", gpu="H200", tensor_parallel=1).kv_cache_tokens() == 0


def test_whether_the_tensor_parallelism_is_known():
    assert not hardware_for(model="llama-3.3-70b", gpu="H200").tensor_parallel_known
    assert hardware_for(model="llama-3.3-70b", gpu="H200", tensor_parallel=4).tensor_parallel_known
    assert hardware_for(gpu="4xNVIDIA_L40S").tensor_parallel == 4   # a count in the GPU name
