"""Tests of capbook.sweeps.importers on real load-generator outputs in ../shared/sweeps.

Every expected number below was read by hand from the file named in the comment beside it
(the raw JSON/CSV field, in the tool's unit); the importer must return it in seconds, tokens
and requests per second. The tests skip when ../shared is absent (see the shared_dir fixture).
"""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from capbook.sweeps.importers import SWEEP_FORMATS, detect_sweep_format, read_points, read_sweep
from capbook.sweeps.sweep import METRIC_COLUMNS, Sweep, choose_slots

MS = 1e-3


@pytest.fixture(scope="module")
def sw(shared_dir):
    return shared_dir / "sweeps"


ANUD = "aiperf/anud18-qwen36/results/nvfp4/h100/chatbot"
GEMMA = "inference-benchmarker/infervisor-plow/perf-data/harness/b2-ib/vllm/results"
SURAJ = "vllm/surajssd-llm-k8s/results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
VSWEEP = "vllm/er0080-vllm-benchmarking/packages/api/tests/fixtures/vllm_sweep_v0.25.1"


# -- detection ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rel, fmt", [
    (f"{ANUD}/c16/profile_export_aiperf.json", "aiperf"),
    (f"{ANUD}/c16/profile_export_aiperf.csv", "aiperf-csv"),
    ("genai-perf/wellflat-k8s-dev/commit-e17e8f5/bench/etl/profile_export_genai_perf.json", "genai-perf"),
    (f"{SURAJ}/serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json", "vllm"),
    (f"{VSWEEP}/SERVE--max_num_seqs=4-BENCH--max_concurrency=2-num_prompts=8/summary.json", "vllm"),
    ("guidellm/neuralmagic-guidellm/tests/unit/entrypoints/assets/benchmarks_stripped.json", "guidellm"),
    ("guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv", "guidellm-csv"),
    ("llmperf/raw_data/summary/anyscale_70b.json", "llmperf"),
    ("llmperf/raw_data/individual/anyscale_70b.json", "llmperf-requests"),
    ("inference-perf/demos/kubecon-na-2025/vllm/results/stage_3_lifecycle_metrics.json", "inference-perf"),
    (f"{GEMMA}/google_gemma-4-12B-it_2026-07-19-04-14-11.json", "inference-benchmarker"),
])
def test_detect_sweep_format_from_content(sw, tmp_path, rel, fmt):
    assert detect_sweep_format(sw / rel) == fmt
    # the name does not matter: a copy under a neutral name is detected the same way
    copy = tmp_path / "renamed.txt"
    shutil.copyfile(sw / rel, copy)
    assert detect_sweep_format(copy) == fmt


def test_sweep_formats_registry(sw):
    # one declarative registry: every name detect_sweep_format returns is an entry, each with a
    # description and a detector, and an inference-perf Prometheus file is detected as
    # inference-perf and refused by that format's reader
    from capbook.formats import FileFormat

    assert all(isinstance(f, FileFormat) and f.name == k and f.description
               for k, f in SWEEP_FORMATS.items())
    assert {"aiperf", "vllm", "guidellm", "llmperf", "inference-perf", "capbook"} <= set(SWEEP_FORMATS)
    res = sw / "inference-perf/demos/kubecon-na-2025/vllm/results"
    prom = res / "stage_0_prometheus_metrics.json"
    if prom.exists():
        assert detect_sweep_format(prom) == "inference-perf"


#: Which module of capbook.sweeps.importers reads each format: one module per load-generator family.
FAMILIES = {
    "aiperf": ("aiperf", "genai-perf", "aiperf-csv"), "vllm_bench": ("vllm",), "sglang": ("sglang",),
    "guidellm": ("guidellm", "guidellm-csv"), "llmperf": ("llmperf", "llmperf-wrapped", "llmperf-requests"),
    "inference_perf": ("inference-perf",), "inference_benchmarker": ("inference-benchmarker",),
    "per_request": ("lmbench", "per-request"), "capbook_csv": ("capbook",),
}


def test_each_family_module_defines_its_own_formats_only():
    # every registered format's detector and reader, and the parser functions the reader calls,
    # are defined in its family's module; each family module registers exactly its family's formats
    import importlib
    import inspect

    assert sorted(f for fs in FAMILIES.values() for f in fs) == sorted(SWEEP_FORMATS)
    for family, names in FAMILIES.items():
        mod = importlib.import_module(f"capbook.sweeps.importers.{family}")
        assert tuple(f.name for f in mod._FORMATS) == names, family
        for name in names:
            fmt = SWEEP_FORMATS[name]
            assert fmt in mod._FORMATS, name
            for fn in (fmt.detect, fmt.read):
                assert fn.__module__ == mod.__name__, (name, fn)
                called = [mod.__dict__.get(n) for n in fn.__code__.co_names]
                parsers = [c for c in called if inspect.isfunction(c) and c.__name__.startswith(("_parse", "_read"))]
                assert all(c.__module__ == mod.__name__ for c in parsers), (name, parsers)
        # and no parser of another family is defined here
        own = {n for n, v in vars(mod).items() if inspect.isfunction(v) and v.__module__ == mod.__name__}
        assert own, family


def test_unrecognised_files_are_named(sw, tmp_path):
    with pytest.raises(ValueError, match=r"README\.md: not a recognised"):
        read_sweep(sw / "README.md")
    with pytest.raises(ValueError, match=r"meta\.json: JSON with top-level .* not a recognised"):
        read_sweep(sw / ANUD / "c16" / "meta.json")
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"broken\.json: not valid JSON"):
        detect_sweep_format(bad)
    with pytest.raises(ValueError, match="does not exist"):
        read_sweep(tmp_path / "missing.json")


# -- aiperf ---------------------------------------------------------------------------------------
def test_aiperf_concurrency_sweep(sw):
    s = read_sweep(sw / ANUD, load="concurrency")
    assert s.concurrency.tolist() == [2, 4, 8, 16, 32]
    row = s.table.set_index("concurrency").loc[16]
    # c16/profile_export_aiperf.json: time_to_first_token p50/p95/p99 (ms)
    assert row.ttft_p50_s == pytest.approx(87.8130185 * MS)
    assert row.ttft_p95_s == pytest.approx(156.7163015 * MS)
    assert row.ttft_p99_s == pytest.approx(162.71021869999998 * MS)
    # inter_token_latency p50/p95/p99 (ms): aiperf's per-request (latency - TTFT)/(OSL - 1)
    assert row.tpot_p50_s == pytest.approx(13.038704763888887 * MS)
    assert row.tpot_p95_s == pytest.approx(14.297500853153151 * MS)
    assert row.tpot_p99_s == pytest.approx(15.829244959444459 * MS)
    assert row.request_throughput_rps == pytest.approx(5.155478865573389)
    assert row.output_throughput_tps == pytest.approx(1044.5752022319584)
    assert row.mean_input_tokens == pytest.approx(374.0729166666667)
    assert row.mean_output_tokens == pytest.approx(202.61458333333334)
    assert row.num_requests == 96
    assert s.config["model"] == "qwen3.6-nvfp4"
    assert row.load_kind == "concurrency" and row.concurrency_source == "set"
    # every per-point CSV is skipped as a duplicate of its JSON, every meta.json as foreign
    assert sum("same point" in why for _, why in s.skipped) == 8
    assert sum(p.endswith("meta.json") for p, _ in s.skipped) == 8
    # a sweep from real data drives choose_slots: TPOT p95 stays below 20 ms through 32
    assert choose_slots(s, 0.020, q=95, margin=0).S == 32


def test_aiperf_mixed_closed_and_open_loop(sw):
    with pytest.raises(ValueError, match="mixes closed-loop .* load='concurrency'"):
        read_sweep(sw / ANUD)
    r = read_sweep(sw / ANUD, load="rate").table
    assert r.load_kind.unique().tolist() == ["rate"]
    assert r.request_rate_target.tolist() == [0.8, 1.0, 1.2]
    # r0.8: requests in the system by Little's law, request_throughput.avg 0.8063384138345789
    # req/s x request_latency.avg 1394.1716964791667 ms; the level is that less the engine's
    # queue, throughput x (its mean TTFT - the configuration's lowest mean TTFT)
    x, in_sys = 0.8063384138345789, 0.8063384138345789 * 1.3941716964791667
    assert r.in_system.iloc[0] == pytest.approx(in_sys)
    ttfts = {d.name: json.loads((d / "profile_export_aiperf.json").read_text())["time_to_first_token"]["avg"] / 1e3
             for d in (sw / ANUD).iterdir() if d.is_dir()}
    wq = ttfts["r0.8"] - min(ttfts.values())
    assert r.queue_wait_s.iloc[0] == pytest.approx(wq)
    assert r.concurrency.iloc[0] == pytest.approx(in_sys - x * wq)
    assert r.concurrency_source.iloc[0] == "littles_law_running"
    assert not r.saturated.any()  # 0.8-1.2 req/s completed as offered


