"""The one place chapters read their data from.

Every chapter loads its inputs through this module, so the same notebooks run on the sample
data in ``data/`` (the default) or on a reader's own files without editing:

* ``CAPBOOK_REQUESTS`` — path to a request log (any format :mod:`capbook.logs.requestlog` reads);
  ``CAPBOOK_REQUESTS_FORMAT`` optionally names the format;
* ``CAPBOOK_SWEEP`` — path to a sweep (any format :mod:`capbook.sweeps.importers` reads);
* ``CAPBOOK_PRICES`` — path to a price table (:func:`capbook.cost.prices.read_prices`; default the
  illustrative ``data/prices/illustrative.csv``);
* ``CAPBOOK_REQUESTS_OPTIONS`` and ``CAPBOOK_SWEEP_OPTIONS`` — optional JSON objects of keyword
  arguments for :func:`capbook.logs.requestlog.read_requests` (e.g. ``{"drop_invalid": true,
  "time_unit": "ms"}``) and :func:`capbook.sweeps.importers.read_sweep` (e.g. ``{"load": "rate",
  "where": {"config": "vllm"}, "max_num_seqs": 128}``); ``capbook book`` sets them from its flags;
* ``CAPBOOK_SLO`` — the reader's objectives, in the syntax of ``capbook plan --slo``
  (:meth:`capbook.slo.SLO.parse`, e.g. ``ttft=2,tpot=80ms``); every chapter with objectives
  reads them through :func:`slo`, and ``capbook book --slo`` sets them;
* ``CAPBOOK_DATA`` — a different folder of sample data (default: the checkout's ``data/``, or
  the copy installed with the package; see :mod:`capbook.paths`).

Besides the sample data, ``data/realdata/`` holds tables derived from public measurements;
:func:`load_kubecon_sweeps` reads the one the chapter *Where the textbook breaks* tests the
models on, and :func:`~capbook.forecast.shapes.load_demand_shape` a real day-and-week shape of demand (Alibaba
ServeGen's m-large, 14 days of 10-minute rates) and :func:`load_mooncake_conversation` an hour
of real requests with their prompts' prefix blocks (Mooncake's conversation trace). They are
the same whatever data the reader configured.

Hidden cells that pin the book's published figures call :func:`using_sample_data` and only
assert when the sample data is in use.

The capacity plan takes explicit inputs; :func:`plan_inputs` decides its defaults (the reader's
files, or the sample log with the sample sweep of each sample model,
:data:`SAMPLE_SWEEP_FOR_MODEL`), for the CLI and the capstone chapter.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from capbook.app.messages import cli_message
from capbook.cost import costs
from capbook.engine.hardware import hardware_for
from capbook.forecast import tokens as forecast
from capbook.forecast.shapes import DEMAND_SHAPE_FILE, DEMAND_SHAPE_SOURCE, demand_shape_path, load_demand_shape  # noqa: F401
from capbook.logs import requestlog as traces
from capbook.logs.aggregates import LogAggregates
from capbook.logs.requestlog import SAMPLE_REQUESTS
from capbook.paths import data_dir, data_path  # data_dir: the one lookup, re-exported for the chapters
from capbook.plan.steps import select_traffic
from capbook.slo import SLO
from capbook.sweeps import importers, sweep
from capbook.sweeps.sweep import Sweep, choose_slots, load_sample_sweep
from capbook.validation import integer

__all__ = [
    "data_dir",
    "SAMPLE_SWEEP_FOR_MODEL",
    "GATEWAY_LOG",
    "GATEWAY_HISTORY",
    "load_gateway",
    "history_path",
    "prices_path",
    "load_prices",
    "PlanInputs",
    "plan_log",
    "plan_inputs",
    "using_sample_data",
    "slo",
    "slo_given",
    "data_source",
    "requests_path",
    "sweep_path",
    "load_requests",
    "load_sweep",
    "load_token_series",
    "load_kubecon_sweeps",
    "KUBECON_FILE",
    "FIDELITY_FILE",
    "load_fidelity_sweeps",
    "MOONCAKE_FILE",
    "load_mooncake_conversation",
]

_ENV_REQUESTS = "CAPBOOK_REQUESTS"
_ENV_REQUESTS_FORMAT = "CAPBOOK_REQUESTS_FORMAT"
_ENV_SWEEP = "CAPBOOK_SWEEP"
_ENV_HISTORY = "CAPBOOK_HISTORY"
_ENV_PRICES = "CAPBOOK_PRICES"
_ENV_REQUESTS_OPTIONS = "CAPBOOK_REQUESTS_OPTIONS"
_ENV_SWEEP_OPTIONS = "CAPBOOK_SWEEP_OPTIONS"
_ENV_SLO = "CAPBOOK_SLO"

#: The derived KubeCon NA 2025 inference-perf table, relative to :func:`data_dir`.
KUBECON_FILE = Path("realdata") / "kubecon_inference_perf.csv"




#: Mooncake's conversation trace (``tools/derive_mooncake.py``), relative to :func:`data_dir`.
MOONCAKE_FILE = Path("realdata") / "mooncake_conversation.parquet"

#: The trace's one-line attribution, kept in ``frame.attrs["source"]``.
MOONCAKE_SOURCE = ("Mooncake FAST'25 conversation trace (kvcache-ai/Mooncake FAST25-release/traces/"
                   "conversation_trace.jsonl, commit 3b5a5941, Apache-2.0): every request of one hour "
                   "of Kimi's production traffic")


#: The sample gateway of the running example (``tools/make_gateway.py``), relative to
#: :func:`data_dir`: the three busiest hours as requests, and 26 weeks of hourly sums.
GATEWAY_LOG = Path("gateway") / "peak_hours.parquet"
GATEWAY_HISTORY = Path("gateway") / "hourly.csv"


def history_path() -> Path | None:
    """The reader's hourly history for the plan's forecast (``CAPBOOK_HISTORY``), or None."""
    v = os.environ.get(_ENV_HISTORY)
    return Path(v) if v else None


def prices_path() -> Path | None:
    """The reader's price table (``CAPBOOK_PRICES``), or None for the illustrative one."""
    v = os.environ.get(_ENV_PRICES)
    return Path(v) if v else None


