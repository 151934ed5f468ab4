"""huggingface/inference-benchmarker reports (``results[]``, ``config.benchmark_kind``; format
``inference-benchmarker``)."""
from __future__ import annotations

from capbook.formats import FileFormat
from capbook.sweeps.importers._common import (
    _Failed, _NAN, _completion_check, _err, _get, _is_map, _num, _opt, _row, _tpot_check,
)


def _parse_inference_benchmarker(d, path, skipped=None):
    cfg = d["config"]
    rows = []
    prompt = (cfg.get("prompt_options") or {}).get("num_tokens")
    failed_ids = []
    for i, r in enumerate(d["results"]):
        rid = r.get("id")
        if rid == "warmup":
            continue  # the tool's own warm-up, not a measurement
        ex = r.get("executor_type")
        ok = _num(r.get("successful_requests"), path, f"results[{i}].successful_requests")
        if ok <= 0:
            failed_ids.append(f"results[{i}] ({rid})")
            if skipped is not None:
                skipped.append((f"{path} results[{i}] ({rid})", f"failed run: 'successful_requests' "
                                                                 f"is 0 ({r.get('failed_requests')} failed); skipped"))
            continue

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
        row = _row(
            concurrency=n, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
            tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99, request_throughput_rps=rps,
            output_throughput_tps=_num(r.get("token_throughput_secs"), path, f"results[{i}].token_throughput_secs"),
            mean_input_tokens=(float(sent) / ok) if sent is not None else (float(prompt) if prompt else _NAN),
            mean_output_tokens=_num(r.get("total_tokens"), path, f"results[{i}].total_tokens") / ok,
            num_requests=ok, model=cfg.get("model_name"), engine=(cfg.get("meta") or {}).get("engine"),
            load_kind=kind, concurrency_source=src, request_rate_target=rate,
            failed_requests=_opt(r, "failed_requests"), format="inference-benchmarker", point=rid,
            offered_rps=rate,
        )
        e2e = _opt(r.get("e2e_latency_ms") or {}, "avg", 1e-3)
        _tpot_check(row, e2e=e2e, ttft=_opt(r.get("time_to_first_token_ms") or {}, "avg", 1e-3),
                    out=row["mean_output_tokens"], reported=_opt(r.get("inter_token_latency_ms") or {}, "avg", 1e-3),
                    what="inter_token_latency_ms (avg)")
        if kind == "rate":
            _completion_check(row, rate=rate, count=ok, e2e=e2e)
        rows.append(row)
    if not rows and failed_ids:
        raise _Failed(f"{path}: {', '.join(failed_ids)}: 'successful_requests' is 0; this report "
                      "holds no measurement")
    return rows


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("inference-benchmarker", "huggingface/inference-benchmarker report (results[])",
               lambda p: _is_map(p.json) and isinstance(p.json.get("results"), list)
               and _is_map(p.json.get("config")) and "benchmark_kind" in p.json["config"],
               lambda p, path, o: _parse_inference_benchmarker(p.json, path, o.skipped)),
)
