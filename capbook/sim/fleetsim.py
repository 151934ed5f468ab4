r"""The fleet simulator: step-level engine replicas behind a router, on the event core (:mod:`capbook.sim.eventcore`).

Each replica is the continuous-batching engine of :mod:`capbook.engine.stepmodel`, run one scheduler step
at a time:

* every step decodes each running sequence (one token) and fills the rest of the
  batched-token budget (``max_num_batched_tokens``) with waiting prompts, first come first
  served, up to ``max_num_seqs`` sequences: whole prompts without chunked prefill, chunks of
  them with it; with ``policy="separate"`` (vLLM V0 without chunked prefill) a step that
  prefills decodes nothing, so every running stream pauses for it;
* a step working ``k`` tokens takes ``t0 + c k + c2 k²`` seconds (the fitted
  :class:`capbook.engine.stepmodel.StepCost`);
* a prompt is admitted only while the KV cache holds it; when the cache overflows, the most
  recently admitted sequence is preempted and recomputed later (vLLM's recompute preemption); a
  request that could never fit (prompt plus output above the cache) is refused;
* a prefix-cache hit shortens a request's prefill: the replica keeps the prompt blocks it served
  (Mooncake's ``hash_ids``) or the last context of each session, least recently used first out.

Replicas sit behind a **router** (``router=``):

``"pooled"``
    one shared queue of prompts: an arrival goes to a replica with no prompt of its own waiting
    or part-prefilled (and a free sequence slot), the one whose next step starts first, else
    waits at the router; a replica whose prompts are all taken in pulls the head of the queue.
    The book's load-aware router: no prompt waits behind another on one replica while a second
    replica could start it.
``"jsq"`` (``"least-outstanding"``)
    at once to the replica with the fewest outstanding requests (the most free slots).
``"p2c"``
    the less loaded of two replicas drawn at random.
``"random"``, ``"strict-round-robin"``
    a uniformly random replica; or each replica in turn.
``"prefix-affinity"``
    the replica that served the longest matching prefix of the request (its ``hash_ids``
    blocks, or its session key), unless that replica has ``affinity_slack`` more outstanding
    requests than the least loaded one, when the request goes to the least loaded one: cache
    hits traded against balance.

Replicas can be added (ready after a lag) and drained during a run (:meth:`FleetRun` records
when), by a ``control`` callback called every ``control_interval_s`` seconds.

**Speed.** Steps in which nothing changes (no prompt to prefill, no sequence finishing, the KV
cache not yet full) are identical; a replica runs such a stretch as one event and is cut short
only when a request is routed to it. A fleet of 20 replicas serving 144,000 requests takes a few
hundred thousand events (``benchmarks/bench_fleetsim.py``).

What it leaves out: the router sees requests in flight, not KV occupancy; a prefix hit does not
free the KV blocks it shares; replicas are identical.
"""
from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from capbook.sim.eventcore import EventCore
from capbook.validation import choice, integer, nonnegative

__all__ = ["ROUTERS", "FleetRun", "simulate_fleet", "run_fleet"]

#: Routers of the fleet simulator (see the module docstring).
ROUTERS = ("pooled", "jsq", "p2c", "random", "strict-round-robin", "prefix-affinity")
_ALIASES = {"least-outstanding": "jsq", "load-aware": "pooled", "round-robin": "strict-round-robin",
            "cyclic": "strict-round-robin", "per-replica": "random", "prefix": "prefix-affinity",
            "affinity": "prefix-affinity"}

_INF = math.inf


def router_name(router) -> str:
    """The canonical router name for ``router`` (aliases accepted); a clear error otherwise."""
    key = router.strip().lower().replace("_", "-") if isinstance(router, str) else None
    key = _ALIASES.get(key, key)
    return choice(key if key in ROUTERS else router, "router", ROUTERS)


