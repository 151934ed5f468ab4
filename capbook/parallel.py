"""Independent simulations on the machine's cores, in a deterministic order.

:func:`run_all` calls ``fn(job)`` for each job, in worker processes when there are several
jobs and cores, and returns the results in the order of the jobs: each simulation carries its
own seed, so the answer does not depend on how many processes ran it. ``CAPBOOK_WORKERS=1``
runs them one after another in this process (as on a one-core machine); a larger number caps
the processes.

Worker processes are forked (POSIX): the jobs are not pickled on the way in, only the results
on the way back. Where fork is not available, or inside a pool's worker (which may not start
processes of its own), the jobs run here.
"""
from __future__ import annotations

import multiprocessing as mp
import os

__all__ = ["workers", "run_all"]

_JOBS: list = []
_FN = None


def workers(n_jobs: int) -> int:
    """Processes to use for ``n_jobs`` independent jobs: one per job up to twice the cores this
    process may use, or at most ``CAPBOOK_WORKERS``.

    A few long jobs of about equal length finish sooner all started at once than in rounds of
    one per core: three on two cores take 1.5 times one job's time-sliced, not twice it."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    cores *= 2
    env = os.environ.get("CAPBOOK_WORKERS", "").strip()
    if env:
        try:
            cap = int(env)
        except ValueError:
            raise ValueError(f"CAPBOOK_WORKERS must be a whole number of processes, got {env!r}") from None
        if cap < 1:
            raise ValueError(f"CAPBOOK_WORKERS must be at least 1, got {cap}")
        cores = cap
    return max(1, min(cores, n_jobs))


def _call(i: int):
    return _FN(_JOBS[i])


def run_all(fn, jobs: list) -> list:
    """``[fn(job) for job in jobs]``, on :func:`workers` processes when more than one."""
    global _JOBS, _FN
    jobs = list(jobs)
    n = workers(len(jobs))
    # a worker of a process pool (a daemon) may not start processes of its own: run here
    if n <= 1 or "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
        return [fn(j) for j in jobs]
    _JOBS, _FN = jobs, fn
    try:
        with mp.get_context("fork").Pool(n) as pool:
            return pool.map(_call, range(len(jobs)), chunksize=1)
    finally:
        _JOBS, _FN = [], None
