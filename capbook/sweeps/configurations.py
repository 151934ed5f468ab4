"""Configuration identity of load points: what a result file records about the deployment it measured.

A sweep is one engine configuration measured at several load levels. The files a load
generator leaves behind record that configuration in several places, and
:func:`capbook.sweeps.importers.read_points` gathers all of them into columns of the points table:

* the result's own fields: vLLM ``--metadata KEY=VALUE`` pairs (``benchmark_serving.py`` and
  ``vllm bench serve`` write them as top-level keys of the result JSON, beside ``date`` and
  ``model_id``), its ``label``, ``burstiness`` and, for a rate-limited run, ``max_concurrency``;
  the server parameters ``vllm bench sweep`` merges in (``max_num_seqs`` …); SGLang's
  ``server_info`` (the server's arguments: ``tp_size``, ``max_running_requests``,
  ``chunked_prefill_size``, ``mem_fraction_static``, ``model_path`` …) and its
  ``dataset_name`` / ``random_input_len`` / ``random_output_len``;
* the engine's command line or manifest beside the results (:mod:`capbook.sweeps.importers`);
* the names of the result's folder and its parent and of the file: a GPU (``A100``,
  ``4xNVIDIA_L40S``), a deployment (``1p1d`` / ``2p1d`` prefill/decode pools, ``vllm-3replicas``),
  input/output lengths (``in1024_out128``),
  ``tp8`` / ``pp1`` (the vLLM nightly suite's ``serving_<model>_tp8_pp1_sharegpt_qps_4.json``), and
  the label of vLLM's own ``<label>-<rate>qps-<model>-<date>.json`` name. Parts of a name that are
  load levels (``qps_4``, ``c16``, ``rate_2``), timestamps, run numbers or repeat indices are not
  configuration.

Points are one configuration only when every recorded key is equal (:data:`KEY_ORDER` and
the metadata keys); :func:`capbook.sweeps.importers.read_sweep` refuses several, naming each key that
differs and its values. Keys a file marks as bookkeeping (``timestamp``, ``run``, ``seed``, a
value that is a date) are kept as columns but do not tell configurations apart.

Fleet-level results (several replicas behind one router, or prefill/decode pools) are
recognised from ``replicas`` / ``decode_replicas`` / ``prefill_replicas`` keys, a ``dp_size``
above 1 (SGLang data parallelism without DP attention), or the folder names above: plain
replicas are divided into one replica's sweep (:func:`divide_fleet`); prefill/decode pools have
no per-replica equivalent and are refused by :func:`capbook.sweeps.importers.read_sweep`.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

__all__ = ["KEY_ORDER", "canonical_key", "parse_gpu", "vllm_recorded", "sglang_recorded",
           "path_recorded", "divide_fleet", "fleet_notes", "fleet_kind", "derive_lengths"]

#: Configuration keys with a fixed meaning, in the order an error message lists them. Any
#: other recorded key (a vLLM ``--metadata`` key such as ``deployment``) follows them.
KEY_ORDER = ("max_num_seqs", "model", "params_b", "gpu", "tensor_parallel", "engine", "precision",
             "num_gpus", "pipeline_parallel", "data_parallel", "replicas", "prefill_replicas",
             "decode_replicas", "router", "workload", "dataset", "input_len", "output_len",
             "burstiness", "max_concurrency", "label", "engine_version",
             "chunked_prefill", "prefix_caching", "max_num_batched_tokens", "max_model_len",
             "gpu_memory_utilization", "block_size", "kv_cache_dtype", "quantization",
             "num_speculative_tokens", "speculative_method", "engine_v1", "kv_cache_tokens",
             "max_prefill_tokens", "schedule_policy", "attention_backend")

#: Spellings of the fixed keys in metadata, server arguments and file names.
_ALIASES = {
    "gpu_type": "gpu", "gpu_name": "gpu", "accelerator": "gpu", "hardware": "gpu", "hw": "gpu",
    "device": "gpu",
    "tp": "tensor_parallel", "tp_size": "tensor_parallel", "tensor_parallel_size": "tensor_parallel",
    "pp": "pipeline_parallel", "pp_size": "pipeline_parallel", "pipeline_parallel_size": "pipeline_parallel",
    "dp": "data_parallel", "dp_size": "data_parallel", "data_parallel_size": "data_parallel",
    "num_replicas": "replicas", "n_replicas": "replicas", "replica_count": "replicas",
    "num_prefill_replicas": "prefill_replicas", "prefill_replica": "prefill_replicas",
    "num_decode_replicas": "decode_replicas", "decode_replica": "decode_replicas",
    "routing": "router", "router_policy": "router", "routing_policy": "router", "load_balancer": "router",
    "dataset_name": "dataset",
    "random_input_len": "input_len", "input_length": "input_len", "isl": "input_len",
    "random_output_len": "output_len", "output_length": "output_len", "osl": "output_len",
    "max_running_requests": "max_num_seqs", "model_path": "model", "model_name": "model",
    "served_model_name": "model", "dtype": "precision", "gpus": "num_gpus", "num_gpu": "num_gpus",
}
_INT_KEYS = {"tensor_parallel", "pipeline_parallel", "data_parallel", "replicas", "prefill_replicas",
             "decode_replicas", "num_gpus", "input_len", "output_len", "max_num_seqs",
             "max_num_batched_tokens", "max_model_len", "block_size", "num_speculative_tokens",
             "kv_cache_tokens", "max_prefill_tokens", "max_concurrency"}

#: vLLM result fields (``benchmark_serving.py`` / ``vllm bench serve`` / ``vllm bench sweep``):
#: any other top-level scalar of a result is a ``--metadata`` key.
_VLLM_FIELDS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "request_goodput:", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests", "rtfx", "input_lens", "output_lens", "ttfts", "itls", "latencies",
    "start_times", "queue_times", "generated_texts", "errors", "run_number", "max_num_seqs",
    "rps_change_events", "input_throughput", "total_output_tokens_retokenized", "concurrency",
    "accept_length", "server_info", "random_range_ratio", "sharegpt_output_len", "tag",
    "dataset_name", "random_input_len", "random_output_len", "output_throughput_retokenized",
    "total_throughput", "total_throughput_retokenized", "input_sequence_throughput",
    "total_input_sequences", "model", "tokenizer", "num_warmups",
}
_VLLM_FIELD_RE = re.compile(r"^(mean|median|std|max|min|p\d+(\.\d+)?)_\w+_(ms|s)$|"
                            r"^(spec_decode|diffusion|probe|ramp_up)_", re.I)
#: Keys that name bookkeeping, not configuration: recorded, never an identity.
_BOOKKEEPING = re.compile(r"(^|_)(date|time|timestamp|datetime|start|started|end|ended|run|runs|"
                          r"run_number|run_id|repeat|repetition|iteration|iter|trial|seed|uuid|id|"
                          r"index|idx|host|hostname|user|notes?|comment)(_|$)", re.I)
_DATE_VALUE = re.compile(r"^\d{4}-?\d{2}-?\d{2}([T _-]?\d{2}[:-]?\d{2})?")


def canonical_key(name: str) -> str:
    """A recorded key in capbook's spelling: lower case, ``-`` as ``_``, aliases resolved
    (``tp`` → ``tensor_parallel``, ``gpu_type`` → ``gpu``, ``random_input_len`` → ``input_len``).

    Examples
    --------
    >>> canonical_key("TP-Size"), canonical_key("deployment")
    ('tensor_parallel', 'deployment')
    """
    k = re.sub(r"[\s-]+", "_", str(name).strip()).lower()
    return _ALIASES.get(k, k)


def is_bookkeeping(key: str, value: Any = None) -> bool:
    """Whether a recorded key is bookkeeping (a timestamp, run or repeat index, a host), not a
    configuration: by its name, or by a value that is a date."""
    if _BOOKKEEPING.search(str(key)):
        return True
    return isinstance(value, str) and bool(_DATE_VALUE.match(value.strip()))


def parse_gpu(value) -> tuple[str | None, int | None]:
    """A GPU field as (name, count): ``4xNVIDIA_L40S`` → ``('NVIDIA_L40S', 4)``; a name without
    a count prefix → (name, None).

    Examples
    --------
    >>> parse_gpu("4xNVIDIA_L40S"), parse_gpu("H100")
    (('NVIDIA_L40S', 4), ('H100', None))
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None, None
    s = str(value).strip()
    m = re.fullmatch(r"(\d+)\s*[x×]\s*(.+)", s, re.I)
    if m and int(m.group(1)) > 0:
        return m.group(2).strip(), int(m.group(1))
    return (s or None), None


