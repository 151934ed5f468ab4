"""How well the models predict real measurements: fit on light load, predict the rest.

The protocol (issue 14, used by ``benchmarks/bench_fidelity.py`` and the chapter *Where the
textbook breaks*), for an open-loop rate sweep of one engine:

1. A stage is **stable** when its completions reach 97 % of the requested rate, its mean
   schedule delay is under 0.1 s and its TTFT p50 is under 0.5 s (:func:`stable_stages`).
2. The models are fitted on the lowest three stable stages (fewer when there are fewer).
3. They predict, at each held-out stable stage's requested rate, TTFT p50 and p99 and the
   mean E2E (the simulation runs the stage as the load generator did: its arrivals over its
   duration into an idle engine); the **plateau** (the median completion rate of the stages that are not stable)
   is compared with the predicted saturation rate.
4. Every stage that is not stable must be predicted not stable; and the highest rate whose
   TTFT p99 meets 200 ms must fall inside the measured bracket (above the highest stable stage
   that meets it, below the lowest stage that does not).

The same protocol on **any** sweep (issue 31: :func:`score_sweep`, :func:`shared_fidelity`), open-
or closed-loop, scored with the primary model (the engine simulation):

* stable levels (:func:`sweep_levels`): open loop, completions reach :func:`shortfall_share` of
  the requested rate (a short Poisson run falls short by chance), mean schedule delay under
  0.1 s when recorded, TTFT p50 under 0.5 s or under 5× the lightest level's, and not flagged
  saturated by the importer; closed loop, the levels before the throughput plateau;
* fit on the lowest three stable levels; predict every other level (open loop at its requested
  rate, the level's requests over its duration into an idle engine; closed loop at its
  concurrency with :func:`capbook.sim.closedloop.simulate_closed`): throughput, mean E2E, TTFT p50
  and p99; and the saturation, against the plateau when the sweep reaches one;
* per dataset the median absolute error of each quantity; the summary is the median over datasets,
  plus the worst dataset's saturation error (:func:`datasets_summary`).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from capbook.engine.predict import MODELS, predict
from capbook.engine.stepmodel import _row_mean, ExtrapolationError, fit_engine
from capbook.sim.closedloop import simulate_closed
from capbook.sim.fleetsim import run_fleet
from capbook.sweeps.importers import read_sweep
from capbook.sweeps.sweep import Sweep
from capbook.validation import integer, positive

__all__ = ["stable_stages", "all_stages", "fidelity", "fidelity_summary", "TARGETS", "TTFT_P99_TARGET_S",
           "WORST_SATURATION_TARGET", "shortfall_share", "sweep_loop", "sweep_levels", "score_sweep",
           "fidelity_datasets", "dataset_table", "datasets_summary", "shared_datasets", "shared_fidelity",
           "biggest_misses", "kubecon_variants"]

#: Targets of issue 14: the median absolute relative error over variants.
TARGETS = {"saturation_rps": 0.10, "e2e_mean_s": 0.15, "ttft_p50_s": 0.20, "ttft_p99_s": 0.35}
#: The TTFT p99 objective of the bracket check, seconds.
TTFT_P99_TARGET_S = 0.2


def all_stages(sweep) -> pd.DataFrame:
    """Every stage of an open-loop sweep (levels and saturated points), by requested rate, with
    a ``stable`` column (see the module docstring)."""
    frames = [sweep.table]
    if getattr(sweep, "saturated", None) is not None and len(sweep.saturated):
        frames.append(sweep.saturated)
    df = pd.concat(frames, ignore_index=True)
    if "request_rate_target" not in df or df["request_rate_target"].isna().all():
        raise ValueError(f"sweep {sweep.name!r} is not an open-loop rate sweep (no request_rate_target "
                         "column): the fidelity protocol needs requested rates")
    df = df.sort_values("request_rate_target", kind="stable").reset_index(drop=True)
    req = df["request_rate_target"].astype(float)
    comp = df["request_throughput_rps"].astype(float)
    delay = df["schedule_delay_mean_s"].astype(float).fillna(0.0) if "schedule_delay_mean_s" in df else 0.0
    df["stable"] = (comp >= 0.97 * req) & (delay < 0.1) & (df["ttft_p50_s"].astype(float) < 0.5)
    return df


def stable_stages(sweep) -> pd.DataFrame:
    """The stable stages of an open-loop sweep, by requested rate."""
    df = all_stages(sweep)
    return df[df["stable"]].reset_index(drop=True)


def _sub_sweep(sweep, rows: pd.DataFrame):
    keep = rows.drop(columns=["stable"]).copy()
    keep["saturated"] = False
    return Sweep.from_frame(keep, name=sweep.name)


def _err(pred, meas):
    if pred is None or meas is None or not np.isfinite(meas) or meas == 0:
        return np.nan
    return float(pred) / float(meas) - 1.0


def fidelity(sweeps, *, fit_stages: int = 3, seed: int = 0, requests: int = 6000,
             ttft_p99_target_s: float = TTFT_P99_TARGET_S, stage_duration: bool = True) -> pd.DataFrame:
    """Run the protocol on each sweep; one row per (variant, check, model).

    Parameters
    ----------
    sweeps : iterable of capbook.sweeps.sweep.Sweep
        Open-loop sweeps (for example each variant folder of the KubeCon inference-perf data,
        read with :func:`capbook.sweeps.importers.read_sweep`).
    fit_stages : int
        Stable stages to fit on (the lowest ones).
    seed, requests
        Passed to :func:`capbook.engine.predict.predict`.
    ttft_p99_target_s : float
        TTFT p99 objective for the bracket check, seconds.
    stage_duration : bool
        Simulate each held-out stage as the load generator ran it (its arrivals over the
        stage's duration, ``num_requests / requested rate``, into an idle engine) rather than
        the steady state. The saturation rate and the bracket use the steady state either way.

    Returns
    -------
    pandas.DataFrame
        Columns ``variant, check, stage, rate_rps, model, quantity, predicted, measured,
        error`` (relative, predicted / measured − 1) and ``ok`` (for the flag and bracket
        checks). ``check`` is ``heldout`` (a stable stage not fitted), ``plateau``,
        ``over_capacity`` (a stage that is not stable: ``ok`` when predicted not stable) or
        ``bracket`` (``ok`` when the predicted highest rate meeting ``ttft_p99_target_s`` lies in the
        measured bracket).
    """
    fit_stages = integer(fit_stages, "fit_stages", minimum=1)
    target = positive(ttft_p99_target_s, "ttft_p99_target_s")
    rows = []
    for sw in sweeps:
        stages = all_stages(sw)
        st = stages[stages["stable"]]
        k = min(fit_stages, len(st))
        if k < 1:
            raise ValueError(f"sweep {sw.name!r} has no stable stage to fit on")
        fit = st.iloc[:k]
        held = st.iloc[k:]
        unstable = stages[~stages["stable"]]
        sub = _sub_sweep(sw, fit)
        first = predict(sub, float(fit["request_rate_target"].iloc[0]), seed=seed, requests=requests,
                        ttft_p99_target_s=target)
        engine = first.engine

        # each stage as measured: its arrivals into an idle engine over the stage's duration
        dur = float(np.median(stages["num_requests"] / stages["request_rate_target"])) if stage_duration else None

        def at(rate):
            return predict(sub, rate, seed=seed, requests=requests, engine=engine, duration_s=dur)

        for _, r in held.iterrows():
            p = at(float(r["request_rate_target"]))
            for m in MODELS:
                mp = p.models[m]
                for q, meas in (("ttft_p50_s", r["ttft_p50_s"]), ("ttft_p99_s", r["ttft_p99_s"]),
                                ("e2e_mean_s", _row_mean(r, "e2e"))):
                    pred = getattr(mp, q)
                    rows.append(dict(variant=sw.name, check="heldout", stage=r["point"], rate_rps=r["request_rate_target"],
                                     model=m, quantity=q, predicted=pred, measured=meas,
                                     error=_err(pred, meas) if mp.stable else np.nan, ok=bool(mp.stable)))
        plateau = float(np.median(unstable["request_throughput_rps"])) if len(unstable) else np.nan
        for m in MODELS:
            sat = first.models[m].saturation_rps
            rows.append(dict(variant=sw.name, check="plateau", stage="", rate_rps=np.nan, model=m,
                             quantity="saturation_rps", predicted=sat, measured=plateau,
                             error=_err(sat, plateau), ok=np.nan))
        for _, r in unstable.iterrows():
            p = at(float(r["request_rate_target"]))
            for m in MODELS:
                rows.append(dict(variant=sw.name, check="over_capacity", stage=r["point"],
                                 rate_rps=r["request_rate_target"], model=m, quantity="stable",
                                 predicted=float(p.models[m].stable), measured=0.0, error=np.nan,
                                 ok=not p.models[m].stable))
        meets = (stages["stable"]) & (stages["ttft_p99_s"].astype(float) <= target)
        lo = float(stages.loc[meets, "request_rate_target"].max()) if meets.any() else 0.0
        above = stages[(stages["request_rate_target"] > lo) & ~meets]
        hi = float(above["request_rate_target"].min()) if len(above) else np.inf
        for m in MODELS:
            mr = first.models[m].max_rate_rps
            rows.append(dict(variant=sw.name, check="bracket", stage=f"[{lo:g}, {hi:g}]", rate_rps=np.nan,
                             model=m, quantity="max_rate_rps", predicted=mr, measured=np.nan,
                             error=np.nan, ok=mr is not None and lo <= mr <= hi))
    return pd.DataFrame(rows)


def fidelity_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Median absolute relative error per quantity and model (over every held-out stage and variant), with the
    target and whether it is met; plus the share of flag and bracket checks that hold."""
    out = []
    for q, target in TARGETS.items():
        check = "plateau" if q == "saturation_rps" else "heldout"
        sel = table[(table["check"] == check) & (table["quantity"] == q)]
        for m in MODELS:
            e = sel.loc[sel["model"] == m, "error"].abs()
            # a model that calls a held-out (stable) stage unstable has no latency: count it as a miss
            med = float(np.nanmedian(e.fillna(np.inf))) if len(e) else np.nan
            out.append(dict(quantity=q, model=m, median_abs_error=med, target=target,
                            met=bool(med <= target), n=int(len(e))))
    for check in ("over_capacity", "bracket"):
        sel = table[table["check"] == check]
        for m in MODELS:
            ok = sel.loc[sel["model"] == m, "ok"].astype(bool)
            out.append(dict(quantity=check, model=m, median_abs_error=np.nan, target=1.0,
                            met=bool(ok.all()) if len(ok) else False, n=int(len(ok)),
                            share_ok=float(ok.mean()) if len(ok) else np.nan))
    return pd.DataFrame(out)


def kubecon_variants(root) -> list:
    """The variant folders of the KubeCon inference-perf data under ``root``, sorted."""
    root = Path(root)
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "results").is_dir())


