r"""What capacity costs: GPU prices, the cost of a plan, the cheapest configuration, the price
of each choice.

A capacity plan ends in a purchase. This module turns the replicas of a
:class:`capbook.plan.steps.CapacityPlan` into dollars and asks what each decision of the plan costs:

1. **Prices as data** (:func:`read_prices`): a CSV with the header
   ``gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour``, one row per GPU type as the
   sweeps name it (``H100-SXM-80GB``). Lines starting with ``#`` are comments. The repository
   ships illustrative round numbers (:func:`load_sample_prices`), not quotes: replace them.
2. **The cost of a plan** (:func:`plan_cost`): replicas × GPUs per replica (tensor parallel) ×
   price per GPU-hour, per hour, week and year; and the price of a token, as a pair (output,
   input) because the replica's rating is a pair: a replica's hour is shared between output
   tokens at ``R_out`` and input tokens at ``R_in`` tokens/s, so an output token costs
   ``price / (3600 R_out)`` and an input token ``price / (3600 R_in)`` at the rating, and
   ``N / E`` times that when ``N`` replicas carry ``E`` replica-equivalents of work.
3. **The cheapest configuration** (:func:`compare_configurations`): the same plan on each sweep
   of one model (GPU types, tensor-parallel layouts), ranked by cost, with what binds on each.
4. **The price of each choice**: the planned quantile (:func:`price_of_quantiles`), the TTFT
   objective (:func:`price_of_objectives`), dedicated tenant pools (:func:`price_of_pools`) and
   regional pools (:func:`price_of_regions`); and, given a price of saturation (dollars per
   request served late or refused), the quantile that minimises capacity plus saturation cost
   (:func:`optimal_quantile`).
5. **Reserved against on-demand** (:func:`reserve_split`): how many replicas to reserve when the
   fleet follows the hour-of-week demand, from the break-even share ``reserved / on-demand``.

The sizing behind 4 and 5 is :class:`FleetCurve`: the plan's own pipeline (rating and headroom,
Erlang C, the load-dependent model, the engine model, burst headroom, failure spares) as a
function of the peak, so that a plan at another quantile or for another pool is sized exactly
as the plan itself was (``FleetCurve.replicas(plan.output_tps)`` is the plan's count; a test
checks it against :func:`capbook.plan.steps.capacity_plan` at other peaks).

Units: US dollars (USD); prices per GPU-hour; tokens per second for token rates, requests per
second for arrival rates; a week is 168 hours and a year 8,760 (365 days).
"""
from __future__ import annotations

import csv
import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from capbook.forecast import tokens as fc
from capbook.forecast.tokens import HOURLY_COLUMNS, HOURS_PER_WEEK, read_token_csv
from capbook.paths import data_dir
from capbook.logs.scope import select_scope
from capbook.plan.steps import _md_text, capacity_plan, InfeasibleObjective, LogAggregates, SLO, stack_fleet
from capbook.sweeps.sweep import Sweep
from capbook.validation import nonnegative, number, positive, probability

__all__ = ["priced", 
    "PRICE_COLUMNS",
    "HOURS_PER_YEAR",
    "SAMPLE_PRICES",
    "GpuPrice",
    "PriceTable",
    "read_prices",
    "load_sample_prices",
    "as_prices",
    "ReplicaPrice",
    "replica_price",
    "PlanCost",
    "plan_cost",
    "PlanPricing",
    "price_plan",
    "FleetCurve",
    "WeekDemand",
    "week_demand",
    "price_of_quantiles",
    "OptimalQuantile",
    "optimal_quantile",
    "ReserveSplit",
    "reserve_split",
    "Comparison",
    "compare_configurations",
    "price_of_objectives",
    "price_of_pools",
    "time_zone_regions",
    "price_of_regions",
]

#: The header of a price table, in this order.
PRICE_COLUMNS = ("gpu", "on_demand_usd_per_gpu_hour", "reserved_usd_per_gpu_hour")
#: Hours in a year of 365 days.
HOURS_PER_YEAR = 8760
#: The sample price table, relative to :func:`capbook.paths.data_dir`.
SAMPLE_PRICES = Path("prices") / "illustrative.csv"


# --------------------------------------------------------------------------------------------
# Prices
# --------------------------------------------------------------------------------------------
def _gpu_key(name: str) -> str:
    """GPU names compared without case, spaces, hyphens or underscores (``h100 sxm 80gb``)."""
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


_VENDORS = {"nvidia", "tesla", "amd", "instinct", "gpu"}


def _gpu_parts(name: str) -> set[str]:
    """The parts of a GPU name without the vendor words: ``nvidia-h100-80gb`` → {h100, 80gb}."""
    return {p for p in re.split(r"[^0-9a-z]+", str(name).lower()) if p and p not in _VENDORS}


@dataclass(frozen=True)
class GpuPrice:
    """Prices of one GPU type.

    Attributes
    ----------
    gpu : str
        The GPU as the table names it.
    on_demand : float
        USD per GPU-hour, on demand (pay for the hours used).
    reserved : float
        USD per GPU-hour, reserved (pay for every hour of the term, used or not).
    """

    gpu: str
    on_demand: float
    reserved: float

    @property
    def break_even_share(self) -> float:
        """``reserved / on_demand``: a GPU busy in more than this share of hours is cheaper reserved.

        Examples
        --------
        >>> GpuPrice("X", 2.0, 1.3).break_even_share
        0.65
        """
        return self.reserved / self.on_demand


@dataclass(frozen=True, eq=False)
class PriceTable:
    """A price table (build it with :func:`read_prices` or :meth:`from_frame`).

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per GPU, columns :data:`PRICE_COLUMNS`.
    source : str
        Where the prices came from (a path).
    comments : tuple of str
        The file's ``#`` comment lines (where the numbers come from, the date chosen).
    """

    frame: pd.DataFrame = field(repr=False)
    source: str = "price table"
    comments: tuple = ()

    @classmethod
    def from_frame(cls, df: pd.DataFrame, source: str = "price table") -> "PriceTable":
        """Check a frame with the columns :data:`PRICE_COLUMNS` and wrap it; errors name the row
        (its position, 1 = first data row)."""
        if not isinstance(df, pd.DataFrame):
            raise ValueError(f"prices must be a DataFrame with columns {list(PRICE_COLUMNS)}, got {type(df).__name__}")
        missing = [c for c in PRICE_COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"{source}: missing column(s) {missing}; the header must be {','.join(PRICE_COLUMNS)}")
        rows = [{c: df[c].iloc[i] for c in PRICE_COLUMNS} for i in range(len(df))]
        return cls(_checked_rows(rows, source, [f"row {i + 1}" for i in range(len(rows))]), source)

    @property
    def gpus(self) -> list[str]:
        """GPU names in the table, in its order."""
        return list(self.frame["gpu"])

    def price(self, gpu: str) -> GpuPrice:
        """The prices of ``gpu``.

        Names match without case, spaces, hyphens or underscores (``h100 sxm 80gb`` is
        ``H100-SXM-80GB``). Failing that, a name whose parts (without the vendor: ``nvidia``,
        ``tesla``) are all in exactly one row's name matches that row, as a load generator's
        ``nvidia-h100-80gb`` matches ``H100-SXM-80GB``; :meth:`match` says which rule matched.

        Raises
        ------
        ValueError
            When no row, or more than one row by parts, matches; the message lists the GPUs it has.
        """
        return self.match(gpu)[0]

    def match(self, gpu: str) -> tuple[GpuPrice, str]:
        """The prices of ``gpu`` (see :meth:`price`) and a note: ``""`` for an exact match, else
        which row the name was matched to and how to price it exactly."""
        key = _gpu_key(gpu)
        rows = list(self.frame.itertuples(index=False))
        hit = [r for r in rows if _gpu_key(r.gpu) == key]
        note = ""
        if not hit:
            parts = _gpu_parts(gpu)
            hit = [r for r in rows if parts and parts <= _gpu_parts(r.gpu)]
            if len(hit) > 1:
                raise ValueError(f"{self.source}: GPU {gpu!r} could be any of {', '.join(r.gpu for r in hit)}; "
                                 f"add a row for {gpu!r} itself, or name the GPU as the table does")
            if hit:
                note = (f"GPU {gpu!r} priced as {hit[0].gpu!r}, the one row whose name holds {', '.join(sorted(parts))}; "
                        f"add a row for {gpu!r} to price it exactly")
        if not hit:
            raise ValueError(f"{self.source}: no price for GPU {gpu!r} (the table prices {', '.join(self.gpus)}); "
                             f"add a row '{gpu},<on-demand USD per GPU-hour>,<reserved USD per GPU-hour>'")
        r = hit[0]
        return GpuPrice(str(r.gpu), float(r.on_demand_usd_per_gpu_hour), float(r.reserved_usd_per_gpu_hour)), note

    def __repr__(self) -> str:
        return f"PriceTable({self.source!r}, gpus={self.gpus})"