def _typed(key: str, value):
    """A recorded value typed for its key: whole numbers for counts, True/False for switches."""
    if isinstance(value, str):
        v = value.strip()
        if key in _INT_KEYS:
            try:
                f = float(v)
            except ValueError:
                return v
            return int(f) if f.is_integer() else f
        low = v.lower()
        if low in ("true", "false"):
            return low == "true"
        return v
    if isinstance(value, float) and key in _INT_KEYS and value.is_integer():
        return int(value)
    return value


def _scalar(v) -> bool:
    return isinstance(v, (str, int, float, bool)) and not (isinstance(v, float) and math.isnan(v))


def _put(out: dict, key: str, value) -> None:
    key = canonical_key(key)
    if not key or not _scalar(value) or (isinstance(value, str) and not value.strip()):
        return
    if key == "gpu":
        name, n = parse_gpu(value)
        if name:
            out.setdefault("gpu", name)
        if n:
            out.setdefault("num_gpus", n)
        return
    out.setdefault(key, _typed(key, value))


def vllm_recorded(d: Mapping) -> dict:
    """Configuration keys a vLLM result records besides its measurements: the ``--metadata``
    pairs (top-level keys that are not vLLM's own fields), ``label``, ``burstiness`` and ``max_concurrency`` when a rate limit applies too (then the level is the rate)."""
    out: dict = {}
    for k, v in d.items():
        if k in _VLLM_FIELDS or _VLLM_FIELD_RE.search(str(k)) or not _scalar(v):
            continue
        _put(out, k, v)
    if _scalar(d.get("label")):
        out.setdefault("label", str(d["label"]))
    rate = d.get("request_rate")
    finite_rate = _scalar(rate) and not isinstance(rate, bool) and str(rate).lower() not in ("inf", "infinity") \
        and _finite(rate)
    if _finite(d.get("burstiness")):  # the arrival process, written for every run (inert at rate inf)
        out.setdefault("burstiness", float(d["burstiness"]))
    if finite_rate and _finite(d.get("max_concurrency")):
        out.setdefault("max_concurrency", int(float(d["max_concurrency"])))
    _dataset_keys(d, out)   # not vLLM's own, but wrappers and SGLang write them
    return out


