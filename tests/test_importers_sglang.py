"""SGLang bench_serving JSONL (capbook.sweeps.importers: the ``sglang`` format).

Oracles: the figures of the lines themselves (completed / duration, median ITL, E2E), the
layout written by SGLang's ``bench_serving`` (its ``total_output_tokens_retokenized`` is what
vLLM's summaries lack), and datacrunch-research/h200-benchmarks' real files in ../shared.
"""
from __future__ import annotations

import json

import pytest

from capbook.sweeps.importers import detect_sweep_format, read_points, read_sweep


def _line(rate, dataset="random", new=False, **kw):
    d = {"backend": "sglang", "dataset_name": dataset, "request_rate": rate, "max_concurrency": None,
         "total_input_tokens": 150_000, "total_output_tokens": 160_000, "total_output_tokens_retokenized": 159_900,
         "mean_e2e_latency_ms": 7800.0 + 900 * rate, "median_e2e_latency_ms": 7700.0,
         "median_ttft_ms": 80.0 + 5 * rate, "median_itl_ms": 13.0 + rate, "output_throughput": 530.0 * rate,
         "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 0.0,
         "duration": 300.0 / rate, "completed": 300}
    if new:   # the layout SGLang writes since 2025: request throughput, TPOT and percentiles of its own
        d.update(request_throughput=0.98 * rate, median_tpot_ms=12.0 + rate, mean_tpot_ms=12.5 + rate,
                 p99_ttft_ms=300.0, mean_ttft_ms=95.0, concurrency=7.0)
        d["mean_e2el_ms"] = 95.0 + d["mean_tpot_ms"] * (160_000 / 300 - 1)   # consistent with its TTFT and TPOT
    d.update(kw)
    return d


