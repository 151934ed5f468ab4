"""Benchmark: the same request-log aggregation on DuckDB and on Spark local mode, 20 M and 200 M rows.

``read_requests(path)`` (DuckDB, the default engine) against ``read_requests(path,
engine="spark")`` (PySpark, ``local[*]`` by default), each followed by
``log.hourly(by=("model", "tier"))``: the validating pass plus the hourly table, from the one
SQL definition in :mod:`capbook.logs.sql`. Each engine runs in its own subprocess, so that its
peak resident memory is its own. For Spark the work happens in a JVM that the Python
subprocess starts as its child: the benchmark reports the peak RSS of the Python process and,
separately, of the JVM (the Python peak is ``VmHWM`` of ``/proc/self/status``, as ``ru_maxrss``
survives fork and exec; the JVM's is its ``VmHWM`` sampled from ``/proc`` before the session stops, and
``ru_maxrss`` of ``RUSAGE_CHILDREN`` once the JVM has been shut down and reaped; the two are
printed side by side). The Spark session start-up (``capbook.logs.engines.spark_session()`` alone) is
timed separately, so the reader sees the fixed cost apart from the per-row cost. The two
hourly tables are checked equal before any number is printed.

Target / expectation: on one machine DuckDB wins, in wall time and in memory, at both sizes;
Spark's place is a cluster next to the data lake where the logs already live, not a laptop or
a single server. Times start after the imports; the CPU time (user + system, all threads; for
Spark the Python process plus the JVM) is printed beside the wall time because on a busy
machine the wall time mostly measures the wait for a core.

The logs are generated once (deterministically, by DuckDB from a hash of the row number, with
``bench_traces.make_log``: columns arrival_time, input_tokens, output_tokens, model, tier,
status; no tenant) and cached in ``benchmarks/.cache/`` (git-ignored). A run that fails
(Spark out of memory, say) is reported with its error and the benchmark goes on. The Spark
driver gets ``--driver-memory`` from ``--spark-driver-memory`` (through
``PYSPARK_SUBMIT_ARGS`` in the Spark subprocess only; default 8g, as local mode's default of
1g is too small for the persisted log at 200 M rows). No network. Usage::

    .venv/bin/python benchmarks/bench_engines.py [--rows 20000000 200000000] [--repeat 1]
        [--spark-master 'local[*]'] [--spark-driver-memory 8g] [--skip-spark]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_traces import CACHE, CAPBOOK_CODE, make_log  # noqa: E402  (the log and its DuckDB side)

BY = ("model", "tier")

def duckdb_run(path: Path, out: Path) -> dict:
    """bench_traces' capbook side (read_requests + hourly by model and tier, DuckDB), in the
    fields the Spark side prints."""
    d = run(CAPBOOK_CODE, [str(path), str(out)])
    return {"seconds": d["seconds"], "startup_s": 0.0, "work_s": d["seconds"], "cpu_s": d["cpu_s"],
            "py_rss_mb": d["peak_rss_mb"], "jvm_rss_mb": None, "rows": d["rows"]}


SPARK_CODE = r"""
import json, os, resource, sys, time

def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            fields = s[s.rindex(")") + 2:].split()
            if int(fields[1]) == pid:
                out.append((int(d), s[s.index("(") + 1:s.rindex(")")]))
    return out

def jvm_cpu_s(pid):  # utime + stime of the JVM, from /proc/<pid>/stat
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def vm_hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None

from capbook.logs.requestlog import read_requests
import capbook.logs.engines
master = sys.argv[3]
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
spark = capbook.logs.engines.spark_session(master)
startup = time.perf_counter() - t0

from pyspark import SparkContext
proc = SparkContext._gateway.proc  # the Popen of spark-submit, which execs the JVM
kids = children(os.getpid())
assert any(p == proc.pid for p, _ in kids), f"JVM pid {proc.pid} not a child of {os.getpid()}: {kids}"
jvm = proc.pid
with open(f"/proc/{jvm}/cmdline", "rb") as f:
    cmd = f.read().split(b"\0")
assert cmd[0].endswith(b"java"), f"child {jvm} is not the JVM: {cmd[:3]}"
cpu_jvm0 = jvm_cpu_s(jvm)
ru1 = resource.getrusage(resource.RUSAGE_SELF)

t1 = time.perf_counter()
log = read_requests(sys.argv[1], engine="spark", spark_master=master)
h = log.hourly(by=("model", "tier"))
work = time.perf_counter() - t1
ru2 = resource.getrusage(resource.RUSAGE_SELF)
cpu_jvm1 = jvm_cpu_s(jvm)
hwm = vm_hwm_mb(jvm)
py_hwm = vm_hwm_mb(os.getpid())  # VmHWM, not ru_maxrss: see PEAK_NOTE
h.to_parquet(sys.argv[2])

