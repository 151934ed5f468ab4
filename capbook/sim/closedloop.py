r"""Closed-loop load on one engine replica: ``N`` clients, each sending its next request when its
previous one completes.

This is how llmperf, AIPerf, genai-perf and ``vllm bench serve --max-concurrency`` drive a
server: the concurrency is held, the arrival rate is whatever the server lets through. The
engine is the step-level model of :mod:`capbook.engine.stepmodel`, run by the fleet simulator
(:mod:`capbook.sim.fleetsim`) with arrivals injected at completions:

* at time 0 every client sends a request; a client whose request completes (as the client sees
  it: the engine's last token plus the fitted client overhead) waits ``think_time_s`` and sends
  the next one;
* when ``N`` exceeds the sequences the engine runs at once (``max_num_seqs``, or fewer when the
  KV cache binds) the rest wait in the engine's queue, and that wait is part of their TTFT, as
  it is for a real client;
* the throughput is measured between the first measured request's send time (after the
  warm-up) and the last send, while all ``N`` clients are in the loop; the last ``N`` requests
  sent (which run while the loop drains) are left out of the latencies.

Little's law holds for the loop by construction (every client is always either waiting for a
request or thinking): :math:`N = X\,(\overline{E2E} + Z)` with ``X`` the completions per second
and ``Z`` the think time. With ``N`` above the slots ``S`` the engine is the machine-repairman
model's repair shop: ``X = S / T`` (``T`` the service time with ``S`` running) and the mean wait
in the engine's queue is ``N / X − T − Z``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from heapq import heappop

import numpy as np

from capbook.sim.fleetsim import _Fleet
from capbook.validation import integer, nonnegative

__all__ = ["ClosedLoopRun", "simulate_closed"]


@dataclass
class ClosedLoopRun:
    """What one closed-loop simulation measured (the requests after the warm-up). Seconds.

    Attributes
    ----------
    ttft_s, e2e_s, tpot_s : numpy.ndarray
        Per measured request, as the client measures them (client overhead included; TTFT
        includes the wait in the engine's queue).
    completion_rps : float
        Completions per second while every client was in the loop.
    concurrency : int
        Clients ``N``.
    think_time_s : float
        Seconds each client waits between a completion and its next request.
    window_s : float
        Length of the throughput window, seconds.
    preemptions : int
        Sequences preempted for KV-cache space.
    slots : int
        Sequences the engine runs at once (:attr:`capbook.engine.stepmodel.EngineModel.slots`).
    """

    ttft_s: np.ndarray
    e2e_s: np.ndarray
    tpot_s: np.ndarray
    completion_rps: float
    concurrency: int
    think_time_s: float
    window_s: float
    preemptions: int
    slots: int

    @property
    def arrival_rps(self) -> float:
        """Sends per second: equal to the completions in a closed loop."""
        return self.completion_rps

    def summary(self) -> dict:
        """Throughput (req/s), TTFT p50/p99, TPOT p50 and mean E2E (s) of the measured requests."""
        q = (lambda x, p: float(np.quantile(x, p)) if len(x) else math.nan)
        return {"concurrency": self.concurrency, "throughput_rps": self.completion_rps,
                "ttft_p50_s": q(self.ttft_s, 0.5), "ttft_p99_s": q(self.ttft_s, 0.99),
                "tpot_p50_s": q(self.tpot_s, 0.5),
                "e2e_mean_s": float(np.mean(self.e2e_s)) if len(self.e2e_s) else math.nan}


class _DoneList(list):
    """The fleet's per-request completion times; setting one calls the client loop back."""

    __slots__ = ("hook",)

    def __setitem__(self, i, t):
        list.__setitem__(self, i, t)
        self.hook(i, t)


def simulate_closed(engine, concurrency: int, *, requests: int = 2000, seed: int = 0,
                    rng: np.random.Generator | None = None, think_time_s: float = 0.0,
                    warmup: int | None = None, ramp_s: float | None = None, overhead: bool = True,
                    input_tokens=None, output_tokens=None) -> ClosedLoopRun:
    """Simulate ``concurrency`` closed-loop clients on one engine replica (see the module docstring).

    Parameters
    ----------
    engine : capbook.engine.stepmodel.EngineModel
        The fitted replica (step cost, limits, lengths, client overhead).
    concurrency : int
        Clients ``N``, each with one request in flight at a time.
    requests : int
        Requests measured (after the warm-up).
    seed, rng
        Randomness of the lengths and the client overhead (``rng`` wins when given).
    think_time_s : float
        Seconds a client waits between a completion and its next request (0: at once).
    warmup : int, optional
        Requests sent first and not measured (default ``max(2 N, requests // 10)``).
    ramp_s : float, optional
        The clients' first requests are sent at uniformly random times in ``[0, ramp_s)``
        seconds. Default: one request's time at that concurrency (mean output tokens × the
        step time with ``min(N, slots)`` sequences decoding), so that the clients are spread
        over the cycle as in a long run; ``0`` sends them all at time 0 (then, with lengths
        that never vary, they stay in lock step).
    overhead : bool
        Add the engine's fitted client overhead (HTTP, tokenisation) to each request, as
        :meth:`capbook.engine.stepmodel.EngineModel.simulate` does; a client sends its next request once it
        has seen the completion, overhead included.
    input_tokens, output_tokens : array_like of int, optional
        Prompt and output tokens of every request (``warmup + requests + concurrency`` of them,
        in the order sent); default: drawn from the engine's fitted length distributions (the
        output lengths geometric with the measured mean when the sweep recorded only the mean:
        constant lengths would keep the clients in lock step).

    Returns
    -------
    ClosedLoopRun
    """
    n_cli = integer(concurrency, "concurrency", minimum=1)
    requests = integer(requests, "requests", minimum=1)
    think = nonnegative(think_time_s, "think_time_s")
    warmup = max(2 * n_cli, requests // 10) if warmup is None else integer(warmup, "warmup", minimum=0)
    total = warmup + requests + n_cli          # the last N sent are the drain, not measured
    rng = rng if rng is not None else np.random.default_rng(seed)
    if input_tokens is None or output_tokens is None:
        inp, out = engine._lengths(rng, total)
        if engine.output_quantiles is None and engine.output_tokens > 1:
            # the sweep recorded only the mean output length: the engine would give every request
            # that length, and clients whose requests are prefilled in one step would then finish
            # in one step and come back together for ever (lock step, and a TTFT several times too
            # long); real lengths vary, so draw them geometric with the measured mean
            out = np.maximum(1, rng.geometric(1.0 / float(engine.output_tokens), total)).astype(np.int64)
    else:
        inp = np.asarray(input_tokens).astype(np.int64)
        out = np.asarray(output_tokens).astype(np.int64)
        if inp.shape != (total,) or out.shape != (total,):
            raise ValueError(f"input_tokens and output_tokens must hold warmup + requests + concurrency = {total} "
                             "lengths each (the order the clients send them)")
        if np.any(inp < 1) or np.any(out < 1):
            raise ValueError("input_tokens and output_tokens must be at least 1 per request")
    if overhead and engine.overhead_median_s > 0:
        over = engine.overhead_quantile(np.clip(rng.random(total), 1e-6, 1 - 1e-6))
    else:
        over = np.zeros(total)
    first_n = min(n_cli, total)
    if ramp_s is None:
        ramp_s = float(engine.output_tokens) * float(engine.step(min(n_cli, engine.slots)))
    ramp = nonnegative(ramp_s, "ramp_s")
    starts = np.sort(rng.random(first_n) * ramp) if ramp > 0 else np.zeros(first_n)
    arrival = np.zeros(total)
    f = _Fleet(engine, arrival, inp, out, replicas=1, router="jsq", rng=rng)
    f.core.n = 0                               # every request is sent by the loop (the first N at time 0)
    a = f.a
    over_l = over.tolist()
    state = {"next": 0}
    kind = len(f.core.handlers)

    def issue(t):
        k = state["next"]
        if k >= total:
            return
        state["next"] = k + 1
        f._push(t, kind, k, 0)

    def on_done(i, t):
        issue(t + over_l[i] + think)

    heap, rep = f.heap, f.reps[0]

    def send(k, _, t):
        # every request sent at this instant joins the queue before an idle engine plans its step
        # (clients whose requests finished in one step send together, and one step takes them in)
        ks = [k]
        while heap and heap[0][0] == t and heap[0][2] == kind:
            ks.append(heappop(heap)[3])
        idle = not rep.busy
        if idle:
            rep.busy, saved_m, rep.m = True, rep.m, 1
        for k in ks:
            while True:
                a[k] = t
                f._arrive(k, t)
                if not f.refused[k]:
                    break
                # a request longer than the KV cache is refused at once; its client sends the next one
                k = state["next"]
                if k >= total:
                    break
                state["next"] = k + 1
        if idle:
            rep.busy, rep.m = False, saved_m
            if rep.waiting or rep.prefilling or rep.running:
                f._start(rep, t)

    f.core.handlers.append(send)
    for t_first in starts.tolist():
        issue(t_first)
    done = _DoneList(f.done)
    done.hook = on_done
    f.done = done
    f.run()
    sent = np.asarray(a, dtype=float)
    end = np.asarray(list(done), dtype=float)
    first = np.asarray(f.first, dtype=float)
    refused = np.asarray(f.refused)
    if refused.all():
        raise ValueError(f"every request is longer than the engine's KV cache ({engine.limits.kv_cache_tokens} "
                         "tokens): nothing to simulate")
    if state["next"] < total:      # the loop stalled (a request never finished): say so, do not measure
        raise ValueError(f"the closed loop stopped after {state['next']} of {total} requests: a request never "
                         "finished on this engine (check its limits: max_num_seqs, kv_cache_tokens)")
    # requests in the order they were sent
    order = np.argsort(sent, kind="stable")
    meas = np.zeros(total, dtype=bool)
    meas[order[warmup: total - n_cli]] = True
    meas &= ~refused & np.isfinite(end)
    t_lo = float(sent[order[warmup]]) if warmup < total else 0.0
    t_hi = float(sent[order[-1]])
    client_end = end + over
    in_win = np.isfinite(client_end) & (client_end > t_lo) & (client_end <= t_hi)
    window = t_hi - t_lo
    rate = float(in_win.sum() / window) if window > 0 else math.nan
    ttft = first[meas] - sent[meas] + over[meas]
    e2e = end[meas] - sent[meas] + over[meas]
    o = out[meas]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(o > 1, (end[meas] - first[meas]) / np.maximum(o - 1, 1), np.nan)
    npre = int(sum(r.preempt for r in f.reps))
    return ClosedLoopRun(ttft, e2e, tpot[np.isfinite(tpot)], rate, n_cli, think, float(window), npre,
                         int(engine.slots))
