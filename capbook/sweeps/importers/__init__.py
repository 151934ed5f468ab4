"""Read load-generator output into the sweep table (one entry point, format detected from content).

:func:`read_sweep` turns the files a load test left behind into a :class:`capbook.sweeps.sweep.Sweep`;
:func:`read_points` returns every load point it found as a flat table (use it to filter, then
build the sweep with :meth:`capbook.sweeps.sweep.Sweep.from_frame`). The format is detected from each file's content,
not its name:

================================  ==========================================================
format                            what is recognised
================================  ==========================================================
``aiperf`` / ``genai-perf``       ``profile_export*.json``: metrics as ``{unit, avg, p50, …}``
``aiperf-csv``                    ``profile_export_aiperf.csv`` (``Metric,avg,…`` blocks); the
                                  load point comes from the JSON export beside it
``vllm``                          ``benchmark_serving.py --save-result`` / ``vllm bench serve``
                                  JSON; JSONL from ``--append-result``; the ``vllm bench sweep``
                                  folder layout (``run=N.json``, ``summary.json``)
``sglang``                        SGLang ``bench_serving --output-file`` JSONL, one line per run
                                  (the older layout too: throughput from ``completed/duration``,
                                  TPOT from the median ITL; ``Infinity`` rates); each dataset is
                                  its own sweep; ``server_info`` gives the engine's limits
``guidellm``                      ``benchmarks.json`` (``benchmarks[].metrics``)
``guidellm-csv``                  a per-benchmark CSV with ``ttft_median_ms``, ``itl_median_ms``,
                                  ``concurrency_mean`` columns
``llmperf``                       ``*_summary.json`` (``results_ttft_s_quantiles_p50`` …) and
                                  the per-request ``*_individual_responses.json`` list
``llmperf-wrapped``               llmperf summaries in one JSON object keyed by concurrency
                                  (``{"1": {…}, "8": {…}}``, ``{"concurrency_8": …}``; flat or
                                  nested as llmperf builds them), one level per key
``lmbench``                       LMCache LMBench per-request CSVs (``prompt_tokens``,
                                  ``generation_tokens``, ``ttft``, ``generation_time``,
                                  ``launch_time``, ``finish_time``), one file per rate
``per-request``                   any per-request results CSV / JSON / JSONL whose columns
                                  :mod:`capbook.sweeps.perrequest` recognises (a TTFT, a latency or
                                  launch and finish times, the two token counts)
``inference-perf``                ``stage_N_lifecycle_metrics.json``
``inference-benchmarker``         huggingface/inference-benchmarker report (``results[]``)
``capbook``                       a CSV already in the sweep-table layout
================================  ==========================================================

**Per-request files** (llmperf's individual responses, LMBench, ``per-request``) are one load
point each, computed from the requests by :func:`capbook.sweeps.perrequest.summarise`: percentiles of
TTFT, TPOT ((latency − TTFT) / (output − 1)) and E2E; throughput = completed / span of the run;
an open-loop level (launch and finish times known) at the rate the file name states
(``…_output_0.7.csv``, ``…_qps_2.csv``) or, else, the launch rate, its concurrency by Little's
law on the requests' own intervals, and saturated when its TTFT grows through the run (a
backlog) or its launches fell short of the rate; with ``concurrency=`` a closed-loop level.

Units are normalised to seconds, tokens and requests per second. Percentiles a tool does not
report stay empty (NaN) in the table; :class:`~capbook.sweeps.sweep.Sweep` then raises when asked for
them. A file that is not what it claims, or lacks a needed field, raises :class:`ValueError`
naming the file and the field.

**Token lengths.** Where a tool records the per-point distribution of request lengths, the
table has ``output_tokens_min``, ``output_tokens_p1`` … ``output_tokens_p99``,
``output_tokens_max`` and ``input_tokens_p50``, ``input_tokens_p99`` (tokens per request; NaN
for a quantile the file lacks; ``token_quantiles_source`` names the fields read): inference-perf
``successes.output_len`` / ``prompt_len``; aiperf and genai-perf ``output_sequence_length`` /
``input_sequence_length`` (JSON and CSV); GuideLLM JSON ``output_token_count`` /
``prompt_token_count``; llmperf ``results_number_output_tokens_*``; and, computed from the
per-request records, vLLM ``output_lens`` / ``input_lens`` and llmperf's individual responses.
vLLM summaries without the arrays, GuideLLM CSVs and inference-benchmarker reports record only
means.

**Engine limits.** From the vLLM command line or Kubernetes manifest beside the results (see
:func:`read_points`): ``chunked_prefill``, ``prefix_caching`` (True / False when
``--enable-…`` / ``--no-enable-…`` is given), ``max_num_batched_tokens``, ``max_model_len``,
``gpu_memory_utilization``, ``block_size``, ``kv_cache_dtype``, ``quantization``,
``num_speculative_tokens`` and ``speculative_method`` (``--speculative-config`` JSON or
``--num-speculative-tokens``), ``engine_v1`` (the container's ``VLLM_USE_V1``). What the files do
not state stays NaN / None: the engine's defaults are not filled in.

Load points are either **closed loop** (``load_kind = "concurrency"``: the tool held N
requests in flight; ``concurrency`` is N) or **open loop** (``load_kind = "rate"``: the tool
sent requests at a rate). For open-loop points ``concurrency`` is the mean number in flight,
as the tool measured it (``concurrency_source = "measured"``) or, when it did not, by Little's
law, request throughput × mean request latency (``"littles_law"``).

**Layout.** One module per load-generator family defines that family's parsers and its
:class:`~capbook.formats.FileFormat` entries (``_FORMATS``): :mod:`.aiperf` (aiperf, genai-perf,
aiperf-csv), :mod:`.vllm_bench`, :mod:`.sglang`, :mod:`.guidellm` (guidellm, guidellm-csv),
:mod:`.llmperf` (llmperf, llmperf-wrapped, llmperf-requests), :mod:`.inference_perf`,
:mod:`.inference_benchmarker`, :mod:`.per_request` (lmbench, per-request) and :mod:`.capbook_csv`;
they share ``_common`` (the row, field access, refusals, consistency checks). The engine's
command line and manifests beside the results are read by :mod:`.engineflags`. This module is
the entry point: :data:`SWEEP_FORMATS` (the detection order), the folder walk, the configuration
grouping and selection, :func:`read_points` and :func:`read_sweep`. A new format is a new family
module (or an entry in one) and its name in :data:`SWEEP_FORMATS`' order.

Examples
--------
>>> from capbook.paths import data_path
>>> detect_sweep_format(data_path("sweeps", "illustrative_chat.csv"))
'capbook'
>>> float(read_sweep(data_path("sweeps", "illustrative_chat.csv")).concurrency.max())
64.0
"""
from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from capbook.formats import FileFormat
from capbook.sweeps import configurations as _cfgs
from capbook.sweeps import perrequest
from capbook.sweeps.importers import (
    aiperf, capbook_csv, guidellm, inference_benchmarker, inference_perf, llmperf, per_request, sglang,
    vllm_bench,
)
from capbook.sweeps.importers._common import (
    LIMIT_COLUMNS, TOKEN_COLUMNS, _EXTRA, _Failed, _NAN, _Probe, _ReadOptions, _Reject, _Unparsable,
    _Unrecognised, _err, _finite, _records, _with_reason,
)
from capbook.sweeps.importers.engineflags import _CTX_FIELDS, _SIDECAR_NAMES, _file_context
# read by capbook.engine.hardware and the tests through this module, as before the split
from capbook.sweeps.importers.engineflags import (  # noqa: F401
    _context_from_command_text, _context_from_manifest, _dir_context,
)
from capbook.sweeps.sweep import CONFIG_COLUMNS, METRIC_COLUMNS, Sweep
from capbook.validation import choice, integer, is_number, positive


