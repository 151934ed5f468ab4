"""Predict one replica's latency at an open-loop arrival rate: three models side by side.

:func:`predict` fits to any sweep the importers read (closed- or open-loop; only its own
points) and answers, for an arrival rate ``R`` in requests per second: the saturation rate,
whether ``R`` is below it, TTFT p50 and p99, TPOT p50 and mean E2E, and (with a TTFT p99
target) the highest rate that meets it. Three models answer:

``mmc``
    The textbook: M/M/c with ``c = max_num_seqs`` servers, each serving a request in the mean
    E2E measured at the lightest load. Waits are Erlang C; TTFT is the wait plus the lightest
    load's TTFT. It ignores that every running sequence slows the others down, so it
    overstates capacity wherever the batch matters.
``load_dependent``
    The exactly solvable birth–death queue (:class:`capbook.engine.loadqueue.LoadDependentQueue`)
    with ``c`` = the engine's slots and a completion rate ``n / (L · t_step(n, R))`` from the
    fitted step cost (:meth:`capbook.engine.stepmodel.EngineModel.step_time_at`). Right for the slot
    wait and the saturation rate; its TTFT is that wait plus the overhead and one step, so it
    misses the tail that comes from how prompts are scheduled inside the engine, and its
    service times are exponential.
``simulation``
    The step-level engine (:class:`capbook.engine.stepmodel.EngineModel`): prompts batched per step up to
    the token budget, chunked or not, KV-cache admission, measured output lengths. The model
    the plan relies on: it is the one checked against real vLLM runs
    (``benchmarks/bench_fidelity.py``; the chapter *Where the textbook breaks*).

Under ``arrivals="uniform"`` the two queueing models scale their waits by the Allen–Cunneen
factor ``(Ca² + 1) / 2 = 1/2``; the simulation draws evenly spaced arrivals.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from capbook.engine.loadqueue import highest_passing, LoadDependentQueue
from capbook.engine.stepmodel import _row_mean, EngineModel, ExtrapolationError, fit_engine
from capbook.queueing import erlang_c
from capbook.validation import choice, integer, positive

__all__ = ["ModelPrediction", "Prediction", "predict", "MODELS", "PRIMARY_MODEL"]

#: The three models, in the order they are shown.
MODELS = ("mmc", "load_dependent", "simulation")
#: The model whose numbers appear at the top level (and that ``capbook plan`` relies on).
PRIMARY_MODEL = "simulation"
_KEYS = ("saturation_rps", "stable", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "e2e_mean_s", "max_rate_rps")


@dataclass
class ModelPrediction:
    """One model's answer at one arrival rate (seconds, requests per second).

    Latencies are None when the rate is not stable (the queue grows without bound), and
    ``max_rate_rps`` is None when no target was given or no rate meets it.
    """

    model: str
    saturation_rps: float
    stable: bool
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    e2e_mean_s: float | None
    max_rate_rps: float | None = None
    notes: list = field(default_factory=list)

    def as_dict(self) -> dict:
        """The JSON keys (floats, None for missing)."""
        out = {}
        for k in _KEYS:
            v = getattr(self, k)
            out[k] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) else (
                bool(v) if k == "stable" else float(v))
        return out


@dataclass
class Prediction:
    """Three models' answers at one rate; :attr:`model` names the one at the top level."""

    rate_rps: float
    arrivals: str
    models: dict
    engine: EngineModel
    ttft_p99_target_s: float | None = None
    model: str = PRIMARY_MODEL
    notes: list = field(default_factory=list)

    @property
    def primary(self) -> ModelPrediction:
        """The answer of :attr:`model`."""
        return self.models[self.model]

    def __getattr__(self, name):
        if name in _KEYS:
            return getattr(self.models[self.model], name)
        raise AttributeError(name)

    def as_dict(self) -> dict:
        """JSON-ready: the primary model's keys at the top level, every model under ``models``."""
        out = {"rate_rps": self.rate_rps, "arrivals": self.arrivals, "model": self.model}
        out.update(self.primary.as_dict())
        out["ttft_p99_target_s"] = self.ttft_p99_target_s
        out["models"] = {name: p.as_dict() for name, p in self.models.items()}
        e = self.engine
        out["engine"] = {
            "slots": e.slots, "max_num_seqs": e.limits.max_num_seqs,
            "kv_cache_tokens": e.limits.kv_cache_tokens,
            "max_num_batched_tokens": e.limits.max_num_batched_tokens,
            "chunked_prefill": e.limits.chunked_prefill, "policy": e.limits.policy,
            "step_t0_s": e.step.t0_s, "step_c_s": e.step.c_s, "step_c2_s": e.step.c2_s,
            "prompt_tokens": e.prompt_tokens, "output_tokens": e.output_tokens,
            "overhead_median_s": e.overhead_median_s, "overhead_sigma": e.overhead_sigma,
        }
        out["notes"] = list(self.notes)
        return out


