"""inference-perf (kubernetes-sigs): ``stage_N_lifecycle_metrics.json``, one load point per stage
(format ``inference-perf``); saturated when the client could not send at the requested rate."""
from __future__ import annotations

import math
from pathlib import Path

from capbook.formats import FileFormat
from capbook.sweeps.importers._common import (
    _Failed, _Probe, _ReadOptions, _Reject, _get, _is_map, _num, _opt, _renamed, _row, _saturate,
    _set_tokens, _tpot_check,
)


#: Open-loop stage flagged saturated when the achieved send rate is below this share of the
#: requested rate.
_SEND_SHARE = 0.95
#: inference-perf: mean schedule delay (s) above which the client could not send on time.
_SCHEDULE_DELAY_S = 1.0


def _parse_inference_perf(d, path):
    ls = d["load_summary"]
    if "requested_rate" not in ls:
        raise _Reject(f"{path}: inference-perf summary over all stages (no "
                      "'load_summary.requested_rate'), not one load point; read the stage files")
    s = d["successes"]
    lat = _get(s, ["latency"], path)
    n_ok = _num(s.get("count"), path, "successes.count")
    if n_ok <= 0:
        raise _Failed(f"{path}: field 'successes.count' is 0: no request succeeded "
                      f"(failures.count {(d.get('failures') or {}).get('count')})")

    def pct(metric):
        m = _get(lat, [metric], path, "successes.latency")
        return _opt(m, "median"), _opt(m, "p95"), _opt(m, "p99")
    t50, t95, t99 = pct("time_to_first_token")
    p50, p95, p99 = pct("time_per_output_token")
    thr = _get(s, ["throughput"], path)
    rps = _num(thr.get("requests_per_sec"), path, "successes.throughput.requests_per_sec")
    mean_lat = _num(_get(lat, ["request_latency", "mean"], path), path, "successes.latency.request_latency.mean")
    requested = _num(ls["requested_rate"], path, "load_summary.requested_rate")
    achieved = _opt(ls, "achieved_rate")
    stem = path.stem
    row = _row(
        concurrency=rps * mean_lat, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
        tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99, request_throughput_rps=rps,
        output_throughput_tps=_num(thr.get("output_tokens_per_sec"), path, "successes.throughput.output_tokens_per_sec"),
        mean_input_tokens=_num(_get(s, ["prompt_len", "mean"], path), path, "successes.prompt_len.mean"),
        mean_output_tokens=_num(_get(s, ["output_len", "mean"], path), path, "successes.output_len.mean"),
        num_requests=n_ok, load_kind="rate", concurrency_source="littles_law",
        request_rate_target=requested,
        failed_requests=_opt(d.get("failures") or {}, "count"), format="inference-perf",
        point=stem[:-len("_lifecycle_metrics")] if stem.endswith("_lifecycle_metrics") else stem,
        offered_rps=achieved if math.isfinite(achieved) else requested,
        achieved_rate_rps=achieved,
    )
    _set_tokens(row, _renamed(s.get("output_len"), {"p50": "median"}),
                _renamed(s.get("prompt_len"), {"p50": "median"}),
                "successes.output_len, successes.prompt_len (client-tokenised)")
    _tpot_check(row, e2e=mean_lat, ttft=_opt(lat.get("time_to_first_token") or {}, "mean"),
                out=row["mean_output_tokens"], reported=_opt(lat["time_per_output_token"], "mean"),
                what="time_per_output_token (mean)")
    # the client could not drive the stage: it sent slower than asked, or late
    if math.isfinite(achieved) and requested > 0 and achieved < _SEND_SHARE * requested:
        _saturate(row, f"achieved send rate {achieved:.4g} req/s is {achieved / requested:.0%} of "
                       f"the requested {requested:.4g}")
    delay = _opt(ls.get("schedule_delay") or {}, "mean")
    row["schedule_delay_mean_s"] = delay
    if math.isfinite(delay) and delay > _SCHEDULE_DELAY_S:
        _saturate(row, f"mean schedule delay {delay:.3g} s (requests sent late)")
    return [row]


def _read_inference_perf(p: _Probe, path: Path, o: _ReadOptions) -> list:
    if not _is_map(p.json["successes"].get("latency")):
        raise _Reject(f"{path}: inference-perf server-side (Prometheus) metrics, not a client "
                      "measurement; read the *_lifecycle_metrics.json files")
    return _parse_inference_perf(p.json, path)


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("inference-perf", "inference-perf stage_N_lifecycle_metrics.json",
               lambda p: _is_map(p.json) and _is_map(p.json.get("load_summary"))
               and _is_map(p.json.get("successes")),
               _read_inference_perf),
)
