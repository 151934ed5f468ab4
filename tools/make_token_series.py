"""Generate the sample hourly token series in ``data/tokens/`` (deterministic, fixed seeds).

Run from the repository root::

    .venv/bin/python tools/make_token_series.py

Writes two CSV files in the trace layer's hourly format (``period_start, model, tier,
requests, throttled, input_tokens, output_tokens``; counts per UTC hour):

``weeks20.csv``
    20 weeks, one model and the interactive tier: weekday afternoon peak, weekends at 60 % of
    weekdays, 3.5 % weekly growth, 8 % log-normal noise; requests above 90,000 an hour are
    throttled (and still counted as demand). Train on 16 weeks, forecast 4.
``weeks56.csv``
    56 weeks, interactive tier growing 2 % a week with a launch step in week 40 (+25 % of all
    tokens) and a mix shift from week 44 to 48 (a reasoning mode reaching 30 % of traffic and
    tripling output tokens on that slice); plus a batch tier running at night.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capbook.forecast.tokens import event_calendar, synthetic_token_series  # noqa: E402

SEED_20 = 20260105
SEED_56 = 20250602
START_56 = pd.Timestamp("2025-06-02", tz="UTC")  # a Monday

#: The events built into weeks56.csv (also used by the chapter as the planner's calendar).
EVENTS_56 = event_calendar([
    {"event": "launch: assistant in the mobile app", "column": "all",
     "start": START_56 + pd.Timedelta(weeks=40), "full": START_56 + pd.Timedelta(weeks=40),
     "share": 1.0, "multiplier": 1.25},
    {"event": "reasoning mode rollout", "column": "output_tokens",
     "start": START_56 + pd.Timedelta(weeks=44), "full": START_56 + pd.Timedelta(weeks=48),
     "share": 0.3, "multiplier": 3.0},
])


def make_weeks20(seed: int = SEED_20) -> pd.DataFrame:
    """The 20-week series; another ``seed`` gives an independent draw of the same process."""
    return synthetic_token_series(20, growth=0.035, noise=0.08, weekend_level=0.6, start="2026-01-05",
                                  capacity_requests_per_hour=90_000, model="m-chat", tier="interactive",
                                  seed=seed)


def make_weeks56() -> pd.DataFrame:
    inter = synthetic_token_series(56, growth=0.02, noise=0.08, weekend_level=0.6, start=START_56,
                                   model="m-chat", tier="interactive", events=EVENTS_56,
                                   output_tokens_per_week=2.0e9, seed=SEED_56)
    batch = synthetic_token_series(56, growth=0.01, noise=0.15, weekend_level=1.0, peak_hour_utc=3.0, base=0.2,
                                   start=START_56, model="m-chat", tier="batch", output_tokens_per_week=6.0e8,
                                   input_per_output=6.0, output_tokens_per_request=500.0, seed=SEED_56 + 1)
    return pd.concat([inter, batch]).sort_values(["period_start", "tier"], kind="stable").reset_index(drop=True)


def main() -> None:
    out = ROOT / "data" / "tokens"
    out.mkdir(parents=True, exist_ok=True)
    for name, df in (("weeks20", make_weeks20()), ("weeks56", make_weeks56())):
        d = df.copy()
        d["period_start"] = d["period_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
        d.to_csv(out / f"{name}.csv", index=False)
        print(f"wrote {out / (name + '.csv')}: {len(d)} rows")


if __name__ == "__main__":
    main()
