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
import io
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from capbook.sweeps import configurations as _cfgs
from capbook.sweeps import perrequest
from capbook.formats import FileFormat
from capbook.sweeps.sweep import CONFIG_COLUMNS, METRIC_COLUMNS, Sweep
from capbook.validation import choice, integer, is_number, positive

__all__ = ["read_sweep", "read_points", "detect_sweep_format", "SWEEP_FORMATS", "LIMIT_COLUMNS",
           "TOKEN_COLUMNS"]

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
_SEND_SHARE = 0.95
#: inference-perf: mean schedule delay (s) above which the client could not send on time.
_SCHEDULE_DELAY_S = 1.0
#: an open-loop point offered more than this multiple of the saturation rate is saturated too.
_OVER_SATURATION = 1.02
#: An open-loop level whose median TTFT exceeds this share of the time spent sending, and this
#: many times the quietest level's, queued without bound (a stable queue waits about a service time).
_BACKLOG_SHARE = 0.10
_BACKLOG_TIMES = 10.0
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


# -- engine configuration beside the results -------------------------------------------------
#  vllm_command.txt, *.commands (vLLM nightly benchmarks), Kubernetes manifests, InferenceX
#  agg_bmk.json and the vLLM suite's benchmark_results.json record how the engine was started.
_CTX_FIELDS = ("max_num_seqs", "gpu", "num_gpus", "engine", "tensor_parallel", "model",
               "precision", "engine_args") + LIMIT_COLUMNS
_SIDECAR_NAMES = {"agg_bmk.json": "InferenceX summary rows", "benchmark_results.json":
                  "the vLLM benchmark suite's summary table"}


def _argv_tokens(argv) -> list[str]:
    import shlex

    toks = []
    prev = ""
    for a in argv:
        a = str(a).strip()
        head = a.split(None, 1)[0] if a else ""
        if prev == "-c" and " " in a:  # sh -c "vllm serve ... --flag value": the script's words
            script = a.replace("\\\r\n", " ").replace("\\\n", " ")
            try:
                toks.extend(shlex.split(script, comments=True))
            except ValueError:
                toks.extend(script.split())
        elif a.startswith("-") and " " in a and "=" not in head:
            toks.extend(a.split(None, 1))  # one argv element "--quantization bitsandbytes"
        elif a:
            toks.append(a)
        prev = a
    return toks


#: short spellings of vLLM flags
_SHORT_FLAGS = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size",
                "-dp": "data-parallel-size", "-q": "quantization"}
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _is_bool_flag(name: str) -> bool:
    """vLLM's on/off flags (``--enable-*``, ``--disable-*``, ``--no-*``) take no value."""
    return name.startswith(("enable-", "disable-", "no-")) or name in (
        "trust-remote-code", "enforce-eager")


def _argv_pairs(toks) -> list[tuple[str, object]]:
    """``(flag, value)`` in command-line order from ``--flag=value``, ``--flag value`` and bare
    ``--flag`` (value True); ``_`` is read as ``-``. An on/off flag takes the next word only when
    it is true/false (older vLLM's ``--enable-chunked-prefill False``)."""
    pairs = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--") or t in _SHORT_FLAGS:
            name, eq, val = t.lstrip("-").partition("=")
            name = _SHORT_FLAGS.get(t, name.replace("_", "-"))
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if eq:
                pairs.append((name, val))
            elif nxt is not None and not nxt.startswith("--") and nxt not in _SHORT_FLAGS \
                    and (not _is_bool_flag(name) or nxt.lower() in _BOOL_WORDS):
                pairs.append((name, nxt))
                i += 1
            else:
                pairs.append((name, True))
        i += 1
    return pairs


def _argv_flags(toks) -> dict:
    """``{flag: value}`` from :func:`_argv_pairs` (a repeated flag: its last value)."""
    return dict(_argv_pairs(toks))


def _subst_env(text: str, env: Mapping) -> str:
    def rep(m):
        name = m.group(1) or m.group(2) or m.group(3)
        return str(env.get(name, m.group(0)))
    return re.sub(r"\$\((\w+)\)|\$\{(\w+)\}|\$(\w+)", rep, text)