def load_prices():
    """The price table the book prices plans with: the reader's (``CAPBOOK_PRICES``), else the
    illustrative round numbers of ``data/prices/illustrative.csv`` (not quotes).

    Returns
    -------
    capbook.cost.prices.PriceTable
    """
    p = prices_path()
    return costs.read_prices(p) if p is not None else costs.load_sample_prices()


def load_gateway():
    """The sample gateway's request log: every request of its three busiest hours.

    Its busiest hour is the running example's 40 requests/s; the hourly history beside it is
    :data:`GATEWAY_HISTORY` (read it with :func:`capbook.logs.hourly.read_token_csv`). See
    ``data/README.md``.

    Returns
    -------
    capbook.logs.requestlog.RequestLog
    """
    return traces.read_requests(data_path(*GATEWAY_LOG.parts))


def requests_path() -> Path | None:
    """The reader's request log from ``CAPBOOK_REQUESTS``, or None for the sample log."""
    p = os.environ.get(_ENV_REQUESTS)
    return Path(p) if p else None


def sweep_path() -> Path | None:
    """The reader's sweep from ``CAPBOOK_SWEEP``, or None for the sample sweeps."""
    p = os.environ.get(_ENV_SWEEP)
    return Path(p) if p else None


def using_sample_data() -> bool:
    """True when no reader data or objectives are configured (the book's published figures then apply)."""
    return requests_path() is None and sweep_path() is None and prices_path() is None and not slo_given()


def slo_given() -> bool:
    """True when the reader gave objectives (``CAPBOOK_SLO``, set by ``capbook book --slo``)."""
    return bool(os.environ.get(_ENV_SLO, "").strip())


def slo(**sample):
    """The objectives a chapter plans and checks against: the reader's, else the chapter's own.

    With ``CAPBOOK_SLO`` set (``capbook book --slo``), the objectives ``capbook plan --slo`` would
    use with the same text (:meth:`capbook.slo.SLO.parse`; what it leaves out takes the plan's
    defaults). Otherwise :class:`capbook.slo.SLO` with the chapter's sample objectives
    ``sample`` (keyword arguments of :class:`~capbook.slo.SLO`: ``ttft_target_s`` and
    ``tpot_target_s`` in seconds, ``tpot_percentile``, ...), so the published figures hold.

    Parameters
    ----------
    **sample
        The chapter's own objectives, used only when the reader gave none.

    Returns
    -------
    capbook.slo.SLO

    Raises
    ------
    ValueError
        When ``CAPBOOK_SLO`` does not parse; the message names the variable.

    Examples
    --------
    >>> slo(tpot_target_s=0.05).describe()        # no CAPBOOK_SLO set: the chapter's objectives
    'p99 TTFT ≤ 1 s, p95 TPOT ≤ 50 ms, P(wait > 0.5 s) ≤ 1 %, goodput ≥ 99 %'
    """
    text = os.environ.get(_ENV_SLO, "").strip()
    if not text:
        return SLO(**sample)
    try:
        return SLO.parse(text)
    except ValueError as exc:
        raise ValueError(f"{_ENV_SLO}={text!r}: {exc}") from None


