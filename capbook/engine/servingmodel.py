"""A small physical model of one LLM-serving replica, used to generate the sample sweeps.

The book's sample concurrency sweeps (``data/sweeps/*.csv``) are **modelled, not measured**.
They come from this module: a closed-loop load generator (``n`` clients, each sending its next
request the moment the previous one finishes) driving a continuous-batching engine whose step
times follow the physics of serving:

* **Decode is memory-bandwidth bound.** Every decode step reads the weights once and the KV
  cache of every running sequence once, so

  .. math:: t_\\text{step}(b) = t_0 + \\frac{W/\\text{TP} + \\sum_i c_i \\, k / \\text{TP}}
            {\\eta_\\text{bw} B} + 2 L \\, t_\\text{ar} [\\text{TP} > 1]

  with ``W`` the weight bytes, ``c_i`` the context length of running sequence ``i``, ``k`` the
  KV bytes per token, ``B`` the HBM bandwidth of one GPU, ``eta_bw`` the achieved fraction of it,
  ``t_0`` a fixed per-step overhead (scheduling, sampling) and ``t_ar`` the latency of one
  tensor-parallel all-reduce (two per layer).
* **Prefill is compute bound.** A prompt of ``P`` tokens costs ``2 N P`` floating-point
  operations (``N`` parameters), run at a fraction ``eta_mfu`` of the GPUs' dense BF16 peak; it
  never runs faster than one read of the weights.
* **Prefill stalls decode.** When new prompts wait, the engine runs a prefill step (up to a
  token budget) before the next decode step, as vLLM does without chunked prefill: every running
  stream pauses for it. This is what makes TPOT rise with concurrency even when the decode step
  itself barely grows.
* **KV memory bounds admission.** A request is admitted only if its prompt plus its full output
  fit in the KV-cache memory left after the weights; otherwise it waits (and its TTFT grows).
* **Noise.** Each step time is multiplied by log-normal noise and, rarely, delayed by a
  host-side hiccup; each measured TTFT gets a client/network overhead. Percentiles of TTFT and
  TPOT are taken over the measured requests, as a load generator does.

Everything is seeded (``numpy.random.Generator``); the same seed gives the same table.
The hardware and model figures are public datasheet and model-card values, listed in
:data:`GPUS` and :data:`LLMS` and cited in ``data/README.md``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from capbook.engine import hardware as _hw
from capbook.engine.hardware import GPU, GPUS  # noqa: F401 - the datasheet figures behind the sample sweeps
from capbook.engine.loadqueue import kv_bytes_per_token
from capbook.validation import array, choice, integer, probability

__all__ = [
    "GPU",
    "Model",
    "Deployment",
    "Workload",
    "MixedWorkload",
    "GPUS",
    "LLMS",
    "WORKLOADS",
    "simulate_level",
    "generate_sweep",
    "stalled_tpot",
    "SweepSpec",
    "SAMPLE_SPECS",
    "LEVELS",
    "calibrate",
    "build_sample_sweep",
    "sample_sweep_csv",
    "sample_scales",
    "blend_sweep",
    "default_requests",
    "ILLUSTRATIVE_TARGETS",
]


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer, from its model card / ``config.json``.

    Attributes
    ----------
    name : str
    params_b : float
        Parameters, billions.
    layers, kv_heads, head_dim : int
        Architecture figures that set the KV cache size.
    """

    name: str
    params_b: float
    layers: int
    kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token of context (keys and values, all layers)."""
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, kv_dtype_bytes)


def _llm(name: str, key: str, params_b: float | None = None) -> Model:
    """A model of :data:`capbook.engine.hardware.ARCHITECTURES` under the name the sample sweeps use."""
    m = _hw.ARCHITECTURES[key]
    return Model(name, m.params_b if params_b is None else params_b, m.layers, m.kv_heads, m.head_dim)


#: Model-card figures, from :data:`capbook.engine.hardware.ARCHITECTURES`. Cited in data/README.md.
LLMS: dict[str, Model] = {
    "Llama-3.1-8B": _llm("Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
    "Llama-3.1-70B": _llm("Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct"),
    "Llama-3.2-3B": _llm("Llama-3.2-3B", "meta-llama/Llama-3.2-3B-Instruct"),
    # Used only for the calibration check against a measured Gemma 12B report, which was run
    # with the model card's rounded 12B parameters (the table has config.json's 12.2B).
    "Gemma-12B": _llm("Gemma-12B", "google/gemma-3-12b-it", params_b=12.0),
}

#: The weight precisions the physical model takes: bytes per parameter from the one table
#: (:func:`capbook.engine.hardware.dtype_bytes`).
_PRECISIONS = ("bf16", "fp16", "fp8", "int4")


@dataclass(frozen=True)
class Deployment:
    """A model served on ``tensor_parallel`` GPUs by a continuous-batching engine.

    Attributes
    ----------
    model : Model
    gpu : GPU
    tensor_parallel : int
        GPUs per replica.
    precision : str
        Weight precision: ``"bf16"``, ``"fp16"``, ``"fp8"`` or ``"int4"``.
    bw_efficiency : float
        Achieved fraction of peak HBM bandwidth in a decode step.
    prefill_mfu : float
        Achieved fraction of peak dense BF16 FLOP/s in a prefill step.
    step_overhead_s : float
        Fixed time per engine step (scheduler, sampling, kernel launches), seconds.
    allreduce_s : float
        Latency of one tensor-parallel all-reduce, seconds (two per layer per step).
    gpu_memory_utilization : float
        Share of GPU memory the engine may use for weights plus KV cache.
    max_num_seqs : int
        Most sequences decoded together.
    max_batched_tokens : int
        Prompt-token budget of one prefill step (a longer single prompt still runs alone).
    chunked_prefill : int
        0 (default): a prefill step runs alone and stalls every decode. N > max_num_seqs:
        chunked prefill with a token budget of N per step: every step decodes one token for
        each running sequence and fills the rest of the budget with prompt chunks, so
        decodes keep advancing while long prompts are prefilled (vLLM's chunked prefill).
    step_noise : float
        Log-normal sigma of the multiplicative noise on every step time.
    hiccup_prob, hiccup_s : float
        Probability per step of a host-side hiccup, and its extra duration in seconds.
    client_overhead_s : float
        Mean client + network overhead added to each measured TTFT, seconds.
    engine : str
        Label written into the sweep's ``engine`` column.
    """

    model: Model
    gpu: GPU
    tensor_parallel: int = 1
    precision: str = "bf16"
    bw_efficiency: float = 0.80
    prefill_mfu: float = 0.45
    step_overhead_s: float = 0.0025
    allreduce_s: float = 45e-6
    gpu_memory_utilization: float = 0.90
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill: int = 0
    step_noise: float = 0.03
    hiccup_prob: float = 0.002
    hiccup_s: float = 0.030
    client_overhead_s: float = 0.008
    engine: str = "modelled continuous batching (vLLM-like)"

    def __post_init__(self) -> None:
        choice(self.precision, "precision", sorted(_PRECISIONS))
        integer(self.tensor_parallel, "tensor_parallel", minimum=1)
        for name in ("bw_efficiency", "prefill_mfu", "gpu_memory_utilization"):
            probability(getattr(self, name), name, hi_open=False)
        if self.chunked_prefill and self.chunked_prefill <= self.max_num_seqs:
            raise ValueError(
                f"chunked_prefill={self.chunked_prefill!r} must be 0 (off) or more than "
                f"max_num_seqs={self.max_num_seqs} (the decode tokens of a full batch)"
            )
        if self.kv_capacity_tokens <= 0:
            raise ValueError(
                f"{self.model.name} in {self.precision} does not fit on {self.tensor_parallel} x "
                f"{self.gpu.name} with gpu_memory_utilization={self.gpu_memory_utilization}"
            )

    # -- sizes -------------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> float:
        """Weight bytes of the whole replica."""
        return self.model.params_b * 1e9 * _hw.dtype_bytes(self.precision)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token of context (BF16 cache)."""
        return self.model.kv_bytes_per_token(2.0)

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of context the KV cache holds across the replica."""
        free = (
            self.gpu.memory_gb * 1e9 * self.gpu_memory_utilization * self.tensor_parallel
            - self.weight_bytes * 1.05  # activations and buffers
        )
        return int(free // self.kv_bytes_per_token)

    # -- step times (noise-free) --------------------------------------------------------------
    def decode_step_time(self, batch, context_tokens):
        """Noise-free time of one decode step, seconds.

        Parameters
        ----------
        batch : int or array_like
            Running sequences (used only to decide whether the step is empty).
        context_tokens : float or array_like
            Total context tokens of all running sequences (whose KV cache the step reads).
        """
        bw = self.gpu.bandwidth_tbs * 1e12 * self.bw_efficiency
        tp = self.tensor_parallel
        comm = 2 * self.model.layers * self.allreduce_s if tp > 1 else 0.0
        mem = (self.weight_bytes + np.asarray(context_tokens, float) * self.kv_bytes_per_token) / tp
        return self.step_overhead_s + mem / bw + comm + 0.0 * np.asarray(batch, float)

    def mixed_step_time(self, batch: int, prompt_tokens: int, context_tokens: float,
                        prefill_scale: float = 1.0, decode_scale: float = 1.0) -> float:
        """Noise-free time of one chunked-prefill step, seconds.

        The step decodes ``batch`` tokens and prefills ``prompt_tokens``; it is bound by the
        larger of its compute (``2 N (batch + prompt_tokens)`` FLOPs) and its memory traffic
        (weights plus ``context_tokens`` of KV cache). With ``prompt_tokens = 0`` it is a
        decode step; with ``batch = 0`` a prefill step.
        """
        comm = 2 * self.model.layers * self.allreduce_s if self.tensor_parallel > 1 else 0.0
        base = self.step_overhead_s + comm
        compute = 2.0 * self.model.params_b * 1e9 * (batch + prompt_tokens) / (
            self.gpu.tflops['bf16'] * 1e12 * self.prefill_mfu * self.tensor_parallel)
        mem = (self.weight_bytes + context_tokens * self.kv_bytes_per_token) / self.tensor_parallel / (
            self.gpu.bandwidth_tbs * 1e12 * self.bw_efficiency)
        return max((base + compute) * prefill_scale, (base + mem) * decode_scale)

    def prefill_time(self, prompt_tokens):
        """Noise-free time of a prefill step over ``prompt_tokens`` tokens in total, seconds."""
        tokens = np.asarray(prompt_tokens, float)
        flops = 2.0 * self.model.params_b * 1e9 * tokens
        peak = self.gpu.tflops['bf16'] * 1e12 * self.prefill_mfu * self.tensor_parallel
        compute = flops / peak
        weights = self.weight_bytes / self.tensor_parallel / (
            self.gpu.bandwidth_tbs * 1e12 * self.bw_efficiency
        )
        comm = 2 * self.model.layers * self.allreduce_s if self.tensor_parallel > 1 else 0.0
        return self.step_overhead_s + np.maximum(compute, weights) + comm


@dataclass(frozen=True)
class Workload:
    """Request lengths of a workload: uniform within ``±spread`` of the means.

    Attributes
    ----------
    name : str
    input_tokens, output_tokens : int
        Mean prompt and output lengths, tokens.
    spread : float
        Relative half-width of the uniform length distribution (0.1 = ±10 %).
    """

    name: str
    input_tokens: int
    output_tokens: int
    spread: float = 0.10

    def sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``size`` (input, output) length pairs, tokens (integers, output >= 2)."""
        lo, hi = 1 - self.spread, 1 + self.spread
        inp = np.rint(self.input_tokens * rng.uniform(lo, hi, size)).astype(np.int64)
        out = np.rint(self.output_tokens * rng.uniform(lo, hi, size)).astype(np.int64)
        return np.maximum(inp, 1), np.maximum(out, 2)


@dataclass(frozen=True)
class MixedWorkload:
    """A blend of workloads: each request belongs to class ``i`` with probability ``share_i``.

    Attributes
    ----------
    name : str
    classes : tuple of (share, Workload)
        Shares sum to 1.
    """

    name: str
    classes: tuple

    def __post_init__(self) -> None:
        shares = np.array([c[0] for c in self.classes], float)
        if len(shares) == 0 or np.any(shares < 0) or not np.isclose(shares.sum(), 1.0, atol=1e-9):
            raise ValueError(f"MixedWorkload {self.name!r}: shares must be >= 0 and sum to 1")

    @property
    def input_tokens(self) -> float:
        """Mean prompt length of the blend, tokens."""
        return float(sum(p * w.input_tokens for p, w in self.classes))

    @property
    def output_tokens(self) -> float:
        """Mean output length of the blend, tokens."""
        return float(sum(p * w.output_tokens for p, w in self.classes))

    def sample(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``size`` (input, output) length pairs, tokens, class by class."""
        shares = np.array([c[0] for c in self.classes], float)
        which = rng.choice(len(shares), size=size, p=shares / shares.sum())
        inp = np.empty(size, np.int64)
        out = np.empty(size, np.int64)
        for i, (_, w) in enumerate(self.classes):
            sel = which == i
            a, b = w.sample(rng, int(sel.sum()))
            inp[sel], out[sel] = a, b
        return inp, out


WORKLOADS: dict[str, Workload] = {
    "chat": Workload("chat", 1500, 300),
    "summarisation": Workload("summarisation", 8000, 200),
    "retrieval": Workload("retrieval", 4000, 250),
}


def _percentiles(x: np.ndarray) -> tuple[float, float, float]:
    p = np.percentile(x, [50, 95, 99])
    return float(p[0]), float(p[1]), float(p[2])


def simulate_level(
    dep: Deployment,
    workload: Workload,
    concurrency: int,
    num_requests: int,
    rng: np.random.Generator,
    *,
    decode_scale: float = 1.0,
    prefill_scale: float = 1.0,
) -> dict:
    """Run one closed-loop sweep point and summarise it as one sweep-table row.

    ``concurrency`` clients each keep one request in flight. The first ``2 × concurrency``
    requests (the start-up burst and one turnover) are not measured; the next ``num_requests`` are, and clients
    keep sending until all of those finish, so every measured request sees steady load.

    Parameters
    ----------
    dep : Deployment
    workload : Workload
    concurrency : int
        Clients (requests in flight), >= 1.
    num_requests : int
        Measured requests, >= 2.
    rng : numpy.random.Generator
    decode_scale, prefill_scale : float
        Multipliers on decode and prefill step times (used to calibrate a sweep to a target).

    Returns
    -------
    dict
        ``ttft_p50_s`` … ``tpot_p99_s`` (seconds), ``request_throughput_rps``,
        ``output_throughput_tps``, ``mean_input_tokens``, ``mean_output_tokens``,
        ``num_requests`` and diagnostics (``prefill_share``, ``kv_peak_frac``,
        ``mean_batch``).
    """
    n = integer(concurrency, "concurrency", minimum=1)
    num_requests = integer(num_requests, "num_requests", minimum=2)
    warm = 2 * n  # start-up burst plus one turnover, not measured
    total_cap = warm + int(num_requests) + 4 * n + 16  # upper bound on requests ever issued
    inp, out = workload.sample(rng, total_cap)
    kv_cap = dep.kv_capacity_tokens
    if (inp + out).max() > kv_cap:
        raise ValueError(
            f"a request of {int((inp + out).max())} tokens does not fit the KV cache "
            f"({kv_cap} tokens) of {dep.model.name} on {dep.tensor_parallel} x {dep.gpu.name}"
        )

    arrival = np.full(total_cap, np.nan)
    first = np.full(total_cap, np.nan)
    finish = np.full(total_cap, np.nan)
    measured_lo, measured_hi = warm, warm + int(num_requests)

    t = 0.0
    issued = 0
    waiting: deque = deque()
    inp_l, out_l = inp.tolist(), out.tolist()
    prefill_cache: dict = {}
    # Clients ramp up over about one service time, as load generators do, so that the
    # start-up burst does not leave the sweep point in lock-step waves.
    ramp = float(dep.prefill_time(workload.input_tokens)) * prefill_scale + workload.output_tokens * float(
        dep.decode_step_time(n, n * (workload.input_tokens + workload.output_tokens / 2))
    ) * decode_scale
    pending = list(np.sort(rng.uniform(0.0, ramp, n))) if n > 1 else [0.0]
    pending[0] = 0.0
    pending_ids = deque()
    for a in pending:
        arrival[issued] = a
        pending_ids.append(issued)
        issued += 1

    run_id = np.empty(0, np.int64)
    run_ctx = np.empty(0, np.int64)
    run_left = np.empty(0, np.int64)
    kv_used = 0
    kv_peak = 0
    prefill_time_total = 0.0
    batch_time = 0.0  # integral of batch size over decode time
    decode_time_total = 0.0
    done_measured = 0

    sigma = dep.step_noise
    chunk = int(dep.chunked_prefill)
    pf_ids: deque = deque()  # chunked prefill: admitted prompts part-way through prefill
    pf_left: deque = deque()
    while done_measured < num_requests:
        while pending_ids and arrival[pending_ids[0]] <= t:
            waiting.append(pending_ids.popleft())
        if not waiting and len(run_id) == 0 and not pf_ids:
            t = float(arrival[pending_ids[0]])
            continue
        if chunk:
            # chunked prefill: admit prompts (reserving KV), then run one mixed step while any
            # prompt is part-way through its prefill
            while waiting and len(run_id) + len(pf_ids) < dep.max_num_seqs:
                r = waiting[0]
                need = inp_l[r] + out_l[r]
                if kv_used + need > kv_cap:
                    break
                waiting.popleft()
                pf_ids.append(r)
                pf_left.append(inp_l[r])
                kv_used += need
            kv_peak = max(kv_peak, kv_used)
            if pf_ids:
                b = len(run_id)
                budget, c, done_pf = chunk - b, 0, []
                while pf_ids and c < budget:
                    take = min(pf_left[0], budget - c)
                    c += take
                    pf_left[0] -= take
                    if pf_left[0] == 0:
                        done_pf.append(pf_ids.popleft())
                        pf_left.popleft()
                dt = dep.mixed_step_time(b, c, float(run_ctx.sum()), prefill_scale, decode_scale)
                dt *= float(np.exp(sigma * rng.standard_normal()))
                dt += dep.hiccup_s * float(rng.random() < dep.hiccup_prob)
                t += dt
                prefill_time_total += dt
                if b:
                    decode_time_total += dt
                    batch_time += b * dt
                    run_ctx = run_ctx + 1
                    run_left = run_left - 1
                    fin = run_left == 0
                    if fin.any():
                        fin_ids = run_id[fin]
                        finish[fin_ids] = t
                        kv_used -= int((inp[fin_ids] + out[fin_ids]).sum())
                        done_measured += int(((fin_ids >= measured_lo) & (fin_ids < measured_hi)).sum())
                        run_id, run_ctx, run_left = run_id[~fin], run_ctx[~fin], run_left[~fin]
                        nf = len(fin_ids)
                        if issued + nf > total_cap:  # pragma: no cover - bound is generous
                            raise RuntimeError("request budget exhausted")
                        arrival[issued:issued + nf] = t
                        waiting.extend(range(issued, issued + nf))
                        issued += nf
                if done_pf:
                    ids = np.asarray(done_pf, np.int64)
                    first[ids] = t
                    run_id = np.concatenate([run_id, ids])
                    run_ctx = np.concatenate([run_ctx, inp[ids] + 1])
                    run_left = np.concatenate([run_left, out[ids] - 1])
                continue
        # 1. prefill step when prompts wait and fit
        admit: list[int] = []
        tokens = 0
        room = dep.max_num_seqs - len(run_id)
        while waiting and len(admit) < room:
            r = waiting[0]
            need = inp_l[r] + out_l[r]
            if kv_used + need > kv_cap:
                break
            if admit and tokens + inp_l[r] > dep.max_batched_tokens:
                break
            waiting.popleft()
            admit.append(r)
            tokens += inp_l[r]
            kv_used += need
        if admit:
            pt = prefill_cache.get(tokens)
            if pt is None:
                pt = prefill_cache[tokens] = float(dep.prefill_time(tokens))
            dt = pt * prefill_scale
            dt *= float(np.exp(sigma * rng.standard_normal()))
            t += dt
            prefill_time_total += dt
            kv_peak = max(kv_peak, kv_used)
            ids = np.asarray(admit, np.int64)
            first[ids] = t
            run_id = np.concatenate([run_id, ids])
            run_ctx = np.concatenate([run_ctx, inp[ids] + 1])
            run_left = np.concatenate([run_left, out[ids] - 1])
            continue
        if len(run_id) == 0:  # pragma: no cover - cannot happen in a closed loop
            raise RuntimeError("engine idle with no waiting requests")
        # 2. decode steps until the next completion (the batch is constant until then)
        b = len(run_id)
        k = int(run_left.min())
        ctx0 = float(run_ctx.sum())
        ctx = ctx0 + b * np.arange(k)
        steps = dep.decode_step_time(b, ctx) * decode_scale
        steps = steps * np.exp(sigma * rng.standard_normal(k))
        steps = steps + dep.hiccup_s * (rng.random(k) < dep.hiccup_prob)
        if pending_ids:  # stop at the step during which the next ramp-up client arrives
            cum = np.cumsum(steps)
            j = int(np.searchsorted(cum, arrival[pending_ids[0]] - t)) + 1
            if j < k:
                k, steps = j, steps[:j]
        dt = float(steps.sum())
        t += dt
        decode_time_total += dt
        batch_time += b * dt
        run_ctx = run_ctx + k
        run_left = run_left - k
        fin = run_left == 0
        fin_ids = run_id[fin]
        finish[fin_ids] = t
        kv_used -= int((inp[fin_ids] + out[fin_ids]).sum())
        done_measured += int(((fin_ids >= measured_lo) & (fin_ids < measured_hi)).sum())
        run_id, run_ctx, run_left = run_id[~fin], run_ctx[~fin], run_left[~fin]
        nf = len(fin_ids)  # each finished client sends its next request at once
        if issued + nf > total_cap:  # pragma: no cover - bound is generous
            raise RuntimeError("request budget exhausted")
        arrival[issued:issued + nf] = t
        waiting.extend(range(issued, issued + nf))
        issued += nf

    m = slice(measured_lo, measured_hi)
    client = dep.client_overhead_s * rng.lognormal(0.0, 0.25, int(num_requests))
    ttft = first[m] - arrival[m] + client
    tpot = (finish[m] - first[m]) / (out[m] - 1)
    # Steady-state throughput over the window in which the measured requests were issued:
    # every completion in it triggers exactly one new arrival, so all clients stay busy.
    t_start, t_end = float(arrival[measured_lo]), float(arrival[measured_hi - 1])
    window = t_end - t_start
    done = finish[:issued]
    in_window = (done > t_start) & (done <= t_end)
    completions = int(in_window.sum())
    out_tokens = float(out[:issued][in_window].sum())
    tt = _percentiles(ttft)
    tp = _percentiles(tpot)
    return {
        "concurrency": n,
        "ttft_p50_s": tt[0],
        "ttft_p95_s": tt[1],
        "ttft_p99_s": tt[2],
        "tpot_p50_s": tp[0],
        "tpot_p95_s": tp[1],
        "tpot_p99_s": tp[2],
        "request_throughput_rps": completions / window,
        "output_throughput_tps": out_tokens / window,
        "mean_input_tokens": float(inp[m].mean()),
        "mean_output_tokens": float(out[m].mean()),
        "num_requests": int(num_requests),
        "ttft_mean_s": float(ttft.mean()),
        "e2e_mean_s": float((finish[m] - arrival[m] + client).mean()),
        "tpot_mean_s": float(tpot.mean()),
        "prefill_share": prefill_time_total / t,
        "mean_batch": batch_time / decode_time_total if decode_time_total else 0.0,
        "kv_peak_frac": kv_peak / kv_cap,
    }


def default_requests(concurrency: int) -> int:
    """Measured requests per sweep point: ``max(200, 8 × concurrency)``."""
    return max(200, 8 * int(concurrency))


def generate_sweep(
    dep: Deployment,
    workload: Workload,
    levels,
    *,
    seed: int,
    requests_per_level=None,
    decode_scale: float = 1.0,
    prefill_scale: float = 1.0,
) -> pd.DataFrame:
    """Simulate a concurrency sweep and return the sweep table (one row per level).

    Parameters
    ----------
    dep : Deployment
    workload : Workload
    levels : sequence of int
        Concurrency levels, strictly increasing.
    seed : int
        Seed; level ``i`` uses an independent stream spawned from it.
    requests_per_level : callable or int, optional
        Measured requests per level (default :func:`default_requests`).
    decode_scale, prefill_scale : float
        Calibration multipliers on step times (see :func:`simulate_level`).

    Returns
    -------
    pandas.DataFrame
        The sweep-table columns documented in ``data/README.md`` plus the configuration
        columns ``model, params_b, gpu, tensor_parallel, engine, precision, workload``.
    """
    levels = [int(x) for x in levels]
    if not levels or any(b <= a for a, b in zip(levels, levels[1:])):
        raise ValueError(f"levels={levels!r} must be a non-empty, strictly increasing sequence")
    if requests_per_level is None:
        requests_per_level = default_requests
    elif isinstance(requests_per_level, (int, np.integer)):
        fixed = int(requests_per_level)

        def requests_per_level(n):
            return fixed
    children = np.random.SeedSequence(seed).spawn(len(levels))
    rows = []
    for n, ss in zip(levels, children):
        rng = np.random.default_rng(ss)
        rows.append(
            simulate_level(dep, workload, n, requests_per_level(n), rng,
                           decode_scale=decode_scale, prefill_scale=prefill_scale)
        )
    df = pd.DataFrame(rows)
    df["model"] = dep.model.name
    df["params_b"] = dep.model.params_b
    df["gpu"] = dep.gpu.name
    df["tensor_parallel"] = dep.tensor_parallel
    df["engine"] = dep.engine
    df["precision"] = dep.precision
    df["workload"] = f"{workload.name} ({workload.input_tokens:g} in / {workload.output_tokens:g} out)"
    return df


def stalled_tpot(step_s, prefill_s, arrival_rps):
    """Mean TPOT of a stream when prefills of arriving prompts stall every decode step.

    A decode stream advances only while the engine is not prefilling. If prompts arrive at
    ``arrival_rps`` and each prefill takes ``prefill_s``, the engine spends a share
    ``u = arrival_rps × prefill_s`` of its time prefilling, so

    .. math:: \\text{TPOT} \\approx \\frac{t_\\text{step}}{1 - \\lambda t_\\text{prefill}}.

    Parameters
    ----------
    step_s : float or array_like
        Decode step time without stalls, seconds.
    prefill_s : float or array_like
        Prefill time of one prompt, seconds.
    arrival_rps : float or array_like
        Prompt arrival rate, requests per second.

    Returns
    -------
    numpy.ndarray or float
        TPOT, seconds; ``inf`` where the prefill share reaches 1 (the engine saturates).
    """
    step_s = array(step_s, "step_s", lo=0, lo_open=True)
    u = array(arrival_rps, "arrival_rps", lo=0) * array(prefill_s, "prefill_s", lo=0)
    with np.errstate(divide="ignore"):
        res = np.where(u < 1, step_s / np.where(u < 1, 1 - u, 1.0), np.inf)
    return res[()] if res.ndim == 0 else res




# -- the book's sample sweeps -------------------------------------------------------------------

#: Concurrency levels of the sample sweeps.
LEVELS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)

#: Targets the illustrative sweep is calibrated to (see :func:`calibrate`): a mean TPOT of
#: 40 ms at concurrency 32 (the mean, as Little's law uses it) and a derived prefill rate of
#: 5,996 tokens/s.
ILLUSTRATIVE_TARGETS = {"tpot_mean_s_at": (32, 0.040), "prefill_rate_tps": 5996.0}


@dataclass(frozen=True)
class SweepSpec:
    """Recipe of one sample sweep: a deployment, a workload, levels and a seed."""

    name: str
    deployment: Deployment
    workload: Workload
    levels: tuple
    seed: int
    description: str
    calibrate: bool = False


def _spec_list() -> list[SweepSpec]:
    m, g, w = LLMS, GPUS, WORKLOADS
    return [
        SweepSpec(
            "illustrative_chat",
            Deployment(m["Llama-3.1-8B"], g["A100-SXM-80GB"]),
            w["chat"], LEVELS[:9], 11,
            "The book's illustrative replica: an 8B-class model on one A100-80GB-class GPU, "
            "chat mix of 1,500 input / 300 output tokens, calibrated so that the mean TPOT is "
            "40 ms at concurrency 32 and prefill runs at about 6,000 tokens/s.",
            calibrate=True,
        ),
        SweepSpec(
            "llama8b_h100_chat",
            Deployment(m["Llama-3.1-8B"], g["H100-SXM-80GB"]),
            w["chat"], LEVELS, 21,
            "8B model, BF16, one H100 SXM, chat mix (1,500 in / 300 out).",
        ),
        SweepSpec(
            "llama8b_h100_summarisation",
            Deployment(m["Llama-3.1-8B"], g["H100-SXM-80GB"]),
            w["summarisation"], LEVELS[:9], 22,
            "8B model, BF16, one H100 SXM, long-prompt summarisation mix (8,000 in / 200 out); "
            "the KV cache fills near 50 sequences, so TTFT jumps at 64.",
        ),
        SweepSpec(
            "llama70b_h100_tp4_chat",
            Deployment(m["Llama-3.1-70B"], g["H100-SXM-80GB"], tensor_parallel=4),
            w["chat"], LEVELS, 31,
            "70B model, BF16, four H100 SXM with tensor parallelism 4, chat mix.",
        ),
        SweepSpec(
            "llama70b_h100_tp8_retrieval",
            Deployment(m["Llama-3.1-70B"], g["H100-SXM-80GB"], tensor_parallel=8),
            w["retrieval"], LEVELS, 32,
            "70B model, BF16, eight H100 SXM with tensor parallelism 8, retrieval mix "
            "(4,000 in / 250 out).",
        ),
        SweepSpec(
            "llama70b_h100_tp8_chat",
            Deployment(m["Llama-3.1-70B"], g["H100-SXM-80GB"], tensor_parallel=8),
            w["chat"], LEVELS, 33,
            "70B model, BF16, eight H100 SXM with tensor parallelism 8, chat mix: the TP 4 "
            "replica's workload on twice the GPUs, for the cost comparison.",
        ),
        SweepSpec(
            "llama8b_l4_chat",
            Deployment(m["Llama-3.1-8B"], g["L4"]),
            w["chat"], LEVELS[:6], 42,
            "8B model, BF16, one L4 (24 GB), chat mix: the cheap GPU of the cost comparison; "
            "its 300 GB/s stream the 16 GB of weights in about 67 ms a step, and the KV cache fills near "
            "20 sequences.",
        ),
        SweepSpec(
            "llama3b_l4_chat",
            Deployment(m["Llama-3.2-3B"], g["L4"]),
            w["chat"], LEVELS[:10], 41,
            "3B model, BF16, one L4 (24 GB), chat mix; the KV cache holds about 70 "
            "sequences, so requests queue for memory at 96.",
        ),
    ]


#: The book's sample sweeps by name (``data/sweeps/<name>.csv``).
SAMPLE_SPECS: dict[str, SweepSpec] = {s.name: s for s in _spec_list()}


def _solve(f, x0: float, target: float, what: str) -> float:
    """Solve f(x) = target for a locally linear, increasing f by a bracketed secant method."""
    lo, hi = x0 * 0.25, x0 * 4.0
    flo, fhi = f(lo) - target, f(hi) - target
    if flo > 0 or fhi < 0:
        raise ValueError(f"cannot calibrate {what}: target {target} outside [{flo + target}, {fhi + target}]")
    x = x0
    for _ in range(100):
        fx = f(x) - target
        if abs(fx) <= 1e-13 * abs(target):
            return x
        if fx < 0:
            lo, flo = x, fx
        else:
            hi, fhi = x, fx
        x_new = lo - flo * (hi - lo) / (fhi - flo)
        # fall back to bisection when the secant stalls at a bracket end
        if not lo < x_new < hi or min(x_new - lo, hi - x_new) < 1e-3 * (hi - lo):
            x_new = 0.5 * (lo + hi) if abs(hi - lo) > 1e-15 * x else x_new
        x = x_new
    fx = f(x) - target
    if abs(fx) > 1e-9 * abs(target):
        raise RuntimeError(f"calibration of {what} did not converge (error {fx})")
    return x


def calibrate(spec: SweepSpec) -> tuple[float, float]:
    """Solve the prefill and decode scales that make a sweep hit :data:`ILLUSTRATIVE_TARGETS`.

    The prefill scale sets ``mean_input_tokens / ttft_p50_s`` at concurrency 1 (where no other
    request interferes) to the target prefill rate; then the decode scale sets the mean TPOT at
    the target concurrency. Both solves reuse the random streams of the final sweep, so the
    calibrated sweep hits the targets exactly (to 1e-13 relative).

    Returns
    -------
    (prefill_scale, decode_scale) : tuple of float
    """
    levels = list(spec.levels)
    children = np.random.SeedSequence(spec.seed).spawn(len(levels))
    n_at, tpot_target = ILLUSTRATIVE_TARGETS["tpot_mean_s_at"]
    rate_target = ILLUSTRATIVE_TARGETS["prefill_rate_tps"]
    i1, i_at = levels.index(1), levels.index(n_at)

    def level(i, ps, ds):
        n = levels[i]
        return simulate_level(spec.deployment, spec.workload, n, default_requests(n),
                              np.random.default_rng(children[i]),
                              decode_scale=ds, prefill_scale=ps)

    def ttft1(ps):  # increasing in ps
        r = level(i1, ps, 1.0)
        return r["ttft_p50_s"] / r["mean_input_tokens"]

    ps = _solve(ttft1, 1.0, 1.0 / rate_target, "prefill_scale")
    ds = _solve(lambda d: level(i_at, ps, d)["tpot_mean_s"], 1.0, tpot_target, "decode_scale")
    return ps, ds


def build_sample_sweep(name: str) -> pd.DataFrame:
    """Generate one of the book's sample sweeps (deterministic; see :data:`SAMPLE_SPECS`)."""
    if name not in SAMPLE_SPECS:
        raise ValueError(f"unknown sample sweep {name!r}; choose one of {sorted(SAMPLE_SPECS)}")
    spec = SAMPLE_SPECS[name]
    ps, ds = calibrate(spec) if spec.calibrate else (1.0, 1.0)
    df = generate_sweep(spec.deployment, spec.workload, spec.levels, seed=spec.seed,
                        prefill_scale=ps, decode_scale=ds)
    df["sweep"] = name
    df["source"] = "modelled by capbook.engine.servingmodel (not measured)"
    return df


#: Float format of the committed CSVs (8 significant digits).
CSV_FLOAT_FORMAT = "%.8g"


def sample_sweep_csv(name: str) -> str:
    """The exact text of ``data/sweeps/<name>.csv`` as ``tools/make_sweeps.py`` writes it."""
    return build_sample_sweep(name).to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")


@lru_cache(maxsize=None)
def sample_scales(name: str) -> tuple[float, float]:
    """(prefill_scale, decode_scale) of a sample sweep: calibrated ones, or (1, 1)."""
    if name not in SAMPLE_SPECS:
        raise ValueError(f"unknown sample sweep {name!r}; choose one of {sorted(SAMPLE_SPECS)}")
    spec = SAMPLE_SPECS[name]
    return calibrate(spec) if spec.calibrate else (1.0, 1.0)


def blend_sweep(name: str, classes, levels=None, *, seed: int = 7, chunked_prefill: int = 0) -> pd.DataFrame:
    """Re-run a sample sweep's replica at a blended workload (a modelled "re-sweep").

    Parameters
    ----------
    name : str
        Sample sweep whose deployment (and calibration) to reuse, e.g. ``"illustrative_chat"``.
    classes : sequence of (share, Workload)
        The blend; shares sum to 1. A single class with share 1 re-runs that workload.
    levels : sequence of int, optional
        Concurrency levels (default: the sample sweep's own).
    seed : int
    chunked_prefill : int
        Token budget per step for chunked prefill (0: off, as in the sample sweeps).

    Returns
    -------
    pandas.DataFrame
        A sweep table (see :func:`generate_sweep`), modelled, not measured.
    """
    if name not in SAMPLE_SPECS:
        raise ValueError(f"unknown sample sweep {name!r}; choose one of {sorted(SAMPLE_SPECS)}")
    spec = SAMPLE_SPECS[name]
    classes = tuple((float(p), w) for p, w in classes if p > 0)
    if len(classes) == 1:
        work = classes[0][1]
    else:
        label = " + ".join(f"{p:.0%} {w.name}" for p, w in classes)
        work = MixedWorkload(label, classes)
    ps, ds = sample_scales(name)
    dep = replace(spec.deployment, chunked_prefill=int(chunked_prefill))
    df = generate_sweep(dep, work, spec.levels if levels is None else levels,
                        seed=seed, prefill_scale=ps, decode_scale=ds)
    df["source"] = "modelled by capbook.engine.servingmodel (not measured)"
    return df
