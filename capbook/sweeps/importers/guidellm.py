"""GuideLLM: ``benchmarks.json`` (``benchmarks[].metrics``; format ``guidellm``) and its
per-benchmark CSV (``ttft_median_ms``, ``itl_median_ms``, ``concurrency_mean``; format
``guidellm-csv``)."""
from __future__ import annotations

import io
import math
from typing import Mapping

import pandas as pd

from capbook.formats import FileFormat
from capbook.sweeps.importers._common import (
    _Failed, _NAN, _completion_check, _err, _get, _is_map, _num, _opt, _renamed, _row, _saturate,
    _set_tokens, _tpot_check,
)


def _gl_metric(m, name, path, bi):
    mm = _get(m, [name, "successful"], path, f"benchmarks[{bi}].metrics")
    pct = mm.get("percentiles") or {}
    return mm, (_opt(mm, "median"), _opt(pct, "p95"), _opt(pct, "p99"))


def _parse_guidellm(d, path, skipped=None):
    rows = []
    for bi, b in enumerate(d["benchmarks"]):
        m = _get(b, ["metrics"], path, f"benchmarks[{bi}]")
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
        if ok <= 0:
            if skipped is not None:
                skipped.append((f"{path} benchmarks[{bi}]", f"failed run: 0 requests completed "
                                                            f"({err} errored); skipped"))
            continue
        _, (t50, t95, t99) = _gl_metric(m, "time_to_first_token_ms", path, bi)
        _, (p50, p95, p99) = _gl_metric(m, "inter_token_latency_ms", path, bi)
        rps_m, _ = _gl_metric(m, "requests_per_second", path, bi)
        conc_m, _ = _gl_metric(m, "request_concurrency", path, bi)
        pin, _ = _gl_metric(m, "prompt_token_count", path, bi)
        pout, _ = _gl_metric(m, "output_token_count", path, bi)
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
        row = _row(
            concurrency=n, ttft_p50_s=t50 / 1e3, ttft_p95_s=t95 / 1e3, ttft_p99_s=t99 / 1e3,
            tpot_p50_s=p50 / 1e3, tpot_p95_s=p95 / 1e3, tpot_p99_s=p99 / 1e3,
            request_throughput_rps=_num(rps_m.get("mean"), path, "requests_per_second.successful.mean"),
            output_throughput_tps=out_tps,
            mean_input_tokens=_num(pin.get("mean"), path, "prompt_token_count.successful.mean"),
            mean_output_tokens=_num(pout.get("mean"), path, "output_token_count.successful.mean"),
            num_requests=ok, model=(b.get("worker") or {}).get("backend_model"),
            load_kind=kind, concurrency_source=src, request_rate_target=rate,
            failed_requests=float(err) if err is not None else _NAN, format="guidellm",
            point=f"{stype}[{bi}]", offered_rps=rate,
        )

        def token_stats(mm):
            pct = mm.get("percentiles") if isinstance(mm.get("percentiles"), Mapping) else {}
            med = mm.get("median") if mm.get("median") is not None else pct.get("p50")
            return {**_renamed(pct, {"p1": "p01", "p5": "p05"}), "min": mm.get("min"),
                    "max": mm.get("max"), "p50": med}
        _set_tokens(row, token_stats(pout), token_stats(pin),
                    "output_token_count, prompt_token_count (successful)")
        lat = (m.get("request_latency") or {}).get("successful") or {}
        ttm = (m.get("time_to_first_token_ms") or {}).get("successful") or {}
        itm = (m.get("inter_token_latency_ms") or {}).get("successful") or {}
        e2e = _opt(lat, "mean")
        _tpot_check(row, e2e=e2e, ttft=_opt(ttm, "mean", 1e-3), out=row["mean_output_tokens"],
                    reported=_opt(itm, "mean", 1e-3), what="inter_token_latency_ms (mean)")
        if kind == "throughput":
            _saturate(row, "throughput profile: every request sent at once, so the point "
                           "measures the engine saturated, not a load level")
        elif kind == "rate":
            _completion_check(row, rate=rate, count=ok, e2e=e2e)
        rows.append(row)
    if not rows:
        if d["benchmarks"]:
            raise _Failed(f"{path}: no benchmark has a successful request; this run holds no "
                          "measurement")
        raise _err(path, "field 'benchmarks' is empty")
    return rows


def _parse_guidellm_csv(text, path, skipped=None):
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
                raise _err(path, f"line {i + 2}: column {c!r} is empty or not a number ({r[c]!r})")
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
        if ok <= 0:
            if skipped is not None:
                skipped.append((f"{path} row {i} ({r.get('source_file')})",
                                "failed run: 0 requests completed; skipped"))
            continue
        row = _row(
            concurrency=n, ttft_p50_s=f("ttft_median_ms", 1e-3), ttft_p95_s=f("ttft_p95_ms", 1e-3),
            ttft_p99_s=f("ttft_p99_ms", 1e-3), tpot_p50_s=f("itl_median_ms", 1e-3),
            tpot_p95_s=f("itl_p95_ms", 1e-3), tpot_p99_s=f("itl_p99_ms", 1e-3),
            request_throughput_rps=f("rps_mean"),
            output_throughput_tps=f("rps_mean") * f("output_tokens_mean"),
            mean_input_tokens=f("prompt_tokens_mean"), mean_output_tokens=f("output_tokens_mean"),
            num_requests=ok, load_kind=kind, concurrency_source=src,
            request_rate_target=f("rate"), failed_requests=f("error_requests"),
            format="guidellm-csv", point=r.get("source_file"), offered_rps=f("rate"),
            source_line=i + 2,
        )
        e2e = f("req_latency_mean_s")
        _tpot_check(row, e2e=e2e, ttft=f("ttft_mean_ms", 1e-3), out=row["mean_output_tokens"],
                    reported=f("itl_mean_ms", 1e-3), what="itl_mean_ms")
        if prof in ("constant", "poisson"):   # the arrival process: runs at one rate with two
            row["arrivals"] = prof              # processes are two levels, not repeats
        if kind == "throughput":
            _saturate(row, "throughput profile: every request sent at once, so the point "
                           "measures the engine saturated, not a load level")
        elif kind == "rate":
            _completion_check(row, rate=f("rate"), count=ok, e2e=e2e)
        rows.append(row)
    if not rows and len(df):
        raise _Failed(f"{path}: no row has a completed request; this file holds no measurement")
    return rows


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("guidellm", "GuideLLM benchmarks.json (benchmarks[].metrics)",
               lambda p: _is_map(p.json) and isinstance(p.json.get("benchmarks"), list),
               lambda p, path, o: _parse_guidellm(p.json, path, o.skipped)),
    FileFormat("guidellm-csv", "GuideLLM per-benchmark CSV (ttft_median_ms, itl_median_ms, ...)",
               lambda p: {"ttft_median_ms", "itl_median_ms", "concurrency_mean"} <= set(p.header),
               lambda p, path, o: _parse_guidellm_csv(p.text, path, o.skipped)),
)
