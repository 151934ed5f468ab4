"""The engine's configuration beside the results: its command line (``vllm serve`` flags and
their limits: chunked prefill, prefix caching, batched-token budget, speculative decoding …), a
Kubernetes manifest's containers, and JSON or profile sidecars, read into the configuration
columns of the load points (``_file_context``, by folder, cached)."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Mapping

from capbook.sweeps import configurations as _cfgs
from capbook.sweeps.importers._common import LIMIT_COLUMNS


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
