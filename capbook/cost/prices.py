"""GPU prices as data: the price table (:func:`read_prices`), one replica's price
(:func:`replica_price`). Units: US dollars per GPU-hour."""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from capbook.paths import data_dir

__all__ = ["PRICE_COLUMNS", "HOURS_PER_YEAR", "SAMPLE_PRICES", "GpuPrice", "PriceTable", "read_prices",
           "load_sample_prices", "as_prices", "ReplicaPrice", "replica_price"]

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