__all__ = ["read_sweep", "read_points", "detect_sweep_format", "SWEEP_FORMATS", "LIMIT_COLUMNS",
           "TOKEN_COLUMNS"]


#: an open-loop point offered more than this multiple of the saturation rate is saturated too.
_OVER_SATURATION = 1.02
#: An open-loop level whose median TTFT exceeds this share of the time spent sending, and this
#: many times the quietest level's, queued without bound (a stable queue waits about a service time).
_BACKLOG_SHARE = 0.10
_BACKLOG_TIMES = 10.0


# -- detection -----------------------------------------------------------------------------------
def _json_error_at(exc: json.JSONDecodeError, text: str, line_offset: int = 0, char_offset: int = 0) -> str:
    """Where ``exc`` broke, as line, column and character offset of the whole file."""
    pos = char_offset + exc.pos
    where = (f"{exc.msg} at line {exc.lineno + line_offset}, column {exc.colno} (character {pos:,} "
             f"of {len(text):,})")
    if not text[pos:].strip():
        where += ": the text ends before the JSON is complete (the file was cut short, e.g. by a run " \
                 "that stopped while writing it or an interrupted copy)"
    return where


def _load_json_or_jsonl(path: Path, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        lines = text.splitlines(keepends=True)
        if sum(1 for ln in lines if ln.strip()) > 1:
            out, start = [], 0
            for i, ln in enumerate(lines):
                if ln.strip():
                    try:
                        out.append(json.loads(ln))
                    except json.JSONDecodeError as exc:
                        if not out:  # not JSON Lines either: report the document's error
                            break
                        raise _Unparsable(f"{path}: not valid JSON Lines: "
                                          + _json_error_at(exc, text, i, start)) from None
                start += len(ln)
            else:
                return out
        raise _Unparsable(f"{path}: not valid JSON: " + _json_error_at(first, text)) from None


def detect_sweep_format(path) -> str:
    """Name the load-generator format of one file from its content (see :data:`SWEEP_FORMATS`).

    Raises
    ------
    ValueError
        When the file is not one of the supported formats (the message names the file).
    """
    path = Path(path)
    return _detect_text(path, _read_text(path))[0]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"{path}: file does not exist") from None
    except UnicodeDecodeError:
        raise _err(path, "not a text file") from None
    except OSError as exc:  # permission denied, a broken link, a folder named *.json
        raise _err(path, f"cannot be read ({exc.strerror or exc})") from None


def _detect_text(path: Path, text: str) -> tuple[str, _Probe]:
    s = text.lstrip()
    first = s.splitlines()[0] if s else ""
    if s.startswith("{") or s.startswith("["):
        probe = _Probe(json=_load_json_or_jsonl(path, text))
    else:
        header = tuple(h.strip() for h in next(csv.reader([first]))) if first else ()
        probe = _Probe(header=header, text=text)
    kind = next((f.name for f in SWEEP_FORMATS.values() if f.detect(probe)), None)
    if kind is not None:
        return kind, probe
    supported = _supported()
    cols = (list(dict.fromkeys(k for r in probe.json[:50] for k in r)) if _records(probe.json)
            else list(probe.header) if probe.json is None else [])
    found = perrequest.match_columns(cols)
    if len(set(found) & {"ttft", "latency", "launch_time", "finish_time", "input_tokens",
                         "output_tokens", "generation_time"}) >= 2:  # per-request results, short of a column
        raise _Unrecognised(f"{path}: not a recognised load-generator output: "
                            f"{perrequest.missing_columns_message(found, cols, 'a sweep level')} "
                            f"(supported: {supported})")
    if probe.json is not None:
        obj = probe.json
        keys = list(obj)[:8] if isinstance(obj, Mapping) else f"a list of {len(obj)} items"
        raise _Unrecognised(f"{path}: JSON with top-level {keys} is not a recognised "
                            f"load-generator output (supported: {supported})")
    raise _Unrecognised(f"{path}: not a recognised load-generator output (first line {first[:80]!r}; "
                        f"supported: {supported})")


def _supported() -> str:
    """The formats :data:`SWEEP_FORMATS` reads, for a refusal."""
    return ", ".join(SWEEP_FORMATS)


def _without_supported(msg: str) -> str:
    """A refusal without its list of the formats read (said once for many files)."""
    return re.sub(r"; supported: [^)]*", "", re.sub(r" \(supported: [^)]*\)", "", msg))


#: What a load point's numbers must be, by sweep-table column: (lowest allowed, whether the lowest
#: is allowed, whether the column may be empty, what the column is). A value outside is an
#: error naming the file, the point and the column: never a point dropped or a silent NaN.
_POINT_RULES = {
    "concurrency": (0.0, False, False, "the load level"),
    "ttft_p50_s": (0.0, False, False, "seconds"), "tpot_p50_s": (0.0, False, False, "seconds per token"),
    "ttft_p95_s": (0.0, False, True, "seconds"), "ttft_p99_s": (0.0, False, True, "seconds"),
    "tpot_p95_s": (0.0, False, True, "seconds per token"), "tpot_p99_s": (0.0, False, True, "seconds per token"),
    "request_throughput_rps": (0.0, False, True, "requests per second"),
    "output_throughput_tps": (0.0, False, True, "tokens per second"),
    "mean_input_tokens": (0.0, False, False, "tokens"),
    "mean_output_tokens": (1.0, True, False, "tokens (every completed request has at least one)"),
    "num_requests": (0.0, False, True, "successful requests"),
    "failed_requests": (0.0, True, True, "requests"),
    "request_rate_target": (0.0, False, True, "requests per second"),
}
#: A median TPOT above this (seconds per token) is a value in milliseconds: 10 s per token is a
#: thousand times slower than any engine in the sweeps capbook was tested on (at most about 1 s).
_TPOT_MAX_S = 10.0


def _point_name(row: dict, i: int, n: int) -> str:
    """How an error names a load point: the file's line, the tool's point name, or its index."""
    if _finite(row.get("source_line")):
        return f"line {row['source_line']:g}"
    if isinstance(row.get("point"), str) and row["point"]:
        return f"point {row['point']}"
    return f"point {i + 1} of {n}" if n > 1 else ""


def _check_points(rows: list, path: Path) -> None:
    """Refuse a load point whose numbers cannot be a measurement (infinite, NaN where required,
    negative, zero where impossible, a TPOT in milliseconds), naming the file, point and column."""
    for i, r in enumerate(rows):
        where = _point_name(r, i, len(rows))
        where = f"{where}: column" if where else "column"
        for col, (lo, lo_ok, may_be_empty, unit) in _POINT_RULES.items():
            v = r.get(col)
            if v is None and may_be_empty:
                continue
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise _err(path, f"{where} {col!r} is {v!r}, not a number ({unit})") from None
            if math.isnan(x) and may_be_empty:
                continue
            if not math.isfinite(x):
                raise _err(path, f"{where} {col!r} is {v!r}, not a measurement ({unit}); the "
                                 "file records no usable value for this load point: fix the file, or "
                                 "remove the point (or the file) and read the sweep again")
            if x < lo or (x == lo and not lo_ok):
                raise _err(path, f"{where} {col!r} is {x:g}; {unit} must be "
                                 f"{'>=' if lo_ok else '>'} {lo:g} (a load point with "
                                 + ("no successful request holds no measurement"
                                    if col == "num_requests" else "this value was not measured")
                                 + "): fix the file, or remove the point and read the sweep again")
        if float(r["tpot_p50_s"]) > _TPOT_MAX_S:
            raise _err(path, f"{where} 'tpot_p50_s' is {float(r['tpot_p50_s']):g} s per token, "
                             f"over {_TPOT_MAX_S:g} s: a value in milliseconds where seconds are "
                             "expected? (a capbook sweep CSV holds seconds: divide its *_s columns "
                             "by 1000)")


