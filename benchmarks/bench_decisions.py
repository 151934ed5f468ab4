"""Benchmark: decision accuracy of the capacity plan's serving count, against a long simulation.

The plan's headline serving count (:func:`capbook.plan.steps.capacity_plan`, ``plan.serving``) is the
smallest fleet that its fleet simulation verifies: two replications of up to 30,000 requests per
fleet size (the log's busiest hours time-scaled to the planned peak), judged with 95 %
confidence bounds (:func:`capbook.plan.replay.judge_fleet`). This benchmark measures how often that
decision is right. For every scenario:

1. **The plan.** ``capacity_plan(log, sweep, slo=..., demand_scale=...)`` with its defaults
   (``sim_requests=30_000``, ``sim_seeds=2``, ``seed=2026``); its ``serving`` count and the wall
   time of the whole call.
2. **The truth.** The same engine, router and objectives on a run ten times as long, five
   replications, another seed. The long run is the log's busiest hours at the planned rate
   (:func:`capbook.plan.replay.replay_requests`) when they hold ten times the plan's requests (the
   sample gateway); otherwise (the real logs, each an hour or less) it is ten replications of
   the plan's replay (:func:`capbook.plan.replay._replication`, k = 0..9: its busy periods in ten
   orders) laid end to end in time. Each fleet size is judged by the **point estimates** pooled
   over the five replications (the TTFT quantile of every measured request within the
   objective, goodput at or above its target; no confidence margins: this run is the truth).
   The smallest size meeting them is searched from the plan's count (a fleet that meets it
   with fewer replicas is assumed to meet it with more): down while the size below still meets,
   up (doubling the step) while it does not, then bisection; the true count ``n`` and ``n − 1``
   are always both simulated with the long run.
3. **The record.** Count error (plan − truth), cost regret (the extra replicas times the price of
   a replica-hour from :func:`capbook.cost.costs.replica_price` with the sample price table when the
   sweep records a priced GPU and its tensor-parallel degree; else in replica-hours per hour),
   and the wall times.

Scenarios: the sample gateway (``capbook.app.datasets.plan_inputs()``) at demand 0.5, 1 and 2, and
the real request logs of ``../shared/traces`` (Azure code and conversation 2023, Mooncake
conversation and synthetic) with sweeps of five load generators from ``../shared/sweeps`` and
``../shared/realdata`` (aiperf, inference-perf, vLLM ``bench serve``, inference-benchmarker,
GuideLLM). A real log's p99 prompt often takes longer to prefill on an idle replica than the
default 1 s TTFT objective (no fleet can meet it: the plan says "impossible"); there the TTFT
objective is set at about 1.5 times that prefill time, as the plan itself suggests, and every
other objective stays at its default. Where a real log's peak (2.6 to 5.5 requests/s) fits on one
or two replicas, ``demand_scale`` raises it so that the count is a decision. The table's last
column block and the legend below it say which objective and scale each scenario uses and why.

Target: in every scenario the plan is never below the true minimum and at most one replica above
it (0 <= plan − truth <= 1). The script prints the table, the per-size evidence (the plan's
estimate with its 95 % margins, the long run's point estimates) and a verdict line, and exits 1
when the target is missed (or a scenario fails to run). Scenarios run in parallel across
``--workers`` processes (default 2: one per core); wall times are per scenario, in its process.

Without ``../shared`` (beside the repository, or ``CAPBOOK_SHARED``, or ``--shared``) the real
scenarios are skipped with a message and the sample ones still run. Usage::

    .venv/bin/python benchmarks/bench_decisions.py [--quick] [--scenarios NAME,...] [--list]
        [--workers 2] [--requests 30000] [--long-factor 10] [--long-seeds 5] [--shared PATH]

``--quick`` is a smoke run: four scenarios, 5,000 plan requests, a long run of 4x the plan's
requests over 3 replications (its truth is not the full benchmark's truth).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TRUTH_SEED = 4049          # the long run's seed (the plan's is 2026)
TRACES = {"code": "AzureLLMInferenceTrace_code.csv", "conv": "AzureLLMInferenceTrace_conv.csv",
          "mconv": "conversation_trace.jsonl", "msyn": "synthetic_trace.jsonl"}
LOG_LABEL = {"sample": "sample gateway", "code": "Azure code 2023", "conv": "Azure conv 2023",
             "mconv": "Mooncake conversation", "msyn": "Mooncake synthetic"}
SW = "sweeps/"
RD = "realdata/inference-perf-kubecon-na-2025/"
#: sweep key -> (load generator, path under ../shared, read_sweep keywords, short label)
SWEEPS = {
    "aiperf-kimi": ("aiperf", SW + "aiperf/InferenceMAX_Rocm_Team/results/0601", {},
                    "Kimi-K2.5 fp4, MI355X TP4"),
    "aiperf-qwen": ("aiperf", SW + "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot", {"load": "concurrency"},
                    "Qwen3.6 nvfp4 (H100, GPU not recorded)"),
    "ip-vllm": ("inference-perf", SW + "inference-perf/demos/kubecon-na-2025", {"where": {"config": "vllm"}},
                "Llama-3.1-8B, H100, vllm"),
    "ip-chunk": ("inference-perf", RD + "vllm+chunking_and_prefix_caching", {},
                 "Llama-3.1-8B, H100, chunking+prefix caching"),
    "vllm-70b": ("vllm bench", SW + "vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1",
                 {}, "Llama-3.3-70B TP8 (ND96asr_v4)"),
    "ib-gemma": ("inference-benchmarker",
                 SW + "inference-benchmarker/infervisor-plow/perf-data/harness/b2-ib/vllm/results", {"load": "rate"},
                 "Gemma-4-12B, RTX PRO 6000 (not recorded)"),
    "guidellm-pd": ("guidellm", SW + "guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv",
                    {"load": "rate"}, "GuideLLM CSV, P/D disaggregation"),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    log: str                      # "sample" or a key of TRACES
    sweep: str | None             # a key of SWEEPS (None: the sample's own sweep)
    slo: str | None = None        # capbook.plan.steps.SLO.parse text; None: the default objectives
    scale: float = 1.0            # demand_scale
    why: str = "default objectives"


SCENARIOS = [
    Scenario("sample-0.5", "sample", None, scale=0.5, why="default objectives; half the sample's demand"),
    Scenario("sample-1", "sample", None, why="default objectives"),
    Scenario("sample-2", "sample", None, scale=2.0, why="default objectives; twice the sample's demand"),
    Scenario("code-kimi-x4", "code", "aiperf-kimi", scale=4.0,
             why="default objectives; demand x4 (the log's 2.6 req/s fit on 4 replicas)"),
    Scenario("conv-qwen", "conv", "aiperf-qwen", slo="ttft=10",
             why="TTFT 10 s: the p99 prompt (4,142 tokens) takes 6.7 s to prefill on an idle replica"),
    Scenario("msyn-kimi", "msyn", "aiperf-kimi", slo="ttft=3",
             why="TTFT 3 s: the p99 prompt (66,456 tokens) takes 1.5 s to prefill on an idle replica"),
    Scenario("conv-ipvllm-x4", "conv", "ip-vllm", scale=4.0,
             why="default objectives; demand x4 (the log's 5.5 req/s fit on 3 replicas)"),
    Scenario("code-ipchunk-x4", "code", "ip-chunk", scale=4.0,
             why="default objectives; demand x4 (the log's 2.6 req/s fit on 2 replicas)"),
    Scenario("mconv-ipchunk", "mconv", "ip-chunk", slo="ttft=3",
             why="TTFT 3 s: the p99 prompt (85,400 tokens) takes 1.6 s to prefill on an idle replica"),
    Scenario("code-vllm70b", "code", "vllm-70b", why="default objectives"),
    Scenario("conv-vllm70b", "conv", "vllm-70b", why="default objectives"),
    Scenario("mconv-vllm70b", "mconv", "vllm-70b", slo="ttft=12",
             why="TTFT 12 s: the p99 prompt (85,400 tokens) takes 7.7 s to prefill on an idle replica"),
    Scenario("conv-ib", "conv", "ib-gemma", why="default objectives"),
    Scenario("msyn-ib", "msyn", "ib-gemma", slo="ttft=23",
             why="TTFT 23 s: the p99 prompt (66,456 tokens) takes 15.2 s to prefill on an idle replica"),
    Scenario("code-guidellm", "code", "guidellm-pd", slo="ttft=9",
             why="TTFT 9 s: the p99 prompt (7,436 tokens) takes 5.5 s to prefill on an idle replica"),
    Scenario("conv-guidellm", "conv", "guidellm-pd", slo="ttft=3",
             why="TTFT 3 s: the p99 prompt (4,142 tokens) takes 1.7 s to prefill on an idle replica"),
]
QUICK = ["sample-1", "conv-vllm70b", "msyn-kimi", "conv-ib"]


@dataclass
class Settings:
    requests: int = 30_000
    seeds: int = 2
    long_factor: int = 10
    long_seeds: int = 5
    shared: str | None = None


@dataclass
class Result:
    name: str
    log: str = ""
    sweep: str = ""
    generator: str = ""
    slo: str = ""
    why: str = ""
    rate: float = math.nan
    status: str = ""
    plan: int | None = None
    truth: int | None = None
    plan_s: float = math.nan
    search_s: float = math.nan
    truth_s: float = math.nan
    price: float | None = None          # USD per replica-hour (None: unpriced)
    price_note: str = ""
    replay: int = 0                      # the plan's replayed requests per replication
    long: int = 0                        # the long run's requests per replication
    long_kind: str = ""                  # "log" or "10 replications"
    plan_rows: list = field(default_factory=list)
    truth_rows: list = field(default_factory=list)
    error_text: str = ""


def find_shared(flag: str | None) -> Path | None:
    for c in ([Path(flag)] if flag else []) + ([Path(os.environ["CAPBOOK_SHARED"])]
                                                if os.environ.get("CAPBOOK_SHARED") else []) + [ROOT.parent / "shared"]:
        if c.is_dir() and (c / "traces").is_dir():
            return c
    return None


def _inputs(sc: Scenario, shared: Path | None):
    """(log aggregates, sweep, sweep label, load generator) of a scenario."""
    from capbook.app import datasets
    from capbook.sweeps.importers import read_sweep
    from capbook.plan.steps import LogAggregates
    from capbook.logs.requestlog import read_requests

    if sc.log == "sample":
        inp = datasets.plan_inputs()
        return inp.arguments["log"], inp.arguments["sweep"], "sample illustrative_chat", "capbook sample"
    gen, rel, kw, label = SWEEPS[sc.sweep]
    log = LogAggregates.of(read_requests(shared / "traces" / TRACES[sc.log]))
    return log, read_sweep(shared / rel, **kw), label, gen


def _price(sweep) -> tuple[float | None, str]:
    from capbook.cost.costs import load_sample_prices, replica_price

    try:
        rp = replica_price(sweep, load_sample_prices())
    except ValueError as exc:
        return None, str(exc).split(";")[0]
    return rp.on_demand_usd_per_hour, f"{rp.gpus} x {rp.gpu} on demand"


def long_run(plan, log, data: pd.DataFrame, factor: int) -> tuple[pd.DataFrame, str]:
    """The truth's replay: ``factor`` times the plan's requests, from the log's busiest hours when
    they hold that many, else ``factor`` replications of ``data`` laid end to end."""
    from capbook.plan.replay import _replication, replay_requests

    want = factor * len(data)
    tier = plan.source["tier"] if plan.source["tier"] != "all tiers" else None
    d = replay_requests(log, plan.request_rate, want, model=plan.source["model"], tier=tier)
    if len(d) >= want:
        return d, "log"
    parts, t0 = [], 0.0
    for k in range(factor):
        r = _replication(data, TRUTH_SEED, k).copy()
        t = r["arrival_time"].to_numpy(dtype=float)
        gap = (t[-1] - t[0]) / max(t.size - 1, 1)
        r["arrival_time"] = t - t[0] + t0
        # each copy's busy periods are periods of their own, so that the replications of the
        # long run (simulate_serving's seeds) reorder them
        codes = pd.factorize(r["period_start"])[0] if "period_start" in r else np.zeros(len(r), int)
        r["period_start"] = k * 100_000 + codes
        parts.append(r)
        t0 += (t[-1] - t[0]) + gap
    return pd.concat(parts, ignore_index=True), f"{factor} replications"


def true_minimum(ok, start: int, cap: int) -> int | None:
    """Smallest n in [1, cap] with ok(n), searched from ``start`` (ok assumed monotone); None when
    even ``cap`` misses. The answer's neighbour n - 1 is always evaluated (when n > 1)."""
    start = min(max(start, 1), cap)
    if ok(start):
        hi, lo, step = start, 0, 1
        while hi > 1:
            n = max(hi - step, 1)
            if ok(n):
                hi, step = n, 2 * step
            else:
                lo = n
                break
    else:
        lo, hi, step = start, None, 1
        while hi is None:
            n = min(lo + step, cap)
            if ok(n):
                hi = n
            elif n >= cap:
                return None
            else:
                lo, step = n, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def run_scenario(sc: Scenario, st: Settings) -> Result:
    warnings.simplefilter("ignore")
    from capbook.plan.steps import SLO, capacity_plan
    from capbook.plan.replay import _engine_for, _replay_arrivals, simulate_serving

    res = Result(sc.name, log=LOG_LABEL[sc.log], why=sc.why)
    try:
        shared = find_shared(st.shared)
        log, sweep, label, gen = _inputs(sc, shared)
        res.sweep, res.generator = label, gen
        slo = SLO.parse(sc.slo) if sc.slo else SLO()
        res.slo = (f"p{100 * slo.ttft_quantile:g} TTFT<={slo.ttft_target_s:g}s, good>={100 * slo.goodput_share:g}%"
                   + ("" if sc.slo else " (default)"))
        res.price, res.price_note = _price(sweep)
        t0 = time.perf_counter()
        plan = capacity_plan(log, sweep, slo=slo, demand_scale=sc.scale, sim_requests=st.requests,
                             sim_seeds=st.seeds)
        res.plan_s = time.perf_counter() - t0
        v = plan.verification
        res.status, res.search_s, res.rate = v.status, v.seconds, plan.request_rate
        if v.tried is not None:
            res.plan_rows = [dict(replicas=int(n), **r) for n, r in v.tried.iterrows()]
        if v.status != "verified":
            res.error_text = f"the plan is not verified ({v.status}): {v.reason}"
            return res
        res.plan = int(plan.serving)
        t0 = time.perf_counter()
        data = _replay_arrivals(plan, log, st.requests)
        res.replay = len(data)
        long, res.long_kind = long_run(plan, log, data, st.long_factor)
        res.long = len(long)
        engine = _engine_for(sweep)
        seen: dict[int, dict] = {}

        def ok(n: int) -> bool:
            if n not in seen:
                s = simulate_serving(engine, long, n, slo=slo, router=v.router, seeds=st.long_seeds, seed=TRUTH_SEED)
                s["meets"] = bool(s["ttft_q_s"] <= slo.ttft_target_s and s["goodput_share"] >= slo.goodput_share)
                seen[n] = s
            return seen[n]["meets"]

        cap = max(4 * res.plan + 16, (v.cap or 0))
        res.truth = true_minimum(ok, res.plan, cap)
        res.truth_s = time.perf_counter() - t0
        res.truth_rows = [{"replicas": n, "ttft_q_s": s["ttft_q_s"], "ttft_q_margin_s": s["ttft_q_margin_s"],
                           "goodput_share": s["goodput_share"], "goodput_margin": s["goodput_margin"],
                           "requests": s["replayed_requests"], "meets": s["meets"]}
                          for n, s in sorted(seen.items())]
        if res.truth is None:
            res.error_text = f"the long run meets the objectives at no size up to {cap}"
    except Exception as exc:  # noqa: BLE001 - report the scenario and go on
        res.error_text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
    return res