# stop the session, then shut the JVM down (stop() alone keeps the gateway JVM alive) and reap
# it, so that its peak RSS lands in RUSAGE_CHILDREN
capbook.logs.engines.spark_session(master).stop()
gw = SparkContext._gateway
gw.shutdown()
proc.stdin.close()  # the gateway JVM exits when its stdin closes
rc = proc.wait(timeout=120)
exited = not os.path.exists(f"/proc/{jvm}")
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
py_cpu_work = ru2.ru_utime + ru2.ru_stime - ru1.ru_utime - ru1.ru_stime
py_cpu_all = ru2.ru_utime + ru2.ru_stime - ru0.ru_utime - ru0.ru_stime
print(json.dumps({"seconds": startup + work, "startup_s": startup, "work_s": work,
                  "cpu_s": py_cpu_work + (cpu_jvm1 - cpu_jvm0),
                  "cpu_py_s": py_cpu_work, "cpu_jvm_s": cpu_jvm1 - cpu_jvm0,
                  "cpu_startup_py_s": py_cpu_all - py_cpu_work, "cpu_jvm_startup_s": cpu_jvm0,
                  "py_rss_mb": py_hwm,
                  "jvm_rss_mb": ch.ru_maxrss / 1024, "jvm_hwm_mb": hwm, "jvm_pid": jvm,
                  "jvm_exit": rc, "jvm_exited": exited, "jvm_children_cpu_s": ch.ru_utime + ch.ru_stime,
                  "rows": log.rows, "hourly_rows": len(h)}))