def _rows_for_file(path: Path, concurrency=None, skipped=None, in_folder=False):
    if in_folder and path.name in _SIDECAR_NAMES:
        raise _Reject(f"{path}: {_SIDECAR_NAMES[path.name]}, read for the configuration columns "
                      "(gpu, engine, tensor_parallel), not as load points")
    kind, probe = _detect_text(path, _read_text(path))
    rows = SWEEP_FORMATS[kind].read(probe, path, _ReadOptions(concurrency, skipped, in_folder))
    _check_points(rows, path)
    for r in rows:
        r["source_file"] = str(path)
        _apply_recorded(r)
    return rows


#: Columns a recorded configuration key may fill when the row has no value for it.
_FILLABLE = set(CONFIG_COLUMNS) | set(LIMIT_COLUMNS) | {"max_num_seqs", "num_gpus"}


def _apply_recorded(row: dict) -> None:
    """Move a row's recorded configuration keys (``_cfg``) into its columns: a known column is
    filled where empty; a key that would overwrite a measurement or bookkeeping column is kept as
    ``metadata_<key>``; ``_keys`` lists the keys that tell configurations apart."""
    cfg = row.pop("_cfg", None) or {}
    keys = []
    for k, v in cfg.items():
        col = k if (k in _FILLABLE or k not in row) else f"metadata_{k}"
        if col in _FILLABLE:
            cur = row.get(col)
            if cur is None or (isinstance(cur, float) and math.isnan(cur)):
                row[col] = v
        else:
            row[col] = v
        if not _cfgs.is_bookkeeping(k, v):
            keys.append(col)
    row["_keys"] = tuple(keys)


#: The families, one module each; each lists its formats in ``_FORMATS``.
_FAMILIES = (aiperf, capbook_csv, guidellm, inference_benchmarker, inference_perf, llmperf, per_request,
             sglang, vllm_bench)
_BY_NAME = {f.name: f for family in _FAMILIES for f in family._FORMATS}
#: The load-generator formats :func:`read_sweep` reads, by name, in the order
#: :func:`detect_sweep_format` tries them (``detect`` sees a file's parsed JSON or CSV header;
#: ``read(probe, path, options)`` returns its load points as rows).
SWEEP_FORMATS: dict[str, FileFormat] = {name: _BY_NAME[name] for name in (
    "guidellm", "inference-benchmarker", "inference-perf", "llmperf", "llmperf-wrapped", "aiperf", "genai-perf",
    "sglang", "vllm", "llmperf-requests", "aiperf-csv", "guidellm-csv", "capbook", "lmbench", "per-request",
)}
assert set(SWEEP_FORMATS) == set(_BY_NAME), "a family's format is missing from the detection order"


_DATA_SUFFIXES = {".json", ".jsonl", ".csv"}


def _expand(paths) -> list[Path]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in _DATA_SUFFIXES)
            if not found:
                raise ValueError(f"{p}: folder holds no .json, .jsonl or .csv files (the load-generator "
                                 f"outputs capbook reads: {_supported()})")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise ValueError(f"{p}: file does not exist")
    if not out:
        raise ValueError("no input files given")
    return out


def _fill_context(rows: list, max_num_seqs, cache: dict) -> None:
    """Fill engine fields from files beside the results; max_num_seqs by priority."""
    for r in rows:
        if r.get("format") == "capbook":
            continue
        ctx = _file_context(Path(r["source_file"]), cache)
        srcs = ctx.get("_sources", {})
        used = set()
        for k in (f for f in _CTX_FIELDS if f != "max_num_seqs"):
            if ctx.get(k) is not None and (r.get(k) is None or (isinstance(r.get(k), float) and math.isnan(r[k]))):
                r[k] = ctx[k]
                used.add(srcs.get(k))
        # max_num_seqs: the keyword, then a command line / manifest beside the results, then the
        # result file's own field (vllm bench sweep)
        if max_num_seqs is not None:
            r["max_num_seqs"], r["max_num_seqs_source"] = float(max_num_seqs), "max_num_seqs="
        elif ctx.get("max_num_seqs") is not None:
            r["max_num_seqs"], r["max_num_seqs_source"] = float(ctx["max_num_seqs"]), srcs.get("max_num_seqs")
            used.add(srcs.get("max_num_seqs"))
        elif _finite(r.get("max_num_seqs")):
            r["max_num_seqs"], r["max_num_seqs_source"] = float(r["max_num_seqs"]), "result file"
        else:
            r["max_num_seqs"] = _NAN
        # workload keys of an options file beside the results (dataset, lengths): configuration
        for k, v in ctx.items():
            if k.startswith("workload:"):
                col = k.split(":", 1)[1]
                if r.get(col) is None or (isinstance(r.get(col), float) and math.isnan(r[col])):
                    r[col] = v
                    r["_keys"] = tuple(r.get("_keys", ())) + (col,)
                    used.add(srcs.get(k))
        used.discard(None)
        r["engine_config_source"] = "; ".join(sorted(used)) if used else None
        r["_config_dir"] = str(Path(sorted(used)[0]).parent) if used else None


def _strip_mns(args) -> str:
    if not isinstance(args, str):
        return ""
    return " ".join(t for t in args.split() if not t.startswith("--max-num-seqs"))