_book_slo = slo  # slots_at_objective's default; its parameter is named slo


def reader_hint(exc: Exception) -> str:
    """Why a chapter could not compute on the reader's data, naming their files and, since
    ``capbook book`` runs the chapters, the book's flags rather than Python keywords.

    >>> import os; os.environ.pop("CAPBOOK_REQUESTS", None); os.environ.pop("CAPBOOK_SWEEP", None)
    >>> reader_hint(ValueError("pass tensor_parallel=N"))
    'pass --tensor-parallel N to capbook book'
    """
    msg = cli_message(str(exc))
    if "--" in msg:
        msg += " to capbook book"
    named = [f"{what} {p.name}" for what, p in (("log", requests_path()), ("sweep", sweep_path())) if p]
    return (f"{' and '.join(named)}: " if named else "") + msg


def data_source() -> dict:
    """Describe the data the book is running on (shown on the first page of a built site)."""
    return {
        "requests": str(requests_path()) if requests_path() else SAMPLE_REQUESTS_LABEL,
        "history": str(history_path()) if requests_path() and history_path() else None,
        "sweep": str(sweep_path()) if sweep_path() else "sample sweeps (data/sweeps)",
        "prices": str(prices_path()) if prices_path() else "illustrative prices (data/prices/illustrative.csv)",
        "sample": using_sample_data(),
        "requests_options": requests_options() if requests_path() else {},
        "sweep_options": sweep_options() if sweep_path() else {},
        "slo": os.environ.get(_ENV_SLO, "").strip() or None,
    }


def _options(var: str) -> dict:
    """Keyword arguments from the JSON object in environment variable ``var`` (empty if unset)."""
    import json

    text = os.environ.get(var)
    if not text:
        return {}
    try:
        opts = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{var} must hold a JSON object of keyword arguments: {exc}") from None
    if not isinstance(opts, dict):
        raise ValueError(f"{var} must hold a JSON object of keyword arguments, got {text!r}")
    return opts


def requests_options() -> dict:
    """Keyword arguments for :func:`capbook.logs.requestlog.read_requests` from ``CAPBOOK_REQUESTS_OPTIONS``."""
    return _options(_ENV_REQUESTS_OPTIONS)


def sweep_options() -> dict:
    """Keyword arguments for :func:`capbook.sweeps.importers.read_sweep` from ``CAPBOOK_SWEEP_OPTIONS``."""
    return _options(_ENV_SWEEP_OPTIONS)


def load_requests():
    """The request log the book runs on: ``CAPBOOK_REQUESTS`` or the sample log.

    Returns
    -------
    capbook.logs.requestlog.RequestLog
    """
    path = requests_path()
    if path is None:
        return traces.load_sample_requests()
    fmt = os.environ.get(_ENV_REQUESTS_FORMAT, "auto")
    return traces.read_requests(path, **{"format": fmt, **requests_options()})


def load_sweep(name: str | None = None):
    """The sweep the book runs on: ``CAPBOOK_SWEEP`` or a named sample sweep.

    Parameters
    ----------
    name : str, optional
        Sample sweep name (see :func:`capbook.sweeps.sweep.list_sample_sweeps`); ignored when the
        reader supplied a sweep. Default: the book's illustrative sweep.
    """
    path = sweep_path()
    if path is not None:
        return importers.read_sweep(path, **sweep_options())
    return sweep.load_sample_sweep(name) if name else sweep.load_sample_sweep()


