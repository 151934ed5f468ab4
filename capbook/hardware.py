"""Hardware and model facts of one serving replica: what the KV cache holds and how fast a step can be.

A sweep measures an engine at the loads it was run at. Past them, two facts a user knows bound
what the engine can do, and neither is in most load generators' files:

* **the KV cache**, in tokens: the GPUs' memory times ``gpu_memory_utilization``, less the
  weights and an activation reserve, over the KV bytes one token of context takes
  (``2 × layers × kv_heads × head_dim × bytes``);
* **a physical floor on the step time**: a decode step reads the weights and the KV cache of
  every running sequence from HBM, and every token of work costs ``2 × parameters`` FLOPs, so a
  step of ``d`` decoded sequences with ``x`` tokens of context each and ``p`` prompt tokens
  takes at least ``max(bytes / bandwidth, FLOPs / peak)`` over the replica's GPUs (the
  roofline).

:class:`Hardware` holds what is known of one replica (model, GPU, tensor parallelism, memory
share, context length) and where each fact came from; :func:`hardware_for` reads it from a
sweep's recorded columns and the user's flags.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from capbook.loadqueue import kv_bytes_per_token
from capbook.validation import integer, probability

__all__ = ["GPU", "ModelArch", "Hardware", "GPUS", "MODELS", "find_gpu", "find_model", "hardware_for",
           "dtype_bytes"]


@dataclass(frozen=True)
class GPU:
    """One accelerator, from its vendor's datasheet.

    Attributes
    ----------
    name : str
    memory_gb : float
        HBM capacity, GB (1e9 bytes).
    bandwidth_tbs : float
        Peak HBM bandwidth, TB/s (1e12 bytes per second).
    tflops : dict
        Peak dense tensor throughput, TFLOP/s (no sparsity), by precision (``"bf16"``, ``"fp8"`` …).
    source : str
        Where the figures come from.
    """

    name: str
    memory_gb: float
    bandwidth_tbs: float
    tflops: dict
    source: str = ""
    pattern: str = field(default="", repr=False, compare=False)

    def peak_flops(self, precision: str = "bf16") -> float:
        """Peak dense FLOP/s at ``precision`` (bf16 when the GPU has no faster path)."""
        p = _PREC.get(str(precision).lower(), "bf16")
        return 1e12 * float(self.tflops.get(p, self.tflops["bf16"]))


@dataclass(frozen=True)
class ModelArch:
    """A decoder-only transformer, from its ``config.json``.

    Attributes
    ----------
    name : str
        Hugging Face id.
    params_b : float
        Parameters, billions (all experts of a mixture-of-experts model).
    layers, kv_heads, head_dim : int
        What sets the KV bytes per token.
    active_params_b : float
        Parameters one token runs through, billions (``params_b`` for a dense model).
    dtype : str
        Weight dtype of the released checkpoint.
    source : str
    """

    name: str
    params_b: float
    layers: int
    kv_heads: int
    head_dim: int
    active_params_b: float | None = None
    dtype: str = "bf16"
    source: str = ""
    pattern: str = field(default="", repr=False, compare=False)

    @property
    def active_b(self) -> float:
        """Active parameters per token, billions."""
        return float(self.active_params_b if self.active_params_b is not None else self.params_b)

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token of context (keys and values, all layers)."""
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, kv_dtype_bytes)


_PREC = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16", "half": "bf16", "auto": "bf16",
         "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "int8": "int8", "fp4": "fp4", "nvfp4": "fp4",
         "mxfp4": "fp4"}
_BYTES = {"bf16": 2.0, "fp16": 2.0, "float16": 2.0, "bfloat16": 2.0, "auto": 2.0, "half": 2.0, "fp8": 1.0,
          "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0, "awq": 0.5, "gptq": 0.5, "int4": 0.5,
          "bitsandbytes": 0.5, "fp4": 0.5, "nvfp4": 0.5, "mxfp4": 0.5, "float32": 4.0, "fp32": 4.0}


def dtype_bytes(name, default: float = 2.0) -> float:
    """Bytes per value of a dtype or quantisation name (``bf16`` 2, ``fp8`` 1, ``awq`` 0.5 …)."""
    if not isinstance(name, str):
        return default
    return _BYTES.get(name.lower().strip(), default)