def _key_value(v):
    """A recorded value as compared between points: None when not recorded, numbers as floats
    (``"128"`` and 128 are one value), text as text."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if is_number(v):
        return float(v) if not math.isnan(float(v)) else None
    if isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            return v
        return x if math.isfinite(x) else v   # "nan" / "inf" as written: text, equal to itself
    return str(v)


def _group_configs(df: pd.DataFrame, keys=None) -> pd.Series:
    """A configuration id per point: every key the files record about model, hardware, engine,
    deployment and workload (``keys``; by default the fixed ones) must be equal within one."""
    keys = list(keys) if keys is not None else ["model", "gpu", "tensor_parallel", "engine", "precision",
                                                 "workload", "max_num_seqs", "engine_args"]
    mns = pd.to_numeric(df["max_num_seqs"], errors="coerce")
    closed = df["load_kind"] == "concurrency"
    tied = False
    both = closed & mns.notna()
    if both.sum() >= 2 and mns[both].nunique() > 1:
        # a sweep that sets max_num_seqs to each level's concurrency is one sweep
        tied = bool(np.allclose(mns[both].to_numpy(float), df.loc[both, "concurrency"].to_numpy(float)))

    def key(i):
        r = df.loc[i]
        vals = []
        for c in keys:
            if c == "max_num_seqs":
                vals.append(None if tied or not _finite(mns.loc[i]) else float(mns.loc[i]))
            elif c == "engine_args":
                vals.append(_strip_mns(r.get("engine_args")))
            else:
                vals.append(_key_value(r.get(c)))
        return tuple(vals)
    keys = [key(i) for i in df.index]
    ids = {k: n for n, k in enumerate(dict.fromkeys(keys))}
    return pd.Series([ids[k] for k in keys], index=df.index)


def _config_labels(df: pd.DataFrame, gid: pd.Series, keys=()) -> dict:
    import os

    groups = {g: df.index[gid == g] for g in dict.fromkeys(gid.tolist())}
    where = {}

    def config_dir(i):  # None when the point's folder names no configuration (NaN in a mixed frame)
        d = df.at[i, "_config_dir"] if "_config_dir" in df else None
        return d if isinstance(d, (str, Path)) else None

    for g, idx in groups.items():
        dirs = {config_dir(i) for i in idx}
        if len(dirs) == 1 and None not in dirs:
            where[g] = Path(dirs.pop())
        else:
            where[g] = Path(os.path.commonpath([str(Path(df.at[i, "source_file"]).parent) for i in idx]))
    if len(groups) == 1:
        g = next(iter(groups))
        dirs = {config_dir(i) for i in groups[g]}
        return {g: Path(dirs.pop()).name if len(dirs) == 1 and None not in dirs else None}
    names = {g: p.name for g, p in where.items()}
    if len(set(names.values())) == len(names):
        return names
    try:
        common = Path(os.path.commonpath([str(p) for p in where.values()]))
        rel = {g: list(p.relative_to(common).parts) for g, p in where.items()}
        while all(len(v) > 1 for v in rel.values()) and len({v[-1] for v in rel.values()}) == 1:
            for v in rel.values():
                v.pop()
        labels = {g: "/".join(v) for g, v in rel.items()}
        if all(labels.values()) and len(set(labels.values())) == len(labels):
            return labels
    except ValueError:
        pass
    stems = {g: "+".join(sorted({Path(df.at[i, "source_file"]).stem for i in idx})) for g, idx in groups.items()}
    if len(set(stems.values())) == len(stems) and all(len(v) <= 80 for v in stems.values()):
        return stems
    # groups within one file: name them by the first field that differs
    for c in dict.fromkeys(("max_num_seqs", "model", "gpu", "tensor_parallel", "engine", "precision",
                            "workload") + tuple(k for k in keys if k != "engine_args")):
        if c in df:
            vals = {g: df.at[idx[0], c] for g, idx in groups.items()}
            txt = {g: _values_txt([v]) .strip("'") for g, v in vals.items()}
            if len(set(txt.values())) == len(txt):
                return {g: f"{c} {t}" for g, t in txt.items()}
    # no one field tells them apart: join the fields that do, each added only when it splits more
    parts: dict = {g: [] for g in groups}
    for c in dict.fromkeys(("max_num_seqs", "model", "params_b", "gpu", "tensor_parallel", "engine",
                            "precision", "workload") + tuple(k for k in keys if k != "engine_args")):
        if c not in df:
            continue
        txt = {g: _values_txt([df.at[idx[0], c]]).strip("'") for g, idx in groups.items()}
        before = len({tuple(v) for v in parts.values()})
        if len({(tuple(parts[g]), txt[g]) for g in groups}) > before:
            for g in groups:
                parts[g].append(f"{c} {txt[g]}")
        if len({tuple(v) for v in parts.values()}) == len(groups):
            return {g: ", ".join(v) for g, v in parts.items()}
    return {g: f"config{n + 1}" for n, g in enumerate(groups)}


_OPEN = ("rate", "throughput", "burst")


def _open_loop_levels(df: pd.DataFrame, gid: pd.Series) -> None:
    """Open-loop points: concurrency becomes the engine's running sequences (see read_points)."""
    for g in dict.fromkeys(gid.tolist()):
        grp = df.index[(gid == g) & (df["format"] != "capbook")]
        if not len(grp):
            continue
        ttft = pd.to_numeric(df.loc[grp, "mean_ttft_s"], errors="coerce")
        base = float(ttft.min()) if ttft.notna().any() else _NAN
        opn = [i for i in grp if df.at[i, "load_kind"] in _OPEN]
        capped = []
        for i in opn:
            L = float(df.at[i, "concurrency"])
            X = float(df.at[i, "request_throughput_rps"])
            src = df.at[i, "concurrency_source"]
            df.at[i, "in_system"] = L
            t = df.at[i, "mean_ttft_s"]
            running = L
            if _finite(t) and math.isfinite(base) and math.isfinite(X):
                wq = max(0.0, float(t) - base)
                df.at[i, "ttft_base_s"], df.at[i, "queue_wait_s"] = base, wq
                if L - X * wq > 0:
                    running = L - X * wq
                    src = f"{src}_running"
            m = df.at[i, "max_num_seqs"]
            if _finite(m) and running > float(m):
                running, src = float(m), "max_num_seqs"
                if not df.at[i, "saturated"]:
                    capped.append(i)
            df.at[i, "concurrency"], df.at[i, "concurrency_source"] = running, src
        # several unsaturated points with the engine full: the first is a level, the rest add
        # nothing but queue (and one level per concurrency is required)
        capped.sort(key=lambda i: (df.at[i, "offered_rps"] if _finite(df.at[i, "offered_rps"]) else math.inf))
        for i in capped[1:]:
            _saturate_df(df, i, f"the engine already ran max_num_seqs {df.at[i, 'max_num_seqs']:g} "
                                "sequences at a lower offered rate; the rest queue")
        # closed loop above the engine's limit: the engine runs max_num_seqs, the rest queue
        for i in grp:
            m = df.at[i, "max_num_seqs"]
            if df.at[i, "load_kind"] == "concurrency" and _finite(m) and df.at[i, "concurrency"] > float(m):
                _saturate_df(df, i, f"concurrency {df.at[i, 'concurrency']:g} exceeds the engine's "
                                    f"max_num_seqs {float(m):g}: the engine ran {float(m):g}, the rest queued")
        # a backlog that grew through the run: the median request waited for its first token a
        # sizeable share of the time the client spent sending (a stable queue waits about a
        # service time), far above the configuration's quiet TTFT
        p50 = pd.to_numeric(df.loc[grp, "ttft_p50_s"], errors="coerce")
        quiet = float(p50.min()) if p50.notna().any() else _NAN
        for i in opn:
            t, n, off = df.at[i, "ttft_p50_s"], df.at[i, "num_requests"], df.at[i, "offered_rps"]
            if df.at[i, "saturated"] or not all(_finite(v) and float(v) > 0 for v in (t, n, off)) \
                    or not math.isfinite(quiet):
                continue
            sending = float(n) / float(off)
            if float(t) > _BACKLOG_SHARE * sending and float(t) > _BACKLOG_TIMES * quiet:
                _saturate_df(df, i, f"backlog: the median TTFT, {float(t):.3g} s, is "
                                    f"{float(t) / sending:.0%} of the {sending:.3g} s the client spent "
                                    f"sending and {float(t) / quiet:.0f}× the quietest level's "
                                    f"{quiet:.3g} s: the queue grew through the run")
        # an open-loop point offered more than the engine completed when saturated is saturated
        sat = [i for i in opn if df.at[i, "saturated"]]
        if sat:
            top = float(pd.to_numeric(df.loc[sat, "request_throughput_rps"], errors="coerce").max())
            for i in opn:
                off = df.at[i, "offered_rps"]
                if not df.at[i, "saturated"] and _finite(off) and float(off) > _OVER_SATURATION * top:
                    _saturate_df(df, i, f"offered {float(off):.4g} req/s exceeds the {top:.4g} req/s the "
                                        "engine completed at saturation")


def _saturate_df(df, i, why) -> None:
    df.at[i, "saturated"] = True
    df.at[i, "saturation_reason"] = _with_reason(df.at[i, "saturation_reason"], why)


#: File names of the results of the formats capbook reads: such a file that cannot be read is an
#: error inside a folder too, not a skipped side file.
_RESULT_NAMES = re.compile(r"profile_export|_lifecycle_metrics\.json$|^benchmarks?\.(json|ya?ml|csv)$|"
                           r"_summary\.json$|_individual_responses\.json$|^run=\d+\.json$", re.I)
#: File names of the summaries (one load point each) of the formats capbook reads: such a file
#: that parses but holds no load point is an error too.
_SUMMARY_NAMES = re.compile(r"^profile_export_(aiperf|genai_perf)\.(json|csv)$|_lifecycle_metrics\.json$|"
                            r"^benchmarks?\.(json|ya?ml|csv)$|_summary\.json$|^run=\d+\.json$", re.I)
#: Words of a result file's content: a broken JSON file that holds one is taken for a result.
_RESULT_WORDS = re.compile(r"ttft|time_to_first_token|tpot|inter_token|latency|throughput|request_rate|"
                           r"concurrency|load_summary|benchmarks|completed|request_count|successes", re.I)