# -- the three models ---------------------------------------------------------------------------

def _base_ttft(engine: EngineModel, quantiles: np.ndarray, extra_s: float) -> np.ndarray:
    """Overhead quantiles plus a fixed engine time (s)."""
    return engine.overhead_quantile(quantiles) + extra_s


_QGRID = (np.arange(400) + 0.5) / 400


def _ttft_from_wait(tail, base: np.ndarray, q: float) -> float:
    """Quantile ``q`` of wait + base, with P(wait > t) = tail(t) and base given by quantiles."""
    def exceed(x):
        t = x - base
        return float(np.mean(np.where(t < 0, 1.0, tail(np.maximum(t, 0.0)))))

    lo, hi = 0.0, max(float(base.max()), 1e-3)
    while exceed(hi) > 1 - q:
        hi *= 2
        if hi > 1e7:
            return math.inf
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if exceed(mid) > 1 - q:
            lo = mid
        else:
            hi = mid
    return hi


def _lightest(sweep):
    tab = sweep.table
    i = int(np.argmin(np.asarray(tab["request_throughput_rps"], dtype=float)))
    return tab.iloc[i]


def _mmc(engine, sweep, rate, ac_factor):
    row = _lightest(sweep)
    e2e = _row_mean(row, "e2e")
    if e2e is None:
        e2e = float(row["ttft_p50_s"]) + (float(row["mean_output_tokens"]) - 1) * float(row["tpot_p50_s"])
    c = engine.limits.max_num_seqs
    mu = 1.0 / float(e2e)
    sat = c * mu
    notes = [f"c = {c} servers (max_num_seqs), service time {float(e2e):.4g} s (mean E2E at the lightest load)"]
    if rate >= sat:
        return ModelPrediction("mmc", sat, False, None, None, None, None, notes=notes)
    pw = float(erlang_c(c, rate / mu)) if rate > 0 else 0.0
    theta = (c * mu - rate) / ac_factor

    def tail(t):
        return pw * np.exp(-theta * t)

    ttft1 = float(row["ttft_p50_s"])
    ttft99 = float(row["ttft_p99_s"]) if np.isfinite(row.get("ttft_p99_s", np.nan)) else ttft1
    sig = math.log(max(ttft99 / ttft1, 1.0)) / 2.3263478740408408
    from scipy.special import ndtri

    base = ttft1 * np.exp(sig * ndtri(_QGRID))
    mean_wait = pw / (c * mu - rate) * ac_factor
    return ModelPrediction("mmc", sat, True, _ttft_from_wait(tail, base, 0.5), _ttft_from_wait(tail, base, 0.99),
                           float(row["tpot_p50_s"]), float(e2e) + mean_wait, notes=notes)


