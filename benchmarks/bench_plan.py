"""Benchmark: ``capbook plan`` on the sample data, this working tree against a reference commit.

Extracts the reference commit (default the tag ``before-33``; ``--ref``) with ``git archive``
into a temporary folder, then runs ``python -m capbook.app.cli plan --out <tmp>`` (or
``capbook.cli`` in a tree that has no ``capbook/app``) with ``PYTHONPATH`` set to each tree,
the reference and the working tree alternately, ``--repeats`` times each, for the default
command (with autoscaling) and, unless ``--no-prices``, with ``--prices
data/prices/illustrative.csv``. Prints the median wall time of each tree, the ratio (reference
over working tree: above 1 is faster), the same for CPU time (the command and its worker
processes, user + system; steadier than wall time on a shared machine) and whether ``plan.csv`` and ``plan.md`` are identical
(``plan.md`` up to the simulation's wall-clock seconds; when only the table of fleet sizes
simulated differs, by sizes one search simulated and the other did not, it says which).

Target (issue 33): the default command at least 1.5 times faster than ``before-33`` with an
identical ``plan.csv``.

Run: ``.venv/bin/python benchmarks/bench_plan.py [--ref before-33] [--repeats 3]``
"""
from __future__ import annotations

import argparse
import filecmp
import os
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5


def extract(ref: str, into: Path) -> Path:
    """The tree of commit ``ref`` of this repository, written under ``into``."""
    tree = into / "ref"
    tree.mkdir()
    tar = into / "ref.tar"
    with open(tar, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref], stdout=fh, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(tree, filter="data")
    tar.unlink()
    return tree


def cli_module(tree: Path) -> str:
    """``capbook.app.cli`` in a tree with the application layer, else ``capbook.cli``."""
    return "capbook.app.cli" if (tree / "capbook" / "app" / "cli.py").is_file() else "capbook.cli"


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_plan(tree: Path, out: Path, extra: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the command and its worker processes) of one ``capbook plan --out
    out`` of ``tree`` (run from a private folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPBOOK_")}
    env["PYTHONPATH"] = str(tree)
    cmd = [sys.executable, "-m", cli_module(tree), "plan", "--out", str(out), "--force", *extra]
    c0, t0 = _cpu_s(), time.perf_counter()
    done = subprocess.run(cmd, cwd=out.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds, cpu = time.perf_counter() - t0, _cpu_s() - c0
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)} (PYTHONPATH={tree}) exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds, cpu


def _md(path: Path) -> str:
    # the search's wall-clock seconds are stated in the plan; everything else must match
    return re.sub(r"Fleet sizes simulated \([\d.]+ s;", "Fleet sizes simulated (<s>;", path.read_text())


def compare_md(ref: Path, new: Path) -> str:
    """How two plan.md files differ: ``identical``; ``identical but for the search table`` when
    the only lines either has alone are rows of the "Fleet sizes simulated" table (a search that
    simulates other sizes; the rows of sizes both simulated still match); else ``DIFFERS``."""
    a, b = _md(ref).splitlines(), _md(new).splitlines()
    if a == b:
        return "identical"

    def search_rows(lines):
        rows, inside = {}, False
        for k, line in enumerate(lines):
            if line.startswith("Fleet sizes simulated"):
                inside = True
            elif inside and line.startswith("| ") and line.split("|")[1].strip().isdigit():
                rows[k] = line
            elif inside and line and not line.startswith("|"):
                inside = False
        return rows

    ra, rb = search_rows(a), search_rows(b)
    rest_a = [x for k, x in enumerate(a) if k not in ra]
    rest_b = [x for k, x in enumerate(b) if k not in rb]
    ka = {x.split("|")[1].strip(): x for x in ra.values()}
    kb = {x.split("|")[1].strip(): x for x in rb.values()}
    if rest_a == rest_b and all(ka[n] == kb[n] for n in set(ka) & set(kb)):
        only_a, only_b = sorted(set(ka) - set(kb), key=int), sorted(set(kb) - set(ka), key=int)
        return (f"identical but for the search table (sizes only the reference simulated: {', '.join(only_a) or 'none'}; "
                f"only the working tree: {', '.join(only_b) or 'none'})")
    return "DIFFERS"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="before-33", help="reference commit or tag (default before-33)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each tree per command (default 3)")
    ap.add_argument("--no-prices", action="store_true", help="time only the default command")
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    commands = {"capbook plan": []}
    if not a.no_prices:
        commands["capbook plan --prices"] = ["--prices", str(ROOT / "data" / "prices" / "illustrative.csv")]
    with tempfile.TemporaryDirectory(prefix="bench_plan_") as tmp:
        tmp = Path(tmp)
        trees = {"reference": extract(a.ref, tmp), "working": ROOT}
        print(f"reference {a.ref} ({cli_module(trees['reference'])}), working tree {ROOT} "
              f"({cli_module(ROOT)}), {a.repeats} run(s) each, alternately")
        for label, extra in commands.items():
            times = {k: [] for k in trees}
            cpus = {k: [] for k in trees}
            outs = {k: tmp / f"out-{k}-{len(extra)}" for k in trees}
            for _ in range(a.repeats):
                for k, tree in trees.items():
                    wall, cpu = run_plan(tree, outs[k], extra)
                    times[k].append(wall)
                    cpus[k].append(cpu)
            ref_s, new_s = (statistics.median(times[k]) for k in ("reference", "working"))
            ref_c, new_c = (statistics.median(cpus[k]) for k in ("reference", "working"))
            same_csv = filecmp.cmp(outs["reference"] / "plan.csv", outs["working"] / "plan.csv", shallow=False)
            md = compare_md(outs["reference"] / "plan.md", outs["working"] / "plan.md")
            ratio = ref_s / new_s
            print(f"{label:24s} reference {ref_s:7.1f} s   working {new_s:7.1f} s   ratio {ratio:5.2f}x "
                  f"(target {TARGET:g}x: {'met' if ratio >= TARGET else 'NOT met'})   plan.csv "
                  f"{'identical' if same_csv else 'DIFFERS'}   plan.md {md}")
            print(f"{'':24s} CPU: reference {ref_c:7.1f} s   working {new_c:7.1f} s   ratio {ref_c / new_c:5.2f}x "
                  "(user + system, with the worker processes: less sensitive to a busy machine)")


if __name__ == "__main__":
    main()
