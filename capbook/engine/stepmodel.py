r"""A step-level model of one continuous-batching engine, fitted from a sweep and the engine's limits.

The load-dependent queue (:mod:`capbook.engine.loadqueue`) reads TPOT off the measured curve and cannot
go past the highest measured concurrency. A real engine is easier to describe one step at a
time, and the description extrapolates:

* **Step cost.** Every engine step (an iteration of the scheduler) takes

  .. math:: t_\text{step} = t_0 + c\,(d + p)

  seconds, with ``d`` the sequences decoded in the step (one token each) and ``p`` the prompt
  tokens prefilled in it. ``t_0`` is what a step costs however little it does (reading the
  weights once, scheduling, sampling); ``c`` is the cost of one more token of work. Both are
  fitted from the sweep by the step-time accounting identity: over one second the engine runs
  ``1 / TPOT`` steps and works ``λ (L − 1 + P)`` tokens (λ completions per second, ``L``
  output and ``P`` prompt tokens per request), so

  .. math:: \frac{1}{\mathrm{TPOT}} = \frac{1}{t_0} - \frac{c}{t_0}\,\lambda (L - 1 + P),

  a straight line in the measured points (open- or closed-loop; saturated points count too,
  because the identity holds with every slot busy). Prefix caching and speculative decoding
  are folded into ``c`` and ``t_0``: the sweep does not record the cache hit rate or the
  acceptance rate.
* **Scheduling.** Each step decodes every running sequence and fills the rest of the
  batched-token budget (``max_num_batched_tokens``) with waiting prompts, first come first
  served, up to ``max_num_seqs`` running: whole prompts only without chunked prefill, prompt
  chunks with it (vLLM's V1 engine, SGLang). vLLM's V0 engine without chunked prefill instead
  runs a separate prefill step whenever prompts wait, and every running stream pauses for it
  (``policy="separate"``).
* **KV-cache admission.** A prompt is admitted only while the KV cache holds it; a sequence
  whose next token does not fit preempts the most recently admitted one, which is recomputed
  later (vLLM's preemption by recomputation). The cache size is estimated from the model and
  GPU the sweep names (:func:`kv_cache_tokens`) or given.
* **Lengths.** Output lengths are drawn from the measured distribution (the output-token
  percentiles the load generator recorded, or the mean when it recorded none); prompt lengths
  from a log-normal through the recorded p50 and p99, or the mean.
* **Overhead.** What the client measures beyond the engine (HTTP, tokenisation, streaming) is
  fitted at the lightest load as a log-normal through the TTFT p50 and p99 there, less the
  engine's own prefill step.

:class:`EngineModel` holds the fit and simulates open-loop arrivals step by step
(:meth:`EngineModel.simulate`); :mod:`capbook.engine.predict` puts it beside M/M/c and the
load-dependent queue.

What it leaves out: step cost is linear in tokens (a real GPU turns compute-bound and steeper
past a few hundred tokens per step), speculative decoding's acceptance does not change with
the batch, and the client is unbounded (a load generator's in-flight cap is not modelled).
:meth:`EngineModel.simulate` runs one replica in the fleet simulator (:mod:`capbook.sim.fleetsim`),
which runs any number of them behind a router.
"""
from __future__ import annotations

import dataclasses
import math
import re
import weakref
from dataclasses import dataclass, field

import numpy as np

from capbook.engine.hardware import engine_defaults, find_gpu, find_model, GPU, Hardware, hardware_for
from capbook.sim.closedloop import simulate_closed
from capbook.sim.fleetsim import run_fleet
from capbook.sweeps.sweep import Sweep
from capbook.validation import choice, integer, nonnegative, positive, probability

__all__ = [
    "ExtrapolationError",
    "StepCost",
    "EngineLimits",
    "EngineModel",
    "EngineRun",
    "fit_engine", "fitted_engine",
    "fit_step_cost",
    "engine_limits",
    "kv_cache_tokens",
    "model_config",
    "gpu_memory_gb",
]

_Z99 = 2.3263478740408408  # standard normal 0.99 quantile