def _engine_from_image(image: str | None) -> str | None:
    if not image:
        return None
    repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
    low = repo.lower()
    name = "vllm" if "vllm" in low else "sglang" if "sglang" in low else \
        "tensorrt-llm" if "tensorrt" in low or "trtllm" in low else repo
    return f"{name} {tag}".strip() if tag else name


def _unquote(v):
    return str(v).strip().strip("'\"") if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None


def _flag_int(v, human=False):
    """An integer flag value; ``human``: vLLM's ``32k`` (x1000) / ``32K`` (x1024) spellings."""
    s = _unquote(v)
    if not s:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgtKMGT])", s) if human else None
    if m is None or (m.group(2).isupper() and "." in m.group(1)):  # vLLM refuses 1.5K too
        return None
    num, suffix = m.groups()
    power = "kmgt".index(suffix.lower()) + 1
    return int(float(num) * 1000 ** power) if suffix.islower() else int(num) * 1024 ** power


def _flag_float(v):
    s = _unquote(v)
    try:
        x = float(s) if s else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) else None


def _flag_bool(pairs, name):
    """True / False from the last of ``--name`` / ``--no-name`` (``--name=false`` too); None when absent."""
    val = None
    for k, v in pairs:
        if k == name:
            val = v if isinstance(v, bool) else _BOOL_WORDS.get(str(v).strip().lower(), True)
        elif k == f"no-{name}":
            val = False
    return val


def _speculative_config(pairs) -> dict:
    """``--speculative-config`` JSON (and vLLM's dotted ``--speculative-config.key value``)."""
    import ast

    spec: dict = {}
    for k, v in pairs:
        if k == "speculative-config" and isinstance(v, str):
            for parse in (json.loads, ast.literal_eval):
                try:
                    obj = parse(v)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(obj, Mapping):
                    spec.update(obj)
                break
        elif k.startswith("speculative-config.") and not isinstance(v, bool):
            spec[k.split(".", 1)[1].replace("-", "_")] = v
    return spec


def _engine_limits(pairs, env: Mapping) -> dict:
    """Engine limits a vLLM command line states: see ``LIMIT_COLUMNS`` (absent when not stated)."""
    flags = dict(pairs)
    spec = _speculative_config(pairs)

    def positive(x):  # vLLM reads -1 / 0 as "fit to memory", not a limit
        return x if x is not None and x > 0 else None

    out = {
        "chunked_prefill": _flag_bool(pairs, "enable-chunked-prefill"),
        "prefix_caching": _flag_bool(pairs, "enable-prefix-caching"),
        "max_num_batched_tokens": positive(_flag_int(flags.get("max-num-batched-tokens"), human=True)),
        "max_model_len": positive(_flag_int(flags.get("max-model-len"), human=True)),
        "gpu_memory_utilization": _flag_float(flags.get("gpu-memory-utilization")),
        "block_size": _flag_int(flags.get("block-size")),
        "kv_cache_dtype": _unquote(flags.get("kv-cache-dtype")) or None,
        "quantization": _unquote(flags.get("quantization")) or None,
        "num_speculative_tokens": _flag_int(flags.get("num-speculative-tokens"))
        if flags.get("num-speculative-tokens") is not None else _flag_int(spec.get("num_speculative_tokens")),
        "speculative_method": _unquote(spec.get("method")) or None,
    }
    v1 = _flag_int(env.get("VLLM_USE_V1"))
    out["engine_v1"] = None if v1 is None else bool(v1)
    return {k: v for k, v in out.items() if v is not None}


