"""What every importer shares: the row of the sweep table, field access that names the file,
the refusals (``_Reject``, ``_Failed`` …), the consistency checks a load point gets
(TPOT against E2E and TTFT, completions against the offered rate), token-length quantiles, and a
per-request file summarised as one level.

The family modules (:mod:`.aiperf`, :mod:`.vllm_bench` …) import from here; nothing here
imports them."""
from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple

import numpy as np

from capbook.sweeps import perrequest
from capbook.sweeps.sweep import CONFIG_COLUMNS, METRIC_COLUMNS
from capbook.validation import is_number


_NAN = float("nan")
_EXTRA = ["load_kind", "concurrency_source", "request_rate_target", "failed_requests",
          "format", "source_file", "point", "saturated", "saturation_reason", "max_num_seqs",
          "config"]


class _Reject(ValueError):
    """A recognised file that holds no sweep point (aggregate, server metrics)."""


class _Failed(_Reject):
    """A recognised run in which no request completed: skipped inside a folder, an error alone."""


class _Unparsable(ValueError):
    """A file whose text is not valid JSON / JSON Lines (cut short, edited by hand)."""


class _Unrecognised(ValueError):
    """A readable file that is no load generator's output (a config, a README, another tool's file)."""


#: Open-loop point flagged saturated when its completion rate is below this share of what the
#: offered rate would give over the run (count / (count / rate + mean E2E)), or (inference-perf)
#: when the achieved send rate is below ``_SEND_SHARE`` of the requested rate.
_COMPLETION_SHARE = 0.80


#: reported TPOT and (E2E - TTFT)/(output - 1) may differ by this share before rescaling.
_TPOT_TOLERANCE = 0.20


def _err(path, msg) -> ValueError:
    return ValueError(f"{path}: {msg}")


def _get(d, keys, path, what=None):
    """Nested lookup; raises naming the file and the dotted field when absent."""
    cur = d
    for k in keys:
        if isinstance(cur, Mapping) and k in cur:
            cur = cur[k]
        elif isinstance(cur, list) and isinstance(k, int) and -len(cur) <= k < len(cur):
            cur = cur[k]
        else:
            field = ".".join(str(x) for x in keys)
            raise _err(path, f"missing field {field!r}" + (f" ({what})" if what else ""))
    return cur


def _num(v, path, field) -> float:
    if v is None:
        raise _err(path, f"field {field!r} is null")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise _err(path, f"field {field!r} is not a number: {v!r}") from None
    if not math.isfinite(x) or isinstance(v, bool):
        raise _err(path, f"field {field!r} is {v!r}, not a measurement (a finite number): fix the "
                         "file, or leave it out of the sweep")
    return x


def _opt(d, key, scale=1.0) -> float:
    v = d.get(key) if isinstance(d, Mapping) else None
    if v is None or v == "" or v == "-":
        return _NAN
    try:
        return float(v) * scale
    except (TypeError, ValueError):
        return _NAN


#: Engine limits read from the server command line or manifest beside the results (vLLM
#: flags); NaN (numbers) or None (the rest) when the files do not state them.
LIMIT_COLUMNS = ("chunked_prefill", "prefix_caching", "max_num_batched_tokens", "max_model_len",
                 "gpu_memory_utilization", "block_size", "kv_cache_dtype", "quantization",
                 "num_speculative_tokens", "speculative_method", "engine_v1")
_NUMERIC_LIMITS = ("max_num_batched_tokens", "max_model_len", "gpu_memory_utilization", "block_size",
                   "num_speculative_tokens")
#: Per-point token-length quantiles (tokens per request), NaN where the file does not record one.
_TOKEN_QUANTILES = ("min", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "max")
_INPUT_QUANTILES = ("p50", "p99")
TOKEN_COLUMNS = [f"output_tokens_{q}" for q in _TOKEN_QUANTILES] + \
    [f"input_tokens_{q}" for q in _INPUT_QUANTILES]


def _row(**kw) -> dict:
    base = {c: _NAN for c in METRIC_COLUMNS}
    base.update({c: None for c in CONFIG_COLUMNS})
    base.update({c: None for c in _EXTRA})
    base.update({c: _NAN if c in _NUMERIC_LIMITS else None for c in LIMIT_COLUMNS})
    base.update({c: _NAN for c in TOKEN_COLUMNS})
    base.update(saturated=False, max_num_seqs=_NAN, mean_e2e_s=_NAN, mean_ttft_s=_NAN,
                offered_rps=_NAN)
    base.update(kw)
    return base


