"""Tests of capbook.app.datasets: the sample data by default, the reader's files through env vars.

Oracles: the committed sample files read directly with pandas; small logs written here.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest

from capbook.app import datasets
from capbook.forecast.tokens import load_sample_series


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ("CAPBOOK_REQUESTS", "CAPBOOK_REQUESTS_FORMAT", "CAPBOOK_SWEEP", "CAPBOOK_DATA"):
        monkeypatch.delenv(k, raising=False)


def _log(path, hours, rate=0.2, seed=0, gap=None, models=("m-a",)):
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 * rate)
    t = np.sort(rng.uniform(0, hours * 3600, n))
    if gap is not None:
        t = t[(t < gap[0]) | (t >= gap[1])]
    df = pd.DataFrame({
        "arrival_time": pd.Timestamp("2026-03-02", tz="UTC") + pd.to_timedelta(np.round(t * 1e6), unit="us"),
        "input_tokens": rng.integers(10, 900, t.size), "output_tokens": rng.integers(1, 300, t.size),
        "model": rng.choice(list(models), t.size), "tier": "interactive", "status": "served",
    })
    df.to_parquet(path, index=False)
    return df


def test_sample_data_by_default():
    assert datasets.using_sample_data()
    src = datasets.data_source()
    assert src["sample"] is True and "sample" in src["requests"] and "sample" in src["sweep"]
    tok = datasets.load_token_series("weeks20", min_weeks=20)
    direct = pd.read_csv(datasets.data_dir() / "tokens" / "weeks20.csv")
    assert len(tok) == len(direct) == 20 * 168
    assert tok["output_tokens"].sum() == direct["output_tokens"].sum()
    assert "capbook_note" not in tok.attrs
    assert datasets.load_sweep().name == "illustrative_chat"


def test_reader_log_is_aggregated_when_long_enough(tmp_path, monkeypatch):
    df = _log(tmp_path / "log.parquet", hours=2 * 168)
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "log.parquet"))
    assert not datasets.using_sample_data()
    assert datasets.data_source()["requests"] == str(tmp_path / "log.parquet")
    tok = datasets.load_token_series("weeks20", min_weeks=2)
    assert tok.attrs["capbook_source"] == str(tmp_path / "log.parquet")
    assert tok["output_tokens"].sum() == df["output_tokens"].sum()
    assert len(datasets.load_requests().to_pandas()) == len(df)


def test_short_or_gappy_reader_log_falls_back_to_the_sample_with_a_note(tmp_path, monkeypatch, capsys):
    _log(tmp_path / "short.parquet", hours=30)
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "short.parquet"))
    tok = datasets.load_token_series("weeks20", min_weeks=2)
    sample = load_sample_series("weeks20")
    assert len(tok) == len(sample) and tok["output_tokens"].sum() == sample["output_tokens"].sum()
    out = capsys.readouterr().out
    assert "short.parquet" in out and "30 hours" in out and "needs 2 whole weeks" in out
    assert tok.attrs["capbook_note"] in out
    # without min_weeks the reader's own (short) hourly frame comes back
    assert len(datasets.load_token_series("weeks20")) == 30

    _log(tmp_path / "gap.parquet", hours=2 * 168 + 5, rate=0.05, gap=(100 * 3600, 103 * 3600))
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "gap.parquet"))
    tok = datasets.load_token_series(min_weeks=2)
    assert "no output tokens" in tok.attrs["capbook_note"]


def test_missing_reader_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPBOOK_REQUESTS", str(tmp_path / "nope.parquet"))
    with pytest.raises((FileNotFoundError, ValueError), match="nope.parquet"):
        datasets.load_requests()


def test_reader_options_reach_the_readers(tmp_path, monkeypatch, repo_root):
    """capbook book passes its flags as JSON keyword arguments; every chapter reads with them."""
    from capbook.app import bookbuild

    d = tmp_path / "sweep"
    d.mkdir()
    base = pd.read_csv(repo_root / "data" / "sweeps" / "illustrative_chat.csv")
    base.to_csv(d / "a.csv", index=False)
    base.assign(concurrency=base["concurrency"] + 0.5, load_kind="rate",
                concurrency_source="littles_law").to_csv(d / "b.csv", index=False)
    env = bookbuild._data_env(None, "auto", d, {"drop_invalid": True}, {"load": "concurrency"})
    assert env["CAPBOOK_REQUESTS_OPTIONS"] is None  # no log given: its options are not passed
    for k, v in env.items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    sw = datasets.load_sweep()
    assert np.allclose(sw.concurrency, base["concurrency"])  # the closed-loop points only
    assert datasets.data_source()["sweep_options"] == {"load": "concurrency"}
    note = bookbuild.data_note(datasets.data_source(), "now")
    assert "load='concurrency'" in html.unescape(note)  # shown as text (the note is inert HTML)
    monkeypatch.delenv("CAPBOOK_SWEEP_OPTIONS")
    with pytest.raises(ValueError, match="load='concurrency' or load='rate'"):
        datasets.load_sweep()
    monkeypatch.setenv("CAPBOOK_SWEEP_OPTIONS", "[1, 2]")
    with pytest.raises(ValueError, match="CAPBOOK_SWEEP_OPTIONS must hold a JSON object"):
        datasets.load_sweep()


# -- the KubeCon NA 2025 inference-perf table (data/realdata) -----------------------------------

KUBECON_VARIANTS = ["vllm", "vllm+batch_size", "vllm+chunking_and_prefix_caching", "vllm+eagle",
                    "vllm+quantization", "vllm+v0_engine"]


def _derive_module(repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive_kubecon", repo_root / "tools" / "derive_kubecon.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kubecon_raw(shared_dir):
    root = shared_dir / "realdata" / "inference-perf-kubecon-na-2025"
    if not root.is_dir():
        pytest.skip(f"{root} (the raw inference-perf files) is not in ../shared")
    return root


def test_kubecon_sweeps_load_from_the_committed_table(repo_root, tmp_path, monkeypatch):
    sweeps = datasets.load_kubecon_sweeps()
    assert [s.name for s in sweeps] == KUBECON_VARIANTS
    path = repo_root / "data" / "realdata" / "kubecon_inference_perf.csv"
    raw = pd.read_csv(path)
    assert list(raw.columns) == _derive_module(repo_root).COLUMNS
    assert not raw.astype(str).apply(lambda c: c.str.contains("/work/|/home/|source_file")).any().any()
    for sw in sweeps:
        rows = raw[raw["variant"] == sw.name]
        assert len(rows) == 7 == len(sw.table) + len(sw.saturated)   # seven stages per variant
        assert set(sw.saturated["point"]) == set(rows.loc[rows["saturated"], "point"])
        assert sw.config["model"] == "meta-llama/Llama-3.1-8B-Instruct" and sw.config["max_num_seqs"] in (128, 192)
        # the importer's rescaled TPOT: about twice what inference-perf reported
        assert np.all((rows["tpot_rescale"] > 1.8) & (rows["tpot_rescale"] < 2.2))
        assert np.allclose(rows["tpot_p50_s"], rows["tpot_reported_p50_s"] * rows["tpot_rescale"], rtol=1e-9)
    by = {s.name: s for s in sweeps}
    assert len(by["vllm+v0_engine"].table) == 2 and len(by["vllm+chunking_and_prefix_caching"].table) == 5
    # CAPBOOK_DATA moves the table with the rest of the data
    (tmp_path / "realdata").mkdir()
    raw[raw["variant"].isin(["vllm", "vllm+eagle"])].to_csv(tmp_path / "realdata" / path.name, index=False)
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    assert [s.name for s in datasets.load_kubecon_sweeps()] == ["vllm", "vllm+eagle"]
    (tmp_path / "realdata" / path.name).unlink()
    with pytest.raises(FileNotFoundError, match="derive_kubecon"):
        datasets.load_kubecon_sweeps()


def test_kubecon_table_is_the_derivation_of_the_raw_files(repo_root, shared_dir):
    """tools/derive_kubecon.py on ../shared gives the committed file byte for byte."""
    root = _kubecon_raw(shared_dir)
    mod = _derive_module(repo_root)
    committed = (repo_root / "data" / "realdata" / "kubecon_inference_perf.csv").read_text(encoding="utf-8")
    assert mod.to_csv_text(mod.derive(root)) == committed, (
        "data/realdata/kubecon_inference_perf.csv differs from what capbook.sweeps.importers now reads: "
        "run python tools/derive_kubecon.py ../shared/realdata/inference-perf-kubecon-na-2025")


def test_kubecon_fidelity_on_the_table_equals_the_raw_files(shared_dir):
    """The protocol of capbook.engine.fidelity gives the same table on the committed sweeps as on the raw files."""
    from capbook.engine.fidelity import fidelity, kubecon_variants
    from capbook.sweeps.importers import read_sweep

    root = _kubecon_raw(shared_dir)
    raw = [read_sweep(p) for p in kubecon_variants(root)]
    assert [s.name for s in raw] == KUBECON_VARIANTS
    pd.testing.assert_frame_equal(fidelity(datasets.load_kubecon_sweeps()), fidelity(raw))


# --------------------------------------------------------------------------------------------
# One data folder; the capacity plan's sample defaults live here
# --------------------------------------------------------------------------------------------
def test_data_dir_is_the_one_lookup_of_capbook_paths(tmp_path, monkeypatch):
    from capbook import paths

    assert datasets.data_dir() == paths.data_dir()
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    assert datasets.data_dir() == tmp_path == paths.data_dir()
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="CAPBOOK_DATA"):
        datasets.data_dir()


def test_plan_inputs_pick_the_sample_sweep_of_each_sample_model():
    from capbook.plan.steps import LogAggregates
    from capbook.logs.requestlog import load_sample_requests

    by_default = datasets.plan_inputs()
    assert isinstance(by_default.log, LogAggregates)
    # by default the plan reads the running example's gateway: its log and its 26-week history
    assert by_default.log.label == datasets.SAMPLE_GATEWAY_LABEL == "sample gateway (data/gateway)"
    assert by_default.log.history_label == "data/gateway/hourly.csv"   # named, not a machine path
    assert by_default.sweep.name == datasets.SAMPLE_SWEEP_FOR_MODEL["chat"] == "illustrative_chat"
    assert by_default.sweep_label == "sample sweep illustrative_chat (modelled, not measured)"
    assert by_default.notes == () and "model" not in by_default.arguments
    # the four-week log of "Know your traffic" keeps its own sweeps; its default model is chat-70b
    four = datasets.plan_inputs(load_sample_requests())
    assert four.log.label == "sample request log (data/requests)" and four.log.history_label is None
    assert four.sweep.name == datasets.SAMPLE_SWEEP_FOR_MODEL["chat-70b"]
    small = datasets.plan_inputs(four.log, model="chat-8b")
    assert small.log is four.log                        # the sums are not taken again
    assert small.sweep.name == "llama8b_h100_chat" and small.arguments["model"] == "chat-8b"
    assert set(small.arguments) == {"log", "sweep", "sweep_label", "input_notes", "model"}


def test_plan_inputs_for_a_reader_log(tmp_path, monkeypatch, repo_root):
    from capbook.sweeps.sweep import load_sample_sweep
    from capbook.logs.requestlog import read_requests

    _log(tmp_path / "mine.parquet", hours=2, rate=0.5)
    log = read_requests(tmp_path / "mine.parquet")
    got = datasets.plan_inputs(log)
    assert got.log.label == str(log.path)
    assert got.sweep.name == "illustrative_chat" and "no sweep given" in got.notes[0]
    mine = load_sample_sweep("llama8b_h100_chat")
    given = datasets.plan_inputs(log, mine)
    assert given.sweep is mine and given.sweep_label == "llama8b_h100_chat" and given.notes == ()
    monkeypatch.setenv("CAPBOOK_SWEEP", str(repo_root / "data" / "sweeps" / "llama8b_h100_chat.csv"))
    env = datasets.plan_inputs(log)
    assert env.sweep_label.endswith("llama8b_h100_chat.csv") and env.notes == ()


# -- the Mooncake conversation trace (data/realdata) ---------------------------------------------

def _mooncake_script(repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive_mooncake", repo_root / "tools" / "derive_mooncake.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mooncake_trace_loads_with_the_facts_of_the_shared_readme(repo_root, tmp_path, monkeypatch):
    df = datasets.load_mooncake_conversation()
    assert list(df.columns) == ["arrival_time", "input_tokens", "output_tokens", "hash_ids"]
    # ../shared/traces/README.md: 12,031 requests over 0 -> 3,536,999 ms, 1,180 distinct
    # timestamps, 90.2 % of inter-arrival times 0; the trace README's means 12,035 / 343 tokens
    assert len(df) == 12_031
    assert df["arrival_time"].iloc[0] == 0 and df["arrival_time"].iloc[-1] == pytest.approx(3536.999, abs=1e-9)
    assert df["arrival_time"].nunique() == 1_180
    assert round(float((np.diff(df["arrival_time"]) == 0).mean()), 3) == 0.902
    assert round(df["input_tokens"].mean()) == 12_035 and round(df["output_tokens"].mean()) == 343
    blocks = df["hash_ids"].map(len).to_numpy()
    assert np.array_equal(blocks, -(-df["input_tokens"].to_numpy() // 512))   # one hash per 512-token block
    assert df.attrs["block_tokens"] == 512 and "3b5a5941" in df.attrs["source"]
    assert isinstance(df["hash_ids"].iloc[0], list) and isinstance(df["hash_ids"].iloc[0][0], int)
    # attribution in the file itself, and the licence beside it
    import pyarrow.parquet as pq

    path = repo_root / "data" / datasets.MOONCAKE_FILE
    meta = pq.read_schema(path).metadata
    assert b"kvcache-ai/Mooncake" in meta[b"source"] and b"Apache-2.0" in meta[b"licence"]
    assert "Apache License" in (path.parent / "LICENSE-mooncake").read_text(encoding="utf-8")
    # CAPBOOK_DATA moves it with the rest of the data
    (tmp_path / "realdata").mkdir()
    small = tmp_path / "realdata" / path.name
    pq.write_table(pq.read_table(path).slice(0, 40), small)
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    assert len(datasets.load_mooncake_conversation()) == 40
    small.unlink()
    with pytest.raises(FileNotFoundError, match="derive_mooncake"):
        datasets.load_mooncake_conversation()


@pytest.mark.parametrize("column, change, message", [
    ("arrival_time_ms", lambda v: v[:5] + [v[6] + 1] + v[6:], "row 7, column arrival_time_ms: earlier"),
    ("input_tokens", lambda v: v[:2] + [0] + v[3:], "row 3, column input_tokens"),
    ("output_tokens", lambda v: v[:9] + [None] + v[10:], "row 10, column output_tokens"),
    ("hash_ids", lambda v: v[:4] + [v[4][:-1]] + v[5:], "row 5, column hash_ids: fewer hashes"),
    ("hash_ids", None, "no 'hash_ids' column"),
])
def test_a_malformed_mooncake_table_is_refused_with_its_row_and_column(tmp_path, column, change, message):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(datasets.data_dir() / datasets.MOONCAKE_FILE).slice(0, 20)
    i = table.column_names.index(column)
    if change is None:
        table = table.remove_column(i)
    else:
        table = table.set_column(i, column, pa.array(change(table.column(column).to_pylist()),
                                                     table.schema.field(column).type))
    table.to_pandas()   # still a readable table
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=message):
        datasets.load_mooncake_conversation(tmp_path / "bad.parquet")


def test_mooncake_table_is_the_derivation_of_the_trace(repo_root, shared_dir):
    """tools/derive_mooncake.py on ../shared gives the committed table, and the loader gives what
    the JSON lines say (read here with the json module alone)."""
    import json

    src = shared_dir / "traces" / "conversation_trace.jsonl"
    if not src.is_file():
        pytest.skip(f"{src} (Mooncake's conversation trace) is absent")
    mod = _mooncake_script(repo_root)
    assert mod.main([str(src), "--check"]) == 0, (
        "data/realdata/mooncake_conversation.parquet is stale: run python tools/derive_mooncake.py")
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    df = datasets.load_mooncake_conversation()
    assert len(rows) == len(df)
    assert df["arrival_time"].tolist() == [r["timestamp"] / 1000 for r in rows]
    assert df["input_tokens"].tolist() == [r["input_length"] for r in rows]
    assert df["output_tokens"].tolist() == [r["output_length"] for r in rows]
    assert df["hash_ids"].tolist() == [r["hash_ids"] for r in rows]


def test_the_mooncake_script_refuses_another_file(repo_root, tmp_path):
    mod = _mooncake_script(repo_root)
    other = tmp_path / "trace.jsonl"
    other.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="git blob .*expected 5a371794"):
        mod.main([str(other), "--out", str(tmp_path / "out.parquet")])
    assert not (tmp_path / "out.parquet").exists()


# -- the derived fidelity table (tools/derive_fidelity_data.py) ----------------------------------

def _derive_fidelity_module(repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive_fidelity_data",
                                                  repo_root / "tools" / "derive_fidelity_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fidelity_sweeps_load_with_their_hardware(repo_root):
    sweeps = datasets.load_fidelity_sweeps()
    by = {s.name: s for s in sweeps}
    assert sorted(by) == ["sglang-llama405b-h200-tp8", "sglang-llama70b-h200-tp4"]
    # hardware from the sglang/experiments scripts upstream (see ../shared/sweeps/README.md)
    hw70, hw405 = by["sglang-llama70b-h200-tp4"].hardware, by["sglang-llama405b-h200-tp8"].hardware
    assert (hw70.model.name, hw70.gpu.name, hw70.tensor_parallel) == (
        "meta-llama/Llama-3.3-70B-Instruct", "H200-SXM-141GB", 4)
    assert (hw405.model.name, hw405.tensor_parallel) == ("meta-llama/Llama-3.1-405B-Instruct", 8)
    # the levels as data/README.md and the upstream JSONL describe them: 70B stable at 1, 2, 4, 8 req/s
    # (mean E2E 7.84 s at 1 req/s and 12.9 s at 4 req/s upstream), 405B stable at 1 and 2 only
    t70 = by["sglang-llama70b-h200-tp4"].table
    assert list(t70["request_rate_target"]) == [1.0, 2.0, 4.0, 8.0]
    assert t70["mean_e2e_s"].iloc[0] == pytest.approx(7.8406, abs=1e-3)
    assert t70["mean_e2e_s"].iloc[2] == pytest.approx(12.896, abs=1e-3)
    assert list(by["sglang-llama405b-h200-tp8"].table["request_rate_target"]) == [1.0, 2.0]
    raw = pd.read_csv(repo_root / "data" / "realdata" / "fidelity_sweeps.csv")
    assert not raw.astype(str).apply(lambda c: c.str.contains("/work/|/home/|source_file")).any().any()


def test_fidelity_table_is_the_derivation_of_the_raw_files(repo_root, shared_dir):
    """tools/derive_fidelity_data.py on ../shared gives the committed file byte for byte, and the
    committed E2E means are the raw JSONL's ``mean_e2e_latency_ms`` (read here without capbook)."""
    import json

    folder = shared_dir / "sweeps" / "sglang" / "datacrunch-h200"
    if not folder.is_dir():
        pytest.skip(f"{folder} (the raw SGLang files) is not in ../shared")
    mod = _derive_fidelity_module(repo_root)
    committed = (repo_root / "data" / "realdata" / "fidelity_sweeps.csv").read_text(encoding="utf-8")
    assert mod.to_csv_text(mod.derive(shared_dir)) == committed, (
        "data/realdata/fidelity_sweeps.csv differs from what capbook.sweeps.importers now reads: "
        "run python tools/derive_fidelity_data.py ../shared")
    lines = [json.loads(x) for x in (folder / "sglang" / "outputs" / "llama_3_3_70b_online_output.jsonl")
             .read_text().splitlines() if x.strip()]
    raw = {ln["request_rate"]: ln["mean_e2e_latency_ms"] / 1e3 for ln in lines
           if ln.get("dataset_name") == "random" and ln["request_rate"] != float("inf")}
    table = pd.read_csv(repo_root / "data" / "realdata" / "fidelity_sweeps.csv")
    rows = table[(table["dataset"] == "sglang-llama70b-h200-tp4") & table["request_rate_target"].notna()]
    for rate, e2e in zip(rows["request_rate_target"], rows["mean_e2e_s"]):
        assert e2e == pytest.approx(raw[rate], rel=1e-12)