# -- the protocol on any sweep: open-loop rate sweeps and closed-loop concurrency sweeps -----------
#: The issue-31 target for the worst dataset: its saturation off by at most this share (absolute relative error).
WORST_SATURATION_TARGET = 0.25
#: Quantities scored per predicted level (besides the dataset's saturation).
LEVEL_QUANTITIES = ("throughput_rps", "e2e_mean_s", "ttft_p50_s", "ttft_p99_s")
#: A closed-loop level within this share of the sweep's best throughput is on the plateau.
PLATEAU_SHARE = 0.95


def shortfall_share(num_requests) -> float:
    """Least share of the requested rate an open-loop level's completions must reach to count as
    keeping up: ``min(0.97, 1 − 3 / sqrt(num_requests))`` (a short Poisson run falls short of
    its rate by chance, and its completions are counted over the send time plus the drain)."""
    n = float(num_requests) if num_requests is not None and np.isfinite(float(num_requests)) else 0.0
    return 0.97 if n <= 0 else float(min(0.97, 1.0 - 3.0 / math.sqrt(n)))


def sweep_loop(sweep) -> str:
    """``"open"`` when the sweep's levels have requested rates, else ``"closed"``."""
    frames = [sweep.table] + ([sweep.saturated] if getattr(sweep, "saturated", None) is not None else [])
    for f in frames:
        if "request_rate_target" in f and f["request_rate_target"].notna().any():
            return "open"
    return "closed"