# -- TPOT consistency ------------------------------------------------------------------------------
def _tpot_check(row: dict, *, e2e, ttft, out, reported, what: str) -> None:
    """Compare the tool's TPOT with (mean E2E - mean TTFT) / (mean output - 1); rescale if off.

    Stores ``mean_e2e_s``, ``mean_ttft_s``, ``tpot_reported_mean_s``, ``tpot_derived_mean_s``
    and ``tpot_rescale`` (derived / reported; 1 when they agree within 20 %).
    """
    row["mean_e2e_s"], row["mean_ttft_s"] = e2e, ttft
    vals = [e2e, ttft, out, reported]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
        return
    if out <= 1 or e2e <= ttft or reported <= 0:
        return
    derived = (e2e - ttft) / (out - 1)
    ratio = derived / reported
    row["tpot_reported_mean_s"], row["tpot_derived_mean_s"] = float(reported), float(derived)
    row["tpot_rescale"] = 1.0
    if abs(ratio - 1) <= _TPOT_TOLERANCE:
        return
    row["tpot_rescale"] = float(ratio)
    row["tpot_reported_p50_s"] = row["tpot_p50_s"]
    for c in ("tpot_p50_s", "tpot_p95_s", "tpot_p99_s"):
        row[c] = row[c] * ratio
    note = (f"{row.get('format') or 'the tool'}: {what} disagrees with (mean E2E − mean TTFT) / "
            "(mean output − 1) by more than 20 %; the TPOT columns use the consistent one: the "
            "tool's percentiles rescaled by derived / reported (both kept in columns "
            "tpot_reported_mean_s and tpot_derived_mean_s)")
    prev = row.get("tpot_note")
    row["tpot_note"] = f"{prev}; {note}" if isinstance(prev, str) and prev else note


def _completion_check(row: dict, *, rate, count, e2e) -> None:
    """Open loop: saturated when completions fall far below what the offered rate gives."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (rate, count, e2e)):
        return
    expect = count / (count / rate + e2e)
    got = row["request_throughput_rps"]
    if math.isfinite(got) and got < _COMPLETION_SHARE * expect:
        _saturate(row, f"completed {got:.3g} req/s, {got / expect:.0%} of the {expect:.3g} req/s "
                       f"the requested {rate:g} req/s would give")


def _with_reason(prev, why: str) -> str:
    """A saturation reason added to the ones a point already has."""
    return f"{prev}; {why}" if isinstance(prev, str) and prev else why


def _saturate(row: dict, why: str) -> None:
    row["saturated"] = True
    row["saturation_reason"] = _with_reason(row.get("saturation_reason"), why)


# -- token-length quantiles -----------------------------------------------------------------------
def _set_tokens(row: dict, out, inp, source: str) -> None:
    """Store a point's token-length quantiles: ``out`` / ``inp`` map min, p1 … p99, max to the
    tool's values (missing or not a number: NaN); ``source`` names the fields read."""
    for q in _TOKEN_QUANTILES:
        row[f"output_tokens_{q}"] = _opt(out, q)
    for q in _INPUT_QUANTILES:
        row[f"input_tokens_{q}"] = _opt(inp, q)
    if any(math.isfinite(row[c]) for c in TOKEN_COLUMNS):
        row["token_quantiles_source"] = source


def _array_quantiles(values) -> dict:
    """min, p1 … p99, max of per-request values (numpy's linear interpolation, as vLLM uses)."""
    v = np.asarray([x for x in values if _finite(x)], float)
    if not len(v):
        return {}
    out = {q: float(np.percentile(v, float(q[1:]))) for q in _TOKEN_QUANTILES if q.startswith("p")}
    out.update(min=float(v.min()), max=float(v.max()))
    return out


def _renamed(d, names: Mapping) -> dict:
    """``{capbook name: d[tool name]}`` for a stats dict whose keys differ only by ``names``."""
    if not isinstance(d, Mapping):
        return {}
    return {q: d.get(names.get(q, q)) for q in _TOKEN_QUANTILES}


class _Probe(NamedTuple):
    """What detection sees of a file: its parsed JSON (else None) or its CSV header and text."""

    json: Any = None
    header: tuple = ()
    text: str = ""


class _ReadOptions(NamedTuple):
    concurrency: Any = None
    skipped: list | None = None
    in_folder: bool = False


def _perrequest_row(summary: dict, fmt: str, note: str = "") -> dict:
    """A sweep-table row from :func:`capbook.sweeps.perrequest.summarise`'s values."""
    s = dict(summary)
    out, inp = s.pop("output_tokens"), s.pop("input_tokens")
    notes, sat = s.pop("notes"), s.pop("saturation")
    for k in ("e2e_p50_s", "e2e_p99_s", "in_flight_mean", "launch_rps"):
        s.pop(k, None)
    row = _row(**s, format=fmt)
    row["tpot_note"] = "; ".join(([note] if note else []) + notes) or None
    _set_tokens(row, _array_quantiles(out), _array_quantiles(inp), "per-request output and input tokens")
    for why in sat:
        _saturate(row, why)
    if row["load_kind"] == "rate":
        _completion_check(row, rate=row["offered_rps"], count=row["num_requests"], e2e=row["mean_e2e_s"])
    return row


def _summarise(req, path, **kw) -> dict:
    """:func:`capbook.sweeps.perrequest.summarise`, its refusals naming the file (no completed request:
    a failed run, skipped inside a folder)."""
    try:
        return perrequest.summarise(req, **kw)
    except ValueError as exc:
        if "no measurement" in str(exc):
            raise _Failed(f"{path}: {exc}") from None
        raise _err(path, str(exc)) from None


# -- what detectors test ---------------------------------------------------------------------------
def _is_map(d) -> bool:
    return isinstance(d, Mapping)


def _records(d) -> bool:
    """A non-empty JSON list of objects."""
    return isinstance(d, list) and bool(d) and all(isinstance(x, Mapping) for x in d)


def _finite(v) -> bool:
    """A finite number in a file's field (bool and text are not numbers, as everywhere)."""
    return is_number(v) and math.isfinite(float(v))
