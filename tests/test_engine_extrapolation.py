"""The engine model past its measured points (issue 31): tangent, physical slope floor, refusal,
the served floor on capacity, slots read off the data, closed-loop queueing inside the engine."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from capbook.engine.stepmodel import EngineModel, ExtrapolationError, StepCost, fit_engine
from capbook.engine.hardware import hardware_for
from capbook.engine.predict import predict
from capbook.engine.servingmodel import GPUS, LLMS, WORKLOADS, Deployment, generate_sweep
from capbook.sweeps.sweep import Sweep

SHARED = Path(os.environ.get("CAPBOOK_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SGLANG = SHARED / "sweeps" / "sglang" / "datacrunch-h200" / "sglang" / "outputs"


def test_tangent_past_the_fitted_tokens_by_hand():
    st = StepCost(0.01, 2e-5, 1e-8, fit_tokens=500.0)
    # inside: the polynomial
    assert float(st(300)) == pytest.approx(0.01 + 2e-5 * 300 + 1e-8 * 300 ** 2)
    # past it: value at 500 plus the slope there (c + 2 c2 k) times the distance
    at500 = 0.01 + 2e-5 * 500 + 1e-8 * 500 ** 2
    assert float(st(2000)) == pytest.approx(at500 + (2e-5 + 2e-8 * 500) * 1500)
    assert float(st(2000)) < 0.01 + 2e-5 * 2000 + 1e-8 * 2000 ** 2   # below the quadratic


def test_bend_adds_slope_past_its_start_and_pieces_agree():
    st = StepCost(0.01, 2e-5, 0.0, bend_tokens=400.0, bend_s=3e-5)
    assert float(st(400)) == pytest.approx(0.01 + 2e-5 * 400)
    assert float(st(1000)) == pytest.approx(0.01 + 2e-5 * 1000 + 3e-5 * 600)
    for start, t0, c, c2 in st.pieces():
        k = start + 50
        assert float(st(k)) == pytest.approx(t0 + c * k + c2 * k * k)


def _light_sweep(levels=(1, 2), name="light"):
    """A modelled closed-loop sweep of Llama-3.1-8B on an H100, only its lightest levels."""
    dep = Deployment(LLMS["Llama-3.1-8B"], GPUS["H100-SXM-80GB"], chunked_prefill=2048)
    wl = WORKLOADS["chat"] if "chat" in WORKLOADS else list(WORKLOADS.values())[0]
    df = generate_sweep(dep, wl, list(levels), seed=3, requests_per_level=300)
    return df


def test_refused_without_hardware_facts_and_answered_with_them():
    df = _light_sweep()
    bare = Sweep.from_frame(df.drop(columns=["model", "gpu", "params_b"], errors="ignore"), name="bare")
    m = fit_engine(bare)
    assert not m.bounded
    lim = m.limit_rps()
    assert lim is not None and lim > 0
    # at the limit the mean work per step is EXTRAPOLATION_LIMIT x the most measured (the identity
    # k = λ t(k) (L - 1 + P), solved by hand here)
    w = m.output_tokens - 1 + m.prompt_tokens
    k = EngineModel.EXTRAPOLATION_LIMIT * m.k_seen
    assert lim == pytest.approx(k / (float(m.step(k)) * w), rel=1e-9)
    with pytest.raises(ExtrapolationError, match="--gpu"):
        m.saturation_rps()
    with pytest.raises(ExtrapolationError, match=r"cannot predict past"):
        predict(bare, 1.5 * lim, models=("simulation",))
    p = predict(bare, 0.5 * lim, models=("simulation",), requests=800)
    assert p.primary.stable and math.isnan(p.primary.saturation_rps)
    assert any("saturation not predicted" in n for n in p.notes)
    # the same points with the hardware named: a number, bounded by the physics
    hw = hardware_for(bare, model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", tensor_parallel=1)
    mh = fit_engine(bare, hardware=hw)
    assert mh.bounded and mh.limit_rps() is None
    assert math.isfinite(mh.saturation_rps())


def test_slope_floor_is_the_flops_of_a_token_at_the_dense_peak():
    import dataclasses

    from capbook.engine.stepmodel import _bend_step

    sw = Sweep.from_frame(_light_sweep(), name="light")
    hw = hardware_for(sw, model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", tensor_parallel=1)
    m = fit_engine(sw, hardware=hw)
    # a sweep of memory-bound steps: 5 ms plus 0.1 µs per token, measured up to 100 tokens a step
    L, P = m.output_tokens, m.prompt_tokens
    w = L - 1 + P
    a_c = 2 * 8.03e9 / 989e12                          # a token's FLOPs at the H100's dense BF16 peak, by hand
    a_m = (L - 1) / w * (P + L / 2) * (2 * 32 * 8 * 128 * 2) / 3.35e12   # KV reads per token of work
    assert a_c > a_m
    knee = 8.03e9 * 2 / 3.35e12 / (a_c - a_m)         # where FLOPs overtake the weights' read
    # prefix caching recorded off: every prompt token is computed, the floor is a whole token's FLOPs
    m1 = dataclasses.replace(m, step=StepCost(0.005, 1e-7), notes=[])
    _bend_step(m1, hw, 100.0, prefix_caching=False)
    assert m1.step.bend_s == pytest.approx(a_c - 1e-7, rel=1e-6)
    assert m1.step.bend_tokens == pytest.approx(max(100.0, knee), rel=1e-6)
    assert "compute bound" in m1.notes[-1]
    # prefix caching possibly on: only the decoded share is sure to be computed
    m2 = dataclasses.replace(m, step=StepCost(0.005, 1e-7), notes=[])
    _bend_step(m2, hw, 100.0, prefix_caching=None)
    a_cd = a_c * (L - 1) / w
    if a_cd > a_m:
        assert m2.step.bend_s == pytest.approx(a_cd - 1e-7, rel=1e-6)
    else:
        assert m2.step.bend_s == 0 and "memory bound" in m2.notes[-1]
    # a fitted slope steeper than the floor stands
    m3 = dataclasses.replace(m, step=StepCost(0.005, 1e-3), notes=[])
    _bend_step(m3, hw, 100.0, prefix_caching=False)
    assert m3.step.bend_s == 0 and "stands" in m3.notes[-1]


def test_capacity_never_below_what_was_served():
    df = _light_sweep(levels=(1, 2, 4, 8, 16, 32, 64, 128))
    sw = Sweep.from_frame(df, name="full")
    m = fit_engine(sw)
    served = float(np.nanmax(np.r_[sw.table["request_throughput_rps"],
                                   sw.saturated["request_throughput_rps"] if sw.saturated is not None else []]))
    assert m.saturation_rps() >= served * (1 - 1e-12)
    # the floor was measured with the sweep's lengths: requests twice as long are not held to it
    import dataclasses

    longer = dataclasses.replace(m, output_tokens=2 * m.output_tokens, output_quantiles=None, notes=[])
    longer.__dict__.pop("_cache", None)
    assert longer.saturation_rps() == longer.simulated_saturation_rps()


def test_closed_loop_plateau_sets_the_slots_and_the_queue_is_not_overhead():
    # an engine that admits 32 sequences, driven by up to 128 clients; the sweep does not record the limit
    dep = Deployment(LLMS["Llama-3.1-8B"], GPUS["L4"], max_num_seqs=32, chunked_prefill=512)
    df = generate_sweep(dep, list(WORKLOADS.values())[0], [1, 2, 4, 8, 16, 32, 64, 128], seed=1,
                        requests_per_level=400)
    df = df.drop(columns=["max_num_seqs"], errors="ignore")
    sw = Sweep.from_frame(df, name="capped")
    m = fit_engine(sw)
    # the modelled engine's KV cache holds about 20 of these sequences (below its 32): the plateau shows it
    kv_bound = dep.kv_capacity_tokens / (m.prompt_tokens + m.output_tokens)
    assert m.slots <= 32 and abs(m.slots - kv_bound) <= 0.35 * kv_bound
    assert "plateau" in m.limits.sources["max_num_seqs"]
    ttft128 = float(df.loc[df["concurrency"] == 128, "ttft_p50_s"].iloc[0])
    assert m.overhead_median_s < 0.05 * ttft128      # the wait at 128 clients is queueing, not the client


@pytest.mark.skipif(not SGLANG.is_dir(), reason="../shared SGLang sweeps not present")
def test_sglang_saturated_levels_raise_the_default_slots():
    from capbook.sweeps.importers import read_sweep

    sw = read_sweep(SGLANG, where={"params_b": "70", "workload": "random 1024/1024"}, load="rate")
    m = fit_engine(sw)
    # the 16 req/s level served 8.35 req/s with a mean TPOT near 0.18 s and ~513 output tokens: about
    # 8.35 × 512 × 0.18 ≈ 770 sequences decoding at once, far past vLLM's 256
    assert m.slots > 600
    assert m.saturation_rps() >= 8.779 - 1e-9            # never below the served 8.78 req/s
    assert m.simulated_saturation_rps() == pytest.approx(8.56, rel=0.10)   # the plateau 8.35–8.78
    # named hardware: SGLang's own default (its KV pool, 1.1 M tokens here) would admit ~1,480; the
    # saturated levels, requests queued, show ~770 decoding: SGLang admits by the KV it expects to need
    hw = hardware_for(sw, model="llama-3.3-70b", gpu="H200", tensor_parallel=4)
    mh = fit_engine(sw, hardware=hw)
    assert 700 < mh.slots < 800 and "saturated levels" in mh.limits.sources["max_num_seqs"]
    assert mh.simulated_saturation_rps() == pytest.approx(8.56, rel=0.10)
    p = predict(sw, 2.0, models=("simulation",), requests=800, engine=mh)
    said = any(n.startswith("capacity: the simulated engine saturates") for n in p.notes)
    assert said == (mh.simulated_saturation_rps() < mh.served_rps)   # the floor is said whenever it binds
    sw405 = read_sweep(SGLANG, where={"params_b": "405", "workload": "random 1024/1024"}, load="rate")
    m405 = fit_engine(sw405)
    assert m405.saturation_rps() >= 3.584