def _engine_info(argv, env=None, image=None) -> dict:
    """Engine fields from a server command line (argv list), its environment and image."""
    env = dict(env or {})
    toks = [_subst_env(t, env) for t in _argv_tokens(argv)]
    # leading NAME=value words of a shell command are environment, and so are upper-case
    # NAME=value words before the first --flag (``sh -c "VLLM_USE_V1=0 vllm serve ..."``)
    while toks and "=" in toks[0] and not toks[0].startswith("-") and toks[0].split("=")[0].isidentifier():
        k, _, v = toks.pop(0).partition("=")
        env[k] = v
    first_flag = next((i for i, t in enumerate(toks) if t.startswith("--")), len(toks))
    for i in reversed(range(first_flag)):
        k, eq, v = toks[i].partition("=")
        if eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", k):
            env[k] = v.rstrip(";")
            del toks[i]
    joined = " ".join(toks)
    is_vllm = "vllm" in joined.lower() or bool(image and "vllm" in image.lower())
    if not is_vllm and not any(t.startswith("--max-num-seqs") or t.startswith("--max_num_seqs") for t in toks):
        return {}
    pairs = _argv_pairs(toks)
    flags = dict(pairs)
    info: dict = {}

    def as_int(name):
        return _flag_int(flags.get(name))
    if as_int("max-num-seqs") is not None:
        info["max_num_seqs"] = as_int("max-num-seqs")
    tp = as_int("tensor-parallel-size")
    if tp is not None:
        info["tensor_parallel"] = tp
    elif is_vllm:
        info["tensor_parallel"] = 1  # vLLM's default when the command gives no --tensor-parallel-size
    model = flags.get("model")
    if not isinstance(model, str) and "serve" in toks:
        i = toks.index("serve")
        if i + 1 < len(toks) and not toks[i + 1].startswith("-"):
            model = toks[i + 1]
    if isinstance(model, str) and "$" not in model:
        info["model"] = model
    prec = flags.get("quantization") or flags.get("dtype")
    if isinstance(prec, str) and prec != "auto":
        info["precision"] = prec
    engine = _engine_from_image(image) or ("vllm" if is_vllm else None)
    if engine and str(env.get("VLLM_USE_V1", "")).strip() == "0":
        engine += " (V0 engine)"
    if engine:
        info["engine"] = engine
    info.update(_engine_limits(pairs, env))
    info["engine_args"] = " ".join(f"--{k}" if v is True else f"--{k}={v}" for k, v in flags.items())
    return info


def _context_from_command_text(text: str) -> dict:
    import shlex

    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        toks = shlex.split(text, comments=True)
    except ValueError:
        toks = text.split()
    return _engine_info(toks)


def _context_from_manifest(text: str) -> dict:
    """Engine fields from Kubernetes manifests (Deployment/Pod/LeaderWorkerSet YAML)."""
    try:
        import yaml  # PyYAML
    except ImportError:  # pragma: no cover - PyYAML ships with the book's toolchain
        yaml = None
    pods = []
    if yaml is not None:
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError:
            docs = []

        def walk(o):
            if isinstance(o, Mapping):
                if isinstance(o.get("containers"), list):
                    pods.append(o)
                for v in o.values():
                    walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)
        walk(docs)
    for pod in pods:
        sel = pod.get("nodeSelector") or {}
        gpu = None
        for k in ("cloud.google.com/gke-accelerator", "nvidia.com/gpu.product",
                  "karpenter.k8s.aws/instance-gpu-name", "node.kubernetes.io/instance-type"):
            if isinstance(sel, Mapping) and sel.get(k):
                gpu = str(sel[k])
                break
        for c in pod["containers"]:
            if not isinstance(c, Mapping):
                continue
            env = {e.get("name"): e.get("value") for e in (c.get("env") or [])
                   if isinstance(e, Mapping) and "value" in e}
            argv = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
            info = _engine_info(argv, env, c.get("image"))
            if not info:
                continue
            lim = ((c.get("resources") or {}).get("limits") or {})
            for k in ("nvidia.com/gpu", "amd.com/gpu"):
                if lim.get(k) is not None:
                    try:
                        info["num_gpus"] = int(lim[k])
                    except (TypeError, ValueError):
                        pass
            if gpu:
                info["gpu"] = gpu
            return info
    if yaml is None:  # fall back to the flags themselves
        return _context_from_command_text(" ".join(
            ln.strip().lstrip("-").strip().strip("'\"") for ln in text.splitlines() if "--" in ln))
    return {}