#: GPUs by the names sweeps and manifests use. Dense tensor TFLOP/s without sparsity.
GPUS: dict[str, GPU] = {g.name: g for g in [
    GPU("H200", 141.0, 4.8, {"bf16": 989.0, "fp8": 1979.0}, "NVIDIA H200 datasheet (SXM)", r"h200"),
    GPU("H100-SXM", 80.0, 3.35, {"bf16": 989.0, "fp8": 1979.0}, "NVIDIA H100 datasheet (SXM5)", r"h100|h800"),
    GPU("A100-80GB", 80.0, 2.039, {"bf16": 312.0}, "NVIDIA A100 datasheet (SXM 80 GB)", r"a100|a800"),
    GPU("L40S", 48.0, 0.864, {"bf16": 362.0, "fp8": 733.0}, "NVIDIA L40S datasheet", r"l40s?"),
    GPU("L4", 24.0, 0.300, {"bf16": 121.0, "fp8": 242.0}, "NVIDIA L4 datasheet", r"(?<![a-z0-9])l4(?![a-z0-9])"),
]}

#: Model architectures by Hugging Face id (the ``config.json`` of each).
MODELS: dict[str, ModelArch] = {m.name: m for m in [
    ModelArch("meta-llama/Llama-3.1-8B-Instruct", 8.03, 32, 8, 128, source="config.json",
              pattern=r"llama[-_ ]?3(\.[0-9])?[-_ ]?8b|meta-llama-3-8b"),
    ModelArch("meta-llama/Llama-3.3-70B-Instruct", 70.6, 80, 8, 128, source="config.json",
              pattern=r"llama[-_ ]?3(\.[0-9])?[-_ ]?70b|meta-llama-3-70b"),
    ModelArch("meta-llama/Llama-3.1-405B-Instruct", 405.9, 126, 8, 128, source="config.json",
              pattern=r"llama[-_ ]?3(\.[0-9])?[-_ ]?405b"),
]}


def find_gpu(name) -> GPU | None:
    """The GPU a name means (``nvidia-h100-80gb``, ``H100 SXM``, ``4xH200``), or None."""
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str) or not name.strip():
        return None
    low = name.lower()
    for g in GPUS.values():
        if re.search(g.pattern or re.escape(g.name.lower()), low):
            return g
    return None


def find_model(name) -> ModelArch | None:
    """The architecture a model name means (a Hugging Face id or a short name), or None."""
    if isinstance(name, ModelArch):
        return name
    if not isinstance(name, str) or not name.strip():
        return None
    low = name.lower().rsplit("/", 1)[-1]
    for m in MODELS.values():
        if m.name.lower().rsplit("/", 1)[-1] == low or (m.pattern and re.search(m.pattern, low)):
            return m
    return None