def load_token_series(name: str | None = None, *, min_weeks: int | None = None):
    """An hourly token series for the forecasting chapters.

    With a reader's request log, the series is aggregated from it (hourly tokens per model and
    tier, :meth:`capbook.logs.requestlog.RequestLog.hourly`); otherwise the named generated series from
    ``data/tokens``.

    Parameters
    ----------
    name : str, optional
        Sample series (see :func:`capbook.forecast.tokens.load_sample_series`).
    min_weeks : int, optional
        Whole weeks of history the caller needs. When the reader's log cannot give that many
        (too short, or an hour with no tokens for its busiest model outside the batch tier),
        the sample series is returned instead and a note saying why is printed (and kept in
        ``frame.attrs["capbook_note"]``): a chapter then shows the method on the sample rather
        than fail. ``frame.attrs["capbook_source"]`` names the data returned.

    Returns
    -------
    pandas.DataFrame
        The trace layer's hourly layout: ``period_start, model, tier, requests, throttled,
        input_tokens, output_tokens``.
    """
    def sample(note: str | None = None):
        frame = forecast.load_sample_series(name) if name else forecast.load_sample_series()
        frame.attrs["capbook_source"] = f"sample token series {name or 'weeks20'} (data/tokens)"
        if note:
            frame.attrs["capbook_note"] = note
            print(f"capbook: {note}")
        return frame

    path = requests_path()
    if path is None:
        return sample()
    hourly = load_requests().hourly()
    hourly.attrs["capbook_source"] = str(path)
    if min_weeks is None:
        return hourly
    need = int(min_weeks)
    why = _history_shortfall(hourly, need)
    if why is None:
        return hourly
    return sample(f"your request log ({path.name}) {why}; this chapter needs {need} whole weeks "
                  f"of hourly tokens, so it shows the sample series {name or 'weeks20'} instead")


def _history_shortfall(hourly, need: int) -> str | None:
    """Why an hourly frame cannot give ``need`` whole weeks of positive hours (None if it can)."""
    rows = hourly[~hourly["tier"].isin(["batch"])] if "tier" in hourly.columns else hourly
    if rows.empty or rows["output_tokens"].sum() <= 0:
        return "has no output tokens outside the batch tier"
    if "model" in rows.columns:
        model = rows.groupby("model")["output_tokens"].sum().idxmax()
        rows = rows[rows["model"] == model]
    s = rows.groupby("period_start")["output_tokens"].sum()
    hours = len(s)
    weeks = hours // 168
    if weeks < need:
        return f"covers {hours:,} hours ({weeks} whole week{'s' if weeks != 1 else ''})"
    tail = s.iloc[len(s) - weeks * 168:]
    zero = int((tail <= 0).sum())
    if zero:
        return (f"has {zero} hour(s) with no output tokens (first at {tail.index[(tail <= 0).argmax()]}); "
                "the trend × weekly-shape forecast needs every hour positive")
    return None


def load_kubecon_sweeps(path=None) -> list:
    """The six vLLM variants of the KubeCon NA 2025 inference-perf demo, one sweep each.

    Real client-side measurements of one vLLM replica (Llama-3.1-8B-Instruct on one H100 80 GB)
    under open-loop rate sweeps of seven 60-second stages, from kubernetes-sigs/inference-perf
    (commit 7de5ef2, ``demos/kubecon-na-2025/``; Apache-2.0), as derived by
    ``tools/derive_kubecon.py`` into ``data/realdata/kubecon_inference_perf.csv`` (see
    ``data/README.md`` for the columns and the caveats: TPOT is the importer's rescaled value,
    about twice what inference-perf reported). The table holds what
    :func:`capbook.sweeps.importers.read_sweep` gives for each variant folder, so
    ``capbook.engine.fidelity.fidelity`` on these sweeps gives what it gives on the raw files.

    Parameters
    ----------
    path : str or Path, optional
        The table; default ``data_dir() / "realdata" / "kubecon_inference_perf.csv"`` (so
        ``CAPBOOK_DATA`` moves it with the rest of the data).

    Returns
    -------
    list of capbook.sweeps.sweep.Sweep
        One per variant, sorted by name (``vllm``, ``vllm+batch_size``,
        ``vllm+chunking_and_prefix_caching``, ``vllm+eagle``, ``vllm+quantization``,
        ``vllm+v0_engine``); stages with ``saturated`` True are in each sweep's ``.saturated``.
    """
    import pandas as pd

    path = Path(path) if path is not None else data_dir() / KUBECON_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: regenerate it with tools/derive_kubecon.py "
                                "from the inference-perf demos/kubecon-na-2025 folder")
    # the floats were written as repr(): pandas' default parser reads them back to the same doubles
    df = pd.read_csv(path)
    if "variant" not in df:
        raise ValueError(f"{path}: no 'variant' column; this is not the derived KubeCon table")
    sweeps = []
    for name, rows in df.groupby("variant", sort=True):
        sw = Sweep.from_frame(rows.reset_index(drop=True), name=str(name))
        rescale = pd.to_numeric(rows.get("tpot_rescale"), errors="coerce")
        if rescale is not None and rescale.notna().any():
            sw.add_note(f"TPOT columns rescaled by {rescale.min():.2f}–{rescale.max():.2f} from what inference-perf "
                        "reported (its client timed two stream lines per token); see data/README.md")
        sw.add_note(f"measured: {name} from the KubeCon NA 2025 inference-perf demo (kubernetes-sigs/inference-perf "
                    "7de5ef2, demos/kubecon-na-2025, Apache-2.0)")
        sweeps.append(sw)
    return sweeps


