"""The single-replica step loop that capbook.engine.stepmodel ran before the fleet simulator
(capbook.sim.fleetsim) replaced it, kept as an independent oracle for tests/test_fleetsim.py: a
plain step-by-step loop with no stretches of identical steps, no router and no prefix cache.
"""
from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np


def run_engine(a, inp, out, step: StepCost, limits: EngineLimits, slots: int):
    """Step-by-step engine. Returns (first-token time, finish time, preemptions) per request;
    inf for requests not finished."""
    m = len(a)
    first = np.full(m, math.inf)
    done = np.full(m, math.inf)
    t0, c, c2 = step.t0_s, step.c_s, step.c2_s
    budget_max = int(limits.max_num_batched_tokens)
    chunked = limits.chunked_prefill
    separate = limits.policy == "separate"
    nseq = int(limits.max_num_seqs)
    kv_cap = limits.kv_cache_tokens if limits.kv_cache_tokens is not None else math.inf
    a_list = a.tolist()
    inp_l = inp.tolist()
    out_l = out.tolist()
    need = inp_l[:]  # prompt tokens still to prefill (grows on preemption: recompute)
    gen = [0] * m    # tokens generated so far
    waiting: deque = deque()
    running: list = []       # request ids decoding, in admission order
    finish_at: list = []     # heap of (decode-step index at which it finishes, id, epoch)
    epoch = [0] * m
    joined = [0] * m
    prefilling: list = []    # admitted, prompt not finished (chunked)
    kv_used = 0
    k_dec = 0                # decode steps so far
    t = 0.0
    j = 0
    finished = 0
    npre = 0
    while finished < m:
        while j < m and a_list[j] <= t:
            waiting.append(j)
            j += 1
        if not running and not prefilling and not waiting:
            if j >= m:
                break
            t = a_list[j]
            continue
        n_dec = len(running)
        # -- admission and prefill tokens of this step
        p_tok = 0
        completed_prefill = []
        if separate:
            budget = budget_max
        else:
            budget = budget_max - n_dec
        # continue partial prefills first (chunked)
        still = []
        for i in prefilling:
            take = min(need[i], budget) if budget > 0 else 0
            need[i] -= take
            p_tok += take
            budget -= take
            (completed_prefill if need[i] == 0 else still).append(i)
        prefilling = still
        while waiting and budget > 0 and len(running) + len(prefilling) + len(completed_prefill) < nseq:
            i = waiting[0]
            if inp_l[i] + out_l[i] > kv_cap:   # can never fit: refused, as the engine would
                waiting.popleft()
                finished += 1
                continue
            if kv_used + need[i] > kv_cap:
                break
            if not chunked and need[i] > budget:
                if p_tok == 0 and need[i] > budget_max:
                    pass  # a prompt longer than the budget runs alone
                else:
                    break
            waiting.popleft()
            take = need[i] if not chunked else min(need[i], budget)
            need[i] -= take
            p_tok += take
            budget -= take
            kv_used += inp_l[i] + gen[i]
            (completed_prefill if need[i] == 0 else prefilling).append(i)
        if separate and p_tok > 0:
            dt = t0 + (c + c2 * p_tok) * p_tok          # a prefill step: decodes pause
            t += dt
            decoded = False
        else:
            k = n_dec + p_tok
            dt = t0 + (c + c2 * k) * k
            t += dt
            decoded = n_dec > 0
        if decoded:
            k_dec += 1
            kv_used += n_dec
            while finish_at and finish_at[0][0] <= k_dec:
                _, i, ep = heapq.heappop(finish_at)
                if ep != epoch[i]:
                    continue
                done[i] = t
                finished += 1
                kv_used -= inp_l[i] + out_l[i]
                running.remove(i)
            # KV overflow: preempt the most recently admitted sequences (recompute later)
            while kv_used > kv_cap and running:
                i = running.pop()
                g = gen[i] + (k_dec - joined[i])
                gen[i] = g
                epoch[i] += 1
                kv_used -= inp_l[i] + g
                need[i] = inp_l[i] + g
                waiting.appendleft(i)
                npre += 1
        for i in completed_prefill:
            if first[i] == math.inf:   # the prefill step emits the first token
                first[i] = t
                gen[i] = 1
                kv_used += 1
            remaining = out_l[i] - gen[i]
            if remaining <= 0:
                done[i] = t
                finished += 1
                kv_used -= inp_l[i] + gen[i]
                continue
            # tokens generated after decode step k: gen[i] + (k - joined[i])
            joined[i] = k_dec
            running.append(i)
            heapq.heappush(finish_at, (k_dec + remaining, i, epoch[i]))
        if j >= m and not waiting and not running and not prefilling:
            break
    return first, done, npre