def _target_met(r: Result) -> bool:
    return r.plan is not None and r.truth is not None and 0 <= r.plan - r.truth <= 1


def _regret(r: Result) -> str:
    if r.plan is None or r.truth is None:
        return "-"
    d = r.plan - r.truth
    if d < 0:
        return f"UNDER {-d}"
    return f"${d * r.price:,.2f}/h" if r.price is not None else f"{d} rep-h/h"


def print_table(results: list[Result]) -> None:
    rows = []
    for r in results:
        err = "-" if r.plan is None or r.truth is None else f"{r.plan - r.truth:+d}"
        rows.append({"scenario": r.name, "log": r.log, "sweep / load generator": f"{r.sweep} / {r.generator}",
                     "SLO": r.slo, "rate/s": f"{r.rate:.2f}" if math.isfinite(r.rate) else "-",
                     "plan": "-" if r.plan is None else r.plan, "true": "-" if r.truth is None else r.truth,
                     "error": err, "regret": _regret(r),
                     "plan s": f"{r.plan_s:.1f}" if math.isfinite(r.plan_s) else "-",
                     "truth s": f"{r.truth_s:.1f}" if math.isfinite(r.truth_s) else "-",
                     "ok": "yes" if _target_met(r) else "NO"})
    with pd.option_context("display.width", 250, "display.max_colwidth", 60, "display.max_columns", 20):
        print(pd.DataFrame(rows).to_string(index=False))


