"""capbook.sweeps.importers on the KubeCon NA 2025 inference-perf runs and on every shared sweep.

``../shared/realdata/inference-perf-kubecon-na-2025`` holds six vLLM variants, 7 open-loop
stages each (README there: engine flags in each variant's manifests.yaml, the client's 440
in-flight cap, the half-size TPOT of that inference-perf version). The expected numbers come
from that README's tables, not from this code. Tests skip when ../shared is absent.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from capbook.sweeps.importers import read_points, read_sweep
from capbook.sweeps.sweep import choose_slots

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
    rating = c.S / float(s.service_time_s(c.S))
    # S/T: no more than the engine completed at saturation, and within a factor 2 of it
    assert sat_rps / 2 < rating < 1.05 * sat_rps


def test_kubecon_parent_folder_names_the_configurations(kubecon):
    with pytest.raises(ValueError, match=r"holds 6 configurations told apart by config \('vllm', "
                                         r"'vllm\+batch_size', .*'vllm\+v0_engine'\), max_num_seqs "
                                         r"\(128, 192, .*\),? (and )?engine .*; pass where=\{'config': 'vllm'\}"):
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
    assert c.S / float(s.service_time_s(c.S)) < 110  # was 697 req/s against ~103 measured


# variant: (chunked_prefill, prefix_caching, engine_v1) as its manifests.yaml states them (README
# "Variants" table); None where the manifest gives no flag (EAGLE: the engine's defaults; the
# V1 engine of v0.11.0 is its default too, not stated, so not filled in)
LIMITS = {
    "vllm": (False, False, None),
    "vllm+batch_size": (False, False, None),
    "vllm+chunking_and_prefix_caching": (True, True, None),
    "vllm+eagle": (None, None, None),
    "vllm+quantization": (True, True, None),
    "vllm+v0_engine": (False, False, False),
}


def _all_rows(s):
    return pd.concat([s.table, s.saturated], ignore_index=True)


def _one(vals):
    """The single value a column holds in every row (None / NaN count as one value)."""
    vals = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in vals]
    assert len(set(vals)) == 1, vals
    return vals[0]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kubecon_engine_limits_from_the_manifests(kubecon, variant):
    chunked, prefix, v1 = LIMITS[variant]
    rows = _all_rows(read_sweep(kubecon / variant))  # levels and saturated stages alike
    assert len(rows) == 7
    assert _one(rows.chunked_prefill) is chunked and _one(rows.prefix_caching) is prefix
    assert _one(rows.engine_v1) is v1
    # common flags: --gpu_memory_utilization=0.9 --max-model-len=512
    assert _one(rows.max_model_len) == 512 and _one(rows.gpu_memory_utilization) == 0.9
    assert _one(rows.engine_config_source) == str(kubecon / variant / "manifests.yaml")
    spec = (4, "eagle3") if variant == "vllm+eagle" else (None, None)
    assert (_one(rows.num_speculative_tokens), _one(rows.speculative_method)) == spec
    # one argv element "--quantization bitsandbytes"
    assert _one(rows.quantization) == ("bitsandbytes" if variant == "vllm+quantization" else None)
    for c in ("max_num_batched_tokens", "block_size", "kv_cache_dtype"):  # no manifest sets them
        assert _one(rows[c]) is None


@pytest.mark.parametrize("variant", ["vllm", "vllm+eagle"])
def test_kubecon_output_length_quantiles_are_the_stage_files(kubecon, variant):
    s = read_sweep(kubecon / variant)
    rows = _all_rows(s).set_index("point")
    assert rows.output_tokens_p50.notna().all() and len(s.saturated) >= 2  # saturated rows too
    for stage in ("stage_0", "stage_6"):  # a level and a saturated stage
        d = json.loads((kubecon / variant / "results" / f"{stage}_lifecycle_metrics.json").read_text())
        out, prompt = d["successes"]["output_len"], d["successes"]["prompt_len"]
        r = rows.loc[stage]
        assert r.output_tokens_p50 == out["median"]
        for q in ("min", "p1", "p5", "p10", "p25", "p75", "p90", "p95", "p99", "max"):
            assert r[f"output_tokens_{q}"] == out[q], q
        assert r.input_tokens_p50 == prompt["median"] and r.input_tokens_p99 == prompt["p99"]


# -- token-length quantiles in the other formats ------------------------------------------------
AIPERF_C16 = "sweeps/aiperf/anud18-qwen36/results/nvfp4/h100/chatbot/c16/profile_export_aiperf.json"
GENAI_OLD = "sweeps/genai-perf/wellflat-k8s-dev/commit-e3e57ba/bench/etl/profile_export_genai_perf.json"
QS = ("min", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "max")


@pytest.mark.parametrize("rel", [AIPERF_C16, GENAI_OLD])
def test_aiperf_and_genai_perf_sequence_length_quantiles(shared_dir, rel):
    d = json.loads((shared_dir / rel).read_text())
    r = read_points(shared_dir / rel).iloc[0]
    for q in QS:  # genai-perf at e3e57ba records no p1, p5, p10: NaN, not made up
        want = d["output_sequence_length"].get(q)
        got = r[f"output_tokens_{q}"]
        assert (math.isnan(got) if want is None else got == want), q
    assert r.input_tokens_p50 == d["input_sequence_length"]["p50"]
    assert r.input_tokens_p99 == d["input_sequence_length"]["p99"]
    # the aiperf CSV beside the JSON gives the same numbers (2 decimals)
    if "aiperf" in rel:
        c = read_points(shared_dir / rel.replace(".json", ".csv")).iloc[0]
        for q in QS:
            assert c[f"output_tokens_{q}"] == pytest.approx(r[f"output_tokens_{q}"], abs=0.005)


def test_guidellm_llmperf_and_vllm_arrays_give_quantiles(shared_dir):
    sw = shared_dir / "sweeps"
    g = "guidellm/neuralmagic-guidellm/tests/unit/entrypoints/assets/benchmarks_stripped.json"
    m = json.loads((sw / g).read_text())["benchmarks"][0]["metrics"]
    r = read_points(sw / g).iloc[0]
    out = m["output_token_count"]["successful"]
    assert r.output_tokens_p50 == out["median"] and r.output_tokens_p1 == out["percentiles"]["p01"]
    assert r.output_tokens_p99 == out["percentiles"]["p99"] and r.output_tokens_max == out["max"]
    assert r.input_tokens_p99 == m["prompt_token_count"]["successful"]["percentiles"]["p99"]
    # llmperf summary: quantiles p25 ... p99, min and max (strings in the file); no p1 / p5 / p10
    lp = "llmperf/raw_data/summary/anyscale_70b.json"
    d = json.loads((sw / lp).read_text())
    r = read_points(sw / lp).iloc[0]
    assert r.output_tokens_p50 == d["results_number_output_tokens_quantiles_p50"]
    assert r.output_tokens_min == float(d["results_number_output_tokens_min"])
    assert math.isnan(r.output_tokens_p5) and r.input_tokens_p50 == d["results_number_input_tokens_quantiles_p50"]
    # the per-request records of the same run: the distribution from the requests themselves
    ind = json.loads((sw / "llmperf/raw_data/individual/anyscale_70b.json").read_text())
    ok = [x["number_output_tokens"] for x in ind if x.get("error_code") is None]
    r = read_points(sw / "llmperf/raw_data/individual/anyscale_70b.json").iloc[0]
    assert r.output_tokens_p50 == np.percentile(ok, 50) and r.output_tokens_p1 == pytest.approx(np.percentile(ok, 1))
    # vLLM benchmark_serving --save-result with per-request output_lens
    v = "vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
    f = sw / v / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json"
    d = json.loads(f.read_text())
    r = read_points(f).iloc[0]
    assert r.output_tokens_p99 == pytest.approx(np.percentile(d["output_lens"], 99))
    assert r.output_tokens_max == max(d["output_lens"]) and r.input_tokens_p50 == np.median(d["input_lens"])


@pytest.mark.parametrize("rel", [
    "sweeps/inference-benchmarker",  # p50 … p99 of latencies only
    "sweeps/guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv",  # means only
    "sweeps/vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/bench_serve_v0.25.1.json",
])
def test_formats_recording_only_means_leave_the_quantiles_empty(shared_dir, rel):
    pts = read_points(shared_dir / rel)
    assert pts.output_tokens_p50.isna().all() and pts.input_tokens_p99.isna().all()
    assert pts.mean_output_tokens.notna().all()


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
    # two commits' runs at concurrency 1 whose measured output lengths differ (74 and 124 tokens per
    # request): two configurations, not repeats to average
    (S + "genai-perf", {}, "output_len (74, 124); pass where={'config': 'commit-e17e8f5'}"),
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
        assert float(s.service_time_s(c.S)) > 0  # the plan's next step works at S