def _looks_like_result(path: Path, exc: ValueError) -> bool:
    """Whether a file :func:`read_points` cannot parse inside a folder looks like a result file: by
    its name, or by the words of its partial content (a result field, or no key at all before the
    break). A file that parses but holds no load point is never one (it is skipped with a note)."""
    if not isinstance(exc, _Unparsable):
        # a whole file that holds no load point is skipped with a note, unless it bears the very
        # name of a supported tool's summary (then its layout changed, and a level would be lost);
        # per-request exports (genai-perf's profile_export.json, AIPerf's profile_export.jsonl,
        # llmperf's *_individual_responses.json) are not summaries
        return bool(_SUMMARY_NAMES.search(path.name))
    if _RESULT_NAMES.search(path.name):
        return True
    try:
        head = path.read_text(encoding="utf-8-sig", errors="replace")[:200_000]
    except OSError:
        return True
    # too little left to tell (no key before the break): taken for a result, not skipped
    return bool(_RESULT_WORDS.search(head)) or not re.search(r'"[^"\\]{1,200}"\s*:', head)


def _skipped_note(skipped: list) -> str | None:
    """One note for :attr:`capbook.sweeps.sweep.Sweep.notes` on the files passed over (failed runs have
    their own): how many, why, and a few of their names."""
    import os

    kept = [(f, why) for f, why in skipped if not why.startswith(("failed run", "same point as"))]
    if not kept:
        return None
    files = [f for f, _ in kept]
    base = os.path.commonpath(files) if len(set(files)) > 1 else str(Path(files[0]).parent)
    groups: dict = {}
    for f, why in kept:
        why = why[len(f) + 2:] if why.startswith(f + ": ") else why
        why = _without_supported(why)
        groups.setdefault(why, []).append(os.path.relpath(f, base))
    parts = []
    for why, names in list(groups.items())[:6]:
        shown = ", ".join(names[:2]) + (f", and {len(names) - 2} more" if len(names) > 2 else "")
        parts.append(f"{len(names)} × {why} ({shown})")
    more = f"; {len(groups) - 6} other reasons" if len(groups) > 6 else ""
    n = sum(map(len, groups.values()))
    return (f"{n} file{'s' if n > 1 else ''} skipped as not load points (each with its reason in "
            "sweep.skipped): " + "; ".join(parts) + more)


