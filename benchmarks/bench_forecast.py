"""Benchmark: capbook's calibrated token forecaster against statsforecast (MSTL, AutoETS).

On the 20-week sample series (``data/tokens/weeks20.csv``, output tokens) and on the same
generator with a second seed, every model trains on the first 16 weeks and forecasts the last
4. Reported per horizon week: coverage of the P90 line (share of actual hours at or below it)
and pinball loss at q = 0.9 as a percentage of the mean actual.

Peers (statsforecast 2.x):

* ``MSTL``: ``MSTL(season_length=[24, 168])`` (its default AutoETS trend forecaster) fitted on
  log tokens; the 80 % interval's upper edge, exponentiated, is the P90 line.
* ``AutoETS``: ``AutoETS(season_length=168)`` on tokens; the 80 % interval's upper edge.

Target: capbook's calibrated coverage within 0.85–0.95 in every horizon week, and its pinball
loss no worse than the best statsforecast model.

How to run
----------
statsforecast pins ``pandas<3``, so it must not enter the project's ``.venv``. This script runs
with the project's python (for capbook) and calls a *separate* interpreter that has
statsforecast, exchanging the training series through a temporary folder::

    .venv/bin/python benchmarks/bench_forecast.py --setup   # once: creates benchmarks/.venv-forecast
    .venv/bin/python benchmarks/bench_forecast.py           # runs the benchmark

``--setup`` runs ``python -m venv benchmarks/.venv-forecast`` and ``pip install
"statsforecast>=2,<3"`` (from your configured package index); the venv folder holds a
``.gitignore`` so git never sees it. Use ``--peer-python /path/to/python`` to point at any
interpreter that can ``import statsforecast``. Without one the script prints a message and
exits with status 0.

Run time: capbook fits in milliseconds; MSTL takes seconds; ``AutoETS(season_length=168)``
takes one to several minutes per series on two cores (75–840 s measured, depending on load).
``--no-ets`` leaves it out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "benchmarks" / ".venv-forecast"
HOURS_PER_WEEK = 168
TRAIN_WEEKS, TEST_WEEKS = 16, 4


# ------------------------------------------------------------------ peer side (statsforecast)
def run_peer(folder: Path, ets: bool = True) -> None:
    """Fit the statsforecast models on every ``train_*.csv`` in ``folder``; write forecasts."""
    from statsforecast import StatsForecast
    from statsforecast.models import MSTL, AutoETS

    h = TEST_WEEKS * HOURS_PER_WEEK
    timings = {}
    for path in sorted(folder.glob("train_*.csv")):
        key = path.stem[len("train_"):]
        tr = pd.read_csv(path, parse_dates=["ds"])
        tr["unique_id"] = key
        out = {}
        t0 = time.perf_counter()
        logdf = tr.assign(y=np.log(tr["y"]))[["unique_id", "ds", "y"]]
        sf = StatsForecast(models=[MSTL(season_length=[24, 168])], freq="h", n_jobs=1)
        fc = sf.forecast(df=logdf, h=h, level=[80])
        out["MSTL"] = (np.exp(fc["MSTL"].to_numpy()), np.exp(fc["MSTL-hi-80"].to_numpy()))
        t1 = time.perf_counter()
        if ets:
            sf = StatsForecast(models=[AutoETS(season_length=168)], freq="h", n_jobs=1)
            fc = sf.forecast(df=tr[["unique_id", "ds", "y"]], h=h, level=[80])
            out["AutoETS"] = (fc["AutoETS"].to_numpy(), fc["AutoETS-hi-80"].to_numpy())
        t2 = time.perf_counter()
        timings[key] = {"MSTL": t1 - t0, "AutoETS": t2 - t1}
        frame = pd.DataFrame({f"{m}_{c}": v[i] for m, v in out.items() for i, c in enumerate(("point", "p90"))})
        frame.to_csv(folder / f"fc_{key}.csv", index=False)
    (folder / "timings.json").write_text(json.dumps(timings))


# ------------------------------------------------------------------ main side (capbook)
def peer_python(arg: str | None) -> str | None:
    candidates = [arg] if arg else [str(VENV / "bin" / "python")]
    for c in candidates:
        if c and Path(c).exists():
            ok = subprocess.run([c, "-c", "import statsforecast"], capture_output=True).returncode == 0
            if ok:
                return c
    return None


def setup_venv() -> int:
    print(f"creating {VENV} with statsforecast (separate from the project's .venv: it pins pandas<3)")
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    (VENV / ".gitignore").write_text("*\n")
    r = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "statsforecast>=2,<3"])
    return r.returncode


def series_for(seed: int | None):
    """Output tokens per hour: the sample file (seed None) or a fresh draw of its generator."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tools"))
    from capbook.forecast.tokens import hourly_series, read_token_csv, sample_token_path
    from make_token_series import make_weeks20

    df = read_token_csv(sample_token_path("weeks20")) if seed is None else make_weeks20(seed)
    return hourly_series(df, "output_tokens")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup", action="store_true", help="create benchmarks/.venv-forecast with statsforecast")
    ap.add_argument("--peer-python", help="python interpreter that can import statsforecast")
    ap.add_argument("--no-ets", action="store_true", help="leave out AutoETS(168) (slow: minutes per series)")
    ap.add_argument("--peer", help=argparse.SUPPRESS)  # internal: run the statsforecast side on a folder
    args = ap.parse_args(argv)
    if args.peer:
        run_peer(Path(args.peer), ets=not args.no_ets)
        return 0
    if args.setup:
        return setup_venv()
    py = peer_python(args.peer_python)
    if py is None:
        print("statsforecast is not available: run `.venv/bin/python benchmarks/bench_forecast.py --setup` "
              "(creates benchmarks/.venv-forecast) or pass --peer-python; skipping the benchmark.")
        return 0

    sys.path.insert(0, str(ROOT))
    from capbook.forecast.scoring import pinball_loss
    from capbook.forecast.tokens import forecast_tokens

    sys.path.insert(0, str(ROOT / "tools"))
    from make_token_series import SEED_20

    cases = {"weeks20 (sample file)": None, f"seed {SEED_20 + 1}": SEED_20 + 1}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = {}
        for i, (label, seed) in enumerate(cases.items()):
            s = series_for(seed)
            train, test = s.iloc[:TRAIN_WEEKS * HOURS_PER_WEEK], s.iloc[TRAIN_WEEKS * HOURS_PER_WEEK:]
            data[f"c{i}"] = (label, train, test)
            pd.DataFrame({"ds": train.index.tz_localize(None), "y": train.to_numpy()}).to_csv(
                folder / f"train_c{i}.csv", index=False)
        t0 = time.perf_counter()
        cmd = [py, str(Path(__file__).resolve()), "--peer", str(folder)] + (["--no-ets"] if args.no_ets else [])
        subprocess.run(cmd, check=True)
        peer_wall = time.perf_counter() - t0
        timings = json.loads((folder / "timings.json").read_text())
        for key, (label, train, test) in data.items():
            peer = pd.read_csv(folder / f"fc_{key}.csv")
            t0 = time.perf_counter()
            fcs = {"capbook calibrated": forecast_tokens(train, TEST_WEEKS, method="calibrated", quantiles=(0.5, 0.9)),
                   "capbook sqrt(h)": forecast_tokens(train, TEST_WEEKS, method="sqrt_h", quantiles=(0.5, 0.9))}
            t_cap = (time.perf_counter() - t0) / 2
            p90 = {m: fc.frame["p90"].to_numpy() for m, fc in fcs.items()}
            p90["statsforecast MSTL (log)"] = peer["MSTL_p90"].to_numpy()
            if "AutoETS_p90" in peer.columns:
                p90["statsforecast AutoETS(168)"] = peer["AutoETS_p90"].to_numpy()
            secs = {"capbook calibrated": t_cap, "capbook sqrt(h)": t_cap,
                    "statsforecast MSTL (log)": timings[key]["MSTL"],
                    "statsforecast AutoETS(168)": timings[key]["AutoETS"]}
            y = test.to_numpy()
            week = np.repeat(np.arange(1, TEST_WEEKS + 1), HOURS_PER_WEEK)
            for m, band in p90.items():
                row = {"series": label, "model": m}
                for w in range(1, TEST_WEEKS + 1):
                    sel = week == w
                    row[f"cov_w{w}"] = float(np.mean(y[sel] <= band[sel]))
                for w in range(1, TEST_WEEKS + 1):
                    sel = week == w
                    row[f"pin%_w{w}"] = 100 * pinball_loss(y[sel], band[sel], 0.9) / y[sel].mean()
                row["pin%_all"] = 100 * pinball_loss(y, band, 0.9) / y.mean()
                row["fit_s"] = secs[m]
                rows.append(row)
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"P90 coverage per horizon week and pinball loss at q=0.9 (% of mean actual); "
          f"train {TRAIN_WEEKS} weeks, test {TEST_WEEKS}; output tokens per hour")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"(statsforecast subprocess wall time {peer_wall:.1f} s including imports)")
    ok = True
    for label in table["series"].unique():
        t = table[table["series"] == label].set_index("model")
        cal = t.loc["capbook calibrated"]
        covs = cal[[f"cov_w{w}" for w in range(1, TEST_WEEKS + 1)]]
        best_peer = t.loc[[m for m in t.index if m.startswith("statsforecast")], "pin%_all"].min()
        cov_ok = bool(((covs >= 0.85) & (covs <= 0.95)).all())
        pin_ok = bool(cal["pin%_all"] <= best_peer)
        ok &= cov_ok and pin_ok
        print(f"{label}: calibrated coverage within 0.85-0.95 every week: {cov_ok}; "
              f"pinball {cal['pin%_all']:.3f} % vs best statsforecast {best_peer:.3f} % "
              f"(ratio {cal['pin%_all'] / best_peer:.3f}): {'no worse' if pin_ok else 'WORSE'}")
    print("TARGET MET" if ok else "TARGET NOT MET")
    return 0


if __name__ == "__main__":
    sys.exit(main())