def _finite(v) -> bool:
    if isinstance(v, bool) or v is None:
        return False
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


#: SGLang server arguments (``/get_server_info``) → capbook's engine columns.
_SGLANG_ARGS = {
    "tp_size": "tensor_parallel", "pp_size": "pipeline_parallel", "dp_size": "data_parallel",
    "max_running_requests": "max_num_seqs", "mem_fraction_static": "gpu_memory_utilization",
    "context_length": "max_model_len", "kv_cache_dtype": "kv_cache_dtype", "quantization": "quantization",
    "page_size": "block_size", "model_path": "model", "max_prefill_tokens": "max_prefill_tokens",
    "schedule_policy": "schedule_policy", "attention_backend": "attention_backend",
    "speculative_algorithm": "speculative_method", "speculative_num_draft_tokens": "num_speculative_tokens",
    "max_total_num_tokens": "kv_cache_tokens", "version": "engine_version",
}


def sglang_recorded(d: Mapping) -> dict:
    """Configuration keys of one SGLang ``bench_serving`` line: its ``server_info`` (the server's
    arguments; for prefill/decode disaggregation, ``{"prefill": [...], "decode": [...]}`` whose
    lengths are the pool sizes), ``tag``, the dataset and its random lengths."""
    out: dict = {}
    info = d.get("server_info")
    if isinstance(info, Mapping):
        pre, dec = info.get("prefill"), info.get("decode")
        if isinstance(pre, list) and isinstance(dec, list):
            out["prefill_replicas"], out["decode_replicas"] = len(pre), len(dec)
            info = dec[0] if dec and isinstance(dec[0], Mapping) else {}
        states = info.get("internal_states")
        state = states[0] if isinstance(states, list) and states and isinstance(states[0], Mapping) else {}
        for src in (info, state):
            for k, col in _SGLANG_ARGS.items():
                v = src.get(k)
                if v is None or not _scalar(v):
                    continue
                if col in ("max_num_seqs", "max_model_len", "kv_cache_tokens", "max_prefill_tokens") \
                        and _finite(v) and float(v) <= 0:
                    continue  # "fit to memory", not a limit
                out.setdefault(col, _typed(col, v))
        cps = info.get("chunked_prefill_size")
        if _finite(cps):
            out.setdefault("chunked_prefill", float(cps) > 0)
            if float(cps) > 0:
                out.setdefault("max_num_batched_tokens", int(float(cps)))
        if isinstance(info.get("disable_radix_cache"), bool):
            out.setdefault("prefix_caching", not info["disable_radix_cache"])
        dtype = info.get("dtype")
        if isinstance(dtype, str) and dtype != "auto":
            out.setdefault("precision", dtype)
        if info.get("enable_dp_attention") is True:
            out["dp_attention"] = True
    if _scalar(d.get("tag")):
        out.setdefault("label", str(d["tag"]))
    _dataset_keys(d, out)
    return out