def read_points(path_or_paths, *, concurrency=None, max_num_seqs=None) -> pd.DataFrame:
    """Read every load point from files or folders into one flat table.

    Parameters
    ----------
    path_or_paths : str, Path or iterable of them
        Files, or folders searched recursively for ``.json``, ``.jsonl`` and ``.csv`` files.
    concurrency : float, optional
        The load point for formats that do not record it (a lone aiperf CSV, a per-request
        llmperf file).
    max_num_seqs : int, optional
        The engine's limit on running sequences (vLLM ``--max-num-seqs``). Default: what the
        files record, in this order: a ``vllm_command.txt`` or ``*.commands`` file, a Kubernetes
        manifest (``*.yaml`` with ``containers:``) in the result's folder, its parent or
        grandparent, then the result file's own field (``vllm bench sweep``'s ``max_num_seqs``).

    Returns
    -------
    pandas.DataFrame
        The sweep-table columns, the configuration columns, and ``load_kind``,
        ``concurrency_source``, ``request_rate_target``, ``failed_requests``, ``format``,
        ``source_file``, ``point``, ``saturated``, ``saturation_reason``, ``max_num_seqs``,
        ``config`` (plus, where the files allow, ``run_number``, ``in_system``,
        ``queue_wait_s``, ``mean_e2e_s``, ``mean_ttft_s``, ``offered_rps``, ``engine_args``,
        ``num_gpus``, ``engine_config_source``, ``tpot_reported_mean_s``,
        ``tpot_derived_mean_s``, ``tpot_rescale``, ``token_quantiles_source``, ``source_line``: the
        line of a CSV row). Every row has
        the engine-limit columns :data:`LIMIT_COLUMNS` and the token-length columns
        :data:`TOKEN_COLUMNS` (NaN / None when the files do not state them; see the module
        notes); ``engine_config_source`` names the files the engine fields came from.
        ``df.attrs["skipped"]`` lists files (or points inside a file) that were not load points
        and why (READMEs, configs, aggregates, server-side metrics, failed runs);
        ``df.attrs["notes"]`` the failed runs skipped and a summary of the other skipped files.
        Inside a folder, only files that are not results are skipped: a file named like a
        result of a supported format, or a JSON file that does not parse and mentions result
        fields (a file cut short), raises instead, since skipping it would drop a load point.
        Every load point's numbers are checked: an infinite or NaN value where one is needed, a
        negative or zero time, level, rate or count, and a median TPOT above 10 s per token (a
        value in milliseconds) raise, naming the file, the point (or CSV line) and the column.

    Notes
    -----
    **Open-loop levels.** A request-rate point's ``concurrency`` is the sequences the engine
    ran, not the requests in the system: requests in the system (the tool's measured mean in
    flight, AIPerf's ``effective_concurrency``, or Little's law, completions × mean E2E) less
    those queued inside the engine, estimated by Little's law on the queue as completions ×
    (mean TTFT − the configuration's lowest mean TTFT), and at most ``max_num_seqs``.
    ``concurrency_source`` says which: ``littles_law`` / ``measured`` (no queue estimate
    possible), ``littles_law_running`` / ``measured_running`` (queue removed),
    ``max_num_seqs`` (capped at the engine's limit); ``in_system`` and ``queue_wait_s`` keep
    the parts.

    **Saturated points** (``saturated`` True, with ``saturation_reason``) are points the client
    could not drive or where the offered rate exceeded what the engine completed: inference-perf
    stages whose achieved send rate is below 95 % of the requested rate or whose mean schedule
    delay exceeds 1 s; open-loop points completing below 80 % of what the offered rate would
    give over the run; rate ``inf`` / GuideLLM ``throughput`` bursts; open-loop points offered
    more than 1.02 × the highest completion rate of a saturated point of the same
    configuration; open-loop points whose median TTFT exceeds 10 % of the time the client spent
    sending (requests / offered rate) and 10 × the configuration's quietest median TTFT (a
    backlog that grew through the run); closed-loop points above ``max_num_seqs``. :class:`~capbook.sweeps.sweep.Sweep`
    keeps them out of the levels.

    **TPOT.** When a tool's mean TPOT differs from (mean E2E − mean TTFT) / (mean output − 1)
    by more than 20 %, the TPOT percentiles are rescaled by derived / reported and
    ``tpot_note`` says so (inference-perf before its fix #410 reports half the per-token time).

    **Configurations.** Points are one configuration only when every configuration key their
    files record is equal (:mod:`capbook.sweeps.configurations`): model, gpu, num_gpus,
    tensor_parallel, pipeline_parallel, engine, precision, max_num_seqs, engine flags and
    limits, replicas and prefill/decode pools, dataset, input and output length settings,
    burstiness, a rate-limited run's max_concurrency, the vLLM ``label`` and every vLLM
    ``--metadata`` key (a column of its own: ``deployment``; ``metadata_<key>`` when the name is
    a column already), SGLang ``server_info`` (``max_running_requests`` is ``max_num_seqs``,
    ``chunked_prefill_size`` ``max_num_batched_tokens``, ``tp_size`` ``tensor_parallel``,
    ``mem_fraction_static`` ``gpu_memory_utilization`` …), and what the names of the result's
    folder, its parent and the file state (``A100``, ``4xNVIDIA_L40S`` — four GPUs named
    NVIDIA_L40S —, ``1p1d``, ``vllm-3replicas``, ``tp8``); names that are load levels,
    timestamps, run numbers or host names are not keys, and a folder-name key counts only when
    every sibling folder states it too. Points that differ get different ``config`` labels (the
    folder that tells them apart); ``df.attrs["config_keys"]`` lists the keys; select with
    ``where={'config': ...}`` or on any key in :func:`read_sweep`.

    **Length settings the files do not record** are read from the measured means: within a
    group of points no recorded key tells apart, the clean points (no failed request, not
    saturated) are cut where mean input (output) tokens per request jump by more than 10 %;
    when every piece is within 2 % (a random dataset's fixed lengths) and the pieces are backed
    by two points each or by runs at one load level, each piece is a setting, ``input_len``
    (``output_len``) its rounded mean. Looser lengths (conversations, traces, whose lengths move
    with the load) record nothing and never split a sweep.

    **Fleet-level results.** Points that measured N plain replicas behind one router
    (``replicas`` N, ``decode_replicas`` N with no prefill pool, SGLang ``dp_size`` N without DP
    attention, a ``vllm-3replicas`` folder) are divided into one replica's: request and token
    throughputs, offered rates and concurrency / N, latencies unchanged (``fleet_replicas`` is
    N, ``fleet_basis`` the keys that said so, and the sweep's notes say so); this assumes the
    router spread requests evenly. Prefill/decode
    pools (``prefill_replicas`` and ``decode_replicas``, a ``2p1d`` folder, SGLang
    ``server_info`` with prefill and decode servers) and cache-aware routers are kept as
    measured here, and :func:`read_sweep` refuses them.

    Raises
    ------
    ValueError
        A file named explicitly is not a supported format or holds a failed run; a file in a
        folder looks like a result but cannot be read; a recognised file lacks a field or holds
        a value that is not a measurement (the message names the file, the point and the field).
    """
    if max_num_seqs is not None:  # the engine's running-sequence limit, vLLM --max-num-seqs
        max_num_seqs = integer(max_num_seqs, "max_num_seqs", minimum=1)
    if concurrency is not None:
        concurrency = positive(concurrency, "concurrency")
    if not isinstance(path_or_paths, (str, Path)):
        path_or_paths = list(path_or_paths)
    files = _expand(path_or_paths)
    explicit = {Path(p) for p in ([path_or_paths] if isinstance(path_or_paths, (str, Path)) else path_or_paths)
                if not Path(p).is_dir()}
    rows, skipped, notes = [], [], []
    for f in files:
        try:
            rows.extend(_rows_for_file(f, concurrency, skipped, in_folder=f not in explicit))
        except _Failed as exc:
            if f in explicit:
                raise ValueError(str(exc)) from None
            skipped.append((str(f), f"failed run skipped: {exc}"))
            notes.append(f"failed run skipped (no request completed): {f}")
        except _Reject as exc:
            if f in explicit:
                raise ValueError(str(exc)) from None
            skipped.append((str(f), str(exc)))
        except (_Unparsable, _Unrecognised) as exc:
            # inside a folder, files that are not load-generator output (configs, READMEs,
            # side files) are skipped, and sweep.notes says so; a file that looks like a result
            # but cannot be read stops the read: skipping it would drop its load point silently
            if f in explicit:
                raise
            if _looks_like_result(f, exc):
                raise ValueError(f"{exc}. It looks like a load generator's result file, and a result "
                                 f"that cannot be read is not skipped (the sweep would lose that load "
                                 f"point): repair or re-export it, or move it out of {f.parent} and "
                                 "read the folder again") from None
            skipped.append((str(f), str(exc)))
    notes.extend(f"failed run skipped: {a} ({b})" for a, b in skipped
                 if b.startswith("failed run:"))
    if not rows:
        raise ValueError(f"no load points found in {path_or_paths}; skipped: "
                         + "; ".join(f"{a} ({_without_supported(b)})" for a, b in skipped)
                         + f" (supported: {_supported()})")
    # the same vLLM measurement appears in run=N.json and in summary.json: keep it once
    seen, uniq = set(), []
    for r in rows:
        ident = r.pop("_identity", None)
        if ident is not None and ident in seen:
            continue
        if ident is not None:
            seen.add(ident)
        uniq.append(r)
    # aiperf writes the same point as JSON and CSV: keep the JSON (full precision)
    json_dirs = {Path(r["source_file"]).parent for r in uniq if r["format"] == "aiperf"}
    dup_csv = [r for r in uniq if r["format"] == "aiperf-csv" and Path(r["source_file"]).parent in json_dirs]
    for r in dup_csv:
        skipped.append((r["source_file"], "same point as profile_export_aiperf.json beside it"))
    uniq = [r for r in uniq if r not in dup_csv]
    note = _skipped_note(skipped)
    if note:
        notes.append(note)
    _fill_context(uniq, max_num_seqs, {})
    df = pd.DataFrame(uniq)
    first = METRIC_COLUMNS + CONFIG_COLUMNS + _EXTRA
    df = df[first + [c for c in df.columns if c not in first]]
    df["saturated"] = df["saturated"].fillna(False).astype(bool)
    df["saturation_reason"] = df["saturation_reason"].astype(object)
    if "_config_dir" not in df:
        df["_config_dir"] = None
    for c in ("in_system", "ttft_base_s", "queue_wait_s"):
        if c not in df:
            df[c] = _NAN
    keys = _identity_keys(df)
    derived = df.attrs.pop("derived_keys", [])
    gid = _group_configs(df, keys)
    labels = _config_labels(df, gid, keys)
    given = df["config"] if "config" in df else pd.Series(None, index=df.index)
    df["config"] = [g if isinstance(g, str) and g else labels[k] for g, k in zip(given, gid)]
    _open_loop_levels(df, gid)
    df = df.drop(columns=["_config_dir"])
    df.attrs["skipped"] = skipped
    df.attrs["notes"] = notes
    df.attrs["config_keys"] = keys
    df.attrs["derived_keys"] = derived
    return df


def _identity_keys(df: pd.DataFrame) -> list[str]:
    """Every configuration key the points record (see :mod:`capbook.sweeps.configurations`): the fixed
    keys, the files' own keys (vLLM ``--metadata``, SGLang ``server_info``), keys stated by folder
    and file names; fleet-level points divided into one replica's; length settings derived from
    the measured means. Returns the key columns, in the order a message lists them."""
    extra = []
    if "_keys" in df:
        for ks in df["_keys"]:
            if isinstance(ks, tuple):
                extra.extend(k for k in ks if k not in extra)
        del df["_keys"]
    found = [{} if f == "capbook" else _cfgs.path_recorded(src, b if isinstance(b, str) else None)
             for f, src, b in zip(df["format"], df["source_file"], df["backend"] if "backend" in df
                                  else [None] * len(df))]
    extra.extend(k for k in _cfgs.apply_path_keys(df, found) if k not in extra)
    _cfgs.divide_fleet(df)
    keys = [k for k in _cfgs.KEY_ORDER if k in df] + [k for k in extra if k not in _cfgs.KEY_ORDER]
    if "engine_args" in df:
        keys.append("engine_args")
    derived = _cfgs.derive_lengths(df, _group_configs(df, keys))
    keys += [k for k in derived if k not in keys and k in df]
    df.attrs["derived_keys"] = [k for k in derived if k in df]
    return [k for k in keys if k in df]


def _match(col: pd.Series, v) -> np.ndarray:
    """``col == v``, where a string ``v`` also matches a number (``"128"`` matches 128)."""
    def is_na(x):
        return x is None or (isinstance(x, float) and math.isnan(x))
    if isinstance(v, str):
        try:
            fv = float(v)
        except ValueError:
            fv = None
        out = np.array(col.map(lambda x: (not is_na(x)) and str(x) == v), dtype=bool)
        if fv is not None:
            out = out | np.array(pd.to_numeric(col, errors="coerce") == fv, dtype=bool)
        return out
    if _finite(v):
        return np.array(pd.to_numeric(col, errors="coerce") == float(v), dtype=bool) | \
            np.array(col.map(lambda x: x == v), dtype=bool)
    return np.array(col.map(lambda x: x == v), dtype=bool)