def sweep_levels(sweep) -> pd.DataFrame:
    """Every level of a sweep (its levels and the points the importer flagged saturated), in load
    order, with ``loop`` (``open``/``closed``), ``level`` (requested req/s, or clients),
    ``stable`` and ``why`` (why a level is not stable; '' when it is).

    Open loop (by requested rate; a burst with no rate comes last): a level is stable when its
    completions reach :func:`shortfall_share` of the requested rate, its mean schedule delay
    (when recorded) is under 0.1 s, its TTFT p50 is under 0.5 s or under 5× the lightest
    level's, and the importer did not flag it saturated. Closed loop (by concurrency): the
    throughput **plateau** begins at the first level, not the last, whose throughput is within
    :data:`PLATEAU_SHARE` of the sweep's best; it and every level past it are not stable
    (there is no plateau when only the last level comes near the best: throughput still rises).
    """
    frames = [sweep.table.assign(_sat=False)]
    sat = getattr(sweep, "saturated", None)
    if sat is not None and len(sat):
        frames.append(sat.assign(_sat=True))
    df = pd.concat(frames, ignore_index=True)
    loop = sweep_loop(sweep)
    thr = df["request_throughput_rps"].astype(float)
    why = pd.Series([""] * len(df), index=df.index, dtype=object)
    if loop == "open":
        req = df["request_rate_target"].astype(float)
        df["level"] = req
        df = df.assign(_k=req.fillna(np.inf)).sort_values("_k", kind="stable").drop(columns="_k")
        df = df.reset_index(drop=True)
        req, thr = df["level"], df["request_throughput_rps"].astype(float)
        why = pd.Series([""] * len(df), index=df.index, dtype=object)
        n = df["num_requests"] if "num_requests" in df else pd.Series(np.nan, index=df.index)
        share = np.array([shortfall_share(v) for v in n])
        p50 = df["ttft_p50_s"].astype(float)
        light = float(p50.iloc[0]) if len(p50) and np.isfinite(p50.iloc[0]) else 0.0
        delay = (df["schedule_delay_mean_s"].astype(float) if "schedule_delay_mean_s" in df
                 else pd.Series(np.nan, index=df.index))
        for i in df.index:
            r = []
            if not np.isfinite(req[i]):
                r.append("a burst (no requested rate)")
            elif thr[i] < share[i] * req[i]:
                r.append(f"completions {thr[i]:.3g} req/s below {share[i]:.0%} of the {req[i]:g} requested")
            if np.isfinite(delay[i]) and delay[i] >= 0.1:
                r.append(f"mean schedule delay {delay[i]:.2g} s")
            if p50[i] >= max(0.5, 5 * light):
                r.append(f"TTFT p50 {p50[i]:.3g} s (lightest {light:.3g} s)")
            if df.loc[i, "_sat"]:
                r.append("flagged saturated by the importer")
            why[i] = "; ".join(r)
    else:
        df["level"] = df["concurrency"].astype(float)
        df = df.sort_values("level", kind="stable").reset_index(drop=True)
        thr = df["request_throughput_rps"].astype(float).to_numpy()
        why = pd.Series([""] * len(df), index=df.index, dtype=object)
        best = np.nanmax(thr) if len(thr) else np.nan
        near = np.flatnonzero(thr >= PLATEAU_SHARE * best)
        if len(near) and near[0] < len(df) - 1:
            for i in range(near[0], len(df)):
                why[i] = (f"throughput plateau: {thr[i]:.3g} req/s, best {best:.3g}" if thr[i] >= PLATEAU_SHARE * best
                          else f"past the plateau: {thr[i]:.3g} req/s, best {best:.3g}")
        for i in df.index[df["_sat"]]:
            why[i] = why[i] or "flagged saturated by the importer"
    df["loop"] = loop
    df["why"] = why
    df["stable"] = why == ""
    return df.drop(columns="_sat")