def model_config(name) -> tuple[float, int, int, int] | None:
    """Architecture of a named model: ``(params_b, layers, kv_heads, head_dim)``, or None.

    A thin reader of :data:`capbook.engine.hardware.ARCHITECTURES` (see :func:`capbook.engine.hardware.find_model`
    for the names it reads: ``meta-llama/Llama-3.1-8B-Instruct``, ``Meta-Llama-3-70B``,
    ``Qwen2.5-7B`` …). For multi-head latent attention (DeepSeek-V3) ``kv_heads × head_dim`` is
    half the latent width, so that ``2 × layers × kv_heads × head_dim`` is its KV values per token.
    """
    m = find_model(name)
    if m is None:
        return None
    if m.mla:
        return (m.params_b, m.layers, 1, (m.kv_lora_rank + (m.qk_rope_head_dim or 0)) // 2)
    return (m.params_b, m.layers, m.kv_heads, m.head_dim)


def gpu_memory_gb(name) -> float | None:
    """Memory capacity (GB as sold) of a GPU named as sweeps name it (``nvidia-h100-80gb``,
    ``H100 SXM``): the table's (:func:`capbook.engine.hardware.find_gpu`), else a size in the name."""
    g = find_gpu(name)
    if g is not None:
        return g.memory_gb
    m = re.search(r"(\d{2,3})\s*gb", name.lower()) if isinstance(name, str) else None
    return float(m.group(1)) if m else None


def kv_cache_tokens(model: str, gpu: str, *, tensor_parallel: int = 1,
                    gpu_memory_utilization: float = 0.9, precision: str | None = None,
                    kv_cache_dtype: str | None = None) -> int | None:
    """Tokens of context the engine's KV cache holds, estimated from model and GPU names.

    :meth:`capbook.engine.hardware.Hardware.kv_cache_tokens`: on each GPU, its memory times
    ``gpu_memory_utilization`` less an activation reserve of 5 % of the memory and its share of
    the weights (parameters × bytes per parameter), over the KV bytes a token takes on it. vLLM
    measures the activation peak at start-up instead; the estimate is within a few per cent for
    dense models. A GPU not in the table but with a size in its name (``XYZ-48GB``) is taken as
    that much GDDR. Returns None when the model or GPU is not recognised.
    """
    arch, dev = find_model(model), find_gpu(gpu)
    if dev is None and gpu_memory_gb(gpu) is not None:
        dev = GPU(str(gpu), gpu_memory_gb(gpu), math.nan, {"bf16": math.nan}, "the size in the name", hbm=False)
    if arch is None or dev is None:
        return None
    tp = integer(tensor_parallel, "tensor_parallel", minimum=1)
    gpu_memory_utilization = probability(gpu_memory_utilization, "gpu_memory_utilization", hi_open=False)
    kvd = str(kv_cache_dtype) if kv_cache_dtype is not None else "auto"
    return Hardware(arch, dev, tp, gpu_memory_utilization, None, str(precision) if precision else arch.dtype,
                    kvd).kv_cache_tokens()


@dataclass(frozen=True)
class StepCost:
    """Time of one engine step: ``t0_s + c_s × k + c2_s × k²`` seconds for ``k`` tokens of work.

    Attributes
    ----------
    t0_s : float
        Fixed cost of a step, seconds.
    c_s : float
        Cost of one token of work (a decoded sequence or a prefilled prompt token), seconds.
    c2_s : float
        Curvature, seconds per token squared (>= 0): a step turns compute bound as its token
        count grows, and each further token costs more. Zero when the sweep shows no bend.
    cp_s : float or None
        Cost of one prompt token when it was measured apart from decoding (a prefill benchmark,
        :meth:`capbook.sweeps.sweep.Sweep.set_prefill_rate`): a step then takes
        ``t0_s + c_s d + c2_s d² + cp_s p`` for ``d`` decoded sequences and ``p`` prompt
        tokens. None: prompt tokens cost what decode tokens cost (``k = d + p`` above).
    bend_tokens : float
        Work per step (tokens) past which the physical model bends the cost (inf: no bend): the
        larger of the most work per step the sweep measured and the roofline's knee, where
        the step's FLOPs overtake its HBM traffic (:meth:`capbook.engine.hardware.Hardware.step_time_floor`).
    bend_s : float
        Extra cost of each token of work past ``bend_tokens``, seconds: the physical model's
        compute time per token less its memory time per token (the slope the step gains once it
        is compute bound), 0 without hardware facts.
    """

    t0_s: float
    c_s: float
    c2_s: float = 0.0
    cp_s: float | None = None
    bend_tokens: float = math.inf
    bend_s: float = 0.0
    fit_tokens: float = math.inf

    def _quad(self, k):
        """The fitted polynomial up to ``fit_tokens``, its tangent past it."""
        kf = self.fit_tokens
        if self.c2_s <= 0 or not math.isfinite(kf):
            return self.c_s * k + self.c2_s * k * k
        ke = np.minimum(k, kf)
        return self.c_s * ke + self.c2_s * ke * ke + (self.c_s + 2 * self.c2_s * kf) * np.maximum(k - kf, 0.0)

    def _bend(self, k):
        if self.bend_s <= 0 or not math.isfinite(self.bend_tokens):
            return 0.0
        return self.bend_s * np.maximum(k - self.bend_tokens, 0.0)

    def __call__(self, tokens):
        """Step time in seconds for ``tokens`` tokens of work (array allowed)."""
        k = np.asarray(tokens, dtype=float)
        return self.t0_s + self._quad(k) + self._bend(k)

    def step(self, decode, prompt):
        """Step time in seconds of a step decoding ``decode`` sequences and prefilling ``prompt``
        tokens (arrays allowed)."""
        d = np.asarray(decode, dtype=float)
        p = np.asarray(prompt, dtype=float)
        if self.cp_s is None:
            return self(d + p)
        return self.t0_s + self._quad(d) + self.cp_s * p + self._bend(d + p)

    def pieces(self):
        """The cost as ``(from_tokens, t0, c, c2)`` pieces in increasing order of tokens: on each,
        ``t = t0 + c k + c2 k²`` (the fit, then its tangent past ``fit_tokens``, then the bend)."""
        out = [(0.0, self.t0_s, self.c_s, self.c2_s)]
        kf = self.fit_tokens
        if self.c2_s > 0 and math.isfinite(kf):
            slope = self.c_s + 2 * self.c2_s * kf
            out.append((kf, self.t0_s - self.c2_s * kf * kf, slope, 0.0))
        kb = self.bend_tokens
        if self.bend_s > 0 and math.isfinite(kb):
            # the bend starts at or past fit_tokens (bend_tokens >= the most work measured)
            f, t0, c, c2 = out[-1]
            out.append((kb, t0 - self.bend_s * kb, c + self.bend_s, c2))
        return out


@dataclass(frozen=True)
class EngineLimits:
    """What the engine admits.

    Attributes
    ----------
    max_num_seqs : int
        Most sequences running at once.
    kv_cache_tokens : int or None
        Tokens of context the KV cache holds (None: never binds).
    max_num_batched_tokens : int
        Token budget of one step (decodes plus prompt tokens).
    chunked_prefill : bool
        Prompts may be split across steps.
    policy : str
        ``"mixed"`` (prefill and decode in the same step) or ``"separate"`` (a prefill step
        pauses every running stream; vLLM V0 without chunked prefill).
    sources : dict
        Where each limit came from (``"flag"``, ``"default"``, ``"estimated"``, ``"given"``).
    """

    max_num_seqs: int
    kv_cache_tokens: int | None
    max_num_batched_tokens: int
    chunked_prefill: bool
    policy: str
    sources: dict = field(default_factory=dict, compare=False)

    def kv_sequences(self, context_tokens: float) -> float:
        """Sequences of ``context_tokens`` each that the KV cache holds (inf when unbounded)."""
        if self.kv_cache_tokens is None:
            return math.inf
        return self.kv_cache_tokens / max(float(context_tokens), 1.0)


def _col(tab, name):
    """First non-missing value of a column, or None."""
    if name not in tab:
        return None
    for v in tab[name]:
        if v is None:
            continue
        if isinstance(v, float) and math.isnan(v):
            continue
        return v
    return None


def _engine_flag(args: str | None, name: str):
    """Value of ``--name`` in an engine command line (True/False for ``--[no-]name``)."""
    if not isinstance(args, str):
        return None
    spell = name.replace("_", "[-_]")
    m = re.search(rf"--(no[-_])?{spell}(?:[= ]([^\s]+))?(?=\s|$)", args)
    if not m:
        return None
    if m.group(1):
        return False
    return m.group(2) if m.group(2) is not None else True


def _as_bool(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "1", "yes"):
            return True
        if s in ("false", "0", "no"):
            return False
    return None


def _version(engine) -> tuple[int, int] | None:
    m = re.search(r"v?(\d+)\.(\d+)", str(engine or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def engine_limits(sweep, *, max_num_seqs=None, kv_cache_tokens: int | None = None,
                  max_num_batched_tokens=None, chunked_prefill=None, policy=None, hardware=None) -> EngineLimits:
    """The engine's admission limits, from arguments, then the sweep's engine columns.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
    max_num_seqs : int, optional
        Default: the sweep's ``max_num_seqs`` column (read from the engine's command line or
        manifest), else 256 (vLLM's default) with a note.
    kv_cache_tokens : int, optional
        Default: the sweep's ``kv_cache_tokens`` column when the engine recorded its KV
        capacity (SGLang's ``server_info`` ``max_total_num_tokens``), else estimated from the
        model, GPU, tensor parallelism and ``gpu_memory_utilization`` the sweep names
        (:func:`kv_cache_tokens`); None when they are not recognised.
    max_num_batched_tokens : int, optional
        Default: the flag, else vLLM's defaults (8192 with chunked prefill, otherwise
        ``max(max_model_len, 2048)``).
    chunked_prefill : bool, optional
        Default: the flag, else on for vLLM's V1 engine (its default) and off for V0.
    policy : {"mixed", "separate"}, optional
        Default: ``"separate"`` for vLLM's V0 engine without chunked prefill, else ``"mixed"``.
    hardware : capbook.engine.hardware.Hardware, optional
        The replica's model and GPU facts (flags and files); the KV-cache estimate comes from
        them when the engine did not record its own count.
    """
    tab = sweep.table
    src: dict = {}
    args = _col(tab, "engine_args")
    engine = str(_col(tab, "engine") or "")
    low = engine.lower()
    defaults = None
    if re.search(r"sglang|tgi|text-generation|vllm", low) and "modelled" not in low:
        # a real engine named by the files: its own defaults, which depend on its version and GPU
        mml0 = _col(tab, "max_model_len")
        hw_kv = hardware.kv_cache_tokens() if hardware is not None else None
        ctx = None
        if hardware is not None:
            ctx = hardware.max_model_len or (getattr(hardware.model, "max_position_embeddings", None)
                                             if hardware.model is not None else None)
        defaults = engine_defaults(engine, None, hardware.gpu if hardware is not None else None,
                                   max_model_len=int(float(mml0)) if mml0 not in (None, True) else None,
                                   kv_cache_tokens=hw_kv, context_len=ctx)

    if max_num_seqs is None:
        m = _col(tab, "max_num_seqs")
        if m is None:
            m = _engine_flag(args, "max_num_seqs")
        if m is None and defaults is not None and defaults.get("max_num_seqs"):
            n, src["max_num_seqs"] = int(defaults["max_num_seqs"]), "default: " + defaults["sources"]["max_num_seqs"]
        elif m is None:
            n, src["max_num_seqs"] = 256, "vLLM's default; the sweep does not record it"
        else:
            n, src["max_num_seqs"] = int(float(m)), "flag"
    else:
        n, src["max_num_seqs"] = integer(max_num_seqs, "max_num_seqs", minimum=1), "given"

    v1 = _as_bool(_col(tab, "engine_v1"))
    if v1 is None and "V0 engine" in engine:
        v1 = False
    if v1 is None and "vllm" in engine.lower():
        ver = _version(engine)
        v1 = None if ver is None else ver >= (0, 8)
    if chunked_prefill is None:
        cp = _as_bool(_col(tab, "chunked_prefill"))
        if cp is None:
            cp = _as_bool(_engine_flag(args, "enable_chunked_prefill"))
        if cp is None and defaults is not None and v1 is not False:
            cp = bool(defaults["chunked_prefill"])
            src["chunked_prefill"] = "default: " + defaults["sources"]["chunked_prefill"]
        elif cp is None:
            cp = v1 is not False
            src["chunked_prefill"] = "default"
        else:
            src["chunked_prefill"] = "flag"
        chunked_prefill = cp
    else:
        chunked_prefill, src["chunked_prefill"] = bool(chunked_prefill), "given"
    if policy is None:
        policy = "separate" if (v1 is False and not chunked_prefill) else "mixed"
        src["policy"] = "engine" if v1 is not None else "default"
    else:
        policy, src["policy"] = choice(policy, "policy", ("mixed", "separate")), "given"

    mml = _col(tab, "max_model_len")
    if mml is None:
        mml = _engine_flag(args, "max_model_len")
    mml = int(float(mml)) if mml not in (None, True) else None
    if max_num_batched_tokens is None:
        b = _col(tab, "max_num_batched_tokens")
        if b is None:
            b = _engine_flag(args, "max_num_batched_tokens")
        if b not in (None, True):
            budget, src["max_num_batched_tokens"] = int(float(b)), "flag"
        elif defaults is not None and v1 is not False and chunked_prefill == bool(defaults["chunked_prefill"]):
            budget = int(defaults["max_num_batched_tokens"])
            src["max_num_batched_tokens"] = "default: " + defaults["sources"]["max_num_batched_tokens"]
        else:
            budget = 8192 if chunked_prefill else max(mml or 0, 2048)
            src["max_num_batched_tokens"] = "default"
    else:
        budget = integer(max_num_batched_tokens, "max_num_batched_tokens", minimum=1)
        src["max_num_batched_tokens"] = "given"

    recorded = _col(tab, "kv_cache_tokens")   # the engine's own count (SGLang max_total_num_tokens)
    if kv_cache_tokens is None and recorded not in (None, True) and float(recorded) >= 1:
        kv, src["kv_cache_tokens"] = int(float(recorded)), "recorded by the engine"
    elif kv_cache_tokens is None and hardware is not None and hardware.kv_cache_tokens() is not None:
        kv = int(hardware.kv_cache_tokens())
        src["kv_cache_tokens"] = ("recorded by the engine" if hardware.kv_cache_tokens_recorded
                                  else "estimated from model and GPU")
    elif kv_cache_tokens is None:
        util = _col(tab, "gpu_memory_utilization")
        if util is None:
            util = _engine_flag(args, "gpu_memory_utilization")
        util = float(util) if util not in (None, True) else 0.9
        tp = _col(tab, "tensor_parallel")
        kv = globals()["kv_cache_tokens"](
            _col(tab, "model"), _col(tab, "gpu"), tensor_parallel=int(float(tp)) if tp is not None else 1,
            gpu_memory_utilization=util, precision=_col(tab, "precision") if _col(tab, "quantization") is None
            else _col(tab, "quantization"), kv_cache_dtype=_col(tab, "kv_cache_dtype"))
        src["kv_cache_tokens"] = "estimated from model and GPU" if kv is not None else "unknown (not binding)"
    else:
        kv = integer(kv_cache_tokens, "kv_cache_tokens", minimum=1)
        src["kv_cache_tokens"] = "given"
    return EngineLimits(n, kv, budget, bool(chunked_prefill), policy, src)


class ExtrapolationError(ValueError):
    """A prediction too far past what the sweep measured, with nothing to bound it.

    Attributes
    ----------
    limit_rps : float or None
        The highest rate the fit may be asked about, req/s.
    """

    def __init__(self, message: str, limit_rps: float | None = None):
        super().__init__(message)
        self.limit_rps = limit_rps


# -- fitting ------------------------------------------------------------------------------------

def _row_mean(row, what: str):
    """A point's mean E2E or TTFT (s): the importers' ``mean_e2e_s``/``mean_ttft_s`` or the sample
    sweeps' ``e2e_mean_s``/``ttft_mean_s``; None when the sweep records neither."""
    for name in (f"mean_{what}_s", f"{what}_mean_s"):
        v = row.get(name)
        if v is not None and np.isfinite(float(v)):
            return float(v)
    return None


def _points(sweep, include_saturated: bool = True):
    """Per measured point: completion rate (1/s), mean TPOT (s), mean output, mean prompt."""
    frames = [sweep.table]
    sat = getattr(sweep, "saturated", None)
    if include_saturated and sat is not None and len(sat):
        frames.append(sat)
    lam, tpot, out, inp = [], [], [], []
    for f, tab in enumerate(frames):
        for _, r in tab.iterrows():
            e2e, ttft = _row_mean(r, "e2e"), _row_mean(r, "ttft")
            o = float(r["mean_output_tokens"])
            p50 = r.get("ttft_p50_s")
            if f == 0 and e2e is not None and ttft is None and p50 is not None and np.isfinite(float(p50)) \
                    and float(p50) < 0.25 * e2e:
                # no mean TTFT (SGLang's older files): at a level the engine keeps up with, its median
                # stands in — the decode phase is then the mean, as the step identity needs, not the median
                # inter-token latency. Not at a saturated level, whose E2E holds stalls (requests retracted
                # for KV space) that are not decode steps.
                ttft = float(p50)
            if e2e is not None and ttft is not None and np.isfinite(e2e) and np.isfinite(ttft) and o > 1:
                t = (float(e2e) - float(ttft)) / (o - 1)
            else:
                t = float(r["tpot_p50_s"])
            lam.append(float(r["request_throughput_rps"]))
            tpot.append(t)
            out.append(o)
            inp.append(float(r["mean_input_tokens"]))
    return np.array(lam), np.array(tpot), np.array(out), np.array(inp)


def fit_step_cost(sweep, *, include_saturated: bool = True, curvature: bool = True,
                  targets=None, prompt_cost_s: float | None = None) -> tuple[StepCost, list[str]]:
    """Fit :class:`StepCost` to a sweep (mixed prefill-and-decode steps; see the module docstring).

    Each point gives the mean tokens of work per step, ``k = λ · TPOT · (L − 1 + P)`` (the
    engine works ``λ (L − 1 + P)`` tokens per second in ``1 / TPOT`` steps), and the step time,
    TPOT. ``t0``, ``c`` and ``c2`` are the non-negative least-squares fit (relative residuals)
    of ``TPOT = t0 + c k + c2 k²``; ``c2`` needs four points or more (and ``curvature``): with
    three, three coefficients would fit the points exactly and their noise with them.

    With ``prompt_cost_s`` (seconds per prompt token, measured apart) the prompt tokens of each
    step, ``λ · TPOT · P``, cost that, and ``t0``, ``c`` and ``c2`` are fitted to the decode tokens
    ``λ · TPOT · (L − 1)`` and what is left of each step.

    Returns the cost and notes. With one point the step time is flat (c = 0) and a note says so.
    """
    from scipy.optimize import nnls

    lam, tpot, out, inp = _points(sweep, include_saturated)
    k = lam * tpot * (np.maximum(out - 1, 0) + inp)  # tokens of work per step, as measured
    if targets is not None:  # step-time targets for the first len(targets) points (calibration)
        targets = np.asarray(targets, dtype=float)
        tpot = tpot.copy()
        tpot[: len(targets)] = np.where(np.isfinite(targets), targets, tpot[: len(targets)])
    ok = np.isfinite(lam) & np.isfinite(tpot) & (lam > 0) & (tpot > 0)
    if not ok.any():
        raise ValueError(f"sweep {sweep.name!r} has no point with a positive completion rate and TPOT")
    lam, tpot, out, inp, k = lam[ok], tpot[ok], out[ok], inp[ok], k[ok]
    notes = []
    cp = None if prompt_cost_s is None else float(prompt_cost_s)
    if cp is not None:
        kp = lam * tpot * inp
        k = lam * tpot * np.maximum(out - 1, 0)
        rest = tpot - cp * kp                      # the part of each step that is not prompt tokens
        if np.any(rest <= 0):
            raise ValueError(f"sweep {sweep.name!r}: at the measured prefill rate of {1 / cp:,.0f} tokens/s the "
                             "prompts alone take longer than the steps the sweep measured; check the prefill rate")
    if len(k) < 2 or np.ptp(k) <= 0:
        notes.append("one load point: the step time is taken as flat (c = 0); measure more levels "
                     "to see how the step grows")
        i = int(np.argmin(k))
        return StepCost(float(tpot[i] if cp is None else rest[i]), 0.0, 0.0, cp), notes
    cols = [np.ones_like(k), k] + ([k * k] if curvature and len(k) >= 4 else [])
    A = np.vstack(cols).T / tpot[:, None]
    coef, _ = nnls(A, np.ones_like(k) if cp is None else rest / tpot)
    t0, c = float(coef[0]), float(coef[1])
    c2 = float(coef[2]) if len(coef) > 2 else 0.0
    if t0 <= 0:
        raise ValueError(f"sweep {sweep.name!r}: the step-cost fit gives no fixed cost per step; "
                         "TPOT falls as load rises in these points")
    cost = StepCost(t0, c, c2, cp)
    resid = np.max(np.abs((cost(k) if cp is None else cost(k) + cp * kp) / tpot - 1))
    notes.append(f"step cost fitted to {len(k)} points: t0 = {t0 * 1e3:.3g} ms, c = {c * 1e6:.3g} µs "
                 f"per token, c2 = {c2 * 1e9:.3g} ns per token² (largest residual {resid:.1%}; tokens of "
                 f"work per step {k.min():.0f}–{k.max():.0f})")
    if cp is not None:
        notes.append(f"prompt tokens cost {cp * 1e6:.3g} µs each, from the measured prefill rate of "
                     f"{1 / cp:,.0f} tokens/s; decode tokens {c * 1e6:.3g} µs")
    if c == 0 and c2 == 0:
        notes.append("TPOT does not rise with the work rate in this sweep: the step time is flat")
    return cost, notes


def _calibrate_separate(model, sweep, include_saturated):
    """Refit ``c`` (``c2 = 0``) so the simulated engine with separate prefill steps reproduces
    the measured mean TPOT (the step identity alone cannot: prompts batch into prefill steps)."""
    from scipy.optimize import brentq

    lam, tpot, _, _ = _points(sweep, include_saturated)
    ok = np.isfinite(lam) & (lam > 0) & np.isfinite(tpot)
    lam, tpot = lam[ok], tpot[ok]
    t0 = float(tpot[np.argmin(lam)])
    cp = model.step.cp_s
    if len(lam) < 2:
        return StepCost(t0, 0.0, 0.0, cp)

    def resid(c):
        model.step = StepCost(t0, c, 0.0, cp)
        r = 0.0
        for lm, tp in zip(lam, tpot):
            if lm == lam.min():
                continue
            run = model.simulate(lm, requests=3000, seed=11)
            sim = float(np.mean(run.tpot_s)) if run.backlog == 0 and len(run.tpot_s) else 10 * tp
            r += math.log(sim / tp)
        return r

    hi = max(model.step.c_s, 1e-7)
    if resid(0.0) >= 0:
        return StepCost(t0, 0.0, 0.0, cp)
    while resid(hi) < 0 and hi < 1.0:
        hi *= 2
    c = brentq(resid, 0.0, hi, xtol=1e-9, rtol=1e-4)
    return StepCost(t0, float(c), 0.0, cp)


def _calibrate_step(model, sweep, include_saturated, iterations: int = 8) -> None:
    """Refine a mixed-step cost so the *simulated* engine reproduces the measured mean TPOT.

    The step identity fits the mean tokens per step; real steps vary (a step that takes in two
    prompts is longer than one that takes none), and with a curved cost that variation slows
    the engine down (Jensen's inequality). Each iteration simulates every measured point,
    divides its TPOT target by simulated / measured, and refits (a fixed-point correction).
    """
    lam, tpot, _, _ = _points(sweep, include_saturated=False)
    ok = np.isfinite(lam) & (lam > 0) & np.isfinite(tpot) & (tpot > 0)
    if ok.sum() < 2 or model.step.c2_s <= 0:
        return  # a linear cost: the identity is exact in the mean
    target = np.where(ok, tpot, np.nan)
    best = None
    for _ in range(iterations + 1):
        ratio = np.full_like(tpot, np.nan)
        for i in np.flatnonzero(ok):
            run = model.simulate(lam[i], requests=2500, seed=17)
            sim = float(np.mean(run.tpot_s)) if len(run.tpot_s) and run.backlog == 0 else 2 * tpot[i]
            ratio[i] = sim / tpot[i]
        worst = float(np.nanmax(np.abs(ratio - 1)))
        if best is None or worst < best[1]:
            best = (model.step, worst)
        if worst < 0.005:
            break
        # damped: a level near the fitted saturation can swing the ratio a long way
        target = target / np.sqrt(np.clip(ratio, 0.8, 1.25))
        model.step, _ = fit_step_cost(sweep, include_saturated=include_saturated, targets=target,
                                      prompt_cost_s=model.step.cp_s)
    model.step, worst = best
    model.__dict__.pop("_cache", None)
    model.notes.append(
        f"step cost refined by simulation: t0 = {model.step.t0_s * 1e3:.3g} ms, c = "
        f"{model.step.c_s * 1e6:.3g} µs per token, c2 = {model.step.c2_s * 1e9:.3g} ns per token² "
        f"(simulated mean TPOT within {worst:.1%} of the measured one at every level)")


# -- the model ----------------------------------------------------------------------------------

def _quantile_sampler(tab, prefix: str):
    """(probabilities, values) of a piecewise-linear quantile function from percentile columns."""
    cols = [("min", 0.0), ("p1", 0.01), ("p5", 0.05), ("p10", 0.10), ("p25", 0.25), ("p50", 0.50),
            ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)]
    ps, vs = [], []
    for suffix, p in cols:
        c = f"{prefix}_{suffix}"
        if c in tab:
            x = np.asarray(tab[c], dtype=float)
            x = x[np.isfinite(x)]
            v = float(np.median(x)) if len(x) else math.nan
            if np.isfinite(v):
                ps.append(p)
                vs.append(float(v))
    if len(ps) < 3 or ps[0] != 0.0 or ps[-1] != 1.0:
        return None
    vs = np.maximum.accumulate(np.asarray(vs))
    return np.asarray(ps), vs


@dataclass
class EngineRun:
    """The requests of one simulated run (after the warm-up), seconds.

    Attributes
    ----------
    ttft_s, e2e_s, tpot_s : numpy.ndarray
        Per request, as a client measures them.
    completion_rps : float
        Completions per second over the measured window.
    arrival_rps : float
        Arrivals per second over the measured window.
    backlog : int
        Requests still waiting or running when the run ended.
    preemptions : int
        Sequences preempted for KV-cache space.
    """

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    tpot_s: np.ndarray
    completion_rps: float
    arrival_rps: float
    backlog: int
    preemptions: int


@dataclass
class EngineModel:
    """A fitted engine (see the module docstring): step cost, limits, lengths and overhead.

    Build it with :func:`fit_engine`. Times in seconds, rates in requests per second.
    """

    step: StepCost
    limits: EngineLimits
    prompt_tokens: float
    output_tokens: float
    output_quantiles: tuple | None = None
    prompt_p99: float | None = None
    overhead_median_s: float = 0.0
    overhead_sigma: float = 0.0
    name: str = ""
    notes: list = field(default_factory=list)
    #: the points the model was fitted to (the sweep less any levels past its throughput peak)
    fitted_sweep: object = field(default=None, repr=False)
    #: the hardware facts the fit used (:class:`capbook.engine.hardware.Hardware`)
    hardware: object = field(default=None, repr=False)
    #: the most work per step (tokens) the fitted points measured
    k_seen: float = math.nan
    #: the highest completion rate the sweep measured being served (req/s): a floor on capacity
    #: for requests of the lengths it was measured with (``served_lengths``: prompt, output)
    served_rps: float = math.nan
    served_lengths: tuple = (math.nan, math.nan)

    #: how far past the measured work per step a prediction may go without hardware facts
    EXTRAPOLATION_LIMIT = 3.0

    # -- mean-field ---------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        """Sequences that run at once: ``max_num_seqs``, or fewer when the KV cache binds first
        (at the mean context of a running sequence, prompt plus half the output)."""
        kv = self.limits.kv_sequences(self.prompt_tokens + self.output_tokens / 2)
        if not math.isfinite(kv):
            return int(self.limits.max_num_seqs)
        return int(max(1, min(self.limits.max_num_seqs, math.floor(kv))))

    def mean_field_saturation_rps(self) -> float:
        """Completion rate with every slot busy, from the step-time identity (req/s).

        Mixed steps: with ``S`` slots busy a step works ``k = S (L − 1 + P) / L`` tokens and the
        rate is ``S / (L · t_step(k))``. Separate prefill steps (one per admission, no batching
        of prompts, so a lower bound): ``1 / ((L − 1) t_step(S) / S + t_step(P))``.
        """
        s, L, P = self.slots, self.output_tokens, self.prompt_tokens
        if self.limits.policy == "separate":
            return 1.0 / ((L - 1) * float(self.step(s)) / s + float(self.step(P)))
        return s / (L * float(self.step(s * (L - 1 + P) / L)))

    def step_time_at(self, running, arrival_rps: float):
        """Mean time (s) between a running sequence's tokens with ``running`` sequences decoding
        and prompts arriving at ``arrival_rps``: the mean-field step, whose prompt tokens are
        those that arrive during it (inf when the prompts alone would fill the engine)."""
        n = np.asarray(running, dtype=float)
        lam = nonnegative(arrival_rps, "arrival_rps")
        P = self.prompt_tokens
        if self.limits.policy == "separate":
            busy = lam * float(self.step(P))
            if busy >= 1:
                return np.full_like(n, math.inf)
            return np.asarray(self.step(n)) / (1 - busy)
        a = lam * P

        def solve(t0, c, c2):
            # k = n + a t(k): the step's tokens are its decodes plus the prompts arriving during it
            with np.errstate(invalid="ignore", divide="ignore"):
                if c2 > 0 and a > 0:
                    disc = (1 - a * c) ** 2 - 4 * a * c2 * (n + a * t0)
                    k = np.where(disc >= 0, ((1 - a * c) - np.sqrt(np.maximum(disc, 0))) / (2 * a * c2), np.inf)
                else:
                    k = np.where(1 - a * c > 0, (n + a * t0) / (1 - a * c), np.inf)
            return np.where(k >= 0, k, np.inf)

        # the cost is piecewise (the fit, its tangent, the physical bend) and increasing: the
        # solution lies on the last piece whose start it passes
        k = None
        for start, pt0, pc, pc2 in self.step.pieces():
            kk = solve(pt0, pc, pc2)
            k = kk if k is None else np.where(k > start, kk, k)
        return np.where(np.isfinite(k), np.asarray(self.step(np.where(np.isfinite(k), k, 0))), np.inf)

    def overhead_quantile(self, q) -> np.ndarray:
        """Client-side overhead (s) at probability ``q`` (log-normal)."""
        from scipy.special import ndtri

        q = np.asarray(q, dtype=float)
        if self.overhead_median_s <= 0:
            return np.zeros_like(q)
        return self.overhead_median_s * np.exp(self.overhead_sigma * ndtri(q))

    # -- simulation -----------------------------------------------------------------------------
    def _lengths(self, rng, size):
        if self.output_quantiles is not None:
            ps, vs = self.output_quantiles
            # the recorded percentiles, scaled so the mean is the measured mean
            grid_mean = float(np.mean(np.interp(np.linspace(0.0005, 0.9995, 1000), ps, vs)))
            scale = self.output_tokens / grid_mean if grid_mean > 0 else 1.0
            out = np.maximum(1, np.rint(np.interp(rng.random(size), ps, vs) * scale)).astype(np.int64)
        else:
            lo = math.floor(self.output_tokens)
            frac = self.output_tokens - lo
            out = (lo + (rng.random(size) < frac)).astype(np.int64)
            out = np.maximum(out, 1)
        if self.prompt_p99 is not None and self.prompt_p99 > self.prompt_tokens:
            sig = math.log(self.prompt_p99 / self.prompt_tokens) / _Z99
            mu = math.log(self.prompt_tokens) - sig * sig / 2
            inp = np.maximum(1, np.rint(rng.lognormal(mu, sig, size))).astype(np.int64)
        else:
            inp = np.full(size, max(1, int(round(self.prompt_tokens))), dtype=np.int64)
        return inp, out

    def simulate(self, arrival_rps: float, *, arrivals: str = "poisson", duration_s: float | None = None,
                 warmup_s: float | None = None, requests: int | None = None, seed: int = 0,
                 rng: np.random.Generator | None = None, backlog: bool = False) -> EngineRun:
        """Simulate open-loop arrivals step by step.

        Parameters
        ----------
        arrival_rps : float
            Requests per second.
        arrivals : {"poisson", "uniform"}
            Poisson arrivals, or evenly spaced ones.
        duration_s : float, optional
            Seconds of arrivals. Default: long enough for ``requests`` measured requests.
        warmup_s : float, optional
            Seconds at the start whose arrivals are not measured. Default: 10 % of the
            duration (0 when ``duration_s`` is given, which reproduces a load-generator
            stage started from an idle engine).
        requests : int, optional
            Measured requests when ``duration_s`` is not given (default 6000).
        seed, rng
            Randomness (``rng`` wins when given).
        backlog : bool
            Ignore ``arrival_rps``: every request is waiting at time 0 (measures capacity).
        """
        choice(arrivals, "arrivals", ("poisson", "uniform"))
        requests = None if requests is None else integer(requests, "requests", minimum=1)
        warmup_s = None if warmup_s is None else nonnegative(warmup_s, "warmup_s")
        rng = rng if rng is not None else np.random.default_rng(seed)
        if backlog:
            m = int(requests or max(40 * self.slots, 4000))
            a = np.zeros(m)
            warm = 0.0
        else:
            lam = positive(arrival_rps, "arrival_rps")
            if duration_s is None:
                n_meas = int(requests or 6000)
                duration = n_meas / 0.9 / lam
                warm = 0.1 * duration if warmup_s is None else float(warmup_s)
            else:
                duration = positive(duration_s, "duration_s")
                warm = 0.0 if warmup_s is None else float(warmup_s)
            if arrivals == "poisson":
                m = max(1, int(rng.poisson(lam * duration)))
                a = np.sort(rng.random(m)) * duration
            else:
                m = max(1, int(round(lam * duration)))
                a = (np.arange(m) + 0.5) / lam
        inp, out = self._lengths(rng, len(a))
        run = run_fleet(self, a, inp, out, replicas=1, router="jsq", overhead=False)
        first, done = run.first_token, run.end
        npre = int(run.replicas["preemptions"].sum())
        over = self.overhead_quantile(np.clip(rng.random(len(a)), 1e-6, 1 - 1e-6))
        finished = np.isfinite(done)
        if backlog:
            # the middle half of the completions, when the engine is full
            t = np.sort(done[finished])
            k = len(t)
            if k < 4:
                raise ValueError(f"the engine finished {k} of {len(a)} requests in its simulated window: requests of "
                                 f"{float(np.mean(out)):,.0f} output tokens outlast it, so it has no saturation rate")
            lo_, hi_ = t[k // 4], t[(3 * k) // 4]
            rate = (3 * k // 4 - k // 4) / (hi_ - lo_) if hi_ > lo_ else math.nan
            return EngineRun(np.array([]), np.array([]), np.array([]), float(rate), math.nan,
                             int((~finished).sum()), npre)
        meas = a >= warm
        keep = meas & finished
        ttft = first[keep] - a[keep] + over[keep]
        e2e = done[keep] - a[keep] + over[keep]
        o = out[keep]
        tpot = np.where(o > 1, (done[keep] - first[keep]) / np.maximum(o - 1, 1), np.nan)
        span = float(np.max(done[finished]) - warm) if finished.any() else math.nan
        comp = float(keep.sum() / span) if span and span > 0 else math.nan
        arr = float(meas.sum() / max(a.max() - warm, 1e-9)) if meas.any() else math.nan
        return EngineRun(ttft, e2e, tpot[np.isfinite(tpot)], comp, arr, int((~finished).sum()), npre)

    @property
    def bounded(self) -> bool:
        """The hardware facts (model and GPU) bound the extrapolation past the measured work."""
        hw = self.hardware
        return bool(hw is not None and getattr(hw, "known", False))

    def work_per_step(self, rate_rps: float) -> float:
        """Mean tokens of work per step at ``rate_rps`` completions per second (mean field: the
        step-time identity ``k = λ t(k) (L − 1 + P)``; inf past the mean-field capacity)."""
        lam = nonnegative(rate_rps, "rate_rps")
        w = self.output_tokens - 1 + self.prompt_tokens
        lo, hi = 0.0, self.slots * w / max(self.output_tokens, 1.0)
        if lam * float(self.step(hi)) * w > hi:
            return math.inf
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if lam * float(self.step(mid)) * w > mid:
                lo = mid
            else:
                hi = mid
        return hi

    def limit_rps(self) -> float | None:
        """The highest rate this fit may be asked about, req/s, or None when nothing limits it.

        Without hardware facts the step cost past the measured work per step is a straight line
        through the sweep, and a real step turns compute bound somewhere past it: a prediction
        more than :attr:`EXTRAPOLATION_LIMIT` times past the most work per step the sweep
        measured is refused. None when the hardware facts bound the extrapolation or when
        saturation lies within the limit."""
        if self.bounded or not math.isfinite(self.k_seen) or self.k_seen <= 0:
            return None
        L, P = self.output_tokens, self.prompt_tokens
        k_sat = self.slots * (L - 1 + P) / L
        k_max = self.EXTRAPOLATION_LIMIT * self.k_seen
        if k_sat <= k_max:
            return None
        return float(k_max / (float(self.step(k_max)) * (L - 1 + P)))

    def extrapolation(self, rate_rps: float | None = None) -> str:
        """How far a prediction at ``rate_rps`` (default: saturation) lies past the measured points,
        and what bounds it, in one sentence."""
        L, P = self.output_tokens, self.prompt_tokens
        if rate_rps is None:
            k, at = self.slots * (L - 1 + P) / L, "at saturation"
        else:
            k, at = self.work_per_step(rate_rps), f"at {rate_rps:.3g} requests/s"
        if not (math.isfinite(k) and math.isfinite(self.k_seen) and self.k_seen > 0):
            return f"{at} the engine is past its capacity" if not math.isfinite(k) else ""
        ratio = k / self.k_seen
        head = (f"{at} a step holds about {k:,.0f} tokens of work, {ratio:.2g}× the most the sweep measured "
                f"({self.k_seen:,.0f})")
        if ratio <= 1:
            return head + ": within the measured points"
        hw = self.hardware
        if self.bounded:
            return (head + f"; past it the step cost is bounded by the physical model of {hw.model.name} on "
                    f"{hw.tensor_parallel} × {hw.gpu.name}")
        if ratio > self.EXTRAPOLATION_LIMIT:
            return head + "; too far to predict without hardware facts (pass --gpu and --model)"
        return head + "; a straight line through the sweep, with no hardware facts to bound it"

    def refusal(self) -> str | None:
        """Why a saturation rate is not printed (see :meth:`limit_rps`), or None."""
        lim = self.limit_rps()
        if lim is None:
            return None
        L, P = self.output_tokens, self.prompt_tokens
        return (f"cannot predict past {lim:.3g} req/s from this sweep: its points reach {self.k_seen:.0f} tokens "
                f"of work per step and saturation needs about {self.slots * (L - 1 + P) / L:.0f}, more than "
                f"{self.EXTRAPOLATION_LIMIT:g}× past what was measured, and no model or GPU is known to bound the "
                "step cost there; measure closer to saturation or pass --gpu and --model")

    def saturation_rps(self, *, seed: int = 0) -> float:
        """Completion rate of the simulated engine with requests always waiting (req/s).

        Never below the highest completion rate the sweep measured being served
        (:attr:`served_rps`): that rate was carried, so capacity is at least that.

        Raises
        ------
        ExtrapolationError
            When the saturation lies too far past the measured work per step and no hardware
            facts bound it (:meth:`limit_rps`).
        """
        why = self.refusal()
        if why is not None:
            raise ExtrapolationError(why, self.limit_rps())
        key = ("sat", seed)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            sim = self.simulate(0.0, backlog=True, seed=seed).completion_rps
            cache[key] = max(sim, self.served_rps) if self._served_applies() else sim
        return cache[key]

    def _served_applies(self) -> bool:
        """The served floor holds for requests of the lengths the sweep measured (within 2 %)."""
        p, o = self.served_lengths
        return (math.isfinite(self.served_rps) and math.isfinite(p) and math.isfinite(o)
                and abs(self.prompt_tokens - p) <= 0.02 * max(p, 1.0)
                and abs(self.output_tokens - o) <= 0.02 * max(o, 1.0))

    def simulated_saturation_rps(self, *, seed: int = 0) -> float:
        """The simulated engine's own completion rate with requests always waiting (req/s),
        without the measured floor of :meth:`saturation_rps` and without the refusal."""
        key = ("simsat", seed)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = self.simulate(0.0, backlog=True, seed=seed).completion_rps
        return cache[key]


def _prompt_p99(sweep):
    tab = sweep.table
    if "input_tokens_p99" in tab:
        v = np.asarray(tab["input_tokens_p99"], dtype=float)
        v = v[np.isfinite(v)]
        if len(v):
            return float(np.median(v))
    return None


def _closed_loop(tab) -> bool:
    """The sweep's levels are client concurrencies (closed loop), not requested rates."""
    rate = tab["request_rate_target"] if "request_rate_target" in tab else None
    return "concurrency" in tab and (rate is None or not rate.notna().any())


def _fit_points(sweep, slots: int | None = None, column: str = "request_throughput_rps"):
    """(rate, ttft p50, ttft p99, duration) of the measured levels (not the saturated ones).

    In a closed-loop sweep, a level with more clients than the engine has slots (``slots``)
    queues inside the engine: its TTFT holds that wait, which an open-loop run at its completion
    rate does not reproduce, so it is left out (unless no level is left)."""
    tab = sweep.table
    lam = np.asarray(tab["request_throughput_rps"], dtype=float)
    lam_ok = np.isfinite(lam) & (lam > 0)
    if column != "request_throughput_rps":      # another column, on the same levels
        lam = np.asarray(tab[column], dtype=float)
    p50 = np.asarray(tab["ttft_p50_s"], dtype=float)
    p99 = np.asarray(tab["ttft_p99_s"], dtype=float) if "ttft_p99_s" in tab else p50
    n = np.asarray(tab["num_requests"], dtype=float) if "num_requests" in tab else np.full(len(lam), 2000.0)
    ok = lam_ok & np.isfinite(p50) & (p50 > 0)
    if slots is not None and _closed_loop(tab):
        under = np.asarray(tab["concurrency"], dtype=float) <= slots
        if (ok & under).any():
            ok = ok & under
    return lam[ok], p50[ok], np.where(np.isfinite(p99[ok]), p99[ok], p50[ok]), n[ok]


def _calibrate_overhead(model: "EngineModel", sweep) -> None:
    """Fit the client overhead (log-normal median and sigma) so that engine TTFT plus overhead
    matches the measured TTFT p50 and p99 at every measured level (least squares in logs)."""
    from scipy.optimize import minimize
    from scipy.special import ndtri

    closed = _closed_loop(sweep.table)
    # a closed-loop sweep is simulated as it ran (N clients, the engine's own queue in TTFT);
    # an open-loop one at each level's completion rate
    lam, p50, p99, n = _fit_points(sweep, None if closed else model.slots)
    if not len(lam):
        return
    conc = _fit_points(sweep, None, column="concurrency")[0] if closed else None
    engine, zs = [], []
    rng = np.random.default_rng(3)
    for j, (lm, k) in enumerate(zip(lam, n)):
        if closed and np.isfinite(conc[j]) and conc[j] >= 1:
            e = simulate_closed(model, int(round(conc[j])), requests=int(min(max(k, 800), 3000)), seed=5,
                                overhead=False).ttft_s
        else:
            e = model.simulate(lm, requests=int(min(max(k, 1500), 6000)), seed=5).ttft_s
        e = e if len(e) else np.array([0.0])
        engine.append(e)
        zs.append(ndtri(rng.permutation((np.arange(len(e)) + 0.5) / len(e))))

    def total(params):
        med, sig = math.exp(params[0]), abs(params[1])
        err = 0.0
        for e, z, m50, m99 in zip(engine, zs, p50, p99):
            q50, q99 = np.quantile(e + med * np.exp(sig * z), [0.5, 0.99])
            err += math.log(q50 / m50) ** 2 + math.log(q99 / m99) ** 2
        return err

    i = int(np.argmin(lam))
    start = max(p50[i] - float(np.median(engine[i])), 1e-4)
    sig0 = math.log(max(p99[i] / p50[i], 1.0001)) / _Z99
    best = None
    for s0 in (sig0, 0.5 * sig0 + 0.05):
        res = minimize(total, [math.log(start), s0], method="Nelder-Mead",
                       options={"xatol": 1e-3, "fatol": 1e-7, "maxiter": 400})
        if best is None or res.fun < best.fun:
            best = res
    model.overhead_median_s = float(math.exp(best.x[0]))
    model.overhead_sigma = float(abs(best.x[1]))
    if model.overhead_median_s < 1e-4:
        model.overhead_median_s, model.overhead_sigma = 0.0, 0.0
        model.notes.append("client overhead: none (the engine's own prefill explains the measured TTFT)")
    else:
        model.notes.append(f"client overhead (log-normal, fitted to TTFT p50 and p99 at {len(lam)} levels): "
                           f"median {model.overhead_median_s * 1e3:.3g} ms, sigma {model.overhead_sigma:.3g}")


def _before_the_peak(sweep):
    """The sweep without closed-loop levels past the engine's throughput peak (completions more
    than 20 % below the best at a lower concurrency: preemption and KV-cache thrashing, which the
    step model does not describe), and a note naming them ('' when none)."""
    tab = sweep.table
    if len(tab) < 3 or ("request_rate_target" in tab and tab["request_rate_target"].notna().any()):
        return sweep, ""
    order = np.argsort(np.asarray(tab["concurrency"], dtype=float), kind="stable")
    thr = np.asarray(tab["request_throughput_rps"], dtype=float)[order]
    best = np.maximum.accumulate(np.where(np.isfinite(thr), thr, 0.0))
    past = np.zeros(len(thr), dtype=bool)
    past[1:] = thr[1:] < 0.8 * best[:-1]
    if not past.any() or past.sum() > len(thr) - 2:
        return sweep, ""
    drop = order[past]
    levels = ", ".join(f"{c:g}" for c in np.asarray(tab["concurrency"], dtype=float)[drop])
    kept = Sweep.from_frame(tab.drop(index=tab.index[drop]).reset_index(drop=True), name=sweep.name)
    note = (f"concurrency {levels} left out of the fit: completions fall there to under 80 % of the best "
            f"at a lower concurrency ({best.max():.3g} req/s), the engine is past its throughput peak "
            "(preemption, KV-cache thrashing), which the step model does not describe")
    return kept, note


def _running(sweep, include_saturated: bool):
    """Sequences decoding at once at each measured point, by Little's law on the decode phase:
    completions per second × (output tokens − 1) × mean TPOT."""
    lam, tpot, out, _ = _points(sweep, include_saturated)
    n = lam * np.maximum(out - 1, 0) * tpot
    return n[np.isfinite(n)]


def _closed_loop_cap(sweep, include_saturated: bool) -> float | None:
    """Sequences the engine runs at most, read off a closed-loop sweep's plateau, or None.

    A closed-loop level queues inside the engine when its clients outnumber the sequences
    decoding (:func:`_running`) by a quarter or more; when at least two such levels decode about
    the same number of sequences (within 15 %) and complete about the same throughput (within
    10 %), that number is the engine's effective limit."""
    frames = [sweep.table]
    sat = getattr(sweep, "saturated", None)
    if include_saturated and sat is not None and len(sat):
        frames.append(sat)
    import pandas as pd

    tab = pd.concat(frames, ignore_index=True)
    if not _closed_loop(tab):
        return None
    one = Sweep.from_frame(tab.assign(saturated=False), name=sweep.name)
    lam, tpot, out, _ = _points(one, False)
    run = lam * np.maximum(out - 1, 0) * tpot
    conc = np.asarray(one.table["concurrency"], dtype=float)
    q = np.isfinite(run) & np.isfinite(conc) & (conc >= 1.25 * run) & (run > 0)
    if q.sum() < 2:
        return None
    r, x = run[q], lam[q]
    if np.ptp(r) > 0.15 * np.median(r) or np.ptp(x) > 0.10 * np.median(x):
        return None
    return float(np.median(r))


def _slots_from_data(limits: EngineLimits, sweep, include_saturated: bool, notes: list) -> EngineLimits:
    """Raise a ``max_num_seqs`` that is only a default to what the sweep shows running.

    When the engine's limit is not recorded, a measured point that ran more sequences at once
    (:func:`_running`) than the default allows shows the default is wrong for this engine
    (SGLang, TGI and newer vLLM on large GPUs admit far more than 256): the limit becomes at
    least what ran."""
    src = str(limits.sources.get("max_num_seqs", ""))
    if src in ("flag", "given") or src.startswith("recorded"):
        return limits
    n = _running(sweep, include_saturated)
    if not len(n):
        return limits
    cap = _closed_loop_cap(sweep, include_saturated)
    if cap is not None and cap < limits.max_num_seqs:
        new = int(math.ceil(cap))
        notes.append(f"max_num_seqs: at the highest concurrencies the sweep shows about {cap:.0f} sequences decoding "
                     "at once (completions × output tokens × TPOT) while more clients wait and the throughput stays "
                     f"flat: the engine admits about {new} (its limit or its KV cache), not the default "
                     f"{limits.max_num_seqs}; the rest of the clients queue inside the engine, and their TTFT holds "
                     "that wait (pass --max-num-seqs to set the engine's limit)")
        sources = dict(limits.sources, max_num_seqs=f"the plateau of a closed-loop sweep ({new} decoding at once)")
        return dataclasses.replace(limits, max_num_seqs=new, sources=sources)
    seen = float(np.max(n))
    sat = getattr(sweep, "saturated", None)
    if (include_saturated and sat is not None and len(sat) and not _closed_loop(sweep.table)
            and seen < 0.95 * limits.max_num_seqs):
        # requests queued at the saturated levels while the engine decoded no more than this many:
        # an engine that admits by its own estimate of the KV cache it will need (SGLang) holds
        # fewer than its limit
        new = int(math.ceil(seen))
        notes.append(f"max_num_seqs: at its saturated levels, with requests queued, the sweep shows at most about "
                     f"{seen:.0f} sequences decoding at once (completions × output tokens × TPOT): the engine admits "
                     f"about {new}, not the default {limits.max_num_seqs} (pass --max-num-seqs to set the limit)")
        sources = dict(limits.sources, max_num_seqs=f"what the saturated levels show running ({new})")
        return dataclasses.replace(limits, max_num_seqs=new, sources=sources)
    if seen <= 1.05 * limits.max_num_seqs:
        return limits
    new = int(math.ceil(seen))
    notes.append(f"max_num_seqs: the sweep shows about {seen:.0f} sequences decoding at once (completions × output "
                 f"tokens × TPOT), more than the default {limits.max_num_seqs} allows; taken as {new}, at least what "
                 "ran (pass --max-num-seqs to set the engine's limit)")
    sources = dict(limits.sources, max_num_seqs=f"at least what the sweep shows running ({new})")
    return dataclasses.replace(limits, max_num_seqs=new, sources=sources)


def _largest_step(lam, tpot, out, inp, limits) -> float:
    """Tokens of the largest step the busiest measured level would run: its decoding sequences
    (Little's law) and the prompts of a burst of arrivals during one step (mean ``λ T`` plus
    three standard deviations plus one), within the batched-token budget."""
    ok = np.isfinite(lam) & np.isfinite(tpot) & (lam > 0)
    if not ok.any():
        return math.nan
    i = int(np.argmax(np.where(ok, lam, -1)))
    m = lam[i] * tpot[i]
    k = lam[i] * tpot[i] * max(out[i] - 1, 0) + inp[i] * (m + 3 * math.sqrt(m) + 1)
    return float(min(k, limits.max_num_batched_tokens + limits.max_num_seqs))


def _bend_step(model: "EngineModel", hardware, k_seen: float, prefix_caching: bool | None = None,
               k_step: float = math.nan) -> None:
    """Past the measured work per step, hold the step cost's slope to the physical floor.

    The fitted cost stands where the measured points reach: up to ``k_step`` tokens, the largest
    single step the busiest measured level would run (its mean steps hold ``k_seen``). Past that
    a fitted curvature goes on along its tangent, and the roofline of one step (:meth:`capbook.engine.hardware.Hardware.step_time_floor`)
    bounds that: at the sweep's mix of decoded and prompt tokens a step is the larger of a memory
    line (``weights / bandwidth + a_m k``) and a compute line (``a_c k``), so past their crossing
    (the knee) each further token costs at least ``a_c``, the FLOPs of one token at the GPUs'
    dense peak. Where the tangent is shallower than that (a sweep measured only light, memory-bound
    steps), the slope becomes ``a_c`` past ``max(k_seen, knee)``. Nothing changes without
    hardware facts or where the fitted slope is already steeper (prompt tokens, compute bound in
    every measured step, are in it). With prefix caching on (or not recorded off) a prompt token may
    cost no FLOPs at all, so only the decoded tokens' share of ``a_c`` is a floor."""
    if math.isfinite(k_step) and k_step > 0 and model.step.c2_s > 0:
        # a curvature fitted inside the measured points is no law past them: its tangent goes on
        model.step = dataclasses.replace(model.step, fit_tokens=float(k_step))
        model.__dict__.pop("_cache", None)
    if hardware is None or not getattr(hardware, "known", False) or not math.isfinite(k_seen):
        return
    L, P = model.output_tokens, model.prompt_tokens
    w = max(L - 1 + P, 1.0)
    ctx = P + L / 2
    bw = hardware.tensor_parallel * hardware.gpu.bandwidth_tbs * 1e12          # bytes/s of the replica
    base = hardware.weight_bytes / bw                                          # the weights' read, s
    a_m = (L - 1) / w * ctx * hardware.kv_bytes_per_token / bw                 # KV reads per token of work
    a_c = 2.0 * hardware.model.active_b * 1e9 / (hardware.tensor_parallel
                                                  * hardware.gpu.peak_flops(hardware.weight_dtype))
    st = model.step
    eff = ""
    if prefix_caching is not False:
        # a prompt token found in the prefix cache costs no FLOPs: only the decoded tokens are sure
        # to be computed (prefix caching is on unless the sweep records it off: vLLM V1, SGLang)
        a_c *= (L - 1) / w
    elif P > 0 and st.c_s > a_m and model.limits.policy == "mixed":
        # every prompt token is computed: the fitted slope is the prompt tokens' FLOPs at the
        # efficiency the engine reaches (η of the dense peak) plus the decoded tokens' KV reads,
        # c = (P / w) a_c / η + a_m; past the knee every token costs a_c / η
        eta = min(1.0, max(0.25, (P / w) * a_c / (st.c_s - a_m)))
        a_c /= eta
        eff = f" at the {eta:.0%} of the dense peak the fitted prompt tokens reach"
    where = f"{hardware.model.name} on {hardware.tensor_parallel} × {hardware.gpu.name}"
    if a_c <= a_m:
        model.notes.append(f"physical model ({where}): the step stays memory bound at every batch "
                           f"({a_c * 1e6:.3g} µs of FLOPs ≤ {a_m * 1e6:.3g} µs of KV reads per token); the fitted "
                           "cost is extrapolated as it is")
        return
    knee = base / (a_c - a_m)
    kb = max(k_seen, knee)
    slope = st.c_s + 2 * st.c2_s * min(kb, st.fit_tokens)
    if slope >= a_c:
        model.notes.append(
            f"physical model ({where}): past {knee:.0f} tokens of work a step is compute bound, "
            f"{a_c * 1e6:.3g} µs per token{eff or ' at the dense peak'}; the fitted {slope * 1e6:.3g} µs per token is "
            "steeper, so it stands")
        return
    model.step = dataclasses.replace(st, bend_tokens=float(kb), bend_s=float(a_c - slope))
    model.__dict__.pop("_cache", None)
    model.notes.append(
        f"physical model ({where}): past {knee:.0f} tokens of work a step is compute bound, {a_c * 1e6:.3g} µs per "
        f"token{eff or ' at the dense peak'}, steeper than the fitted {slope * 1e6:.3g} µs; past {kb:.0f} tokens (the "
        f"most the sweep measured, or the knee) the step cost rises at {a_c * 1e6:.3g} µs per token")


def fit_engine(sweep, *, max_num_seqs=None, kv_cache_tokens=None, max_num_batched_tokens=None,
               chunked_prefill=None, policy=None, include_saturated: bool = True, hardware=None) -> EngineModel:
    """Fit an :class:`EngineModel` to a sweep (any importer's; open- or closed-loop).

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        The measured points. Saturated points (:attr:`~capbook.sweeps.sweep.Sweep.saturated`) count
        in the step-cost fit unless ``include_saturated`` is False.
    max_num_seqs, kv_cache_tokens, max_num_batched_tokens, chunked_prefill, policy
        Engine limits (see :func:`engine_limits`); default: read from the sweep.
    include_saturated : bool
        Use the saturated points in the step-cost fit.
    hardware : capbook.engine.hardware.Hardware, optional
        Model and GPU facts (see :func:`capbook.engine.hardware.hardware_for`). Default: the sweep's
        ``hardware`` attribute when the caller set one (the CLI's ``--gpu``, ``--model`` …),
        else what the sweep's columns record.

    Returns
    -------
    EngineModel
    """
    if hardware is None:
        hardware = getattr(sweep, "hardware", None)
    if hardware is None:
        hardware = hardware_for(sweep)
    limits = engine_limits(sweep, max_num_seqs=max_num_seqs, kv_cache_tokens=kv_cache_tokens,
                           max_num_batched_tokens=max_num_batched_tokens,
                           chunked_prefill=chunked_prefill, policy=policy, hardware=hardware)
    override = getattr(sweep, "_prefill_override", None)
    sweep, past = _before_the_peak(sweep)
    step, notes = fit_step_cost(sweep, include_saturated=include_saturated,
                                prompt_cost_s=None if override is None else 1.0 / float(override))
    if past:
        notes.append(past)
    tab = sweep.table
    P = float(np.mean(tab["mean_input_tokens"]))
    L = float(np.mean(tab["mean_output_tokens"]))
    if L < 1:
        raise ValueError(f"sweep {sweep.name!r}: mean output tokens {L:g} < 1")
    if limits.kv_cache_tokens is not None and limits.kv_cache_tokens < P + L:
        raise ValueError(f"kv_cache_tokens {limits.kv_cache_tokens} cannot hold one request of "
                         f"{P + L:.0f} tokens (mean prompt plus mean output)")
    limits = _slots_from_data(limits, sweep, include_saturated, notes)
    oq = _quantile_sampler(tab, "output_tokens")
    src = limits.sources
    notes.append(
        f"engine: {limits.policy} prefill and decode steps, chunked prefill "
        f"{'on' if limits.chunked_prefill else 'off'} ({src.get('chunked_prefill')}), max_num_seqs "
        f"{limits.max_num_seqs} ({src.get('max_num_seqs')}), batched-token budget "
        f"{limits.max_num_batched_tokens} ({src.get('max_num_batched_tokens')}), KV cache "
        + (f"{limits.kv_cache_tokens:,} tokens ({src.get('kv_cache_tokens')})" if limits.kv_cache_tokens
           is not None else "not binding (no model and GPU known: pass --gpu and --model, or kv_cache_tokens=)"))
    if oq is None:
        notes.append(f"output lengths: the sweep records only the mean ({L:.4g} tokens); every "
                     "request is given that length")
    model = EngineModel(step, limits, P, L, oq, _prompt_p99(sweep), 0.0, 0.0, sweep.name, notes)
    model.fitted_sweep = sweep
    model.hardware = hardware
    if limits.policy == "separate":
        model.step = _calibrate_separate(model, sweep, include_saturated)
    raw = model.step
    _calibrate_step(model, sweep, include_saturated)
    lam_, tp_, out_, inp_ = _points(sweep, include_saturated)
    k_all = lam_ * tp_ * (np.maximum(out_ - 1, 0) + inp_)
    if model.step is not raw and model.step.cp_s is None:
        # the refinement targets the unsaturated levels only; it must not lose the saturated ones
        ok = np.isfinite(k_all) & np.isfinite(tp_) & (tp_ > 0)
        worst = float(np.max(np.abs(model.step(k_all[ok]) / tp_[ok] - 1))) if ok.any() else 0.0
        worst_raw = float(np.max(np.abs(raw(k_all[ok]) / tp_[ok] - 1))) if ok.any() else 0.0
        if worst > max(0.15, 2 * worst_raw):
            model.step = raw
            model.__dict__.pop("_cache", None)
            model.notes.append(f"step cost refinement not used: it fits the unsaturated levels but misses a measured "
                               f"point's step time by {worst:.0%} (the fitted cost misses by {worst_raw:.0%})")
    k_seen = float(np.max(k_all[np.isfinite(k_all)])) if np.isfinite(k_all).any() else math.nan
    model.k_seen = k_seen
    thr = np.asarray(lam_, dtype=float)
    model.served_rps = float(np.nanmax(thr)) if np.isfinite(thr).any() else math.nan
    model.served_lengths = (float(P), float(L))
    _bend_step(model, hardware, k_seen, _as_bool(_col(tab, "prefix_caching")),
               _largest_step(lam_, tp_, out_, inp_, limits))
    _calibrate_overhead(model, sweep)
    k_sat = model.slots * (L - 1 + P) / L
    if k_sat > 1.5 * k_seen:
        bound = ("the physical model of the hardware bends the step cost past "
                 f"{model.step.bend_tokens:.0f} tokens ({model.step.bend_s * 1e6:.3g} µs more per token, compute bound)"
                 if model.step.bend_s > 0 else
                 "the physical model of the hardware checks it (the fitted slope is steeper than a step's FLOPs at "
                 "the dense peak), but a real step often turns steeper still past a few hundred tokens, so the "
                 "saturation rate may be optimistic" if hardware.known
                 else "nothing bounds the straight line: no model or GPU is known (pass --gpu and --model)")
        model.notes.append(
            f"extrapolated {k_sat / k_seen:.1f}× past the measured work per step: the measured points reach "
            f"{k_seen:.0f} tokens of work per step, saturation needs about {k_sat:.0f}; {bound}")
    spec = _col(tab, "num_speculative_tokens")
    if spec is not None or "eagle" in str(_col(tab, "engine_args") or "").lower():
        model.notes.append("speculative decoding: the fit folds the acceptance rate into the step cost as if it "
                           "did not change with the batch; on real vLLM runs with EAGLE-3 this overstated "
                           "saturation by about a third (see the chapter Where the textbook breaks)")
    kvs = limits.kv_sequences(P + L / 2)
    if kvs < limits.max_num_seqs:
        model.notes.append(f"the KV cache binds before max_num_seqs: about {kvs:.0f} sequences of "
                           f"{P + L / 2:.0f} tokens fit, fewer than {limits.max_num_seqs}")
    return model


#: :func:`fit_engine` of each sweep object, kept beside it (weakly: a dropped sweep drops its fit).
_FITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fitted_engine(sweep) -> "EngineModel":
    """:func:`fit_engine` of ``sweep`` with its defaults, once per sweep object.

    The fit reads only the sweep's table, notes, configuration and hardware, and a plan is often
    re-planned on the same sweep (other objectives, tenant pools, configurations, quantiles): the
    fit is kept here, keyed by the sweep object, and redone when any of those changed. Callers
    get the fitted model itself and must not mutate it (``dataclasses.replace`` makes a copy).

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep

    Returns
    -------
    EngineModel
    """
    key = getattr(sweep, "fingerprint", None)
    try:
        hit = _FITS.get(sweep)
    except TypeError:  # a sweep-like object that cannot be keyed: fit every time
        return fit_engine(sweep)
    if key is None:
        return fit_engine(sweep)
    if hit is None or hit[0] != key:
        hit = (key, fit_engine(sweep))
        _FITS[sweep] = hit
    return hit[1]