class _Rep:
    """One engine replica's state."""

    __slots__ = ("rid", "waiting", "running", "prefilling", "finish", "kv", "k", "busy", "ver",
                 "t_start", "dt", "end1", "m", "n_dec", "p_tok", "decoded", "done_pf", "outst", "routable",
                 "up_s", "down_s", "busy_s", "seq_s", "kv_s", "steps", "preempt", "cache", "cache_tok",
                 "draining")

    def __init__(self, rid, up_s, routable):
        self.rid = rid
        self.waiting = deque()
        self.running = {}          # id -> None, in admission order (dict keeps it; popitem = newest)
        self.prefilling = []
        self.finish = []           # heap of (decode step at which it finishes, id, epoch)
        self.kv = 0
        self.k = 0                 # decode steps so far
        self.busy = False
        self.ver = 0
        self.t_start = 0.0
        self.dt = 0.0
        self.end1 = 0.0            # t_start + dt: when the step (the first of a stretch) ends
        self.m = 1
        self.n_dec = 0
        self.p_tok = 0
        self.decoded = False
        self.done_pf = ()
        self.outst = 0             # waiting + prefilling + running
        self.routable = routable
        self.draining = False
        self.up_s = up_s
        self.down_s = _INF
        self.busy_s = 0.0
        self.seq_s = 0.0
        self.kv_s = 0.0
        self.steps = 0
        self.preempt = 0
        self.cache = OrderedDict()  # prefix blocks (or session keys) -> tokens, LRU
        self.cache_tok = 0


@dataclass
class FleetRun:
    """What one fleet simulation measured. Times in seconds.

    Attributes
    ----------
    arrival, first_token, end : numpy.ndarray
        Per request (``first_token`` and ``end`` are inf for a request not served; ``end`` and
        ``first_token`` include the client overhead).
    input_tokens, output_tokens : numpy.ndarray
    replica : numpy.ndarray
        Replica that served each request (-1: refused or never dispatched).
    refused : numpy.ndarray
        Requests refused because prompt plus output exceed one replica's KV cache.
    cached_tokens : numpy.ndarray
        Prompt tokens each request found in its replica's prefix cache.
    replicas : pandas.DataFrame
        One row per replica: ``up_s``, ``down_s``, ``busy_share`` (share of its time a step
        ran), ``slot_utilisation`` (mean sequences in flight / ``max_num_seqs``),
        ``kv_utilisation`` (mean KV tokens held / cache size; NaN when unbounded), ``steps``,
        ``preemptions``, ``requests``.
    warmup_s : float
        Requests arriving before this are left out of :meth:`summary`.
    events : list of tuple
        ``(time_s, "add" | "ready" | "drain" | "down", replica)``.
    """

    arrival: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    replica: np.ndarray
    refused: np.ndarray
    cached_tokens: np.ndarray
    replicas: object = field(repr=False)
    warmup_s: float = 0.0
    events: list = field(default_factory=list, repr=False)
    engine_events: int = 0
    engine_steps: int = 0

    @property
    def ttft(self) -> np.ndarray:
        """Time to first token per request, seconds (inf when not served)."""
        return self.first_token - self.arrival

    @property
    def e2e(self) -> np.ndarray:
        return self.end - self.arrival

    @property
    def tpot(self) -> np.ndarray:
        """Mean time per output token after the first, seconds (NaN for one-token requests)."""
        o = self.output_tokens
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(o > 1, (self.end - self.first_token) / np.maximum(o - 1, 1), np.nan)

    def measured(self) -> np.ndarray:
        """Mask of the requests that count: arrived at or after the warm-up."""
        return self.arrival >= self.warmup_s

    def good(self, ttft_target_s: float | None = None, tpot_target_s: float | None = None) -> np.ndarray:
        """Per request: served, and within the TTFT and TPOT targets given."""
        ok = np.isfinite(self.end)
        if ttft_target_s is not None:
            ok &= self.ttft <= ttft_target_s
        if tpot_target_s is not None:
            ok &= ~(self.tpot > tpot_target_s)
        return ok

    def summary(self, ttft_target_s: float | None = None, tpot_target_s: float | None = None,
                ttft_quantile: float = 0.99) -> dict:
        """Latency, goodput and utilisation of the measured requests.

        Returns
        -------
        dict
            ``requests``, ``served``, ``refused``, ``unfinished``, ``ttft_p50_s``,
            ``ttft_p99_s``, ``ttft_q_s`` (at ``ttft_quantile``), ``tpot_p50_s``, ``tpot_p99_s``,
            ``e2e_p50_s``, ``goodput_share`` (requests meeting both targets among those that
            arrived, refused and unfinished counted as missing), ``ttft_miss_share`` and
            ``tpot_miss_share`` (requests over each target), ``goodput_rps``,
            ``cache_hit_share`` (prompt tokens found in the prefix cache), ``slot_utilisation``,
            ``kv_utilisation`` (fleet means), ``preemptions``.
        """
        m = self.measured()
        served = m & np.isfinite(self.end)
        n = int(m.sum())
        ttft = self.ttft[m]
        tp = self.tpot[served]
        tp = tp[np.isfinite(tp)]
        good = np.isfinite(self.end[m])
        ttft_miss = tpot_miss = math.nan
        if ttft_target_s is not None:
            late = ~(ttft <= ttft_target_s)
            ttft_miss = float(late.mean()) if n else math.nan
            good &= ~late
        if tpot_target_s is not None:
            slow = self.tpot[m] > tpot_target_s
            tpot_miss = float(slow.mean()) if n else math.nan
            good &= ~slow
        span = float(self.arrival[m].max() - self.arrival[m].min()) if n > 1 else math.nan
        q = _quantile
        inp = self.input_tokens[m]
        reps = self.replicas
        return {
            "requests": n,
            "served": int(served.sum()),
            "refused": int(self.refused[m].sum()),
            "unfinished": int((m & ~self.refused & ~np.isfinite(self.end)).sum()),
            "ttft_p50_s": q(ttft, 0.5), "ttft_p99_s": q(ttft, 0.99), "ttft_q_s": q(ttft, ttft_quantile),
            "tpot_p50_s": q(tp, 0.5), "tpot_p99_s": q(tp, 0.99),
            "e2e_p50_s": q(self.e2e[served], 0.5),
            "goodput_share": float(good.mean()) if n else math.nan,
            "ttft_miss_share": ttft_miss, "tpot_miss_share": tpot_miss,
            "goodput_rps": float(good.sum() / span) if span and span > 0 else math.nan,
            "cache_hit_share": float(self.cached_tokens[m].sum() / max(inp.sum(), 1)),
            "slot_utilisation": float(np.average(reps["slot_utilisation"], weights=reps["alive_s"]))
            if len(reps) and reps["alive_s"].sum() > 0 else math.nan,
            "kv_utilisation": float(np.average(reps["kv_utilisation"], weights=reps["alive_s"]))
            if len(reps) and reps["alive_s"].sum() > 0 and np.isfinite(reps["kv_utilisation"]).all() else math.nan,
            "preemptions": int(reps["preemptions"].sum()) if len(reps) else 0,
        }