def _queued(lv: pd.DataFrame) -> pd.Series:
    """Open-loop levels whose requests queued: TTFT p50 at least max(0.5 s, 5× the lightest
    level's), a mean schedule delay of 0.1 s or more, or a mean E2E at least twice the lightest
    level's. A level that falls short of its rate with none of these (a short run whose last
    long requests drain after the sends stop) shows no plateau."""
    p50 = lv["ttft_p50_s"].astype(float)
    e2e = pd.Series([_row_mean(r, "e2e") for _, r in lv.iterrows()], index=lv.index, dtype=float)
    delay = (lv["schedule_delay_mean_s"].astype(float) if "schedule_delay_mean_s" in lv
             else pd.Series(np.nan, index=lv.index))
    light50 = float(p50.iloc[0]) if len(p50) and np.isfinite(p50.iloc[0]) else 0.0
    light_e2e = float(e2e.iloc[0]) if len(e2e) and np.isfinite(e2e.iloc[0]) else np.inf
    return (p50 >= max(0.5, 5 * light50)) | (delay >= 0.1) | (e2e >= 2 * light_e2e)


def _level_sweep(sweep, rows: pd.DataFrame):
    keep = rows.drop(columns=[c for c in ("stable", "why", "loop", "level") if c in rows]).copy()
    keep["saturated"] = False
    out = Sweep.from_frame(keep, name=sweep.name)
    if getattr(sweep, "hardware", None) is not None:
        out.hardware = sweep.hardware
    return out


def _open_run(engine, rate, n, *, arrivals, seed):
    """The level as the load generator ran it: ``n`` requests at ``rate`` req/s (all at once when
    ``rate`` is not finite) into an idle engine; (completions per second over send time plus
    drain, TTFT p50, TTFT p99, mean E2E)."""
    rng = np.random.default_rng(seed)
    n = int(max(n, 1))
    if not np.isfinite(rate):
        a = np.zeros(n)
    elif arrivals == "uniform":
        a = np.arange(n) / rate
    else:
        a = np.cumsum(rng.exponential(1.0 / rate, n))
        a -= a[0]
    inp, out = engine._lengths(rng, n)
    run = run_fleet(engine, a, inp, out, replicas=1, router="jsq", rng=rng)
    end = run.end[np.isfinite(run.end)]
    if not len(end):
        return math.nan, math.nan, math.nan, math.nan
    ttft, e2e = run.ttft[np.isfinite(run.end)], run.e2e[np.isfinite(run.end)]
    return (len(end) / float(end.max() - a[0]), float(np.quantile(ttft, 0.5)), float(np.quantile(ttft, 0.99)),
            float(np.mean(e2e)))


_ROW_COLUMNS = ["dataset", "loop", "level", "stable", "quantity", "predicted", "measured", "error", "refused"]
#: Load generators whose open-loop levels send at evenly spaced times (constant rate, not Poisson).
_UNIFORM_TOOLS = ("inference-benchmarker",)


def _at_level_lengths(engine, row):
    """The fitted engine with the prompt and output lengths the level measured (its mean prompt,
    its prompt p99 when recorded, else the fitted p99 scaled; the output distribution scaled to
    its mean), when they differ from the fitted ones by more than 2 %: a level's load generator
    drew its own requests (96 ShareGPT prompts per level average 214 to 582 tokens in the AIPerf
    Qwen3.6 sweep), and the question is how the engine serves those."""
    from dataclasses import replace

    P = float(row.get("mean_input_tokens", np.nan))
    L = float(row.get("mean_output_tokens", np.nan))
    if not (np.isfinite(P) and np.isfinite(L) and P >= 1 and L >= 1):
        return engine
    if abs(P / engine.prompt_tokens - 1) <= 0.02 and abs(L / engine.output_tokens - 1) <= 0.02:
        return engine
    p99 = float(row.get("input_tokens_p99", np.nan))
    if not np.isfinite(p99):
        p99 = engine.prompt_p99 * P / engine.prompt_tokens if engine.prompt_p99 else None
    return replace(engine, prompt_tokens=P, output_tokens=L, prompt_p99=p99, notes=list(engine.notes))


