"""Tests of capbook.engine.servingmodel, the generator of the modelled sample sweeps.

Oracles: closed-form step times, Little's law inside the simulation, and measured figures
read by hand from public load-generator outputs in ../shared/sweeps (quoted below with their
source, so these tests need no files).
"""
from __future__ import annotations

import numpy as np
import pytest

from capbook.engine import servingmodel as sm
from capbook.engine.servingmodel import (
    GPUS,
    LLMS,
    SAMPLE_SPECS,
    WORKLOADS,
    Deployment,
    Workload,
    generate_sweep,
    sample_sweep_csv,
    simulate_level,
    stalled_tpot,
)


def test_committed_csvs_are_regenerated_exactly(repo_root):
    """tools/make_sweeps.py output equals data/sweeps/*.csv byte for byte."""
    names = sorted(SAMPLE_SPECS)
    files = sorted(p.stem for p in (repo_root / "data" / "sweeps").glob("*.csv"))
    assert files == names
    for name in names:
        committed = (repo_root / "data" / "sweeps" / f"{name}.csv").read_text()
        assert sample_sweep_csv(name) == committed, f"{name}.csv differs: run tools/make_sweeps.py"


def test_architecture_arithmetic():
    m = LLMS["Llama-3.1-8B"]
    # 2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 bytes per token
    assert m.kv_bytes_per_token() == 131072
    assert LLMS["Llama-3.1-70B"].kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2
    d = Deployment(m, GPUS["H100-SXM-80GB"])
    assert d.weight_bytes == pytest.approx(16.06e9)
    # (80 GB x 0.9 - 1.05 x 16.06 GB) / 131,072 B
    assert d.kv_capacity_tokens == int((72e9 - 1.05 * 16.06e9) // 131072)


def test_decode_step_closed_form():
    d = Deployment(LLMS["Llama-3.1-70B"], GPUS["H100-SXM-80GB"], tensor_parallel=4)
    bw = 3.35e12 * 0.8
    expect = 0.0025 + (141.2e9 + 10_000 * 327680) / 4 / bw + 2 * 80 * 45e-6
    assert float(d.decode_step_time(8, 10_000)) == pytest.approx(expect, rel=1e-12)
    ctx = np.array([0, 1e4, 1e5])
    st_ = d.decode_step_time(1, ctx)
    assert np.all(np.diff(st_) > 0)
    # prefill: compute-bound for long prompts, never faster than one read of the weights
    pf = d.prefill_time(np.array([1, 8000]))
    assert pf[1] == pytest.approx(0.0025 + 2 * 70.6e9 * 8000 / (989e12 * 0.45 * 4) + 2 * 80 * 45e-6)
    assert pf[0] == pytest.approx(0.0025 + 141.2e9 / 4 / bw + 2 * 80 * 45e-6)


def test_calibration_against_measured_decode_latency():
    """Single-stream decode step vs published measurements (within 15 %).

    * vLLM v0.8.3, Llama-3.3-70B-Instruct, TP8 on Standard_ND96asr_v4 (8 x A100 40 GB):
      median TPOT 24.54 ms at 1 QPS, ShareGPT (213 input / 214 output tokens on average).
      Source: ../shared/sweeps/vllm/surajssd-llm-k8s/.../01_tp8_pp1/benchmark_results.json,
      row "tp8_pp1_qps_01", "Median TPOT (ms)": 24.541288629103175.
    * vLLM 0.25.1, Gemma 12B BF16 on one RTX PRO 6000 Blackwell: inter-token latency p50
      20.069 ms at one virtual user, 4000-token prompts, 128 outputs.
      Source: ../shared/sweeps/inference-benchmarker/.../google_gemma-4-12B-it_2026-07-19-03-40-47.json,
      result "warmup", inter_token_latency_ms.p50 = 20.069.
    """
    d70 = Deployment(LLMS["Llama-3.1-70B"], GPUS["A100-SXM-40GB"], tensor_parallel=8)
    pred = float(d70.decode_step_time(1, 213 + 107))
    assert pred == pytest.approx(0.024541, rel=0.15)
    d12 = Deployment(LLMS["Gemma-12B"], GPUS["RTX-PRO-6000-Blackwell"])
    pred = float(d12.decode_step_time(1, 4000 + 64))
    assert pred == pytest.approx(0.020069, rel=0.15)


def test_stalled_tpot_against_a_measured_rate_sweep():
    """TPOT ≈ step / (1 − λ × prefill) against a measured arrival-rate sweep (within 15 %).

    Hand-read from ../shared/sweeps/inference-benchmarker/.../google_gemma-4-12B-it_2026-07-19-04-14-11.json
    (Gemma 12B, vLLM 0.25.1, 4000-token prompts): inter_token_latency_ms.p50 at each
    ConstantArrivalRate result against its achieved request_rate; the step time is the 20.085 ms
    p50 of the lowest-rate point and the prefill the ~0.375 s TTFT p50 of single-user runs.
    """
    achieved = np.array([0.5421, 0.8067, 1.0661, 1.3180, 1.5726])
    measured_itl = np.array([22.916, 25.514, 31.173, 39.849, 48.800]) / 1e3
    pred = stalled_tpot(0.020085, 0.375, achieved)
    assert pred == pytest.approx(measured_itl, rel=0.15)
    assert np.isinf(stalled_tpot(0.02, 0.5, 2.0))
    with pytest.raises(ValueError):
        stalled_tpot(0.0, 0.1, 1.0)


def test_single_stream_tpot_matches_step_time():
    """At concurrency 1 nothing interferes: mean TPOT is the mean decode step."""
    d = Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"])
    w = Workload("fixed", 1000, 200, spread=0.0)
    r = simulate_level(d, w, 1, 300, np.random.default_rng(3))
    # mean context during decode ~ 1000 + 1 + (200 - 2) / 2; noise mean exp(s^2/2); hiccups
    step = float(d.decode_step_time(1, 1000 + 1 + 99)) * np.exp(0.03**2 / 2) + 0.002 * 0.030
    assert r["tpot_mean_s"] == pytest.approx(step, rel=0.01)
    # TTFT at concurrency 1 is one prefill plus client overhead (mean 8 ms x e^{0.25^2/2})
    assert r["ttft_mean_s"] == pytest.approx(
        float(d.prefill_time(1000)) * np.exp(0.03**2 / 2) + 0.008 * np.exp(0.25**2 / 2), rel=0.02)


@pytest.mark.parametrize("name", sorted(SAMPLE_SPECS))
def test_littles_law_inside_each_sample_sweep(name, repo_root):
    """concurrency ≈ throughput × mean latency at every level (closed loop, steady state)."""
    import pandas as pd

    t = pd.read_csv(repo_root / "data" / "sweeps" / f"{name}.csv")
    client = 0.008 * np.exp(0.25**2 / 2)  # not part of the time a request holds a slot
    L = t.request_throughput_rps * (t.e2e_mean_s - client)
    assert L.to_numpy() == pytest.approx(t.concurrency.to_numpy(), rel=0.05)
    # token cross-check of the table itself
    assert t.output_throughput_tps.to_numpy() == pytest.approx(
        (t.request_throughput_rps * t.mean_output_tokens).to_numpy(), rel=0.05)


def test_physics_visible_in_sample_sweeps(repo_root):
    import pandas as pd

    s = pd.read_csv(repo_root / "data" / "sweeps" / "llama8b_h100_summarisation.csv").set_index("concurrency")
    # the KV cache fills between 48 and 64 long requests: admission queues and TTFT jumps
    assert s.loc[48, "kv_peak_frac"] < 1.0 and s.loc[64, "kv_peak_frac"] > 0.97
    assert s.loc[64, "ttft_p50_s"] > 5 * s.loc[48, "ttft_p50_s"]
    c = pd.read_csv(repo_root / "data" / "sweeps" / "llama8b_h100_chat.csv").set_index("concurrency")
    # prefill stalls: the share of time spent in prefill grows with load, and so does TPOT
    assert np.all(np.diff(c.prefill_share) > 0)
    # throughput saturates: doubling 64 -> 128 gains far less than 2x
    assert c.loc[128, "request_throughput_rps"] < 1.3 * c.loc[64, "request_throughput_rps"]


def test_determinism_and_seed_sensitivity():
    d = Deployment(LLMS["Llama-3.2-3B"], GPUS["L4"])
    a = generate_sweep(d, WORKLOADS["chat"], [1, 4], seed=5, requests_per_level=40)
    b = generate_sweep(d, WORKLOADS["chat"], [1, 4], seed=5, requests_per_level=40)
    c = generate_sweep(d, WORKLOADS["chat"], [1, 4], seed=6, requests_per_level=40)
    assert a.equals(b)
    assert not a.equals(c)


def test_calibrated_illustrative_targets(repo_root):
    import pandas as pd

    # the committed file equals the generator's output (test above), so read it
    df = pd.read_csv(repo_root / "data" / "sweeps" / "illustrative_chat.csv").set_index("concurrency")
    assert df.loc[32, "tpot_mean_s"] == pytest.approx(0.040, rel=1e-7)   # the mean: Little's law uses it
    assert df.loc[1, "mean_input_tokens"] / df.loc[1, "ttft_p50_s"] == pytest.approx(5996.0, rel=1e-7)
    # the calibration factors stay physical: the uncalibrated datasheet model is within 2x
    spec = SAMPLE_SPECS["illustrative_chat"]
    raw = generate_sweep(spec.deployment, spec.workload, [1, 32], seed=spec.seed,
                         requests_per_level=200).set_index("concurrency")
    assert 0.5 < df.loc[32, "tpot_p50_s"] / raw.loc[32, "tpot_p50_s"] < 2
    assert 0.5 < df.loc[1, "ttft_p50_s"] / raw.loc[1, "ttft_p50_s"] < 2


def test_bad_inputs():
    m, g = LLMS["Llama-3.1-70B"], GPUS["L4"]
    with pytest.raises(ValueError, match="does not fit"):
        Deployment(m, g)
    with pytest.raises(ValueError, match="precision"):
        Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"], precision="fp7")
    with pytest.raises(ValueError, match="tensor_parallel"):
        Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"], tensor_parallel=0)
    with pytest.raises(ValueError, match="bw_efficiency"):
        Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"], bw_efficiency=1.5)
    d = Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"])
    with pytest.raises(ValueError, match="concurrency"):
        simulate_level(d, WORKLOADS["chat"], 0, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_requests"):
        simulate_level(d, WORKLOADS["chat"], 1, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="strictly increasing"):
        generate_sweep(d, WORKLOADS["chat"], [4, 2], seed=0)
    with pytest.raises(ValueError, match="KV cache"):
        simulate_level(d, Workload("huge", 10_000_000, 10), 1, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown sample sweep"):
        sm.build_sample_sweep("nope")


def test_mixed_workload_sampling_and_validation():
    w = sm.MixedWorkload("70/30", ((0.7, WORKLOADS["chat"]), (0.3, WORKLOADS["summarisation"])))
    inp, out = w.sample(np.random.default_rng(1), 20_000)
    long_share = float(np.mean(inp > 5000))
    assert abs(long_share - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 20_000)
    assert w.input_tokens == pytest.approx(0.7 * 1500 + 0.3 * 8000)
    assert inp.mean() == pytest.approx(w.input_tokens, rel=0.02)
    assert out.mean() == pytest.approx(w.output_tokens, rel=0.02)
    with pytest.raises(ValueError, match="sum to 1"):
        sm.MixedWorkload("bad", ((0.5, WORKLOADS["chat"]), (0.4, WORKLOADS["summarisation"])))


def test_blend_resweep_long_prompts_raise_tpot():
    """Long prefills stall decodes: at the same concurrency a 30 % long-prompt blend has a
    higher TPOT than chat alone, beyond what the linear service-time blend assumes."""
    chat = sm.blend_sweep("illustrative_chat", [(1.0, WORKLOADS["chat"])], [16], seed=3)
    mix = sm.blend_sweep("illustrative_chat", [(0.7, WORKLOADS["chat"]), (0.3, WORKLOADS["summarisation"])],
                         [16], seed=3)
    assert mix.tpot_p50_s.iloc[0] > 1.3 * chat.tpot_p50_s.iloc[0]
    assert mix.prefill_share.iloc[0] > chat.prefill_share.iloc[0]
    assert mix.workload.iloc[0].startswith("70% chat + 30% summarisation")
    with pytest.raises(ValueError, match="unknown sample sweep"):
        sm.blend_sweep("nope", [(1.0, WORKLOADS["chat"])])


def test_chunked_prefill_step_and_validation():
    d = Deployment(LLMS["Llama-3.1-8B"], GPUS["A100-SXM-80GB"], chunked_prefill=2048)
    # a step with no decodes is a prefill step; a step with no prompt tokens is a decode step
    assert d.mixed_step_time(0, 2000, 0.0) == pytest.approx(float(d.prefill_time(2000)))
    assert d.mixed_step_time(8, 0, 12_000.0) == pytest.approx(float(d.decode_step_time(8, 12_000.0)))
    # compute-bound when the chunk is large: time grows with the chunk
    assert d.mixed_step_time(8, 2000, 12_000.0) > d.mixed_step_time(8, 500, 12_000.0)
    with pytest.raises(ValueError, match="chunked_prefill"):
        Deployment(LLMS["Llama-3.1-8B"], GPUS["A100-SXM-80GB"], chunked_prefill=128)


def test_chunked_prefill_trades_ttft_for_tpot():
    """Chunking lets decodes advance while long prompts prefill (lower TPOT) but a prompt now
    waits for its chunks (higher TTFT); Little's law still holds."""
    import dataclasses

    spec = SAMPLE_SPECS["illustrative_chat"]
    mix = sm.MixedWorkload("70/30", ((0.7, WORKLOADS["chat"]), (0.3, WORKLOADS["summarisation"])))
    rows = {}
    for chunk in (0, 512):
        dep = dataclasses.replace(spec.deployment, chunked_prefill=chunk)
        rows[chunk] = simulate_level(dep, mix, 16, 200, np.random.default_rng(11))
    assert rows[512]["tpot_p50_s"] < 0.95 * rows[0]["tpot_p50_s"]
    assert rows[512]["ttft_p50_s"] > 1.2 * rows[0]["ttft_p50_s"]
    for r in rows.values():
        client = 0.008 * np.exp(0.25**2 / 2)
        assert r["request_throughput_rps"] * (r["e2e_mean_s"] - client) == pytest.approx(16, rel=0.08)