def _dataset_keys(d: Mapping, out: dict) -> None:
    """``dataset`` and, for a random dataset, the lengths it was asked for (``random_input_len``
    is written for every dataset, and means nothing for sharegpt)."""
    ds = d.get("dataset_name")
    if _scalar(ds):
        out.setdefault("dataset", str(ds))
        if str(ds).startswith("random"):
            for k in ("random_input_len", "random_output_len"):
                if _finite(d.get(k)):
                    _put(out, k, int(float(d[k])))


def profile_recorded(d: Mapping) -> dict:
    """Workload keys of a load generator's options file beside the results: llm-d-benchmark
    copies its ``vllm-benchmark`` profile (``executable: benchmark_serving.py``,
    ``dataset-name``, ``random-input-len``, ``random-output-len`` …) into each results folder."""
    if not isinstance(d, Mapping) or "executable" not in d:
        return {}
    opts = {canonical_key(k): v for k, v in d.items()}
    out: dict = {}
    _dataset_keys({"dataset_name": opts.get("dataset"), "random_input_len": opts.get("input_len"),
                   "random_output_len": opts.get("output_len")}, out)
    for k in ("burstiness",):
        if _finite(opts.get(k)):
            out[k] = float(opts[k])
    return out


# -- folder and file names ----------------------------------------------------------------------
_B = r"(?<![a-z0-9])"      # a token starts here
_E = r"(?![a-z0-9])"       # and ends here
_GPU_NAMES = (r"gb200|gb300|b200|b300|h200|h100|h800|h20|a100|a800|a10g|a10|a30|a40|l40s|l40|l4|"
              r"mi210|mi250x?|mi300x|mi300a|mi325x|mi355x|t4|v100")
_GPU_TOKEN = re.compile(_B + r"(?:(\d+)\s*x[-_ ]?)?((?:nvidia|amd|tesla)[-_ ]?)?(" + _GPU_NAMES + r")"
                        r"((?:[-_](?:sxm\d?|pcie|nvl|\d+gb))*)" + _E, re.I)
_PD_TOKEN = re.compile(_B + r"(\d+)p(\d+)d" + _E, re.I)
_REPLICAS_TOKEN = re.compile(_B + r"(?:(\d+)[-_ ]?replicas?|replicas?[-_=]?(\d+))" + _E, re.I)
_LENGTHS_TOKEN = re.compile(_B + r"(?:in|isl)[-_=]?(\d+)[-_](?:out|osl)[-_=]?(\d+)" + _E, re.I)
#: A model's size in a name (``llama_3_3_70b``, ``Llama-3.1-8B``, ``qwen2.5-0.5b``): billions of
#: parameters, read only where the files do not name the model.
_PARAMS_TOKEN = re.compile(_B + r"(\d+(?:\.\d+)?)b" + _E, re.I)
_TP_TOKEN = re.compile(_B + r"tp[-_=]?(\d+)" + _E, re.I)
_PP_TOKEN = re.compile(_B + r"pp[-_=]?(\d+)" + _E, re.I)
#: vLLM's own result name: ``<label>-<rate>qps[-concurrency<N>]-<model>-<YYYYmmdd-HHMMSS>``.
_VLLM_NAME = re.compile(r"^(?P<label>.+?)-(?P<rate>inf|[\d.]+)qps(?:-concurrency\d+)?-(?P<model>.+)-"
                        r"\d{8}-\d{6}$")