def _simulated(engine, rate, *, arrivals, seed, duration_s):
    """The engine simulation's answer at ``rate`` without the refusal (what
    :func:`capbook.engine.predict.predict` would say, its latencies None past the saturation)."""
    from types import SimpleNamespace

    sat = _unrefused(engine, seed)
    run = engine.simulate(rate, arrivals=arrivals, seed=seed, duration_s=duration_s)
    ok = rate < sat and len(run.ttft_s) > 0
    q = (lambda x, p: float(np.quantile(x, p)) if ok else None)
    return SimpleNamespace(stable=ok, ttft_p50_s=q(run.ttft_s, 0.5), ttft_p99_s=q(run.ttft_s, 0.99),
                           e2e_mean_s=float(np.mean(run.e2e_s)) if ok else None)


def _unrefused(engine, seed) -> float:
    """What the simulated engine itself gives for saturation, past the refusal (a diagnostic of
    how far off the refused extrapolation would have been; NaN when the engine has no such call)."""
    f = getattr(engine, "simulated_saturation_rps", None)
    return float(f(seed=seed)) if f is not None else math.nan


def _lv(x) -> str:
    """A level as printed: its rate or concurrency, ``burst`` for an open-loop level with no rate."""
    return f"{x:.3g}" if np.isfinite(x) else "burst"


def _meta(sweep, key):
    tab = sweep.table
    if key in tab:
        for v in tab[key]:
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                return str(v)
    return ""


