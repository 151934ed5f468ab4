"""SGLang ``bench_serving --output-file`` JSON Lines, one line per run (format ``sglang``): vLLM's
layout grown apart, read through ``vllm_bench._vllm_point``."""
from __future__ import annotations

from capbook.formats import FileFormat
from capbook.sweeps import configurations as _cfgs
from capbook.sweeps.importers._common import _get, _is_map, _num, _records
from capbook.sweeps.importers.vllm_bench import _vllm_point


def _is_sglang(d) -> bool:
    """SGLang ``bench_serving`` JSONL lines: vLLM's layout grown apart (it alone counts
    ``total_output_tokens_retokenized``; before 2025 it wrote no request throughput or TPOT)."""
    return _is_map(d) and "total_output_tokens_retokenized" in d and "median_ttft_ms" in d


def _sglang_point(d, path):
    """One SGLang ``bench_serving`` line as a vLLM summary: the older layout's missing request
    throughput is completed / duration, its missing TPOT the median inter-token latency (what
    SGLang's TPOT excludes, the first token, ITL never holds), and its E2E field renamed."""
    v = dict(d)
    notes = []
    if "request_throughput" not in v:
        v["request_throughput"] = _num(_get(d, ["completed"], path), path, "completed") / \
            _num(_get(d, ["duration"], path), path, "duration")
        notes.append("request throughput = completed / duration")
    if "median_tpot_ms" not in v:
        v["median_tpot_ms"] = _num(_get(d, ["median_itl_ms"], path), path, "median_itl_ms")
        notes.append("TPOT p50 read from the median inter-token latency (the file records no TPOT)")
    if "mean_e2el_ms" not in v and "mean_e2e_latency_ms" in v:
        v["mean_e2el_ms"] = v["mean_e2e_latency_ms"]
    row = _vllm_point(v, path)
    row["format"] = "sglang"
    cfg = _cfgs.sglang_recorded(d)   # server_info: the engine's own record of its limits
    for k, x in row["_cfg"].items():
        cfg.setdefault(k, x)
    row["_cfg"] = cfg
    row["engine"] = row.get("engine") or ("sglang" if str(d.get("backend", "")).startswith("sglang") else None)
    # the workload is part of what a line measures: a file that appends sharegpt runs to random
    # ones holds two sweeps, not one
    ds = d.get("dataset_name")
    if ds == "random":
        ds = f"random {d.get('random_input_len')}/{d.get('random_output_len')}"
    row["workload"] = None if ds is None else str(ds)
    if notes:
        prev = row.get("tpot_note")
        row["tpot_note"] = "; ".join(([prev] if isinstance(prev, str) and prev else []) + ["SGLang: " + n for n in notes])
    return row


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("sglang", "SGLang bench_serving JSONL (one summary line per run, either layout)",
               lambda p: _is_sglang(p.json) or (_records(p.json) and all(map(_is_sglang, p.json))),
               lambda p, path, o: [_sglang_point(x, path) for x in (p.json if isinstance(p.json, list)
                                                                    else [p.json])]),
)