def _name_families(name: str) -> dict:
    """Configuration families a folder or file name states, each a dict of keys."""
    out: dict = {}
    m = _GPU_TOKEN.search(name)
    if m:
        gpu = (m.group(2) or "") + m.group(3) + (m.group(4) or "")
        fam = {"gpu": gpu.upper() if not m.group(2) else gpu}
        if m.group(1):
            fam["num_gpus"] = int(m.group(1))
        out["gpu"] = fam
    pd_ = _PD_TOKEN.search(name)
    rep = _REPLICAS_TOKEN.search(name)
    if pd_:
        out["deployment"] = {"prefill_replicas": int(pd_.group(1)), "decode_replicas": int(pd_.group(2))}
    elif rep:
        out["deployment"] = {"replicas": int(rep.group(1) or rep.group(2))}
    m = _LENGTHS_TOKEN.search(name)
    if m:
        out["lengths"] = {"input_len": int(m.group(1)), "output_len": int(m.group(2))}
    m = _PARAMS_TOKEN.search(name.replace("_", "-"))
    if m and 0 < float(m.group(1)) <= 5000:
        out["params"] = {"params_b": float(m.group(1))}
    for fam, rx, key in (("tp", _TP_TOKEN, "tensor_parallel"), ("pp", _PP_TOKEN, "pipeline_parallel")):
        m = rx.search(name)
        if m:
            out[fam] = {key: int(m.group(1))}
    return out


def path_recorded(path, backend: str | None = None) -> dict:
    """Configuration families the names of a result file, its folder and the folder above state.

    Returns ``{family: (keys, folder)}``: ``family`` is ``"gpu"``, ``"deployment"`` (replicas or
    prefill/decode pools), ``"lengths"`` (``in1024_out128``, ``isl-8000_osl-200``), ``"tp"``,
    ``"pp"`` or ``"label"``; ``folder`` the folder whose name (or
    whose file's name) stated it — the nearest wins.
    """
    p = Path(path)
    out: dict = {}
    for d in (p.parent, p.parent.parent):
        for fam, keys in _name_families(d.name).items():
            out.setdefault(fam, (keys, d))
    for fam, keys in _name_families(p.stem).items():
        out[fam] = (keys, p.parent)  # the file's own name is nearest
    m = _VLLM_NAME.match(p.stem)
    if m and backend is not None and m.group("label") != backend:
        out["label"] = ({"label": m.group("label")}, p.parent)
    return out


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def apply_path_keys(df: pd.DataFrame, found: list) -> list[str]:
    """Fill configuration keys from folder and file names where the files themselves record none.

    A family of keys (``gpu``, ``deployment`` …) is taken from the names only for points whose
    sibling folders all state it too: folders named ``…_mi355x_p02`` beside ``…_mia1-p02`` (host
    names) are one sweep, not two GPUs. Returns the keys filled.
    """
    filled = []
    fams = {f for rec in found for f in rec}
    under: dict = {}   # folder -> positions of the results below it
    for pos, src in enumerate(df["source_file"]):
        for anc in Path(src).parents:
            under.setdefault(str(anc), []).append(pos)
    for fam in sorted(fams):
        # the folders that hold the stating folders; every result under one must state the family
        parents = {str(rec[fam][1].parent) for rec in found if fam in rec}
        ok_parents = {par for par in parents if all(fam in found[pos] for pos in under.get(par, []))}
        for i, rec in zip(df.index, found):
            if fam not in rec or str(rec[fam][1].parent) not in ok_parents:
                continue
            keys = rec[fam][0]
            if fam == "params" and "model" in df and not _missing(df.at[i, "model"]):
                continue  # the file names its model: a size in a folder's name adds nothing
            if fam == "deployment" and any(k in df and not _missing(df.at[i, k])
                                           for k in ("replicas", "prefill_replicas", "decode_replicas")):
                continue  # the file's own record of the deployment wins
            for k, v in keys.items():
                if k not in df:
                    df[k] = None
                if _missing(df.at[i, k]):
                    df.at[i, k] = v
                    if k not in filled:
                        filled.append(k)
    return filled