def score_sweep(sweep, *, name: str | None = None, fit_levels: int = 3, seed: int = 0,
                requests: int = 1500, meta: dict | None = None, refuse: bool = True) -> tuple[pd.DataFrame, dict]:
    """The issue-31 protocol on one sweep (open- or closed-loop): fit on the lowest stable levels,
    predict every other level and the saturation.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        Any importer's sweep of one configuration.
    name : str, optional
        Dataset name (default: the sweep's).
    fit_levels : int
        Stable levels to fit on (the lowest ones; fewer when there are fewer).
    seed : int
        Seed of every simulation.
    requests : int
        Measured requests of each closed-loop simulation.
    refuse : bool
        Honour the fit's refusals (:meth:`capbook.engine.stepmodel.EngineModel.limit_rps`): a level or
        saturation past the limit is recorded as refused, without an error. False: a diagnostic
        of what the refused extrapolation would have said (the simulated engine's own numbers,
        its saturation without the measured floor).
    meta : dict, optional
        ``tool``, ``model``, ``gpu`` to show (default: the sweep's columns).

    Returns
    -------
    (pandas.DataFrame, dict)
        One row per (level, quantity): ``dataset, loop, level, stable, quantity, predicted,
        measured, error`` (and a ``saturation_rps`` row, level NaN, when the sweep reaches a plateau) (predicted / measured − 1; inf when the model calls a stable
        open-loop level past its capacity). Open-loop held-out stable levels are predicted at
        their requested rate with :func:`capbook.engine.predict.predict` (the simulation, the level's
        arrivals over its duration into an idle engine) for E2E and TTFT, with the level's own
        prompt and output lengths (``_at_level_lengths``); every open-loop level
        not fitted gets the served throughput of the level simulated as run (its requests at its
        rate); closed-loop levels are run with :func:`capbook.sim.closedloop.simulate_closed` at
        their concurrency. The dict describes the dataset: levels fitted and predicted, the
        measured saturation (open loop: median completion rate of the levels that are not
        stable and show a queue, ``_queued``; closed loop: median throughput of the plateau
        levels within
        :data:`PLATEAU_SHARE` of the best; NaN when the sweep reaches none), the predicted one
        (:meth:`capbook.engine.stepmodel.EngineModel.saturation_rps`), the highest served throughput and
        the engine's notes.
    """
    fit_levels = integer(fit_levels, "fit_levels", minimum=1)
    requests = integer(requests, "requests", minimum=1)
    name = name or sweep.name
    meta = dict(meta or {})
    lv = sweep_levels(sweep)
    loop = lv["loop"].iloc[0]
    st = lv[lv["stable"]]
    k = min(fit_levels, len(st))
    if k < 1:
        raise ValueError(f"dataset {name!r} has no stable level to fit on")
    fit_idx = list(st.index[:k])
    sub = _level_sweep(sweep, lv.loc[fit_idx])
    engine = fit_engine(sub)
    limit = engine.limit_rps() if refuse else None   # the highest rate the fit may be asked about (None: any)
    rows = []

    def add(level, stable, q, pred, meas, err=None, refused=False):
        if meas is None or not np.isfinite(float(meas)):
            return
        if refused:
            pred, err = None, np.nan
        rows.append(dict(dataset=name, loop=loop, level=float(level), stable=bool(stable), quantity=q,
                         predicted=np.nan if pred is None else float(pred), measured=float(meas),
                         error=_err(pred, meas) if err is None else err, refused=bool(refused)))

    tool = meta.get("tool") or _meta(sweep, "format")
    arrivals = "uniform" if tool in _UNIFORM_TOOLS else "poisson"
    for i, r in lv.iterrows():
        if i in fit_idx:
            continue
        e2e_meas = _row_mean(r, "e2e")
        eng = _at_level_lengths(engine, r)
        if loop == "closed":
            run = simulate_closed(eng, int(round(r["level"])), requests=requests, seed=seed).summary()
            # a level whose simulated throughput lies past the fit's limit is refused, as predict refuses it
            refused = limit is not None and run["throughput_rps"] > limit
            for q, meas in (("throughput_rps", r["request_throughput_rps"]), ("e2e_mean_s", e2e_meas),
                            ("ttft_p50_s", r["ttft_p50_s"]), ("ttft_p99_s", r.get("ttft_p99_s"))):
                add(r["level"], r["stable"], q, run[q], meas, refused=refused)
            continue
        n = float(r["num_requests"]) if "num_requests" in r and np.isfinite(float(r["num_requests"])) else 1000.0
        rate = float(r["level"])
        refused = limit is not None and not rate <= limit
        qs = (("e2e_mean_s", e2e_meas), ("ttft_p50_s", r["ttft_p50_s"]), ("ttft_p99_s", r.get("ttft_p99_s")))
        p = None
        if r["stable"] and not refused:
            try:
                p = predict(sub, rate, engine=eng, seed=seed, arrivals=arrivals, duration_s=n / rate,
                            models=("simulation",)).models["simulation"]
            except ExtrapolationError:
                if refuse:
                    refused = True
                else:
                    p = _simulated(eng, rate, arrivals=arrivals, seed=seed, duration_s=n / rate)
        thr = math.nan if refused else _open_run(eng, rate, n, arrivals=arrivals, seed=seed)[0]
        add(r["level"], r["stable"], "throughput_rps", thr, r["request_throughput_rps"], refused=refused)
        if not r["stable"]:
            continue
        for q, meas in qs:
            if refused:
                add(r["level"], True, q, None, meas, refused=True)
            else:
                add(r["level"], True, q, getattr(p, q) if p.stable else None, meas, None if p.stable else np.inf)
    thr_all = lv["request_throughput_rps"].astype(float)
    queued = _queued(lv) if loop == "open" else pd.Series(True, index=lv.index)
    if loop == "open":
        unstable = lv[~lv["stable"] & queued]
        sat_meas = float(np.median(unstable["request_throughput_rps"])) if len(unstable) else np.nan
    else:
        plateau = lv[~lv["stable"] & (thr_all >= PLATEAU_SHARE * thr_all.max())]
        sat_meas = float(np.median(plateau["request_throughput_rps"])) if len(plateau) else np.nan
    try:
        sat_pred, sat_refused = (float(engine.saturation_rps(seed=seed)) if refuse
                                 else _unrefused(engine, seed)), ""
    except ExtrapolationError as exc:      # too far past the measured work per step, nothing to bound it
        sat_pred, sat_refused = math.nan, str(exc)
    if np.isfinite(sat_meas):
        rows.append(dict(dataset=name, loop=loop, level=np.nan, stable=False, quantity="saturation_rps",
                         predicted=sat_pred, measured=sat_meas, error=_err(sat_pred, sat_meas),
                         refused=bool(sat_refused)))
    info = dict(dataset=name, tool=tool, model=meta.get("model") or _meta(sweep, "model"),
                gpu=meta.get("gpu") or _meta(sweep, "gpu"), loop=loop, levels=len(lv),
                fitted=", ".join(_lv(x) for x in lv.loc[fit_idx, "level"]),
                predicted=", ".join(_lv(x) for x in lv.drop(index=fit_idx)["level"]),
                saturation_measured=sat_meas, saturation_predicted=sat_pred,
                saturation_error=_err(sat_pred, sat_meas), highest_served=float(thr_all.max()),
                limit_rps=np.nan if limit is None else float(limit), saturation_refused=sat_refused,
                saturation_unrefused=_unrefused(engine, seed) if sat_refused else sat_pred,
                refused_levels=int(sum(1 for x in rows if x["refused"] and x["quantity"] == "throughput_rps")),
                unstable="; ".join(f"{_lv(x)}: {w}" + ("" if q else " [no queue: not counted in the plateau]")
                                   for x, w, q in zip(lv["level"], lv["why"], queued) if w),
                engine_notes=list(engine.notes), engine=engine)
    return pd.DataFrame(rows, columns=_ROW_COLUMNS), info


def fidelity_datasets(datasets, *, fit_levels: int = 3, seed: int = 0, requests: int = 1500, refuse: bool = True):
    """Run :func:`score_sweep` on each ``(name, sweep)`` or ``(name, sweep, meta)``.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The per-level rows of every dataset, and the per-dataset table
        (:func:`dataset_table`).
    """
    rows, infos = [], []
    for item in datasets:
        name, sw = item[0], item[1]
        meta = item[2] if len(item) > 2 else None
        r, info = score_sweep(sw, name=name, fit_levels=fit_levels, seed=seed, requests=requests, meta=meta,
                              refuse=refuse)
        rows.append(r)
        infos.append(info)
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=_ROW_COLUMNS)
    return table, dataset_table(table, infos)


def dataset_table(rows: pd.DataFrame, infos) -> pd.DataFrame:
    """One row per dataset: what it is, the levels fitted and predicted, the saturation measured
    and predicted, and the median absolute error of each level quantity over its predicted levels."""
    out = []
    for info in infos:
        d = {k: v for k, v in info.items() if k not in ("engine", "engine_notes")}
        sel = rows[rows["dataset"] == info["dataset"]]
        for q in LEVEL_QUANTITIES:
            e = sel.loc[sel["quantity"] == q, "error"].abs()
            d[f"{q}_median_abs_error"] = float(np.median(e)) if len(e) else np.nan
            d[f"{q}_n"] = int(len(e))
        out.append(d)
    return pd.DataFrame(out)


