"""Configuration identity (capbook.sweeps.configurations, capbook.sweeps.importers): never merge what differs.

Oracles: the layouts the tools write — vLLM's ``benchmarks/serve.py`` puts each ``--metadata
KEY=VALUE`` pair as a top-level string field of the result JSON beside ``date`` and
``model_id``, and names its file ``<label>-<rate>qps-<model>-<YYYYmmdd-HHMMSS>.json``; SGLang's
``bench_serving`` writes ``server_info`` (the server's arguments) into each JSONL line and
``Infinity`` for an unbounded rate; llm-d-benchmark stores one folder per GPU and setup
(``A100/llm-d-1p1d``, ``H100/vllm-3replicas``) — and the figures of the files themselves
(a fleet's totals over N, the measured mean lengths). The real llm-d exp-7 folder in ../shared.
"""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from capbook.app.cli import main
from capbook.sweeps.configurations import canonical_key, parse_gpu
from capbook.sweeps.importers import read_points, read_sweep


_RUN = itertools.count(1)   # each run its own date, as vLLM stamps them (identical ones are one run)


def _vllm(rate, *, inp=1000, out=200, n=200, conc=None, scale=1.0, **meta):
    """One vLLM ``--save-result`` JSON at ``rate`` req/s (``conc`` sets max_concurrency and an
    unbounded rate), with ``meta`` as ``--metadata`` pairs (strings, as vLLM writes them). The
    engine serves ``scale`` x one replica's throughput at the same latencies."""
    ttft, tpot = 0.05 + 0.002 * (rate or conc), 0.010 + 0.001 * (rate or conc)
    e2e = ttft + tpot * (out - 1)
    thr = (rate * 0.99 if conc is None else conc / e2e) * scale
    d = {"date": f"20250101-{next(_RUN):06d}", "backend": "vllm", "model_id": "org/model-8b",
         "tokenizer_id": "org/model-8b", "num_prompts": n}
    d.update({k: str(v) for k, v in meta.items()})
    d.update({"request_rate": "inf" if conc is not None else rate, "burstiness": 1.0,
              "max_concurrency": conc, "duration": n / thr, "completed": n, "failed": 0,
              "total_input_tokens": inp * n, "total_output_tokens": out * n,
              "request_throughput": thr, "output_throughput": thr * out,
              "total_token_throughput": thr * (inp + out),
              "mean_ttft_ms": ttft * 1e3, "median_ttft_ms": ttft * 1e3, "p99_ttft_ms": ttft * 2e3,
              "mean_tpot_ms": tpot * 1e3, "median_tpot_ms": tpot * 1e3, "p99_tpot_ms": tpot * 1.5e3,
              "mean_itl_ms": tpot * 1e3, "median_itl_ms": tpot * 1e3, "p99_itl_ms": tpot * 3e3,
              "mean_e2el_ms": e2e * 1e3, "median_e2el_ms": e2e * 1e3, "p99_e2el_ms": e2e * 1.5e3})
    return d


