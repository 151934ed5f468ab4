"""vLLM's ``benchmark_serving.py --save-result`` / ``vllm bench serve`` JSON, JSON Lines from
``--append-result``, and the ``vllm bench sweep`` folder layout (format ``vllm``)."""
from __future__ import annotations

import math

import numpy as np

from capbook.formats import FileFormat
from capbook.sweeps import configurations as _cfgs
from capbook.sweeps.importers._common import (
    _Failed, _NAN, _array_quantiles, _completion_check, _get, _is_map, _num, _opt, _records, _row,
    _saturate, _set_tokens, _tpot_check,
)


def _vllm_point(d, path):
    completed = _num(_get(d, ["completed"], path), path, "completed")
    if completed <= 0:
        raise _Failed(f"{path}: field 'completed' is {completed:g}: no request succeeded "
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
    errs, ins = d.get("errors"), d.get("input_lens")
    if isinstance(outs, list) and outs:
        if isinstance(errs, list) and len(errs) == len(outs):
            good = [i for i, e in enumerate(errs) if not e]
        elif isinstance(ttfts, list) and len(ttfts) == len(outs):
            good = [i for i in range(len(outs)) if ttfts[i] and outs[i]]
        else:
            good = list(range(len(outs)))
        has_in = isinstance(ins, list) and len(ins) == len(outs)
        _set_tokens(row, _array_quantiles([outs[i] for i in good]),
                    _array_quantiles([ins[i] for i in good]) if has_in else {},
                    "per-request arrays output_lens" + (", input_lens" if has_in else ""))
    mc = d.get("max_concurrency")
    rate = d.get("request_rate")
    rate_f = _NAN if rate in (None, "inf") or (isinstance(rate, float) and math.isinf(rate)) else float(rate)
    if mc is not None:
        row.update(concurrency=float(mc), load_kind="concurrency", concurrency_source="set",
                   request_rate_target=rate_f)
        if not math.isnan(rate_f):  # a rate limit as well as a concurrency cap
            row["load_kind"] = "rate"
    mean_e2e, e2e_measured = _opt(d, "mean_e2el_ms", 1e-3), True
    if math.isnan(mean_e2e):
        # the per-request arrays give the mean latency exactly when present; otherwise mean TTFT
        # + mean TPOT x (mean output tokens - 1) is the best the summary allows
        if isinstance(ttfts, list) and isinstance(itls, list) and ttfts:
            mean_e2e = float(np.mean([t + sum(i) for t, i in zip(ttfts, itls) if t]))
        else:
            e2e_measured = False
            mean_e2e = _opt(d, "mean_ttft_ms", 1e-3) + _opt(d, "mean_tpot_ms", 1e-3) * (row["mean_output_tokens"] - 1)
    mean_ttft = _opt(d, "mean_ttft_ms", 1e-3)
    if e2e_measured:
        _tpot_check(row, e2e=mean_e2e, ttft=mean_ttft, out=row["mean_output_tokens"],
                    reported=_opt(d, "mean_tpot_ms", 1e-3), what="mean_tpot_ms")
    else:
        row["mean_e2e_s"], row["mean_ttft_s"] = mean_e2e, mean_ttft
    if mc is None or row["load_kind"] == "rate":
        if math.isnan(mean_e2e):
            _get(d, ["mean_ttft_ms"], path)
            _get(d, ["mean_tpot_ms"], path)
        row.update(concurrency=rps * mean_e2e, concurrency_source="littles_law",
                   load_kind="rate" if not math.isnan(rate_f) else "burst",
                   request_rate_target=rate_f, offered_rps=rate_f)
        if math.isnan(rate_f):
            _saturate(row, "unbounded request rate: every request sent at once, so the point measures "
                           "the engine saturated, not a load level")
        else:
            _completion_check(row, rate=rate_f, count=completed, e2e=mean_e2e)
    for extra in ("max_num_seqs", "run_number"):
        if extra in d:
            row[extra] = d[extra]
    row["_identity"] = (d.get("date"), d.get("model_id"), d.get("duration"), d.get("run_number"))
    row["_cfg"] = _cfgs.vllm_recorded(d)
    return row


def _parse_vllm(obj, path):
    items = obj if isinstance(obj, list) else [obj]
    return [_vllm_point(x, path) for x in items]


def _is_vllm(d) -> bool:
    return _is_map(d) and ("median_ttft_ms" in d or "mean_ttft_ms" in d) and "request_throughput" in d


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("vllm", "vLLM benchmark_serving / vllm bench serve JSON, or JSONL of them",
               lambda p: _is_vllm(p.json) or (_records(p.json) and all(map(_is_vllm, p.json))),
               lambda p, path, o: _parse_vllm(p.json, path)),
)