def datasets_summary(per_dataset: pd.DataFrame) -> pd.DataFrame:
    """Median over datasets of each dataset's median absolute error (saturation: the absolute error of each dataset
    that reaches a plateau), against :data:`TARGETS`; plus the worst dataset's saturation error
    against :data:`WORST_SATURATION_TARGET`. Refusals (:class:`capbook.engine.stepmodel.ExtrapolationError`:
    the fit may not be asked that far) carry no error: they are counted on rows of their own
    (``datasets`` holds the count), not in the medians."""
    out = []
    cols = {"saturation_rps": "saturation_error", "e2e_mean_s": "e2e_mean_s_median_abs_error",
            "ttft_p50_s": "ttft_p50_s_median_abs_error", "ttft_p99_s": "ttft_p99_s_median_abs_error",
            "throughput_rps": "throughput_rps_median_abs_error"}
    for q, col in cols.items():
        v = per_dataset[col].abs().dropna() if col in per_dataset else pd.Series(dtype=float)
        med = float(np.median(v)) if len(v) else np.nan
        t = TARGETS.get(q, np.nan)
        out.append(dict(quantity=q, median_abs_error=med, target=t,
                        met=bool(med <= t) if np.isfinite(t) and np.isfinite(med) else None, datasets=int(len(v))))
    if "saturation_refused" in per_dataset:
        ref = per_dataset["saturation_refused"].astype(bool)
        reached = per_dataset["saturation_measured"].notna()
        out.append(dict(quantity="saturation refused (of those reaching a plateau)", median_abs_error=np.nan,
                        target=np.nan, met=None, datasets=int((ref & reached).sum())))
        out.append(dict(quantity="levels refused (past the fit's limit)", median_abs_error=np.nan, target=np.nan,
                        met=None, datasets=int(per_dataset["refused_levels"].sum())))
    v = per_dataset["saturation_error"].abs().dropna() if "saturation_error" in per_dataset else pd.Series(dtype=float)
    worst = float(v.max()) if len(v) else np.nan
    who = per_dataset.loc[v.idxmax(), "dataset"] if len(v) else ""
    out.append(dict(quantity=f"worst saturation ({who})", median_abs_error=worst, target=WORST_SATURATION_TARGET,
                    met=bool(worst <= WORST_SATURATION_TARGET) if np.isfinite(worst) else None, datasets=int(len(v))))
    return pd.DataFrame(out)


# -- every real dataset in ../shared ------------------------------------------------------------------
_SG = "sweeps/sglang/datacrunch-h200/sglang/outputs"
_SG70 = dict(model="meta-llama/Llama-3.3-70B-Instruct", gpu="H200", tensor_parallel=4)
_SG405 = dict(model="meta-llama/Llama-3.1-405B-Instruct", gpu="H200", tensor_parallel=8)
_ANUD = "sweeps/aiperf/anud18-qwen36/results/nvfp4/h100/chatbot"
_LLMD = "realdata/llmd-exp7-8b"
#: Candidate datasets: (name, path under the shared root, read_sweep keywords, meta). ``config``
#: fills what the files leave out and the folder's README states (GPU, tensor parallelism, model):
#: what a user would pass as --gpu/--model. Each is read; one with fewer than 4 levels is skipped.
_CANDIDATES = [
    ("sglang-70b-h200-tp4", _SG, dict(where={"params_b": 70, "workload": "random 1024/1024"}, load="rate",
                                      config=_SG70), dict(tool="sglang bench_serving", gpu="4×H200 TP4")),
    ("sglang-405b-h200-tp8", _SG, dict(where={"params_b": 405, "workload": "random 1024/1024"}, load="rate",
                                       config=_SG405), dict(tool="sglang bench_serving", gpu="8×H200 TP8")),
    ("sglang-70b-sharegpt", _SG, dict(where={"params_b": 70, "workload": "sharegpt"}, load="rate", config=_SG70), {}),
    ("sglang-405b-sharegpt", _SG, dict(where={"params_b": 405, "workload": "sharegpt"}, load="rate",
                                       config=_SG405), {}),
    ("vllm-surajssd-70b-tp8", "sweeps/vllm/surajssd-llm-k8s", dict(load="rate"),
     dict(tool="vllm benchmark_serving", gpu="8×A100 40GB TP8")),
    ("aiperf-qwen36-h100-closed", _ANUD, dict(load="concurrency", max_num_seqs=32,
                                              config=dict(gpu="H100 PCIe 80GB", tensor_parallel=1)),
     dict(tool="aiperf", model="nvidia/Qwen3.6-35B-A3B-NVFP4", gpu="H100 PCIe")),
    ("aiperf-qwen36-h100-open", _ANUD, dict(load="rate", max_num_seqs=32,
                                            config=dict(gpu="H100 PCIe 80GB", tensor_parallel=1)), {}),
    ("aiperf-inferencemax-kimi-mi355x", "sweeps/aiperf/InferenceMAX_Rocm_Team", dict(),
     dict(tool="aiperf (agentic replay)", gpu="MI355X TP4")),
    ("inference-benchmarker-gemma-open", "sweeps/inference-benchmarker",
     dict(load="rate", config=dict(gpu="RTX PRO 6000 96GB", tensor_parallel=1)),
     dict(tool="inference-benchmarker", gpu="RTX PRO 6000")),
    ("inference-benchmarker-gemma-closed", "sweeps/inference-benchmarker",
     dict(load="concurrency", config=dict(gpu="RTX PRO 6000 96GB", tensor_parallel=1)), {}),
    *[(f"llmd-exp7-{c.replace('/', '-')}", _LLMD, dict(where={"config": c}, repeats="mean"), {})
      for c in ("A100/vllm-2replicas", "A100/vllm-3replicas", "H100/vllm-2replicas", "H100/vllm-3replicas")],
]
#: Shared data left out on purpose, with the reason.
_NOT_SCORED = [
    ("llmd-exp7 llm-d-1p1d / llm-d-2p1d (A100, H100)", _LLMD,
     "prefill/decode disaggregated pools (a prefill and a decode replica with a KV transfer between them): the "
     "one-replica engine model does not describe them (and each setup ran at one rate only)"),
    ("guidellm nirjhar17 P/D", "sweeps/guidellm/nirjhar17-guidellm-pd-disaggregation",
     "prefill/decode disaggregated llm-d deployment on time-sliced T4s: no one-replica equivalent"),
    ("inference-perf demos kubecon-na-2025", "sweeps/inference-perf/demos/kubecon-na-2025",
     "the same runs as realdata/inference-perf-kubecon-na-2025/vllm and vllm+batch_size (scored there)"),
    ("llmperf leaderboard", "sweeps/llmperf", "one level each (concurrency 5, hosted APIs): not a sweep"),
    ("genai-perf wellflat", "sweeps/genai-perf", "one level each (concurrency 1): not a sweep"),
    ("vllm er0080 sweep fixtures", "sweeps/vllm/er0080-vllm-benchmarking",
     "a toy model at one concurrency (2) with two server configurations: not a load sweep"),
    ("guidellm neuralmagic", "sweeps/guidellm/neuralmagic-guidellm", "one benchmark (synchronous) left in the file"),
]