def _write(folder: Path, name: str, d: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(json.dumps(d))
    return p


def _sweep(folder: Path, rates=(1.0, 2.0, 4.0), tag="r", **kw):
    for r in rates:
        _write(folder, f"{tag}{r:g}.json", _vllm(r, **kw))


def _cli(args, capsys):
    code = main(args)
    return code, capsys.readouterr()


# -- small helpers ------------------------------------------------------------------------------
def test_keys_and_gpu_fields_in_capbook_spelling():
    assert canonical_key("TP") == "tensor_parallel" and canonical_key("gpu-type") == "gpu"
    assert canonical_key("random_input_len") == "input_len" and canonical_key("deployment") == "deployment"
    assert parse_gpu("4xNVIDIA_L40S") == ("NVIDIA_L40S", 4)
    assert parse_gpu("8 x H100") == ("H100", 8) and parse_gpu("A100") == ("A100", None)


# -- vLLM --metadata keys -----------------------------------------------------------------------
def test_metadata_keys_are_columns_and_tell_configurations_apart(tmp_path, capsys):
    root = tmp_path / "bench"
    _sweep(root, tag="base", deployment="base")
    _sweep(root, tag="tuned", deployment="tuned")
    pts = read_points(root)
    assert sorted(set(pts["deployment"])) == ["base", "tuned"]
    assert "deployment" in pts.attrs["config_keys"]
    with pytest.raises(ValueError, match=r"holds 2 configurations told apart by .*deployment \('base', 'tuned'\)"):
        read_sweep(root)
    s = read_sweep(root, where={"deployment": "base"})
    assert len(s.table) == 3 and set(s.table["deployment"]) == {"base"}
    # the command line: exit 2 naming the key and the flag, exit 0 with the selection
    code, out = _cli(["predict", "--sweep", str(root), "--rate", "1"], capsys)
    assert code == 2 and "deployment ('base', 'tuned')" in out.err and "--where" in out.err
    assert "where=" not in out.err and "Traceback" not in out.err
    code, out = _cli(["predict", "--sweep", str(root), "--where", "deployment=base", "--rate", "1"], capsys)
    assert code == 0, out.err
    # a key no point records: the message lists those they do
    code, out = _cli(["predict", "--sweep", str(root), "--where", "deploymnt=base", "--rate", "1"], capsys)
    assert code == 2 and "'deployment'" in out.err


@pytest.mark.parametrize("key, a, b, named", [
    ({"gpu": "A100"}, "A100", "H100", "gpu ('A100', 'H100')"),
    ({"tp": "1"}, "1", "2", "tensor_parallel (1, 2)"),
    ({"max_num_batched_tokens": "2048"}, "2048", "8192", "max_num_batched_tokens (2048, 8192)"),
    ({"replicas": "1"}, "1", "2", "replicas (1, 2)"),
    ({"dataset": "sharegpt"}, "sharegpt", "random", "dataset ('sharegpt', 'random')"),
])
def test_each_recorded_key_that_differs_is_named(tmp_path, key, a, b, named):
    (k,) = key
    _sweep(tmp_path / "x" / "one", **{k: a})
    _sweep(tmp_path / "x" / "two", **{k: b})
    with pytest.raises(ValueError, match="2 configurations") as exc:
        read_sweep(tmp_path / "x")
    assert named in str(exc.value)
    assert len(read_sweep(tmp_path / "x", where={canonical_key(k): b}).table) == 3


def test_label_burstiness_and_model_are_configuration(tmp_path):
    for name, field, values in (("label", "label", ("a", "b")), ("burst", "burstiness", (1.0, 0.5)),
                                ("model", "model_id", ("org/a", "org/b"))):
        for v in values:
            for r in (1.0, 2.0):
                d = _vllm(r)
                d[field] = v
                _write(tmp_path / name / str(v).replace("/", "_"), f"r{r:g}.json", d)
        with pytest.raises(ValueError, match="2 configurations") as exc:
            read_sweep(tmp_path / name)
        key = {"model_id": "model"}.get(field, field)
        assert f"{key} (" in str(exc.value), str(exc.value)


def test_bookkeeping_metadata_does_not_split_a_sweep(tmp_path):
    # a timestamp, a run number and a host differ in every file: one sweep all the same
    for i, r in enumerate((1.0, 2.0, 4.0)):
        _write(tmp_path / "s", f"r{r:g}.json", _vllm(r, timestamp=f"2025-05-1{i}_23-00-27", run=str(i),
                                                    hostname=f"node-{i}", deployment="base"))
    s = read_sweep(tmp_path / "s")
    assert len(s.table) == 3
    assert "timestamp" in read_points(tmp_path / "s").columns   # kept, just not an identity


def test_a_metadata_key_named_like_a_measurement_is_kept_apart(tmp_path):
    _sweep(tmp_path / "s", format="json", point="first")
    pts = read_points(tmp_path / "s")
    assert set(pts["metadata_format"]) == {"json"} and set(pts["format"]) == {"vllm"}
    assert set(pts["metadata_point"]) == {"first"}


def test_vllm_file_name_label(tmp_path):
    # <label>-<rate>qps-<model>-<date>.json, as vllm bench serve names its results
    for lab in ("baseline", "spec"):
        for r in (1.0, 2.0):
            _write(tmp_path / "n", f"{lab}-{r}qps-model-8b-20250101-12000{int(r)}.json", _vllm(r))
    with pytest.raises(ValueError, match=r"label \('baseline', 'spec'\)"):
        read_sweep(tmp_path / "n")
    # the backend as label (no --label given) is no configuration of its own
    for r in (1.0, 2.0):
        _write(tmp_path / "m", f"vllm-{r}qps-model-8b-20250101-12000{int(r)}.json", _vllm(r))
    assert len(read_sweep(tmp_path / "m").table) == 2


# -- repeats only when every key is equal -------------------------------------------------------
def test_runs_with_other_input_lengths_are_not_repeats(tmp_path):
    # eight workloads at one concurrency differing only in the (unrecorded) lengths: 8 configurations
    lengths = [(1000, 100), (1000, 1000), (2000, 100), (2000, 1000), (4000, 100), (4000, 1000),
               (8000, 100), (8000, 1000)]
    for i, (inp, out) in enumerate(lengths):
        _write(tmp_path / "w", f"run{i}.json", _vllm(None, conc=16, inp=inp, out=out, n=100))
    with pytest.raises(ValueError, match="8 configurations") as exc:
        read_sweep(tmp_path / "w", repeats="mean")
    msg = str(exc.value)
    assert "input_len (1000, 1000, 2000, 2000, 4000, 4000, 8000, 8000)" in msg
    assert "output_len (100, 1000, 100, 1000" in msg
    s = read_sweep(tmp_path / "w", where={"input_len": 2000, "output_len": "1000"})
    assert s.table["mean_input_tokens"].iloc[0] == 2000


def test_repeats_of_one_configuration_are_averaged(tmp_path):
    # three runs at one concurrency whose measured lengths differ by a token: repeats
    for i, inp in enumerate((1000, 1001, 999)):
        d = _vllm(None, conc=16, inp=inp, n=100)
        d["request_throughput"] *= 1 + 0.01 * i
        _write(tmp_path / "rep", f"run{i}.json", d)
    with pytest.raises(ValueError, match=r"several points at concurrency \[16\.0\].*repeats='mean'"):
        read_sweep(tmp_path / "rep")
    s = read_sweep(tmp_path / "rep", repeats="mean")
    assert len(s.table) == 1 and s.table["runs_averaged"].iloc[0] == 3


def test_lengths_that_drift_with_load_do_not_split_a_sweep(tmp_path):
    # a conversation workload: the measured mean prompt shrinks as concurrency grows (aiperf's
    # chatbot runs in ../shared go 582 -> 214): one sweep, no length setting derived
    for c, inp in zip((2, 4, 8, 16, 32), (582, 516, 466, 374, 214)):
        _write(tmp_path / "chat", f"c{c}.json", _vllm(None, conc=c, inp=inp))
    s = read_sweep(tmp_path / "chat")
    assert len(s.table) == 5 and "input_len" not in read_points(tmp_path / "chat")


def test_a_saturated_run_with_truncated_outputs_stays_in_its_sweep(tmp_path):
    for r in (1.0, 2.0, 4.0):
        _write(tmp_path / "s", f"r{r:g}.json", _vllm(r, out=200))
    d = _vllm(16.0, out=150)
    d["request_throughput"] = 5.0    # far below the offered 16 req/s: saturated
    _write(tmp_path / "s", "r16.json", d)
    s = read_sweep(tmp_path / "s")
    assert len(s.table) == 3 and len(s.saturated) == 1


# -- fleet-level results --------------------------------------------------------------------------
def test_plain_replicas_are_divided_into_one_replica(tmp_path):
    _sweep(tmp_path / "one", scale=1.0)
    _sweep(tmp_path / "fleet", scale=2.0, replicas="2")
    one, fleet = read_sweep(tmp_path / "one"), read_sweep(tmp_path / "fleet")
    for c in ("request_throughput_rps", "output_throughput_tps"):
        assert list(fleet.table[c]) == pytest.approx(list(one.table[c]), rel=1e-9)
    assert list(fleet.table["concurrency"]) == pytest.approx(list(one.table["concurrency"]), rel=1e-9)
    assert list(fleet.table["ttft_p50_s"]) == list(one.table["ttft_p50_s"])   # latencies unchanged
    assert any("divided into one replica's sweep" in n and "replicas 2" in n for n in fleet.notes)
    assert set(fleet.table["fleet_replicas"]) == {2}
    # a selection's notes speak of its own points only
    both = read_sweep(tmp_path, where={"replicas": 2})
    assert [n for n in both.notes if "fleet-level" in n] == [n for n in fleet.notes if "fleet-level" in n]
    assert not any("fleet-level" in n for n in read_sweep(tmp_path / "one").notes)


def test_a_gpu_count_prefix_is_not_the_gpu_name(tmp_path):
    _sweep(tmp_path / "f", scale=4.0, gpu="4xNVIDIA_L40S", decode_replicas="4")
    s = read_sweep(tmp_path / "f")
    assert s.config["gpu"] == "NVIDIA_L40S"
    t = s.table
    assert set(t["num_gpus"]) == {4} and set(t["fleet_replicas"]) == {4}
    _sweep(tmp_path / "one")
    one = read_sweep(tmp_path / "one")
    assert list(t["request_throughput_rps"]) == pytest.approx(list(one.table["request_throughput_rps"]))


@pytest.mark.parametrize("meta", [{"prefill_replicas": "1", "decode_replicas": "1"},
                                  {"prefill_replicas": "2", "decode_replicas": "1"}])
def test_prefill_decode_pools_are_refused(tmp_path, capsys, meta):
    _sweep(tmp_path / "pd", **meta)
    with pytest.raises(ValueError, match="prefill/decode disaggregated .* no one-replica equivalent"):
        read_sweep(tmp_path / "pd")
    # read_points still shows them, undivided
    pts = read_points(tmp_path / "pd")
    assert set(pts["fleet_replicas"]) == {1}
    code, out = _cli(["predict", "--sweep", str(tmp_path / "pd"), "--rate", "1"], capsys)
    assert code == 2 and "Measure one engine alone" in out.err and "Traceback" not in out.err


def test_a_cache_aware_router_is_not_divided(tmp_path):
    _sweep(tmp_path / "r", replicas="3", router="prefix-cache-aware")
    with pytest.raises(ValueError, match="does not spread requests evenly"):
        read_sweep(tmp_path / "r")


# -- folder names --------------------------------------------------------------------------------
def test_llm_d_benchmark_folders_state_gpu_and_setup(tmp_path):
    exp = tmp_path / "data" / "exp"
    for gpu in ("A100", "H100"):
        for setup, scale in (("llm-d-1p1d", 1.0), ("llm-d-2p1d", 1.0), ("vllm-2replicas", 2.0),
                             ("vllm-3replicas", 3.0)):
            _sweep(exp / gpu / setup, rates=(1.0,), scale=scale)
    pts = read_points(exp)
    assert set(pts["gpu"]) == {"A100", "H100"}
    assert sorted(pts["replicas"].dropna().astype(int).unique()) == [2, 3]
    assert set(pts["prefill_replicas"].dropna().astype(int)) == {1, 2}
    with pytest.raises(ValueError, match="8 configurations") as exc:
        read_sweep(exp)
    for key in ("gpu (", "replicas (", "prefill_replicas ("):
        assert key in str(exc.value)
    s = read_sweep(exp, where={"gpu": "H100", "replicas": "3"})
    assert s.table["request_throughput_rps"].iloc[0] == pytest.approx(0.99)   # 3 x 0.99 / 3
    with pytest.raises(ValueError, match="prefill/decode"):
        read_sweep(exp / "A100" / "llm-d-1p1d")


def test_host_names_in_folder_names_do_not_split_a_sweep(tmp_path):
    # InferenceMAX-style folders: the GPU appears in some names, a host name in others
    for c, host in ((1, "mi355x-amd_p01_g07"), (2, "mi355x-amd_p01_g07"), (4, "mia1-p02-g17"), (8, "mia1-p02-g17")):
        _write(tmp_path / "res" / f"chat_tp4_conc{c}_{host}" / "artifacts", "result.json", _vllm(None, conc=c))
    s = read_sweep(tmp_path / "res")
    assert s.concurrency.tolist() == [1, 2, 4, 8]
    assert s.config["gpu"] is None and set(s.table["tensor_parallel"]) == {4}


def test_load_level_folders_are_one_sweep(tmp_path):
    for r in (1, 2, 4):
        _write(tmp_path / "sw" / f"rate_{r}", "result.json", _vllm(float(r)))
    for c in (4, 16):
        _write(tmp_path / "cc" / f"concurrency_{c}", "result.json", _vllm(None, conc=c))
    assert len(read_sweep(tmp_path / "sw").table) == 3
    assert read_sweep(tmp_path / "cc").concurrency.tolist() == [4, 16]


# -- SGLang server_info ---------------------------------------------------------------------------
def _sglang_line(rate, **kw):
    d = {"backend": "sglang", "dataset_name": "random", "request_rate": rate, "max_concurrency": None,
         "random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 0.0,
         "duration": 100.0 / min(rate, 8.0), "completed": 100, "total_input_tokens": 102400, "total_output_tokens": 25600,
         "total_output_tokens_retokenized": 25590, "request_throughput": min(rate, 8.0) * 0.99,
         "output_throughput": min(rate, 8.0) * 253, "mean_e2e_latency_ms": 3000.0,
         "median_e2e_latency_ms": 2900.0, "p99_e2e_latency_ms": 5000.0, "mean_ttft_ms": 60.0,
         "median_ttft_ms": 55.0, "p99_ttft_ms": 200.0, "mean_tpot_ms": 11.5, "median_tpot_ms": 11.0,
         "p99_tpot_ms": 20.0, "mean_itl_ms": 11.5, "median_itl_ms": 10.0, "p95_itl_ms": 15.0,
         "p99_itl_ms": 30.0, "concurrency": 3.0,
         "server_info": {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 2, "pp_size": 1,
                         "dp_size": 1, "max_running_requests": 64, "chunked_prefill_size": 4096,
                         "mem_fraction_static": 0.85, "context_length": 8192, "disable_radix_cache": False,
                         "dtype": "auto", "kv_cache_dtype": "auto", "version": "0.4.9",
                         "internal_states": [{"avg_spec_accept_length": None}]}}
    d.update(kw)
    return d


def test_sglang_server_info_gives_the_engine_limits(tmp_path):
    p = tmp_path / "out.jsonl"
    lines = [json.dumps(_sglang_line(r)) for r in (1.0, 2.0, 4.0)]
    lines.append(json.dumps(_sglang_line(float("inf"))))   # SGLang writes Infinity
    p.write_text("\n".join(lines) + "\n")
    assert "Infinity" in p.read_text()
    pts = read_points(p)
    r = pts.iloc[0]
    assert r["max_num_seqs"] == 64 and r["tensor_parallel"] == 2 and r["max_num_batched_tokens"] == 4096
    assert r["gpu_memory_utilization"] == 0.85 and r["max_model_len"] == 8192
    assert r["prefix_caching"] is True or r["prefix_caching"] == True  # noqa: E712 - a numpy bool
    assert r["model"] == "meta-llama/Llama-3.1-8B-Instruct" and r["input_len"] == 1024
    assert r["max_num_seqs_source"] == "result file"
    s = read_sweep(p)
    assert len(s.table) == 3 and len(s.saturated) == 1 and s.config["max_num_seqs"] == 64
    assert math.isnan(s.saturated["request_rate_target"].iloc[0])


def test_sglang_runs_of_two_server_configurations_are_two_sweeps(tmp_path):
    p = tmp_path / "out.jsonl"
    other = dict(_sglang_line(1.0)["server_info"], max_running_requests=128)
    p.write_text("\n".join([json.dumps(_sglang_line(r)) for r in (1.0, 2.0)]
                           + [json.dumps(_sglang_line(r, server_info=other, duration=90.0 / r))
                              for r in (1.0, 2.0)]) + "\n")
    with pytest.raises(ValueError, match=r"max_num_seqs \(64, 128\)"):
        read_sweep(p)
    assert read_sweep(p, where={"max_num_seqs": 128}).config["max_num_seqs"] == 128


def test_sglang_prefill_decode_server_info_is_refused(tmp_path):
    base = _sglang_line(1.0)["server_info"]
    info = {"prefill": [dict(base)], "decode": [dict(base), dict(base)]}
    p = tmp_path / "pd.jsonl"
    p.write_text("\n".join(json.dumps(_sglang_line(r, server_info=info)) for r in (1.0, 2.0)) + "\n")
    pts = read_points(p)
    assert set(pts["prefill_replicas"]) == {1} and set(pts["decode_replicas"]) == {2}
    with pytest.raises(ValueError, match=r"1 prefill \+ 2 decode replicas"):
        read_sweep(p)


def test_sglang_data_parallel_is_divided(tmp_path):
    info = dict(_sglang_line(1.0)["server_info"], dp_size=2)
    p = tmp_path / "dp.jsonl"
    p.write_text("\n".join(json.dumps(_sglang_line(r, server_info=info)) for r in (1.0, 2.0)) + "\n")
    s = read_sweep(p)
    assert list(s.table["request_throughput_rps"]) == pytest.approx([0.495, 0.99])
    info["enable_dp_attention"] = True   # DP attention: one engine, not two
    p.write_text("\n".join(json.dumps(_sglang_line(r, server_info=info)) for r in (1.0, 2.0)) + "\n")
    assert list(read_sweep(p).table["request_throughput_rps"]) == pytest.approx([0.99, 1.98])


# -- the real llm-d exp-7 folder ------------------------------------------------------------------
@pytest.fixture
def exp7(shared_dir):
    p = shared_dir / "realdata" / "llmd-exp7-8b"
    if not p.is_dir():
        pytest.skip("llmd-exp7-8b is not in ../shared/realdata")
    return p


def test_real_llmd_exp7_is_eight_configurations(exp7, capsys):
    code, out = _cli(["predict", "--sweep", str(exp7), "--rate", "1"], capsys)
    assert code == 2, out.out
    err = out.err
    assert "8 configurations" in err and "Traceback" not in err
    assert "gpu ('A100', 'A100', 'A100', 'A100', 'H100', 'H100', 'H100', 'H100')" in err
    assert "replicas (not recorded, not recorded, 2, 3," in err
    assert "prefill_replicas (1, 2, not recorded, not recorded," in err
    assert "input_len (8000, 10000, 8000, 10000, 8000, 10000, 8000, 10000)" in err
    assert "--where config=A100/llm-d-1p1d" in err and "where=" not in err
    # one setup reads: three H100 runs of 3 replicas at 5.5 req/s, divided into one replica's
    # (repeated runs at one offered rate, every recorded key equal: repeats, refused unless averaged)
    code, out = _cli(["predict", "--sweep", str(exp7), "--where", "gpu=H100", "--where", "replicas=3",
                      "--rate", "1"], capsys)
    assert code == 2 and "several points at request rate 1.83333 req/s" in out.err
    assert "--repeats mean" in out.err
    code, out = _cli(["predict", "--sweep", str(exp7), "--where", "gpu=H100", "--where", "replicas=3",
                      "--repeats", "mean", "--rate", "1"], capsys)
    assert code == 0, out.err
    s = read_sweep(exp7, where={"gpu": "H100", "replicas": 3}, repeats="mean")
    files = sorted((exp7 / "collected/data/openshift/exp-7/H100/vllm-3replicas").glob("*.json"))
    runs = [json.loads(f.read_text()) for f in files]
    assert len(s.table) == 1 and set(s.table["fleet_replicas"]) == {3} and s.table["runs_averaged"].iloc[0] == 3
    assert s.table["request_throughput_rps"].iloc[0] == pytest.approx(
        sum(r["request_throughput"] for r in runs) / 3 / 3)
    assert s.table["ttft_p50_s"].iloc[0] == pytest.approx(sum(r["median_ttft_ms"] for r in runs) / 3 / 1e3)
    # the prefill/decode setups say why they are not read
    code, out = _cli(["predict", "--sweep", str(exp7), "--where", "config=H100/llm-d-2p1d", "--rate", "1"], capsys)
    assert code == 2 and "2 prefill + 1 decode" in out.err


def test_random_lengths_a_result_records_are_settings(tmp_path):
    # a wrapper that writes the dataset and its random lengths into vLLM's result
    for inp in (512, 2048):
        for r in (1.0, 2.0):
            d = _vllm(r, inp=inp)
            d.update(dataset_name="random", random_input_len=inp, random_output_len=200)
            _write(tmp_path / "ds", f"in{inp}-r{r:g}.json", d)
    with pytest.raises(ValueError, match=r"input_len \(2048, 512\)|input_len \(512, 2048\)"):
        read_sweep(tmp_path / "ds")
    assert len(read_sweep(tmp_path / "ds", where={"input_len": 512}).table) == 2


def test_odd_metadata_is_read_or_ignored_never_a_crash(tmp_path):
    d = _vllm(1.0, replicas="two", gpu="", node_type="a2-highgpu-1g")
    d[""] = "x"                       # vLLM's split of "--metadata =x"
    d["nested"] = {"a": 1}            # not a KEY=VALUE pair: ignored
    _write(tmp_path / "odd", "r1.json", d)
    _write(tmp_path / "odd", "r2.json", _vllm(2.0, replicas="two", gpu="", node_type="a2-highgpu-1g"))
    pts = read_points(tmp_path / "odd")
    assert set(pts["replicas"]) == {"two"} and set(pts["fleet_replicas"]) == {1}
    assert "node_type" in pts.attrs["config_keys"] and "nested" not in pts
    assert len(read_sweep(tmp_path / "odd").table) == 2


def test_sglang_kv_capacity_reaches_the_engine_model(tmp_path):
    from capbook.engine.stepmodel import engine_limits

    info = dict(_sglang_line(1.0)["server_info"], max_total_num_tokens=123_456)
    p = tmp_path / "kv.jsonl"
    p.write_text("\n".join(json.dumps(_sglang_line(r, server_info=info, duration=100.0 / r))
                           for r in (1.0, 2.0)) + "\n")
    lim = engine_limits(read_sweep(p))
    assert lim.kv_cache_tokens == 123_456 and lim.max_num_seqs == 64 and lim.max_num_batched_tokens == 4096
    assert lim.sources["kv_cache_tokens"] == "recorded by the engine"
    assert engine_limits(read_sweep(p), kv_cache_tokens=1000).kv_cache_tokens == 1000   # the argument wins


def test_llm_d_benchmark_profile_beside_the_results_records_the_lengths(tmp_path):
    # llm-d-benchmark copies its vllm-benchmark profile into the results folder
    profile = ("executable: benchmark_serving.py\nmodel: org/model-8b\ndataset-name: random\n"
               "random-input-len: {i}\nrandom-output-len: 200\nmax-concurrency: 4\nnum-prompts: 32\n")
    for i in (1000, 1050):   # two settings 5 % apart: too close for the measured means to tell
        d = tmp_path / "res" / f"run_{i}"
        d.mkdir(parents=True)
        (d / "random_1k_concurrent.yaml").write_text(profile.format(i=i))
        for c in (2, 4):
            _write(d, f"vllm-infqps-concurrency{c}-model-8b-20250101-12000{c}.json", _vllm(None, conc=c, inp=i))
    pts = read_points(tmp_path / "res")
    assert set(pts["input_len"]) == {1000, 1050} and set(pts["dataset"]) == {"random"}
    with pytest.raises(ValueError, match=r"input_len \(1000, 1050\)"):
        read_sweep(tmp_path / "res")
    assert read_sweep(tmp_path / "res", where={"input_len": 1050}).concurrency.tolist() == [2, 4]


def test_lengths_in_folder_names(tmp_path):
    # the names state the settings (the tokenizer gives a few tokens less than asked)
    for i, o in ((1024, 128), (4096, 512)):
        for c in (1, 8):
            _write(tmp_path / "m" / f"lat_in{i}_out{o}", f"c{c}.json", _vllm(None, conc=c, inp=i - 3, out=o))
    pts = read_points(tmp_path / "m")
    assert sorted(set(pts["input_len"])) == [1024, 4096] and sorted(set(pts["output_len"])) == [128, 512]
    with pytest.raises(ValueError, match=r"input_len \(1024, 4096\) and output_len \(128, 512\)"):
        read_sweep(tmp_path / "m")


def test_nan_written_as_a_metadata_value_is_one_value(tmp_path):
    _sweep(tmp_path / "s", quantization="nan", spec="inf")
    assert len(read_sweep(tmp_path / "s").table) == 3
