"""capbook.importers on the KubeCon NA 2025 inference-perf runs and on every shared sweep.

``../shared/realdata/inference-perf-kubecon-na-2025`` holds six vLLM variants, 7 open-loop
stages each (README there: engine flags in each variant's manifests.yaml, the client's 440
in-flight cap, the half-size TPOT of that inference-perf version). The expected numbers come
from that README's tables, not from this code. Tests skip when ../shared is absent.
"""
from __future__ import annotations

import pytest

from capbook.importers import read_sweep
from capbook.sweep import choose_slots

KUBECON = "realdata/inference-perf-kubecon-na-2025"

# variant: (max_num_seqs, engine, saturated completion rate ~ README, derived / reported TPOT)
VARIANTS = {
    "vllm": (128, "vllm v0.11.0", 103.1, (2.08, 2.11)),
    "vllm+batch_size": (192, "vllm v0.11.0", 114.3, (2.09, 2.11)),
    "vllm+chunking_and_prefix_caching": (128, "vllm v0.11.0", 173.0, (2.10, 2.13)),
    "vllm+eagle": (128, "vllm v0.11.0", 68.1, (1.84, 1.90)),
    "vllm+quantization": (128, "vllm v0.11.0", 172.4, (2.09, 2.10)),
    "vllm+v0_engine": (128, "vllm v0.9.0 (V0 engine)", 76.3, (2.09, 2.11)),
}


@pytest.fixture(scope="module")
def kubecon(shared_dir):
    root = shared_dir / KUBECON
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    return root


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kubecon_variant_slots_within_the_engine(kubecon, variant):
    mns, engine, sat_rps, (lo, hi) = VARIANTS[variant]
    s = read_sweep(kubecon / variant)
    assert s.config["max_num_seqs"] == mns and s.config["engine"] == engine
    assert s.config["gpu"] == "nvidia-h100-80gb" and s.config["tensor_parallel"] == 1
    assert s.config["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    # no level, saturated or not, exceeds the engine's running-sequence limit
    assert (s.concurrency <= mns).all() and (s.saturated.concurrency <= mns + 1e-9).all()
    # the stages past saturation (README: schedule delay, achieved rate flat) are flagged
    assert len(s.saturated) >= 2
    assert s.saturation_rps == pytest.approx(sat_rps, rel=0.01)
    # TPOT: derived / reported within the README's per-variant range
    r = s.table.tpot_rescale
    assert r.min() >= lo - 0.005 and r.max() <= hi + 0.005
    c = choose_slots(s, 0.050, q=95)
    assert 1 <= c.S <= mns
    rating = c.S / float(s.service_time(c.S))
    # S/T: no more than the engine completed at saturation, and within a factor 2 of it
    assert sat_rps / 2 < rating < 1.05 * sat_rps


def test_kubecon_parent_folder_names_the_configurations(kubecon):
    with pytest.raises(ValueError, match=r"holds 6 configurations told apart by config \('vllm', "
                                         r"'vllm\+batch_size', .*'vllm\+v0_engine'\), max_num_seqs "
                                         r"\(128, 192, .*\) and engine .*; pass where=\{'config': 'vllm'\}"):
        read_sweep(kubecon)
    s = read_sweep(kubecon, where={"config": "vllm+eagle"})
    assert s.config["config"] == "vllm+eagle"
    assert any(p.endswith("analyzed_reports_legend.json") for p, _ in s.skipped)


def test_kubecon_vllm_is_no_longer_427_slots(kubecon):
    """The bug: S from requests in the system (Little's law over vLLM's queue) was 427."""
    s = read_sweep(kubecon / "vllm")
    assert s.saturated.in_system.max() == pytest.approx(427.1, abs=0.5)  # README stage 6
    c = choose_slots(s, 0.050, q=95)
    assert c.S <= 128
    assert c.S / float(s.service_time(c.S)) < 110  # was 697 req/s against ~103 measured


# -- every shared file and folder reads, or gives one clear error -----------------------------
S = "sweeps/"
CASES = [
    (S + "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot", {}, "load='concurrency' or load='rate'"),
    (S + "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot", {"load": "concurrency"}, None),
    (S + "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot", {"load": "rate"}, None),
    (S + "aiperf/InferenceMAX_Rocm_Team", {}, None),
    (S + "vllm/surajssd-llm-k8s", {}, None),
    (S + "vllm/er0080-vllm-benchmarking", {}, "where={'config': "),
    (S + "vllm/er0080-vllm-benchmarking", {"where": {"max_num_seqs": "8"}, "repeats": "mean"}, None),
    (S + "vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/bench_serve_v0.25.1.json", {}, None),
    (S + "vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/"
         "bench_serve_all_requests_failed_v0.25.1.json", {}, "field 'completed' is 0"),
    (S + "guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv", {}, "load='concurrency'"),
    (S + "guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv", {"load": "rate"}, None),
    (S + "guidellm/neuralmagic-guidellm", {}, None),
    (S + "inference-perf/demos/kubecon-na-2025", {}, "where={'config': 'vllm'}"),
    (S + "inference-perf/demos/kubecon-na-2025/vllm", {}, None),
    (S + "inference-perf/demos/kubecon-na-2025/vllm+batch_size", {}, None),
    (S + "llmperf", {}, "where={'config': 'anyscale_13b'}"),
    (S + "llmperf/raw_data/summary/bedrock_13b.json", {}, None),
    (S + "llmperf/raw_data/individual/anyscale_70b.json", {}, None),
    (S + "llmperf/raw_data/individual/bedrock_13b.json", {"concurrency": 5}, None),
    (S + "inference-benchmarker", {}, "load='concurrency' or load='rate'"),
    (S + "inference-benchmarker", {"load": "rate"}, None),
    (S + "inference-benchmarker", {"load": "concurrency"}, None),
    (S + "genai-perf/wellflat-k8s-dev/commit-e3e57ba/bench/etl/profile_export_genai_perf.json", {}, None),
    (S + "genai-perf/wellflat-k8s-dev/commit-e17e8f5/bench/etl/profile_export_genai_perf.json", {}, None),
    (S + "genai-perf", {}, "repeats='mean'"),
]


@pytest.mark.parametrize("rel, kw, error", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_shared_sweep_reads_or_says_what_to_pass(shared_dir, rel, kw, error):
    if error is not None:
        with pytest.raises(ValueError) as exc:
            read_sweep(shared_dir / rel, **kw)
        assert error in str(exc.value)
        return
    s = read_sweep(shared_dir / rel, **kw)
    q = 95 if s.has("tpot", 95) else 50
    c = choose_slots(s, 0.050, q=q)
    assert c.reason
    if c.S:
        assert float(s.service_time(c.S)) > 0  # the plan's next step works at S