def test_aiperf_csv_matches_json(sw):
    csv_pt = read_points(sw / ANUD / "c16" / "profile_export_aiperf.csv").iloc[0]
    # c16/profile_export_aiperf.csv: "Time to First Token (ms)" p50 87.81, p95 156.72;
    # "Inter Token Latency (ms)" p99 15.83; "Request Throughput (requests/sec)" 5.16
    assert csv_pt.ttft_p50_s == pytest.approx(87.81 * MS)
    assert csv_pt.ttft_p95_s == pytest.approx(156.72 * MS)
    assert csv_pt.tpot_p99_s == pytest.approx(15.83 * MS)
    assert csv_pt.request_throughput_rps == pytest.approx(5.16)
    assert csv_pt.concurrency == 16  # from the JSON export beside it
    js = read_points(sw / ANUD / "c16" / "profile_export_aiperf.json").iloc[0]
    for c in ["ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p95_s", "tpot_p99_s"]:
        assert csv_pt[c] == pytest.approx(js[c], abs=0.005 * MS)  # CSV keeps 2 decimals of ms


def test_aiperf_csv_alone_needs_the_load_point(sw, tmp_path):
    lone = tmp_path / "profile_export_aiperf.csv"
    shutil.copyfile(sw / ANUD / "c16" / "profile_export_aiperf.csv", lone)
    with pytest.raises(ValueError, match=r"profile_export_aiperf\.csv: .*concurrency"):
        read_sweep(lone)
    assert read_sweep(lone, concurrency=16).concurrency.tolist() == [16]
    # a CSV missing a metric row names it
    text = lone.read_text().replace("Inter Token Latency (ms)", "Something Else (ms)")
    lone.write_text(text)
    with pytest.raises(ValueError, match="Inter Token Latency"):
        read_sweep(lone, concurrency=16)


def test_aiperf_old_schema_agentic_sweep(sw):
    s = read_sweep(sw / "aiperf" / "InferenceMAX_Rocm_Team")
    assert s.concurrency.tolist() == [1, 2, 4, 8, 16, 32, 40, 48, 56, 64]
    row = s.table.set_index("concurrency").loc[16]
    # conc16 profile_export_aiperf.json (aiperf 0.8.0): time_to_first_token p50 1539.017899 ms,
    # inter_token_latency p50 36.98606437373737 ms / p95 118.99321789033172 ms,
    # request_throughput 0.39851585484437557, input_sequence_length avg 95705.30811554333,
    # request_count 727, error_request_count 1
    assert row.ttft_p50_s == pytest.approx(1.539017899)
    assert row.tpot_p50_s == pytest.approx(36.98606437373737 * MS)
    assert row.tpot_p95_s == pytest.approx(118.99321789033172 * MS)
    assert row.request_throughput_rps == pytest.approx(0.39851585484437557)
    assert row.mean_input_tokens == pytest.approx(95705.30811554333)
    assert row.num_requests == 727 and row.failed_requests == 1
    assert any("failed requests" in n for n in s.notes)
    # the README's saturation knee: TTFT p50 about 94 s at 32 and 857 s at 64
    assert float(s.ttft(32)) == pytest.approx(94, rel=0.01)
    assert float(s.ttft(64)) == pytest.approx(857, rel=0.01)


# -- genai-perf ----------------------------------------------------------------------------------
def test_genai_perf_two_schema_versions(sw):
    base = sw / "genai-perf" / "wellflat-k8s-dev"
    new = read_sweep(base / "commit-e17e8f5/bench/etl/profile_export_genai_perf.json")
    old = read_sweep(base / "commit-e3e57ba/bench/etl/profile_export_genai_perf.json")
    # e17e8f5: concurrency in input_config.perf_analyzer.stimulus; TTFT p50 1416.927935 ms,
    # p95 2295.0372568000003 ms; inter_token_latency p50 7.6727289999999995 ms; 35 requests
    t = new.table.iloc[0]
    assert t.concurrency == 1
    assert t.ttft_p50_s == pytest.approx(1.416927935)
    assert t.ttft_p95_s == pytest.approx(2.2950372568)
    assert t.tpot_p50_s == pytest.approx(7.6727289999999995 * MS)
    assert t.num_requests == 35
    assert new.config["model"] == "openai/gpt-oss-20b"
    # e3e57ba: flat input_config.concurrency = 1; TTFT p50 2088.661403 ms, ITL p50 7.0842575 ms
    o = old.table.iloc[0]
    assert o.concurrency == 1
    assert o.ttft_p50_s == pytest.approx(2.088661403)
    assert o.tpot_p50_s == pytest.approx(7.0842575 * MS)
    assert o.num_requests == 66


# -- vLLM -----------------------------------------------------------------------------------------
def test_vllm_benchmark_serving_rate_sweep(sw):
    s = read_sweep(sw / SURAJ, load="rate")
    t = s.table
    assert t.request_rate_target.tolist() == [1.0, 4.0]
    assert t.load_kind.tolist() == ["rate", "rate"]
    # rate 16 completed 6.33 req/s (61 % of what 200 prompts at 16 req/s give) and rate "inf"
    # is a burst: both saturated, kept apart, not levels
    sat = s.saturated
    assert sat.load_kind.tolist() == ["rate", "burst"] and sat.saturated.all()
    assert sat.request_rate_target.iloc[0] == 16.0 and math.isnan(sat.request_rate_target.iloc[1])
    assert "61%" in sat.saturation_reason.iloc[0] and "unbounded request rate" in sat.saturation_reason.iloc[1]
    assert s.saturation_rps == pytest.approx(8.398304797910107)  # qps_inf request_throughput
    # benchmark_results.json records the GPU ("1xStandard_ND96asr_v4 x 1")
    assert s.config["gpu"] == "1xStandard_ND96asr_v4 x 1"
    c = choose_slots(s, 0.050, q=95)
    assert c.S == 18 and "only two levels" in c.reason and "saturated" in c.reason
    q4 = t.iloc[1]
    # ..._qps_04.json: median_ttft_ms 49.50005649993727, p99_ttft_ms 67.56385031015722,
    # median_tpot_ms 27.348463269617604, p99_tpot_ms 27.912823145449423,
    # request_throughput 3.1751913448302957, output_throughput 673.9184869835061,
    # total_input_tokens 42659, total_output_tokens 42449, completed 200
    assert q4.ttft_p50_s == pytest.approx(49.50005649993727 * MS)
    assert q4.ttft_p99_s == pytest.approx(67.56385031015722 * MS)
    assert q4.tpot_p50_s == pytest.approx(27.348463269617604 * MS)
    assert q4.tpot_p99_s == pytest.approx(27.912823145449423 * MS)
    assert q4.request_throughput_rps == pytest.approx(3.1751913448302957)
    assert q4.output_throughput_tps == pytest.approx(673.9184869835061)
    assert q4.mean_input_tokens == pytest.approx(42659 / 200)
    assert q4.mean_output_tokens == pytest.approx(42449 / 200)
    # p95 is not in the summary; it comes from the per-request arrays
    assert q4.p95_source == "per-request arrays"
    assert q4.ttft_p50_s <= q4.ttft_p95_s <= q4.ttft_p99_s
    assert q4.tpot_p50_s <= q4.tpot_p95_s <= q4.tpot_p99_s
    # benchmark_results.json (the suite's table, not a load point) is skipped, not read
    assert any(p.endswith("benchmark_results.json") for p, _ in s.skipped)