FIDELITY_FILE = Path("realdata") / "fidelity_sweeps.csv"


def load_fidelity_sweeps(path=None) -> list:
    """Real open-loop rate sweeps beyond the KubeCon demo, one per dataset, with their hardware set.

    SGLang ``bench_serving`` runs from datacrunch-research/h200-benchmarks (commit c091ef5, MIT):
    Llama-3.3-70B-Instruct on 4×H200 TP4 and Llama-3.1-405B on 8×H200 TP8, random 1024/1024
    prompts (about 510 tokens in and out) at 1, 2, 4, 8, 16 requests/s, as derived by
    ``tools/derive_fidelity_data.py`` into ``data/realdata/fidelity_sweeps.csv`` (columns and
    caveats in ``data/README.md``: this SGLang layout has no p99 TTFT).

    Parameters
    ----------
    path : str or Path, optional
        The table; default ``data_dir() / "realdata" / "fidelity_sweeps.csv"``.

    Returns
    -------
    list of capbook.sweeps.sweep.Sweep
        One per ``dataset`` value, sorted by name; saturated levels are in ``.saturated``, and
        ``.hardware`` is :func:`capbook.engine.hardware.hardware_for` of the table's ``model``, ``gpu``
        and ``tensor_parallel`` columns.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When the table has no ``dataset`` column or a dataset has more than one model, GPU or
        tensor-parallel value.
    """
    import pandas as pd

    path = Path(path) if path is not None else data_dir() / FIDELITY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: regenerate it with tools/derive_fidelity_data.py "
                                "from the ../shared data folder")
    df = pd.read_csv(path)
    if "dataset" not in df:
        raise ValueError(f"{path}: no 'dataset' column; this is not the derived fidelity table")
    sweeps = []
    for name, rows in df.groupby("dataset", sort=True):
        facts = {}
        for col in ("model", "gpu", "tensor_parallel"):
            values = rows[col].dropna().unique()
            if len(values) != 1:
                raise ValueError(f"{path}: dataset {name!r} has {len(values)} values of {col!r}, expected one")
            facts[col] = values[0]
        sw = Sweep.from_frame(rows.reset_index(drop=True), name=str(name))
        sw.hardware = hardware_for(sw, model=str(facts["model"]), gpu=str(facts["gpu"]),
                                   tensor_parallel=int(facts["tensor_parallel"]))
        sw.add_note(f"measured: {name}, SGLang bench_serving from datacrunch-research/h200-benchmarks "
                    "(c091ef5, MIT); see data/README.md")
        sweeps.append(sw)
    return sweeps