def shared_datasets(root, *, skipped: list | None = None) -> list:
    """Every real sweep under the shared data folder ``root`` with at least four levels of one
    configuration, read with :func:`capbook.sweeps.importers.read_sweep`.

    Parameters
    ----------
    root : str or Path
        The shared data folder (``../shared``). Missing: an empty list.
    skipped : list, optional
        Receives ``(name, reason)`` for each dataset left out (fewer than four levels, a
        disaggregated deployment, a duplicate, a read error).

    Returns
    -------
    list of (name, Sweep, meta)
        ``meta`` holds ``tool``, ``model``, ``gpu`` to show. First the six KubeCon vLLM
        variants (inference-perf, Llama-3.1-8B on one H100), then the others.
    """
    import warnings

    root = Path(root)
    skipped = [] if skipped is None else skipped
    out = []
    if not root.is_dir():
        return out
    kube = root / "realdata" / "inference-perf-kubecon-na-2025"
    if kube.is_dir():
        for p in kubecon_variants(kube):
            out.append((p.name, read_sweep(p), dict(tool="inference-perf", gpu="H100 80GB")))
    for name, rel, kw, meta in _CANDIDATES:
        path = root / rel
        if not path.exists():
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sw = read_sweep(path, name=name, **kw)
        except ValueError as exc:
            skipped.append((name, f"not read: {str(exc)[:200]}"))
            continue
        n = len(sw.table) + (len(sw.saturated) if getattr(sw, "saturated", None) is not None else 0)
        if n < 4:
            skipped.append((name, f"{n} level{'s' if n != 1 else ''} of one configuration (fewer than 4)"))
            continue
        out.append((name, sw, meta))
    for name, rel, why in _NOT_SCORED:
        if (root / rel).exists():
            skipped.append((name, why))
    return out


def shared_fidelity(root, *, fit_levels: int = 3, seed: int = 0, requests: int = 1500, refuse: bool = True):
    """The protocol on every dataset of :func:`shared_datasets` (what ``benchmarks/bench_fidelity.py``
    prints and the chapter *Where the textbook breaks* shows).

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame, list)
        The per-level rows, the per-dataset table (:func:`dataset_table`) and the skipped
        ``(name, reason)`` pairs. Empty tables when ``root`` is absent.
    """
    skipped: list = []
    ds = shared_datasets(root, skipped=skipped)
    rows, per = fidelity_datasets(ds, fit_levels=fit_levels, seed=seed, requests=requests, refuse=refuse)
    return rows, per, skipped


def biggest_misses(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, the predicted (level, quantity) with the largest absolute error."""
    r = rows.dropna(subset=["error"])
    if not len(r):
        return r
    i = r["error"].abs().groupby(r["dataset"], sort=False).idxmax()
    return r.loc[i.values].reset_index(drop=True)