def _values_txt(vals) -> str:
    out = []
    for v in vals:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append("not recorded")
        elif isinstance(v, float) and v.is_integer():
            out.append(f"{int(v)}")
        elif isinstance(v, str):
            out.append(repr(v))
        else:
            out.append(f"{v}")
    return ", ".join(out)


def _configurations_error(pts: pd.DataFrame, src, keys=(), derived=()) -> ValueError:
    """Several configurations: name each recorded key that differs between them, with each
    configuration's value, and the selection that reads one."""
    labels = list(dict.fromkeys(pts["config"].tolist()))
    # the first recorded value of each key per configuration (a key recorded in some of its
    # points only is still that configuration's)
    first = pts.groupby("config", sort=False).first()
    strong, weak = [], []   # (key, each configuration's value)
    order = list(dict.fromkeys(["max_num_seqs", "model", "gpu", "tensor_parallel", "engine", "precision"]
                               + [k for k in keys if k != "engine_args"]))
    for c in order:
        if c not in first:
            continue
        vals = [first.at[g, c] for g in labels]
        recorded = {_key_value(v) for v in vals} - {None}
        if c in derived and len(recorded) > 1 and max(recorded) <= min(recorded) * (1 + _cfgs.LENGTH_GAP):
            continue  # measured lengths a little apart: not a setting that tells these apart
        if len(recorded) > 1:
            strong.append((c, vals))
        elif recorded and len({_key_value(v) for v in vals}) > 1:
            weak.append((c, vals))   # recorded for some configurations only
    flags = "engine_args" in first and first["engine_args"].map(_strip_mns).nunique() > 1
    named = strong or ([] if flags else weak)
    parts = [f"config ({_values_txt(labels)})"] + [f"{c} ({_values_txt(v)})" for c, v in named]
    if not strong and flags:
        parts.append("engine flags")
    hint = next(((c, next(x for x in v if _key_value(x) is not None)) for c, v in named
                 if c != "max_num_seqs"), None)
    told = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    more = ""
    if hint is not None and len(parts) > 2:
        v = hint[1].item() if isinstance(hint[1], np.generic) else hint[1]
        v = f"{int(v)}" if isinstance(v, float) and v.is_integer() else v
        more = f" (or select on any key above, e.g. where={{{hint[0]!r}: {str(v)!r}}}, repeated for several keys)"
    return ValueError(f"{src} holds {len(labels)} configurations told apart by {told}; pass "
                      f"where={{'config': {labels[0]!r}}} to read one{more}")


def _fleet_refusal(pts: pd.DataFrame, src) -> ValueError | None:
    """Fleet-level points that cannot be one replica's sweep: prefill/decode pools, or replicas
    behind a router that does not spread requests evenly."""
    for i in pts.index:
        kind, n, why = _cfgs.fleet_kind(pts.loc[i])
        if kind == "pd":
            return ValueError(
                f"{src} holds fleet-level results of a prefill/decode disaggregated deployment ({why}, "
                f"point {pts.at[i, 'source_file']}): such a fleet has no one-replica equivalent (the prefill "
                "pool sets TTFT, the decode pool TPOT, and the pools are sized apart), so it is not read as "
                "a replica's sweep. Measure one engine alone (one server, no router, no disaggregation) "
                "across load levels, or rate each pool from its own measurements and size them with "
                "capbook.sweeps.replicas.replicas_disaggregated")
        if kind == "uneven":
            return ValueError(
                f"{src} holds fleet-level results of {n} replicas ({why}, point {pts.at[i, 'source_file']}): "
                "that router does not spread requests evenly (it follows prefixes, caches or sessions), so "
                f"the fleet's numbers / {n} are not one replica's. Measure one engine alone across load levels")
    return None