def load_mooncake_conversation(path=None):
    """A real hour of requests with their prompts' prefix blocks: Mooncake's conversation trace.

    Every request of the conversation workload that Moonshot AI's Kimi served in one hour, as
    released with the Mooncake FAST'25 paper (kvcache-ai/Mooncake
    ``FAST25-release/traces/conversation_trace.jsonl``, commit ``3b5a5941``, Apache-2.0) and
    converted to Parquet by ``tools/derive_mooncake.py`` (all 12,031 rows, values unchanged). Each
    request carries the hashes of its prompt's 512-token blocks, each hash standing for the
    whole prefix up to that block: two requests whose lists start alike share that much cached
    KV. The columns are those :func:`capbook.sim.fleetsim.simulate_fleet` reads. See
    ``data/README.md``.

    Parameters
    ----------
    path : str or Path, optional
        A Parquet file in the same layout (``arrival_time_ms``, ``input_tokens``,
        ``output_tokens``, ``hash_ids``); default ``data_dir() / MOONCAKE_FILE`` (so
        ``CAPBOOK_DATA`` moves it with the rest of the data).

    Returns
    -------
    pandas.DataFrame
        One row per request, in arrival order: ``arrival_time`` (seconds from the start of the
        trace, float), ``input_tokens`` and ``output_tokens`` (tokens, int), ``hash_ids`` (list of
        int). ``attrs["block_tokens"]`` is the tokens per hashed block (512) and
        ``attrs["source"]`` the one-line attribution.

    Raises
    ------
    FileNotFoundError
        When the file is not there.
    ValueError
        When a column is missing, an arrival time is negative or earlier than the one before,
        a token count is below 1, or a prompt has fewer hashes than 512-token blocks; the message
        names the file, row and column.

    Examples
    --------
    >>> df = load_mooncake_conversation()
    >>> len(df), float(df["arrival_time"].iloc[-1]), round(float(df["input_tokens"].mean()))
    (12031, 3536.999, 12035)
    >>> df["hash_ids"].iloc[0][:4], df.attrs["block_tokens"]
    ([0, 1, 2, 3], 512)
    """
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    path = Path(path) if path is not None else data_dir() / MOONCAKE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: regenerate it with tools/derive_mooncake.py from "
                                "Mooncake's FAST25-release/traces/conversation_trace.jsonl")
    table = pq.read_table(path)
    need = ("arrival_time_ms", "input_tokens", "output_tokens", "hash_ids")
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: no {', '.join(repr(c) for c in missing)} column (columns: "
                         f"{', '.join(table.column_names)}); expected {', '.join(need)}")
    block = 512

    def bad(mask, column, why):
        if mask.any():
            i = int(np.argmax(mask))
            raise ValueError(f"{path}: row {i + 1}, column {column}: {why}")

    t_ms = table.column("arrival_time_ms").to_numpy(zero_copy_only=False).astype(float)
    bad(~np.isfinite(t_ms) | (t_ms < 0), "arrival_time_ms", "not a time >= 0 (milliseconds from the start)")
    bad(np.r_[False, np.diff(t_ms) < 0], "arrival_time_ms", "earlier than the row before (rows must be in arrival order)")
    cols = {}
    for c in ("input_tokens", "output_tokens"):
        v = table.column(c).to_numpy(zero_copy_only=False).astype(float)
        bad(~np.isfinite(v) | (v < 1) | (v != np.round(v)), c, "not a whole number of tokens >= 1")
        cols[c] = v.astype(np.int64)
    hashes = table.column("hash_ids").to_pylist()
    blocks = np.array([len(h) if h is not None else 0 for h in hashes])
    bad((blocks * block < cols["input_tokens"]) | np.array([h is None or None in h for h in hashes]),
        "hash_ids", f"fewer hashes than {block}-token blocks of the prompt")
    df = pd.DataFrame({"arrival_time": t_ms / 1000.0, **cols, "hash_ids": hashes})
    df.attrs["block_tokens"] = block
    df.attrs["source"] = MOONCAKE_SOURCE
    return df


# --------------------------------------------------------------------------------------------
# The capacity plan's inputs
# --------------------------------------------------------------------------------------------
#: Sample sweeps matching the models of the sample request logs.
SAMPLE_SWEEP_FOR_MODEL = {"chat": "illustrative_chat", "chat-70b": "llama70b_h100_tp4_chat",
                          "chat-8b": "llama8b_h100_chat"}

#: How a plan names the sample request logs.
SAMPLE_REQUESTS_LABEL = "sample request log (data/requests)"
SAMPLE_GATEWAY_LABEL = "sample gateway (data/gateway)"


def _is_file(log, rel: Path) -> bool:
    """True when ``log`` was read from the sample file ``rel`` (relative to the data folder)."""
    try:
        return Path(str(getattr(log, "path", ""))).resolve() == data_path(*rel.parts).resolve()
    except (OSError, ValueError):
        return False


def _is_sample_log(log) -> bool:
    """True when ``log`` was read from the book's four-week sample request log."""
    return _is_file(log, Path(*SAMPLE_REQUESTS))


def plan_log(log=None, history=None, history_label: str | None = None):
    """The request log as the plan reads it, summed once (:class:`capbook.logs.aggregates.LogAggregates`).

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates, optional
        Default: ``CAPBOOK_REQUESTS`` when set, else the sample gateway (:func:`load_gateway`).
    history : str, pathlib.Path or pandas.DataFrame, optional
        Hourly history for the forecast (see :meth:`capbook.logs.aggregates.LogAggregates.of`). Default:
        ``CAPBOOK_HISTORY`` with the reader's log; the gateway's 26 weeks with its log.
    history_label : str, optional
        How the plan names a history given as a frame (default: its path, or "hourly history").
    """
    if isinstance(log, LogAggregates):
        return LogAggregates.of(log, history=history)
    label = None
    if log is None:
        if requests_path() is not None:
            log = load_requests()
            history = history if history is not None else history_path()
        else:
            log = load_gateway()
    if _is_file(log, GATEWAY_LOG):
        label = SAMPLE_GATEWAY_LABEL
        if history is None:
            history, history_label = data_path(*GATEWAY_HISTORY.parts), f"data/{GATEWAY_HISTORY.as_posix()}"
    elif _is_sample_log(log):
        label = SAMPLE_REQUESTS_LABEL
    return LogAggregates.of(log, label=label, history=history, history_label=history_label)


