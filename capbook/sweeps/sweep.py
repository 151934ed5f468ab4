"""From a concurrency sweep to slots (S), service time (T) and capacity.

A replica's capacity is two measured numbers. **S** is the most sequences it holds in flight
while the chosen TPOT percentile stays within the target (with a margin); **T** is how long one
request holds a slot, prefill plus output tokens times TPOT at that concurrency. Requests per
second follow: ``S / T`` (Little's law with every slot busy; :func:`capbook.queueing.replica_capacity`).

The sweep table has one row per concurrency level (see ``data/README.md`` for units):

``concurrency, ttft_p50_s, ttft_p95_s, ttft_p99_s, tpot_p50_s, tpot_p95_s, tpot_p99_s,
request_throughput_rps, output_throughput_tps, mean_input_tokens, mean_output_tokens,
num_requests`` plus the configuration columns ``model, params_b, gpu, tensor_parallel, engine,
precision, workload`` (constant within a sweep). Extra columns are kept.

Rows with ``saturated`` True (open-loop points the load generator could not drive, or where the
engine was already full; see :mod:`capbook.sweeps.importers`) are not levels: they are kept apart in
:attr:`Sweep.saturated`, and :attr:`Sweep.saturation_rps` is the highest completion rate they
reached. A sweep of one level reads TPOT and TTFT as flat at every concurrency (with a note).

Examples
--------
>>> sweep = load_sample_sweep("illustrative_chat")
>>> choose_slots(sweep, tpot_target_s=0.050, q=95).S
32
>>> round(float(sweep.service_time_s(32, 1500, 300)), 2)
12.25
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from capbook.paths import data_path
from capbook.queueing import replica_capacity
from capbook.validation import array, integer, number, positive

__all__ = [
    "METRIC_COLUMNS",
    "CONFIG_COLUMNS",
    "QUANTILES",
    "Sweep",
    "SlotChoice",
    "choose_slots",
    "token_rates_at_capacity",
    "blended_service_time",
    "blended_capacity",
    "capacity_vs_long_share",
    "load_sample_sweep",
    "list_sample_sweeps",
]

#: Metric columns of a sweep table, in order.
METRIC_COLUMNS = [
    "concurrency",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "tpot_p99_s",
    "request_throughput_rps",
    "output_throughput_tps",
    "mean_input_tokens",
    "mean_output_tokens",
    "num_requests",
]
#: Configuration columns (constant within one sweep).
CONFIG_COLUMNS = ["model", "params_b", "gpu", "tensor_parallel", "engine", "precision", "workload"]
#: Percentiles a sweep table carries for TTFT and TPOT.
QUANTILES = (50, 95, 99)
#: Columns that must hold a number in every row.
_REQUIRED_NUMERIC = ["concurrency", "tpot_p50_s", "ttft_p50_s", "mean_input_tokens",
                     "mean_output_tokens"]

#: A prefill rate (input tokens/s) below this, derived from a sweep's TTFT, is flagged in
#: :attr:`Sweep.notes`: even a small GPU prefills thousands of tokens a second.
_SLOW_PREFILL_TPS = 1000.0


def _percentile(q, name: str = "q") -> int:
    """``q`` as one of the percentiles a sweep table holds (:data:`QUANTILES`)."""
    q = integer(q, name)
    if q not in QUANTILES:
        raise ValueError(f"{name}={q!r} must be one of {QUANTILES} (the percentiles a sweep table holds)")
    return q


def _statistic(q, name: str = "q"):
    """``q`` as a percentile of :data:`QUANTILES` or the string ``"mean"``."""
    if isinstance(q, str):
        if q.strip().lower() == "mean":
            return "mean"
        raise ValueError(f"{name}={q!r} must be 'mean' or one of {QUANTILES}")
    return _percentile(q, name)


def _stat_column(metric: str, q) -> str:
    """Sweep-table column of ``metric`` (``"ttft"``/``"tpot"``) at statistic ``q``."""
    return f"{metric}_mean_s" if q == "mean" else f"{metric}_p{q}_s"


class Sweep:
    """A concurrency sweep of one configuration: one row per concurrency level.

    Build one with :meth:`from_frame`, :meth:`from_csv`, :func:`load_sample_sweep` or
    :func:`capbook.sweeps.importers.read_sweep`.

    The sweep table is :attr:`table` (sorted by concurrency; a copy).

    Attributes
    ----------
    config : dict
        The configuration columns (model, params_b, gpu, tensor_parallel, engine, precision,
        workload) and ``name``; ``None`` where the source did not say.
    """

    def __init__(self, table: pd.DataFrame, name: str | None = None):
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"a sweep table must be a pandas DataFrame, not {type(table).__name__}")
        table, sat = self._split_saturated(table, name)
        self._table = self._validate(table)
        self.name = name
        #: Files an importer passed over while reading this sweep, with the reason.
        self.skipped: list = []
        #: Saturated load points (``saturated`` True): not levels, kept for reference.
        self.saturated: pd.DataFrame = sat
        #: Highest completion rate (requests/s) among the saturated points; None without any.
        self.saturation_rps: float | None = None
        if len(sat) and "request_throughput_rps" in sat:
            r = pd.to_numeric(sat["request_throughput_rps"], errors="coerce").to_numpy(float)
            if np.isfinite(r).any():
                self.saturation_rps = float(np.nanmax(r))
        self._extra_notes: list[str] = []
        self._prefill_override: float | None = None  # set_prefill_rate
        cfg = {}
        for c in CONFIG_COLUMNS:
            if c in self._table:
                vals = self._table[c].dropna().unique()
                if len(vals) > 1:
                    raise ValueError(
                        f"sweep column {c!r} must be constant within one sweep; found {list(vals)}"
                    )
                v = vals[0] if len(vals) else None
                cfg[c] = v.item() if isinstance(v, np.generic) else v
            else:
                cfg[c] = None
        for c in ("max_num_seqs", "config"):  # importer columns, reported when constant
            if c in self._table:
                vals = self._table[c].dropna().unique()
                if len(vals) == 1:
                    v = vals[0]
                    cfg[c] = v.item() if isinstance(v, np.generic) else v
        cfg["name"] = name
        self.config = cfg
        t = self._table
        self._n = t["concurrency"].to_numpy(float)
        self._cols = {c: t[c].to_numpy(float) for c in t.columns
                      if c.startswith(("ttft_p", "tpot_p")) and c.endswith("_s")}
        for c in ("ttft_mean_s", "tpot_mean_s"):  # optional: the mean (q="mean"), when reported
            if c in t:
                self._cols[c] = pd.to_numeric(t[c], errors="coerce").to_numpy(float)
        self._lo, self._hi = float(self._n[0]), float(self._n[-1])
        self._ok: dict = {}  # (metric, q) -> validated column, for the fast path

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def _split_saturated(df: pd.DataFrame, name):
        """(levels, saturated points): rows whose ``saturated`` column is true are not levels."""
        if "saturated" not in df.columns or len(df) == 0:
            return df, df.iloc[:0].copy()
        flag = df["saturated"].map(lambda v: v is True or (isinstance(v, (bool, np.bool_)) and bool(v))
                                   or (isinstance(v, str) and v.strip().lower() == "true")
                                   or (isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                                       and v == 1)).to_numpy(bool)
        sat = df[flag].copy()
        keep = df[~flag].copy()
        if len(keep) == 0:
            why = ""
            if "saturation_reason" in sat:
                why = "; ".join(sorted({str(r) for r in sat["saturation_reason"].dropna()}))[:400]
            raise ValueError(
                f"sweep {name!r}: every load point ({len(sat)}) is saturated ({why}); there is no "
                "level to choose S from: measure lower request rates or a concurrency sweep"
            )
        sort_col = next((c for c in ("request_rate_target", "concurrency") if c in sat), None)
        if sort_col is not None:
            sat = sat.sort_values(sort_col, kind="stable", na_position="last")
        return keep, sat.reset_index(drop=True)

    def add_note(self, note: str) -> None:
        """Attach a caveat (e.g. from an importer) that :attr:`notes` then lists."""
        if note and note not in self._extra_notes:
            self._extra_notes.append(str(note))

    @staticmethod
    def _validate(df: pd.DataFrame) -> pd.DataFrame:
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"a sweep table must be a pandas DataFrame, not {type(df).__name__}")
        missing = [c for c in METRIC_COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"sweep table lacks column(s) {missing}; required: {METRIC_COLUMNS}")
        if len(df) == 0:
            raise ValueError("sweep table has no rows")
        t = df.copy()
        for c in METRIC_COLUMNS:
            try:
                t[c] = pd.to_numeric(t[c])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"sweep column {c!r} is not numeric: {exc}") from None
        for c in _REQUIRED_NUMERIC:
            bad = t.index[~np.isfinite(t[c].to_numpy(float))]
            if len(bad):
                raise ValueError(f"sweep column {c!r} is missing or not finite in row(s) {list(bad)}")
        n = t["concurrency"].to_numpy(float)
        if np.any(n <= 0):
            raise ValueError(f"sweep column 'concurrency' must be > 0; got {list(n[n <= 0])}")
        t = t.sort_values("concurrency", kind="stable").reset_index(drop=True)
        dup = t["concurrency"][t["concurrency"].duplicated()]
        if len(dup):
            raise ValueError(
                f"sweep has several rows at concurrency {sorted(set(dup))}: one row per level is "
                "required (average repeated runs or pick one before building the Sweep)"
            )
        for c in [c for c in t.columns if c.startswith(("ttft_p", "tpot_p")) and c.endswith("_s")]:
            v = t[c].to_numpy(float)
            if np.any(v[np.isfinite(v)] < 0):
                raise ValueError(f"sweep column {c!r} has negative times")
        return t

    @classmethod
    def from_frame(cls, df: pd.DataFrame, name: str | None = None) -> "Sweep":
        """Build a sweep from a DataFrame holding the sweep-table columns."""
        return cls(df, name=name)

    @classmethod
    def from_csv(cls, path, name: str | None = None) -> "Sweep":
        """Read a sweep table from a CSV file written in the sweep-table layout."""
        path = Path(path)
        try:
            df = pd.read_csv(path)
        except FileNotFoundError:
            raise ValueError(f"sweep file {path} does not exist") from None
        try:
            return cls(df, name=name if name is not None else path.stem)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    # -- views -------------------------------------------------------------------------------
    @property
    def table(self) -> pd.DataFrame:
        """The sweep table (a copy)."""
        return self._table.copy()

    @property
    def fingerprint(self) -> tuple:
        """What a model fitted to this sweep depends on: its table (by identity: a method that
        changes it replaces it, nothing edits it in place), notes, configuration and hardware.
        Two reads with equal fingerprints would fit the same model
        (:func:`capbook.engine.stepmodel.fitted_engine` keys its fits on it)."""
        return (id(self._table), tuple(self.notes), repr(sorted(getattr(self, "config", {}).items())),
                repr(getattr(self, "hardware", None)))

    @property
    def concurrency(self) -> np.ndarray:
        """Measured concurrency levels, ascending."""
        return self._n.copy()

    def __repr__(self) -> str:
        c = self.config
        # only what the sweep records: a field it does not know is left out, not shown as None
        known = "".join(f", {k}={c[f]!r}" for k, f in (("model", "model"), ("gpu", "gpu"),
                                                        ("tp", "tensor_parallel"))
                        if c.get(f) is not None and not (isinstance(c[f], float) and math.isnan(c[f])))
        return (f"Sweep(name={self.name!r}{known}, "
                f"levels={[float(f'{x:.3g}') if x % 1 else int(x) for x in self._n]})")

    def has(self, metric: str, q) -> bool:
        """Whether the sweep holds ``metric`` (``"ttft"`` or ``"tpot"``) at percentile ``q``
        (or its mean, ``q="mean"``) at every level."""
        col = _stat_column(metric, q)
        return col in self._cols and bool(np.all(np.isfinite(self._cols[col])))

    def percentile_for(self, metric: str, q) -> tuple[int, str | None]:
        """The percentile of ``metric`` to read for an objective at percentile ``q``, and why.

        ``q`` itself when the sweep reports it at every level; else the nearest stricter one it
        reports (p99 for a p95 objective), else its highest (the median, when that is all a
        load generator wrote): the rule :func:`capbook.plan.steps.capacity_plan` applies. The note
        says which was used and why (None when ``q`` is reported).

        Parameters
        ----------
        metric : {"tpot", "ttft"}
        q : {50, 95, 99}

        Returns
        -------
        (int, str or None)

        Raises
        ------
        ValueError
            When the sweep reports none of p50, p95 and p99 of ``metric``.

        Examples
        --------
        >>> sw = load_sample_sweep()
        >>> sw.percentile_for("tpot", 95)
        (95, None)
        >>> t = sw.table.assign(tpot_p95_s=float("nan"), tpot_p99_s=float("nan"))
        >>> q, note = Sweep.from_frame(t, name="medians").percentile_for("tpot", 95)
        >>> q, note
        (50, 'the sweep reports no p95 TPOT (it has p50): the TPOT objective is checked at p50, less strict than asked: measure the p95 to plan on it')
        """
        q = _percentile(q)
        if self.has(metric, q):
            return q, None
        have = [q_ for q_ in (99, 95, 50) if self.has(metric, q_)]
        if not have:
            raise ValueError(f"sweep {self.name!r} holds no {metric.upper()} percentile (p50, p95 or p99)")
        stricter = [q_ for q_ in have if q_ > q]
        q_new = min(stricter) if stricter else max(have)
        return q_new, (f"the sweep reports no p{q} {metric.upper()} (it has "
                       f"{', '.join(f'p{q_}' for q_ in sorted(have))}): the {metric.upper()} objective is checked at "
                       f"p{q_new}" + ("" if stricter else f", less strict than asked: measure the p{q} to plan on it"))

    # -- interpolation -----------------------------------------------------------------------
    def _column(self, metric: str, q) -> np.ndarray:
        key = (metric, q)
        y = self._ok.get(key)
        if y is not None:
            return y
        q = _statistic(q)
        col = _stat_column(metric, q)
        y = self._cols.get(col)
        if (y is None or not np.all(np.isfinite(y))) and q == "mean":
            raise ValueError(
                f"sweep {self.name!r} has no {col} column (or it is empty at some level): the "
                f"source did not report the mean {metric.upper()}; pass q=50 for the median instead"
            )
        if y is None or not np.all(np.isfinite(y)):
            raise ValueError(
                f"sweep {self.name!r} has no {col} values (the source did not report the "
                f"p{q} of {metric.upper()}); use a percentile it has"
            )
        self._ok[key] = y
        return y

    def _interp(self, metric: str, concurrency, q, extrapolate: bool):
        y = self._column(metric, q)
        if type(concurrency) in (int, float, np.float64, np.int64):  # fast scalar path
            c = float(concurrency)
            if self._lo <= c <= self._hi and len(self._n) > 1:
                return float(np.interp(c, self._n, y))
        x = array(concurrency, "concurrency", lo=0, lo_open=True)
        if x.size and len(self._n) > 1:
            if self._lo <= x.min() and x.max() <= self._hi:
                res = np.interp(x, self._n, y)
                return res[()] if res.ndim == 0 else res
        lo, hi = self._n[0], self._n[-1]
        if len(self._n) == 1:
            # one level: nothing says how TPOT/TTFT change with concurrency; read them as flat
            # (Sweep.notes says so) rather than refuse every other concurrency
            res = np.full_like(x, y[0])
            return res[()] if res.ndim == 0 else res
        # an open-loop sweep's lowest level is fractional (mean sequences in flight) while S is
        # a whole number rounded down from a level (choose_slots): read [floor(lo), lo) flat
        floor_lo = max(1.0, float(np.floor(lo))) if lo % 1 else lo
        x = np.where((x >= floor_lo) & (x < lo), lo, x)
        out_of_range = (x < lo) | (x > hi)
        if np.any(out_of_range) and not extrapolate:
            bad = np.unique(x[out_of_range])
            raise ValueError(
                f"concurrency {bad.tolist()} outside the measured range [{lo:g}, {hi:g}] of sweep "
                f"{self.name!r}; pass extrapolate=True to extend the end segments linearly"
            )
        res = np.interp(x, self._n, y)
        if not np.any(out_of_range):
            return res[()] if res.ndim == 0 else res
        if np.any(out_of_range):
            left = x < lo
            right = x > hi
            sl = (y[1] - y[0]) / (self._n[1] - self._n[0])
            sr = (y[-1] - y[-2]) / (self._n[-1] - self._n[-2])
            res = np.where(left, y[0] + sl * (x - lo), res)
            res = np.where(right, y[-1] + sr * (x - hi), res)
            res = np.maximum(res, 0.0)
        return res[()] if res.ndim == 0 else res

    def tpot(self, concurrency, q: int = 50, *, extrapolate: bool = False):
        """Time per output token at ``concurrency``, seconds, by linear interpolation.

        Parameters
        ----------
        concurrency : float or array_like
            Sequences in flight (> 0).
        q : {50, 95, 99} or "mean"
            Percentile across requests, or ``"mean"`` for the mean across requests (the
            ``tpot_mean_s`` column; a ValueError when the sweep lacks it). The mean is what
            Little's law needs for a mean holding time.
        extrapolate : bool
            Extend the first and last segments linearly outside the measured range
            (clipped at 0) instead of raising.
        """
        return self._interp("tpot", concurrency, q, extrapolate)

    def ttft(self, concurrency, q: int = 50, *, extrapolate: bool = False):
        """Time to first token at ``concurrency``, seconds, by linear interpolation.

        Parameters as in :meth:`tpot`.
        """
        return self._interp("ttft", concurrency, q, extrapolate)

    # -- prefill and service time ------------------------------------------------------------
    @property
    def prefill_rate_tps(self) -> float:
        """Prefill throughput, input tokens per second, derived from the sweep.

        It is the mean input length divided by the p50 TTFT at the lowest concurrency level:
        at concurrency 1 no other request queues ahead or interleaves, so TTFT is one prefill
        (plus client overhead, which this estimate folds in, making it slightly conservative).
        When the lowest level is above 1, other prompts' prefills inflate TTFT and the rate is
        underestimated; :attr:`notes` says so.
        """
        if self._prefill_override is not None:
            return self._prefill_override
        i = 0
        return float(self._table["mean_input_tokens"].iloc[i] / self._table["ttft_p50_s"].iloc[i])

    def set_prefill_rate(self, tps: float, source: str = "given") -> "Sweep":
        """Use a measured prefill rate instead of the one derived from the lowest level's TTFT.

        Parameters
        ----------
        tps : float
            Prefill throughput, input tokens per second (> 0), e.g. from a prefill-only
            benchmark; every prefill time of this sweep (service time, TTFT in the simulator,
            the input rating) then uses it.
        source : str
            Where the number comes from, for :attr:`notes`.

        Returns
        -------
        Sweep
            This sweep (changed in place).
        """
        v = positive(tps, "prefill_rate_tps")
        derived = float(self._table["mean_input_tokens"].iloc[0] / self._table["ttft_p50_s"].iloc[0])
        self._prefill_override = v
        self._extra_notes.append(f"prefill rate {v:,.0f} input tokens/s ({source}) instead of the "
                                 f"{derived:,.0f} tokens/s derived from the lowest level's TTFT")
        return self

    @property
    def notes(self) -> list[str]:
        """Caveats about how well this sweep supports the derived quantities."""
        out = []
        t = self._table
        if len(self._n) == 1:
            out.append(
                f"the sweep has a single level ({self._n[0]:g}): TPOT and TTFT at any other "
                "concurrency are read as that level's (flat); measure more levels to know how "
                "they grow"
            )
        elif len(self._n) == 2:
            out.append(
                f"the sweep has only two levels ({self._n[0]:g}, {self._n[1]:g}): TPOT and TTFT "
                "between them are a straight line"
            )
        if self._n[0] > 1:
            out.append(
                f"lowest level is concurrency {self._n[0]:g}, not 1: prefill_rate_tps is taken "
                "from a TTFT that includes other requests' interference (an underestimate)"
            )
        derived = float(t["mean_input_tokens"].iloc[0] / t["ttft_p50_s"].iloc[0])
        if self._prefill_override is None and derived < _SLOW_PREFILL_TPS:
            out.append(
                f"the lowest level's TTFT ({t['ttft_p50_s'].iloc[0]:.3g} s for "
                f"{t['mean_input_tokens'].iloc[0]:,.0f} input tokens) implies a prefill rate of "
                f"{derived:,.0f} tokens/s, implausibly slow for a GPU: the TTFT likely holds more than "
                "the prefill (hidden reasoning tokens, a queue, the network); pass prefill_rate_tps= "
                "with a measured prefill rate"
            )
        if "failed_requests" in t:
            f = pd.to_numeric(t["failed_requests"], errors="coerce").fillna(0).to_numpy()
            if np.any(f > 0):
                ok = t["num_requests"].to_numpy(float)
                lv = [f"{n:g}: {int(k)}" + (f" of {int(k + m)} ({k / (k + m):.0%})" if np.isfinite(m) else "")
                      for n, k, m in zip(self._n, f, ok) if k > 0]
                out.append("failed requests at some levels (concurrency: count) " + ", ".join(lv)
                           + "; the percentiles cover successful requests only")
        if "tpot_note" in t:
            for note in t["tpot_note"].dropna().unique():
                note = str(note)
                if "tpot_rescale" in t and "rescaled" in note:
                    r = pd.to_numeric(t.loc[t["tpot_note"] == note, "tpot_rescale"], errors="coerce").dropna()
                    if len(r):
                        lo_, hi_ = f"{r.min():.2f}", f"{r.max():.2f}"
                        note += (f" (derived / reported {lo_}" + (f"–{hi_}" if hi_ != lo_ else "")
                                 + f" at {len(r)} level{'s' if len(r) > 1 else ''})")
                out.append(note)
        if "concurrency_source" in t:
            src = set(t["concurrency_source"].dropna()) - {"set"}
            if src:
                out.append("open-loop points: concurrency is an estimate of the sequences the engine "
                           f"ran ({', '.join(sorted(src))}), not a level the load generator held")
        if len(self.saturated):
            out.append(self._saturation_note())
        out.extend(self._extra_notes)
        return out

    def _saturation_note(self) -> str:
        sat = self.saturated
        parts = []
        for _, r in sat.iterrows():
            label = r.get("point") if isinstance(r.get("point"), str) else None
            if label is None:
                rt = r.get("request_rate_target")
                label = (f"rate {rt:g} req/s" if isinstance(rt, (int, float)) and np.isfinite(rt)
                         else f"concurrency {r.get('concurrency'):.3g}")
            why = r.get("saturation_reason")
            parts.append(f"{label}" + (f" ({why})" if isinstance(why, str) and why else ""))
        rps = (f"; the highest completion rate they reached is {self.saturation_rps:.4g} req/s "
               "(sweep.saturation_rps)") if self.saturation_rps is not None else ""
        return (f"{len(sat)} saturated load point{'s' if len(sat) > 1 else ''} kept out of the levels "
                f"(sweep.saturated): " + "; ".join(parts) + rps)

    def prefill_time(self, input_tokens):
        """Prefill time of a prompt of ``input_tokens`` tokens, seconds (linear in length)."""
        x = array(input_tokens, "input_tokens", lo=0)
        res = x / self.prefill_rate_tps
        return res[()] if res.ndim == 0 else res

    @property
    def holding_statistic(self):
        """The TPOT statistic :meth:`service_time_s` uses by default: ``"mean"`` when the sweep
        reports the mean TPOT at every level (Little's law needs the mean holding time), else
        ``50`` (the median stands in for it)."""
        return "mean" if self.has("tpot", "mean") else 50

    def service_time_s(self, concurrency, input_tokens=None, output_tokens=None, q: int | str | None = None,
                     *, extrapolate: bool = False):
        """Time a request holds a slot at ``concurrency``, seconds.

        .. math:: T = \\frac{\\text{input tokens}}{\\text{prefill rate}}
                  + \\text{output tokens} \\times \\text{TPOT}_q(n)

        Parameters
        ----------
        concurrency : float or array_like
            Sequences in flight.
        input_tokens, output_tokens : float or array_like, optional
            Request lengths, tokens. Default: the sweep's mean lengths at that level
            (interpolated).
        q : {50, 95, 99}, "mean" or None
            TPOT statistic: ``"mean"``, the mean TPOT (column ``tpot_mean_s``), which makes
            ``T`` the mean holding time that Little's law uses; or a percentile. ``None`` (the
            default): the mean when the sweep reports it at every level, else the median (most
            load generators report the two within a fraction of a percent at a fixed
            concurrency). ``"mean"`` on a sweep without the column raises a ValueError naming it.
        """
        n = array(concurrency, "concurrency", lo=0, lo_open=True)
        if q is None:
            q = self.holding_statistic
        if input_tokens is None:
            input_tokens = np.interp(n, self._n, self._table["mean_input_tokens"].to_numpy(float))
        if output_tokens is None:
            output_tokens = np.interp(n, self._n, self._table["mean_output_tokens"].to_numpy(float))
        out = array(output_tokens, "output_tokens", lo=0)
        res = self.prefill_time(input_tokens) + out * self.tpot(n, q, extrapolate=extrapolate)
        res = np.asarray(res, dtype=float)
        return res[()] if res.ndim == 0 else res


# -- choosing S ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotChoice:
    """Result of :func:`choose_slots`.

    Attributes
    ----------
    S : int
        Slots: the highest measured concurrency meeting the limit, with every lower level
        meeting it too (0 if even the lowest level fails). Open-loop sweeps have fractional
        levels (mean requests in flight); S is that level rounded down, at least 1.
    level : float
        The measured concurrency level S was taken from (a row of ``sweep.table``; NaN when
        S = 0).
    reason : str
        Why the search stopped there.
    limit_s : float
        The TPOT the chosen percentile had to stay within: ``target × (1 − margin)``, seconds.
    tpot_at_S : float
        Chosen-percentile TPOT at S, seconds (NaN when S = 0).
    next_level : float or None
        The first level that failed (None if the sweep ended first).
    table : pandas.DataFrame
        Per-level TPOT, limit and pass/fail.
    """

    S: int
    level: float
    reason: str
    tpot_target_s: float
    q: int
    margin: float
    limit_s: float
    tpot_at_S: float
    next_level: float | None
    table: pd.DataFrame = field(repr=False)

    def __int__(self) -> int:
        return self.S


def choose_slots(sweep: Sweep, tpot_target_s: float, q: int = 95, margin: float = 0.10,
                 *, ttft_target_s: float | None = None, ttft_q: int = 95) -> SlotChoice:
    """Choose S: the highest measured concurrency whose TPOT meets the target with margin.

    Levels are scanned upwards; the first level whose ``q``-th percentile TPOT exceeds
    ``tpot_target_s × (1 − margin)`` (or whose TTFT percentile exceeds ``ttft_target_s``, if
    given) stops the scan, and S is the level before it. Only measured levels qualify: a level
    between two measurements has not been observed.

    Parameters
    ----------
    sweep : Sweep
    tpot_target_s : float
        TPOT objective, seconds (> 0).
    q : {50, 95, 99}
        TPOT percentile the objective applies to.
    margin : float
        Share of the target kept in reserve, in [0, 1) (0.10 keeps 10 % for noisy neighbours
        and long prompts).
    ttft_target_s : float, optional
        Also require TTFT percentile ``ttft_q`` within this, seconds.
    ttft_q : {50, 95, 99}

    Returns
    -------
    SlotChoice
    """
    if not isinstance(sweep, Sweep):
        raise TypeError(f"sweep must be a Sweep, not {type(sweep).__name__}")
    tpot_target_s = positive(tpot_target_s, "tpot_target_s")
    margin = number(margin, "margin", lo=0, hi=1, hi_open=True)
    q = _percentile(q)
    if ttft_target_s is not None:
        ttft_target_s = positive(ttft_target_s, "ttft_target_s")
    limit = tpot_target_s * (1 - margin)
    n = sweep.concurrency
    tp = np.asarray(sweep.tpot(n, q), float)
    ok = tp <= limit
    tt = None
    if ttft_target_s is not None:
        ttft_q = _percentile(ttft_q, "ttft_q")
        tt = np.asarray(sweep.ttft(n, ttft_q), float)
        ok_ttft = tt <= ttft_target_s
    else:
        ok_ttft = np.ones_like(ok)
    passed = ok & ok_ttft
    table = pd.DataFrame({"concurrency": n, f"tpot_p{q}_s": tp, "tpot_limit_s": limit,
                          "tpot_ok": ok})
    if tt is not None:
        table[f"ttft_p{ttft_q}_s"] = tt
        table["ttft_ok"] = ok_ttft
    table["ok"] = passed
    fails = np.flatnonzero(~passed)
    lim_txt = f"{limit * 1e3:.1f} ms (target {tpot_target_s * 1e3:g} ms less {margin:.0%} margin)"
    def as_slots(level):
        return max(1, int(np.floor(level)))

    sat_txt = ""
    sat = sweep.saturated
    if len(sat):
        rps = sweep.saturation_rps
        sat_txt = (f"; the {len(sat)} saturated point{'s' if len(sat) > 1 else ''} above it "
                   "(sweep.saturated) are not levels" + (f" (the engine completed at most {rps:.4g} req/s "
                                                         "there)" if rps is not None else ""))
    if len(fails) == 0:
        i = len(n) - 1
        S, nxt = as_slots(n[i]), None
        rounded = "" if float(n[i]) == S else f" (rounded {'down' if S < n[i] else 'up'} to {S})"
        if len(n) == 1:
            reason = (f"the sweep has a single level ({n[i]:g}): S is that level{rounded}; it meets "
                      f"p{q} TPOT <= {lim_txt}{sat_txt}; measure higher concurrency to know "
                      "whether more slots fit")
        else:
            two = f"the sweep has only two levels ({n[0]:g}, {n[1]:g}): " if len(n) == 2 else ""
            reason = (f"{two}every measured level meets p{q} TPOT <= {lim_txt}; the sweep ends at "
                      f"{n[i]:g}{rounded}{sat_txt}: measure higher concurrency to know whether "
                      "more slots fit")
        level = float(n[i])
    else:
        f = fails[0]
        nxt = float(n[f])
        why = []
        if not ok[f]:
            why.append(f"p{q} TPOT {tp[f] * 1e3:.1f} ms exceeds {lim_txt}")
        if tt is not None and not ok_ttft[f]:
            why.append(f"p{ttft_q} TTFT {tt[f]:.3g} s exceeds the {ttft_target_s:g} s target")
        if f == 0:
            S, level = 0, float("nan")
            which = f"the sweep's only level ({n[0]:g})" if len(n) == 1 else f"the lowest level ({n[0]:g})"
            reason = (f"{which} already fails: " + "; ".join(why)
                      + ": this configuration cannot meet the target")
        else:
            S, level = as_slots(n[f - 1]), float(n[f - 1])
            reason = f"at the next level ({n[f]:g}) " + "; ".join(why)
    tpot_at_S = float(tp[n == level][0]) if S > 0 else float("nan")
    return SlotChoice(S=S, level=level, reason=reason, tpot_target_s=float(tpot_target_s), q=q,
                      margin=float(margin), limit_s=float(limit), tpot_at_S=tpot_at_S,
                      next_level=nxt, table=table)


# -- tokens at capacity --------------------------------------------------------------------------
def token_rates_at_capacity(sweep: Sweep, slots: int, input_tokens: float, output_tokens: float,
                            q: int | str | None = None) -> dict:
    """Output tokens/s of one replica at its capacity ``S / T`` against ``S / TPOT``.

    ``capacity × output_tokens`` is below ``S / TPOT`` (every slot always decoding) because
    part of every T is prefill, when the slot produces no tokens: the ratio of the two is
    ``1 − prefill / T``. (:func:`capbook.queueing.token_cross_check` checks a request rate
    against the slots' decode rate from plain numbers.)

    Parameters
    ----------
    sweep : Sweep
    slots : int
        S, sequences in flight (> 0).
    input_tokens, output_tokens : float
        Mean request lengths, tokens.
    q : {50, 95, 99} or "mean"
        TPOT statistic (as in :meth:`Sweep.service_time_s`).

    Returns
    -------
    dict
        ``service_time_s``, ``capacity_rps``, ``output_tps`` (capacity × output tokens),
        ``decode_only_tps`` (S / TPOT), ``prefill_share`` (prefill / T).
    """
    slots = positive(slots, "slots")
    q = sweep.holding_statistic if q is None else q
    T = float(sweep.service_time_s(slots, input_tokens, output_tokens, q))
    lam = float(replica_capacity(slots, T))
    tpot = float(sweep.tpot(slots, q))
    return {
        "service_time_s": T,
        "capacity_rps": lam,
        "output_tps": lam * output_tokens,
        "decode_only_tps": slots / tpot,
        "prefill_share": float(sweep.prefill_time(input_tokens)) / T,
    }


# -- mixed workloads -----------------------------------------------------------------------------
def _mix_arrays(mix):
    if isinstance(mix, pd.DataFrame):
        need = ["share", "input_tokens", "output_tokens"]
        miss = [c for c in need if c not in mix.columns]
        if miss:
            raise ValueError(f"mix DataFrame lacks column(s) {miss}; needs {need}")
        share, inp, out = (mix[c].to_numpy(float) for c in need)
    else:
        rows = list(mix.values()) if isinstance(mix, Mapping) else list(mix)
        if not rows:
            raise ValueError("mix is empty")
        try:
            share, inp, out = (np.asarray(c, float) for c in zip(*rows))
        except (TypeError, ValueError):
            raise ValueError("mix must hold (share, input_tokens, output_tokens) triples") from None
    share = array(share, "mix shares", lo=0)
    if not np.isclose(share.sum(), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"mix shares must sum to 1; they sum to {share.sum():.12g}")
    return share, inp, out


def blended_service_time(sweep: Sweep, mix, concurrency, q: int | str | None = None) -> float:
    """Share-weighted mean service time of a workload mix at ``concurrency``, seconds.

    Each class's T uses its own prefill (its input length at the sweep's prefill rate) and the
    TPOT the sweep measured at ``concurrency``. **Caveat:** the sweep's TPOT was measured with
    its own mix. Long prompts stall every decode step while they prefill and their KV cache can
    lower S, so re-run the sweep at the blended mix before trusting this number.

    Parameters
    ----------
    sweep : Sweep
    mix : sequence, mapping or DataFrame
        ``(share, input_tokens, output_tokens)`` per class (a mapping's values, or a DataFrame
        with those columns); shares sum to 1.
    concurrency : float
        Slots in use (usually S).
    """
    share, inp, out = _mix_arrays(mix)
    T = sweep.service_time_s(concurrency, inp, out, q)
    return float(np.sum(share * np.asarray(T, float)))


def blended_capacity(sweep: Sweep, mix, slots, q: int | str | None = None) -> float:
    """Requests per second of one replica on a mix: ``S / blended T``."""
    slots = positive(slots, "slots")
    return float(replica_capacity(slots, blended_service_time(sweep, mix, slots, q)))


def capacity_vs_long_share(sweep: Sweep, slots, short: Sequence[float], long: Sequence[float],
                           shares: Iterable[float] | None = None, q: int | str | None = None) -> pd.DataFrame:
    """Capacity of one replica as the share of long requests grows (linear-mix estimate).

    Parameters
    ----------
    sweep : Sweep
    slots : float
        S used for both classes.
    short, long : (input_tokens, output_tokens)
        Lengths of the two request classes, tokens.
    shares : iterable of float, optional
        Shares of long requests in [0, 1] (default 0, 0.05, …, 1).
    q : {50, 95, 99}

    Returns
    -------
    pandas.DataFrame
        ``long_share, service_time_s, capacity_rps, output_tps, input_tps``.
    """
    if shares is None:
        shares = np.round(np.linspace(0, 1, 21), 10)
    p = array(list(shares), "shares", lo=0, hi=1)
    t_short = float(sweep.service_time_s(slots, short[0], short[1], q))
    t_long = float(sweep.service_time_s(slots, long[0], long[1], q))
    T = (1 - p) * t_short + p * t_long
    lam = replica_capacity(positive(slots, "slots"), T)
    return pd.DataFrame({
        "long_share": p,
        "service_time_s": T,
        "capacity_rps": lam,
        "output_tps": lam * ((1 - p) * short[1] + p * long[1]),
        "input_tps": lam * ((1 - p) * short[0] + p * long[0]),
    })


# -- sample sweeps -------------------------------------------------------------------------------
def list_sample_sweeps() -> list[str]:
    """Names of the book's sample sweeps (files ``sweeps/<name>.csv`` in
    :func:`capbook.paths.data_dir`, which ``CAPBOOK_DATA`` moves), sorted."""
    return sorted(p.stem for p in data_path("sweeps").glob("*.csv"))


def load_sample_sweep(name: str = "illustrative_chat") -> Sweep:
    """Load one of the book's modelled sample sweeps by name (see ``data/README.md``)."""
    names = list_sample_sweeps()
    if name not in names:
        raise ValueError(f"unknown sample sweep {name!r}; available: {names}")
    return Sweep.from_csv(data_path("sweeps", f"{name}.csv"), name=name)