"""


# Why the Python processes' peak is VmHWM of /proc/self/status and not ru_maxrss of RUSAGE_SELF:
# on Linux a process's ru_maxrss survives fork and exec, so a subprocess started by a parent that
# once held a lot of memory (this script, right after DuckDB generated a 200 M-row log in it:
# about 20 GB) reports the parent's peak. VmHWM belongs to the process's own address space, which
# exec replaces. The JVM's ru_maxrss (RUSAGE_CHILDREN) is fine: its parent, the small Python
# subprocess, never held much; it is checked against the JVM's VmHWM anyway.
PEAK_NOTE = None


def run(code: str, args: list[str], extra_env: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0:
        raise RuntimeError(f"exit status {r.returncode}\n{r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def short_error(e: BaseException, lines: int = 12) -> str:
    text = str(e).strip().splitlines()
    # the Python traceback's last lines say what failed; Java stack frames are noise
    keep = [ln for ln in text if not ln.lstrip().startswith("at ")]
    return "\n    ".join(keep[-lines:])


def fmt_mb(x) -> str:
    return f"{x:8.0f}" if x is not None else f"{'-':>8}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[20_000_000, 200_000_000])
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine; the fastest counts")
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--spark-driver-memory", default="8g",
                    help="passed as PYSPARK_SUBMIT_ARGS='--driver-memory ... pyspark-shell'")
    ap.add_argument("--skip-spark", action="store_true")
    args = ap.parse_args()
    import pandas as pd

    cores = os.cpu_count()
    spark_env = {"PYSPARK_SUBMIT_ARGS": f"--driver-memory {args.spark_driver_memory} pyspark-shell"}
    print(f"engines: DuckDB and Spark ({args.spark_master}); {cores} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GB RAM; "
          f"Spark driver memory {args.spark_driver_memory} (PYSPARK_SUBMIT_ARGS, Spark subprocess only)")
    results = {}  # rows -> {"duckdb": best dict, "spark": best dict} (missing on failure)
    for rows in args.rows:
        print()
        try:
            path = make_log(rows)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"== {rows:,} rows: generating the log failed: {short_error(e)}")
            continue
        outs = {"duckdb": CACHE / f"hourly_duckdb_{rows}.parquet",
                "spark": CACHE / f"hourly_spark_{rows}.parquet"}
        runs: dict[str, list] = {"duckdb": [], "spark": []}
        errors: dict[str, str] = {}
        engines = ["duckdb"] + ([] if args.skip_spark else ["spark"])
        for _ in range(args.repeat):  # alternate, so that background load hits both alike
            for eng in engines:
                if eng in errors:
                    continue
                out = outs[eng]
                out.unlink(missing_ok=True)
                try:
                    if eng == "duckdb":
                        runs[eng].append(duckdb_run(path, out))
                    else:
                        runs[eng].append(run(SPARK_CODE, [str(path), str(out), args.spark_master],
                                             spark_env))
                except Exception as e:  # noqa: BLE001 - report and go on
                    errors[eng] = short_error(e)
        print(f"== {rows:,} rows: {path.stat().st_size / 1e6:,.0f} MB Parquet")
        for eng, why in errors.items():
            print(f"  {eng} FAILED at {rows:,} rows:\n    {why}")
        ok = [e for e in engines if runs[e] and e not in errors]
        if len(ok) == 2:
            a = pd.read_parquet(outs["duckdb"]).sort_values(["period_start", *BY]).reset_index(drop=True)
            b = pd.read_parquet(outs["spark"]).sort_values(["period_start", *BY]).reset_index(drop=True)
            try:
                pd.testing.assert_frame_equal(a, b, check_dtype=False)
            except AssertionError as e:
                sys.exit(f"FAIL: the hourly tables of DuckDB and Spark differ at {rows:,} rows:\n{e}")
            print(f"  hourly tables equal ({len(a):,} rows of period x model x tier; "
                  f"{int(a['requests'].sum()):,} requests)")
        best = {e: min(runs[e], key=lambda d: d["seconds"]) for e in ok}
        for e, d in best.items():
            assert d["rows"] == rows, f"{e} read {d['rows']:,} rows, not {rows:,}"
        results[rows] = best
        if not best:
            continue
        print(f"  {'engine':<22}{'wall s':>9}{'CPU s':>9}{'RSS Python MB':>15}{'RSS JVM MB':>12}"
              f"{'rows/s':>14}{'wall/DuckDB':>13}")
        base = best.get("duckdb")
        for e, d in best.items():
            label = "DuckDB" if e == "duckdb" else f"Spark {args.spark_master}"
            ratio = f"{d['seconds'] / base['seconds']:12.1f}x" if base else f"{'-':>13}"
            print(f"  {label:<22}{d['seconds']:9.2f}{d['cpu_s']:9.2f}{fmt_mb(d['py_rss_mb']):>15}"
                  f"{fmt_mb(d['jvm_rss_mb']):>12}{rows / d['seconds']:14,.0f}{ratio}")
        if "spark" in best:
            s = best["spark"]
            print(f"    Spark = start-up {s['startup_s']:.2f} s (spark_session() alone) + work "
                  f"{s['work_s']:.2f} s; work alone {rows / s['work_s']:,.0f} rows/s"
                  + (f", {s['work_s'] / base['seconds']:.1f}x DuckDB's wall" if base else ""))
            print(f"    Spark CPU during the work: JVM {s['cpu_jvm_s']:.2f} s + Python "
                  f"{s['cpu_py_s']:.2f} s (start-up: JVM {s['cpu_jvm_startup_s']:.2f} s + "
                  f"Python {s['cpu_startup_py_s']:.2f} s, not counted above)")
            print(f"    JVM peak RSS: ru_maxrss of RUSAGE_CHILDREN {s['jvm_rss_mb']:.0f} MB after "
                  f"the JVM (pid {s['jvm_pid']}, a child of the Python subprocess) exited with "
                  f"status {s['jvm_exit']} (gone from /proc: {s['jvm_exited']}); "
                  f"VmHWM sampled before stop {s['jvm_hwm_mb']:.0f} MB")
        if args.repeat > 1:
            print("    all runs (wall s): " + ", ".join(
                f"{e} {[round(d['seconds'], 2) for d in runs[e]]}" for e in ok))
    load = os.getloadavg()[0]
    print()
    print(f"load average at the end: {load:.1f} on {cores} cores"
          + ("  (a busy machine: wall times are inflated, compare CPU times too)" if load > cores else ""))
    both = {r: b for r, b in results.items() if "duckdb" in b and "spark" in b}
    if both:
        parts = [f"{b['spark']['seconds'] / b['duckdb']['seconds']:.1f}x faster at {r / 1e6:,.0f} M rows"
                 for r, b in both.items()]
        cpu = [f"{b['spark']['cpu_s'] / b['duckdb']['cpu_s']:.1f}x DuckDB's CPU time at {r / 1e6:,.0f} M"
               for r, b in both.items()]
        mem = [f"{(b['spark']['jvm_rss_mb'] + b['spark']['py_rss_mb']) / b['duckdb']['py_rss_mb']:.1f}x "
               f"its peak memory at {r / 1e6:,.0f} M" for r, b in both.items()]
        starts = [b["spark"]["startup_s"] for b in both.values()]
        works = {r: b["spark"]["work_s"] / b["duckdb"]["seconds"] for r, b in both.items()}
        slower = all(b["spark"]["seconds"] > b["duckdb"]["seconds"] for b in both.values())
        print()
        print("Conclusion: on this " + f"{cores}-core machine DuckDB is " + " and ".join(parts)
              + " than Spark local mode (Spark takes " + ", ".join(cpu) + "; and " + ", ".join(mem)
              + ", counting Spark's JVM and Python together). "
              + "Spark's fixed cost is "
              + (f"{starts[0]:.1f}" if len(starts) == 1 else f"{min(starts):.1f}-{max(starts):.1f}")
              + " s of session start-up; "
              + "even without it Spark's work takes "
              + " and ".join(f"{v:.1f}x DuckDB's time at {r / 1e6:,.0f} M" for r, v in works.items())
              + ", so the gap is a per-row cost, not only the start-up. "
              + ("" if slower else "(Note: Spark was not slower in every run here; the numbers "
                 "above say where.) ")
              + "Spark is for when the logs live in a data lake next to a cluster, not for one "
              "machine: there, read_requests(path, engine='spark', spark_master=...) runs the same "
              "SQL where the data are; on one machine use the default DuckDB engine.")
    elif not args.skip_spark:
        print("No size ran on both engines; no comparison (see the failures above).")


if __name__ == "__main__":
    main()
