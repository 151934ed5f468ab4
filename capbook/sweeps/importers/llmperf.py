"""llmperf: the ``*_summary.json`` (format ``llmperf``), summaries wrapped in one object keyed by
concurrency (``llmperf-wrapped``), and the per-request ``*_individual_responses.json``
(``llmperf-requests``), summarised as one level with the summary beside it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from capbook.formats import FileFormat
from capbook.sweeps import perrequest
from capbook.sweeps.importers._common import (
    _Failed, _Probe, _ReadOptions, _Reject, _TOKEN_QUANTILES, _err, _get, _is_map, _num, _opt,
    _perrequest_row, _records, _row, _set_tokens, _summarise, _tpot_check,
)


def _parse_llmperf(d, path):
    def q(metric, p):
        return _opt(d, f"results_{metric}_quantiles_p{p}")
    n_ok = _num(_get(d, ["results_num_completed_requests"], path), path, "results_num_completed_requests")
    if n_ok <= 0:
        raise _Failed(f"{path}: field 'results_num_completed_requests' is 0: no request succeeded")
    for k in ("results_ttft_s_quantiles_p50", "results_inter_token_latency_s_quantiles_p50"):
        _get(d, [k], path)
    row = _row(
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
    )

    def tokens(kind):
        out = {q: d.get(f"results_number_{kind}_tokens_quantiles_{q}") for q in _TOKEN_QUANTILES}
        return {**out, "min": d.get(f"results_number_{kind}_tokens_min"),
                "max": d.get(f"results_number_{kind}_tokens_max")}
    _set_tokens(row, tokens("output"), tokens("input"),
                "results_number_output_tokens_*, results_number_input_tokens_*")
    _tpot_check(row, e2e=_opt(d, "results_end_to_end_latency_s_mean"), ttft=_opt(d, "results_ttft_s_mean"),
                out=row["mean_output_tokens"], reported=_opt(d, "results_inter_token_latency_s_mean"),
                what="results_inter_token_latency_s_mean")
    return [row]


def _parse_llmperf_requests(items, path, concurrency=None):
    sum_path, summary = _llmperf_summary_for(Path(path)), None
    if sum_path is not None:
        try:
            summary = json.loads(sum_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            summary = None
        if not isinstance(summary, dict) or "num_concurrent_requests" not in summary:
            sum_path, summary = None, None
    if concurrency is None and summary is not None:
        concurrency = _num(summary.get("num_concurrent_requests"), sum_path, "num_concurrent_requests")
    if concurrency is None:
        raise _err(path, "a per-request llmperf file does not record 'num_concurrent_requests'; "
                         "read the *_summary.json beside it or pass concurrency=")
    # TPOT per request as vLLM and AIPerf define it: (latency - TTFT) / (output tokens - 1);
    # llmperf's own inter_token_latency_s spreads TTFT over the output and is not used
    req = perrequest.requests_from_frame(pd.DataFrame(items), path, row_name=lambda i: f"record {i + 1}")
    per_min = (summary or {}).get("results_num_completed_requests_per_min")
    rps = None
    if per_min is not None:
        rps = _num(per_min, sum_path, "results_num_completed_requests_per_min") / 60.0
        how = f"request throughput from the summary beside it ({sum_path.name})"
    else:
        # closed loop at `concurrency`: Little's law bounds the throughput the file lacks (an
        # upper bound: llmperf's clients idle between requests and failed requests hold slots)
        how = "put the *_summary.json beside it for the measured throughput"
    s = _summarise(req, path, concurrency=concurrency, throughput_rps=rps)
    return [_perrequest_row(s, "llmperf-requests", f"llmperf per-request file: {how}")]


def _llmperf_wrapped(d) -> bool:
    """llmperf summaries wrapped in a dict keyed by concurrency (``{"1": {...}, "8": {...}}`` or
    ``{"concurrency_1": ...}``); a summary flat (``results_ttft_s_quantiles_p50``) or as llmperf
    builds it before flattening (``results: {ttft_s: {quantiles: {p50: ...}}}``)."""
    if not _is_map(d) or not d:
        return False
    return all(_is_map(v) and (any(str(k).startswith("results_ttft_s") for k in v)
                               or (_is_map(v.get("results")) and "ttft_s" in v["results"]))
               and _level_of_key(k) is not None for k, v in d.items())


def _level_of_key(key) -> float | None:
    m = re.fullmatch(r"\s*(?:[A-Za-z_\- ]*?[_\- ]?)?(\d+(?:\.\d+)?)\s*", str(key))
    return float(m.group(1)) if m and float(m.group(1)) > 0 else None


def _flatten(d, prefix="") -> dict:
    """llmperf's own flattening of its summary (nested keys joined by ``_``)."""
    out = {}
    for k, v in d.items():
        name = f"{prefix}_{k}" if prefix else str(k)
        if _is_map(v):
            out.update(_flatten(v, name))
        else:
            out[name] = v
    return out


def _parse_llmperf_wrapped(d, path):
    rows = []
    for k, v in d.items():
        flat = _flatten(v)
        level = _level_of_key(k)
        if "num_concurrent_requests" in flat:
            n = _num(flat["num_concurrent_requests"], path, f"{k}.num_concurrent_requests")
            if n != level:
                raise _err(path, f"key {k!r} says concurrency {level:g} but its "
                                 f"'num_concurrent_requests' is {n:g}: which is the level?")
        else:
            flat["num_concurrent_requests"] = level
        try:
            row = _parse_llmperf(flat, f"{path} [{k!r}]")[0]
        except _Failed:
            continue
        row["point"] = str(k)
        row["format"] = "llmperf-wrapped"
        rows.append(row)
    if not rows:
        raise _Failed(f"{path}: no concurrency key holds a completed request")
    return rows


# -- the summary beside per-request records ---------------------------------------------------------
def _llmperf_summary_for(path: Path) -> Path | None:
    """The llmperf summary of the run whose per-request records ``path`` holds, if beside it."""
    stem = path.stem
    base = stem[:-len("_individual_responses")] if stem.endswith("_individual_responses") else stem
    cands = [path.with_name(f"{base}_summary.json")]
    if path.parent.name == "individual":
        cands.append(path.parent.parent / "summary" / path.name)
        cands.append(path.parent.parent / "summary" / f"{base}_summary.json")
    return next((c for c in cands if c.is_file()), None)


def _read_llmperf_requests(p: _Probe, path: Path, o: _ReadOptions) -> list:
    summary = _llmperf_summary_for(path) if o.in_folder and o.concurrency is None else None
    if summary is not None:
        raise _Reject(f"{path}: per-request records of the run summarised in {summary} "
                      "(read there); pass concurrency= to read this file alone")
    return _parse_llmperf_requests(p.json, path, o.concurrency)


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("llmperf", "llmperf *_summary.json (results_ttft_s_quantiles_p50, ...)",
               lambda p: _is_map(p.json) and any(k.startswith("results_ttft_s") for k in p.json),
               lambda p, path, o: _parse_llmperf(p.json, path)),
    FileFormat("llmperf-wrapped", "llmperf summaries in a JSON object keyed by concurrency "
               "({\"1\": {...}, \"8\": {...}} or {\"concurrency_8\": ...}), one level per key",
               lambda p: _llmperf_wrapped(p.json),
               lambda p, path, o: _parse_llmperf_wrapped(p.json, path)),
    FileFormat("llmperf-requests", "llmperf *_individual_responses.json (one record per request)",
               lambda p: _records(p.json) and "ttft_s" in p.json[0]
               and "end_to_end_latency_s" in p.json[0],
               _read_llmperf_requests),
)