def _load_dependent(engine: EngineModel, rate, ac_factor):
    S, L = engine.slots, engine.output_tokens
    notes = [f"{S} slots; completion rate n / (L · t_step(n)) from the fitted step cost"]
    step = engine.step_time_at(np.arange(1, S + 1), rate)
    if not np.all(np.isfinite(step)):
        return ModelPrediction("load_dependent", _ld_saturation(engine), False, None, None, None, None, notes=notes)
    q = LoadDependentQueue(S, lambda n: L * np.asarray(engine.step_time_at(n, rate)),
                           tpot=lambda n: engine.step_time_at(n, rate))
    sol = q.solve(rate)
    sat = _ld_saturation(engine)
    if not sol.stable or rate >= sat:
        return ModelPrediction("load_dependent", sat, False, None, None, None, None, notes=notes)
    step_now = float(engine.step_time_at(max(sol.mean_running, 1.0), rate))
    base = _base_ttft(engine, _QGRID, float(engine.step(engine.prompt_tokens)) + 0.5 * step_now)

    def tail(t):
        return np.asarray(sol.prob_wait_exceeds(np.asarray(t) / ac_factor))

    over_mean = float(np.mean(engine.overhead_quantile(_QGRID)))
    e2e = sol.mean_in_system / rate if rate > 0 else L * float(engine.step(1))
    e2e = (e2e - sol.mean_wait) + sol.mean_wait * ac_factor + over_mean
    return ModelPrediction("load_dependent", sat, True, _ttft_from_wait(tail, base, 0.5),
                           _ttft_from_wait(tail, base, 0.99), sol.tpot_quantile(0.5), e2e, notes=notes)


def _ld_saturation(engine: EngineModel) -> float:
    """Highest rate the birth–death model carries: the fixed point of ``R = S / (L t_step(S, R))``
    (NaN when the fit may not be extrapolated that far: :meth:`EngineModel.limit_rps`)."""
    if engine.limit_rps() is not None:
        return math.nan
    S, L = engine.slots, engine.output_tokens
    lo, hi = 0.0, engine.mean_field_saturation_rps() * 4 + 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        st = float(engine.step_time_at(S, mid))
        if math.isfinite(st) and S / (L * st) > mid:
            lo = mid
        else:
            hi = mid
    return lo


def _simulation(engine: EngineModel, rate, arrivals, seed, requests, duration_s=None):
    notes = ["step-level engine simulation"]
    lim = engine.limit_rps()
    if lim is not None:   # saturation too far past the measured work: not a number, but rates below the limit are
        if rate > lim:
            raise ExtrapolationError(engine.refusal(), lim)
        sat = math.nan
    else:
        sat = engine.saturation_rps(seed=seed)
    if rate >= sat:
        return ModelPrediction("simulation", sat, False, None, None, None, None, notes=notes)
    run = engine.simulate(rate, arrivals=arrivals, seed=seed, requests=requests, duration_s=duration_s)
    if not len(run.ttft_s):
        return ModelPrediction("simulation", sat, False, None, None, None, None, notes=notes)
    return ModelPrediction("simulation", sat, True, float(np.quantile(run.ttft_s, 0.5)),
                           float(np.quantile(run.ttft_s, 0.99)), float(np.median(run.tpot_s)),
                           float(np.mean(run.e2e_s)), notes=notes)


def _max_rate(fn, sat: float, ttft_target_s: float, tol: float = 0.005) -> float | None:
    """Highest rate in (0, sat) whose TTFT p99 from ``fn(rate)`` meets ``ttft_target_s`` (TTFT p99 rises
    with the rate); None when even a trickle misses it."""
    def ok(r):
        p = fn(r)
        return p.stable and p.ttft_p99_s is not None and p.ttft_p99_s <= ttft_target_s

    return highest_passing(ok, sat * 1e-3, sat * (1 - 1e-6), tol)