def _checked_rows(rows: list[dict], source: str, where: list[str]) -> pd.DataFrame:
    if not rows:
        raise ValueError(f"{source}: no price rows under the header")
    seen: dict[str, str] = {}
    out = []
    for r, at in zip(rows, where):
        gpu = "" if r["gpu"] is None or (isinstance(r["gpu"], float) and math.isnan(r["gpu"])) else str(r["gpu"]).strip()
        if not gpu:
            raise ValueError(f"{source}, {at}: the gpu column is empty; name the GPU as the sweeps do (e.g. H100-SXM-80GB)")
        vals = {}
        for c in PRICE_COLUMNS[1:]:
            v = r[c]
            text = "" if v is None else str(v).strip()
            if text == "" or text.lower() == "nan":
                raise ValueError(f"{source}, {at} ({gpu}): missing {c}; give a price in USD per GPU-hour")
            try:
                x = float(text)
            except ValueError:
                raise ValueError(f"{source}, {at} ({gpu}): {c} is not a number: {text!r}") from None
            if not math.isfinite(x) or x <= 0:
                raise ValueError(f"{source}, {at} ({gpu}): {c} must be a positive number of USD per GPU-hour, got {text}")
            vals[c] = x
        if vals["reserved_usd_per_gpu_hour"] > vals["on_demand_usd_per_gpu_hour"]:
            raise ValueError(f"{source}, {at} ({gpu}): the reserved price ({vals['reserved_usd_per_gpu_hour']:g}) is above "
                             f"the on-demand price ({vals['on_demand_usd_per_gpu_hour']:g}), so reserving never pays; "
                             "are the two columns swapped?")
        k = _gpu_key(gpu)
        if k in seen:
            raise ValueError(f"{source}, {at}: GPU {gpu!r} is priced twice (first at {seen[k]}); keep one row per GPU type")
        seen[k] = at
        out.append({"gpu": gpu, **vals})
    return pd.DataFrame(out, columns=list(PRICE_COLUMNS))