@dataclass(frozen=True, eq=False)
class PlanInputs:
    """What :func:`capbook.plan.steps.capacity_plan` plans from, chosen by :func:`plan_inputs`.

    Attributes
    ----------
    log : capbook.logs.aggregates.LogAggregates
    sweep : capbook.sweeps.sweep.Sweep
    sweep_label : str
        How the plan names the sweep.
    notes : tuple of str
        How the inputs were chosen, when the reader should know (a stand-in sweep).
    model : str or None
        The model the sweep was chosen for (None: the plan's default).
    """

    log: object
    sweep: object
    sweep_label: str
    notes: tuple = ()
    model: str | None = None

    @property
    def arguments(self) -> dict:
        """Keyword arguments for :func:`capbook.plan.steps.capacity_plan`:
        ``capacity_plan(**inputs.arguments, slo=...)``."""
        kw = {"log": self.log, "sweep": self.sweep, "sweep_label": self.sweep_label, "input_notes": self.notes}
        if self.model is not None:
            kw["model"] = self.model
        return kw


def plan_inputs(log=None, sweep=None, *, model: str | None = None, history=None,
                history_label: str | None = None) -> PlanInputs:
    """The request log and sweep a capacity plan is built from, with the book's defaults.

    * the log: ``log``, else ``CAPBOOK_REQUESTS``, else the sample gateway (:func:`plan_log`);
    * the forecast's history: ``history``, else ``CAPBOOK_HISTORY`` with the reader's log, the
      gateway's 26 weeks with the gateway, else the log's own hours;
    * the sweep: ``sweep``, else ``CAPBOOK_SWEEP``; else, for a sample log, the sample sweep
      of the model (:data:`SAMPLE_SWEEP_FOR_MODEL`; the model is ``model`` or the plan's
      default, :func:`capbook.plan.steps.select_traffic`); else the book's illustrative sweep,
      with a note that it stands in for the reader's deployment.

    Parameters
    ----------
    log : capbook.logs.requestlog.RequestLog or capbook.logs.aggregates.LogAggregates, optional
    sweep : capbook.sweeps.sweep.Sweep, optional
    model : str, optional
        Model to plan; passed on to the plan.
    history : str, pathlib.Path or pandas.DataFrame, optional
        Hourly history for the forecast (:meth:`capbook.logs.aggregates.LogAggregates.of`).
    history_label : str, optional
        How the plan names it (see :func:`plan_log`).

    Returns
    -------
    PlanInputs

    Examples
    --------
    On the sample data (no ``CAPBOOK_REQUESTS`` or ``CAPBOOK_SWEEP`` set):

    >>> plan_inputs().sweep_label
    'sample sweep illustrative_chat (modelled, not measured)'
    """
    sums = plan_log(log, history, history_label)
    notes: tuple = ()
    if sweep is not None:
        label = getattr(sweep, "name", None) or "sweep"
    elif sweep_path() is not None:
        sweep, label = load_sweep(), str(sweep_path())
    else:
        chosen = None
        if sums.label in (SAMPLE_REQUESTS_LABEL, SAMPLE_GATEWAY_LABEL):
            chosen = model if model is not None else select_traffic(sums, None, None).model
        if chosen in SAMPLE_SWEEP_FOR_MODEL:
            name = SAMPLE_SWEEP_FOR_MODEL[chosen]
            sweep, label = load_sample_sweep(name), f"sample sweep {name} (modelled, not measured)"
        else:
            sweep, label = load_sweep(), "sample sweep illustrative_chat (modelled, not measured)"
            notes = ("no sweep given: the book's illustrative sample sweep (an 8B model on one "
                     "A100) stands in for your deployment; measure yours and pass it",)
    return PlanInputs(sums, sweep, label, notes, model)