def print_details(results: list[Result], st: Settings) -> None:
    print(f"\nPer scenario: why the objective, the replays, and each fleet size simulated "
          f"(plan: {st.seeds} replications of the replay, estimate ± 95 % margin, judged on the bounds; "
          f"truth: {st.long_seeds} replications of the long run, point estimates)")
    for r in results:
        print(f"\n[{r.name}] {r.why}; price: "
              + (f"${r.price:,.2f} per replica-hour ({r.price_note})" if r.price is not None else
                 f"unpriced ({r.price_note})"))
        if r.error_text:
            print("  " + r.error_text.strip().replace("\n", "\n  "))
        if r.replay:
            print(f"  plan replay {r.replay:,} requests/replication at {r.rate:.3g} req/s; long run {r.long:,} "
                  f"({r.long_kind}); plan search {r.search_s:.1f} s of its {r.plan_s:.1f} s")
        for n in sorted({x["replicas"] for x in r.plan_rows} | {x["replicas"] for x in r.truth_rows}):
            p = next((x for x in r.plan_rows if x["replicas"] == n), None)
            t = next((x for x in r.truth_rows if x["replicas"] == n), None)
            ps = (f"plan TTFT {p['ttft_q_s']:7.3f} ± {p['ttft_q_margin_s']:.3f} s, good {100 * p['goodput_share']:6.2f}"
                  f" ± {100 * p['goodput_margin']:.2f} % ({p['seeds']} rep) {'meets' if p['meets'] else 'misses'}"
                  if p else " " * 68)
            ts = (f"truth TTFT {t['ttft_q_s']:7.3f} s, good {100 * t['goodput_share']:6.2f} % "
                  f"(±{100 * t['goodput_margin']:.2f}) {'meets' if t['meets'] else 'misses'}" if t else "")
            mark = " <- plan" if n == r.plan else ""
            mark += " <- truth" if n == r.truth else ""
            print(f"  {n:4d}: {ps:<75s} {ts}{mark}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 scenarios, 5,000 plan requests, long run "
                    "4x over 3 replications")
    ap.add_argument("--scenarios", default=None, help="comma-separated scenario names (see --list)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--requests", type=int, default=None, help="the plan's sim_requests (default 30000)")
    ap.add_argument("--long-factor", type=int, default=None, help="long run: times the plan's requests (10)")
    ap.add_argument("--long-seeds", type=int, default=None, help="long run: replications (5)")
    ap.add_argument("--shared", default=None, help="the shared data folder (default ../shared or CAPBOOK_SHARED)")
    args = ap.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print(f"{s.name:18s} {LOG_LABEL[s.log]:22s} {s.sweep or 'sample sweep':12s} x{s.scale:g}  {s.why}")
        return 0
    st = Settings(shared=args.shared)
    if args.quick:
        st.requests, st.long_factor, st.long_seeds = 5_000, 4, 3
    st.requests = args.requests or st.requests
    st.long_factor = args.long_factor or st.long_factor
    st.long_seeds = args.long_seeds or st.long_seeds
    by_name = {s.name: s for s in SCENARIOS}
    names = (args.scenarios.split(",") if args.scenarios else QUICK if args.quick else list(by_name))
    unknown = [n for n in names if n.strip() not in by_name]
    if unknown:
        print(f"bench_decisions: unknown scenario(s) {unknown}; see --list", file=sys.stderr)
        return 2
    chosen = [by_name[n.strip()] for n in names]
    shared = find_shared(st.shared)
    if shared is None:
        skipped = [s.name for s in chosen if s.log != "sample"]
        chosen = [s for s in chosen if s.log == "sample"]
        if skipped:
            print(f"bench_decisions: ../shared (real traces and sweeps) not found beside the repository (set "
                  f"CAPBOOK_SHARED or --shared); skipped {len(skipped)} real scenario(s): {', '.join(skipped)}")
    st.shared = str(shared) if shared else None
    if not chosen:
        print("bench_decisions: no scenario to run")
        return 0
    print(f"decision accuracy: {len(chosen)} scenarios on {args.workers} processes ({os.cpu_count()} cores); plan: "
          f"{st.requests:,} requests x {st.seeds} replications per size; truth: {st.long_factor}x the plan's requests "
          f"x {st.long_seeds} replications, point estimates", flush=True)
    t0 = time.perf_counter()
    results: dict[str, Result] = {}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as ex:
        futs = {ex.submit(run_scenario, s, st): s.name for s in chosen}
        for f in as_completed(futs):
            r = f.result()
            results[r.name] = r
            print(f"  done {r.name:18s} plan {r.plan} truth {r.truth}  ({r.plan_s:.1f} s + {r.truth_s:.1f} s)"
                  + (f"  [{r.error_text.splitlines()[0][:120]}]" if r.error_text else ""), flush=True)
    wall = time.perf_counter() - t0
    ordered = [results[s.name] for s in chosen]
    print()
    print_table(ordered)
    print_details(ordered, st)
    met = [r for r in ordered if _target_met(r)]
    errs = [r.plan - r.truth for r in ordered if r.plan is not None and r.truth is not None]
    gens = sorted({r.generator for r in ordered})
    print(f"\nwall time {wall:.0f} s; plan {sum(r.plan_s for r in ordered if math.isfinite(r.plan_s)):.0f} s and "
          f"truth {sum(r.truth_s for r in ordered if math.isfinite(r.truth_s)):.0f} s summed over scenarios; "
          f"load generators: {', '.join(gens)}")
    if errs:
        print("count errors (plan - truth): " + ", ".join(f"{e:+d}" for e in errs)
              + f"; exact {sum(e == 0 for e in errs)}, one above {sum(e == 1 for e in errs)}, "
              f"more above {sum(e > 1 for e in errs)}, below {sum(e < 0 for e in errs)}")
    ok = len(met) == len(ordered)
    print(f"{'PASS' if ok else 'FAIL'}: the plan is never below the true minimum and at most one replica above it "
          f"in {len(met)} of {len(ordered)} scenarios (target: all)"
          + ("" if ok else "; missed: " + ", ".join(f"{r.name} ({'error' if r.plan is None or r.truth is None else f'{r.plan - r.truth:+d}'})"
                                                 for r in ordered if not _target_met(r))))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