def predict(sweep, rate_rps, *, arrivals: str = "poisson", max_num_seqs=None, kv_cache_tokens=None,
            ttft_p99_target_s=None, seed: int = 0, requests: int = 6000, duration_s=None,
            engine: EngineModel | None = None, models=MODELS, hardware=None) -> Prediction:
    """Predict one replica at an open-loop arrival rate with M/M/c, the load-dependent queue and
    the engine simulation.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        Any sweep the importers read; the models are fitted to its points only.
    rate_rps : float
        Arrival rate, requests per second (> 0).
    arrivals : {"poisson", "uniform"}
        Arrival process.
    max_num_seqs : int, optional
        The engine's slot limit; default: the sweep's engine flags.
    kv_cache_tokens : int, optional
        KV-cache capacity in tokens; default: estimated from the model and GPU named.
    ttft_p99_target_s : float, optional
        TTFT p99 objective, seconds: adds ``max_rate_rps`` (the highest rate meeting it).
    seed : int
        Seed of the simulation (the same seed gives the same numbers).
    requests : int
        Simulated requests measured at each rate (steady state, after a warm-up).
    duration_s : float, optional
        Instead of the steady state, simulate a load-generator stage: ``duration_s`` seconds
        of arrivals into an idle engine, every request measured (the queue near saturation
        has not grown to its steady state within one stage).
    engine : capbook.engine.stepmodel.EngineModel, optional
        A model already fitted with :func:`capbook.engine.stepmodel.fit_engine` (skips the fit).
    hardware : capbook.engine.hardware.Hardware, optional
        Model and GPU facts for the fit (see :func:`capbook.engine.stepmodel.fit_engine`).
    models : sequence of str
        Which of :data:`MODELS` to run.

    Returns
    -------
    Prediction
        ``.as_dict()`` gives the JSON of ``capbook predict --json``.

    Examples
    --------
    >>> from capbook.sweeps.sweep import load_sample_sweep
    >>> p = predict(load_sample_sweep("llama8b_h100_chat"), 2.0)
    >>> p.model, p.stable
    ('simulation', True)
    >>> p.models["mmc"].saturation_rps > p.models["simulation"].saturation_rps
    True
    """
    rate = positive(rate_rps, "rate_rps")
    if engine is not None and (max_num_seqs is not None or kv_cache_tokens is not None):
        raise ValueError("max_num_seqs and kv_cache_tokens set the limits of a new fit; with engine= the "
                         "fitted model's limits apply (pass them to capbook.engine.stepmodel.fit_engine instead)")
    choice(arrivals, "arrivals", ("poisson", "uniform"))
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"models: {unknown} are not among {list(MODELS)}")
    target = None if ttft_p99_target_s is None else positive(ttft_p99_target_s, "ttft_p99_target_s")
    requests = integer(requests, "requests", minimum=1)
    duration_s = None if duration_s is None else positive(duration_s, "duration_s")
    eng = engine or fit_engine(sweep, max_num_seqs=max_num_seqs, kv_cache_tokens=kv_cache_tokens,
                               hardware=hardware)
    ac = 0.5 if arrivals == "uniform" else 1.0
    limit = eng.limit_rps()
    if limit is not None and rate > limit:
        raise ExtrapolationError(eng.refusal(), limit)

    def run(name, r):
        if name == "mmc":
            return _mmc(eng, eng.fitted_sweep if eng.fitted_sweep is not None else sweep, r, ac)
        if name == "load_dependent":
            return _load_dependent(eng, r, ac)
        return _simulation(eng, r, arrivals, seed, requests, duration_s)

    out = {}
    for name in models:
        p = run(name, rate)
        if target is not None:
            top = p.saturation_rps if math.isfinite(p.saturation_rps) else (limit or math.nan)
            if name == "mmc" or math.isfinite(top):
                p.max_rate_rps = _max_rate(lambda r, n=name: run(n, r), top if name != "mmc" else p.saturation_rps,
                                           target)
        out[name] = p
    primary = PRIMARY_MODEL if PRIMARY_MODEL in out else list(out)[0]
    notes = list(eng.notes)
    if limit is not None:
        notes.append(f"saturation not predicted: {eng.refusal()}")
    elif "simulation" in out and eng._served_applies():
        sim_sat = eng.simulated_saturation_rps(seed=seed)
        if sim_sat < eng.served_rps * (1 - 1e-9):
            notes.append(f"capacity: the simulated engine saturates at {sim_sat:.4g} req/s, below the "
                         f"{eng.served_rps:.4g} req/s the sweep measured being served; the capacity shown is what "
                         "was served (a measurement, a floor), and the simulation's latencies near it run high")
    if not out[primary].stable:
        notes.append(f"{rate:g} req/s is past the predicted capacity of {out[primary].saturation_rps:.4g} "
                     "req/s: the queue grows without bound, so no latency is predicted")
    return Prediction(rate, arrivals, out, eng, target, primary, notes)