def test_vllm_per_request_percentiles_reproduce_vllms_own(sw):
    """Oracle for the p95 fill-in: the same computation reproduces vLLM's p99 and median."""
    d = json.loads((sw / SURAJ / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_04.json").read_text())
    tp = [sum(i) / (o - 1) for i, o in zip(d["itls"], d["output_lens"]) if o > 1]
    assert np.percentile(tp, 99) * 1e3 == pytest.approx(d["p99_tpot_ms"], rel=1e-5)
    assert np.median(tp) * 1e3 == pytest.approx(d["median_tpot_ms"], rel=1e-5)
    assert np.percentile(d["ttfts"], 99) * 1e3 == pytest.approx(d["p99_ttft_ms"], rel=1e-9)


def test_vllm_bench_sweep_layout(sw):
    with pytest.raises(ValueError, match=r"holds 2 configurations told apart by config "
                                         r"\('SERVE--max_num_seqs=4-.*', 'SERVE--max_num_seqs=8-.*'\) "
                                         r"and max_num_seqs \(4, 8\); pass where=\{'config': 'SERVE--max_num_seqs=4"):
        read_sweep(sw / VSWEEP)
    with pytest.raises(ValueError, match=r"several points at concurrency \[2\.0\].*repeats='mean'"):
        read_sweep(sw / VSWEEP, where={"max_num_seqs": 4})
    pts = read_points(sw / VSWEEP)
    # run=0, run=1 per server config; summary.json repeats them and is de-duplicated
    assert len(pts) == 4
    assert sorted(zip(pts.max_num_seqs, pts.run_number)) == [(4, 0), (4, 1), (8, 0), (8, 1)]
    s = read_sweep(sw / VSWEEP, where={"max_num_seqs": 4}, repeats="mean")
    # a string matches the number (the command line passes --where max_num_seqs=4 as text)
    s_txt = read_sweep(sw / VSWEEP, where={"max_num_seqs": "4"}, repeats="mean")
    assert s_txt.table.tpot_p50_s.tolist() == s.table.tpot_p50_s.tolist()
    assert s.config["max_num_seqs"] == 4
    row = s.table.iloc[0]
    # max_num_seqs=4: run=0 median_tpot_ms 8.323490332986694, run=1 7.929104699966653
    assert row.tpot_p50_s == pytest.approx((8.323490332986694 + 7.929104699966653) / 2 * MS)
    assert row.num_requests == 16 and row.runs_averaged == 2
    assert row.concurrency == 2 and row.load_kind == "concurrency"  # max_concurrency 2


def test_vllm_jsonl_append_result(sw, tmp_path):
    a = json.loads((sw / VSWEEP / "SERVE--max_num_seqs=8-BENCH--max_concurrency=2-num_prompts=8/run=0.json").read_text())
    b = json.loads((sw / "vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/bench_serve_v0.25.1.json").read_text())
    a.pop("max_num_seqs")  # --append-result lines of one server: vllm bench sweep adds this field
    b = dict(b, max_concurrency=4)  # pretend a second level, as --append-result would collect
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n")
    assert detect_sweep_format(p) == "vllm"
    s = read_sweep(p)
    assert s.concurrency.tolist() == [2, 4]
    # bench_serve_v0.25.1.json: median_ttft_ms 55.68139649994919
    assert s.table.ttft_p50_s.iloc[1] == pytest.approx(55.68139649994919 * MS)
    assert math.isnan(s.table.tpot_p95_s.iloc[0])  # vLLM reports no p95 by default
    with pytest.raises(ValueError, match="tpot_p95_s"):
        s.tpot(2, q=95)


def test_vllm_all_failed_and_missing_field(sw, tmp_path):
    f = sw / "vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/bench_serve_all_requests_failed_v0.25.1.json"
    with pytest.raises(ValueError, match=r"all_requests_failed_v0\.25\.1\.json: field 'completed' is 0"):
        read_sweep(f)
    d = json.loads((sw / "vllm/er0080-vllm-benchmarking/packages/protocol/tests/fixtures/bench_serve_v0.25.1.json").read_text())
    del d["median_tpot_ms"]
    p = tmp_path / "cut.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"cut\.json: missing field 'median_tpot_ms'"):
        read_sweep(p)


# -- GuideLLM -------------------------------------------------------------------------------------
def test_guidellm_json(sw):
    s = read_sweep(sw / "guidellm/neuralmagic-guidellm/tests/unit/entrypoints/assets/benchmarks_stripped.json")
    r = s.table.iloc[0]
    # benchmarks[0]: synchronous strategy; metrics.time_to_first_token_ms.successful.median
    # 16.38054847717285, .percentiles.p95 19.00935173034668; inter_token_latency_ms.successful
    # .median 4.9241227427805505, .percentiles.p99 5.258346167136365;
    # requests_per_second.successful.mean 1.5481806532737452; request_totals.successful 46
    assert r.concurrency == 1
    assert r.ttft_p50_s == pytest.approx(16.38054847717285 * MS)
    assert r.ttft_p95_s == pytest.approx(19.00935173034668 * MS)
    assert r.tpot_p50_s == pytest.approx(4.9241227427805505 * MS)
    assert r.tpot_p99_s == pytest.approx(5.258346167136365 * MS)
    assert r.request_throughput_rps == pytest.approx(1.5481806532737452)
    assert r.num_requests == 46
    # output_token_count.successful.total_sum 5888 over duration 29.997201442718506 s
    assert r.output_throughput_tps == pytest.approx(5888 / 29.997201442718506)


def test_guidellm_later_layout(sw, tmp_path):
    """Later GuideLLM versions move request_totals into metrics (as {count: ...}) and the
    strategy under config; the same numbers must come out."""
    d = json.loads((sw / "guidellm/neuralmagic-guidellm/tests/unit/entrypoints/assets/benchmarks_stripped.json").read_text())
    b = d["benchmarks"][0]
    b["metrics"]["request_totals"] = {k: {"count": v} for k, v in b.pop("request_totals").items()}
    b["config"] = {"strategy": b.pop("args")["strategy"]}
    del b["duration"]
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(d))
    r = read_sweep(p).table.iloc[0]
    assert r.concurrency == 1 and r.num_requests == 46
    assert r.tpot_p50_s == pytest.approx(4.9241227427805505 * MS)
    # without a duration, output tokens/s is output_tokens_per_second.successful.mean
    assert r.output_throughput_tps == pytest.approx(198.13346751788123)
    del b["metrics"]["request_totals"]
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"benchmarks\.json: missing field 'benchmarks\[0\]\.request_totals'"):
        read_sweep(p)


def test_guidellm_csv(sw):
    path = sw / "guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv"
    pts = read_points(path)
    assert len(pts) == 16
    r = pts.set_index("point").loc["sweep[4]"]
    # all-benchmarks.csv row sweep[4]: constant, rate 7.0, ttft_median_ms 82.3,
    # itl_median_ms 29.7, rps_mean 6.52, concurrency_mean 25.71, prompt 264, output 120,
    # total_requests 391, error_requests 0; the p99 columns are "-"
    assert r.load_kind == "rate" and r.request_rate_target == 7.0
    # the level is the measured mean in flight less the engine's queue: rps x (ttft_mean_ms
    # 89.2 - the lowest ttft_mean_ms of the file, 63.3 in sweep[0])
    assert r.in_system == pytest.approx(25.71)
    assert r.concurrency == pytest.approx(25.71 - 6.52 * (89.2 - 63.3) * MS)
    assert r.concurrency_source == "measured_running"
    assert r.ttft_p50_s == pytest.approx(82.3 * MS)
    assert r.tpot_p50_s == pytest.approx(29.7 * MS)
    assert r.request_throughput_rps == pytest.approx(6.52)
    assert r.num_requests == 391
    assert math.isnan(r.ttft_p99_s) and math.isnan(r.tpot_p95_s)
    # the file mixes separate runs with one sweep; choose the sweep's rows
    with pytest.raises(ValueError, match="mixes closed-loop"):
        read_sweep(path)
    s = read_sweep(path, where=lambda p: p.point.str.startswith("sweep"), load="all")
    # sweep[1] is GuideLLM's throughput profile (everything at once): saturated, not a level
    assert len(s.concurrency) == 9 and s.concurrency[0] == 1
    assert s.saturated.point.tolist() == ["sweep[1]"] and s.saturation_rps == pytest.approx(17.98)
    assert np.all(np.diff(s.table.tpot_p50_s) > 0)
    with pytest.raises(ValueError, match="ttft_p99_s"):
        s.ttft(10, q=99)