# --------------------------------------------------------------------------------------------
# What a chapter reads from a reader's sweep, when the sweep cannot give all of it
# --------------------------------------------------------------------------------------------
def load_sweep_or_sample(name: str | None = None, *, min_levels: int = 1):
    """The book's sweep (:func:`load_sweep`), or the sample when the reader's has too few levels.

    A chapter that fits a curve through the sweep's levels needs ``min_levels`` of them; a
    reader's sweep with fewer (a single load level) cannot give it, so the chapter shows the
    method on the sample sweep and says why, rather than fail.

    Parameters
    ----------
    name : str, optional
        Sample sweep (:func:`capbook.sweeps.sweep.load_sample_sweep`); default the illustrative one.
    min_levels : int
        Load levels the chapter needs (>= 1).

    Returns
    -------
    (capbook.sweeps.sweep.Sweep, str or None)
        The sweep, and a sentence saying why it is the sample instead of the reader's (None
        when it is the reader's, or no reader sweep is configured).

    Examples
    --------
    >>> sweep, note = load_sweep_or_sample(min_levels=3)   # no CAPBOOK_SWEEP: the sample, no note
    >>> sweep.name, note
    ('illustrative_chat', None)
    """
    need = integer(min_levels, "min_levels", minimum=1)
    sweep = load_sweep(name)
    if sweep_path() is None or len(sweep.concurrency) >= need:
        return sweep, None
    n = len(sweep.concurrency)
    sample = load_sample_sweep(name) if name else load_sample_sweep()
    note = (f"Your sweep {sweep.name} has {n} load level{'s' if n != 1 else ''}; this chapter fits a curve "
            f"through at least {need}, so it shows the method on the sample sweep {sample.name} instead. "
            "Measure more load levels to see it on yours.")
    print(f"capbook: {note}")
    return sample, note


@dataclass(frozen=True)
class ObjectiveSlots:
    """The slots a chapter reads a sweep at, from the objectives (:func:`slots_at_objective`).

    Attributes
    ----------
    S : int
        Slots per replica (>= 1).
    q : int
        The TPOT percentile read (the objective's, or the one the sweep reports instead).
    choice : capbook.sweeps.sweep.SlotChoice
        :func:`capbook.sweeps.sweep.choose_slots`' answer (``S`` and ``level`` moved to the lowest
        level when no level meets the objective).
    met : bool
        False when no measured level meets the objective.
    notes : tuple of str
        Sentences for the reader: the percentile used instead of the objective's, the level
        used when none meets it.
    """

    S: int
    q: int
    choice: object
    met: bool
    notes: tuple = ()

    @property
    def text(self) -> str:
        """The notes as one paragraph (empty when there are none)."""
        return " ".join(n[0].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in self.notes)


def slots_at_objective(sweep, slo=None, *, margin: float = 0.10) -> ObjectiveSlots:
    """Slots per replica at the TPOT objective, as the plan chooses them, never failing on a valid sweep.

    The TPOT percentile is the objective's when the sweep reports it, else the one
    :meth:`capbook.sweeps.sweep.Sweep.percentile_for` picks (what ``capbook plan`` does); S is
    :func:`capbook.sweeps.sweep.choose_slots`' answer. When no measured level meets the objective the
    lowest level stands in, and a note says so: a chapter then shows its method at that level.

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep
    slo : capbook.slo.SLO, optional
        Default :func:`slo` (the module's function) with the book's 50 ms p95 TPOT.
    margin : float
        Share of the TPOT objective kept in reserve (as :func:`~capbook.sweeps.sweep.choose_slots`).

    Returns
    -------
    ObjectiveSlots

    Examples
    --------
    >>> from capbook.sweeps.sweep import load_sample_sweep
    >>> pick = slots_at_objective(load_sample_sweep())
    >>> pick.S, pick.q, pick.met, pick.notes
    (32, 95, True, ())
    >>> from capbook.plan.steps import SLO
    >>> strict = slots_at_objective(load_sample_sweep(), SLO(tpot_target_s=0.005))
    >>> strict.S, strict.met
    (1, False)
    """
    import dataclasses

    slo = slo if slo is not None else _book_slo()
    q, note = sweep.percentile_for("tpot", slo.tpot_percentile)
    notes = [note] if note else []
    choice = choose_slots(sweep, slo.tpot_target_s, q=q, margin=margin)
    met = choice.S > 0
    if not met:
        lowest = float(sweep.concurrency[0])
        choice = dataclasses.replace(choice, S=max(1, int(lowest)), level=lowest)
        notes.append(f"no measured level of sweep {sweep.name} meets p{q} TPOT ≤ "
                     f"{1000 * slo.tpot_target_s:g} ms less a {100 * margin:g} % margin ({choice.reason}); "
                     f"this page reads the sweep at its lowest level, {lowest:g}, to show the method: relax the "
                     "TPOT objective (--slo) or measure faster hardware")
    return ObjectiveSlots(int(choice.S), int(q), choice, met, tuple(notes))