def _quantile(x, p) -> float:
    """Quantile of ``x`` where inf (never served) counts as larger than anything (no NaN)."""
    if not x.size:
        return math.nan
    v = float(np.quantile(np.where(np.isinf(x), 1e300, x), p))
    return math.inf if v > 1e299 else v


class _Fleet:
    """The engine replicas of one run, as a client of the event core (:mod:`capbook.sim.eventcore`).

    Timed events: ``0`` a replica added with a lag is ready, ``1`` a step (or a stretch of
    identical steps) of a replica ends (``b`` is the replica's version: a stretch cut short
    leaves a stale event), and the control ticks. Arrivals come before timed events of the same
    time.
    """

    def __init__(self, engine, arrival, inp, out, *, replicas, router, rng, hash_ids=None, block_tokens=512,
                 session=None, affinity_slack=None, prefix_cache=True, control=None, control_interval_s=15.0):
        self.a = arrival.tolist()
        self.inp = inp.tolist()
        self.out = out.tolist()
        n = len(self.a)
        self.n = n
        step, lim = engine.step, engine.limits
        self.t0, self.c, self.c2 = step.t0_s, step.c_s, step.c2_s
        self.cp = getattr(step, "cp_s", None)      # a prompt token's own cost, when measured apart
        self.kb = float(getattr(step, "bend_tokens", _INF))   # past it, each token costs bs more
        self.bs = float(getattr(step, "bend_s", 0.0)) if self.kb < _INF else 0.0
        kf = float(getattr(step, "fit_tokens", _INF))         # past it, the fit's tangent
        self.kf = kf if (self.c2 > 0 and kf < _INF) else _INF
        self.qf = (self.c + self.c2 * kf) * kf if self.kf < _INF else 0.0
        self.sf = self.c + 2 * self.c2 * kf if self.kf < _INF else 0.0
        self.budget_max = int(lim.max_num_batched_tokens)
        self.chunked = bool(lim.chunked_prefill)
        self.separate = lim.policy == "separate"
        self.nseq = int(lim.max_num_seqs)
        self.kv_cap = lim.kv_cache_tokens if lim.kv_cache_tokens is not None else _INF
        self.need = self.inp[:]
        self.gen = [0] * n
        self.epoch = [0] * n
        self.joined = [0] * n
        self.first = [_INF] * n
        self.done = [_INF] * n
        self.where = [-1] * n
        self.refused = [False] * n
        self.cached = [0] * n
        self.router = router
        self.rng = rng
        self.hash_ids = hash_ids
        self.block = int(block_tokens)
        self.session = session
        self.prefix = prefix_cache and (hash_ids is not None or session is not None)
        self.slack = max(2, self.nseq // 8) if affinity_slack is None else int(affinity_slack)
        self.owner = {}
        self.cache_cap = (self.kv_cap if math.isfinite(self.kv_cap) else 10 ** 7)
        self.core = EventCore(self.a, self._arrive, (self._ready_event, self._end), arrivals_first=True)
        self.heap = self.core.heap
        self.seq = self.core.seq
        self.reps = []
        self.live = []             # routable replicas (ids), in order
        self.central = deque()     # the pooled router's queue
        self.rr = 0
        self.events = []
        self.n_events = 0
        self.control = control
        self.control_dt = control_interval_s
        for _ in range(int(replicas)):
            self._add(0.0, 0.0)
        if router in ("random", "p2c"):
            self.u = rng.random(2 * n + 16).tolist()
            self.ui = 0

    # -- replicas -----------------------------------------------------------------------------
    def _add(self, t, lag):
        r = _Rep(len(self.reps), t + lag, routable=lag <= 0)
        self.reps.append(r)
        self.events.append((t, "add", r.rid))
        if lag <= 0:
            self.live.append(r.rid)
            if t > 0:
                self.events.append((t, "ready", r.rid))
                self._pull(r, t)
        else:
            self._push(t + lag, 0, r.rid, -1)      # the ready event
        return r.rid

    def _drain(self, t, rid):
        r = self.reps[rid]
        if r.draining:
            return
        r.draining = True
        if r.routable:
            self.live.remove(rid)
            r.routable = False
        self.events.append((t, "drain", rid))
        if not r.busy and not r.outst:
            r.down_s = t
            self.events.append((t, "down", rid))

    def _push(self, t, kind, rid, ver):
        heapq.heappush(self.heap, (t, next(self.seq), kind, rid, ver))

    def _ready_event(self, rid, ver, t):
        """A replica added with a lag is ready (unless drained meanwhile)."""
        r = self.reps[rid]
        if not r.draining:
            r.routable = True
            self.live.append(rid)
            self.events.append((t, "ready", rid))
            self._pull(r, t)

    # -- routing ------------------------------------------------------------------------------
    def _least(self):
        reps, live = self.reps, self.live
        best, bo = -1, _INF
        # ties go round the cycle, so equal replicas share the load
        L = len(live)
        start = self.rr % L if L else 0
        for j in range(L):
            rid = live[(start + j) % L]
            o = reps[rid].outst
            if o < bo:
                best, bo = rid, o
        self.rr += 1
        return best

    def _uniform(self):
        i = self.ui
        if i >= len(self.u):
            self.u = self.rng.random(4096).tolist()
            i = 0
        self.ui = i + 1
        return self.u[i]

    def _route(self, i):
        live = self.live
        if not live:
            return -1
        router = self.router
        if router == "pooled" or router == "jsq":
            return self._least()
        if router == "strict-round-robin":
            r = live[self.rr % len(live)]
            self.rr += 1
            return r
        if router == "random":
            return live[int(self._uniform() * len(live))]
        if router == "p2c":
            L = len(live)
            a = int(self._uniform() * L)
            b = (a + 1 + int(self._uniform() * (L - 1))) % L if L > 1 else a
            ra, rb = self.reps[live[a]], self.reps[live[b]]
            return ra.rid if ra.outst <= rb.outst else rb.rid
        # prefix affinity: the replica that last served the deepest block of this prompt
        cand, depth = -1, 0
        if self.hash_ids is not None:
            hs = self.hash_ids[i]
            owner = self.owner
            for h in hs:
                o = owner.get(h)
                if o is None:
                    break
                cand = o
                depth += 1
        elif self.session is not None:
            cand = self.owner.get(self.session[i], -1)
            depth = 1
        least = self._least()
        if cand < 0 or not self.reps[cand].routable or cand == least:
            return least
        if self.hash_ids is not None:
            # a prefix every replica holds (a shared system prompt) is no reason to prefer one
            cache, d = self.reps[least].cache, 0
            for h in hs:
                if h not in cache:
                    break
                d += 1
            if d >= depth:
                return least
        if self.reps[cand].outst > self.reps[least].outst + self.slack:
            return least
        return cand

    def _cache(self, r, i):
        """Prompt tokens of request ``i`` found in replica ``r``'s prefix cache; records its prompt."""
        cache = r.cache
        hit = 0
        if self.hash_ids is not None:
            hs = self.hash_ids[i]
            blk = self.block
            nb = 0
            for h in hs:
                if h in cache:
                    nb += 1
                    cache.move_to_end(h)
                else:
                    break
            hit = min(nb * blk, self.inp[i] - 1)
            owner, rid = self.owner, r.rid
            for h in hs[nb:]:
                if h in cache:         # a later block outlived an evicted earlier one: count it once
                    cache.move_to_end(h)
                    continue
                cache[h] = blk
                r.cache_tok += blk
            for h in hs:
                owner[h] = rid
        else:
            key = self.session[i]
            prev = cache.pop(key, 0)
            r.cache_tok -= prev
            hit = min(prev, self.inp[i] - 1)
            ctx = self.inp[i] + self.out[i]
            cache[key] = ctx
            r.cache_tok += ctx
            self.owner[key] = r.rid
        cap = self.cache_cap
        while r.cache_tok > cap and cache:
            _, tok = cache.popitem(last=False)
            r.cache_tok -= tok
        return max(hit, 0)

    def _dispatch(self, r, i, t):
        """Request ``i`` joins replica ``r``'s waiting queue at time ``t``."""
        self.where[i] = r.rid
        if self.prefix:
            hit = self._cache(r, i)
            if hit:
                self.cached[i] = hit
                self.need[i] = self.inp[i] - hit
        r.waiting.append(i)
        r.outst += 1
        if not r.busy:
            self._start(r, t)
        elif r.m > 1:
            # a stretch of identical steps: cut it at the first step boundary at or after t
            t0, dt = r.t_start, r.dt
            s = max(1, math.ceil((t - t0) / dt))
            if t0 + s * dt < t:
                s += 1
            if s < r.m:
                r.m = s
                r.ver += 1
                self._push(t0 + s * dt, 1, r.rid, r.ver)

    def _ready(self, t):
        """The pooled router's pick: of the replicas with no prompt waiting or part-prefilled (and
        a free sequence slot), the one whose next step starts first; -1 when none."""
        best, bt = -1, _INF
        nseq, reps, ceil = self.nseq, self.reps, math.ceil
        for rid in self.live:                        # once per arrival: the hottest loop of a run
            r = reps[rid]
            if r.waiting or r.prefilling or r.outst >= nseq:
                continue
            if not r.busy:
                return rid
            if r.m > 1:
                t0, dt = r.t_start, r.dt
                s = ceil((t - t0) / dt)
                nb = t0 + (s if s > 1 else 1) * dt
                if nb < t:
                    nb += dt
            else:
                nb = r.end1
            if nb < bt:
                best, bt = rid, nb
        return best

    def _arrive(self, i, t):
        if self.inp[i] + self.out[i] > self.kv_cap:
            self.refused[i] = True
            return
        if self.router == "pooled":
            rid = -1 if self.central else self._ready(t)
        else:
            rid = self._route(i)
        if rid < 0:
            self.central.append(i)
            return
        self._dispatch(self.reps[rid], i, t)

    def _pull(self, r, t):
        """A replica takes requests waiting at the router: the pooled router gives it the head of
        the queue when it has no prompt of its own waiting; other routers (whose queue holds only
        requests that arrived while no replica served) empty it."""
        c = self.central
        if self.router == "pooled":
            if c and r.routable and not r.waiting and not r.prefilling and r.outst < self.nseq:
                self._dispatch(r, c.popleft(), t)
            return
        while c and r.routable:
            self._dispatch(r, c.popleft(), t)

    # -- the engine step ----------------------------------------------------------------------
    def _start(self, r, t):
        """Plan the step of replica ``r`` that starts at ``t`` and schedule its end."""
        need, inp, gen = self.need, self.inp, self.gen
        nseq, kv_cap, chunked = self.nseq, self.kv_cap, self.chunked
        running, waiting = r.running, r.waiting
        n_dec = len(running)
        budget = self.budget_max if self.separate else self.budget_max - n_dec
        p_tok = 0
        done_pf = []
        if r.prefilling:
            still = []
            for i in r.prefilling:
                take = min(need[i], budget) if budget > 0 else 0
                need[i] -= take
                p_tok += take
                budget -= take
                (done_pf if need[i] == 0 else still).append(i)
            r.prefilling = still
        prefilling = r.prefilling
        while waiting and budget > 0 and n_dec + len(prefilling) + len(done_pf) < nseq:
            i = waiting[0]
            if r.kv + need[i] > kv_cap:
                break
            if not chunked and need[i] > budget:
                if not (p_tok == 0 and need[i] > self.budget_max):
                    break
            waiting.popleft()
            take = need[i] if not chunked else min(need[i], budget)
            need[i] -= take
            p_tok += take
            budget -= take
            r.kv += inp[i] + gen[i]
            (done_pf if need[i] == 0 else prefilling).append(i)
        if self.separate and p_tok > 0:
            k = p_tok
            decoded = False
        else:
            k = n_dec + p_tok
            decoded = n_dec > 0
        d = k if self.cp is None else k - p_tok
        if d > self.kf:
            dt = self.t0 + self.qf + self.sf * (d - self.kf)
        else:
            dt = self.t0 + (self.c + self.c2 * d) * d
        if self.cp is not None:
            dt += self.cp * p_tok
        if self.bs and k > self.kb:
            dt += self.bs * (k - self.kb)
        m = 1
        if decoded and p_tok == 0 and not prefilling and not done_pf:
            fin = r.finish
            epoch = self.epoch
            while fin and fin[0][2] != epoch[fin[0][1]]:
                heapq.heappop(fin)
            m = fin[0][0] - r.k if fin else 1
            if kv_cap < _INF:
                m = min(m, int((kv_cap - r.kv) // n_dec) + 1)
            m = max(m, 1)
        r.busy = True
        r.t_start, r.dt, r.m, r.end1 = t, dt, m, t + dt
        r.n_dec, r.p_tok, r.decoded, r.done_pf = n_dec, p_tok, decoded, done_pf
        r.ver += 1
        self._push(t + m * dt, 1, r.rid, r.ver)

    def _end(self, rid, ver, t):
        """The step (or stretch of ``r.m`` identical steps) of replica ``rid`` ends at ``t``
        (unless the event is stale: the stretch was cut short)."""
        r = self.reps[rid]
        if ver != r.ver or not r.busy:
            return
        m, dt, n_dec = r.m, r.dt, r.n_dec
        inflight = n_dec + len(r.prefilling) + len(r.done_pf)
        r.busy_s += m * dt
        r.seq_s += m * dt * inflight
        r.steps += m
        self.n_events += 1
        if self.kv_cap < _INF:
            r.kv_s += m * dt * (r.kv + (n_dec * (m - 1) / 2 if r.decoded else 0))
        done, epoch, inp, out, gen = self.done, self.epoch, self.inp, self.out, self.gen
        if r.decoded:
            r.k += m
            r.kv += m * n_dec
            fin = r.finish
            k = r.k
            running = r.running
            while fin and fin[0][0] <= k:
                _, i, ep = heapq.heappop(fin)
                if ep != epoch[i]:
                    continue
                done[i] = t
                r.kv -= inp[i] + out[i]
                del running[i]
                r.outst -= 1
            while r.kv > self.kv_cap and running:
                i, _ = running.popitem()
                g = gen[i] + (k - self.joined[i])
                gen[i] = g
                epoch[i] += 1
                r.kv -= inp[i] + g
                self.need[i] = inp[i] + g
                r.waiting.appendleft(i)
                r.preempt += 1
        first = self.first
        for i in r.done_pf:
            if first[i] == _INF:
                first[i] = t
                gen[i] = 1
                r.kv += 1
            remaining = out[i] - gen[i]
            if remaining <= 0:
                done[i] = t
                r.kv -= inp[i] + gen[i]
                r.outst -= 1
                continue
            self.joined[i] = r.k
            r.running[i] = None
            heapq.heappush(r.finish, (r.k + remaining, i, epoch[i]))
        r.done_pf = ()
        r.busy = False
        if self.central and r.routable:
            self._pull(r, t)
        if r.running or r.prefilling or r.waiting:
            if not r.busy:
                self._start(r, t)
        elif r.draining and r.down_s == _INF:
            r.down_s = t
            self.events.append((t, "down", r.rid))

    # -- the run ------------------------------------------------------------------------------
    def run(self):
        if self.control is not None:
            self.core.every(0.0, self._tick)
        return self.core.run()

    def _tick(self, t):
        """A control tick: the callback, then the next tick (none once the run is over)."""
        if self.core.arrivals_done(t) and not any(x.busy or x.outst for x in self.reps) and not self.central:
            return None
        self.control(_Control(self, t))
        return t + self.control_dt


class _Control:
    """What a ``control`` callback sees and may change at a tick."""

    def __init__(self, fleet: _Fleet, t: float):
        self._f, self.time_s = fleet, t

    @property
    def serving(self) -> int:
        """Replicas taking requests."""
        return len(self._f.live)

    @property
    def starting(self) -> int:
        """Replicas added and not yet ready."""
        return sum(1 for r in self._f.reps if not r.routable and not r.draining and r.up_s > self.time_s)

    @property
    def outstanding(self) -> list:
        """Requests in flight or waiting, per serving replica."""
        return [self._f.reps[rid].outst for rid in self._f.live]

    @property
    def queued(self) -> int:
        """Requests waiting at the router."""
        return len(self._f.central)

    def add(self, lag_s: float = 0.0) -> int:
        """Add a replica that takes requests ``lag_s`` seconds from now; returns its id."""
        return self._f._add(self.time_s, nonnegative(lag_s, "lag_s"))

    def drain(self, replica: int | None = None) -> int:
        """Stop routing to a replica (default: the one with the fewest outstanding requests); it
        finishes what it holds. Returns its id."""
        f = self._f
        if replica is None:
            if not f.live:
                raise ValueError("no serving replica to drain")
            replica = min(f.live, key=lambda rid: f.reps[rid].outst)
        f._drain(self.time_s, int(replica))
        return int(replica)


def run_fleet(engine, arrival, input_tokens, output_tokens, *, replicas: int, router: str = "pooled",
              seed: int | None = None, rng: np.random.Generator | None = None, warmup_s: float = 0.0,
              hash_ids=None, block_tokens: int = 512, session=None, affinity_slack: int | None = None,
              prefix_cache: bool = True, overhead: bool = True, control=None,
              control_interval_s: float = 15.0) -> FleetRun:
    """Simulate requests with given arrival times and lengths on a fleet of engine replicas.

    Parameters
    ----------
    engine : capbook.engine.stepmodel.EngineModel
        The fitted replica (step cost, limits, client overhead).
    arrival : array_like
        Arrival times, seconds, non-decreasing.
    input_tokens, output_tokens : array_like of int
        Prompt and output tokens per request (output at least 1).
    replicas : int
        Replicas serving from time 0.
    router : str
        One of :data:`ROUTERS` (aliases ``least-outstanding``, ``round-robin`` …).
    seed, rng
        Randomness for the random routers and the client overhead (``rng`` wins).
    warmup_s : float
        Requests arriving before this are simulated but left out of :meth:`FleetRun.summary`.
    hash_ids : sequence of sequences, optional
        Prompt block hashes per request (Mooncake traces): the prefix cache and the
        prefix-affinity router use them.
    block_tokens : int
        Tokens per hashed block (Mooncake: 512).
    session : array_like, optional
        A session or tenant key per request, for the prefix cache and router when there are no
        ``hash_ids``: a request finds the previous request of its session (prompt and output)
        cached on the replica that served it.
    affinity_slack : int, optional
        Outstanding requests the preferred replica may have beyond the least loaded one before
        prefix affinity gives way to balance (default ``max(2, max_num_seqs // 8)``).
    prefix_cache : bool
        Model prefix-cache hits (when ``hash_ids`` or ``session`` is given).
    overhead : bool
        Add the engine's fitted client overhead (HTTP, tokenisation) to TTFT and end times.
    control : callable, optional
        Called every ``control_interval_s`` seconds with an object that has ``time_s``,
        ``serving``, ``starting``, ``outstanding``, ``queued``, ``add(lag_s)`` and ``drain()``.

    Returns
    -------
    FleetRun
    """
    import pandas as pd

    router = router_name(router)
    replicas = integer(replicas, "replicas", minimum=0 if control is not None else 1)
    rng = rng if rng is not None else np.random.default_rng(0 if seed is None else seed)
    a = np.asarray(arrival, dtype=float)
    inp = np.asarray(input_tokens).astype(np.int64)
    out = np.asarray(output_tokens).astype(np.int64)
    if a.ndim != 1 or inp.shape != a.shape or out.shape != a.shape:
        raise ValueError("arrival, input_tokens and output_tokens must be 1-D arrays of one length")
    if a.size and (not np.all(np.isfinite(a)) or np.any(np.diff(a) < 0)):
        raise ValueError("arrival times must be finite seconds in non-decreasing order")
    if np.any(inp < 1) or np.any(out < 1):
        raise ValueError("input_tokens and output_tokens must be at least 1 per request")
    if hash_ids is not None and len(hash_ids) != a.size:
        raise ValueError("hash_ids must hold one sequence per request")
    if session is not None:
        session = list(session)
        if len(session) != a.size:
            raise ValueError("session must hold one key per request")
    if router == "prefix-affinity" and hash_ids is None and session is None:
        raise ValueError("router='prefix-affinity' needs hash_ids= or session= (what a prefix is)")
    f = _Fleet(engine, a, inp, out, replicas=replicas, router=router, rng=rng, hash_ids=hash_ids,
               block_tokens=integer(block_tokens, "block_tokens", minimum=1), session=session,
               affinity_slack=affinity_slack, prefix_cache=prefix_cache, control=control,
               control_interval_s=control_interval_s)
    f.run()
    first = np.asarray(f.first)
    done = np.asarray(f.done)
    if overhead and engine.overhead_median_s > 0:
        u = np.clip(rng.random(a.size), 1e-6, 1 - 1e-6)
        over = engine.overhead_quantile(u)
        first = first + over
        done = done + over
    t_end = float(max([x for x in f.done if x < _INF], default=a[-1] if a.size else 0.0))
    t_end = max(t_end, float(a[-1]) if a.size else 0.0)
    rows = []
    where = np.asarray(f.where)
    kv_cap = f.kv_cap
    for r in f.reps:
        lo = r.up_s
        hi = min(r.down_s, t_end)
        alive = max(hi - lo, 0.0)
        rows.append({"replica": r.rid, "up_s": lo, "down_s": r.down_s if r.down_s < _INF else math.nan,
                     "alive_s": alive, "busy_share": r.busy_s / alive if alive > 0 else math.nan,
                     "slot_utilisation": r.seq_s / (f.nseq * alive) if alive > 0 else math.nan,
                     "kv_utilisation": (r.kv_s / (kv_cap * alive) if alive > 0 and kv_cap < _INF else math.nan),
                     "steps": r.steps, "preemptions": r.preempt, "requests": int((where == r.rid).sum())})
    reps = pd.DataFrame(rows).set_index("replica") if rows else pd.DataFrame(
        columns=["up_s", "down_s", "alive_s", "busy_share", "slot_utilisation", "kv_utilisation", "steps",
                 "preemptions", "requests"])
    return FleetRun(a, first, done, inp, out, where, np.asarray(f.refused), np.asarray(f.cached), reps,
                    float(nonnegative(warmup_s, "warmup_s")), f.events, f.n_events,
                    int(sum(r.steps for r in f.reps)))


def simulate_fleet(engine, arrivals, *, replicas: int, router: str = "pooled", seed: int | None = None,
                   rng: np.random.Generator | None = None, warmup_s: float | None = None, **kw) -> FleetRun:
    """Simulate a fleet on a request table (a log, a replay, :func:`capbook.sim.arrivals.stack_busy_periods`).

    Parameters
    ----------
    engine : capbook.engine.stepmodel.EngineModel
    arrivals : pandas.DataFrame
        Columns ``arrival_time`` (seconds from the start), ``input_tokens``, ``output_tokens``;
        optional ``hash_ids`` (used by the prefix cache) and ``session`` (a key).
    replicas, router, seed, rng
        As :func:`run_fleet`.
    warmup_s : float, optional
        Default: 5 % of the span of arrivals.
    **kw
        Passed on to :func:`run_fleet`.
    """
    df = arrivals
    for col in ("arrival_time", "input_tokens", "output_tokens"):
        if col not in df.columns:
            raise ValueError(f"arrivals: no {col!r} column")
    a = df["arrival_time"].to_numpy(dtype=float)
    if warmup_s is None:
        warmup_s = 0.05 * float(a[-1] - a[0]) + float(a[0]) if a.size else 0.0
    if "hash_ids" in df.columns and "hash_ids" not in kw:
        kw["hash_ids"] = [list(h) if h is not None else [] for h in df["hash_ids"]]
    if "session" in df.columns and "session" not in kw and "hash_ids" not in kw:
        kw["session"] = df["session"].tolist()
    return run_fleet(engine, a, df["input_tokens"].to_numpy(), np.maximum(df["output_tokens"].to_numpy(), 1),
                     replicas=replicas, router=router, seed=seed, rng=rng, warmup_s=warmup_s, **kw)
