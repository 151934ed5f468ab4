"""Read load-generator output into the sweep table (one entry point, format detected from content).

:func:`read_sweep` turns the files a load test left behind into a :class:`capbook.sweep.Sweep`;
:func:`read_points` returns every load point it found as a flat table (use it to filter, then
build the sweep with :meth:`capbook.sweep.Sweep.from_frame`). The format is detected from each file's content,
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
``guidellm``                      ``benchmarks.json`` (``benchmarks[].metrics``)
``guidellm-csv``                  a per-benchmark CSV with ``ttft_median_ms``, ``itl_median_ms``,
                                  ``concurrency_mean`` columns
``llmperf``                       ``*_summary.json`` (``results_ttft_s_quantiles_p50`` …) and
                                  the per-request ``*_individual_responses.json`` list
``inference-perf``                ``stage_N_lifecycle_metrics.json``
``inference-benchmarker``         huggingface/inference-benchmarker report (``results[]``)
``capbook``                       a CSV already in the sweep-table layout
================================  ==========================================================

Units are normalised to seconds, tokens and requests per second. Percentiles a tool does not
report stay empty (NaN) in the table; :class:`~capbook.sweep.Sweep` then raises when asked for
them. A file that is not what it claims, or lacks a needed field, raises :class:`ValueError`
naming the file and the field.

Load points are either **closed loop** (``load_kind = "concurrency"``: the tool held N
requests in flight; ``concurrency`` is N) or **open loop** (``load_kind = "rate"``: the tool
sent requests at a rate). For open-loop points ``concurrency`` is the mean number in flight,
as the tool measured it (``concurrency_source = "measured"``) or, when it did not, by Little's
law, request throughput × mean request latency (``"littles_law"``).
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from .sweep import CONFIG_COLUMNS, METRIC_COLUMNS, Sweep

__all__ = ["read_sweep", "read_points", "detect_format", "FORMATS"]

#: Names of the formats :func:`detect_format` recognises.
FORMATS = (
    "aiperf", "genai-perf", "aiperf-csv", "vllm", "guidellm", "guidellm-csv", "llmperf",
    "llmperf-requests", "inference-perf", "inference-benchmarker", "capbook",
)

_NAN = float("nan")
_EXTRA = ["load_kind", "concurrency_source", "request_rate_target", "failed_requests",
          "format", "source_file", "point"]


class _Reject(ValueError):
    """A recognised file that holds no sweep point (aggregate, server metrics)."""


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
    return x


def _opt(d, key, scale=1.0) -> float:
    v = d.get(key) if isinstance(d, Mapping) else None
    if v is None or v == "" or v == "-":
        return _NAN
    try:
        return float(v) * scale
    except (TypeError, ValueError):
        return _NAN


def _row(**kw) -> dict:
    base = {c: _NAN for c in METRIC_COLUMNS}
    base.update({c: None for c in CONFIG_COLUMNS})
    base.update({c: None for c in _EXTRA})
    base.update(kw)
    return base


# -- detection -----------------------------------------------------------------------------------
def _load_json_or_jsonl(path: Path, text: str):
    try:
        return json.loads(text), False
    except json.JSONDecodeError as first:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1:
            try:
                return [json.loads(ln) for ln in lines], True
            except json.JSONDecodeError:
                pass
        raise _err(path, f"not valid JSON or JSON Lines ({first.msg} at line {first.lineno})") from None


def _detect_obj(d) -> str | None:
    if isinstance(d, list):
        if d and all(isinstance(x, Mapping) for x in d):
            if all(_detect_obj(x) == "vllm" for x in d):
                return "vllm-list"
            if "ttft_s" in d[0] and "end_to_end_latency_s" in d[0]:
                return "llmperf-requests"
        return None
    if not isinstance(d, Mapping):
        return None
    if isinstance(d.get("benchmarks"), list):
        return "guidellm"
    if isinstance(d.get("results"), list) and isinstance(d.get("config"), Mapping) \
            and "benchmark_kind" in d["config"]:
        return "inference-benchmarker"
    if isinstance(d.get("load_summary"), Mapping) and isinstance(d.get("successes"), Mapping):
        if isinstance(d["successes"].get("latency"), Mapping):
            return "inference-perf"
        return "inference-perf-prometheus"
    if any(k.startswith("results_ttft_s") for k in d):
        return "llmperf"
    ttft = d.get("time_to_first_token")
    if isinstance(ttft, Mapping) and "unit" in ttft:
        return "aiperf" if ("aiperf_version" in d or "schema_version" in d) else "genai-perf"
    if ("median_ttft_ms" in d or "mean_ttft_ms" in d) and "request_throughput" in d:
        return "vllm"
    return None


def detect_format(path) -> str:
    """Name the load-generator format of one file from its content (see :data:`FORMATS`).

    Raises
    ------
    ValueError
        When the file is not one of the supported formats (the message names the file).
    """
    path = Path(path)
    text = _read_text(path)
    return _detect_text(path, text)[0]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"{path}: file does not exist") from None
    except UnicodeDecodeError:
        raise _err(path, "not a text file") from None


def _detect_text(path: Path, text: str):
    s = text.lstrip()
    if s.startswith("{") or s.startswith("["):
        obj, jsonl = _load_json_or_jsonl(path, text)
        kind = _detect_obj(obj)
        if kind is None and jsonl:
            kinds = {_detect_obj(x) for x in obj}
            if kinds == {"vllm"}:
                kind = "vllm-list"
        if kind is None:
            keys = list(obj)[:8] if isinstance(obj, Mapping) else f"a list of {len(obj)} items"
            raise _err(path, f"JSON with top-level {keys} is not a recognised load-generator "
                             f"output (supported: {', '.join(FORMATS)})")
        if kind == "vllm-list":
            kind = "vllm"
        return kind, obj
    first = s.splitlines()[0] if s else ""
    header = [h.strip() for h in next(csv.reader([first]))] if first else []
    if header[:2] == ["Metric", "avg"]:
        return "aiperf-csv", text
    if {"ttft_median_ms", "itl_median_ms", "concurrency_mean"} <= set(header):
        return "guidellm-csv", text
    if set(METRIC_COLUMNS) <= set(header):
        return "capbook", text
    raise _err(path, f"not a recognised load-generator output (first line {first[:80]!r}; "
                     f"supported: {', '.join(FORMATS)})")


# -- per-format parsers (each returns a list of row dicts) ----------------------------------------
def _pct_obj(d, name, path, scale, *, required=True):
    """(p50, p95, p99) of an aiperf/genai-perf metric object in its unit × scale."""
    m = d.get(name)
    if not isinstance(m, Mapping):
        if required:
            raise _err(path, f"missing field {name!r}")
        return (_NAN, _NAN, _NAN), None
    unit = m.get("unit")
    return tuple(_opt(m, k, scale) for k in ("p50", "p95", "p99")), unit


def _ms_scale(unit, path, field):
    if unit in ("ms",):
        return 1e-3
    if unit in ("s", "sec", "seconds"):
        return 1.0
    if unit in ("ns",):
        return 1e-9
    raise _err(path, f"field {field!r} has unit {unit!r}; expected ms, s or ns")


def _parse_profile_export(d, path, fmt):
    ttft_unit = _get(d, ["time_to_first_token", "unit"], path)
    itl_unit = _get(d, ["inter_token_latency", "unit"], path, "TPOT")
    (t50, t95, t99), _ = _pct_obj(d, "time_to_first_token", path, _ms_scale(ttft_unit, path, "time_to_first_token.unit"))
    (p50, p95, p99), _ = _pct_obj(d, "inter_token_latency", path, _ms_scale(itl_unit, path, "inter_token_latency.unit"))
    rps = _num(_get(d, ["request_throughput", "avg"], path), path, "request_throughput.avg")
    tps = _num(_get(d, ["output_token_throughput", "avg"], path), path, "output_token_throughput.avg")
    isl = _num(_get(d, ["input_sequence_length", "avg"], path), path, "input_sequence_length.avg")
    osl = _num(_get(d, ["output_sequence_length", "avg"], path), path, "output_sequence_length.avg")
    count = d.get("request_count", {}).get("avg") if isinstance(d.get("request_count"), Mapping) else None
    if count is None:
        count = _get(d, ["time_to_first_token", "count"], path, "request count")
    failed = _opt(d.get("error_request_count", {}), "avg") if isinstance(d.get("error_request_count"), Mapping) else 0.0
    ic = d.get("input_config") or {}
    kind, n, rate, src = _profile_load_point(ic, path)
    lat = d.get("request_latency", {})
    if kind == "rate":
        mean_lat = _num(_get(d, ["request_latency", "avg"], path), path, "request_latency.avg") * _ms_scale(lat.get("unit"), path, "request_latency.unit")
        eff = d.get("effective_concurrency")
        if isinstance(eff, Mapping) and eff.get("avg") is not None:
            n, src = float(eff["avg"]), "measured"
        else:
            n, src = rps * mean_lat, "littles_law"
    model = _profile_model(ic)
    return [_row(
        concurrency=n, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
        tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99,
        request_throughput_rps=rps, output_throughput_tps=tps,
        mean_input_tokens=isl, mean_output_tokens=osl, num_requests=float(count),
        model=model, engine=None, load_kind=kind, concurrency_source=src,
        request_rate_target=rate, failed_requests=failed, format=fmt,
    )]


def _profile_load_point(ic, path):
    """(load_kind, concurrency, rate, source) from an aiperf / genai-perf input_config."""
    phases = ic.get("phases")
    if isinstance(phases, list) and phases:
        prof = [p for p in phases if not p.get("exclude_from_results")] or phases
        p = prof[-1]
        if p.get("type") == "concurrency" and p.get("concurrency") is not None:
            return "concurrency", float(p["concurrency"]), _NAN, "set"
        if p.get("rate") is not None:
            return "rate", _NAN, float(p["rate"]), None
        raise _err(path, f"input_config.phases[-1] has neither 'concurrency' nor 'rate': {p}")
    lg = ic.get("loadgen")
    if isinstance(lg, Mapping):
        if lg.get("concurrency") is not None and lg.get("request_rate") is None:
            return "concurrency", float(lg["concurrency"]), _NAN, "set"
        if lg.get("request_rate") is not None:
            return "rate", _NAN, float(lg["request_rate"]), None
    stim = (ic.get("perf_analyzer") or {}).get("stimulus") if isinstance(ic.get("perf_analyzer"), Mapping) else None
    if isinstance(stim, Mapping):
        if stim.get("concurrency") is not None:
            return "concurrency", float(stim["concurrency"]), _NAN, "set"
        if stim.get("request_rate") is not None:
            return "rate", _NAN, float(stim["request_rate"]), None
    if ic.get("concurrency") is not None and ic.get("request_rate") is None:
        return "concurrency", float(ic["concurrency"]), _NAN, "set"
    if ic.get("request_rate") is not None:
        return "rate", _NAN, float(ic["request_rate"]), None
    raise _err(path, "missing field 'input_config' load point (phases / loadgen.concurrency / "
                     "perf_analyzer.stimulus / concurrency): cannot tell the concurrency")


def _profile_model(ic):
    try:
        return ic["models"]["items"][0]["name"]
    except (KeyError, IndexError, TypeError):
        pass
    for keys in (("endpoint", "model_names"), ("model_names",), ("model",)):
        cur = ic
        try:
            for k in keys:
                cur = cur[k]
            return cur[0] if isinstance(cur, list) else cur
        except (KeyError, IndexError, TypeError):
            continue
    return None


_AIPERF_CSV_FIELDS = {
    "Time to First Token (ms)": "ttft",
    "Inter Token Latency (ms)": "tpot",
    "Input Sequence Length (tokens)": "isl",
    "Output Sequence Length (tokens)": "osl",
}


def _parse_aiperf_csv(text, path, concurrency=None):
    stats, scalars = {}, {}
    for rec in csv.reader(io.StringIO(text)):
        if len(rec) >= 14 and rec[0] in _AIPERF_CSV_FIELDS:
            stats[rec[0]] = rec
        elif len(rec) == 2 and rec[0] != "Metric":
            scalars[rec[0]] = rec[1]
    header = next(csv.reader(io.StringIO(text)))
    idx = {h: i for i, h in enumerate(header)}
    for f in _AIPERF_CSV_FIELDS:
        if f not in stats:
            raise _err(path, f"missing metric row {f!r}")
    for f in ("Request Throughput (requests/sec)", "Output Token Throughput (tokens/sec)"):
        if f not in scalars:
            raise _err(path, f"missing metric {f!r}")

    def st(field, col, scale=1.0):
        return _num(stats[field][idx[col]], path, f"{field}/{col}") * scale

    kind, rate, src = "concurrency", _NAN, "set"
    sib = path.with_name("profile_export_aiperf.json")
    if concurrency is not None:
        n = float(concurrency)
    elif sib.exists():
        sd = json.loads(sib.read_text())
        kind, n, rate, src = _profile_load_point(sd.get("input_config") or {}, sib)
        if kind == "rate":
            n, src = float(sd["request_throughput"]["avg"]) * float(sd["request_latency"]["avg"]) / 1e3, "littles_law"
    else:
        raise _err(path, "an aiperf CSV does not record the load point (concurrency); keep "
                         "profile_export_aiperf.json beside it or pass concurrency=")
    count = scalars.get("Request Count")
    return [_row(
        concurrency=n,
        ttft_p50_s=st("Time to First Token (ms)", "p50", 1e-3),
        ttft_p95_s=st("Time to First Token (ms)", "p95", 1e-3),
        ttft_p99_s=st("Time to First Token (ms)", "p99", 1e-3),
        tpot_p50_s=st("Inter Token Latency (ms)", "p50", 1e-3),
        tpot_p95_s=st("Inter Token Latency (ms)", "p95", 1e-3),
        tpot_p99_s=st("Inter Token Latency (ms)", "p99", 1e-3),
        request_throughput_rps=_num(scalars["Request Throughput (requests/sec)"], path, "Request Throughput"),
        output_throughput_tps=_num(scalars["Output Token Throughput (tokens/sec)"], path, "Output Token Throughput"),
        mean_input_tokens=st("Input Sequence Length (tokens)", "avg"),
        mean_output_tokens=st("Output Sequence Length (tokens)", "avg"),
        num_requests=_num(count, path, "Request Count") if count is not None else _NAN,
        load_kind=kind, concurrency_source=src, request_rate_target=rate, format="aiperf-csv",
    )]


def _vllm_point(d, path):
    completed = _num(_get(d, ["completed"], path), path, "completed")
    if completed <= 0:
        raise _err(path, f"field 'completed' is {completed:g}: no request succeeded "
                         f"(failed={d.get('failed')}); this run holds no measurement")
    rps = _num(_get(d, ["request_throughput"], path), path, "request_throughput")
    ttft50 = _num(_get(d, ["median_ttft_ms"], path), path, "median_ttft_ms") / 1e3
    tpot50 = _num(_get(d, ["median_tpot_ms"], path), path, "median_tpot_ms") / 1e3
    row = _row(
        ttft_p50_s=ttft50, ttft_p95_s=_opt(d, "p95_ttft_ms", 1e-3), ttft_p99_s=_opt(d, "p99_ttft_ms", 1e-3),
        tpot_p50_s=tpot50, tpot_p95_s=_opt(d, "p95_tpot_ms", 1e-3), tpot_p99_s=_opt(d, "p99_tpot_ms", 1e-3),
        request_throughput_rps=rps,
        output_throughput_tps=_num(_get(d, ["output_throughput"], path), path, "output_throughput"),
        mean_input_tokens=_num(_get(d, ["total_input_tokens"], path), path, "total_input_tokens") / completed,
        mean_output_tokens=_num(_get(d, ["total_output_tokens"], path), path, "total_output_tokens") / completed,
        num_requests=completed, model=d.get("model_id"), backend=d.get("backend"),
        failed_requests=_opt(d, "failed") if "failed" in d else _NAN, format="vllm",
    )
    # per-request arrays (benchmark_serving --save-detailed / older --save-result): compute the
    # percentiles the summary lacks from the raw measurements, as vLLM itself does
    ttfts, itls, outs = d.get("ttfts"), d.get("itls"), d.get("output_lens")
    if isinstance(ttfts, list) and isinstance(itls, list) and isinstance(outs, list) \
            and len(ttfts) == len(itls) == len(outs) and ttfts:
        ok = [i for i in range(len(ttfts)) if ttfts[i] and outs[i]]
        tt = np.array([ttfts[i] for i in ok], float)
        tp = np.array([sum(itls[i]) / (outs[i] - 1) for i in ok if outs[i] > 1], float)
        if math.isnan(row["ttft_p95_s"]):
            row["ttft_p95_s"] = float(np.percentile(tt, 95))
        if math.isnan(row["tpot_p95_s"]) and len(tp):
            row["tpot_p95_s"] = float(np.percentile(tp, 95))
        row["p95_source"] = "per-request arrays"
    mc = d.get("max_concurrency")
    rate = d.get("request_rate")
    rate_f = _NAN if rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate)) else float(rate)
    if mc is not None:
        row.update(concurrency=float(mc), load_kind="concurrency", concurrency_source="set",
                   request_rate_target=rate_f)
        if not math.isnan(rate_f):  # a rate limit as well as a concurrency cap
            row["load_kind"] = "rate"
    if mc is None or row["load_kind"] == "rate":
        mean_e2e = _opt(d, "mean_e2el_ms", 1e-3)
        if math.isnan(mean_e2e):
            # mean latency = mean TTFT + mean TPOT x (mean output tokens - 1) is the best the
            # summary allows; the per-request arrays give it exactly when present
            if isinstance(ttfts, list) and isinstance(itls, list) and ttfts:
                mean_e2e = float(np.mean([t + sum(i) for t, i in zip(ttfts, itls) if t]))
            else:
                mean_e2e = _num(_get(d, ["mean_ttft_ms"], path), path, "mean_ttft_ms") / 1e3 + \
                    _num(_get(d, ["mean_tpot_ms"], path), path, "mean_tpot_ms") / 1e3 * (row["mean_output_tokens"] - 1)
        row.update(concurrency=rps * mean_e2e, concurrency_source="littles_law",
                   load_kind="rate" if not math.isnan(rate_f) else "burst",
                   request_rate_target=rate_f)
    for extra in ("max_num_seqs", "run_number"):
        if extra in d:
            row[extra] = d[extra]
    row["_identity"] = (d.get("date"), d.get("model_id"), d.get("duration"), d.get("run_number"))
    return row


def _parse_vllm(obj, path):
    items = obj if isinstance(obj, list) else [obj]
    return [_vllm_point(x, path) for x in items]


def _gl_metric(m, name, path, bi):
    mm = _get(m, [name, "successful"], path, f"benchmarks[{bi}].metrics")
    pct = mm.get("percentiles") or {}
    return mm, (_opt(mm, "median"), _opt(pct, "p95"), _opt(pct, "p99"))


def _parse_guidellm(d, path):
    rows = []
    for bi, b in enumerate(d["benchmarks"]):
        m = _get(b, ["metrics"], path, f"benchmarks[{bi}]")
        _, (t50, t95, t99) = _gl_metric(m, "time_to_first_token_ms", path, bi)
        _, (p50, p95, p99) = _gl_metric(m, "inter_token_latency_ms", path, bi)
        rps_m, _ = _gl_metric(m, "requests_per_second", path, bi)
        conc_m, _ = _gl_metric(m, "request_concurrency", path, bi)
        pin, _ = _gl_metric(m, "prompt_token_count", path, bi)
        pout, _ = _gl_metric(m, "output_token_count", path, bi)
        # request_totals sits beside metrics in GuideLLM 0.2 and inside it later; its
        # "successful" is a count or a {count: ...} object
        totals = b.get("request_totals") or m.get("request_totals")
        if not isinstance(totals, Mapping):
            raise _err(path, f"missing field 'benchmarks[{bi}].request_totals'")
        succ = totals.get("successful")
        ok = _num(succ.get("count") if isinstance(succ, Mapping) else succ, path,
                  f"benchmarks[{bi}].request_totals.successful")
        err = totals.get("errored")
        err = err.get("count") if isinstance(err, Mapping) else err
        strategy = {}
        for holder in ("args", "config", "scheduler"):
            cand = (b.get(holder) or {}).get("strategy") if isinstance(b.get(holder), Mapping) else None
            if isinstance(cand, Mapping):
                strategy = cand
                break
        stype = strategy.get("type_") or strategy.get("type")
        if b.get("duration") is not None:
            out_tps = _num(pout.get("total_sum"), path, "output_token_count.successful.total_sum") / float(b["duration"])
        else:
            otps, _ = _gl_metric(m, "output_tokens_per_second", path, bi)
            out_tps = _num(otps.get("mean"), path, f"benchmarks[{bi}].metrics.output_tokens_per_second.successful.mean")
        if stype == "synchronous":
            kind, n, src, rate = "concurrency", 1.0, "set", _NAN
        elif stype == "concurrent":
            kind, n, src, rate = "concurrency", _num(strategy.get("streams"), path, "strategy.streams"), "set", _NAN
        else:
            kind, src = ("throughput" if stype == "throughput" else "rate"), "measured"
            n = _num(conc_m.get("mean"), path, f"benchmarks[{bi}].metrics.request_concurrency.successful.mean")
            rate = _opt(strategy, "rate")
        rows.append(_row(
            concurrency=n, ttft_p50_s=t50 / 1e3, ttft_p95_s=t95 / 1e3, ttft_p99_s=t99 / 1e3,
            tpot_p50_s=p50 / 1e3, tpot_p95_s=p95 / 1e3, tpot_p99_s=p99 / 1e3,
            request_throughput_rps=_num(rps_m.get("mean"), path, "requests_per_second.successful.mean"),
            output_throughput_tps=out_tps,
            mean_input_tokens=_num(pin.get("mean"), path, "prompt_token_count.successful.mean"),
            mean_output_tokens=_num(pout.get("mean"), path, "output_token_count.successful.mean"),
            num_requests=ok, model=(b.get("worker") or {}).get("backend_model"),
            load_kind=kind, concurrency_source=src, request_rate_target=rate,
            failed_requests=float(err) if err is not None else _NAN, format="guidellm",
            point=f"{stype}[{bi}]",
        ))
    if not rows:
        raise _err(path, "field 'benchmarks' is empty")
    return rows


def _parse_guidellm_csv(text, path):
    df = pd.read_csv(io.StringIO(text), dtype=str)
    need = ["ttft_median_ms", "itl_median_ms", "rps_mean", "concurrency_mean",
            "prompt_tokens_mean", "output_tokens_mean", "total_requests", "duration_s"]
    miss = [c for c in need if c not in df.columns]
    if miss:
        raise _err(path, f"missing column(s) {miss}")
    rows = []
    for i, r in enumerate(df.to_dict("records")):
        def f(c, scale=1.0):
            return _opt(r, c, scale)
        for c in need:
            if math.isnan(f(c)):
                raise _err(path, f"row {i}: column {c!r} is empty or not a number ({r[c]!r})")
        prof = r.get("profile")
        if prof == "synchronous":
            kind, src = "concurrency", "set"
        elif prof == "concurrent":
            kind, src = "concurrency", "set"
        else:
            kind, src = ("throughput" if prof == "throughput" else "rate"), "measured"
        n = f("concurrency_mean")
        if kind == "concurrency":
            n = float(round(n))
        ok = f("total_requests") - (f("error_requests") if not math.isnan(f("error_requests")) else 0.0)
        rows.append(_row(
            concurrency=n, ttft_p50_s=f("ttft_median_ms", 1e-3), ttft_p95_s=f("ttft_p95_ms", 1e-3),
            ttft_p99_s=f("ttft_p99_ms", 1e-3), tpot_p50_s=f("itl_median_ms", 1e-3),
            tpot_p95_s=f("itl_p95_ms", 1e-3), tpot_p99_s=f("itl_p99_ms", 1e-3),
            request_throughput_rps=f("rps_mean"),
            output_throughput_tps=f("rps_mean") * f("output_tokens_mean"),
            mean_input_tokens=f("prompt_tokens_mean"), mean_output_tokens=f("output_tokens_mean"),
            num_requests=ok, load_kind=kind, concurrency_source=src,
            request_rate_target=f("rate"), failed_requests=f("error_requests"),
            format="guidellm-csv", point=r.get("source_file"),
        ))
    return rows


def _parse_llmperf(d, path):
    def q(metric, p):
        return _opt(d, f"results_{metric}_quantiles_p{p}")
    n_ok = _num(_get(d, ["results_num_completed_requests"], path), path, "results_num_completed_requests")
    if n_ok <= 0:
        raise _err(path, "field 'results_num_completed_requests' is 0: no request succeeded")
    for k in ("results_ttft_s_quantiles_p50", "results_inter_token_latency_s_quantiles_p50"):
        _get(d, [k], path)
    return [_row(
        concurrency=_num(_get(d, ["num_concurrent_requests"], path), path, "num_concurrent_requests"),
        ttft_p50_s=q("ttft_s", 50), ttft_p95_s=q("ttft_s", 95), ttft_p99_s=q("ttft_s", 99),
        tpot_p50_s=q("inter_token_latency_s", 50), tpot_p95_s=q("inter_token_latency_s", 95),
        tpot_p99_s=q("inter_token_latency_s", 99),
        request_throughput_rps=_num(_get(d, ["results_num_completed_requests_per_min"], path),
                                    path, "results_num_completed_requests_per_min") / 60.0,
        output_throughput_tps=_num(_get(d, ["results_mean_output_throughput_token_per_s"], path),
                                   path, "results_mean_output_throughput_token_per_s"),
        mean_input_tokens=_num(_get(d, ["results_number_input_tokens_mean"], path), path, "results_number_input_tokens_mean"),
        mean_output_tokens=_num(_get(d, ["results_number_output_tokens_mean"], path), path, "results_number_output_tokens_mean"),
        num_requests=n_ok, model=d.get("model"), load_kind="concurrency", concurrency_source="set",
        failed_requests=_opt(d, "results_number_errors"), format="llmperf",
        tpot_note="llmperf inter_token_latency: spreads TTFT over all output tokens, so it "
                  "overstates TPOT by about TTFT / output tokens",
    )]


def _parse_llmperf_requests(items, path, concurrency=None):
    if concurrency is None:
        raise _err(path, "a per-request llmperf file does not record 'num_concurrent_requests'; "
                         "read the *_summary.json beside it or pass concurrency=")
    ok = [r for r in items if r.get("error_code") is None]
    if not ok:
        raise _err(path, f"all {len(items)} requests have an 'error_code': no measurement")
    tt = np.array([_num(r.get("ttft_s"), path, "ttft_s") for r in ok])
    # TPOT per request as vLLM and AIPerf define it: (latency - TTFT) / (output tokens - 1);
    # llmperf's own inter_token_latency_s spreads TTFT over the output and is not used
    itl = np.array([(_num(r.get("end_to_end_latency_s"), path, "end_to_end_latency_s") - t)
                    / (_num(r.get("number_output_tokens"), path, "number_output_tokens") - 1)
                    for r, t in zip(ok, tt) if r.get("number_output_tokens", 0) > 1])
    p = np.percentile
    return [_row(
        concurrency=float(concurrency), ttft_p50_s=float(p(tt, 50)), ttft_p95_s=float(p(tt, 95)),
        ttft_p99_s=float(p(tt, 99)), tpot_p50_s=float(p(itl, 50)), tpot_p95_s=float(p(itl, 95)),
        tpot_p99_s=float(p(itl, 99)), request_throughput_rps=_NAN, output_throughput_tps=_NAN,
        mean_input_tokens=float(np.mean([r["number_input_tokens"] for r in ok])),
        mean_output_tokens=float(np.mean([r["number_output_tokens"] for r in ok])),
        num_requests=float(len(ok)), failed_requests=float(len(items) - len(ok)),
        load_kind="concurrency", concurrency_source="set", format="llmperf-requests",
    )]


def _parse_inference_perf(d, path):
    ls = d["load_summary"]
    if "requested_rate" not in ls:
        raise _Reject(f"{path}: inference-perf summary over all stages (no "
                      "'load_summary.requested_rate'), not one load point; read the stage files")
    s = d["successes"]
    lat = _get(s, ["latency"], path)
    n_ok = _num(s.get("count"), path, "successes.count")
    if n_ok <= 0:
        raise _err(path, "field 'successes.count' is 0: no request succeeded")

    def pct(metric):
        m = _get(lat, [metric], path, "successes.latency")
        return _opt(m, "median"), _opt(m, "p95"), _opt(m, "p99")
    t50, t95, t99 = pct("time_to_first_token")
    p50, p95, p99 = pct("time_per_output_token")
    thr = _get(s, ["throughput"], path)
    rps = _num(thr.get("requests_per_sec"), path, "successes.throughput.requests_per_sec")
    mean_lat = _num(_get(lat, ["request_latency", "mean"], path), path, "successes.latency.request_latency.mean")
    return [_row(
        concurrency=rps * mean_lat, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
        tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99, request_throughput_rps=rps,
        output_throughput_tps=_num(thr.get("output_tokens_per_sec"), path, "successes.throughput.output_tokens_per_sec"),
        mean_input_tokens=_num(_get(s, ["prompt_len", "mean"], path), path, "successes.prompt_len.mean"),
        mean_output_tokens=_num(_get(s, ["output_len", "mean"], path), path, "successes.output_len.mean"),
        num_requests=n_ok, load_kind="rate", concurrency_source="littles_law",
        request_rate_target=_num(ls["requested_rate"], path, "load_summary.requested_rate"),
        failed_requests=_opt(d.get("failures") or {}, "count"), format="inference-perf",
    )]


def _parse_inference_benchmarker(d, path):
    cfg = d["config"]
    rows = []
    prompt = (cfg.get("prompt_options") or {}).get("num_tokens")
    for i, r in enumerate(d["results"]):
        rid = r.get("id")
        if rid == "warmup":
            continue  # the tool's own warm-up, not a measurement
        ex = r.get("executor_type")
        ok = _num(r.get("successful_requests"), path, f"results[{i}].successful_requests")
        if ok <= 0:
            raise _err(path, f"results[{i}] ({rid}): 'successful_requests' is 0")

        def pct(metric):
            m = _get(r, [metric], path, f"results[{i}]")
            return _opt(m, "p50", 1e-3), _opt(m, "p95", 1e-3), _opt(m, "p99", 1e-3)
        t50, t95, t99 = pct("time_to_first_token_ms")
        p50, p95, p99 = pct("inter_token_latency_ms")
        rps = _num(r.get("request_rate"), path, f"results[{i}].request_rate")
        if ex == "ConstantVUs":
            kind, src, rate = "concurrency", "set", _NAN
            n = _num(_get(r, ["config", "max_vus"], path), path, f"results[{i}].config.max_vus")
        elif ex == "ConstantArrivalRate":
            kind, src = "rate", "littles_law"
            rate = _num(_get(r, ["config", "rate"], path), path, f"results[{i}].config.rate")
            n = rps * _num(_get(r, ["e2e_latency_ms", "avg"], path), path, f"results[{i}].e2e_latency_ms.avg") / 1e3
        else:
            raise _err(path, f"results[{i}].executor_type {ex!r} is not ConstantVUs or ConstantArrivalRate")
        sent = r.get("total_tokens_sent")
        rows.append(_row(
            concurrency=n, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
            tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99, request_throughput_rps=rps,
            output_throughput_tps=_num(r.get("token_throughput_secs"), path, f"results[{i}].token_throughput_secs"),
            mean_input_tokens=(float(sent) / ok) if sent is not None else (float(prompt) if prompt else _NAN),
            mean_output_tokens=_num(r.get("total_tokens"), path, f"results[{i}].total_tokens") / ok,
            num_requests=ok, model=cfg.get("model_name"), engine=(cfg.get("meta") or {}).get("engine"),
            load_kind=kind, concurrency_source=src, request_rate_target=rate,
            failed_requests=_opt(r, "failed_requests"), format="inference-benchmarker", point=rid,
        ))
    return rows


def _parse_capbook(text, path):
    df = pd.read_csv(io.StringIO(text))
    rows = []
    for _, r in df.iterrows():
        row = _row(**{k: (None if (isinstance(v, float) and math.isnan(v) and k in CONFIG_COLUMNS) else v)
                      for k, v in r.items()})
        row["format"] = "capbook"
        if not isinstance(row["load_kind"], str):
            row["load_kind"] = "concurrency"
        if not isinstance(row["concurrency_source"], str):
            row["concurrency_source"] = "set"
        rows.append(row)
    return rows


# -- file walking --------------------------------------------------------------------------------
def _rows_for_file(path: Path, concurrency=None):
    text = _read_text(path)
    kind, obj = _detect_text(path, text)
    if kind in ("aiperf", "genai-perf"):
        rows = _parse_profile_export(obj, path, kind)
    elif kind == "aiperf-csv":
        rows = _parse_aiperf_csv(obj, path, concurrency)
    elif kind == "vllm":
        rows = _parse_vllm(obj, path)
    elif kind == "guidellm":
        rows = _parse_guidellm(obj, path)
    elif kind == "guidellm-csv":
        rows = _parse_guidellm_csv(obj, path)
    elif kind == "llmperf":
        rows = _parse_llmperf(obj, path)
    elif kind == "llmperf-requests":
        rows = _parse_llmperf_requests(obj, path, concurrency)
    elif kind == "inference-perf":
        rows = _parse_inference_perf(obj, path)
    elif kind == "inference-perf-prometheus":
        raise _Reject(f"{path}: inference-perf server-side (Prometheus) metrics, not a client "
                      "measurement; read the *_lifecycle_metrics.json files")
    elif kind == "inference-benchmarker":
        rows = _parse_inference_benchmarker(obj, path)
    elif kind == "capbook":
        rows = _parse_capbook(obj, path)
    else:  # pragma: no cover - _detect_text only returns known kinds
        raise _err(path, f"unsupported format {kind!r}")
    for r in rows:
        r["source_file"] = str(path)
    return rows


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
                raise ValueError(f"{p}: folder holds no .json, .jsonl or .csv files")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise ValueError(f"{p}: file does not exist")
    if not out:
        raise ValueError("no input files given")
    return out


def read_points(path_or_paths, *, concurrency=None) -> pd.DataFrame:
    """Read every load point from files or folders into one flat table.

    Parameters
    ----------
    path_or_paths : str, Path or iterable of them
        Files, or folders searched recursively for ``.json``, ``.jsonl`` and ``.csv`` files.
    concurrency : float, optional
        The load point for formats that do not record it (a lone aiperf CSV, a per-request
        llmperf file).

    Returns
    -------
    pandas.DataFrame
        The sweep-table columns, the configuration columns, and ``load_kind``,
        ``concurrency_source``, ``request_rate_target``, ``failed_requests``, ``format``,
        ``source_file``, ``point`` (plus ``max_num_seqs``/``run_number`` for ``vllm bench
        sweep``). ``df.attrs["skipped"]`` lists files in folders that were not load points and
        why (READMEs, configs, aggregates, server-side metrics).

    Raises
    ------
    ValueError
        A file named explicitly is not a supported format, or a recognised file lacks a field
        (the message names the file and the field).
    """
    if not isinstance(path_or_paths, (str, Path)):
        path_or_paths = list(path_or_paths)
    files = _expand(path_or_paths)
    explicit = {Path(p) for p in ([path_or_paths] if isinstance(path_or_paths, (str, Path)) else path_or_paths)
                if not Path(p).is_dir()}
    rows, skipped = [], []
    for f in files:
        try:
            rows.extend(_rows_for_file(f, concurrency))
        except _Reject as exc:
            if f in explicit:
                raise ValueError(str(exc)) from None
            skipped.append((str(f), str(exc)))
        except ValueError as exc:
            # inside a folder, files that are not load-generator output (configs, READMEs,
            # side files) are listed as skipped; a recognised file with a problem still raises
            msg = str(exc)
            if f not in explicit and ("not a recognised" in msg or "not valid JSON" in msg):
                skipped.append((str(f), msg))
                continue
            raise
    if not rows:
        raise ValueError(f"no load points found in {path_or_paths}; skipped: "
                         + "; ".join(f"{a} ({b})" for a, b in skipped))
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
    df = pd.DataFrame(uniq)
    first = METRIC_COLUMNS + CONFIG_COLUMNS + _EXTRA
    df = df[first + [c for c in df.columns if c not in first]]
    df.attrs["skipped"] = skipped
    return df


def read_sweep(path_or_paths, *, load: str = "auto", where: Mapping | Callable | None = None,
               repeats: str = "error", config: Mapping | None = None, name: str | None = None,
               concurrency=None) -> Sweep:
    """Read a load generator's output into a :class:`~capbook.sweep.Sweep` (format auto-detected).

    Parameters
    ----------
    path_or_paths : str, Path or iterable of them
        One file (a single point, a JSONL of points, a report holding a whole sweep), several
        files, or a folder (searched recursively).
    load : {"auto", "concurrency", "rate", "all"}
        Which kind of load point to keep. ``"auto"`` keeps all and raises if closed-loop
        (fixed concurrency) and open-loop (fixed rate) points are mixed; choose one then.
        ``"rate"`` also keeps a tool's unbounded ``throughput``/``burst`` point. ``"all"``
        keeps both kinds (e.g. GuideLLM's sweep: a synchronous point, then rates), ordered by
        their (set or measured) concurrency.
    where : mapping or callable, optional
        Keep only points matching ``{column: value}`` (e.g. ``{"max_num_seqs": 4}``), or for
        which ``where(points_df)`` is True.
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

    Returns
    -------
    Sweep
    """
    if load not in ("auto", "concurrency", "rate", "all"):
        raise ValueError(f"load={load!r} must be 'auto', 'concurrency', 'rate' or 'all'")
    if repeats not in ("error", "mean"):
        raise ValueError(f"repeats={repeats!r} must be 'error' or 'mean'")
    if not isinstance(path_or_paths, (str, Path)):
        path_or_paths = list(path_or_paths)
        if not path_or_paths:
            raise ValueError("no input files given")
    pts = read_points(path_or_paths, concurrency=concurrency)
    skipped = list(pts.attrs.get("skipped", []))
    src = path_or_paths if isinstance(path_or_paths, (str, Path)) else next(iter(path_or_paths))
    if where is not None:
        if callable(where):
            mask = np.asarray(where(pts), bool)
        else:
            mask = np.ones(len(pts), bool)
            for k, v in where.items():
                if k not in pts.columns:
                    raise ValueError(f"where: column {k!r} not in the points (have {list(pts.columns)})")
                mask &= (pts[k] == v).to_numpy()
        pts = pts[mask]
        if pts.empty:
            raise ValueError(f"where={where!r} keeps no point of {src}")
    kinds = set(pts["load_kind"])
    closed, open_ = {"concurrency"}, {"rate", "throughput", "burst"}
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
    # configuration columns that differ between points mean several sweeps
    for c in ["model", "max_num_seqs"]:
        if c in pts.columns:
            vals = pts[c].dropna().unique().tolist()
            if len(vals) > 1:
                raise ValueError(
                    f"{src} holds points of several configurations ({c} = {list(vals)}); "
                    f"select one with where={{{c!r}: ...}}"
                )
    dup = pts["concurrency"][pts["concurrency"].duplicated()]
    if len(dup):
        if repeats == "error":
            files = pts[pts["concurrency"].isin(dup)]["source_file"].tolist()
            raise ValueError(
                f"{src} has several points at concurrency {sorted(set(dup))} ({files}); pass "
                "repeats='mean' to average repeated runs, or where=... to choose"
            )
        num = [c for c in pts.columns if c not in ("num_requests", "concurrency")
               and pd.api.types.is_numeric_dtype(pts[c])]
        agg = {c: "mean" for c in num}
        agg.update({"num_requests": "sum"})
        agg.update({c: "first" for c in pts.columns if c not in agg and c != "concurrency"})
        counts = pts.groupby("concurrency").size()
        pts = pts.groupby("concurrency", as_index=False).agg(agg)
        pts["runs_averaged"] = pts["concurrency"].map(counts).to_numpy()
    pts = pts.copy()
    for k, v in (config or {}).items():
        if k not in CONFIG_COLUMNS:
            raise ValueError(f"config key {k!r} is not one of {CONFIG_COLUMNS}")
        pts[k] = pts[k].where(pts[k].notna(), v) if k in pts else v
    if name is None:
        p = Path(src)
        name = p.stem if p.is_file() else p.name
    sweep = Sweep.from_frame(pts.reset_index(drop=True), name=name)
    sweep.skipped = skipped
    return sweep
