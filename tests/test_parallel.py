"""Tests of capbook.parallel (independent simulations on several processes, in job order)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from capbook.parallel import run_all, workers


def _draw(seed):
    return os.getpid(), float(np.random.default_rng(seed).normal())


def test_results_come_back_in_job_order_and_do_not_depend_on_the_processes(monkeypatch):
    seeds = list(range(7))
    monkeypatch.setenv("CAPBOOK_WORKERS", "1")
    serial = run_all(_draw, seeds)
    assert {pid for pid, _ in serial} == {os.getpid()}           # one process: this one
    monkeypatch.setenv("CAPBOOK_WORKERS", "2")
    par = run_all(_draw, seeds)
    assert [v for _, v in par] == [v for _, v in serial]          # the same numbers, in the same order
    if workers(len(seeds)) > 1:
        assert os.getpid() not in {pid for pid, _ in par}         # computed in worker processes


def test_workers_is_capped_by_the_jobs_the_cores_and_the_environment(monkeypatch):
    monkeypatch.delenv("CAPBOOK_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    # one process a job, up to twice the cores (a last round of fewer jobs than cores is not waited for)
    assert workers(1) == 1 and workers(2 * cores - 1) == 2 * cores - 1 and workers(1000) == 2 * cores
    monkeypatch.setenv("CAPBOOK_WORKERS", "1")
    assert workers(1000) == 1
    monkeypatch.setenv("CAPBOOK_WORKERS", "3")
    assert workers(1000) == 3 and workers(2) == 2
    for bad in ("0", "two"):
        monkeypatch.setenv("CAPBOOK_WORKERS", bad)
        with pytest.raises(ValueError, match="CAPBOOK_WORKERS"):
            workers(3)


def _nested(seeds):
    # inside a pool's worker (a daemon process, which may not start processes): runs here, same answer
    return run_all(_draw, seeds)


def test_inside_a_pool_worker_the_jobs_run_in_that_worker(monkeypatch):
    import multiprocessing as mp

    monkeypatch.setenv("CAPBOOK_WORKERS", "2")
    with mp.get_context("fork").Pool(1) as pool:
        (inner,) = pool.map(_nested, [[1, 2, 3]])
    assert len({pid for pid, _ in inner}) == 1                        # one process: the worker itself
    assert [v for _, v in inner] == [v for _, v in run_all(_draw, [1, 2, 3])]


def test_a_fleet_sizes_replications_do_not_depend_on_the_processes(monkeypatch):
    from capbook.app import datasets
    from capbook.plan import replay
    from capbook.plan.steps import capacity_plan

    inp = datasets.plan_inputs()
    plan = capacity_plan(**inp.arguments, simulate=False)
    data = replay.replay_requests(inp.arguments["log"], plan.request_rate, 6000, model=plan.source["model"],
                                  tier=plan.source["tier"])
    assert len(data) >= replay.PARALLEL_MIN_REQUESTS
    engine = replay._engine_for(inp.arguments["sweep"])
    out = {}
    for w in ("1", "2"):
        monkeypatch.setenv("CAPBOOK_WORKERS", w)
        out[w] = replay.judge_fleet(engine, data, 20, slo=plan.slo, seeds=3)
    keys = ("ttft_q_s", "ttft_q_margin_s", "goodput_share", "goodput_margin", "seeds", "meets", "ttft_p99_s")
    assert {k: out["1"][k] for k in keys} == {k: out["2"][k] for k in keys}