@dataclass(frozen=True)
class Hardware:
    """What is known of one replica's hardware and model, and where each fact came from.

    Attributes
    ----------
    model : ModelArch or None
    gpu : GPU or None
    tensor_parallel : int
        GPUs per replica.
    gpu_memory_utilization : float
        Share of each GPU's memory the engine takes for weights and KV cache.
    max_model_len : int or None
        Longest context the engine admits, tokens.
    weight_dtype : str
        Weight precision or quantisation (``bf16``, ``fp8``, ``awq`` …).
    kv_cache_dtype : str
        KV-cache dtype (``auto`` = the weights' 16-bit dtype).
    kv_cache_tokens_recorded : int or None
        The engine's own count of KV-cache tokens, when a file records it.
    sources : dict
        Per fact, where it came from (a flag, a file, a column, or ``"default"``).
    """

    model: ModelArch | None = None
    gpu: GPU | None = None
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    weight_dtype: str = "bf16"
    kv_cache_dtype: str = "auto"
    kv_cache_tokens_recorded: int | None = None
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def known(self) -> bool:
        """Both the model and the GPU are known: the physical step floor can be computed."""
        return self.model is not None and self.gpu is not None

    @property
    def weight_bytes(self) -> float:
        """Bytes of the replica's weights."""
        if self.model is None:
            return math.nan
        return self.model.params_b * 1e9 * dtype_bytes(self.weight_dtype)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token of context takes, across the replica."""
        if self.model is None:
            return math.nan
        kv = self.kv_cache_dtype
        b = dtype_bytes(kv if kv not in (None, "auto") else "bf16")
        return self.model.kv_bytes_per_token(b)

    def kv_cache_tokens(self) -> int | None:
        """Tokens of context the KV cache holds: the engine's own count when recorded, else
        ``TP × memory × (gpu_memory_utilization − 0.05)`` less the weights, over the KV bytes
        per token; None when the model or GPU is unknown."""
        if self.kv_cache_tokens_recorded:
            return int(self.kv_cache_tokens_recorded)
        if not self.known:
            return None
        free = (self.tensor_parallel * self.gpu.memory_gb * 1e9 * (self.gpu_memory_utilization - 0.05)
                - self.weight_bytes)
        return int(free // self.kv_bytes_per_token) if free > 0 else 0

    def step_time_floor(self, decode_seqs, context_tokens, prompt_tokens):
        """Least time (s) a step can take on this replica: the larger of its HBM traffic (the
        weights, plus ``context_tokens`` of KV for each of ``decode_seqs`` decoded sequences)
        over the bandwidth and its FLOPs (``2 × active parameters`` per token of work) over the
        dense peak, across ``tensor_parallel`` GPUs. NaN when the model or GPU is unknown."""
        d = np.asarray(decode_seqs, dtype=float)
        x = np.asarray(context_tokens, dtype=float)
        p = np.asarray(prompt_tokens, dtype=float)
        if not self.known:
            return np.full(np.broadcast(d, x, p).shape, math.nan)
        tp = self.tensor_parallel
        mem = (self.weight_bytes + d * x * self.kv_bytes_per_token) / (tp * self.gpu.bandwidth_tbs * 1e12)
        flops = 2.0 * self.model.active_b * 1e9 * (d + p)
        comp = flops / (tp * self.gpu.peak_flops(self.weight_dtype))
        return np.maximum(mem, comp)

    def assumptions(self) -> list[str]:
        """One line per fact: its value, where it came from and the flag that overrides it."""
        out = []
        src = self.sources
        out.append(f"model {self.model.name if self.model else 'unknown'} ({src.get('model', 'not recorded')}; "
                   "--model)")
        out.append(f"GPU {self.gpu.name if self.gpu else 'unknown'} ({src.get('gpu', 'not recorded')}; --gpu)")
        out.append(f"tensor parallel {self.tensor_parallel} ({src.get('tensor_parallel', 'default')}; "
                   "--tensor-parallel)")
        out.append(f"gpu_memory_utilization {self.gpu_memory_utilization:g} "
                   f"({src.get('gpu_memory_utilization', 'default')}; --gpu-memory-utilization)")
        return out


def _col(tab, name):
    if name not in tab:
        return None
    for v in tab[name]:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        return v
    return None


def hardware_for(sweep=None, *, model=None, gpu=None, tensor_parallel=None, gpu_memory_utilization=None,
                 max_model_len=None, kv_cache_tokens=None) -> Hardware:
    """The hardware facts of a sweep's replica: the arguments first, then the sweep's recorded
    columns (``model``, ``gpu``, ``tensor_parallel``, ``gpu_memory_utilization``,
    ``max_model_len``, ``kv_cache_tokens``, ``precision``/``quantization``, ``kv_cache_dtype``).

    Raises ValueError naming the argument when a given model or GPU is not in the tables.
    """
    tab = sweep.table if sweep is not None else {}
    src: dict = {}

    def pick(given, col, label):
        if given is not None:
            src[label] = "given"
            return given
        v = _col(tab, col) if col else None
        if v is not None:
            src[label] = f"the sweep's {col} column"
        return v

    m = pick(model, "model", "model")
    arch = find_model(m)
    if model is not None and arch is None:
        raise ValueError(f"model={model!r} is not in capbook's table of architectures "
                         f"({', '.join(sorted(MODELS))})")
    g = pick(gpu, "gpu", "gpu")
    dev = find_gpu(g)
    if gpu is not None and dev is None:
        raise ValueError(f"gpu={gpu!r} is not in capbook's table of GPUs ({', '.join(sorted(GPUS))})")
    tp = pick(tensor_parallel, "tensor_parallel", "tensor_parallel")
    tp = integer(int(float(tp)), "tensor_parallel", minimum=1) if tp is not None else 1
    util = pick(gpu_memory_utilization, "gpu_memory_utilization", "gpu_memory_utilization")
    util = probability(float(util), "gpu_memory_utilization", hi_open=False) if util is not None else 0.9
    mml = pick(max_model_len, "max_model_len", "max_model_len")
    mml = integer(int(float(mml)), "max_model_len", minimum=1) if mml is not None else None
    kv = pick(kv_cache_tokens, "kv_cache_tokens", "kv_cache_tokens")
    kv = int(float(kv)) if kv is not None and float(kv) >= 1 else None
    q = _col(tab, "quantization") or _col(tab, "precision")
    wd = str(q) if q is not None else (arch.dtype if arch else "bf16")
    kvd = _col(tab, "kv_cache_dtype")
    return Hardware(arch, dev, tp, util, mml, wd, str(kvd) if kvd is not None else "auto", kv, src)