def _write(tmp_path, lines, name="online_output.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def test_the_older_layout_reads_throughput_and_tpot_from_what_it_records(tmp_path):
    p = _write(tmp_path, [_line(r) for r in (1.0, 2.0, 4.0)])
    assert detect_sweep_format(p) == "sglang"
    pts = read_points(p)
    assert list(pts["format"]) == ["sglang"] * 3
    # request throughput = completed / duration; TPOT p50 = median ITL; TTFT p50 as recorded
    assert list(pts["request_throughput_rps"]) == pytest.approx([1.0, 2.0, 4.0])
    assert list(pts["tpot_p50_s"]) == pytest.approx([0.014, 0.015, 0.017])
    assert list(pts["ttft_p50_s"]) == pytest.approx([0.085, 0.090, 0.100])
    assert list(pts["load_kind"]) == ["rate"] * 3
    # open loop: concurrency by Little's law from the recorded mean E2E
    assert pts["concurrency"].iloc[0] == pytest.approx(1.0 * 8.7)
    assert all("median inter-token latency" in n for n in pts["tpot_note"])


def test_the_newer_layout_keeps_its_own_figures(tmp_path):
    p = _write(tmp_path, [_line(r, new=True) for r in (1.0, 2.0, 4.0)])
    pts = read_points(p)
    assert list(pts["request_throughput_rps"]) == pytest.approx([0.98, 1.96, 3.92])
    assert list(pts["tpot_p50_s"]) == pytest.approx([0.013, 0.014, 0.016])
    assert list(pts["ttft_p99_s"]) == pytest.approx([0.3] * 3)
    assert (pts["format"] == "sglang").all()


def test_runs_of_another_workload_in_the_same_file_are_another_sweep(tmp_path):
    p = _write(tmp_path, [_line(r) for r in (1.0, 2.0, 4.0)] + [_line(r, dataset="sharegpt") for r in (4.0, 8.0)])
    with pytest.raises(ValueError, match=r"2 configurations .*workload random 1024/1024.*workload sharegpt"):
        read_sweep(p)
    sw = read_sweep(p, where={"config": "workload sharegpt"})
    assert "workload sharegpt" in sw.name and len(sw.table) >= 1


def test_real_sglang_files(shared_dir):
    out = shared_dir / "sweeps/sglang/datacrunch-h200/sglang/outputs"
    if not out.is_dir():
        pytest.skip("the SGLang sweeps are not in ../shared")
    pts = read_points(out / "llama_3_3_70b_online_output.jsonl")
    rnd = pts[pts["workload"] == "random 1024/1024"]
    assert len(rnd) == 5 and (pts["workload"] == "sharegpt").sum() == 2
    # the README's figures: 16 req/s offered achieves 8.35 req/s (the engine saturated)
    top = rnd.sort_values("request_rate_target").iloc[-1]
    assert top["request_rate_target"] == 16 and top["request_throughput_rps"] == pytest.approx(8.35, abs=0.01)
    sw = read_sweep(out / "llama_3_3_70b_online_output.jsonl", where={"config": "workload random 1024/1024"})
    assert len(sw.table) == 5 and sw.tpot(float(sw.table["concurrency"].min())) > 0
    from capbook.app.cli import main

    assert main(["predict", "--sweep", str(out / "llama_3_3_70b_online_output.jsonl"),
                 "--where", "config=workload random 1024/1024", "--rate", "2"]) == 0


def test_the_real_folder_keeps_its_two_models_apart(shared_dir, capsys):
    """The folder holds Llama-3.3-70B (online and offline) and Llama-3.1-405B runs, and SGLang's
    older lines do not name the model: the size in each file's name keeps them apart, so the
    405B runs are never read as more levels (or repeats) of the 70B sweep."""
    out = shared_dir / "sweeps/sglang/datacrunch-h200/sglang/outputs"
    if not out.is_dir():
        pytest.skip("the SGLang sweeps are not in ../shared")
    pts = read_points(out)
    by_file = pts.groupby(pts["source_file"].map(lambda f: f.rsplit("/", 1)[-1]))["params_b"].unique()
    assert [list(v) for v in by_file] == [[70.0], [70.0], [405.0]]
    assert sorted(by_file.index) == ["llama_3_3_70b_offline_output.jsonl", "llama_3_3_70b_online_output.jsonl",
                                     "llama_405b_online_output.jsonl"]
    # the same workload of the two models: two configurations, labelled by both fields
    rnd = pts[pts["workload"] == "random 1024/1024"]
    assert rnd.groupby("params_b")["config"].nunique().tolist() == [1, 1]
    assert rnd["config"].nunique() == 2 and all("params_b" in c for c in rnd["config"])
    from capbook.app.cli import main

    assert main(["predict", "--sweep", str(out), "--rate", "1"]) == 2
    err = capsys.readouterr().err
    assert "params_b (70," in err and "405" in err
    # the 405B's random workload: 8 req/s offered served 3.58 with a median TTFT of 124 s (a
    # backlog that grew through the 300 s of sending), and 4 req/s offered is above what it served
    sw = read_sweep(out, where={"params_b": 405, "workload": "random 1024/1024"})
    assert len(sw.table) == 2 and len(sw.saturated) == 2
    assert sw.saturation_rps == pytest.approx(3.58, abs=0.01)
    reasons = sorted(sw.saturated["saturation_reason"])
    assert reasons[0].startswith("backlog: the median TTFT, 124 s, is 41% of the 300 s")
    assert reasons[1].startswith("offered 4 req/s exceeds the 3.585 req/s")
    sw70 = read_sweep(out, where={"params_b": 70, "workload": "random 1024/1024"})
    assert len(sw70.table) == 4 and len(sw70.saturated) == 2   # 16 req/s and the offline burst


def test_a_level_whose_queue_grew_through_the_run_is_saturated(tmp_path):
    """An open-loop level can complete nearly what was offered (its requests finish in the tail
    after sending stops) while its queue grew without bound: the median TTFT is then a sizeable
    share of the sending time. A level waiting a second or two on a 37.5 s run is not."""
    rates = (1.0, 2.0, 4.0, 8.0)
    ttft = {1.0: 85.0, 2.0: 90.0, 4.0: 2000.0, 8.0: 20_000.0}     # ms; 8 req/s sends for 37.5 s
    p = _write(tmp_path, [_line(r, new=True, median_ttft_ms=ttft[r]) for r in rates])
    pts = read_points(p).set_index("request_rate_target")
    assert not pts.loc[[1.0, 2.0, 4.0], "saturated"].any()
    assert pts.loc[8.0, "saturated"]
    assert pts.loc[8.0, "saturation_reason"].startswith("backlog: the median TTFT, 20 s, is 53% of the 37.5 s")
    # the same level waiting 3 s (8 % of the sending time) stays a level
    ttft[8.0] = 3000.0
    p = _write(tmp_path, [_line(r, new=True, median_ttft_ms=ttft[r]) for r in rates], name="b.jsonl")
    assert not read_points(p)["saturated"].any()


def test_two_runs_at_one_offered_rate_are_repeats(tmp_path):
    """Open loop: the level is the offered rate. Two runs at 4 req/s estimate slightly different
    running sequences, yet they are one level measured twice: refused, or averaged on request."""
    lines = [_line(r, new=True) for r in (1.0, 2.0, 4.0)] + [_line(4.0, new=True, duration=80.0, request_throughput=3.8, median_ttft_ms=110.0)]
    p = _write(tmp_path, lines)
    with pytest.raises(ValueError, match=r"several points at request rate 4 req/s .*repeats='mean'"):
        read_sweep(p)
    sw = read_sweep(p, repeats="mean")
    assert len(sw.table) == 3 and sw.table["runs_averaged"].max() == 2
    assert sw.table["num_requests"].sum() == 4 * 300