def read_sweep(path_or_paths, *, load: str = "auto", where: Mapping | Callable | None = None,
               repeats: str = "error", config: Mapping | None = None, name: str | None = None,
               concurrency=None, max_num_seqs=None, prefill_rate_tps=None) -> Sweep:
    """Read a load generator's output into a :class:`~capbook.sweeps.sweep.Sweep` (format auto-detected).

    Parameters
    ----------
    path_or_paths : str, Path or iterable of them
        One file (a single point, a JSONL of points, a report holding a whole sweep), several
        files, or a folder (searched recursively).
    load : {"auto", "concurrency", "rate", "all"}
        Which kind of load point to keep. ``"auto"`` keeps all and raises if closed-loop
        (fixed concurrency) and open-loop (fixed rate) points are mixed; choose one then.
        ``"rate"`` also keeps a tool's unbounded ``throughput``/``burst`` point (saturated, so
        not a level). ``"all"`` keeps both kinds (e.g. GuideLLM's sweep: a synchronous point,
        then rates), ordered by their (set or estimated) concurrency.
    where : mapping or callable, optional
        Keep only points matching ``{column: value}`` (e.g. ``{"config": "vllm"}``,
        ``{"max_num_seqs": 4}``, ``{"gpu": "H100", "replicas": 3}``, a vLLM metadata key
        ``{"deployment": "base"}``; a string value also matches a number, ``"128"`` matches 128; a
        list matches any of its values), or for which ``where(points_df)`` is True.
    repeats : {"error", "mean"}
        Several points at one concurrency (repeated runs): raise (default) or average their
        rows (percentiles averaged across runs; ``num_requests`` summed).
    config : mapping, optional
        Configuration the files do not record (``gpu``, ``tensor_parallel``, ``precision``,
        ``params_b``, ``engine``, ``workload``, ``model``), filled where missing.
    name : str, optional
        Sweep name (default: the file or folder name).
    concurrency : float, optional
        Load point for formats that do not record one (see :func:`read_points`).
    max_num_seqs : int, optional
        The engine's running-sequence limit when the files do not record it (see
        :func:`read_points`); open-loop levels are capped there.
    prefill_rate_tps : float, optional
        A measured prefill rate, input tokens per second, instead of the one derived from the
        lowest level's TTFT (:meth:`capbook.sweeps.sweep.Sweep.set_prefill_rate`).

    Returns
    -------
    Sweep
        Saturated points are in ``sweep.saturated`` (not levels), with ``sweep.saturation_rps``;
        ``sweep.skipped`` lists what was passed over, ``sweep.notes`` the caveats.

    Raises
    ------
    ValueError
        Mixed closed- and open-loop points (pass ``load=``), several configurations (pass
        ``where=``; the message names every key that differs), repeated levels (pass
        ``repeats='mean'``; runs are repeats only when every configuration key is equal),
        fleet-level results with no one-replica equivalent (prefill/decode pools, a cache-aware
        router), every point saturated, or a problem with a file (named).
    """
    choice(load, "load", ("auto", "concurrency", "rate", "all"))
    choice(repeats, "repeats", ("error", "mean"))
    if prefill_rate_tps is not None:
        prefill_rate_tps = positive(prefill_rate_tps, "prefill_rate_tps")
    if not isinstance(path_or_paths, (str, Path)):
        path_or_paths = list(path_or_paths)
        if not path_or_paths:
            raise ValueError("no input files given")
    pts = read_points(path_or_paths, concurrency=concurrency, max_num_seqs=max_num_seqs)
    keys = list(pts.attrs.get("config_keys", []))
    derived = list(pts.attrs.get("derived_keys", []))
    skipped = list(pts.attrs.get("skipped", []))
    import_notes = list(pts.attrs.get("notes", []))
    src = path_or_paths if isinstance(path_or_paths, (str, Path)) else next(iter(path_or_paths))
    if where is not None:
        if callable(where):
            mask = np.asarray(where(pts), bool)
        else:
            if not isinstance(where, Mapping):
                raise ValueError(f"where={where!r} must be a mapping {{column: value}} or a callable")
            mask = np.ones(len(pts), bool)
            for k, v in where.items():
                if k not in pts.columns:
                    ck = ["config"] + [c for c in pts.attrs.get("config_keys", []) if c != "engine_args"
                                       and pts[c].map(_key_value).notna().any()]
                    raise ValueError(f"where: column {k!r} not in the points; the configuration keys they "
                                     f"record are {ck} (any column of read_points works too: "
                                     f"{', '.join(map(repr, list(pts.columns)[:8]))}, …)")
                vals = list(v) if isinstance(v, (list, tuple, set, frozenset)) else [v]
                m = np.zeros(len(pts), bool)
                for one in vals:
                    m |= _match(pts[k], one)
                if not m.any():
                    have = _values_txt(list(dict.fromkeys(pts[k].tolist()))[:12])
                    raise ValueError(f"where={where!r} keeps no point of {src}: column {k!r} holds "
                                     f"{have}")
                mask &= m
        pts = pts[mask]
        if pts.empty:
            raise ValueError(f"where={where!r} keeps no point of {src}")
    kinds = set(pts["load_kind"])
    closed, open_ = {"concurrency"}, set(_OPEN)
    if load == "concurrency":
        pts = pts[pts["load_kind"].isin(closed)]
    elif load == "rate":
        pts = pts[pts["load_kind"].isin(open_)]
    elif load == "auto" and kinds & closed and kinds & open_:
        detail = pts.groupby("load_kind")["concurrency"].apply(lambda s: [round(x, 2) for x in s]).to_dict()
        raise ValueError(
            f"{src} mixes closed-loop (fixed concurrency) and open-loop (fixed rate) points "
            f"{detail}; pass load='concurrency' or load='rate' to read one sweep"
        )
    if pts.empty:
        raise ValueError(f"{src} holds no {load!r} load points (found {sorted(kinds)})")
    # points of several configurations are several sweeps
    if pts["config"].nunique(dropna=True) > 1:
        raise _configurations_error(pts, src, keys, derived)
    refusal = _fleet_refusal(pts, src)
    if refusal is not None:
        raise refusal
    for c in ["model", "max_num_seqs"]:  # e.g. capbook CSVs given a config column by hand
        vals = pts[c].dropna().unique().tolist()
        if len(vals) > 1:
            raise ValueError(f"{src} holds points of several configurations ({c}: "
                             f"{_values_txt(vals)}); select one with where={{{c!r}: ...}}")
    sat = pts[pts["saturated"]]
    pts = pts[~pts["saturated"]]
    if pts.empty:
        why = "; ".join(f"{p or 'point'}: {r}" for p, r in zip(sat["point"], sat["saturation_reason"]))
        raise ValueError(f"{src}: every load point is saturated ({why}); there is no level to choose "
                         "S from: measure lower request rates or a concurrency sweep")
    # one load level per closed-loop concurrency, and per open-loop target rate (repeated runs at
    # one offered rate estimate slightly different running sequences: still one level, repeated)
    tgt = pd.to_numeric(pts.get("request_rate_target", pd.Series(_NAN, index=pts.index)), errors="coerce")
    by_rate = pts["load_kind"].isin(_OPEN) & tgt.notna() & np.isfinite(tgt)
    arr = pts["arrivals"] if "arrivals" in pts else pd.Series(None, index=pts.index)
    level = pd.Series([(f"request rate {t:g} req/s" + (f" ({a} arrivals)" if isinstance(a, str) else ""))
                       if r else f"concurrency {c:g}"
                       for r, t, c, a in zip(by_rate, tgt, pts["concurrency"], arr)], index=pts.index)
    dup = level[level.duplicated()]
    if len(dup):
        if repeats == "error":
            at = pts[level.isin(dup)]
            lines = at["source_line"] if "source_line" in at else pd.Series(None, index=at.index)
            files = [f"{f} line {n:g}" if _finite(n) else f for f, n in zip(at["source_file"], lines)]
            conc = sorted(set(at.loc[~by_rate[at.index], "concurrency"]))
            rates = [d for d in dict.fromkeys(dup) if d.startswith("request rate")]
            what = ", ".join(([f"concurrency {conc}"] if conc else []) + rates)
            raise ValueError(
                f"{src} has several points at {what} ({files}); every key the files record is "
                "equal, so they are repeated runs: pass repeats='mean' to average them, or "
                "where=... to choose"
            )
        pts = pts.assign(_level=level.to_numpy())
        num = [c for c in pts.columns if c not in ("num_requests", "saturated", "_level")
               and pd.api.types.is_numeric_dtype(pts[c]) and not pd.api.types.is_bool_dtype(pts[c])]
        agg = {c: "mean" for c in num}
        agg.update({"num_requests": "sum"})
        agg.update({c: "first" for c in pts.columns if c not in agg and c != "_level"})
        counts = pts.groupby("_level", sort=False).size()
        pts = pts.groupby("_level", as_index=False, sort=False).agg(agg)
        pts["runs_averaged"] = pts["_level"].map(counts).to_numpy()
        pts = pts.drop(columns="_level").sort_values("concurrency", kind="stable").reset_index(drop=True)
    pts = pd.concat([pts, sat], ignore_index=True) if len(sat) else pts.copy()
    for k, v in (config or {}).items():
        if k not in CONFIG_COLUMNS:
            raise ValueError(f"config key {k!r} is not one of {CONFIG_COLUMNS}")
        pts[k] = pts[k].where(pts[k].notna(), v) if k in pts else v
    if name is None:
        p = Path(src)
        name = p.stem if p.is_file() else p.name
        if isinstance(where, Mapping) and where:  # the selection is part of what was measured
            name += " (" + ", ".join(f"{k}={v}" for k, v in where.items()) + ")"
    sweep = Sweep.from_frame(pts.reset_index(drop=True), name=name)
    sweep.skipped = skipped
    for n in _sweep_notes(sweep.table, sweep.saturated) + _cfgs.fleet_notes(pts) + import_notes:
        sweep.add_note(n)
    if prefill_rate_tps is not None:
        sweep.set_prefill_rate(prefill_rate_tps, "prefill_rate_tps=")
    return sweep


def _sweep_notes(t: pd.DataFrame, sat: pd.DataFrame) -> list[str]:
    """Where the levels and the engine configuration came from."""
    out = []
    allp = pd.concat([t, sat], ignore_index=True) if len(sat) else t
    src = set(t["concurrency_source"].dropna()) if "concurrency_source" in t else set()
    if src & {"littles_law_running", "measured_running", "max_num_seqs"}:
        base = pd.to_numeric(allp.get("ttft_base_s"), errors="coerce").dropna()
        b = f" {base.iloc[0]:.3g} s" if len(base) else ""
        out.append("open-loop levels are the engine's running sequences: requests in the system "
                   "(measured, or completions × mean E2E) less the engine's queue, completions × "
                   f"(mean TTFT − the lowest mean TTFT{b})" + (", capped at max_num_seqs"
                                                            if "max_num_seqs" in src else ""))
    m = pd.to_numeric(allp.get("max_num_seqs"), errors="coerce").dropna() if "max_num_seqs" in allp else []
    if len(m) and m.nunique() == 1:
        srcs = allp["max_num_seqs_source"].dropna().unique().tolist() if "max_num_seqs_source" in allp else []
        out.append(f"max_num_seqs {m.iloc[0]:g} (from {', '.join(map(str, srcs[:2])) or 'the files'})")
    if "engine_config_source" in allp:
        files = allp["engine_config_source"].dropna().unique().tolist()
        if files:
            fields = [c for c in ("gpu", "engine", "tensor_parallel", "model") if allp[c].notna().any()]
            out.append(f"{', '.join(fields)} read from {files[0]}" + (f" (and {len(files) - 1} more)"
                                                                      if len(files) > 1 else ""))
    return out
