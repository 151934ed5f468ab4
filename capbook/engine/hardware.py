"""Hardware and model facts of one serving replica: what the KV cache holds and how fast a step can be.

A sweep measures an engine at the loads it was run at. Past them, two facts a user knows bound
what the engine can do, and neither is in most load generators' files:

* **the KV cache**, in tokens: each GPU's memory times ``gpu_memory_utilization``, less the
  weights and an activation reserve (5 % of the memory), over the KV bytes one token of context
  takes on that GPU (``2 × layers × kv_heads × head_dim × bytes`` over the tensor-parallel
  ranks; one latent of ``kv_lora_rank + qk_rope_head_dim`` values per layer, on every rank, for
  multi-head latent attention);
* **a physical floor on the step time**: a decode step reads the weights (for a mixture of
  experts, the experts its batch routes to) and the KV cache of every running sequence from
  HBM, and every token of work costs ``2 × active parameters`` FLOPs, so a step of ``d``
  decoded sequences with ``x`` tokens of context each and ``p`` prompt tokens takes at least
  ``max(bytes / bandwidth, FLOPs / peak)`` on each of the replica's GPUs (the roofline).

:data:`GPUS` and :data:`ARCHITECTURES` hold the datasheet and ``config.json`` figures, each with its
source; :func:`find_gpu` and :func:`find_model` read the names sweeps, manifests, node labels
and folders use. :class:`Hardware` holds what is known of one replica (model, GPU, tensor
parallelism, memory share, context length) and where each fact came from; :func:`hardware_for`
builds it from the user's flags, a sweep's recorded columns and the files beside the results
(:func:`read_server_facts`: an engine's start-up log, a deployment manifest, a command line).
:func:`engine_defaults` gives the scheduler limits an engine picks when it is not told.

Memory capacities: HBM parts are sold in binary gigabytes (an "80 GB" H100 reports 79.18 GiB to
PyTorch), GDDR parts in decimal ones with ECC carved out; :attr:`GPU.memory_bytes` uses the unit
the part is sold in.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace

import numpy as np

from capbook.engine.loadqueue import kv_bytes_per_token
from capbook.sweeps import importers
from capbook.sweeps.configurations import parse_gpu
from capbook.validation import integer, probability

__all__ = ["GPU", "ModelArch", "Hardware", "GPUS", "ARCHITECTURES", "find_gpu", "find_model", "hardware_for",
           "name_dtype", "dtype_bytes", "gpu_count", "close_matches", "engine_defaults", "read_server_facts",
           "parse_server_log", "ACTIVATION_RESERVE"]

#: Share of each GPU's memory kept back for activations, CUDA graphs and the allocator when the
#: KV cache is estimated (vLLM measures its peak at start-up instead: 4.8–7.4 GiB of an H100's
#: 79.18 GiB for 0.6–70B models at 16k context, llm-d-benchmark's empirical memory results).
ACTIVATION_RESERVE = 0.05


@dataclass(frozen=True)
class GPU:
    """One accelerator, from its vendor's datasheet.

    Attributes
    ----------
    name : str
    memory_gb : float
        Memory capacity as sold, GB (binary for HBM parts, see :attr:`memory_bytes`).
    bandwidth_tbs : float
        Peak memory bandwidth, TB/s (1e12 bytes per second).
    tflops : dict
        Peak dense tensor throughput, TFLOP/s (no sparsity), by precision (``"bf16"``, ``"fp8"``,
        ``"int8"``, ``"fp4"``); ``bf16`` stands for 16-bit (FP16 on parts without BF16).
    source : str
        Where the figures come from (datasheet title and address).
    pattern : str
        Regular expression matching the family in a lower-case name.
    form : str or None
        Form factor (``"sxm"``, ``"pcie"``, ``"nvl"``) when the family has several.
    hbm : bool
        High-bandwidth memory (sold in binary gigabytes) rather than GDDR.
    reported_gib : float or None
        Memory the device reports to PyTorch, GiB, where a published log gives it (a little
        less than the capacity sold).
    """

    name: str
    memory_gb: float
    bandwidth_tbs: float
    tflops: dict
    source: str = ""
    pattern: str = field(default="", repr=False, compare=False)
    form: str | None = field(default=None, repr=False, compare=False)
    hbm: bool = field(default=True, repr=False, compare=False)
    reported_gib: float | None = field(default=None, repr=False, compare=False)

    def peak_flops(self, precision: str = "bf16") -> float:
        """Peak dense FLOP/s at ``precision`` (the fastest the GPU has at or above it: fp4 falls
        back to fp8, fp8 and int8 to bf16)."""
        p = _PREC.get(str(precision).lower(), "bf16")
        for q in {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "int8": ("int8", "fp8", "bf16")}.get(
                p, ("bf16",)):
            if q in self.tflops:
                return 1e12 * float(self.tflops[q])
        return 1e12 * float(self.tflops["bf16"])

    @property
    def memory_bytes(self) -> float:
        """Memory in bytes: what the device reports when known, else ``memory_gb × 2**30`` for
        HBM and ``× 1e9`` for GDDR."""
        if self.reported_gib is not None:
            return self.reported_gib * 2.0 ** 30
        return self.memory_gb * (2.0 ** 30 if self.hbm else 1e9)


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
        What sets the KV bytes per token (``num_hidden_layers``, ``num_key_value_heads``,
        ``head_dim``). For multi-head latent attention ``kv_heads`` is 1 and ``head_dim`` the
        latent width ``kv_lora_rank + qk_rope_head_dim``.
    active_params_b : float
        Parameters one token runs through, billions (``params_b`` for a dense model).
    dtype : str
        Weight dtype of the released checkpoint (``torch_dtype`` or its quantisation).
    source : str
        The ``config.json`` address (and any note on the architecture).
    hidden_size : int or None
    max_position_embeddings : int or None
        Longest context the model was trained for, tokens (vLLM's default ``max_model_len``).
    experts, experts_per_token : int or None
        Routed experts and experts each token is routed to (mixture of experts).
    kv_lora_rank, qk_rope_head_dim : int or None
        Multi-head latent attention (DeepSeek-V3): the cached latent per layer.
    checkpoint_gb : float or None
        Weight bytes of the released checkpoint as loaded, GB, where mixed precisions make
        ``params_b × bytes`` wrong (gpt-oss: MXFP4 experts, BF16 attention).
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
    hidden_size: int | None = None
    max_position_embeddings: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    checkpoint_gb: float | None = None

    @property
    def active_b(self) -> float:
        """Active parameters per token, billions."""
        return float(self.active_params_b if self.active_params_b is not None else self.params_b)

    @property
    def mla(self) -> bool:
        """Multi-head latent attention: one shared latent per token and layer."""
        return self.kv_lora_rank is not None

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes per token of context (keys and values, all layers, whole model)."""
        if self.mla:
            return float(self.layers * (self.kv_lora_rank + (self.qk_rope_head_dim or 0)) * kv_dtype_bytes)
        return kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, kv_dtype_bytes)

    def kv_bytes_per_token_per_gpu(self, tensor_parallel: int = 1, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes one token takes on each GPU of a ``tensor_parallel``-way replica: KV heads
        are split across the ranks (and replicated when there are fewer heads than ranks); an
        MLA latent is kept whole on every rank."""
        if self.mla:
            return self.kv_bytes_per_token(kv_dtype_bytes)
        heads = math.ceil(self.kv_heads / max(1, int(tensor_parallel)))
        return kv_bytes_per_token(self.layers, heads, self.head_dim, kv_dtype_bytes)

    def weights_read(self, batch) -> np.ndarray:
        """Parameters (billions) a decode step of ``batch`` sequences reads: all of a dense
        model; for a mixture of experts, the shared weights plus the experts the batch is
        expected to touch under uniform routing, ``E (1 − (1 − k/E)^batch)`` of ``E``."""
        b = np.asarray(batch, dtype=float)
        if not (self.experts and self.experts_per_token and self.active_params_b is not None):
            return np.full(b.shape, float(self.params_b))
        E, k = float(self.experts), float(self.experts_per_token)
        per_expert = (self.params_b - self.active_params_b) / (E - k)
        shared = self.active_params_b - k * per_expert
        touched = E * (1.0 - (1.0 - k / E) ** np.maximum(b, 1.0))
        return shared + per_expert * touched


_PREC = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16", "half": "bf16", "auto": "bf16",
         "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "int8": "int8", "w8a8": "int8", "fp4": "fp4",
         "nvfp4": "fp4", "mxfp4": "fp4"}
_BYTES = {"bf16": 2.0, "fp16": 2.0, "float16": 2.0, "bfloat16": 2.0, "auto": 2.0, "half": 2.0, "fp8": 1.0,
          "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0, "w8a8": 1.0, "awq": 0.5, "gptq": 0.5, "int4": 0.5,
          "bitsandbytes": 0.5, "fp4": 0.5, "nvfp4": 0.5, "mxfp4": 0.5, "float32": 4.0, "fp32": 4.0}


def dtype_bytes(name, default: float = 2.0) -> float:
    """Bytes per value of a dtype or quantisation name (``bf16`` 2, ``fp8`` 1, ``awq`` 0.5 …)."""
    if not isinstance(name, str):
        return default
    return _BYTES.get(name.lower().strip().removeprefix("torch."), default)


# ---------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------
_NV = "https://www.nvidia.com/en-us/data-center/"
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"

#: GPUs by the names sweeps and manifests use. Dense tensor TFLOP/s without sparsity (vendor
#: datasheets print the sparse figure, twice the dense one, for Ampere and later).
GPUS: dict[str, GPU] = {g.name: g for g in [
    # -- NVIDIA Hopper
    GPU("H100-SXM-80GB", 80.0, 3.35, {"bf16": 989.0, "fp8": 1979.0, "int8": 1979.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column ({_NV}h100/); 79.18 GiB reported to "
        f"PyTorch (llm-d-benchmark config_explorer/empirical-vllm-memory-results.md)", r"h100", form="sxm",
        reported_gib=79.18),
    GPU("H100-PCIe-80GB", 80.0, 2.0, {"bf16": 756.0, "fp8": 1513.0, "int8": 1513.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column ({_NV}h100/)", r"h100", form="pcie"),
    GPU("H100-NVL-94GB", 94.0, 3.9, {"bf16": 835.0, "fp8": 1670.0, "int8": 1670.0},
        f"NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column ({_NV}h100/)", r"h100", form="nvl"),
    GPU("H800-SXM-80GB", 80.0, 3.35, {"bf16": 989.0, "fp8": 1979.0, "int8": 1979.0},
        "NVIDIA H800 (export variant of the H100 SXM: same HBM3 and tensor cores, NVLink cut to "
        "400 GB/s); H100 SXM datasheet figures", r"h800", form="sxm"),
    GPU("H200-SXM-141GB", 141.0, 4.8, {"bf16": 989.0, "fp8": 1979.0, "int8": 1979.0},
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column ({_NV}h200/)", r"h200", form="sxm"),
    GPU("H200-NVL-141GB", 141.0, 4.8, {"bf16": 835.0, "fp8": 1670.0, "int8": 1670.0},
        f"NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column ({_NV}h200/)", r"h200", form="nvl"),
    GPU("H20", 96.0, 4.0, {"bf16": 148.0, "fp8": 296.0, "int8": 296.0},
        "NVIDIA H20 product brief (HGX H20: 96 GB HBM3, 4.0 TB/s, FP8 296 / BF16 148 TFLOPS dense)",
        r"(?<![a-z0-9])h20(?![0-9])"),
    # -- NVIDIA Blackwell
    GPU("B200", 180.0, 8.0, {"bf16": 2250.0, "fp8": 4500.0, "int8": 4500.0, "fp4": 9000.0},
        f"NVIDIA HGX B200 datasheet: 8 GPUs, 1.44 TB HBM3e, 64 TB/s, BF16 36 / FP8 72 / FP4 144 PFLOPS "
        f"sparse, per GPU and halved for dense ({_NV}hgx/)", r"(?<!g)b200"),
    GPU("GB200", 186.0, 8.0, {"bf16": 2500.0, "fp8": 5000.0, "int8": 5000.0, "fp4": 10000.0},
        f"NVIDIA GB200 NVL72 datasheet: 72 GPUs, 13.4 TB HBM3e, 576 TB/s, BF16 360 / FP8 720 / FP4 "
        f"1,440 PFLOPS sparse, per GPU and halved for dense ({_NV}gb200-nvl72/)", r"gb200"),
    GPU("RTX-PRO-6000-Blackwell", 96.0, 1.792, {"bf16": 500.0, "fp8": 1000.0, "fp4": 2000.0},
        "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 96 GB GDDR7, 1,792 GB/s; 4,000 AI "
        "TOPS FP4 sparse (FP4 2,000 dense, FP8 1,000, BF16 500)", r"rtx[-_ ]?pro[-_ ]?6000",
        hbm=False),
    # -- NVIDIA Ampere / Ada / Turing
    GPU("A100-SXM-80GB", 80.0, 2.039, {"bf16": 312.0, "int8": 624.0},
        f"NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column ({_NV}a100/)", r"a100|a800",
        form="sxm"),
    GPU("A100-SXM-40GB", 40.0, 1.555, {"bf16": 312.0, "int8": 624.0},
        f"NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column ({_NV}a100/)", r"a100|a800",
        form="sxm"),
    GPU("A100-PCIe-80GB", 80.0, 1.935, {"bf16": 312.0, "int8": 624.0},
        f"NVIDIA A100 Tensor Core GPU datasheet, A100 80GB PCIe column ({_NV}a100/)", r"a100|a800",
        form="pcie"),
    GPU("A100-PCIe-40GB", 40.0, 1.555, {"bf16": 312.0, "int8": 624.0},
        f"NVIDIA A100 Tensor Core GPU datasheet, A100 40GB PCIe column ({_NV}a100/)", r"a100|a800",
        form="pcie"),
    GPU("A10G", 24.0, 0.600, {"bf16": 125.0, "int8": 250.0},
        "AWS EC2 G5 (NVIDIA A10G, 24 GB GDDR6, 600 GB/s); AWS publishes no tensor figures for the "
        "A10G, so the NVIDIA A10 datasheet's (BF16 125, INT8 250 dense)", r"a10g", hbm=False),
    GPU("A10", 24.0, 0.600, {"bf16": 125.0, "int8": 250.0},
        f"NVIDIA A10 Tensor Core GPU datasheet ({_NV}products/a10-gpu/)", r"(?<![a-z0-9])a10(?![0-9g])",
        hbm=False),
    GPU("L4", 24.0, 0.300, {"bf16": 121.0, "fp8": 242.0, "int8": 242.0},
        f"NVIDIA L4 Tensor Core GPU datasheet ({_NV}l4/)", r"(?<![a-z0-9])l4(?![0-9s])", hbm=False),
    GPU("L40S", 48.0, 0.864, {"bf16": 362.0, "fp8": 733.0, "int8": 733.0},
        f"NVIDIA L40S GPU datasheet ({_NV}l40s/)", r"l40s", hbm=False),
    GPU("L40", 48.0, 0.864, {"bf16": 181.0, "fp8": 362.0, "int8": 362.0},
        f"NVIDIA L40 GPU datasheet ({_NV}l40/)", r"(?<![a-z0-9])l40(?![0-9s])", hbm=False),
    GPU("T4", 16.0, 0.320, {"bf16": 65.0, "int8": 130.0},
        f"NVIDIA T4 Tensor Core GPU datasheet: FP16 mixed precision 65 TFLOPS, INT8 130 TOPS (Turing "
        f"has no BF16; FP16 stands in) ({_NV}tesla-t4/)", r"(?<![a-z0-9])t4(?![0-9])", hbm=False),
    GPU("RTX-4090", 24.0, 1.008, {"bf16": 165.0, "fp8": 330.0, "int8": 661.0},
        "NVIDIA Ada Lovelace GPU architecture whitepaper, GeForce RTX 4090 column (FP16/BF16 tensor "
        "with FP32 accumulate 165.2, FP8 330.3, INT8 660.6 dense)", r"(rtx[-_ ]?)?4090", hbm=False),
    # -- AMD Instinct
    GPU("MI300X", 192.0, 5.3, {"bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
        f"AMD Instinct MI300X data sheet ({_AMD}mi300/mi300x.html)", r"mi300x?"),
    GPU("MI325X", 256.0, 6.0, {"bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
        f"AMD Instinct MI325X data sheet ({_AMD}mi300/mi325x.html)", r"mi325x?"),
    GPU("MI355X", 288.0, 8.0, {"bf16": 2516.6, "fp8": 5033.2, "int8": 5033.2, "fp4": 10066.3},
        f"AMD Instinct MI355X data sheet ({_AMD}mi350/mi355x.html)", r"mi355x?"),
    # -- Intel, Google
    GPU("Gaudi3", 128.0, 3.7, {"bf16": 1835.0, "fp8": 1835.0},
        "Intel Gaudi 3 AI accelerator white paper (128 GB HBM2e, 3.7 TB/s, 1,835 TFLOPS BF16 and FP8 "
        "matrix)", r"gaudi[-_ ]?3|hl[-_]?325"),
    GPU("TPU-v5e", 16.0, 0.819, {"bf16": 197.0, "int8": 394.0},
        "Google Cloud TPU v5e documentation (16 GiB HBM2, 819 GB/s, 197 TFLOPS BF16, 394 INT8)",
        r"tpu[-_ ]?v5[-_ ]?(e|lite)|v5litepod"),
    GPU("TPU-v6e", 32.0, 1.64, {"bf16": 918.0, "int8": 1836.0},
        "Google Cloud TPU v6e (Trillium) documentation (32 GiB HBM, 1,640 GB/s, 918 TFLOPS BF16, "
        "1,836 INT8)", r"tpu[-_ ]?v6[-_ ]?e|trillium|v6e"),
]}
#: Cloud instance types and VM sizes that name their GPU only by the SKU: (pattern, GPU, GPUs per
#: instance or None when the size varies), from each cloud's instance-type documentation.
_INSTANCES = [
    (r"p4de\.", "A100-SXM-80GB", 8), (r"p4d\.", "A100-SXM-40GB", 8), (r"p5e[n]?\.", "H200-SXM-141GB", 8),
    (r"p5\.", "H100-SXM-80GB", 8), (r"p6-b200", "B200", 8), (r"g6e\.", "L40S", None), (r"g6\.", "L4", None),
    (r"g5\.", "A10G", None), (r"g4dn\.", "T4", None),
    (r"nd96asr_v4", "A100-SXM-40GB", 8), (r"nd96amsr_a100_v4", "A100-SXM-80GB", 8),
    (r"nd96isr_h100_v5", "H100-SXM-80GB", 8), (r"nd96isr_h200_v5", "H200-SXM-141GB", 8),
    (r"nd96isr_mi300x_v5", "MI300X", 8), (r"nc\d+ads_a100_v4", "A100-PCIe-80GB", None),
    (r"nc\d+ads_h100_v5", "H100-NVL-94GB", None),
    (r"a2-ultragpu", "A100-SXM-80GB", None), (r"a2-(high|mega)gpu", "A100-SXM-40GB", None),
    (r"a3-ultragpu", "H200-SXM-141GB", 8), (r"a3-(high|mega|edge)gpu", "H100-SXM-80GB", None),
    (r"a4-highgpu", "B200", 8), (r"g2-standard", "L4", None),
]

_HF = "https://huggingface.co/{}/blob/main/config.json"


def _m(hf, params_b, layers, kv_heads, head_dim, hidden, max_pos, *, dtype="bf16", active=None,
       experts=None, experts_per_token=None, kv_lora_rank=None, qk_rope_head_dim=None, pattern="",
       checkpoint_gb=None, note=""):
    src = _HF.format(hf) + (f"; {note}" if note else "")
    return ModelArch(hf, params_b, layers, kv_heads, head_dim, active, dtype, src, pattern,
                     hidden_size=hidden, max_position_embeddings=max_pos, experts=experts,
                     experts_per_token=experts_per_token, kv_lora_rank=kv_lora_rank,
                     qk_rope_head_dim=qk_rope_head_dim, checkpoint_gb=checkpoint_gb)


_MLA = "MLA: one latent of kv_lora_rank + qk_rope_head_dim values per token per layer"
#: Model architectures by Hugging Face id, from each model's ``config.json`` (parameter counts
#: from the model cards). ``pattern`` matches the short names load generators and folders use.
ARCHITECTURES: dict[str, ModelArch] = {m.name: m for m in [
    # -- Llama 2 / 3 / 3.1 / 3.2 / 3.3
    _m("meta-llama/Llama-2-7b-chat-hf", 6.74, 32, 32, 128, 4096, 4096, dtype="fp16",
       pattern=r"llama[-_ ]?2[-_ ]?7b"),
    _m("meta-llama/Llama-2-13b-chat-hf", 13.0, 40, 40, 128, 5120, 4096, dtype="fp16",
       pattern=r"llama[-_ ]?2[-_ ]?13b"),
    _m("meta-llama/Llama-2-70b-chat-hf", 69.0, 80, 8, 128, 8192, 4096, dtype="fp16",
       pattern=r"llama[-_ ]?2[-_ ]?70b"),
    _m("meta-llama/Meta-Llama-3-8B-Instruct", 8.03, 32, 8, 128, 4096, 8192,
       pattern=r"(meta[-_ ]?)?llama[-_ ]?3[-_ ]8b"),
    _m("meta-llama/Meta-Llama-3-70B-Instruct", 70.6, 80, 8, 128, 8192, 8192,
       pattern=r"(meta[-_ ]?)?llama[-_ ]?3[-_ ]70b"),
    _m("meta-llama/Llama-3.1-8B-Instruct", 8.03, 32, 8, 128, 4096, 131072,
       pattern=r"llama[-_ ]?3([._]1)?[-_ ]?8b|llama[-_ ]?3[-_]?8b|llama3[-_]8b"),
    _m("meta-llama/Llama-3.1-70B-Instruct", 70.6, 80, 8, 128, 8192, 131072,
       pattern=r"llama[-_ ]?3[._]1[-_ ]?70b"),
    _m("meta-llama/Llama-3.1-405B-Instruct", 405.9, 126, 8, 128, 16384, 131072,
       pattern=r"llama[-_ ]?3([._]1)?[-_ ]?405b"),
    _m("meta-llama/Llama-3.2-1B-Instruct", 1.24, 16, 8, 64, 2048, 131072,
       pattern=r"llama[-_ ]?3[._]2[-_ ]?1b"),
    _m("meta-llama/Llama-3.2-3B-Instruct", 3.21, 28, 8, 128, 3072, 131072,
       pattern=r"llama[-_ ]?3[._]2[-_ ]?3b"),
    _m("meta-llama/Llama-3.3-70B-Instruct", 70.6, 80, 8, 128, 8192, 131072,
       pattern=r"llama[-_ ]?3([._][0-9])?[-_ ]?70b"),
    # -- Mistral
    _m("mistralai/Mistral-7B-Instruct-v0.3", 7.25, 32, 8, 128, 4096, 32768, pattern=r"mistral[-_ ]?7b"),
    _m("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7, 32, 8, 128, 4096, 32768, active=12.9, experts=8,
       experts_per_token=2, pattern=r"mixtral[-_ ]?8x7b"),
    _m("mistralai/Mixtral-8x22B-Instruct-v0.1", 140.6, 56, 8, 128, 6144, 65536, active=39.1, experts=8,
       experts_per_token=2, pattern=r"mixtral[-_ ]?8x22b"),
    # -- Qwen2.5
    _m("Qwen/Qwen2.5-0.5B-Instruct", 0.49, 24, 2, 64, 896, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?0\.5b"),
    _m("Qwen/Qwen2.5-1.5B-Instruct", 1.54, 28, 2, 128, 1536, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?1\.5b"),
    _m("Qwen/Qwen2.5-3B-Instruct", 3.09, 36, 2, 128, 2048, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?3b"),
    _m("Qwen/Qwen2.5-7B-Instruct", 7.62, 28, 4, 128, 3584, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?7b"),
    _m("Qwen/Qwen2.5-14B-Instruct", 14.7, 48, 8, 128, 5120, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?14b"),
    _m("Qwen/Qwen2.5-32B-Instruct", 32.8, 64, 8, 128, 5120, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?32b"),
    _m("Qwen/Qwen2.5-72B-Instruct", 72.7, 80, 8, 128, 8192, 32768, pattern=r"qwen[-_ ]?2\.5[-_ ]?72b"),
    # -- Qwen3 (dense and mixture of experts)
    _m("Qwen/Qwen3-0.6B", 0.6, 28, 8, 128, 1024, 40960, pattern=r"qwen[-_ ]?3[-_ ]?0\.6b"),
    _m("Qwen/Qwen3-1.7B", 1.7, 28, 8, 128, 2048, 40960, pattern=r"qwen[-_ ]?3[-_ ]?1\.7b"),
    _m("Qwen/Qwen3-4B", 4.0, 36, 8, 128, 2560, 40960, pattern=r"qwen[-_ ]?3[-_ ]?4b"),
    _m("Qwen/Qwen3-8B", 8.2, 36, 8, 128, 4096, 40960, pattern=r"qwen[-_ ]?3[-_ ]?8b"),
    _m("Qwen/Qwen3-14B", 14.8, 40, 8, 128, 5120, 40960, pattern=r"qwen[-_ ]?3[-_ ]?14b"),
    _m("Qwen/Qwen3-32B", 32.8, 64, 8, 128, 5120, 40960, pattern=r"qwen[-_ ]?3[-_ ]?32b"),
    _m("Qwen/Qwen3-30B-A3B", 30.5, 48, 4, 128, 2048, 40960, active=3.3, experts=128, experts_per_token=8,
       pattern=r"qwen[-_ ]?3[-_ ]?30b[-_ ]?a3b"),
    _m("Qwen/Qwen3-235B-A22B", 235.0, 94, 4, 128, 4096, 40960, active=22.0, experts=128,
       experts_per_token=8, pattern=r"qwen[-_ ]?3[-_ ]?235b[-_ ]?a22b"),
    # -- Gemma 2 / 3 (alternating sliding-window layers: the KV figure is the all-global bound)
    _m("google/gemma-2-2b-it", 2.61, 26, 4, 256, 2304, 8192, pattern=r"gemma[-_ ]?2[-_ ]?2b",
       note="local/global attention: every other layer keeps a 4,096-token window"),
    _m("google/gemma-2-9b-it", 9.24, 42, 8, 256, 3584, 8192, pattern=r"gemma[-_ ]?2[-_ ]?9b",
       note="local/global attention: every other layer keeps a 4,096-token window"),
    _m("google/gemma-2-27b-it", 27.2, 46, 16, 128, 4608, 8192, pattern=r"gemma[-_ ]?2[-_ ]?27b",
       note="local/global attention: every other layer keeps a 4,096-token window"),
    _m("google/gemma-3-1b-it", 1.0, 26, 1, 256, 1152, 32768, pattern=r"gemma[-_ ]?3[-_ ]?1b",
       note="5 local (1,024-token window) : 1 global layers"),
    _m("google/gemma-3-4b-it", 4.3, 34, 4, 256, 2560, 131072, pattern=r"gemma[-_ ]?3[-_ ]?4b",
       note="5 local (1,024-token window) : 1 global layers"),
    _m("google/gemma-3-12b-it", 12.2, 48, 8, 256, 3840, 131072, pattern=r"gemma[-_ ]?(3[-_ ]?)?12b",
       note="5 local (1,024-token window) : 1 global layers"),
    _m("google/gemma-3-27b-it", 27.4, 62, 16, 128, 5376, 131072, pattern=r"gemma[-_ ]?3[-_ ]?27b",
       note="5 local (1,024-token window) : 1 global layers"),
    # -- Phi
    _m("microsoft/Phi-3-mini-4k-instruct", 3.82, 32, 32, 96, 3072, 4096,
       pattern=r"phi[-_ ]?3(\.5)?[-_ ]?mini"),
    _m("microsoft/Phi-3-medium-4k-instruct", 14.0, 40, 10, 128, 5120, 4096, pattern=r"phi[-_ ]?3[-_ ]?medium"),
    _m("microsoft/phi-4", 14.7, 40, 10, 128, 5120, 16384, pattern=r"phi[-_ ]?4(?![-_ ]?mini)"),
    _m("microsoft/Phi-4-mini-instruct", 3.84, 32, 8, 128, 3072, 131072, pattern=r"phi[-_ ]?4[-_ ]?mini"),
    # -- DeepSeek, Kimi (multi-head latent attention)
    _m("deepseek-ai/DeepSeek-V3", 671.0, 61, 1, 576, 7168, 163840, dtype="fp8", active=37.0, experts=256,
       experts_per_token=8, kv_lora_rank=512, qk_rope_head_dim=64, note=_MLA,
       pattern=r"deepseek[-_ ]?v3"),
    _m("deepseek-ai/DeepSeek-R1", 671.0, 61, 1, 576, 7168, 163840, dtype="fp8", active=37.0, experts=256,
       experts_per_token=8, kv_lora_rank=512, qk_rope_head_dim=64, note=_MLA,
       pattern=r"deepseek[-_ ]?r1(?![-_ ]?distill)"),
    _m("moonshotai/Kimi-K2-Instruct", 1000.0, 61, 1, 576, 7168, 131072, dtype="fp8", active=32.0,
       experts=384, experts_per_token=8, kv_lora_rank=512, qk_rope_head_dim=64, note=_MLA,
       pattern=r"kimi[-_ ]?k2(?![.]5)"),
    # -- OpenAI gpt-oss (MXFP4 experts, BF16 attention; alternating 128-token sliding window)
    _m("openai/gpt-oss-20b", 20.9, 24, 8, 64, 2880, 131072, dtype="mxfp4", active=3.6, experts=32,
       experts_per_token=4, pattern=r"gpt[-_ ]?oss[-_ ]?20b", checkpoint_gb=14.46,
       note="weights as loaded: 13.47 GiB (llm-d-benchmark config_explorer/empirical-vllm-memory-results.md)"),
    _m("openai/gpt-oss-120b", 116.8, 36, 8, 64, 2880, 131072, dtype="mxfp4", active=5.1, experts=128,
       experts_per_token=4, pattern=r"gpt[-_ ]?oss[-_ ]?120b", checkpoint_gb=69.13,
       note="weights as loaded: 64.38 GiB (llm-d-benchmark config_explorer/empirical-vllm-memory-results.md)"),
    # -- IBM Granite
    _m("ibm-granite/granite-3.1-2b-instruct", 2.53, 40, 8, 64, 2048, 131072,
       pattern=r"granite[-_ ]?3(\.[0-9])?[-_ ]?2b"),
    _m("ibm-granite/granite-3.3-8b-instruct", 8.17, 40, 8, 128, 4096, 131072,
       pattern=r"granite[-_ ]?3(\.[0-9])?[-_ ]?8b"),
]}

#: Families whose size alone names a model (``llama_405b``, ``qwen-72b``): the newest release of
#: that size in the table.
_FAMILY_BY_SIZE = {
    "llama": ["meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
              "meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-3.1-8B-Instruct",
              "meta-llama/Llama-2-13b-chat-hf", "meta-llama/Llama-3.3-70B-Instruct",
              "meta-llama/Llama-3.1-405B-Instruct"],
    "qwen": ["Qwen/Qwen3-0.6B", "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct",
             "Qwen/Qwen3-1.7B", "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen3-4B", "Qwen/Qwen2.5-7B-Instruct",
             "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B", "Qwen/Qwen2.5-72B-Instruct"],
    "gemma": ["google/gemma-3-1b-it", "google/gemma-2-2b-it", "google/gemma-3-4b-it",
              "google/gemma-2-9b-it", "google/gemma-3-12b-it", "google/gemma-3-27b-it"],
    "mistral": ["mistralai/Mistral-7B-Instruct-v0.3"],
    "granite": ["ibm-granite/granite-3.1-2b-instruct", "ibm-granite/granite-3.3-8b-instruct"],
    "phi": ["microsoft/Phi-3-mini-4k-instruct", "microsoft/phi-4"],
}
# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------
def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())


def gpu_count(name) -> int | None:
    """GPUs a name counts (``4xNVIDIA_L40S`` → 4, ``Standard_ND96asr_v4 x 1`` → 8), or None."""
    if not isinstance(name, str) or not name.strip():
        return None
    raw, n = parse_gpu(name)
    low = _norm(raw or "")
    per = next((k for pat, _, k in _INSTANCES if re.search(pat.replace("_", "-"), low)), None)
    vms = re.search(r"-x-?(\d+)$", low)
    if per is not None:
        return per * (int(vms.group(1)) if vms else 1) * (n or 1)
    return n


def find_gpu(name) -> GPU | None:
    """The GPU a name means, or None.

    Reads the spellings of sweeps, Kubernetes labels and cloud SKUs: ``H100``, ``H100 SXM``,
    ``nvidia-h100-80gb``, ``NVIDIA-H100-80GB-HBM3``, ``A100-SXM4-40GB``, ``4xNVIDIA_L40S``,
    ``Tesla-T4``, ``Standard_ND96asr_v4``, ``p4d.24xlarge``. A memory size in the name picks the
    variant (``A100-40GB``, ``H100 NVL 94GB``), and so do ``PCIe``, ``SXM`` and ``NVL``; without
    them the SXM part of a family is meant (GKE's ``nvidia-tesla-a100`` is the 40 GB one).
    """
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str) or not name.strip():
        return None
    if name in GPUS:
        return GPUS[name]
    raw, _ = parse_gpu(name)
    low = _norm(raw or name)
    for pat, gname, _ in _INSTANCES:
        if re.search(pat.replace("_", "-"), low):
            return GPUS[gname]
    cands = [g for g in GPUS.values() if g.pattern and re.search(g.pattern, low)]
    if not cands:
        return None
    mem = re.search(r"(\d{2,3})-?gb?(?![a-z])", low)
    if mem:
        same = [g for g in cands if abs(g.memory_gb - float(mem.group(1))) < 2.5]
        cands = same or cands
    elif "tesla-a100" in low:
        cands = [g for g in cands if g.memory_gb == 40.0] or cands
    for word, form in (("pcie", "pcie"), ("nvl", "nvl"), ("sxm", "sxm"), ("hbm3", "sxm")):
        if word in low:
            cands = [g for g in cands if g.form == form] or cands
            break
    return cands[0]


def find_model(name, *, params_b=None) -> ModelArch | None:
    """The architecture a model name means, or None.

    A Hugging Face id (``meta-llama/Llama-3.1-8B-Instruct``) or its last part, a short name
    (``llama-3.1-8b``, ``Meta-Llama-3-70B``, ``qwen3-30b-a3b``), a quantised repackaging
    (``neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8``) or a folder name
    (``llama_3_3_70b``). A family with a size only (``llama_405b``), or with the size given as
    ``params_b`` (billions), means the newest model of that family and size in the table.
    """
    if isinstance(name, ModelArch):
        return name
    if not isinstance(name, str) or not name.strip():
        return None
    low = name.strip().lower()
    base = low.rstrip("/").rsplit("/", 1)[-1]
    for m in ARCHITECTURES.values():
        if m.name.lower() in (low, base) or m.name.lower().rsplit("/", 1)[-1] == base:
            return m
    for text in (base, _norm(low)):
        for m in ARCHITECTURES.values():
            if m.pattern and re.search(m.pattern, text):
                return m
    for fam, ids in _FAMILY_BY_SIZE.items():
        # the family without a version of its own (``llama_405b``, ``qwen-72b``): the size picks it
        m = re.search(rf"(?<![a-z]){fam}(?![a-z0-9.])[-_ ]*(?:(\d+(?:\.\d+)?)b(?![a-z0-9]))?", _norm(low))
        if not m:
            continue
        size = float(m.group(1)) if m.group(1) else (float(params_b) if params_b is not None else None)
        if size is None or not math.isfinite(size) or size <= 0:
            continue
        best = min(ids, key=lambda i: abs(math.log(ARCHITECTURES[i].params_b / size)))
        if abs(ARCHITECTURES[best].params_b / size - 1) <= 0.1:
            return ARCHITECTURES[best]
    return None


def name_dtype(name) -> str | None:
    """The weight quantisation a model name states (``-FP8``, ``-AWQ``, ``quantized.w8a8``,
    ``-NVFP4``), or None."""
    if not isinstance(name, str):
        return None
    low = name.lower()
    for word, dt in (("nvfp4", "nvfp4"), ("mxfp4", "mxfp4"), ("fp8", "fp8"), ("w8a8", "int8"), ("int8", "int8"),
                     ("awq", "awq"), ("gptq", "gptq"), ("w4a16", "int4"), ("int4", "int4"), ("bnb", "bitsandbytes")):
        if re.search(rf"(?<![a-z0-9]){word}(?![a-z0-9])", low):
            return dt
    return None


def close_matches(name, kind: str = "gpu", n: int = 5) -> list[str]:
    """Table names close to ``name`` (``kind`` ``"gpu"`` or ``"model"``), for an error message:
    by similarity to the whole name and to its family (``H100`` of ``H100-SXM-80GB``,
    ``Llama-3.1-8B-Instruct`` of ``meta-llama/Llama-3.1-8B-Instruct``)."""
    import difflib

    pool = list(GPUS) if kind == "gpu" else list(ARCHITECTURES)
    key = str(name).lower()

    def score(full: str) -> float:
        short = full.lower().rsplit("/", 1)[-1]
        family = short.split("-")[0] if kind == "gpu" else short
        return max(difflib.SequenceMatcher(None, key, s).ratio() for s in (short, family))

    ranked = sorted(pool, key=score, reverse=True)
    return [p for p in ranked[:n] if score(p) >= 0.4]


# ---------------------------------------------------------------------------------------------
# One replica
# ---------------------------------------------------------------------------------------------
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
        Per fact, where it came from (a flag, a file and line, a column, or a default).
    engine : str or None
        The serving engine and version when recorded (``vllm 0.8.3``, ``sglang``).
    notes : tuple of str
        What else the files said (a measured weight size, the engine's concurrency line).
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
    engine: str | None = None
    notes: tuple = field(default=(), compare=False)

    @property
    def known(self) -> bool:
        """Both the model and the GPU are known: the physical step floor can be computed."""
        return self.model is not None and self.gpu is not None

    @property
    def tensor_parallel_known(self) -> bool:
        """The GPUs per replica were given or recorded (not vLLM's default of one)."""
        return "tensor_parallel" in self.sources

    @property
    def weight_bytes(self) -> float:
        """Bytes of the replica's weights: the released checkpoint's measured size when it is
        mixed-precision and served as released, else parameters × bytes per parameter."""
        if self.model is None:
            return math.nan
        if self.model.checkpoint_gb is not None and self.weight_dtype == self.model.dtype:
            return self.model.checkpoint_gb * 1e9
        return self.model.params_b * 1e9 * dtype_bytes(self.weight_dtype)

    @property
    def _kv_value_bytes(self) -> float:
        kv = self.kv_cache_dtype
        return dtype_bytes(kv if kv not in (None, "auto") else "bf16")

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes one token of context takes, summed over the replica's GPUs."""
        if self.model is None:
            return math.nan
        return self.model.kv_bytes_per_token_per_gpu(self.tensor_parallel, self._kv_value_bytes) * \
            self.tensor_parallel

    def kv_cache_tokens(self) -> int | None:
        """Tokens of context the KV cache holds: the engine's own count when recorded, else, on
        each GPU, ``memory × (gpu_memory_utilization − ACTIVATION_RESERVE)`` less its share of
        the weights, over the KV bytes a token takes on it; None when the model or GPU is
        unknown, 0 when the weights do not fit."""
        if self.kv_cache_tokens_recorded:
            return int(self.kv_cache_tokens_recorded)
        if not self.known:
            return None
        tp = self.tensor_parallel
        free = self._free_per_gpu()
        if free <= 0 and "tensor_parallel" not in self.sources:
            return None  # the weights do not fit on one GPU and nobody said how many there are
        per = self.model.kv_bytes_per_token_per_gpu(tp, self._kv_value_bytes)
        return int(free // per) if free > 0 else 0

    def _free_per_gpu(self) -> float:
        """Bytes left for the KV cache on each GPU (negative when the weights do not fit)."""
        return (self.gpu.memory_bytes * (self.gpu_memory_utilization - ACTIVATION_RESERVE)
                - self.weight_bytes / self.tensor_parallel)

    def step_time_floor(self, decode_seqs, context_tokens, prompt_tokens):
        """Least time (s) a step can take on this replica: on each of its ``tensor_parallel``
        GPUs, the larger of the HBM traffic (its share of the weights the step reads, see
        :meth:`ModelArch.weights_read`, plus ``context_tokens`` of KV for each of
        ``decode_seqs`` decoded sequences) over the bandwidth and its share of the FLOPs
        (``2 × active parameters`` per token of work, ``decode_seqs + prompt_tokens`` tokens)
        over the dense peak at the weights' precision. NaN when the model or GPU is unknown, or
        when the weights do not fit on one GPU and the tensor parallelism is not known."""
        d = np.asarray(decode_seqs, dtype=float)
        x = np.asarray(context_tokens, dtype=float)
        p = np.asarray(prompt_tokens, dtype=float)
        if not self.known or (self._free_per_gpu() <= 0 and "tensor_parallel" not in self.sources):
            return np.full(np.broadcast(d, x, p).shape, math.nan)
        tp = self.tensor_parallel
        w = self.weight_bytes * self.model.weights_read(d) / self.model.params_b / tp
        kv = d * x * self.model.kv_bytes_per_token_per_gpu(tp, self._kv_value_bytes)
        mem = (w + kv) / (self.gpu.bandwidth_tbs * 1e12)
        flops = 2.0 * self.model.active_b * 1e9 * (d + p)
        comp = flops / (tp * self.gpu.peak_flops(self.weight_dtype))
        return np.maximum(mem, comp)

    def kv_derivation(self) -> str:
        """How :meth:`kv_cache_tokens` was reached, in words and numbers."""
        src = self.sources
        if self.kv_cache_tokens_recorded:
            how = src.get("kv_cache_tokens", "given")
            return f"given ({how})" if how.startswith(("given", "--")) else f"recorded by the engine ({how})"
        if not self.known:
            missing = " and ".join(w for w, v in (("the model", self.model), ("the GPU", self.gpu)) if v is None)
            return f"not estimated: {missing} not known (not binding in the engine model)"
        tp, g = self.tensor_parallel, self.gpu
        if self._free_per_gpu() <= 0 and "tensor_parallel" not in src:
            return (f"not estimated: {self.weight_bytes / 1e9:.3g} GB of weights do not fit on one {g.name} and the "
                    "sweep does not record how many GPUs a replica has: pass --tensor-parallel (not binding in the "
                    "engine model)")
        mem = f"{g.reported_gib:g} GiB" if g.reported_gib else f"{g.memory_gb:g} {'GiB' if g.hbm else 'GB'}"
        per = self.model.kv_bytes_per_token_per_gpu(tp, self._kv_value_bytes)
        return (f"estimated: per GPU {mem} × ({self.gpu_memory_utilization:g} − "
                f"{ACTIVATION_RESERVE:g} activation reserve) − {self.weight_bytes / tp / 1e9:.3g} GB of weights, "
                f"over {per / 1024:.4g} KiB of KV per token per GPU")

    def assumptions(self) -> list[str]:
        """One line per fact: its value, where it came from and the flag that overrides it."""
        src = self.sources
        m, g = self.model, self.gpu

        def why(key, default, flag, extra=""):
            s = src.get(key, default)
            s = s + extra
            return f"({s})" if s.startswith(flag) else f"({s}; {flag})"

        out = []
        if m is not None:
            attn = (f"MLA latent {m.kv_lora_rank}+{m.qk_rope_head_dim}" if m.mla else
                    f"{m.kv_heads} KV heads × {m.head_dim}")
            moe = f", {m.active_b:g}B active" if m.active_params_b is not None else ""
            out.append(f"model {m.name}: {m.params_b:g}B parameters{moe}, {m.layers} layers, {attn} "
                       + why("model", "given", "--model", f"; figures from {m.source.split(';')[0]}"))
        else:
            out.append("model unknown " + why("model", "not recorded", "--model"))
        if g is not None:
            out.append(f"GPU {g.name}: {g.memory_gb:g} {'GiB HBM' if g.hbm else 'GB'}, {g.bandwidth_tbs:g} TB/s, "
                       f"{g.tflops['bf16']:g} dense 16-bit TFLOP/s "
                       + why("gpu", "given", "--gpu", f"; figures from {g.source.split(' (')[0]}"))
        else:
            out.append("GPU unknown " + why("gpu", "not recorded", "--gpu"))
        out.append(f"tensor parallel {self.tensor_parallel} GPU{'s' if self.tensor_parallel != 1 else ''} per replica "
                   + why("tensor_parallel", "default: 1", "--tensor-parallel"))
        out.append(f"gpu_memory_utilization {self.gpu_memory_utilization:g} "
                   + why("gpu_memory_utilization", "default: vLLM's 0.9", "--gpu-memory-utilization"))
        if self.max_model_len is not None:
            out.append(f"max_model_len {self.max_model_len:,} tokens " + why("max_model_len", "given", "--max-model-len"))
        elif m is not None and m.max_position_embeddings:
            out.append(f"max_model_len {m.max_position_embeddings:,} tokens (default: the model's "
                       "max_position_embeddings; --max-model-len)")
        else:
            out.append("max_model_len unknown (not recorded; --max-model-len)")
        out.append(f"weight dtype {self.weight_dtype} ({src.get('weight_dtype', 'default: the checkpoint')}; "
                   "a quantised --model name such as ...-FP8 or ...-AWQ sets it)")
        out.append(f"KV cache dtype {self.kv_cache_dtype} ({src.get('kv_cache_dtype', 'default: auto')}; "
                   "the server's --kv-cache-dtype in a file beside the sweep)")
        kv = self.kv_cache_tokens()
        out.append(f"KV cache {'unknown' if kv is None else f'{kv:,} tokens'}: {self.kv_derivation()} "
                   "(--kv-cache-tokens on predict)")
        if self.engine:
            out.append(f"engine {self.engine} ({src.get('engine', 'recorded')})")
        for n in self.notes:
            out.append(f"note: {n}")
        return out

    def engine_defaults(self) -> dict:
        """:func:`engine_defaults` for this replica's engine (``engine``, its version in the text),
        GPU, context length and KV cache."""
        ctx = self.max_model_len or (self.model.max_position_embeddings if self.model else None)
        return engine_defaults(self.engine, None, self.gpu, max_model_len=self.max_model_len,
                               kv_cache_tokens=self.kv_cache_tokens(), context_len=ctx)

    def as_dict(self) -> dict:
        """The facts as plain values (for ``--json``), with the assumption lines."""
        return {"model": self.model.name if self.model else None, "gpu": self.gpu.name if self.gpu else None,
                "tensor_parallel": self.tensor_parallel, "gpu_memory_utilization": self.gpu_memory_utilization,
                "max_model_len": self.max_model_len, "weight_dtype": self.weight_dtype,
                "kv_cache_dtype": self.kv_cache_dtype, "kv_cache_tokens": self.kv_cache_tokens(),
                "kv_cache_tokens_source": self.kv_derivation(), "engine": self.engine,
                "sources": dict(self.sources), "assumptions": self.assumptions()}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _col(tab, name):
    if name not in tab:
        return None
    for v in tab[name]:
        if _missing(v):
            continue
        return v.item() if isinstance(v, np.generic) else v
    return None


def _path_names(tab, path) -> list:
    """Names that may say the model or GPU: the result files' names and their two folders."""
    files = [str(v) for v in tab["source_file"].dropna().unique()][:3] if "source_file" in tab else []
    if path is not None:
        files.append(os.fspath(path))
    out = []
    for f in files:
        parts = os.path.normpath(os.path.abspath(f)).split(os.sep)
        for part in reversed(parts[-3:]):
            stem = os.path.splitext(part)[0]
            if stem and stem not in out:
                out.append(stem)
    return out


def hardware_for(sweep=None, *, model=None, gpu=None, tensor_parallel=None, gpu_memory_utilization=None,
                 max_model_len=None, kv_cache_tokens=None, path=None) -> Hardware:
    """The hardware facts of a sweep's replica.

    Each fact is taken from the first of: the arguments (the user's flags); the sweep's recorded
    columns (``model``, ``params_b``, ``gpu``, ``tensor_parallel``, ``gpu_memory_utilization``,
    ``max_model_len``, ``kv_cache_tokens``, ``quantization``/``precision``,
    ``kv_cache_dtype``, which the importers read from the result files and the manifests and
    command lines beside them); the files beside ``path`` (:func:`read_server_facts`: an
    engine's start-up log, whose KV-cache size is the engine's own count).

    Parameters
    ----------
    sweep : capbook.sweeps.sweep.Sweep, optional
    model, gpu : str, optional
        A model name (Hugging Face id or short name) or GPU name; must be in the tables.
    tensor_parallel : int, optional
        GPUs per replica.
    gpu_memory_utilization : float, optional
        Share of each GPU's memory the engine takes, in (0, 1].
    max_model_len, kv_cache_tokens : int, optional
        Tokens.
    path : str or path-like, optional
        The sweep's file or folder (the ``--sweep`` path): logs and manifests beside it are read.

    Raises
    ------
    ValueError
        Naming the argument, when a given model or GPU is not in the tables (with close matches)
        or a number is out of range.
    """
    tab = sweep.table if sweep is not None else {}
    facts = read_server_facts(path) if path is not None else {}
    src: dict = {}
    cfg_src = _col(tab, "engine_config_source")

    def pick(given, col, label, fact=None):
        if given is not None:
            src[label] = "given"
            return given
        v = _col(tab, col) if col else None
        if v is not None:
            src[label] = f"the sweep's {col} column" + (f"; files read beside it: {cfg_src}" if cfg_src else "")
            return v
        f = facts.get(fact or label)
        if f is not None:
            src[label] = f[1]
            return f[0]
        return None

    m = pick(model, "model", "model")
    arch = find_model(m, params_b=_col(tab, "params_b") if model is None else None)
    if model is not None and arch is None:
        near = close_matches(model, "model")
        raise ValueError(f"model={model!r} is not in capbook's table of architectures"
                         + (f"; close: {', '.join(near)}" if near else "")
                         + f" (the table: {', '.join(sorted(m.rsplit('/', 1)[-1] for m in ARCHITECTURES))})")
    if arch is None and m is not None and model is None and facts.get("model"):
        arch = find_model(facts["model"][0])  # the sweep's name is unknown, the server log's is not
        if arch is not None:
            src["model"] = facts["model"][1]
    if arch is not None and m is not None and str(m).lower() != arch.name.lower() and "model" in src \
            and not src["model"].startswith("the name"):
        src["model"] = f"{src['model']}: {m!r} read as {arch.name}"
    elif arch is None and m is not None:
        src["model"] = f"{m!r}, {src.get('model', 'recorded')}, is not in capbook's table of architectures"
    names = _path_names(tab, path)
    if arch is None and model is None:  # a result file or folder named after the model (llama_3_3_70b_...)
        for n in names:
            arch = find_model(n, params_b=_col(tab, "params_b"))
            if arch is not None:
                src["model"] = f"the name {n!r} beside the results"
                break
    g = pick(gpu, "gpu", "gpu")
    if g is None:
        for n in names:
            if find_gpu(n) is not None:
                g, src["gpu"] = n, f"the name {n!r} beside the results"
                break
    dev = find_gpu(g)
    if gpu is not None and dev is None:
        near = close_matches(gpu, "gpu")
        raise ValueError(f"gpu={gpu!r} is not in capbook's table of GPUs"
                         + (f"; close: {', '.join(near)}" if near else "")
                         + f" (the table: {', '.join(GPUS)})")
    if dev is not None and g is not None and str(g) != dev.name and not src["gpu"].startswith("the name"):
        src["gpu"] = f"{src.get('gpu', 'given')}: {g!r} read as {dev.name}"
    tp = pick(tensor_parallel, "tensor_parallel", "tensor_parallel")
    if tp is None and g is not None and gpu_count(str(g)):
        tp, src["tensor_parallel"] = gpu_count(str(g)), f"the GPU count in {g!r}"
    tp = integer(int(float(tp)), "tensor_parallel", minimum=1) if tp is not None else 1
    util = pick(gpu_memory_utilization, "gpu_memory_utilization", "gpu_memory_utilization")
    util = probability(float(util), "gpu_memory_utilization", hi_open=False) if util is not None else 0.9
    mml = pick(max_model_len, "max_model_len", "max_model_len")
    mml = integer(int(float(mml)), "max_model_len", minimum=1) if mml is not None else None
    kv = pick(kv_cache_tokens, "kv_cache_tokens", "kv_cache_tokens")
    kv = int(float(kv)) if kv is not None and float(kv) >= 1 else None
    q = None
    for col in ("quantization", "precision"):
        if _col(tab, col) is not None and str(_col(tab, col)).lower() not in ("auto", "none"):
            q, src["weight_dtype"] = str(_col(tab, col)), f"the sweep's {col} column"
            break
    if q is None and facts.get("quantization"):
        q, src["weight_dtype"] = facts["quantization"]
    if q is None and name_dtype(m) is not None:
        q, src["weight_dtype"] = name_dtype(m), f"the model name {m!r}"
    wd = q if q is not None else (arch.dtype if arch else "bf16")
    kvd = pick(None, "kv_cache_dtype", "kv_cache_dtype")
    eng = facts.get("engine")
    if eng is not None:
        src["engine"] = eng[1]
    elif _col(tab, "engine") is not None:
        src["engine"] = "the sweep's engine column"
    notes = tuple(f"{v[0]} ({v[1]})" for k, v in facts.items() if k.startswith("note:"))
    return Hardware(arch, dev, tp, util, mml, wd, str(kvd) if kvd is not None else "auto", kv, src,
                    eng[0] if eng else (_col(tab, "engine") or None), notes)


# ---------------------------------------------------------------------------------------------
# What an engine picks when it is not told
# ---------------------------------------------------------------------------------------------
def _version(text) -> tuple | None:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(x) for x in m.groups(default="0")) if m else None


def engine_defaults(engine: str | None, version: str | None = None, gpu=None, *, max_model_len: int | None = None,
                    kv_cache_tokens: int | None = None, context_len: int | None = None) -> dict:
    """The scheduler limits an engine sets when its command line does not.

    Parameters
    ----------
    engine : str or None
        ``vllm`` (``"vllm (V0 engine)"`` for vLLM's V0 engine), ``sglang`` or ``tgi``; a version
        in the text (``vllm 0.8.3``) is read when ``version`` is None.
    version : str, optional
    gpu : GPU or str, optional
        The GPU (vLLM's defaults depend on its memory and name).
    max_model_len : int, optional
        Tokens (vLLM V0's batched-token budget is at least the longest context).
    kv_cache_tokens, context_len : int, optional
        SGLang's KV pool (``max_total_num_tokens``) and context length, tokens: its
        ``max_running_requests`` follows from them.

    Returns
    -------
    dict
        ``max_num_seqs`` (running sequences; SGLang's ``max_running_requests``, TGI's
        ``max_concurrent_requests``; None when it cannot be known), ``max_num_batched_tokens``
        (tokens per step; SGLang's ``chunked_prefill_size``, TGI's ``max_batch_prefill_tokens``),
        ``chunked_prefill`` (bool) and ``sources``: for each of them, the rule and where it is
        in the engine's code.

    Notes
    -----
    vLLM ≥ 0.9 (``EngineArgs.get_batch_defaults``, since PR #17885): a GPU with at least 70 GiB
    that is not an A100 gets ``max_num_seqs`` 1024 and, for the API server, 8192 batched tokens;
    any other 256 and 2048. vLLM 0.8 (V1 by default): 8192 batched tokens on an H100 or H200 by
    name, else 2048; ``max_num_seqs`` 1024 until 0.8.3, then (PR #16158) 1024 on an H100/H200 and
    256 elsewhere. vLLM's V0 engine: 256 sequences and, without chunked
    prefill, ``max(max_model_len, 2048)`` batched tokens. SGLang: ``max_running_requests =
    min(max_total_num_tokens // 2, min(max(int(max_total_num_tokens / context_len × 512),
    2048), 4096))`` (scheduler and ``ModelRunner``). TGI's launcher: ``max_concurrent_requests``
    128, ``max_batch_prefill_tokens`` 4096.
    """
    text = str(engine or "").lower()
    ver = _version(version) if version is not None else _version(text)
    dev = find_gpu(gpu) if gpu is not None else None
    if "sglang" in text:
        src = {"chunked_prefill": "SGLang chunks prefills by default"}
        if kv_cache_tokens and context_len:
            pool = min(max(int(kv_cache_tokens / context_len * 512), 2048), 4096)
            n = min(int(kv_cache_tokens) // 2, pool)
            src["max_num_seqs"] = (f"SGLang's max_running_requests = min(max_total_num_tokens // 2, request pool "
                                   f"{pool}) from a KV pool of {int(kv_cache_tokens):,} tokens and context "
                                   f"{int(context_len):,} (scheduler / ModelRunner)")
        else:
            n = None
            src["max_num_seqs"] = ("SGLang derives max_running_requests from its KV pool "
                                   "(max_total_num_tokens // 2, at most 4096): pool size not known")
        src["max_num_batched_tokens"] = "SGLang's chunked_prefill_size default (8192 on 80 GB-class GPUs)"
        return {"max_num_seqs": n, "max_num_batched_tokens": 8192, "chunked_prefill": True, "sources": src}
    if "tgi" in text or "text-generation" in text:
        return {"max_num_seqs": 128, "max_num_batched_tokens": 4096, "chunked_prefill": False,
                "sources": {"max_num_seqs": "TGI launcher's max_concurrent_requests default (128)",
                            "max_num_batched_tokens": "TGI launcher's max_batch_prefill_tokens default (4096)",
                            "chunked_prefill": "TGI batches whole prefills"}}
    v0 = "v0 engine" in text or (ver is not None and ver < (0, 8))
    if v0:
        b = max(int(max_model_len or 0), 2048)
        return {"max_num_seqs": 256, "max_num_batched_tokens": b, "chunked_prefill": False,
                "sources": {"max_num_seqs": "vLLM V0's max_num_seqs default (256)",
                            "max_num_batched_tokens": "vLLM V0 without chunked prefill: max(max_model_len, 2048)",
                            "chunked_prefill": "vLLM V0 runs prefills apart"}}
    name = dev.name.lower() if dev else ""
    if ver is not None and ver < (0, 9):
        big = "h100" in name or "h200" in name
        if ver < (0, 8, 4):
            n, why = 1024, "vLLM 0.8.0–0.8.3 V1: max_num_seqs 1024 on every GPU"
        else:
            n, why = (1024 if big else 256), ("vLLM 0.8.4–0.8.5 V1 (PR #16158): max_num_seqs 1024 on an H100/H200 "
                                              "by name, else V0's 256")
        return {"max_num_seqs": n, "max_num_batched_tokens": 8192 if big else 2048, "chunked_prefill": True,
                "sources": {"max_num_seqs": why,
                            "max_num_batched_tokens": "vLLM 0.8 V1 API server: 8192 on an H100/H200 by name, "
                                                      "else 2048",
                            "chunked_prefill": "vLLM V1 always chunks prefills"}}
    gib = dev.memory_bytes / 2 ** 30 if dev else 0.0
    big = gib >= 70 and "a100" not in name
    what = (f"{dev.name} has {gib:.0f} GiB" if dev else "GPU unknown") + (
        "" if dev is None or "a100" not in name else ", an A100")
    rule = "vLLM ≥ 0.9 get_batch_defaults (API server): ≥ 70 GiB and not an A100 → 1024 / 8192, else 256 / 2048"
    if ver is None:
        rule += "; the vLLM version is not recorded: the current rule"
    return {"max_num_seqs": 1024 if big else 256, "max_num_batched_tokens": 8192 if big else 2048,
            "chunked_prefill": True,
            "sources": {"max_num_seqs": f"{rule} ({what})", "max_num_batched_tokens": f"{rule} ({what})",
                        "chunked_prefill": "vLLM V1 always chunks prefills"}}


# ---------------------------------------------------------------------------------------------
# Facts the files beside the results record
# ---------------------------------------------------------------------------------------------
_NUM = r"([\d,]+)"
_ARG_KEYS = {"model": "model", "model_path": "model", "model_id": "model", "tensor_parallel_size": "tensor_parallel",
             "tp_size": "tensor_parallel", "num_shard": "tensor_parallel", "gpu_memory_utilization":
             "gpu_memory_utilization", "mem_fraction_static": "gpu_memory_utilization", "max_model_len":
             "max_model_len", "max_seq_len": "max_model_len", "context_length": "max_model_len",
             "max_num_seqs": "max_num_seqs", "max_running_requests": "max_num_seqs",
             "max_num_batched_tokens": "max_num_batched_tokens", "kv_cache_dtype": "kv_cache_dtype",
             "quantization": "quantization", "quantize": "quantization", "block_size": "block_size",
             "max_batch_total_tokens": "kv_cache_tokens"}


def _int(s) -> int:
    return int(str(s).replace(",", ""))


def _arg_value(v):
    v = v.strip().strip(",").strip()
    if v in ("None", "null", "none"):
        return None
    m = re.fullmatch(r"Some\((.*)\)", v)
    if m:
        v = m.group(1)
    v = v.strip("'\"")
    try:
        return int(v) if re.fullmatch(r"-?\d+", v) else float(v) if re.fullmatch(r"-?\d*\.\d+(e-?\d+)?", v) else v
    except ValueError:
        return v


def _args_from(text: str) -> dict:
    """``key=value`` / ``key: value`` pairs of an engine's argument dump (vLLM's ``non-default
    args: {...}`` and ``Namespace(...)``, SGLang's ``ServerArgs(...)``, TGI's ``Args { ... }``)."""
    out = {}
    d = re.search(r"non-default args: (\{.*\})\s*$", text)
    if d:
        import ast

        try:
            parsed = ast.literal_eval(d.group(1))
            return {k: v for k, v in parsed.items() if isinstance(k, str)}
        except (ValueError, SyntaxError):
            pass
    for key in _ARG_KEYS:
        m = re.search(rf"(?<![a-z_]){key}\s*[=:]\s*('[^']*'|\"[^\"]*\"|Some\([^)]*\)|[^,\s)}}]+)", text)
        if m:
            out[key] = _arg_value(m.group(1))
    return out


def parse_server_log(text: str, source: str = "log") -> dict:
    """Facts an engine's start-up log states, each as ``(value, "source:line")``.

    Reads vLLM's ``GPU KV cache size: 1,234,560 tokens`` (V1), ``# GPU blocks: 12345`` and
    ``# cuda blocks: 12345`` (V0, times the block size, 16 unless the arguments say), ``Maximum
    concurrency for 8192 tokens per request: 30.14x``, ``vLLM API server version 0.8.3``,
    ``Initializing a V1 LLM engine (v0.24.0)``, the ``non-default args: {...}`` and
    ``Namespace(...)`` argument dumps and the engine's ``with config: model=...`` line;
    SGLang's ``max_total_num_tokens=...`` and ``ServerArgs(...)``; TGI's ``Setting max batch
    total tokens to ...`` and ``Args { ... }``. The last start-up in the file wins.

    Returns
    -------
    dict
        Keys among ``model``, ``tensor_parallel``, ``gpu_memory_utilization``,
        ``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens``, ``kv_cache_dtype``,
        ``quantization``, ``block_size``, ``kv_cache_tokens``, ``engine``, ``context_len``
        and ``note:…`` lines (a measured weight size, the concurrency line).
    """
    facts: dict = {}
    blocks = None
    engine = None
    for i, line in enumerate(str(text).splitlines(), 1):
        where = f"{source}:{i}"
        low = line.lower()
        m = re.search(r"GPU KV cache size:\s*" + _NUM + r"\s*tokens", line)
        if m:
            facts["kv_cache_tokens"] = (_int(m.group(1)), where)
        m = re.search(r"#\s*(?:gpu|cuda|npu|xpu|hpu|rocm) blocks:\s*" + _NUM, line, re.I)
        if m:
            blocks = (_int(m.group(1)), where)
        m = re.search(r"Maximum concurrency for\s*" + _NUM + r"\s*tokens(?: per |/)request:\s*([\d.]+)x", line)
        if m:
            facts["note:concurrency"] = (f"the engine holds {m.group(2)}x requests of {m.group(1)} tokens",
                                         where)
            facts["_concurrency"] = (_int(m.group(1)) * float(m.group(2)), where)
        m = re.search(r"(?:Loading model weights took|Model loading took)\s*([\d.]+)\s*(GiB|GB)", line)
        if m:
            facts["note:weights"] = (f"the engine loaded {m.group(1)} {m.group(2)} of weights per GPU", where)
        m = re.search(r"Available KV cache memory:\s*([\d.]+)\s*GiB", line)
        if m:
            facts["note:kv_memory"] = (f"the engine gave the KV cache {m.group(1)} GiB per GPU", where)
        m = (re.search(r"vLLM API server version\s*v?([\w.+-]+)", line)
             or re.search(r"Initializing an? (?:V1 )?LLM engine \(v([\w.+-]+)\)", line)
             or re.search(r"\bvllm\b.*\bversion\s+v?(\d+\.\d+[\w.+-]*)", line, re.I))
        if m:
            engine = (f"vllm {m.group(1)}", where)
        if "max_total_num_tokens=" in line:
            m = re.search(r"max_total_num_tokens=" + _NUM, line)
            facts["kv_cache_tokens"] = (_int(m.group(1)), where)
            for key, name in (("max_running_requests", "max_num_seqs"), ("context_len", "context_len"),
                              ("chunked_prefill_size", "max_num_batched_tokens")):
                m = re.search(key + r"=" + _NUM, line)
                if m:
                    facts[name] = (_int(m.group(1)), where)
            engine = engine or ("sglang", where)
        m = re.search(r"(?:Setting|Inferred) max batch total tokens(?: to|:)\s*" + _NUM, line, re.I)
        if m:
            facts["kv_cache_tokens"] = (_int(m.group(1)), where)
            engine = engine or ("tgi", where)
        if ("non-default args" in line or "Namespace(" in line or "with config:" in line
                or "ServerArgs(" in line or "Args {" in line):
            args = _args_from(line)
            if "ServerArgs(" in line:
                engine = engine or ("sglang", where)
            if "Args {" in line and "model_id" in line:
                engine = engine or ("tgi", where)
            for k, v in args.items():
                key = _ARG_KEYS.get(k)
                if key is None or v is None or (key in facts and key == "kv_cache_tokens"):
                    continue
                if key == "quantization" and str(v).lower() in ("none", "auto"):
                    continue
                if key == "kv_cache_dtype" and str(v).lower() == "auto":
                    continue
                facts[key] = (v, where)
    if blocks is not None and "kv_cache_tokens" not in facts:
        bs = facts.get("block_size", (16, "vLLM's default block size"))[0]
        facts["kv_cache_tokens"] = (int(blocks[0]) * int(bs), f"{blocks[1]} ({blocks[0]:,} blocks × {bs} tokens)")
    if "kv_cache_tokens" not in facts and "_concurrency" in facts:
        v, where = facts["_concurrency"]
        facts["kv_cache_tokens"] = (int(v), f"{where} (concurrency × tokens per request)")
    facts.pop("_concurrency", None)
    if engine is not None:
        facts["engine"] = engine
    return facts


def _command_facts(text: str, source: str) -> dict:
    """Facts of a server command line in a text file (vLLM, SGLang, TGI), each with file:line."""
    facts: dict = {}
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    for i, line in enumerate(joined.splitlines(), 1):
        low = line.lower()
        where = f"{source}:{i}"
        if re.search(r"vllm(\.entrypoints\.openai\.api_server|\s+serve)", low):
            info = importers._context_from_command_text(line)
            for k in ("model", "tensor_parallel", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
                      "max_num_batched_tokens", "kv_cache_dtype", "quantization", "block_size"):
                v = info.get(k)
                if v is not None and not (isinstance(v, float) and math.isnan(v)):
                    facts[k] = (v, where)
            facts["engine"] = ("vllm", where)
        elif "sglang.launch_server" in low or "text-generation-launcher" in low:
            flags = dict(re.findall(r"--([a-z][a-z0-9-]*)[=\s]+([^\s-][^\s]*)", line))
            for flag, key in (("model-path", "model"), ("model-id", "model"), ("model", "model"),
                              ("tp", "tensor_parallel"), ("tp-size", "tensor_parallel"),
                              ("num-shard", "tensor_parallel"), ("mem-fraction-static", "gpu_memory_utilization"),
                              ("context-length", "max_model_len"), ("max-total-tokens", "max_model_len"),
                              ("max-running-requests", "max_num_seqs"),
                              ("max-concurrent-requests", "max_num_seqs"), ("quantization", "quantization"),
                              ("quantize", "quantization"), ("kv-cache-dtype", "kv_cache_dtype")):
                if flag in flags and key not in facts:
                    facts[key] = (_arg_value(flags[flag]), where)
            facts["engine"] = ("sglang" if "sglang" in low else "tgi", where)
    return facts


_MAX_READ = 4 << 20  # bytes of one log read: the start-up lines are at its top


def read_server_facts(path) -> dict:
    """Facts about the serving engine in the files beside a sweep's results.

    ``path`` is the ``--sweep`` file or folder. The folder (a file's own) and its parent are
    searched, not recursively: ``*.log`` and ``*.txt`` files for an engine's start-up lines
    (:func:`parse_server_log`) and engine command lines, and Kubernetes manifests (``*.yaml``
    with ``containers:``, read by :mod:`capbook.sweeps.importers`) for the server's flags, GPU count
    and GPU node label. The nearer folder wins; within it, a start-up log beats a command line,
    which beats a manifest.

    Returns
    -------
    dict
        ``{fact: (value, "file:line" or "file")}``; empty when nothing is found or ``path``
        does not exist.
    """
    p = os.fspath(path)
    if not os.path.exists(p):
        return {}
    folder = p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))
    out: dict = {}
    for d in (folder, os.path.dirname(os.path.abspath(folder))):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        found: dict = {}
        for name in names:
            f = os.path.join(d, name)
            if not os.path.isfile(f):
                continue
            ext = os.path.splitext(name)[1].lower()
            if ext not in (".log", ".txt", ".yaml", ".yml", ".out"):
                continue
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(_MAX_READ)
            except OSError:
                continue
            if ext in (".yaml", ".yml"):
                if "containers:" not in text:
                    continue
                info = importers._context_from_manifest(text)
                new = {k: (v, f) for k, v in info.items()
                       if k in ("model", "tensor_parallel", "gpu_memory_utilization", "max_model_len",
                                "max_num_seqs", "kv_cache_dtype", "quantization", "gpu", "num_gpus")
                       and v is not None and not (isinstance(v, float) and math.isnan(v))}
                rank = 0
            else:
                new = {**_command_facts(text, f), **parse_server_log(text, f)}
                rank = 2 if any(k == "kv_cache_tokens" or k.startswith("note:") for k in new) else 1
            for k, v in new.items():
                if k not in found or found[k][1] < rank:
                    found[k] = (v, rank)
        for k, (v, _) in found.items():
            out.setdefault(k, v)
    if "gpu" in out and "tensor_parallel" not in out and "num_gpus" in out:
        out["tensor_parallel"] = out["num_gpus"]
    return out


def __getattr__(name):
    """``MODELS``: another name of :data:`ARCHITECTURES` (``capbook.engine.predict.MODELS`` names the
    predictor's queueing models, so the table is defined under one name only)."""
    if name == "MODELS":
        return ARCHITECTURES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