def read_prices(path) -> PriceTable:
    """Read a price table CSV: header ``gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour``.

    Lines starting with ``#`` are comments (kept in :attr:`PriceTable.comments`). Errors name
    the file and the line.

    Parameters
    ----------
    path : str or pathlib.Path

    Returns
    -------
    PriceTable

    Raises
    ------
    FileNotFoundError
        When the file does not exist.
    ValueError
        On a wrong header, an empty GPU name, a missing, non-numeric or non-positive price, a
        reserved price above the on-demand one, or a GPU priced twice.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"prices {p}: no such file")
    comments, body = [], []
    with p.open(newline="", encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.lstrip().startswith("#"):
                comments.append(line.strip().lstrip("#").strip())
            elif line.strip():
                body.append((lineno, line))
    if not body:
        raise ValueError(f"prices {p}: no header; the first line must be {','.join(PRICE_COLUMNS)}")
    reader = list(csv.reader([b for _, b in body]))
    header = [h.strip() for h in reader[0]]
    if tuple(header) != PRICE_COLUMNS:
        raise ValueError(f"prices {p}, line {body[0][0]}: the header is {','.join(header)!r}; it must be "
                         f"{','.join(PRICE_COLUMNS)}")
    rows, where = [], []
    for (lineno, _), cells in zip(body[1:], reader[1:]):
        if len(cells) != len(PRICE_COLUMNS):
            raise ValueError(f"prices {p}, line {lineno}: {len(cells)} field(s), expected {len(PRICE_COLUMNS)} "
                             f"({','.join(PRICE_COLUMNS)})")
        rows.append(dict(zip(PRICE_COLUMNS, cells)))
        where.append(f"line {lineno}")
    return PriceTable(_checked_rows(rows, f"prices {p}", where), str(p), tuple(comments))


def load_sample_prices() -> PriceTable:
    """The illustrative price table shipped in ``data/prices/illustrative.csv`` (round numbers,
    not quotes)."""
    return read_prices(data_dir() / SAMPLE_PRICES)


def as_prices(prices) -> PriceTable:
    """A :class:`PriceTable` from a table, a path, or a DataFrame."""
    if isinstance(prices, PriceTable):
        return prices
    if isinstance(prices, (str, Path)):
        return read_prices(prices)
    if isinstance(prices, pd.DataFrame):
        return PriceTable.from_frame(prices)
    raise ValueError(f"prices must be a PriceTable, a path to a price CSV or a DataFrame, got {type(prices).__name__}")


@dataclass(frozen=True)
class ReplicaPrice:
    """What one replica costs per hour.

    Attributes
    ----------
    gpu : str
        GPU type (as the sweep names it).
    gpus : int
        GPUs per replica (the tensor-parallel degree).
    price : GpuPrice
    on_demand_usd_per_hour, reserved_usd_per_hour : float
        ``gpus × price``, USD per replica-hour.
    """

    gpu: str
    gpus: int
    price: GpuPrice
    on_demand_usd_per_hour: float
    reserved_usd_per_hour: float
    note: str = ""

    def per_hour(self, basis: str = "on_demand") -> float:
        """USD per replica-hour on ``basis`` (``"on_demand"`` or ``"reserved"``)."""
        return {"on_demand": self.on_demand_usd_per_hour, "reserved": self.reserved_usd_per_hour}[_basis(basis)]


def _basis(basis: str) -> str:
    if basis not in ("on_demand", "reserved"):
        raise ValueError(f"basis must be 'on_demand' or 'reserved', got {basis!r}")
    return basis


def replica_price(sweep, prices, *, gpu: str | None = None, tensor_parallel: int | None = None) -> ReplicaPrice:
    """The price of one replica of ``sweep``'s deployment.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
        Its ``gpu`` and ``tensor_parallel`` configuration columns say what one replica runs on.
    prices : PriceTable, path or DataFrame
    gpu : str, optional
        The GPU type, when the sweep does not record it (or to price it as another).
    tensor_parallel : int, optional
        GPUs per replica, when the sweep does not record it.

    Raises
    ------
    ValueError
        When the GPU or the GPUs per replica are unknown, or the table has no price for the GPU.
    """
    table = as_prices(prices)
    cfg = getattr(sweep, "config", {}) or {}
    name = getattr(sweep, "name", "sweep")
    g = gpu if gpu is not None else cfg.get("gpu")
    if g is None or (isinstance(g, float) and math.isnan(g)) or not str(g).strip():
        raise ValueError(f"sweep {name!r} does not record the GPU it ran on; pass gpu='NAME' (one of the price "
                         f"table's: {', '.join(table.gpus)})")
    tp = tensor_parallel if tensor_parallel is not None else cfg.get("tensor_parallel")
    if tp is None or (isinstance(tp, float) and math.isnan(tp)):
        raise ValueError(f"sweep {name!r} does not record its tensor-parallel degree (GPUs per replica); "
                         "pass tensor_parallel=N")
    try:
        tp_f = float(tp)
    except (TypeError, ValueError):
        raise ValueError(f"sweep {name!r}: tensor_parallel {tp!r} is not a number of GPUs; pass tensor_parallel=N") from None
    if not tp_f.is_integer() or tp_f < 1:
        raise ValueError(f"tensor_parallel must be a whole number of GPUs >= 1, got {tp!r}")
    n = int(tp_f)
    pr, note = table.match(str(g))
    return ReplicaPrice(pr.gpu, n, pr, n * pr.on_demand, n * pr.reserved, note)


# --------------------------------------------------------------------------------------------
# The cost of a plan
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanCost:
    """The cost of a plan's replicas (build it with :func:`plan_cost`).

    Attributes
    ----------
    replicas : int
        Replicas priced (the plan's headline count).
    replica : ReplicaPrice
    gpus : int
        ``replicas × replica.gpus``.
    usd_per_hour, usd_per_week, usd_per_year : float
        On demand, every hour of the week (a static fleet).
    reserved_usd_per_hour, reserved_usd_per_week, reserved_usd_per_year : float
        The same fleet reserved.
    output_tps, input_tps : float
        The planned peak, tokens per second.
    equivalents : float
        Replica-equivalents of work at the planned peak (``output/R_out + input/R_in``).
    mean_equivalents : float or None
        The same at the forecast week's mean load (None when the plan has no forecast).
    usd_per_m_output_at_rating, usd_per_m_input_at_rating : float
        USD per million tokens with every replica at its rating (the throughput at the slots the
        TPOT objective allows): the least a token can cost on this configuration within the
        objectives. On demand.
    usd_per_m_output, usd_per_m_input : float
        At the planned peak: the fleet's cost per hour shared between output and input tokens
        by the replica time they take (``N / E`` times the rating's price).
    usd_per_m_output_week, usd_per_m_input_week : float or None
        Over the forecast week (the static fleet's bill over its tokens at the week's mean load).
    notes : tuple of str
    """

    replicas: int
    replica: ReplicaPrice
    gpus: int
    usd_per_hour: float
    usd_per_week: float
    usd_per_year: float
    reserved_usd_per_hour: float
    reserved_usd_per_week: float
    reserved_usd_per_year: float
    output_tps: float
    input_tps: float
    equivalents: float
    mean_equivalents: float | None
    usd_per_m_output_at_rating: float
    usd_per_m_input_at_rating: float
    usd_per_m_output: float
    usd_per_m_input: float
    usd_per_m_output_week: float | None
    usd_per_m_input_week: float | None
    notes: tuple = ()

    def table(self) -> pd.DataFrame:
        """The rows ``cost`` adds to :meth:`capbook.plan.steps.CapacityPlan.table`: ``step``,
        ``quantity``, ``value``, ``unit``."""
        r = self.replica
        rows = [
            ("GPU", r.gpu, ""),
            ("GPUs per replica", r.gpus, "GPUs"),
            ("GPUs", self.gpus, "GPUs"),
            ("on-demand price", r.price.on_demand, "USD per GPU-hour"),
            ("reserved price", r.price.reserved, "USD per GPU-hour"),
            ("USD per hour", self.usd_per_hour, "USD"),
            ("USD per week", self.usd_per_week, "USD"),
            ("USD per year", self.usd_per_year, "USD"),
            ("USD per hour (reserved)", self.reserved_usd_per_hour, "USD"),
            ("USD per week (reserved)", self.reserved_usd_per_week, "USD"),
            ("USD per year (reserved)", self.reserved_usd_per_year, "USD"),
            ("USD per million output tokens", self.usd_per_m_output, "USD"),
            ("USD per million input tokens", self.usd_per_m_input, "USD"),
            ("USD per million output tokens at the rating", self.usd_per_m_output_at_rating, "USD"),
            ("USD per million input tokens at the rating", self.usd_per_m_input_at_rating, "USD"),
        ]
        if self.usd_per_m_output_week is not None:
            rows += [("USD per million output tokens over the forecast week", self.usd_per_m_output_week, "USD"),
                     ("USD per million input tokens over the forecast week", self.usd_per_m_input_week, "USD")]
        return pd.DataFrame([{"step": "cost", "quantity": q, "value": v, "unit": u} for q, v, u in rows])

    def render(self, markdown: bool = False) -> str:
        """The cost as a few lines of text (a section of the plan's review document)."""
        r = self.replica
        h2 = "## " if markdown else ""
        md = _md_text if markdown else str     # the GPU's and the notes' names are the reader's
        lines = [f"{h2}Cost", "",
                 f"- {self.replicas} replicas × {r.gpus} {md(r.gpu)} = {self.gpus} GPUs at {_usd(r.price.on_demand)} per "
                 f"GPU-hour on demand ({_usd(r.price.reserved)} reserved)",
                 f"- On demand: {_usd(self.usd_per_hour)} per hour, {_usd(self.usd_per_week, 0)} per week, "
                 f"{_usd(self.usd_per_year, 0)} per year",
                 f"- Reserved: {_usd(self.reserved_usd_per_hour)} per hour, {_usd(self.reserved_usd_per_week, 0)} per "
                 f"week, {_usd(self.reserved_usd_per_year, 0)} per year",
                 f"- Per million tokens at the planned peak: {_usd(self.usd_per_m_output)} output, "
                 f"{_usd(self.usd_per_m_input)} input ({self.replicas} replicas carry {self.equivalents:.1f} "
                 "replica-equivalents of work)",
                 f"- Per million tokens at the rating (every replica at the SLO's throughput): "
                 f"{_usd(self.usd_per_m_output_at_rating)} output, {_usd(self.usd_per_m_input_at_rating)} input"]
        if self.usd_per_m_output_week is not None:
            lines.append(f"- Per million tokens over the forecast week (mean load, {self.mean_equivalents:.1f} "
                         f"replica-equivalents): {_usd(self.usd_per_m_output_week)} output, "
                         f"{_usd(self.usd_per_m_input_week)} input")
        lines += [f"- {md(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _usd(x: float, digits: int = 2) -> str:
    """Dollars with ``digits`` decimals; amounts under ten cents keep two significant figures
    (a price per million input tokens can be a fraction of a cent)."""
    if digits == 2 and 0 < abs(x) < 0.1:
        return f"${x:.2g}"
    return f"${x:,.{digits}f}"


def plan_cost(plan, prices, *, sweep=None, gpu: str | None = None, tensor_parallel: int | None = None,
              replicas: int | None = None) -> PlanCost:
    """The cost of a capacity plan.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    prices : PriceTable, path or DataFrame
    sweep : capbook.sweeps.sweep.Sweep, optional
        The plan's sweep, for its GPU and tensor-parallel degree (default: the ones the plan
        recorded from it, ``plan.source["gpu"]`` and ``plan.source["tensor_parallel"]``).
    gpu, tensor_parallel : optional
        Override or supply the GPU type and GPUs per replica (see :func:`replica_price`).
    replicas : int, optional
        Replicas to price (default: the plan's headline :attr:`~capbook.plan.steps.CapacityPlan.total`).

    Returns
    -------
    PlanCost

    Examples
    --------
    The sample plan (25 replicas of one A100, the fleet its simulation verifies plus burst and
    spare) at the illustrative $2.20 per GPU-hour:

    >>> from capbook import datasets
    >>> from capbook.plan.steps import capacity_plan
    >>> plan = capacity_plan(**datasets.plan_inputs().arguments)
    >>> c = plan_cost(plan, load_sample_prices())
    >>> c.gpus, round(c.usd_per_hour, 2), round(c.usd_per_week)
    (25, 55.0, 9240)
    """
    src = sweep if sweep is not None else _SweepConfig(plan)
    rp = replica_price(src, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    n = int(plan.total if replicas is None else replicas)
    if n < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas!r}")
    od, rs = n * rp.on_demand_usd_per_hour, n * rp.reserved_usd_per_hour
    rating = plan.rating
    out, inp = float(plan.output_tps), float(plan.input_tps)
    e_peak = out / rating.output_tps + inp / rating.input_tps
    per_out = rp.on_demand_usd_per_hour / (3600.0 * rating.output_tps) * 1e6
    per_in = rp.on_demand_usd_per_hour / (3600.0 * rating.input_tps) * 1e6
    notes = [rp.note] if rp.note else []
    e_mean = w_out = w_in = None
    try:
        wk = week_demand(plan)
    except ValueError as exc:
        notes.append(f"{_NO_WEEK}: {exc}")
    else:
        mean_out = float(wk.point.mean())
        e_mean = mean_out / rating.output_tps + mean_out * plan.demand.input_per_output / rating.input_tps
        w_out, w_in = per_out * n / e_mean, per_in * n / e_mean
    return PlanCost(n, rp, n * rp.gpus, od, od * HOURS_PER_WEEK, od * HOURS_PER_YEAR,
                    rs, rs * HOURS_PER_WEEK, rs * HOURS_PER_YEAR, out, inp, e_peak, e_mean,
                    per_out, per_in, per_out * n / e_peak, per_in * n / e_peak, w_out, w_in, tuple(notes))


_NO_WEEK = "no per-token cost over the forecast week"


class _SweepConfig:
    """The GPU and tensor-parallel degree a plan recorded from its sweep, in a sweep's shape."""

    def __init__(self, plan):
        self.name = plan.source.get("sweep", "sweep")
        self.config = {"gpu": plan.source.get("gpu"), "tensor_parallel": plan.source.get("tensor_parallel")}


# --------------------------------------------------------------------------------------------
# The plan's sizing as a function of the peak
# --------------------------------------------------------------------------------------------
class FleetCurve:
    """Replicas the plan buys for a peak of the plan's traffic mix, at any size.

    The plan's serving count is the smallest fleet its simulation verified at the planned peak
    (:func:`capbook.plan.replay.verify_plan`); that fixes the rate one replica carries within the
    objectives, ``plan.request_rate / plan.serving``. For another peak the serving count is that
    peak over this rate, rounded up (so at the plan's own peak it is exactly the plan's count),
    and the burst headroom and failure spares are stacked on it by the plan's own step
    (:func:`capbook.plan.steps.stack_fleet`). It does not simulate again: a much smaller peak
    pools less and needs a little more per request than this, a much larger one a little less
    (the pooling chapter); re-plan with ``demand_scale=`` to verify a different peak.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep (kept for callers; the curve reads only the plan).
    """

    def __init__(self, plan, sweep):
        self.plan = plan
        self.sweep = sweep
        self._mean_out = float(plan.mean_output_tokens)
        fl = plan.fleet
        self._ramp_share = fl.ramp_per_min / fl.peak_rate if fl.peak_rate > 0 else 0.0
        self._lag = float(fl.lag_min)
        self._spares, self._zones = int(fl.spares), fl.zones
        self._per_replica_rps = float(plan.request_rate) / int(plan.serving)
        self._memo: dict[float, int] = {}

    def serving(self, output_tps: float) -> int:
        """Serving replicas for a peak of ``output_tps`` output tokens/s (before burst and spares)."""
        return self._stack(output_tps).serving

    def _stack(self, output_tps: float):
        # the plan's own step 8 (capbook.plan.steps.stack_fleet) on a demand of this peak
        x = positive(output_tps, "output_tps")
        lam = x / self._mean_out
        serving = max(1, int(math.ceil(lam / self._per_replica_rps - 1e-9)))
        demand = dataclasses.replace(self.plan.demand, request_rate=lam)
        return stack_fleet(demand, self.plan.replica, self.plan.queue, serving=serving,
                           ramp_per_min=self._ramp_share, lag_min=self._lag, spares=self._spares, zones=self._zones)

    def replicas(self, output_tps: float) -> int:
        """Total replicas (serving + burst + spares) for a peak of ``output_tps`` output tokens/s
        of the plan's mix."""
        x = float(output_tps)
        if x not in self._memo:
            self._memo[x] = int(self._stack(x).total)
        return self._memo[x]

    def capacity(self, replicas: int, rtol: float = 1e-9) -> float:
        """Highest peak (output tokens/s) that ``replicas`` total replicas carry by the plan's
        rules (0.0 when even a trickle needs more)."""
        n = int(replicas)
        tiny = 1e-6 * self.plan.output_tps
        if self.replicas(tiny) > n:
            return 0.0
        lo, hi = tiny, max(self.plan.output_tps, tiny)
        while self.replicas(hi) <= n:
            lo, hi = hi, 2.0 * hi
        while hi - lo > rtol * hi:
            mid = 0.5 * (lo + hi)
            if self.replicas(mid) <= n:
                lo = mid
            else:
                hi = mid
        return lo


# --------------------------------------------------------------------------------------------
# The forecast week as a distribution
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class WeekDemand:
    """The plan's forecast week as a distribution, hour by hour (build it with :func:`week_demand`).

    Hour ``h`` of the week has demand ``point[h] × exp(e)`` output tokens/s, with ``e`` drawn
    from ``log_errors`` (the backtest's out-of-sample log errors at the plan's horizon, the
    sample the forecast bands are quantiles of). The week's busiest hour has the sample
    ``peaks`` (one per backtest origin: its week of errors laid over the point forecast), the
    sample the planned peak is a quantile of.

    Attributes
    ----------
    hours : pandas.DatetimeIndex
        The 168 hours (UTC) of the forecast week.
    point : numpy.ndarray
        Point forecast per hour, output tokens/s (times the plan's demand scale).
    log_errors : numpy.ndarray
        Log errors, pooled over hours and origins.
    peaks : numpy.ndarray
        The week's busiest hour, one value per backtest origin, output tokens/s.
    method : str
        The forecast method (``"calibrated"`` or ``"sqrt_h"``).
    mean_output_tokens : float
        Output tokens per request, to count requests.
    """

    hours: pd.DatetimeIndex
    point: np.ndarray
    log_errors: np.ndarray
    peaks: np.ndarray
    method: str
    mean_output_tokens: float

    def peak(self, quantile: float) -> float:
        """The quantile of the week's busiest hour (output tokens/s), as the plan reads it (the
        linearly interpolated quantile of ``peaks``, :func:`capbook.forecast.tokens.forecast_tokens`)."""
        q = probability(quantile, "quantile", closed=True)
        return float(np.quantile(self.peaks, q))

    def peak_quantile(self, output_tps: float) -> float:
        """The quantile at which :meth:`peak` equals ``output_tps`` (0 or 1 outside the sample)."""
        p = np.sort(self.peaks)
        pos = np.linspace(0.0, 1.0, p.size)
        x = positive(output_tps, "output_tps")
        if x <= p[0]:
            return 0.0
        if x >= p[-1]:
            return 1.0
        return float(np.interp(x, p, pos))

    def band(self, quantile: float) -> np.ndarray:
        """The quantile line per hour (output tokens/s): each hour at its own quantile."""
        q = probability(quantile, "quantile")
        return self.point * float(np.exp(np.quantile(self.log_errors, q)))

    def excess(self, capacity_tps: float) -> float:
        """Expected output tokens per second above ``capacity_tps``, summed over the week's hours
        (multiply by 3600 for tokens over the week)."""
        k = nonnegative(capacity_tps, "capacity_tps")
        f = np.exp(np.sort(self.log_errors))
        d = self.point[:, None] * f[None, :]
        return float(np.maximum(d - k, 0.0).mean(axis=1).sum())

    def hours_over(self, capacity_tps: float) -> float:
        """Expected hours in the week with demand above ``capacity_tps``."""
        k = nonnegative(capacity_tps, "capacity_tps")
        d = self.point[:, None] * np.exp(self.log_errors)[None, :]
        return float((d > k).mean(axis=1).sum())

    def late_requests(self, capacity_tps: float) -> float:
        """Expected requests in the week beyond ``capacity_tps`` (served late or refused)."""
        return self.excess(capacity_tps) * 3600.0 / self.mean_output_tokens


def week_demand(plan) -> WeekDemand:
    """The plan's forecast week (at its horizon) as an hourly distribution.

    Read from the forecast the plan made (:attr:`capbook.plan.steps.PeakForecast.forecast` at
    the plan's horizon: its point forecast and backtest log errors), so that
    ``week_demand(plan).peak(plan.quantile)`` is the plan's planned peak and the forecast is
    not run again.

    Raises
    ------
    ValueError
        When the plan had no forecast (it used the busiest observed hour).
    """
    h = int(plan.horizon_weeks)
    pk = plan.peaks[h]
    if pk.method == "observed":
        raise ValueError("the plan's peak is the busiest observed hour (no forecast was possible), so there is no "
                         "forecast distribution to price quantiles on; give a longer hourly history")
    f = pk.forecast
    if f is None or f.error_weeks is None:
        raise ValueError("the plan's peak carries no forecast to read the week from (a PeakForecast built by hand?); "
                         "plan with capbook.plan.steps.capacity_plan")
    scale = float(plan.demand_scale)
    point = f.frame["point"].to_numpy().reshape(h, fc.HOURS_PER_WEEK)[h - 1]
    e = f.error_weeks[h - 1]
    peaks = (point[None, :] * np.exp(e)).max(axis=1)
    hours = f.frame.index[f.frame["horizon_week"].to_numpy() == h]
    return WeekDemand(pd.DatetimeIndex(hours), point / 3600.0 * scale, e.ravel(), peaks / 3600.0 * scale, f.method,
                      float(plan.mean_output_tokens))


# --------------------------------------------------------------------------------------------
# The price of the quantile, and the quantile a price of saturation calls for
# --------------------------------------------------------------------------------------------
def _weekly(replicas, rp: ReplicaPrice, basis: str) -> float:
    return replicas * rp.per_hour(basis) * HOURS_PER_WEEK


def price_of_quantiles(plan, sweep, prices, quantiles: Sequence[float] = (0.5, 0.9, 0.99), *,
                       saturation_usd: float | None = None, basis: str = "on_demand",
                       gpu: str | None = None, tensor_parallel: int | None = None) -> pd.DataFrame:
    """The weekly cost of planning to each quantile of the forecast week's busiest hour.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : PriceTable, path or DataFrame
    quantiles : sequence of float
        Quantiles of the peak hour (0.9: the P90 peak hour).
    saturation_usd : float, optional
        Dollars per request served late or refused; adds the expected saturation cost.
    basis : {"on_demand", "reserved"}
        Price per replica-hour used.

    Returns
    -------
    pandas.DataFrame
        Index ``quantile``; ``peak_output_tps``, ``replicas``, ``capacity_output_tps`` (the
        highest peak those replicas carry by the plan's rules), ``usd_per_week``,
        ``extra_usd_per_week`` (against the plan's own quantile), ``hours_over`` and
        ``late_requests`` (expected per week beyond the capacity) and, with
        ``saturation_usd``, ``saturation_usd_per_week`` and ``total_usd_per_week``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    wk = week_demand(plan)
    curve = FleetCurve(plan, sweep)
    c_s = None if saturation_usd is None else nonnegative(saturation_usd, "saturation_usd")
    rows = []
    base = _weekly(curve.replicas(wk.peak(plan.quantile)), rp, basis)
    for q in quantiles:
        qq = probability(q, "quantile")
        pk = wk.peak(qq)
        n = curve.replicas(pk)
        cap = curve.capacity(n)
        row = {"quantile": qq, "peak_output_tps": pk, "replicas": n, "capacity_output_tps": cap,
               "usd_per_week": _weekly(n, rp, basis)}
        row["extra_usd_per_week"] = row["usd_per_week"] - base
        row["hours_over"] = wk.hours_over(cap)
        row["late_requests"] = wk.late_requests(cap)
        if c_s is not None:
            row["saturation_usd_per_week"] = c_s * row["late_requests"]
            row["total_usd_per_week"] = row["usd_per_week"] + row["saturation_usd_per_week"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("quantile")


@dataclass(frozen=True, eq=False)
class OptimalQuantile:
    """The fleet that minimises capacity cost plus saturation cost (see :func:`optimal_quantile`).

    Attributes
    ----------
    replicas : int
        The cheapest fleet in total (capacity + expected saturation) cost per week.
    quantile : float
        The peak-hour quantile to plan to for that fleet: the quantile of the busiest hour at
        the fleet's capacity (planning to any quantile in ``quantile_range`` buys it).
    quantile_range : tuple of float
        ``(lowest, highest)`` quantile whose plan buys ``replicas``.
    saturation_usd : float
        Dollars per request served late or refused, as given.
    usd_per_request : float
        What serving one request costs at the rating (the replica's price per second over the
        requests per second it carries at the rating, for the plan's mix).
    price_ratio : float
        ``saturation_usd / usd_per_request``: a late request costs this many served ones.
    costs : pandas.DataFrame
        Per fleet size (index ``replicas``): ``capacity_output_tps``, ``quantile`` (of the peak at
        that capacity), ``capacity_usd_per_week``, ``idle_usd_per_week``, ``hours_over``,
        ``late_requests``, ``saturation_usd_per_week``, ``total_usd_per_week``.
    conventional : pandas.Series
        The row of ``costs`` for the plan's own quantile's fleet.
    basis : str
    """

    replicas: int
    quantile: float
    quantile_range: tuple
    saturation_usd: float
    usd_per_request: float
    price_ratio: float
    costs: pd.DataFrame = field(repr=False)
    conventional: pd.Series = field(repr=False)
    basis: str = "on_demand"

    @property
    def saving_usd_per_week(self) -> float:
        """Total weekly cost of the conventional plan minus that of the optimum (≥ 0)."""
        return float(self.conventional["total_usd_per_week"] - self.costs.loc[self.replicas, "total_usd_per_week"])


def optimal_quantile(plan, sweep, prices, saturation_usd: float, *, basis: str = "on_demand",
                     span: int | None = None, gpu: str | None = None,
                     tensor_parallel: int | None = None) -> OptimalQuantile:
    """The fleet size, and the quantile, that minimise capacity cost plus saturation cost.

    With ``N`` replicas the fleet carries peaks up to ``K(N)`` output tokens/s by the plan's
    rules (:meth:`FleetCurve.capacity`). Each hour of the forecast week whose demand exceeds
    ``K(N)`` serves the excess late or refuses it; each such request costs ``saturation_usd``.
    The expected weekly cost is

    .. math::

        C(N) = N\\, p\\, 168 + c_s \\sum_{h=1}^{168} E\\big[(D_h - K(N))^+\\big]\\, \\frac{3600}{m},

    with ``p`` the replica's price per hour, ``D_h`` the hour's demand (the forecast
    distribution, :class:`WeekDemand`) and ``m`` output tokens per request. Every fleet size
    from one replica to ``span`` replicas past the plan at P99.9 is evaluated, so the minimum
    is exact for this cost model; the quantile reported is the peak-hour quantile at the
    optimum's capacity (0 when it is below every busiest hour the backtest saw). The idle cost
    is the capacity cost times ``1 − mean demand / K(N)`` (the whole capacity cost when the
    mean demand exceeds the capacity: then nothing is idle on average, but the formula's share
    is floored at 0). In the continuous limit the optimum satisfies
    ``expected hours over capacity = 168 × p × m / (3600 × c_s × k)`` with ``k`` output tokens/s
    per replica: a late request that costs ``ρ`` times a served one allows about ``168 / ρ``
    hours a week over capacity (:attr:`OptimalQuantile.price_ratio`).

    Requests above the capacity are counted late in full and those below it on time: a
    stylised account (a saturated fleet delays more than the excess, a fleet just below it
    delays less), for choosing a quantile, not for predicting the week's goodput.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
    prices : PriceTable, path or DataFrame
    saturation_usd : float
        Dollars per request served late or refused (a product number), > 0.
    basis : {"on_demand", "reserved"}
    span : int, optional
        Fleet sizes evaluated beyond the plan at P99.9 (default: a third of it, at least 3).

    Returns
    -------
    OptimalQuantile
    """
    c_s = positive(saturation_usd, "saturation_usd")
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    wk = week_demand(plan)
    curve = FleetCurve(plan, sweep)
    hi = curve.replicas(wk.peak(0.999))
    extra = max(3, hi // 3) if span is None else int(span)
    rows = []
    mean_d = float(wk.point.mean()) * float(np.exp(wk.log_errors).mean())
    for n in range(1, hi + extra + 1):
        cap = curve.capacity(n)
        late = wk.late_requests(cap)  # a fleet too small to carry any load serves every request late
        cap_usd = _weekly(n, rp, basis)
        served = min(mean_d, cap) if cap > 0 else 0.0
        rows.append({"replicas": n, "capacity_output_tps": cap,
                     "quantile": wk.peak_quantile(cap) if cap > 0 else 0.0,
                     "capacity_usd_per_week": cap_usd,
                     "idle_usd_per_week": cap_usd * max(0.0, 1.0 - served / cap) if cap > 0 else cap_usd,
                     "hours_over": wk.hours_over(cap), "late_requests": late,
                     "saturation_usd_per_week": c_s * late})
    costs = pd.DataFrame(rows).set_index("replicas")
    costs["total_usd_per_week"] = costs["capacity_usd_per_week"] + costs["saturation_usd_per_week"]
    best = int(costs["total_usd_per_week"].idxmin())
    q_hi = float(costs.loc[best, "quantile"])
    q_lo = float(costs.loc[best - 1, "quantile"]) if best - 1 in costs.index else 0.0
    n_conv = curve.replicas(wk.peak(plan.quantile))
    if n_conv not in costs.index:  # pragma: no cover (the range spans P1..P99.9)
        raise ValueError("the plan's own fleet is outside the fleet sizes evaluated")
    # the rating: requests per second one replica carries with the plan's mix, at 100 %
    rating = plan.rating
    req_per_s = 1.0 / (plan.mean_output_tokens / rating.output_tps + plan.mean_input_tokens / rating.input_tps)
    per_req = rp.per_hour(basis) / 3600.0 / req_per_s
    return OptimalQuantile(best, q_hi, (q_lo, q_hi), c_s, per_req, c_s / per_req, costs, costs.loc[n_conv], basis)


# --------------------------------------------------------------------------------------------
# Reserved against on-demand
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ReserveSplit:
    """How many replicas to reserve when the fleet follows the hour-of-week demand.

    Attributes
    ----------
    hourly : pandas.DataFrame
        One row per hour of the forecast week: ``period_start``, ``hour_of_week``,
        ``output_tps`` (the hour's demand at the plan's quantile) and ``replicas`` (what the
        plan's rules buy for it).
    duration : pandas.DataFrame
        Index ``replica`` (1 = the first replica); ``share_of_hours`` that need it at least,
        ``reserve`` (True when that share reaches the break-even).
    break_even_share : float
        ``reserved / on-demand`` price: a replica needed in more hours than this share is
        cheaper reserved.
    reserved : int
        Replicas to reserve.
    static_replicas : int
        The static plan's replicas (the plan's headline).
    usd_per_week : dict
        ``"static, on demand"``, ``"static, reserved"``, ``"following, on demand"``,
        ``"following, reserved floor + on demand"``.
    on_demand_replica_hours : float
        Replica-hours a week left to on demand (or autoscaling) in the split.
    replica : ReplicaPrice
    source : str
        ``"forecast"`` (the forecast week at the quantile) or ``"observed"`` (no forecast was
        possible: the last whole observed week, scaled so that its busiest hour is the planned
        peak).
    """

    hourly: pd.DataFrame = field(repr=False)
    duration: pd.DataFrame = field(repr=False)
    break_even_share: float
    reserved: int
    static_replicas: int
    usd_per_week: dict
    on_demand_replica_hours: float
    replica: ReplicaPrice
    source: str = "forecast"

    def table(self) -> pd.DataFrame:
        """The four ways to pay, per week, with the saving against the static reserved fleet."""
        t = pd.DataFrame({"usd_per_week": pd.Series(self.usd_per_week)})
        t["vs_static_reserved"] = t["usd_per_week"] / self.usd_per_week["static, reserved"] - 1.0
        return t


def reserve_split(plan, sweep, prices, *, quantile: float | None = None, gpu: str | None = None,
                  tensor_parallel: int | None = None) -> ReserveSplit:
    """Reserve the replicas busy often enough to beat the on-demand price; leave the rest on demand.

    Each hour of the forecast week gets the replicas the plan's rules buy for its demand at
    ``quantile`` (default the plan's), as if the fleet followed the week hour by hour (ideal
    autoscaling, its lag covered by the burst headroom). When the plan could not forecast, the
    last whole observed week stands in, scaled so that its busiest hour is the planned peak
    (``source="observed"``); a log of less than a week has no hour-of-week shape and raises. The ``k``-th replica is needed in a
    share ``s_k`` of the hours; reserved it costs ``r × 168`` a week, on demand ``o × 168 × s_k``,
    so reserve it when ``s_k ≥ r / o`` (the break-even share).

    Returns
    -------
    ReserveSplit
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    curve = FleetCurve(plan, sweep)
    q = plan.quantile if quantile is None else probability(quantile, "quantile")
    try:
        wk = week_demand(plan)
        hours, demand, source = wk.hours, wk.band(q), "forecast"
    except ValueError as exc:
        hours, demand = _observed_week(plan, exc)
        source = "observed"
    n_h = np.array([curve.replicas(x) for x in demand], dtype=int)
    hourly = pd.DataFrame({"period_start": hours, "hour_of_week": np.arange(HOURS_PER_WEEK),
                           "output_tps": demand, "replicas": n_h})
    ks = np.arange(1, int(n_h.max()) + 1)
    share = np.array([(n_h >= k).mean() for k in ks])
    b = rp.price.break_even_share
    reserve = share >= b - 1e-12
    r = int(reserve.sum())  # share decreases with k, so the reserved replicas are the first r
    duration = pd.DataFrame({"share_of_hours": share, "reserve": reserve}, index=pd.Index(ks, name="replica"))
    od_hours = float(np.maximum(n_h - r, 0).sum())
    static = int(plan.total)
    usd = {"static, on demand": static * rp.on_demand_usd_per_hour * HOURS_PER_WEEK,
           "static, reserved": static * rp.reserved_usd_per_hour * HOURS_PER_WEEK,
           "following, on demand": float(n_h.sum()) * rp.on_demand_usd_per_hour,
           "following, reserved floor + on demand": r * rp.reserved_usd_per_hour * HOURS_PER_WEEK
           + od_hours * rp.on_demand_usd_per_hour}
    return ReserveSplit(hourly, duration, b, r, static, usd, od_hours, rp, source)


def _observed_week(plan, why: Exception) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """The last whole observed week of the plan's traffic, scaled so its busiest hour is the
    planned peak: the hour-of-week shape when no forecast was possible."""
    sel = plan.traffic.hourly
    s = sel.groupby("period_start")["output_tokens"].sum().astype(float).sort_index()
    s.index = pd.DatetimeIndex(s.index)
    try:
        s = fc.trim_to_whole_weeks(s).iloc[-HOURS_PER_WEEK:]
    except ValueError as exc:
        raise ValueError(f"{why}; nor does the log cover a whole week of hours for an hour-of-week shape ({exc})") from None
    if s.max() <= 0:
        raise ValueError(f"{why}; and the log's last whole week has no output tokens")
    return pd.DatetimeIndex(s.index), s.to_numpy() * (float(plan.output_tps) / float(s.max()))


# --------------------------------------------------------------------------------------------
# The cheapest configuration
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Comparison:
    """Configurations of one model ranked by cost (build it with :func:`compare_configurations`).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per configuration, cheapest first (ties: more requests per dollar at the rating
        first; those that cannot meet the objectives last):
        ``sweep``, ``gpu``, ``gpus_per_replica``, ``slots``, ``service_time_s``,
        ``requests_per_replica`` (at the rating), ``requests_per_usd`` (requests a dollar of
        replica time serves at the rating), ``serving``, ``burst``, ``spare``,
        ``replicas``, ``gpus``, ``usd_per_hour``, ``usd_per_week``,
        ``usd_per_m_output``, ``usd_per_m_input``, ``binding``, ``verified``, ``status``
        (``"ok"`` or ``"cannot meet"``) and ``reason``.
    plans : dict
        ``{sweep name: CapacityPlan}`` for the configurations that could be planned.
    basis : str
    """

    table: pd.DataFrame = field(repr=False)
    plans: dict = field(repr=False)
    basis: str = "on_demand"

    @property
    def winner(self) -> str | None:
        """The cheapest configuration that meets the objectives (its sweep name)."""
        ok = self.table[self.table["status"] == "ok"]
        return None if ok.empty else str(ok.iloc[0]["sweep"])

    def explain(self) -> str:
        """The ranking in sentences: the winner, by how much, and what binds on each."""
        t = self.table
        ok = t[t["status"] == "ok"]
        if ok.empty:
            return "No configuration meets the objectives: " + "; ".join(f"{r.sweep}: {r.reason}" for r in t.itertuples())
        w = ok.iloc[0]
        price = "on demand" if self.basis == "on_demand" else "reserved"
        lines = [f"Cheapest: {w['sweep']}, {w['replicas']} replicas × {w['gpus_per_replica']} {w['gpu']} = "
                 f"{w['gpus']} GPUs, {_usd(w['usd_per_hour'])} per hour {price} ({_usd(w['usd_per_week'], 0)} per "
                 f"week, {_usd(w['usd_per_m_output'])} per million output tokens at the planned peak)."]
        if len(ok) > 1:
            nxt = ok.iloc[1]
            if math.isclose(nxt["usd_per_hour"], w["usd_per_hour"], rel_tol=1e-9):
                lines.append(f"{nxt['sweep']} costs the same, {_usd(nxt['usd_per_hour'])} per hour: at this load both "
                             "are set by the smallest fleet the rules allow, not by throughput. The tie goes to the one "
                             f"that serves more requests per dollar at the rating ({w['requests_per_usd']:,.0f} against "
                             f"{nxt['requests_per_usd']:,.0f}): it has more room to grow.")
            else:
                same = w["binding"] == nxt["binding"]
                lines.append(f"The next, {nxt['sweep']}, costs {_usd(nxt['usd_per_hour'])} per hour: "
                             f"{100 * (nxt['usd_per_hour'] / w['usd_per_hour'] - 1):.0f} % more. At the rating "
                             f"{w['sweep']} serves {w['requests_per_usd']:,.0f} requests per dollar and {nxt['sweep']} "
                             f"{nxt['requests_per_usd']:,.0f}; "
                             + (f"both serving counts are set by {w['binding']}, so the price follows requests per "
                                "dollar, not the price of a GPU." if same else
                                f"{nxt['sweep']}'s serving count is set by {nxt['binding']}, {w['sweep']}'s by "
                                f"{w['binding']}."))
        for r in t.itertuples():
            if r.status == "ok":
                lines.append(f"- {r.sweep}: S = {r.slots} slots, {r.requests_per_replica:.2f} requests/s per replica "
                             f"at the rating; {r.serving} serving replicas set by {r.binding}, +{r.burst} burst, "
                             f"+{r.spare} spare = {r.replicas} replicas, {r.gpus} GPUs, "
                             f"{_usd(r.usd_per_hour)} per hour"
                             + ("" if r.verified else " (not verified by simulation)"))
            else:
                lines.append(f"- {r.sweep}: cannot meet the objectives: {r.reason}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _sweeps_named(sweeps) -> dict:
    if isinstance(sweeps, Mapping):
        items = list(sweeps.items())
    else:
        items = [(getattr(s, "name", None) or f"sweep {i + 1}", s) for i, s in enumerate(sweeps)]
    if not items:
        raise ValueError("sweeps: give at least one sweep")
    out = {}
    for name, s in items:
        if not isinstance(s, Sweep):
            raise ValueError(f"sweeps[{name!r}] must be a capbook.sweeps.sweep.Sweep, got {type(s).__name__}")
        if name in out:
            raise ValueError(f"sweeps: two sweeps are named {name!r}")
        out[str(name)] = s
    return out


def compare_configurations(log, sweeps, prices, *, basis: str = "on_demand", same_model: bool = True,
                           **plan_kwargs) -> Comparison:
    """The same plan on each configuration of one model, ranked by cost.

    Every sweep is planned by :func:`capbook.plan.steps.capacity_plan` on the same log and objectives
    (the smallest fleet its simulation verifies unless ``simulate=False``, burst, spare), then
    priced with :func:`plan_cost`. A configuration that cannot meet the TPOT objective at any
    measured concurrency (:class:`capbook.plan.steps.InfeasibleObjective`) is listed as
    ``"cannot meet"`` with the reason; any other error (an invalid argument) is raised.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
    sweeps : sequence or mapping of capbook.sweeps.sweep.Sweep
        The configurations (GPU types, tensor-parallel layouts) of one model.
    prices : PriceTable, path or DataFrame
    basis : {"on_demand", "reserved"}
        Price the ranking uses.
    same_model : bool
        Refuse sweeps of different models (they are not substitutes for one another).
    **plan_kwargs
        Passed to :func:`capbook.plan.steps.capacity_plan` (``slo``, ``quantile``, ``simulate`` …).

    Returns
    -------
    Comparison
    """
    _basis(basis)
    table = as_prices(prices)
    named = _sweeps_named(sweeps)
    models = {n: s.config.get("model") for n, s in named.items()}
    known = {m for m in models.values() if isinstance(m, str)}
    if same_model and len(known) > 1:
        raise ValueError("sweeps: the configurations are of different models ("
                         + ", ".join(f"{n}: {m}" for n, m in models.items())
                         + "); they are not substitutes for one another: compare the configurations of one model")
    sums = LogAggregates.of(log)
    rows, plans = [], {}
    for name, s in named.items():
        rp = replica_price(s, table)  # a missing price is an input error, not a losing candidate
        base = {"sweep": name, "gpu": rp.gpu, "gpus_per_replica": rp.gpus}
        try:
            p = capacity_plan(sums, s, sweep_label=name, **plan_kwargs)
        except InfeasibleObjective as exc:  # any other error is the caller's input: it propagates
            rows.append({**base, "status": "cannot meet", "reason": str(exc)})
            continue
        plans[name] = p
        c = plan_cost(p, table, sweep=s)
        rating = p.rating
        req = 1.0 / (p.mean_output_tokens / rating.output_tps + p.mean_input_tokens / rating.input_tps)
        rows.append({**base, "slots": int(p.slots.S), "service_time_s": p.service_time_s,
                     "requests_per_replica": req, "requests_per_usd": req * 3600.0 / rp.per_hour(basis),
                     "serving": p.serving, "burst": p.burst.replicas,
                     "spare": p.spare, "replicas": p.total, "gpus": c.gpus,
                     "usd_per_hour": c.usd_per_hour if basis == "on_demand" else c.reserved_usd_per_hour,
                     "usd_per_week": c.usd_per_week if basis == "on_demand" else c.reserved_usd_per_week,
                     "usd_per_m_output": c.usd_per_m_output * (1 if basis == "on_demand" else rp.price.break_even_share),
                     "usd_per_m_input": c.usd_per_m_input * (1 if basis == "on_demand" else rp.price.break_even_share),
                     "binding": p.binding, "verified": bool(p.verified), "status": "ok",
                     "reason": "" if p.verified or p.verified is None else p.verification.reason})
    cols = ["sweep", "gpu", "gpus_per_replica", "slots", "service_time_s", "requests_per_replica",
            "requests_per_usd", "serving",
            "burst", "spare", "replicas", "gpus", "usd_per_hour", "usd_per_week",
            "usd_per_m_output", "usd_per_m_input", "binding", "verified", "status", "reason"]
    t = pd.DataFrame(rows).reindex(columns=cols)
    t["_rank"] = (t["status"] != "ok").astype(int)
    # cheapest first; between equal prices, the one with more requests per dollar at the rating
    t = t.sort_values(["_rank", "usd_per_hour", "requests_per_usd"], ascending=[True, True, False],
                      kind="stable").drop(columns="_rank").reset_index(drop=True)
    for c in ("slots", "serving", "burst", "spare", "replicas", "gpus"):
        t[c] = t[c].astype(int) if t[c].notna().all() else t[c].astype("Int64")  # blank where it cannot meet
    return Comparison(t, plans, basis)


# --------------------------------------------------------------------------------------------
# The price of the objective, of dedicated pools, of regional pools
# --------------------------------------------------------------------------------------------
def _plan_row(label, p, rp: ReplicaPrice, basis: str) -> dict:
    v = p.verification
    return {"option": label, "replicas": int(p.total), "verified": v.status,
            "reason": "" if v.met or not v.reason else v.reason,
            "binding": p.binding, "usd_per_week": _weekly(p.total, rp, basis)}


def price_of_objectives(log, sweep, prices, ttft_targets_s: Sequence[float] = (0.5, 1.0, 2.0), *,
                        slo=None, basis: str = "on_demand", gpu: str | None = None,
                        tensor_parallel: int | None = None, **plan_kwargs) -> pd.DataFrame:
    """The weekly cost of each TTFT objective, the rest of the plan unchanged.

    Each target is planned by :func:`capbook.plan.steps.capacity_plan` (the fleet simulation included
    unless ``simulate=False``): a tighter TTFT tail moves the simulated count, not the rating.

    Returns
    -------
    pandas.DataFrame
        Index ``ttft_target_s``; ``replicas``, ``verified`` (the simulation's verdict), ``reason``
        (why the simulation could not verify it, empty when it did), ``binding``, ``usd_per_week``
        and ``extra_usd_per_week`` against the loosest target.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    base = SLO() if slo is None else slo
    sums = LogAggregates.of(log)
    rows = []
    for t in ttft_targets_s:
        tt = positive(t, "ttft_target_s")
        p = capacity_plan(sums, sweep, slo=dataclasses.replace(base, ttft_target_s=tt), **plan_kwargs)
        rows.append({"ttft_target_s": tt, **_plan_row(f"p{100 * base.ttft_quantile:g} TTFT ≤ {tt:g} s", p, rp, basis)})
    out = pd.DataFrame(rows).set_index("ttft_target_s").sort_index()
    out["extra_usd_per_week"] = out["usd_per_week"] - out["usd_per_week"].iloc[-1]
    return out.drop(columns="option")


def _tenant_hourly(log, history, tenant_col: str) -> pd.DataFrame:
    """Hourly sums per model, tier and tenant: from ``history`` when given, else from the log."""
    if history is None:
        return log.hourly(by=("model", "tier", tenant_col))
    frame = read_token_csv(history) if isinstance(history, (str, Path)) else history.copy()
    if tenant_col not in frame.columns:
        raise ValueError(f"history: no {tenant_col!r} column, so it cannot be split into pools; columns are "
                         f"{list(frame.columns)}")
    frame["period_start"] = pd.to_datetime(frame["period_start"], utc=True)
    sums = list(HOURLY_COLUMNS[3:])
    return frame.groupby(["period_start", "model", "tier", tenant_col], as_index=False, sort=True)[sums].sum()


def price_of_pools(log, sweep, prices, *, history=None, by: str = "tenant", basis: str = "on_demand",
                   gpu: str | None = None, tensor_parallel: int | None = None, **plan_kwargs) -> pd.DataFrame:
    """Dedicated pools per tenant against one shared pool, each planned by the same rules.

    Every tenant's traffic is planned on its own (its hourly history forecast, its busiest
    minutes, its own queueing, burst headroom and spare) and the pools summed; the shared pool
    is the plan of all of them together. The fleet simulation is skipped for all
    (``simulate=False``, Erlang C's counts) so that the comparison is model against model.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates
        A log with a ``tenant`` column (summed once with :meth:`capbook.logs.aggregates.LogAggregates.of`
        is faster when it is planned again).
    history : path or DataFrame, optional
        Hourly sums with a ``tenant`` column (the sample gateway's ``hourly.csv``); default the
        log's own hours. With a :class:`~capbook.logs.aggregates.LogAggregates` that forecasts from a
        history, this must be that history split by tenant (the shared pool keeps the summed
        one).
    by : str
        The column that names the pools.

    Returns
    -------
    pandas.DataFrame
        One row per pool and a ``shared`` row and a ``dedicated (sum)`` row: ``replicas``,
        ``binding``, ``usd_per_week``, ``peak_output_tps``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    kw = {**plan_kwargs, "simulate": False}
    if isinstance(log, LogAggregates):  # already summed (with its history, if any): history only splits the pools
        sums = log
        if history is None and sums.history_label is not None:
            raise ValueError(f"the log's forecast reads the history {sums.history_label}, which is not split by {by}; "
                             f"give history= with a {by!r} column so that every pool is forecast from the same weeks")
    else:
        sums = LogAggregates.of(log, history=history) if history is not None else LogAggregates.of(log)
    if not sums.has_tenants:
        raise ValueError(f"the request log has no {by!r} column: there are no pools to compare")
    hourly_t = _tenant_hourly(sums.log, history, by)
    minute = sums.per_minute
    shared = capacity_plan(sums, sweep, **kw)
    tier = shared.traffic.tier
    names = sorted(map(str, pd.unique(select_scope(minute, shared.traffic.model, tier or None)[by])))
    rows = []
    for t in names:
        h = hourly_t[hourly_t[by] == t].drop(columns=by)
        m = minute[minute[by] == t]
        if h.empty or h["output_tokens"].sum() <= 0:
            continue
        agg = dataclasses.replace(sums, label=f"{sums.label} [{by} {t}]", hourly=h, per_minute=m)
        p = capacity_plan(agg, sweep, **kw)
        rows.append({"pool": t, "replicas": p.total, "binding": p.binding, "peak_output_tps": p.output_tps,
                     "usd_per_week": _weekly(p.total, rp, basis)})
    ded = pd.DataFrame(rows)
    out = pd.concat([ded, pd.DataFrame([
        {"pool": "dedicated (sum)", "replicas": int(ded["replicas"].sum()), "binding": "",
         "peak_output_tps": float(ded["peak_output_tps"].sum()), "usd_per_week": float(ded["usd_per_week"].sum())},
        {"pool": "shared", "replicas": shared.total, "binding": shared.binding, "peak_output_tps": shared.output_tps,
         "usd_per_week": _weekly(shared.total, rp, basis)}])], ignore_index=True)
    return out.set_index("pool")


def time_zone_regions(week: np.ndarray, shifts: Mapping[str, int] | None = None,
                      shares: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Split one week of hourly demand into regions whose days fall at other hours.

    Region ``r`` has ``share_r`` of the week's volume with the same weekly shape, shifted by
    ``shift_r`` hours (``np.roll``): what the same users would look like spread over time zones.

    Parameters
    ----------
    week : array of 168 floats
        Hourly demand (any unit).
    shifts : mapping, optional
        Region name → hours its day is shifted (default ``{"east": -7, "home": 0, "west": 6}``).
    shares : mapping, optional
        Region name → share of the volume (default equal).

    Returns
    -------
    pandas.DataFrame
        One column per region, 168 rows; the columns sum to the week's total volume.
    """
    w = np.asarray(week, dtype=float)
    if w.shape != (HOURS_PER_WEEK,):
        raise ValueError(f"week must hold {HOURS_PER_WEEK} hourly values, got shape {w.shape}")
    shifts = {"east": -7, "home": 0, "west": 6} if shifts is None else dict(shifts)
    if not shifts:
        raise ValueError("shifts: give at least one region")
    if shares is None:
        shares = {r: 1.0 / len(shifts) for r in shifts}
    if set(shares) != set(shifts):
        raise ValueError(f"shares name regions {sorted(shares)}, shifts name {sorted(shifts)}; give the same regions")
    tot = sum(number(v, f"shares[{k!r}]", lo=0) for k, v in shares.items())
    if tot <= 0:
        raise ValueError("shares must not all be 0")
    return pd.DataFrame({r: shares[r] / tot * np.roll(w, int(s)) for r, s in shifts.items()})


def price_of_regions(plan, sweep, prices, regions: pd.DataFrame | None = None, *, basis: str = "on_demand",
                     gpu: str | None = None, tensor_parallel: int | None = None) -> pd.DataFrame:
    """Regional pools, each sized for its own peak, against one global pool sized for the peak of the sum.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
    prices : PriceTable, path or DataFrame
    regions : pandas.DataFrame, optional
        One column per region of hourly output tokens/s over the same hours (a region column of
        a gateway log, summed per hour). Default: the plan's forecast week split into three
        equal regions 7 hours east and 6 hours west of it (:func:`time_zone_regions`).

    Each pool's planned peak is its busiest hour times the plan's uplift (the planned peak over
    the busiest point-forecast hour: growth and the quantile), sized by :class:`FleetCurve`.

    Returns
    -------
    pandas.DataFrame
        One row per region, ``regional (sum)`` and ``global``: ``peak_output_tps``,
        ``replicas``, ``usd_per_week``.
    """
    rp = replica_price(sweep, prices, gpu=gpu, tensor_parallel=tensor_parallel)
    curve = FleetCurve(plan, sweep)
    wk = week_demand(plan)
    uplift = float(plan.output_tps) / float(wk.point.max())
    reg = time_zone_regions(wk.point) if regions is None else regions
    if not isinstance(reg, pd.DataFrame) or reg.empty:
        raise ValueError("regions must be a non-empty DataFrame, one column of hourly output tokens/s per region")
    rows = []
    for r in reg.columns:
        pk = float(reg[r].max()) * uplift
        n = curve.replicas(pk)
        rows.append({"pool": str(r), "peak_output_tps": pk, "replicas": n, "usd_per_week": _weekly(n, rp, basis)})
    out = pd.DataFrame(rows)
    g_pk = float(reg.sum(axis=1).max()) * uplift
    g_n = curve.replicas(g_pk)
    out = pd.concat([out, pd.DataFrame([
        {"pool": "regional (sum)", "peak_output_tps": float(out["peak_output_tps"].sum()),
         "replicas": int(out["replicas"].sum()), "usd_per_week": float(out["usd_per_week"].sum())},
        {"pool": "global", "peak_output_tps": g_pk, "replicas": g_n, "usd_per_week": _weekly(g_n, rp, basis)}])],
        ignore_index=True)
    return out.set_index("pool")


# --------------------------------------------------------------------------------------------
# A plan with its price: what capbook plan --prices writes
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PlanPricing:
    """A plan's cost, its reserve split and the price of its quantile (see :func:`price_plan`).

    Attributes
    ----------
    cost : PlanCost
    reserve : ReserveSplit or None
        None when the plan has no forecast week (see ``notes``).
    quantiles : pandas.DataFrame or None
        :func:`price_of_quantiles` at P50, P90 and P99 (None without a forecast week).
    optimum : OptimalQuantile or None
        :func:`optimal_quantile` when a price of saturation was given.
    notes : tuple of str
    """

    cost: PlanCost
    reserve: ReserveSplit | None = None
    quantiles: pd.DataFrame | None = field(default=None, repr=False)
    optimum: OptimalQuantile | None = None
    notes: tuple = ()
    _plan_q: float = field(default=0.9, repr=False)

    def table(self) -> pd.DataFrame:
        """Rows with step ``cost`` for :meth:`capbook.plan.steps.CapacityPlan.table`."""
        rows = [self.cost.table()]
        extra = []
        if self.reserve is not None:
            r = self.reserve
            extra += [("break-even share of hours (reserved / on-demand price)", r.break_even_share, "share"),
                      ("replicas to reserve (following the week)", r.reserved, "replicas"),
                      ("on-demand replica-hours per week (following the week)", r.on_demand_replica_hours,
                       "replica-hours")]
            extra += [(f"USD per week, {k}", v, "USD") for k, v in r.usd_per_week.items()]
        if self.quantiles is not None:
            for q, row in self.quantiles.iterrows():
                extra += [(f"replicas at the P{100 * q:g} peak hour", int(row["replicas"]), "replicas"),
                          (f"USD per week at the P{100 * q:g} peak hour", float(row["usd_per_week"]), "USD")]
        if self.optimum is not None:
            o = self.optimum
            c = o.costs.loc[o.replicas]
            extra += [("price of saturation", o.saturation_usd, "USD per late request"),
                      ("price ratio (late request / served request)", o.price_ratio, "x"),
                      ("replicas minimising capacity + saturation cost", o.replicas, "replicas"),
                      ("peak-hour quantile of that fleet", o.quantile, "quantile"),
                      ("expected late requests per week at that fleet", float(c["late_requests"]), "requests"),
                      ("USD per week, capacity + saturation, at that fleet", float(c["total_usd_per_week"]), "USD"),
                      (f"USD per week, capacity + saturation, at the P{100 * self._plan_q:g} fleet",
                       float(o.conventional["total_usd_per_week"]), "USD")]
        rows.append(pd.DataFrame([{"step": "cost", "quantity": q, "value": v, "unit": u} for q, v, u in extra]))
        return pd.concat(rows, ignore_index=True)

    def render(self, markdown: bool = False) -> str:
        """The cost section of the plan's text and review document."""
        out = self.cost.render(markdown)
        if self.reserve is not None:
            r, rp = self.reserve, self.reserve.replica
            w = r.usd_per_week
            out += (f"- Reserved against on-demand: a replica needed in more than {100 * r.break_even_share:.0f} % of the "
                    f"hours (reserved / on-demand price) is cheaper reserved. Following the "
                    f"{'forecast' if r.source == 'forecast' else 'last observed'} week hour by hour, "
                    f"reserve {r.reserved} and buy {r.on_demand_replica_hours:,.0f} replica-hours a week on demand: "
                    f"{_usd(w['following, reserved floor + on demand'], 0)} a week, against "
                    f"{_usd(w['static, reserved'], 0)} for all {r.static_replicas} reserved and "
                    f"{_usd(w['static, on demand'], 0)} for all on demand (ideal scaling: it assumes the fleet "
                    "follows the hours)\n")
        if self.quantiles is not None:
            parts = [f"P{100 * q:g}: {int(row['replicas'])} replicas, {_usd(float(row['usd_per_week']), 0)}"
                     for q, row in self.quantiles.iterrows()]
            out += "- The price of the quantile (per week): " + "; ".join(parts) + "\n"
        if self.optimum is not None:
            o = self.optimum
            c = o.costs.loc[o.replicas]
            out += (f"- At {_usd(o.saturation_usd)} per late request ({o.price_ratio:,.0f} times the cost of serving one), "
                    f"capacity plus saturation is cheapest with {o.replicas} replicas ({_quantile_words(o.quantile)}; "
                    f"{float(c['late_requests']):,.0f} late requests expected a week): "
                    f"{_usd(float(c['total_usd_per_week']), 0)} a week, against "
                    f"{_usd(float(o.conventional['total_usd_per_week']), 0)} for the plan's "
                    f"P{100 * self._plan_q:g} fleet ({int(o.conventional.name)} replicas)\n")
        out += "".join(f"- {_md_text(n) if markdown else n}\n" for n in self.notes)
        return out


def _quantile_words(q: float) -> str:
    """Where a fleet's capacity falls among the forecast's busiest hours, in words."""
    if q <= 0:
        return "below the busiest hour of every backtest week"
    if q >= 1:
        return "above the busiest hour of every backtest week"
    return f"the P{100 * q:.0f} peak hour"


def price_plan(plan, sweep, prices, *, saturation_usd: float | None = None, gpu: str | None = None,
               tensor_parallel: int | None = None) -> PlanPricing:
    """Price a plan: :func:`plan_cost`, :func:`reserve_split` and :func:`price_of_quantiles`.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : PriceTable, path or DataFrame
    saturation_usd : float, optional
        Dollars per request served late or refused: adds :func:`optimal_quantile`.
    gpu, tensor_parallel : optional
        The GPU type and GPUs per replica when the sweep does not record them.

    Returns
    -------
    PlanPricing
        Attach it with ``dataclasses.replace(plan, pricing=...)`` (or
        :meth:`capbook.cost.costs.priced`) to print and export it with the plan.
    """
    table = as_prices(prices)
    cost = plan_cost(plan, table, sweep=sweep, gpu=gpu, tensor_parallel=tensor_parallel)
    if plan.verified is False:  # say so beside the dollars, not only in the headline
        cost = dataclasses.replace(cost, notes=cost.notes + (
            f"the {cost.replicas} replicas priced are Erlang C's count, which the fleet simulation could not verify: "
            "the price of a fleet that may still miss the objectives",))
    try:
        week_demand(plan)
    except ValueError as exc:
        # one note for what a forecast week would have given
        keep = tuple(n for n in cost.notes if not n.startswith(_NO_WEEK))
        if saturation_usd is not None:
            positive(saturation_usd, "saturation_usd")
            keep += ("no optimal quantile for the price of saturation: it needs a forecast distribution",)
        try:
            reserve = reserve_split(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
        except ValueError:
            return PlanPricing(dataclasses.replace(cost, notes=keep), None, None, None,
                               (f"no per-token cost over the forecast week, reserve split or price of the quantile: {exc}",))
        return PlanPricing(dataclasses.replace(cost, notes=keep), reserve, None, None,
                           (f"no per-token cost over the forecast week or price of the quantile: {exc}; the reserve split "
                            "uses the last whole observed week, scaled to the planned peak",))
    reserve = reserve_split(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
    quantiles = price_of_quantiles(plan, sweep, table, gpu=gpu, tensor_parallel=tensor_parallel)
    optimum = None if saturation_usd is None else optimal_quantile(plan, sweep, table, saturation_usd, gpu=gpu,
                                                                    tensor_parallel=tensor_parallel)
    return PlanPricing(cost, reserve, quantiles, optimum, (), float(plan.quantile))


def priced(plan, sweep, prices, *, saturation_usd: float | None = None, gpu: str | None = None,
           tensor_parallel: int | None = None):
    """``plan`` with its cost (:func:`price_plan`): its :meth:`~capbook.plan.steps.CapacityPlan.table`
    then holds rows with step ``cost`` and its :meth:`~capbook.plan.steps.CapacityPlan.render` a
    cost section.

    Parameters
    ----------
    plan : capbook.plan.steps.CapacityPlan
    sweep : capbook.sweeps.sweep.Sweep
        The plan's sweep.
    prices : capbook.cost.costs.PriceTable, path or DataFrame
        USD per GPU-hour per GPU type (:func:`capbook.cost.costs.read_prices`).
    saturation_usd : float, optional
        Dollars per request served late or refused: adds the fleet that minimises capacity
        plus saturation cost (:func:`capbook.cost.costs.optimal_quantile`).
    gpu, tensor_parallel : optional
        The GPU type and GPUs per replica when the sweep does not record them.

    Returns
    -------
    capbook.plan.steps.CapacityPlan
        A copy of ``plan``.
    """
    return dataclasses.replace(plan, pricing=price_plan(plan, sweep, prices, saturation_usd=saturation_usd,
                                                        gpu=gpu, tensor_parallel=tensor_parallel))
