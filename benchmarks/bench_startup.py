"""Benchmark: how long ``capbook --help`` takes, against an interpreter that does nothing.

Runs ``capbook --help`` (the console script beside this Python, or ``python -m capbook.app.cli``
when there is none), each subcommand's ``--help``, and ``python -c pass``, each in a fresh
process started from this one, and prints the median wall time of each and its ratio to the
bare interpreter. Also prints the peak memory of the ``capbook --help`` child.

Target (issue 15): ``capbook --help`` and ``capbook <command> --help`` well under half a second
(they import no pandas, duckdb, scipy or altair; tests/test_packaging.py checks that part).
Target (issue 33): ``capbook --help`` no slower than before the package was laid out by domain:
with ``--ref COMMIT`` (default ``before-33``) the same commands of that commit's tree run in
turn with this tree's (``python -m <cli module> --help``, each with its own ``PYTHONPATH``), and
the ratio of medians is printed (below 1.05 passes: within the noise of a shared machine).

Run: ``.venv/bin/python benchmarks/bench_startup.py [--ref before-33 | --no-ref]``
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPEATS = 7
TARGET_S = 0.5


def _capbook() -> list[str]:
    script = Path(sys.executable).with_name("capbook")
    return [str(script)] if script.is_file() and os.access(script, os.X_OK) else [sys.executable, "-m", "capbook.app.cli"]


def wall_time(cmd: list[str]) -> float:
    """Median seconds of ``cmd`` over :data:`REPEATS` runs (output discarded)."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_mb(cmd: list[str]) -> float:
    """Peak resident memory of one run of ``cmd`` in MB (Linux reports kilobytes).

    The kernel keeps the largest of all children waited for, so call this before any other.
    """
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def against_reference(ref: str) -> bool:
    """Median start-up of this tree's and ``ref``'s ``--help`` commands, run alternately."""
    from _reference import ROOT, cli_module, reference_tree

    old = reference_tree(ref)
    trees = {"reference": old, "this tree": ROOT}
    ok = True
    for args in (["--help"], ["plan", "--help"], ["trace", "--help"]):
        times: dict = {k: [] for k in trees}
        for _ in range(REPEATS * 2):
            for name, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=str(tree))
                cmd = [sys.executable, "-m", cli_module(tree)] + args
                t0 = time.perf_counter()
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env,
                               cwd=tree)  # not this folder: -m puts the working directory first on sys.path
                times[name].append(time.perf_counter() - t0)
        m = {k: statistics.median(v) for k, v in times.items()}
        ratio = m["this tree"] / m["reference"]
        ok &= ratio < 1.05
        print(f"capbook {' '.join(args):<16} {m['this tree'] * 1e3:7.1f} ms, {ref}: {m['reference'] * 1e3:7.1f} ms, "
              f"ratio {ratio:.2f}")
    return ok


def main() -> None:
    capbook = _capbook()
    rss = peak_rss_mb(capbook + ["--help"])
    bare = wall_time([sys.executable, "-c", "pass"])
    print(f"python -c pass                 {bare * 1e3:7.1f} ms")
    worst = 0.0
    for args in (["--help"], ["trace", "--help"], ["plan", "--help"], ["book", "--help"], ["predict", "--help"]):
        t = wall_time(capbook + args)
        worst = max(worst, t)
        label = "capbook " + " ".join(args)
        print(f"{label:<30} {t * 1e3:7.1f} ms  ({t / bare:.1f}x python -c pass)")
    print(f"peak memory of capbook --help: {rss:.0f} MB")
    print(f"slowest: {worst * 1e3:.0f} ms  (target < {TARGET_S * 1e3:.0f} ms)")
    ok = worst < TARGET_S
    if "--no-ref" not in sys.argv:
        ref = sys.argv[sys.argv.index("--ref") + 1] if "--ref" in sys.argv else "before-33"
        ok &= against_reference(ref)
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