# -- llmperf --------------------------------------------------------------------------------------
def test_llmperf_summary(sw):
    with pytest.raises(ValueError, match=r"holds 6 configurations told apart by config \('anyscale_13b', "
                                         r".* and model .*; pass where=\{'config': 'anyscale_13b'\} to read one"):
        read_sweep(sw / "llmperf/raw_data/summary")
    # the whole folder: the per-request files repeat their summaries and are skipped
    with pytest.raises(ValueError, match="holds 6 configurations"):
        read_sweep(sw / "llmperf")
    assert read_sweep(sw / "llmperf", where={"config": "anyscale_70b"}).concurrency.tolist() == [5]
    s = read_sweep(sw / "llmperf/raw_data/summary/anyscale_70b.json")
    r = s.table.iloc[0]
    # anyscale_70b.json: num_concurrent_requests 5; results_ttft_s_quantiles_p50
    # 0.21282956000001718, _p95 0.3620083771999928; results_inter_token_latency_s_quantiles_p50
    # 0.014559224685430442, _p99 0.03873539747323499; results_num_completed_requests_per_min
    # 84.73327721639254; results_mean_output_throughput_token_per_s 207.52121071152493
    assert r.concurrency == 5
    assert r.ttft_p50_s == pytest.approx(0.21282956000001718)
    assert r.ttft_p95_s == pytest.approx(0.3620083771999928)
    assert r.tpot_p50_s == pytest.approx(0.014559224685430442)
    assert r.tpot_p99_s == pytest.approx(0.03873539747323499)
    assert r.request_throughput_rps == pytest.approx(84.73327721639254 / 60)
    assert r.output_throughput_tps == pytest.approx(207.52121071152493)
    assert r.mean_input_tokens == 550
    assert s.config["model"] == "meta-llama/Llama-2-70b-chat-hf"
    assert any("overstates TPOT" in n for n in s.notes)


def test_llmperf_per_request_tpot(sw):
    ind = sw / "llmperf/raw_data/individual/anyscale_70b.json"
    recs = [r for r in json.loads(ind.read_text()) if r["error_code"] is None]
    # first record by hand: end_to_end_latency_s, ttft_s, number_output_tokens give TPOT
    # (e2e - ttft) / (n - 1) = 0.014786562253333387 s, below its inter_token_latency_s
    # 0.01630449964900609 (which spreads the TTFT over the output)
    r0 = recs[0]
    assert (r0["end_to_end_latency_s"] - r0["ttft_s"]) / (r0["number_output_tokens"] - 1) == pytest.approx(0.014786562253333387)
    t = read_sweep(ind, concurrency=5).table.iloc[0]
    tp = [(r["end_to_end_latency_s"] - r["ttft_s"]) / (r["number_output_tokens"] - 1) for r in recs]
    assert t.tpot_p50_s == pytest.approx(float(np.median(tp)))
    assert t.ttft_p95_s == pytest.approx(float(np.percentile([r["ttft_s"] for r in recs], 95)))
    summary = read_sweep(sw / "llmperf/raw_data/summary/anyscale_70b.json").table.iloc[0]
    assert t.tpot_p50_s < summary.tpot_p50_s  # the summary's ITL includes TTFT


def test_llmperf_errors_are_reported(sw):
    s = read_sweep(sw / "llmperf/raw_data/summary/bedrock_13b.json")
    # bedrock_13b.json: results_num_completed_requests 53, results_number_errors 97
    assert s.table.num_requests.iloc[0] == 53 and s.table.failed_requests.iloc[0] == 97
    assert any("failed requests" in n for n in s.notes)
    ind = sw / "llmperf/raw_data/individual/bedrock_13b.json"
    # the summary of the same run (../summary/bedrock_13b.json) gives the concurrency and the
    # measured throughput the per-request file lacks
    r = read_sweep(ind).table.iloc[0]
    assert r.num_requests == 53 and r.failed_requests == 97  # error_code -100 on 97 of 150
    assert r.concurrency == 5
    assert r.request_throughput_rps == pytest.approx(s.table.request_throughput_rps.iloc[0])
    assert r.output_throughput_tps == pytest.approx(s.table.output_throughput_tps.iloc[0], rel=1e-6)


def test_llmperf_requests_alone_need_the_concurrency_and_bound_the_throughput(sw, tmp_path):
    alone = tmp_path / "anyscale_70b_individual_responses.json"
    alone.write_bytes((sw / "llmperf/raw_data/individual/anyscale_70b.json").read_bytes())
    with pytest.raises(ValueError, match="num_concurrent_requests.*pass concurrency="):
        read_sweep(alone)
    s = read_sweep(alone, concurrency=5)
    summary = read_sweep(sw / "llmperf/raw_data/summary/anyscale_70b.json").table.iloc[0]
    # Little's law with the nominal 5 in flight is an upper bound on what was measured
    assert s.table.request_throughput_rps.iloc[0] > summary.request_throughput_rps
    assert any("upper bound" in n for n in s.notes)


# -- inference-perf ------------------------------------------------------------------------------
def _ip_stage(res, n):
    return json.loads((res / f"stage_{n}_lifecycle_metrics.json").read_text())