def _context_from_json_sidecar(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    info = {}
    if isinstance(d, Mapping) and ("server_command" in d or "gpu_type" in d):  # *.commands
        if isinstance(d.get("server_command"), str):
            info.update(_context_from_command_text(d["server_command"]))
        if d.get("gpu_type"):
            info["gpu"] = str(d["gpu_type"])
        return info
    if isinstance(d, list) and d and all(isinstance(x, Mapping) for x in d):
        def const(key):
            vals = {str(x.get(key)) for x in d if x.get(key) not in (None, "")}
            return vals.pop() if len(vals) == 1 else None
        if path.name == "agg_bmk.json":
            for field, key in (("gpu", "hw"), ("model", "model"), ("precision", "precision")):
                if const(key):
                    info[field] = const(key)
            if const("framework"):
                info["engine"] = const("framework")
            if const("tp"):
                try:
                    info["tensor_parallel"] = int(float(const("tp")))
                except ValueError:
                    pass
        elif const("GPU"):
            info["gpu"] = const("GPU")
    return info


def _context_from_profile(text: str) -> dict:
    try:
        import yaml
        doc = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - a side file that is not YAML records nothing
        return {}
    return {f"workload:{k}": v for k, v in _cfgs.profile_recorded(doc).items()}


def _dir_context(d: Path, cache: dict) -> dict:
    """Engine fields recorded by side files in folder ``d`` (with ``_source`` naming the file)."""
    if d in cache:
        return cache[d]
    info: dict = {}
    try:
        entries = sorted(q for q in d.iterdir() if q.is_file())
    except OSError:
        entries = []

    def merge(new, src):
        for k, v in new.items():
            if v is not None and k not in info:
                info[k] = v
                info.setdefault("_sources", {})[k] = str(src)
    for q in entries:  # priority: vllm_command.txt, *.commands, manifests, JSON summaries
        if q.name == "vllm_command.txt":
            try:
                merge(_context_from_command_text(q.read_text(encoding="utf-8", errors="replace")), q)
            except OSError:
                pass
    for q in entries:
        if q.suffix == ".commands":
            merge(_context_from_json_sidecar(q), q)
    for q in entries:
        if q.suffix in (".yaml", ".yml", ".in"):
            try:
                text = q.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "containers:" in text:
                merge(_context_from_manifest(text), q)
            elif re.search(r"^executable:", text, re.M):   # a load generator's options (llm-d-benchmark)
                merge(_context_from_profile(text), q)
    for q in entries:
        if q.name in _SIDECAR_NAMES:
            merge(_context_from_json_sidecar(q), q)
    cache[d] = info
    return info


def _file_context(path: Path, cache: dict) -> dict:
    """Engine fields for a result file: its folder, then its parent and grandparent (nearest wins)."""
    info: dict = {}
    for d in [path.parent, *list(path.parent.parents)[:2]]:
        for k, v in _dir_context(d, cache).items():
            if k == "_sources":
                for f, src in v.items():
                    info.setdefault("_sources", {}).setdefault(f, src)
            elif k not in info:
                info[k] = v
    return info


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


class _Probe(NamedTuple):
    """What detection sees of a file: its parsed JSON (else None) or its CSV header and text."""

    json: Any = None
    header: tuple = ()
    text: str = ""


class _ReadOptions(NamedTuple):
    concurrency: Any = None
    skipped: list | None = None
    in_folder: bool = False


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
    if not float(count) > 0:
        raise _Failed(f"{path}: field 'request_count' is {count}: no request succeeded; this run "
                      "holds no measurement")
    ic = d.get("input_config") or {}
    kind, n, rate, src = _profile_load_point(ic, path)
    lat = d.get("request_latency", {})
    mean_lat = _NAN
    if isinstance(lat, Mapping) and lat.get("avg") is not None:
        mean_lat = _num(lat["avg"], path, "request_latency.avg") * _ms_scale(lat.get("unit"), path, "request_latency.unit")
    eff = d.get("effective_concurrency")
    eff = float(eff["avg"]) if isinstance(eff, Mapping) and eff.get("avg") is not None else _NAN
    if kind == "rate":
        if math.isnan(mean_lat):
            raise _err(path, "missing field 'request_latency.avg' (needed for an open-loop point's "
                             "concurrency)")
        if math.isfinite(eff):  # AIPerf's own time-averaged requests in flight
            n, src = eff, "measured"
        else:
            n, src = rps * mean_lat, "littles_law"
    model = _profile_model(ic)
    row = _row(
        concurrency=n, ttft_p50_s=t50, ttft_p95_s=t95, ttft_p99_s=t99,
        tpot_p50_s=p50, tpot_p95_s=p95, tpot_p99_s=p99,
        request_throughput_rps=rps, output_throughput_tps=tps,
        mean_input_tokens=isl, mean_output_tokens=osl, num_requests=float(count),
        model=model, engine=None, load_kind=kind, concurrency_source=src,
        request_rate_target=rate, failed_requests=failed, format=fmt, offered_rps=rate,
    )
    if math.isfinite(eff):
        row["effective_concurrency"] = eff
    _set_tokens(row, _renamed(d.get("output_sequence_length"), {}),
                _renamed(d.get("input_sequence_length"), {}), "output_sequence_length, input_sequence_length")
    ttft_mean = _opt(d["time_to_first_token"], "avg", _ms_scale(ttft_unit, path, "time_to_first_token.unit"))
    itl_mean = _opt(d["inter_token_latency"], "avg", _ms_scale(itl_unit, path, "inter_token_latency.unit"))
    _tpot_check(row, e2e=mean_lat, ttft=ttft_mean, out=osl, reported=itl_mean,
                what="inter_token_latency (mean)")
    if kind == "rate":
        _completion_check(row, rate=rate, count=float(count), e2e=mean_lat)
    return [row]


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
        if len(rec) >= 14 and (rec[0] in _AIPERF_CSV_FIELDS or rec[0] == "Request Latency (ms)"):
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
    row = _row(
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
        offered_rps=rate,
    )

    def quantiles(field):
        return {h: stats[field][i] for h, i in idx.items() if i < len(stats[field])}
    _set_tokens(row, quantiles("Output Sequence Length (tokens)"), quantiles("Input Sequence Length (tokens)"),
                "Output / Input Sequence Length (tokens) rows")
    if "Request Latency (ms)" in stats:
        e2e = st("Request Latency (ms)", "avg", 1e-3)
        _tpot_check(row, e2e=e2e, ttft=st("Time to First Token (ms)", "avg", 1e-3),
                    out=row["mean_output_tokens"], reported=st("Inter Token Latency (ms)", "avg", 1e-3),
                    what="Inter Token Latency (avg)")
        if kind == "rate":
            _completion_check(row, rate=rate, count=row["num_requests"], e2e=e2e)
    return [row]


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


def _parse_vllm(obj, path):
    items = obj if isinstance(obj, list) else [obj]
    return [_vllm_point(x, path) for x in items]


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


def _read_table(p: "_Probe", path: Path) -> pd.DataFrame:
    """A per-request file as a table: JSON records or CSV text."""
    if p.json is not None:
        return pd.DataFrame(p.json)
    try:
        return pd.read_csv(io.StringIO(p.text), index_col=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise _err(path, f"not a readable CSV ({exc})".replace("\n", " ")) from None


def _parse_perrequest(p: "_Probe", path: Path, o: "_ReadOptions", fmt: str) -> list:
    """A per-request results file (LMBench, or any with recognised columns) as one level: the rate
    the file name states (else the launch rate), or closed loop at concurrency= when given."""
    df = _read_table(p, path)
    line = 2 if p.json is None else 1
    req = perrequest.requests_from_frame(
        df, path, row_name=(lambda i: f"line {i + line}") if p.json is None else (lambda i: f"record {i + 1}"))
    rate = perrequest.rate_from_name(path.name)
    s = _summarise(req, path, concurrency=o.concurrency, rate_rps=rate)
    row = _perrequest_row(s, fmt, "requested rate (request_rate_target) from the file name"
                          if rate is not None else "")
    row["point"] = path.stem
    # the run series the name states (LMBench's {KEY}_{workload}: another key or workload is
    # another configuration, not more levels of this one)
    row["workload"] = perrequest.series_from_name(path.name)
    return [row]


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


def _parse_capbook(text, path):
    recs = list(csv.reader(io.StringIO(text)))
    width = len(recs[0])
    for line, rec in enumerate(recs[1:], start=2):
        extra = [c for c in rec[width:] if c.strip()]
        if extra:  # pandas would take the first column for an index and shift every column by one
            raise _err(path, f"line {line} has {len(rec)} fields but the header names {width} columns "
                             f"(extra value {extra[0]!r} in an unnamed column): every value needs a "
                             "column name in the header line")
    try:
        df = pd.read_csv(io.StringIO(text), index_col=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise _err(path, f"not a readable CSV ({exc})".replace("\n", " ")) from None
    df = df.drop(columns=[c for c in df.columns if str(c).startswith("Unnamed: ") and df[c].isna().all()])
    rows = []
    for line, (_, r) in enumerate(df.iterrows(), start=2):
        row = _row(**{k: (None if (isinstance(v, float) and math.isnan(v) and k in CONFIG_COLUMNS) else v)
                      for k, v in r.items()})
        row["format"] = "capbook"
        if not isinstance(row["load_kind"], str):
            row["load_kind"] = "concurrency"
        if not isinstance(row["concurrency_source"], str):
            row["concurrency_source"] = "set"
        row["source_line"] = line
        rows.append(row)
    return rows


# -- file walking --------------------------------------------------------------------------------
def _llmperf_summary_for(path: Path) -> Path | None:
    """The llmperf summary of the run whose per-request records ``path`` holds, if beside it."""
    stem = path.stem
    base = stem[:-len("_individual_responses")] if stem.endswith("_individual_responses") else stem
    cands = [path.with_name(f"{base}_summary.json")]
    if path.parent.name == "individual":
        cands.append(path.parent.parent / "summary" / path.name)
        cands.append(path.parent.parent / "summary" / f"{base}_summary.json")
    return next((c for c in cands if c.is_file()), None)


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


# -- the registry --------------------------------------------------------------------------------
def _is_map(d) -> bool:
    return isinstance(d, Mapping)


def _records(d) -> bool:
    """A non-empty JSON list of objects."""
    return isinstance(d, list) and bool(d) and all(isinstance(x, Mapping) for x in d)


def _is_vllm(d) -> bool:
    return _is_map(d) and ("median_ttft_ms" in d or "mean_ttft_ms" in d) and "request_throughput" in d


def _is_profile_export(d) -> bool:
    ttft = d.get("time_to_first_token") if _is_map(d) else None
    return _is_map(ttft) and "unit" in ttft


def _read_inference_perf(p: _Probe, path: Path, o: _ReadOptions) -> list:
    if not _is_map(p.json["successes"].get("latency")):
        raise _Reject(f"{path}: inference-perf server-side (Prometheus) metrics, not a client "
                      "measurement; read the *_lifecycle_metrics.json files")
    return _parse_inference_perf(p.json, path)


def _read_llmperf_requests(p: _Probe, path: Path, o: _ReadOptions) -> list:
    summary = _llmperf_summary_for(path) if o.in_folder and o.concurrency is None else None
    if summary is not None:
        raise _Reject(f"{path}: per-request records of the run summarised in {summary} "
                      "(read there); pass concurrency= to read this file alone")
    return _parse_llmperf_requests(p.json, path, o.concurrency)


_LMBENCH_COLUMNS = ("prompt_tokens", "generation_tokens", "ttft", "generation_time", "launch_time",
                    "finish_time")


def _is_perrequest(p: _Probe) -> bool:
    """A table of per-request records whose columns :mod:`capbook.sweeps.perrequest` recognises."""
    if p.json is not None:
        if not _records(p.json):
            return False
        cols = list(dict.fromkeys(k for r in p.json[:50] for k in r))
    else:
        cols = p.header
    return bool(cols) and perrequest.missing_columns_message(perrequest.match_columns(cols), cols, "") is None


#: The load-generator formats :func:`read_sweep` reads, by name, in the order
#: :func:`detect_sweep_format` tries them (``detect`` sees a file's parsed JSON or CSV header;
#: ``read(probe, path, options)`` returns its load points as rows).
SWEEP_FORMATS: dict[str, FileFormat] = {f.name: f for f in (
    FileFormat("guidellm", "GuideLLM benchmarks.json (benchmarks[].metrics)",
               lambda p: _is_map(p.json) and isinstance(p.json.get("benchmarks"), list),
               lambda p, path, o: _parse_guidellm(p.json, path, o.skipped)),
    FileFormat("inference-benchmarker", "huggingface/inference-benchmarker report (results[])",
               lambda p: _is_map(p.json) and isinstance(p.json.get("results"), list)
               and _is_map(p.json.get("config")) and "benchmark_kind" in p.json["config"],
               lambda p, path, o: _parse_inference_benchmarker(p.json, path, o.skipped)),
    FileFormat("inference-perf", "inference-perf stage_N_lifecycle_metrics.json",
               lambda p: _is_map(p.json) and _is_map(p.json.get("load_summary"))
               and _is_map(p.json.get("successes")),
               _read_inference_perf),
    FileFormat("llmperf", "llmperf *_summary.json (results_ttft_s_quantiles_p50, ...)",
               lambda p: _is_map(p.json) and any(k.startswith("results_ttft_s") for k in p.json),
               lambda p, path, o: _parse_llmperf(p.json, path)),
    FileFormat("llmperf-wrapped", "llmperf summaries in a JSON object keyed by concurrency "
               "({\"1\": {...}, \"8\": {...}} or {\"concurrency_8\": ...}), one level per key",
               lambda p: _llmperf_wrapped(p.json),
               lambda p, path, o: _parse_llmperf_wrapped(p.json, path)),
    FileFormat("aiperf", "aiperf profile_export*.json (metrics as {unit, avg, p50, ...})",
               lambda p: _is_profile_export(p.json)
               and ("aiperf_version" in p.json or "schema_version" in p.json),
               lambda p, path, o: _parse_profile_export(p.json, path, "aiperf")),
    FileFormat("genai-perf", "genai-perf profile_export*.json (metrics as {unit, avg, p50, ...})",
               lambda p: _is_profile_export(p.json),
               lambda p, path, o: _parse_profile_export(p.json, path, "genai-perf")),
    FileFormat("sglang", "SGLang bench_serving JSONL (one summary line per run, either layout)",
               lambda p: _is_sglang(p.json) or (_records(p.json) and all(map(_is_sglang, p.json))),
               lambda p, path, o: [_sglang_point(x, path) for x in (p.json if isinstance(p.json, list)
                                                                    else [p.json])]),
    FileFormat("vllm", "vLLM benchmark_serving / vllm bench serve JSON, or JSONL of them",
               lambda p: _is_vllm(p.json) or (_records(p.json) and all(map(_is_vllm, p.json))),
               lambda p, path, o: _parse_vllm(p.json, path)),
    FileFormat("llmperf-requests", "llmperf *_individual_responses.json (one record per request)",
               lambda p: _records(p.json) and "ttft_s" in p.json[0]
               and "end_to_end_latency_s" in p.json[0],
               _read_llmperf_requests),
    FileFormat("aiperf-csv", "aiperf profile_export_aiperf.csv (Metric,avg,... blocks)",
               lambda p: p.header[:2] == ("Metric", "avg"),
               lambda p, path, o: _parse_aiperf_csv(p.text, path, o.concurrency)),
    FileFormat("guidellm-csv", "GuideLLM per-benchmark CSV (ttft_median_ms, itl_median_ms, ...)",
               lambda p: {"ttft_median_ms", "itl_median_ms", "concurrency_mean"} <= set(p.header),
               lambda p, path, o: _parse_guidellm_csv(p.text, path, o.skipped)),
    FileFormat("capbook", "a CSV already in the sweep-table layout",
               lambda p: set(METRIC_COLUMNS) <= set(p.header),
               lambda p, path, o: _parse_capbook(p.text, path)),
    FileFormat("lmbench", "LMCache LMBench per-request CSV (prompt_tokens, generation_tokens, ttft, "
               "generation_time, launch_time, finish_time), one file per rate",
               lambda p: set(_LMBENCH_COLUMNS) <= set(p.header),
               lambda p, path, o: _parse_perrequest(p, path, o, "lmbench")),
    FileFormat("per-request", "any per-request results CSV or JSON/JSONL (TTFT, latency or launch and "
               "finish times, prompt and output tokens; column names in capbook.sweeps.perrequest)",
               _is_perrequest,
               lambda p, path, o: _parse_perrequest(p, path, o, "per-request")),
)}


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


def _finite(v) -> bool:
    """A finite number in a file's field (bool and text are not numbers, as everywhere)."""
    return is_number(v) and math.isfinite(float(v))


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