# -- fleet-level results ------------------------------------------------------------------------
_UNEVEN_ROUTER = re.compile(r"prefix|kv|cache|session|affinity|sticky|hash|precise", re.I)
#: Columns of a fleet's totals that one replica carries a 1/N share of.
FLEET_TOTALS = ("request_throughput_rps", "output_throughput_tps", "concurrency", "request_rate_target",
                "offered_rps", "input_throughput_tps", "total_throughput_tps")


def _count(v) -> int | None:
    if _missing(v) or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f.is_integer() and f >= 0 else None


def fleet_kind(row: Mapping) -> tuple[str | None, int, str]:
    """What a point measured: ``(None, 1, "")`` one replica; ``("replicas", N, why)`` N plain
    replicas behind a router; ``("pd", P + D, why)`` prefill/decode pools; ``("uneven", N, why)``
    N replicas behind a router that does not spread requests evenly."""
    pre, dec = _count(row.get("prefill_replicas")), _count(row.get("decode_replicas"))
    rep, dp = _count(row.get("replicas")), _count(row.get("data_parallel"))
    if pre and dec:
        return "pd", pre + dec, f"{pre} prefill + {dec} decode replica{'s' if dec > 1 else ''}"
    n, why = 1, ""
    if rep and rep > 1:
        n, why = rep, f"replicas {rep}"
    elif dec and dec > 1 and not pre:
        n, why = dec, f"decode_replicas {dec} and no prefill pool"
    elif dp and dp > 1 and not (isinstance(row.get("dp_attention"), (bool, np.bool_)) and row.get("dp_attention")):
        n, why = dp, f"data_parallel {dp} (each a full engine)"
    if n == 1:
        return None, 1, ""
    router = row.get("router")
    if isinstance(router, str) and _UNEVEN_ROUTER.search(router):
        return "uneven", n, f"{why}, router {router!r}"
    return "replicas", n, why


def divide_fleet(df: pd.DataFrame) -> None:
    """Divide the points that measured N plain replicas behind one router into one replica's:
    request and token throughputs, offered rates and concurrency / N; latencies unchanged.

    This assumes the router spread the requests evenly (round robin, least load, a Kubernetes
    Service); a router recorded as prefix-, cache- or session-aware is not divided (``read_sweep``
    refuses it). ``fleet_replicas`` is N (1 for a point of one replica), ``fleet_basis`` the keys
    that said so; :func:`fleet_notes` words them."""
    if df.empty:
        return
    df["fleet_replicas"] = 1
    df["fleet_basis"] = None
    for i in df.index:
        kind, n, why = fleet_kind(df.loc[i])
        if kind != "replicas":
            continue
        for c in FLEET_TOTALS:
            if c in df and _finite(df.at[i, c]):
                df.at[i, c] = float(df.at[i, c]) / n
        df.at[i, "fleet_replicas"] = n
        df.at[i, "fleet_basis"] = why


def fleet_notes(df: pd.DataFrame) -> list[str]:
    """One note per kind of fleet the points were divided from (see :func:`divide_fleet`)."""
    if "fleet_basis" not in df:
        return []
    counts = df["fleet_basis"].dropna().value_counts(sort=False)
    return [f"fleet-level results ({why}; {k} point{'s' if k > 1 else ''}) divided into one replica's "
            "sweep: request and token throughputs and concurrency / N, latencies unchanged; this "
            "assumes the router spread requests evenly over identical replicas"
            for why, k in counts.items()]


# -- input and output lengths the files do not record ------------------------------------------
#: Measured mean lengths within this share of each other are one setting.
LENGTH_TIGHT = 0.02
#: Groups of points whose mean lengths differ by more than this share are different settings.
LENGTH_GAP = 0.10


def _round_length(lo: float, hi: float, mean: float) -> int:
    """The roundest whole number within 0.1 % of a cluster (7999–8000 → 8000; 1024 stays)."""
    a, b = math.floor(min(lo, mean * 0.999)), math.ceil(max(hi, mean * 1.001))
    best, score = int(round(mean)), -1
    for x in range(max(a, 1), b + 1):
        z = len(str(x)) - len(str(x).rstrip("0"))
        if z > score or (z == score and abs(x - mean) < abs(best - mean)):
            best, score = x, z
    return best