def test_inference_perf_stages(sw):
    res = sw / "inference-perf/demos/kubecon-na-2025/vllm/results"
    s = read_sweep(res)
    # 7 stages: 4 levels plus stages 4-6, which the client could not drive (achieved send
    # rate 106 req/s against 122.6-183.4 requested, mean schedule delay 3.6-19.9 s)
    assert len(s.concurrency) == 4 and len(s.saturated) == 3
    assert s.saturated.point.tolist() == ["stage_4", "stage_5", "stage_6"]
    assert all("schedule delay" in w and "achieved send rate" in w for w in s.saturated.saturation_reason)
    # the highest completion rate reached, stage_6 successes.throughput.requests_per_sec
    assert s.saturation_rps == pytest.approx(_ip_stage(res, 6)["successes"]["throughput"]["requests_per_sec"])
    assert any("3 saturated load points" in n and "stage_4" in n for n in s.notes)
    assert sum("summary over all stages" in why for _, why in s.skipped) == 1
    assert sum("Prometheus" in why for _, why in s.skipped) == 8
    t = s.table.sort_values("request_rate_target").reset_index(drop=True)
    r = t.iloc[3]
    # stage_3_lifecycle_metrics.json: requested_rate 92.19; successes.latency
    # time_to_first_token median 0.04451845702715218 s / p95 0.08024103753268719 /
    # p99 0.18182665726635605; time_per_output_token median 0.00741328114676181 /
    # p95 0.00937609843072272; throughput.requests_per_sec 91.35730480202015;
    # request_latency.mean 1.0212724370473967 s; prompt_len.mean 204.10178991140842
    assert r.request_rate_target == 92.19
    assert r.ttft_p50_s == pytest.approx(0.04451845702715218)
    assert r.ttft_p95_s == pytest.approx(0.08024103753268719)
    assert r.ttft_p99_s == pytest.approx(0.18182665726635605)
    assert r.mean_input_tokens == pytest.approx(204.10178991140842)
    # TPOT: the reported time_per_output_token is half the per-token time (README caveat);
    # (mean E2E - mean TTFT) / (mean output - 1) is the consistent one and the percentiles
    # are rescaled to it
    d3 = _ip_stage(res, 3)["successes"]
    lat, out = d3["latency"], d3["output_len"]["mean"]
    derived = (lat["request_latency"]["mean"] - lat["time_to_first_token"]["mean"]) / (out - 1)
    ratio = derived / lat["time_per_output_token"]["mean"]
    assert 2.0 < ratio < 2.2
    assert derived == pytest.approx(15.83 * MS, abs=0.01 * MS)  # README table, TPOT derived
    assert r.tpot_p50_s == pytest.approx(0.00741328114676181 * ratio)
    assert r.tpot_p95_s == pytest.approx(0.00937609843072272 * ratio)
    assert r.tpot_reported_p50_s == pytest.approx(0.00741328114676181)
    assert r.tpot_derived_mean_s == pytest.approx(derived) and r.tpot_rescale == pytest.approx(ratio)
    assert any("time_per_output_token (mean) disagrees" in n and "rescaled" in n for n in s.notes)
    # the level: the engine's running sequences, Little's law less the engine's queue
    ttft0 = min(_ip_stage(res, k)["successes"]["latency"]["time_to_first_token"]["mean"] for k in range(7))
    x = 91.35730480202015
    assert r.in_system == pytest.approx(x * 1.0212724370473967)
    assert r.concurrency == pytest.approx(x * (1.0212724370473967 - (lat["time_to_first_token"]["mean"] - ttft0)))
    assert r.concurrency_source == "littles_law_running"
    # ... never above the engine's --max-num-seqs=128 (manifests.yaml beside results/)
    assert s.config["max_num_seqs"] == 128
    assert (s.concurrency <= 128).all() and (s.saturated.concurrency <= 128).all()
    # the saturated stages, where vLLM was full, estimate about 128 running
    assert s.saturated.concurrency.to_numpy() == pytest.approx([128] * 3, abs=2)
    # manifests.yaml fills the configuration
    assert s.config["gpu"] == "nvidia-h100-80gb" and s.config["engine"] == "vllm v0.11.0"
    assert s.config["tensor_parallel"] == 1 and s.config["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    # S is at most max_num_seqs and S/T is close to the measured saturated completion rate
    c = choose_slots(s, 0.050, q=95)
    assert c.S == 91 and "saturated" in c.reason
    rating = c.S / float(s.service_time_s(c.S))
    assert 0.7 * s.saturation_rps < rating < 1.1 * s.saturation_rps
    # README: achieved rate flattens near 106 QPS while TTFT p99 jumps to 2.4-3.3 s
    assert s.saturated.ttft_p99_s.iloc[-1] > 2.4 and t.ttft_p99_s.iloc[2] < 0.2
    with pytest.raises(ValueError, match="summary over all stages"):
        read_sweep(res / "summary_lifecycle_metrics.json")
    with pytest.raises(ValueError, match="Prometheus"):
        read_sweep(res / "stage_0_prometheus_metrics.json")


def test_inference_perf_two_configurations(sw):
    demo = sw / "inference-perf/demos/kubecon-na-2025"
    with pytest.raises(ValueError, match=r"kubecon-na-2025 holds 2 configurations told apart by config "
                                         r"\('vllm', 'vllm\+batch_size'\) and max_num_seqs \(128, 192\); "
                                         r"pass where=\{'config': 'vllm'\} to read one"):
        read_sweep(demo)
    a = read_sweep(demo, where={"config": "vllm"})
    b = read_sweep(demo, where={"config": "vllm+batch_size"})
    assert a.config["max_num_seqs"] == 128 and b.config["max_num_seqs"] == 192
    assert a.table.concurrency.tolist() == read_sweep(demo / "vllm").table.concurrency.tolist()
    # the numeric column matches a string, as the command line passes it
    assert read_sweep(demo, where={"max_num_seqs": "192"}).config["config"] == "vllm+batch_size"
    with pytest.raises(ValueError, match=r"keeps no point .*column 'config' holds 'vllm', 'vllm\+batch_size'"):
        read_sweep(demo, where={"config": "sglang"})


# -- inference-benchmarker ----------------------------------------------------------------------
def test_inference_benchmarker_sweep_report(sw):
    f = sw / GEMMA / "google_gemma-4-12B-it_2026-07-19-04-14-11.json"
    with pytest.raises(ValueError, match="mixes closed-loop"):
        read_sweep(f)
    s = read_sweep(f, load="rate")
    t = s.table
    assert len(t) == 8  # the warm-up result is not a measurement; the 64-VU point is closed loop
    r = t.set_index("point").loc["constant@1.37req/s"]
    # result "constant@1.37req/s": inter_token_latency_ms.p50 39.849, time_to_first_token_ms.p50
    # 395.268, request_rate 1.3179662612900407, successful_requests 157, e2e_latency_ms.avg
    # 5302.239, token_throughput_secs 167.68392400808003, total_tokens 19975,
    # total_tokens_sent 628000
    assert r.tpot_p50_s == pytest.approx(39.849 * MS)
    assert r.ttft_p50_s == pytest.approx(395.268 * MS)
    assert r.request_throughput_rps == pytest.approx(1.3179662612900407)
    assert r.num_requests == 157
    # requests in the system 1.318 x 5.302 s, less the queue: 1.318 x (time_to_first_token_ms.avg
    # 395.972 - 373.103, the lowest avg, at constant@0.27req/s)
    assert r.in_system == pytest.approx(1.3179662612900407 * 5.302239)
    assert r.concurrency == pytest.approx(1.3179662612900407 * (5.302239 - (0.395972 - 0.373103)))
    assert not t.saturated.any()  # request_rate follows config.rate within the 120 s window
    assert r.output_throughput_tps == pytest.approx(167.68392400808003)
    assert r.mean_output_tokens == pytest.approx(19975 / 157)
    assert r.mean_input_tokens == pytest.approx(628000 / 157)
    closed = read_sweep(f, load="concurrency").table.iloc[0]
    assert closed.concurrency == 64 and closed.tpot_p50_s == pytest.approx(204.403 * MS)
    # three reports together: VU 1, VU 2 and the 64-VU point form a closed-loop sweep
    s3 = read_sweep(sorted((sw / GEMMA).glob("*.json")), load="concurrency")
    assert s3.concurrency.tolist() == [1, 2, 64]
    # a generator of paths works too (it is consumed once)
    s4 = read_sweep((p for p in sorted((sw / GEMMA).glob("*.json"))), load="concurrency")
    assert s4.concurrency.tolist() == [1, 2, 64]
    with pytest.raises(ValueError, match="no input files"):
        read_sweep([])


# -- capbook's own layout, the book's datasets entry point ------------------------------------------
def test_read_own_csv_round_trip(repo_root):
    p = repo_root / "data" / "sweeps" / "llama70b_h100_tp4_chat.csv"
    s = read_sweep(p)
    ref = Sweep.from_csv(p)
    assert np.allclose(s.table[METRIC_COLUMNS].to_numpy(float), ref.table[METRIC_COLUMNS].to_numpy(float))
    assert s.config["tensor_parallel"] == 4


def test_config_fill_and_option_errors(sw):
    s = read_sweep(sw / ANUD, load="concurrency", config={"gpu": "H100 PCIe", "tensor_parallel": 1})
    assert s.config["gpu"] == "H100 PCIe" and s.config["model"] == "qwen3.6-nvfp4"
    with pytest.raises(ValueError, match="config key 'colour'"):
        read_sweep(sw / ANUD, load="concurrency", config={"colour": "red"})
    with pytest.raises(ValueError, match="^load must be one of 'auto', 'concurrency'"):
        read_sweep(sw / ANUD, load="closed")
    with pytest.raises(ValueError, match="^repeats must be one of 'error', 'mean'"):
        read_sweep(sw / ANUD, repeats="median")
    with pytest.raises(ValueError, match="keeps no point"):
        read_sweep(sw / ANUD, where={"model": "nope"})


# -- small fixtures written here (no ../shared needed) ------------------------------------------
def _lat(mean, median=None):
    median = mean if median is None else median
    return {"mean": mean, "median": median, "p95": median * 1.2, "p99": median * 1.5}


def _ip_stage_dict(requested, achieved, rps, e2e, ttft, tpot_reported, delay=0.0, out=64.0, count=600):
    """A minimal inference-perf stage_N_lifecycle_metrics.json (times in s, rates in req/s)."""
    return {
        "load_summary": {"count": count, "requested_rate": requested, "achieved_rate": achieved,
                         "send_duration": count / achieved, "schedule_delay": {"mean": delay}},
        "successes": {
            "count": count,
            "latency": {"request_latency": _lat(e2e), "time_to_first_token": _lat(ttft),
                        "time_per_output_token": _lat(tpot_reported)},
            "throughput": {"requests_per_sec": rps, "output_tokens_per_sec": rps * out},
            "prompt_len": {"mean": 200.0}, "output_len": {"mean": out},
        },
        "failures": {"count": 0},
    }


MANIFEST = """apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
      - args:
        - "--model=$(MODEL_ID)"
        - "--max-num-seqs=16"
        - "--tensor-parallel-size=2"
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        env:
        - name: MODEL_ID
          value: org/tiny-model
        image: vllm/vllm-openai:v0.11.0
        resources:
          limits:
            nvidia.com/gpu: 2
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
"""


def _write_ip_run(folder, manifest=MANIFEST):
    """Four stages of an engine with max_num_seqs 16 and 10 ms per token (reported: 5 ms)."""
    res = folder / "results"
    res.mkdir(parents=True)
    if manifest:
        (folder / "manifests.yaml").write_text(manifest)
    # rps, E2E = TTFT + 63 x TPOT; stage 3: the client could not keep up (sent 20 of 40 req/s)
    stages = [(1, 1, 1.0, 0.05 + 63 * 0.010, 0.05), (10, 10, 9.9, 0.05 + 63 * 0.012, 0.05),
              (12, 12, 11.9, 0.30 + 63 * 0.014, 0.30), (40, 20, 19.9, 2.00 + 63 * 0.015, 2.00)]
    for n, (req, ach, rps, e2e, ttft) in enumerate(stages):
        tpot = (e2e - ttft) / 63 / 2  # the old client's half-size TPOT
        d = _ip_stage_dict(req, ach, rps, e2e, ttft, tpot, delay=5.0 if n == 3 else 0.0)
        (res / f"stage_{n}_lifecycle_metrics.json").write_text(json.dumps(d))
    return res


def test_open_loop_levels_are_running_sequences_from_a_manifest(tmp_path):
    _write_ip_run(tmp_path / "eng")
    s = read_sweep(tmp_path / "eng")
    t = s.table
    # stage 3 is saturated (achieved 50 % of requested, mean schedule delay 5 s): not a level
    assert len(t) == 3 and s.saturated.point.tolist() == ["stage_3"]
    assert "50%" in s.saturated.saturation_reason.iloc[0] and "5 s" in s.saturated.saturation_reason.iloc[0]
    assert s.saturation_rps == pytest.approx(19.9)
    # level = rps x (E2E - (TTFT - lowest TTFT)); stage 2 waits 0.25 s in the engine's queue
    e2e2 = 0.30 + 63 * 0.014
    assert t.concurrency.iloc[2] == pytest.approx(11.9 * (e2e2 - 0.25))
    assert t.in_system.iloc[2] == pytest.approx(11.9 * e2e2)
    assert t.concurrency_source.iloc[2] == "littles_law_running"
    # the saturated stage runs at most max_num_seqs 16 (manifest), not 19.9 x 2.95 = 59
    assert s.saturated.concurrency.iloc[0] == 16 and s.saturated.concurrency_source.iloc[0] == "max_num_seqs"
    # TPOT: reported 5 ms disagrees with (E2E - TTFT)/(out - 1) = 10 ms: rescaled x2, noted
    assert t.tpot_p50_s.iloc[0] == pytest.approx(0.010) and t.tpot_rescale.iloc[0] == pytest.approx(2.0)
    assert t.tpot_reported_p50_s.iloc[0] == pytest.approx(0.005)
    assert any("disagrees" in n and "derived / reported 2.00" in n for n in s.notes)
    # the manifest fills the configuration: gpu, engine, TP, model (env substituted), GPUs
    assert s.config["gpu"] == "nvidia-l4" and s.config["engine"] == "vllm v0.11.0"
    assert s.config["tensor_parallel"] == 2 and s.config["model"] == "org/tiny-model"
    assert s.config["max_num_seqs"] == 16 and t.num_gpus.iloc[0] == 2
    assert any("manifests.yaml" in n for n in s.notes)
    # S is a level the engine held, and the reason names the saturated stage
    c = choose_slots(s, 0.050, q=50)
    assert c.S == 11 and c.S <= 16 and "saturated" in c.reason


def test_max_num_seqs_priority_keyword_command_manifest(tmp_path):
    _write_ip_run(tmp_path / "eng")
    pts = read_points(tmp_path / "eng")
    assert set(pts.max_num_seqs) == {16} and pts.max_num_seqs_source.str.endswith("manifests.yaml").all()
    (tmp_path / "eng" / "vllm_command.txt").write_text(
        "VLLM_USE_V1=0 vllm serve org/tiny-model \\\n  --max_num_seqs=8 --tensor-parallel-size 4\n")
    pts = read_points(tmp_path / "eng")
    assert set(pts.max_num_seqs) == {8}  # vllm_command.txt before the manifest
    assert set(pts.tensor_parallel) == {4} and set(pts.engine) == {"vllm (V0 engine)"}
    assert pts.saturated.tolist() == [False, False, False, True]
    pts = read_points(tmp_path / "eng", max_num_seqs=12)  # the keyword before both
    assert set(pts.max_num_seqs) == {12} and set(pts.max_num_seqs_source) == {"max_num_seqs="}
    with pytest.raises(ValueError, match=r"^max_num_seqs must be at least 1, got 0"):
        read_points(tmp_path / "eng", max_num_seqs=0)
    for bad in ("12", True, float("nan"), 1.5):
        with pytest.raises(ValueError, match="^max_num_seqs"):
            read_points(tmp_path / "eng", max_num_seqs=bad)
    for bad in ("4", True, float("nan"), 0):
        with pytest.raises(ValueError, match="^concurrency"):
            read_points(tmp_path / "eng", concurrency=bad)
        with pytest.raises(ValueError, match="^prefill_rate_tps"):
            read_sweep(tmp_path / "eng", prefill_rate_tps=bad)


def test_without_any_engine_limit_levels_are_not_capped(tmp_path):
    _write_ip_run(tmp_path / "eng", manifest=None)
    s = read_sweep(tmp_path / "eng")
    assert s.config["gpu"] is None and "max_num_seqs" not in s.config
    # stage 3: 19.9 x (2.945 - 1.95) = 19.8 sequences: nothing to cap it with
    assert s.saturated.concurrency.iloc[0] == pytest.approx(19.9 * (2.00 + 63 * 0.015 - 1.95))
    s16 = read_sweep(tmp_path / "eng", max_num_seqs=16)
    assert s16.saturated.concurrency.iloc[0] == 16


def test_two_configurations_in_a_folder_name_where(tmp_path):
    _write_ip_run(tmp_path / "demo" / "small")
    _write_ip_run(tmp_path / "demo" / "big", manifest=MANIFEST.replace("--max-num-seqs=16", "--max-num-seqs=64"))
    with pytest.raises(ValueError, match=r"demo holds 2 configurations told apart by config \('big', 'small'\) "
                                         r"and max_num_seqs \(64, 16\); pass where=\{'config': 'big'\} to read one"):
        read_sweep(tmp_path / "demo")
    assert read_sweep(tmp_path / "demo", where={"config": "small"}).config["max_num_seqs"] == 16
    assert read_sweep(tmp_path / "demo", where={"max_num_seqs": "64"}).config["config"] == "big"
    assert read_sweep(tmp_path / "demo", where={"max_num_seqs": 64.0}).config["config"] == "big"
    # two folders differing only in an engine flag are two configurations too
    _write_ip_run(tmp_path / "flags" / "a")
    _write_ip_run(tmp_path / "flags" / "b", manifest=MANIFEST.replace(
        '"--tensor-parallel-size=2"', '"--tensor-parallel-size=2"\n        - "--enable-prefix-caching"'))
    with pytest.raises(ValueError, match=r"told apart by config \('a', 'b'\) and engine flags"):
        read_sweep(tmp_path / "flags")


def _vllm_run(completed=100, rate=None, mc=None, mean_tpot_ms=10.0, e2e_ms=None, **kw):
    e2e_ms = 50.0 + 99 * 10.0 if e2e_ms is None else e2e_ms
    d = {"date": kw.pop("date", "20250101"), "model_id": "org/m", "backend": "vllm",
         "completed": completed, "failed": 0 if completed else 8, "duration": 20.0,
         "request_rate": "inf" if rate is None else rate, "max_concurrency": mc,
         "request_throughput": completed / 20.0, "output_throughput": completed * 100 / 20.0,
         "total_input_tokens": completed * 300, "total_output_tokens": completed * 100,
         "mean_ttft_ms": 50.0, "median_ttft_ms": 50.0, "p99_ttft_ms": 80.0,
         "mean_tpot_ms": mean_tpot_ms, "median_tpot_ms": mean_tpot_ms, "p99_tpot_ms": mean_tpot_ms * 1.3,
         "mean_e2el_ms": e2e_ms}
    d.update(kw)
    return d


def test_failed_run_in_a_folder_is_skipped_with_a_note(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for c in (1, 4):
        (d / f"c{c}.json").write_text(json.dumps(_vllm_run(mc=c, date=f"d{c}")))
    (d / "c8.json").write_text(json.dumps(_vllm_run(completed=0, mc=8, date="d8")))
    s = read_sweep(d)
    assert s.concurrency.tolist() == [1, 4]
    assert any(p.endswith("c8.json") and "failed run skipped" in why for p, why in s.skipped)
    assert any("failed run skipped" in n and "c8.json" in n for n in s.notes)
    with pytest.raises(ValueError, match=r"c8\.json: field 'completed' is 0"):
        read_sweep(d / "c8.json")  # named alone, it is an error


def test_tpot_agreeing_within_20_percent_is_left_alone(tmp_path):
    p = tmp_path / "r.json"
    # (E2E - TTFT)/(out - 1) = 10 ms; reported 9 ms (10 % off): kept as the tool reported it
    p.write_text(json.dumps(_vllm_run(mc=2, mean_tpot_ms=9.0)))
    r = read_sweep(p).table.iloc[0]
    assert r.tpot_p50_s == pytest.approx(0.009) and r.tpot_rescale == 1.0
    p.write_text(json.dumps(_vllm_run(mc=2, mean_tpot_ms=5.0)))  # half: rescaled to 10 ms
    s = read_sweep(p)
    assert s.table.tpot_p50_s.iloc[0] == pytest.approx(0.010)
    assert s.table.tpot_p99_s.iloc[0] == pytest.approx(0.013)
    assert any("mean_tpot_ms disagrees" in n for n in s.notes)


def test_rate_sweep_saturation_rules(tmp_path):
    d = tmp_path / "rates"
    d.mkdir()
    # 100 prompts: rate 1 and 2 complete as offered; rate 50 completes 5 req/s (far below);
    # inf is a burst; rate 6 is offered above the 5.5 req/s completed at saturation
    for rate, rps in [(1, 0.95), (2, 1.9), (6, 5.3), (50, 5.0), (None, 5.5)]:
        run = _vllm_run(rate=rate, date=f"r{rate}", request_throughput=rps)
        (d / f"r{rate}.json").write_text(json.dumps(run))
    s = read_sweep(d)
    assert s.table.request_rate_target.tolist() == [1, 2]
    reasons = dict(zip(s.saturated.request_rate_target.fillna(-1), s.saturated.saturation_reason))
    assert "exceeds the 5.5 req/s" in reasons[6] and "unbounded request rate" in reasons[-1] and "completed 5" in reasons[50]
    assert s.saturation_rps == pytest.approx(5.5)
    c = choose_slots(s, 0.05, q=50)
    assert "only two levels" in c.reason and "3 saturated points" in c.reason
    # every point saturated: one clear error
    with pytest.raises(ValueError, match="every load point is saturated"):
        read_sweep(d / "rNone.json")


def test_closed_loop_above_max_num_seqs_is_saturated(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    for c in (2, 4, 8):
        (d / f"c{c}.json").write_text(json.dumps(_vllm_run(mc=c, date=f"d{c}")))
    s = read_sweep(d, max_num_seqs=4)
    assert s.concurrency.tolist() == [2, 4] and s.saturated.concurrency.tolist() == [8]
    assert "exceeds the engine's max_num_seqs 4" in s.saturated.saturation_reason.iloc[0]


def test_engine_info_from_command_lines_and_sidecars(tmp_path):
    from capbook.sweeps.importers import _context_from_command_text, _dir_context

    info = _context_from_command_text(
        "vllm serve amd/Kimi --tensor-parallel-size=4 --kv-cache-dtype fp8 --max-num-seqs 64")
    assert info["max_num_seqs"] == 64 and info["tensor_parallel"] == 4 and info["model"] == "amd/Kimi"
    (tmp_path / "x.commands").write_text(json.dumps(
        {"server_command": "vllm serve m -tp 8 --max-num-seqs 256", "gpu_type": "H100-SXM"}))
    (tmp_path / "agg_bmk.json").write_text(json.dumps(
        [{"hw": "mi355x", "tp": 4, "framework": "vllm", "conc": c} for c in (1, 2)]))
    ctx = _dir_context(tmp_path, {})
    # *.commands before agg_bmk.json; fields either lacks come from the other
    assert ctx["gpu"] == "H100-SXM" and ctx["tensor_parallel"] == 8 and ctx["max_num_seqs"] == 256
    assert ctx["engine"] == "vllm"


def test_where_errors_name_the_values(tmp_path):
    _write_ip_run(tmp_path / "eng")
    with pytest.raises(ValueError, match=r"where=\{'config': 'nope'\} keeps no point .* column 'config' holds 'eng'"):
        read_sweep(tmp_path / "eng", where={"config": "nope"})
    with pytest.raises(ValueError, match=r"where: column 'colour' not in the points"):
        read_sweep(tmp_path / "eng", where={"colour": "red"})
    with pytest.raises(ValueError, match=r"where=.* must be a mapping"):
        read_sweep(tmp_path / "eng", where=[("config", "eng")])
    assert len(read_sweep(tmp_path / "eng", where={"point": ["stage_0", "stage_1"]}).concurrency) == 2


# -- the er0080 folder: a failed run beside two server configurations ---------------------------
def test_er0080_folder_reads_with_the_failed_run_skipped(sw):
    root = sw / "vllm/er0080-vllm-benchmarking"
    with pytest.raises(ValueError, match=r"holds 3 configurations told apart by config .* and max_num_seqs "
                                         r"\(4, 8, not recorded\); pass where="):
        read_sweep(root)
    s = read_sweep(root, where={"max_num_seqs": 4}, repeats="mean")
    assert s.concurrency.tolist() == [2] and s.config["max_num_seqs"] == 4
    assert any(p.endswith("bench_serve_all_requests_failed_v0.25.1.json") and "failed run skipped" in why
               for p, why in s.skipped)
    assert any("failed run skipped" in n for n in s.notes)
    c = choose_slots(s, 0.05, q=50)
    assert c.S == 2 and c.reason.startswith("the sweep has a single level (2): S is that level")
    assert "measure higher concurrency to know whether more slots fit" in c.reason


# -- engine limits from command lines and manifests (issue 14) ----------------------------------
NO_LIMITS = {"chunked_prefill": None, "prefix_caching": None, "max_num_batched_tokens": None,
             "max_model_len": None, "gpu_memory_utilization": None, "block_size": None,
             "kv_cache_dtype": None, "quantization": None, "num_speculative_tokens": None,
             "speculative_method": None, "engine_v1": None}


def _limits(info):
    return {k: info.get(k) for k in NO_LIMITS}


@pytest.mark.parametrize("cmd, want", [
    # --flag=value, hyphens
    ("vllm serve org/m --enable-chunked-prefill --no-enable-prefix-caching --max-num-batched-tokens=8192 "
     "--max-model-len=4096 --gpu-memory-utilization=0.85 --block-size=32 --kv-cache-dtype=fp8 "
     "--quantization=awq --num-speculative-tokens=3",
     dict(chunked_prefill=True, prefix_caching=False, max_num_batched_tokens=8192, max_model_len=4096,
          gpu_memory_utilization=0.85, block_size=32, kv_cache_dtype="fp8", quantization="awq",
          num_speculative_tokens=3)),
    # --flag value, underscores; vLLM's 4k (x1000) and 2K (x1024); -q for --quantization
    ("vllm serve org/m --no_enable_chunked_prefill --enable_prefix_caching --max_num_batched_tokens 2K "
     "--max_model_len 4k --gpu_memory_utilization 0.9 --block_size 16 --kv_cache_dtype fp8_e5m2 -q gptq",
     dict(chunked_prefill=False, prefix_caching=True, max_num_batched_tokens=2048, max_model_len=4000,
          gpu_memory_utilization=0.9, block_size=16, kv_cache_dtype="fp8_e5m2", quantization="gptq")),
    # older vLLM's --enable-chunked-prefill False; the last of --enable / --no-enable wins
    ("python -m vllm.entrypoints.openai.api_server --model m --enable-chunked-prefill False "
     "--enable-prefix-caching=true --no-enable-prefix-caching",
     dict(chunked_prefill=False, prefix_caching=False)),
    # the speculative config as JSON, with --speculative_config; the environment word before it
    ("VLLM_USE_V1=1 vllm serve m --speculative_config "
     """'{"method": "eagle3", "model": "d", "num_speculative_tokens": 4}'""",
     dict(num_speculative_tokens=4, speculative_method="eagle3", engine_v1=True)),
    # vLLM's dotted form of the same JSON argument; --max-model-len -1 is not a limit
    ("vllm serve m --speculative-config.method ngram --speculative-config.num_speculative_tokens 5 "
     "--max-model-len -1", dict(num_speculative_tokens=5, speculative_method="ngram")),
    # nothing stated: nothing guessed (vLLM's own defaults are not filled in)
    ("vllm serve m --max-num-seqs 8", {}),
])
def test_engine_limit_flags_in_every_spelling(cmd, want):
    from capbook.sweeps.importers import _context_from_command_text

    assert _limits(_context_from_command_text(cmd)) == {**NO_LIMITS, **want}


def test_an_on_off_flag_does_not_swallow_the_model():
    from capbook.sweeps.importers import _context_from_command_text

    info = _context_from_command_text("vllm serve --enable-prefix-caching org/m --max-num-seqs 4")
    assert info["prefix_caching"] is True and info["max_num_seqs"] == 4


_POD_HEAD = MANIFEST.split("      - args:")[0]  # apiVersion … containers:
LIMITS_MANIFEST = _POD_HEAD + """      - args:
        - "--model=$(MODEL_ID)"
        - "--max-num-seqs=16"
        - "--gpu_memory_utilization=0.9"
        - "--max-model-len=512"
        - "--enable-chunked-prefill"
        - "--quantization bitsandbytes"
        - "--speculative_config"
        - '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4}'
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        env:
        - name: MODEL_ID
          value: org/tiny-model
        - name: VLLM_USE_V1
          value: "0"
        image: vllm/vllm-openai:v0.9.0
"""


def test_engine_limits_from_a_manifest_in_every_row(tmp_path):
    _write_ip_run(tmp_path / "eng", manifest=LIMITS_MANIFEST)
    s = read_sweep(tmp_path / "eng")
    want = dict(chunked_prefill=True, prefix_caching=None, max_num_batched_tokens=None, max_model_len=512,
                gpu_memory_utilization=0.9, block_size=None, kv_cache_dtype=None,
                quantization="bitsandbytes", num_speculative_tokens=4, speculative_method="eagle3",
                engine_v1=False)
    assert len(s.table) == 3 and len(s.saturated) == 1
    for t in (s.table, s.saturated):  # the saturated stage carries them too
        for c, v in want.items():
            vals = t[c].tolist()
            if v is None:
                assert all(x is None or (isinstance(x, float) and math.isnan(x)) for x in vals), c
            else:
                assert vals == [v] * len(t), c
        assert t.engine_config_source.str.endswith("manifests.yaml").all()
    assert s.config["engine"] == "vllm v0.9.0 (V0 engine)" and s.config["max_num_seqs"] == 16
    # a shell script in the manifest (sh -c "...") is read word by word
    script = _POD_HEAD + """      - command: ["/bin/sh", "-c"]
        args:
        - "VLLM_USE_V1=1 vllm serve org/m --max-num-seqs 16 --no-enable-chunked-prefill --block-size 32"
        image: vllm/vllm-openai:v0.11.0
"""
    (tmp_path / "eng" / "manifests.yaml").write_text(script)
    pts = read_points(tmp_path / "eng")
    assert set(pts.chunked_prefill) == {False} and set(pts.block_size) == {32}
    assert set(pts.engine_v1) == {True} and set(pts.max_num_seqs) == {16} and set(pts.model) == {"org/m"}


def test_engine_limits_without_any_engine_file_are_empty_not_guessed(tmp_path):
    from capbook.sweeps.importers import LIMIT_COLUMNS, TOKEN_COLUMNS

    _write_ip_run(tmp_path / "eng", manifest=None)
    pts = read_points(tmp_path / "eng")
    for c in LIMIT_COLUMNS + tuple(TOKEN_COLUMNS):
        assert c in pts
        assert all(x is None or (isinstance(x, float) and math.isnan(x)) for x in pts[c]), c
    assert pts.engine_config_source.isna().all()


def test_command_file_limits_and_repeats_mean_keeps_flags_true_false(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    (d / "vllm_command.txt").write_text(
        "vllm serve org/m \\\n  --max-num-seqs 8 --enable-chunked-prefill --enable-prefix-caching \\\n"
        "  --max-num-batched-tokens 2048 --kv-cache-dtype auto\n")
    for run in (0, 1):
        (d / f"run{run}.json").write_text(json.dumps(_vllm_run(mc=2, date=f"d{run}")))
    s = read_sweep(d, repeats="mean")
    r = s.table.iloc[0]
    assert r.runs_averaged == 2
    for c in ("chunked_prefill", "prefix_caching"):  # True, not averaged into 1.0
        assert isinstance(r[c], (bool, np.bool_)) and r[c]
    assert r.max_num_batched_tokens == 2048 and r.kv_cache_dtype == "auto"  # as stated
    assert r.engine_config_source.endswith("vllm_command.txt")


# -- token-length quantiles ------------------------------------------------------------------------
def test_inference_perf_output_len_quantiles_in_every_row(tmp_path):
    res = _write_ip_run(tmp_path / "eng")
    out = {"mean": 63.0, "min": 20.0, "p0.1": 21.0, "p1": 30.0, "p5": 50.0, "p10": 55.0, "p25": 60.0,
           "median": 64.0, "p75": 65.0, "p90": 66.0, "p95": 67.0, "p99": 70.0, "p99.9": 71.0, "max": 72.0}
    prompt = {"mean": 200.0, "median": 201.0, "p99": 230.0}
    for f in res.glob("stage_*_lifecycle_metrics.json"):
        d = json.loads(f.read_text())
        d["successes"]["output_len"] = out
        d["successes"]["prompt_len"] = prompt
        f.write_text(json.dumps(d))
    s = read_sweep(tmp_path / "eng")
    for t in (s.table, s.saturated):
        assert (t.output_tokens_p50 == 64).all() and (t.output_tokens_min == 20).all()
        assert (t.output_tokens_p1 == 30).all() and (t.output_tokens_p99 == 70).all()
        assert (t.output_tokens_max == 72).all()
        assert (t.input_tokens_p50 == 201).all() and (t.input_tokens_p99 == 230).all()
        assert t.token_quantiles_source.str.startswith("successes.output_len").all()
    # a stage file recording only some quantiles: the rest NaN
    for f in res.glob("stage_*_lifecycle_metrics.json"):
        d = json.loads(f.read_text())
        d["successes"]["output_len"] = {"mean": 63.0, "median": 64.0}
        f.write_text(json.dumps(d))
    t = read_points(tmp_path / "eng")
    assert (t.output_tokens_p50 == 64).all() and t.output_tokens_p99.isna().all()


def test_vllm_per_request_lengths_give_the_quantiles_of_the_successful_requests(tmp_path):
    outs = [10, 20, 30, 40, 0]
    run = _vllm_run(mc=2, completed=4, output_lens=outs, input_lens=[100, 200, 300, 400, 999],
                    errors=["", "", "", "", "timeout"], ttfts=[0.05] * 4 + [0.0],
                    itls=[[0.01] * (o - 1) for o in outs[:4]] + [[]])
    p = tmp_path / "r.json"
    p.write_text(json.dumps(run))
    r = read_points(p).iloc[0]
    assert r.output_tokens_min == 10 and r.output_tokens_max == 40
    assert r.output_tokens_p50 == pytest.approx(25.0) and r.output_tokens_p25 == pytest.approx(17.5)
    assert r.input_tokens_p50 == pytest.approx(250.0)
    assert r.token_quantiles_source == "per-request arrays output_lens, input_lens"
    # a summary without the arrays records no distribution
    p.write_text(json.dumps(_vllm_run(mc=2)))
    assert math.isnan(read_points(p).iloc[0].output_tokens_p50)
