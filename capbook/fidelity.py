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
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from capbook.engine import _row_mean
from capbook.predict import MODELS, predict
from capbook.validation import integer, positive

__all__ = ["stable_stages", "all_stages", "fidelity", "fidelity_summary", "TARGETS", "TTFT_P99_TARGET_S"]

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
    from capbook.sweep import Sweep

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
    sweeps : iterable of capbook.sweep.Sweep
        Open-loop sweeps (for example each variant folder of the KubeCon inference-perf data,
        read with :func:`capbook.importers.read_sweep`).
    fit_stages : int
        Stable stages to fit on (the lowest ones).
    seed, requests
        Passed to :func:`capbook.predict.predict`.
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