def _clusters(values: np.ndarray):
    v = np.sort(values)
    out, start = [], 0
    for j in range(1, len(v) + 1):
        if j == len(v) or v[j] > v[j - 1] * (1 + LENGTH_GAP):
            out.append(v[start:j])
            start = j
    return out


def _level(r) -> tuple:
    """A point's load level as set: its concurrency (closed loop) or offered rate."""
    if r.get("load_kind") == "concurrency":
        return ("c", round(float(r["concurrency"]), 6))
    x = r.get("request_rate_target")
    return ("r", round(float(x), 6) if _finite(x) else None)


def derive_lengths(df: pd.DataFrame, gid: pd.Series) -> list[str]:
    """Input and output length settings the files do not record, from the measured means.

    Within each group of points that no recorded key tells apart (``gid``), the points that
    completed every request and are not saturated are sorted by mean input (output) tokens per
    request and cut where consecutive means differ by more than :data:`LENGTH_GAP` (10 %). When
    every piece is tight (within :data:`LENGTH_TIGHT`, 2 %), as the fixed lengths of a random
    dataset are, and — when there are several — each piece holds two points or more, or two
    pieces hold runs at one load level, each piece is a length setting: ``input_len`` (``output_len``) is its mean,
    rounded (the other points take the nearest). Anything looser (a conversation or trace
    workload, whose measured lengths drift with load) records nothing: no sweep is split on it.
    Returns the keys derived.
    """
    derived = []
    for col, key in (("mean_input_tokens", "input_len"), ("mean_output_tokens", "output_len")):
        if key not in df:
            df[key] = None
        vals = pd.to_numeric(df[col], errors="coerce")
        clean = ~df["saturated"].astype(bool)
        if "failed_requests" in df:
            clean &= ~(pd.to_numeric(df["failed_requests"], errors="coerce").fillna(0) > 0)
        got: dict = {}
        for g in dict.fromkeys(gid.tolist()):
            idx = df.index[gid == g]
            if any(not _missing(df.at[i, key]) for i in idx):
                continue  # recorded
            use = [i for i in idx if clean.get(i, False) and _finite(vals.get(i))
                   and df.at[i, "format"] != "capbook"]
            if not use:
                continue
            cl = _clusters(vals[use].to_numpy(float))
            if not all(c.max() <= c.min() * (1 + LENGTH_TIGHT) for c in cl):
                continue
            if len(cl) > 1:
                # several settings only with evidence: each measured at two points or more, or
                # two of them at one load level (runs that look like repeats). Single points at
                # distinct levels are a workload whose lengths follow the load (conversations)
                member = {i: next(k for k, c in enumerate(cl) if c.min() <= vals[i] <= c.max()) for i in use}
                levels: dict = {}
                for i in use:
                    levels.setdefault(_level(df.loc[i]), set()).add(member[i])
                sizes = [sum(1 for m in member.values() if m == k) for k in range(len(cl))]
                if not (min(sizes) >= 2 or any(len(m) > 1 for m in levels.values())):
                    continue
            reps = [(float(c.min()), float(c.max()), float(c.mean())) for c in cl]
            for i in idx:
                x = vals.get(i)
                if not _finite(x):
                    continue
                got[i] = min(reps, key=lambda t: abs(math.log(float(x) / t[2])))
            if key not in derived:
                derived.append(key)
        # one setting measured in several groups is one value: pieces within 2 % of each other
        # across groups share the roundest number of their range (7999 and 8000 are 8000)
        pieces = sorted(set(got.values()), key=lambda t: t[2])
        names: dict = {}
        start = 0
        for j in range(1, len(pieces) + 1):
            if j == len(pieces) or pieces[j][1] > pieces[start][0] * (1 + LENGTH_TIGHT):
                grp = pieces[start:j]
                lo, hi = min(t[0] for t in grp), max(t[1] for t in grp)
                value = _round_length(lo, hi, float(np.mean([t[2] for t in grp])))
                names.update({t: value for t in grp})
                start = j
        df[key] = [names[got[i]] if i in got else v for i, v in zip(df.index, df[key])]
    for key in ("input_len", "output_len"):
        if key in df and df[key].map(_missing).all():
            del df[key]
    return derived
