"""Hostile sweep files and folders: each is read right (with a visible note) or refused clearly.

Issue 28: nothing in a user's sweep is dropped without a word. A result file cut short in a
folder, an ``inf`` / NaN / negative / zero value where a measurement must be, a CSV value
without a column name, a TPOT in milliseconds, repeated levels, an empty folder: each ends in
exit status 2 naming the file, the point (or CSV line) and the column, or in a correct sweep whose
notes say what was passed over. The files are small synthetic ones in the tools' own layouts, or
copies of a ``../shared`` file with one field broken, made in ``tmp_path`` at test time.
"""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from capbook.app.cli import main
from capbook.sweeps.importers import read_points, read_sweep

IP_RESULTS = "sweeps/inference-perf/demos/kubecon-na-2025/vllm/results"
GUIDELLM_CSV = "sweeps/guidellm/nirjhar17-guidellm-pd-disaggregation/reports/all-benchmarks.csv"
RATES = (1.0, 2.0, 4.0, 8.0)


def _vllm_point(rate: float, **override) -> dict:
    """A ``vllm bench serve --save-result`` summary at Poisson ``rate`` req/s (the tool's keys)."""
    completed, e2e_ms, ttft_ms, tpot_ms, out = 200, 3_000.0, 80.0, 14.6, 200
    d = {"date": f"20260101-00000{int(rate)}", "backend": "vllm", "model_id": "m", "request_rate": rate,
         "max_concurrency": None, "duration": completed / rate, "completed": completed, "failed": 0,
         "total_input_tokens": completed * 500, "total_output_tokens": completed * out,
         "request_throughput": rate * 0.99, "output_throughput": rate * 0.99 * out,
         "mean_ttft_ms": ttft_ms, "median_ttft_ms": ttft_ms, "p99_ttft_ms": 2 * ttft_ms,
         "mean_tpot_ms": tpot_ms, "median_tpot_ms": tpot_ms, "p99_tpot_ms": 1.5 * tpot_ms,
         "mean_e2el_ms": e2e_ms}
    d.update(override)
    return d


def _vllm_folder(tmp_path, broken_rate: float | None = None, **override):
    d = tmp_path / "vllm_sweep"
    d.mkdir()
    for r in RATES:
        point = _vllm_point(r, **(override if r == broken_rate else {}))
        (d / f"serving_qps_{r:g}.json").write_text(json.dumps(point, indent=2))
    return d


def _capbook_csv(tmp_path, repo_root, edit=None, name="sweep.csv"):
    """The sample sweep CSV, with ``edit(lines)`` applied to its text lines (line 1 is the header)."""
    lines = (repo_root / "data" / "sweeps" / "illustrative_chat.csv").read_text().splitlines()
    if edit is not None:
        edit(lines)
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _set_cell(column: str, value: str, line: int = 4):
    def edit(lines):
        header = lines[0].split(",")
        cells = lines[line - 1].split(",")
        cells[header.index(column)] = value
        lines[line - 1] = ",".join(cells)
    return edit


def _trace(repo_root, sweep, *flags) -> list:
    log = repo_root / "data" / "requests" / "sample_requests.parquet"
    return ["trace", str(log), "--sweep", str(sweep), "--slots", "2", *flags]


def _refused(capsys, argv, *names):
    """``argv`` exits 2 with one message (no traceback) naming each of ``names``; the message."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    for n in names:
        assert n in err, f"{n!r} not in: {err}"
    return err


# -- 1. a result file that cannot be parsed is not skipped ------------------------------------------
@pytest.mark.parametrize("cut", [0.5, 0.9, 1 / 3000])
def test_truncated_result_in_a_folder_is_an_error_naming_where_it_breaks(tmp_path, capsys, repo_root, cut):
    d = _vllm_folder(tmp_path)
    victim = d / "serving_qps_4.json"
    text = victim.read_text()
    victim.write_text(text[:max(1, int(len(text) * cut))])
    assert len(read_points(d.parent / "vllm_sweep" / "serving_qps_1.json")) == 1
    with pytest.raises(ValueError, match=r"serving_qps_4\.json: not valid JSON: .* at line \d+, column \d+ "
                                         r"\(character [\d,]+ of [\d,]+\): the text ends before the JSON "
                                         r"is complete") as exc:
        read_sweep(d)
    assert "move it out of" in str(exc.value) and "is not skipped" in str(exc.value)
    _refused(capsys, _trace(repo_root, d), "capbook trace: --sweep", "serving_qps_4.json", "line", "column",
             "character", "cut short", "repair or re-export it")


def test_truncated_real_inference_perf_stage_is_an_error(shared_dir, tmp_path, capsys, repo_root):
    d = tmp_path / "results"
    shutil.copytree(shared_dir / IP_RESULTS, d)
    before = read_sweep(d)
    stage = d / "stage_3_lifecycle_metrics.json"
    text = stage.read_text()
    stage.write_text(text[: len(text) // 2])
    _refused(capsys, _trace(repo_root, d), "stage_3_lifecycle_metrics.json", "line 1, column",
             f"of {len(text) // 2:,})", "cut short")
    stage.write_text(text[:1])  # nothing but "{": the name says it is a result
    _refused(capsys, _trace(repo_root, d), "stage_3_lifecycle_metrics.json", "not valid JSON")
    stage.write_text(text)
    assert read_sweep(d).concurrency.tolist() == before.concurrency.tolist()


def test_broken_json_lines_name_the_line(tmp_path):
    d = tmp_path / "jsonl"
    d.mkdir()
    rows = [json.dumps(_vllm_point(r)) for r in RATES]
    rows[2] = rows[2][:40]
    (d / "results.jsonl").write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=r"results\.jsonl: not valid JSON Lines: .* at line 3, column \d+"):
        read_sweep(d)


def test_files_that_are_not_results_are_skipped_and_the_notes_say_so(tmp_path, capsys):
    d = _vllm_folder(tmp_path)
    (d / "meta.json").write_text(json.dumps({"node": "a", "start": 1, "end": 2}))
    (d / "notes.json").write_text('{"owner": "me", "tags": [1, 2')  # broken, and no result field
    (d / "settings.csv").write_text("key,value\nseed,42\n")
    sw = read_sweep(d)
    assert len(sw.concurrency) + len(sw.saturated) == len(RATES)  # every point is read
    assert {p.rsplit("/", 1)[-1] for p, _ in sw.skipped} == {"meta.json", "notes.json", "settings.csv"}
    note = next(n for n in sw.notes if "skipped as not load points" in n)
    assert note.startswith("3 files") and all(f in note for f in ("meta.json", "notes.json", "settings.csv"))
    assert "not valid JSON" in note and "not a recognised load-generator output" in note


@pytest.mark.parametrize("name, content", [
    ("profile_export_aiperf.json", {"time_to_first_token": 1}),
    ("stage_0_lifecycle_metrics.json", {"load_summary": "x"}),
    ("run=0.json", {"x": 1}),
    ("benchmarks.json", {"runs": []}),
])
def test_a_file_named_like_a_result_that_is_not_one_is_an_error(tmp_path, name, content):
    d = _vllm_folder(tmp_path)
    (d / name).write_text(json.dumps(content))
    with pytest.raises(ValueError, match=rf"{name.replace('.', '[.]')}: .*not a recognised.* looks like a "
                                         r"load generator's result file"):
        read_sweep(d)


def test_real_folders_list_their_skipped_files_in_the_notes(shared_dir):
    for sub, n, word in (("sweeps/aiperf/anud18-qwen36", 8, "meta.json"),
                         ("sweeps/inference-perf/demos/kubecon-na-2025", 18, "Prometheus"),
                         ("realdata/inference-perf-kubecon-na-2025", 55, "analyzed_reports_legend.json")):
        pts = read_points(shared_dir / sub)
        note = next(x for x in pts.attrs["notes"] if "skipped as not load points" in x)
        assert note.startswith(f"{n} files") and word in note, note


# -- 2. values that are not measurements --------------------------------------------------------
@pytest.mark.parametrize("column, value, says", [
    ("concurrency", "inf", "is inf, not a measurement"),
    ("concurrency", "0", "is 0; the load level must be > 0"),
    ("concurrency", "-4", "is -4; the load level must be > 0"),
    ("tpot_p50_s", "NaN", "is nan, not a measurement"),
    ("tpot_p50_s", "Infinity", "is inf, not a measurement"),
    ("ttft_p50_s", "-0.2", "must be > 0"),
    ("tpot_p95_s", "inf", "is inf, not a measurement"),  # an optional percentile: empty is fine, inf is not
    ("num_requests", "0", "no successful request holds no measurement"),
    ("mean_output_tokens", "0", "must be >= 1"),
    ("request_throughput_rps", "-1", "must be > 0"),
    ("tpot_p50_s", "12.5", "a value in milliseconds where seconds are expected"),
])
def test_capbook_csv_bad_value_names_file_line_and_column(tmp_path, capsys, repo_root, column, value, says):
    p = _capbook_csv(tmp_path, repo_root, _set_cell(column, value))
    with pytest.raises(ValueError, match="sweep.csv: line 4: column") as exc:
        read_sweep(p)
    assert f"column '{column}'" in str(exc.value) and says in str(exc.value), str(exc.value)
    _refused(capsys, _trace(repo_root, p), "sweep.csv: line 4: column", f"'{column}'")


@pytest.mark.parametrize("field, value, names", [
    ("median_tpot_ms", float("inf"), "field 'median_tpot_ms' is inf"),
    ("median_tpot_ms", float("nan"), "field 'median_tpot_ms' is nan"),
    ("median_ttft_ms", "inf", "field 'median_ttft_ms' is 'inf'"),
    ("request_throughput", float("inf"), "field 'request_throughput' is inf"),
    ("median_tpot_ms", -3.0, "column 'tpot_p50_s' is -0.003"),
    ("request_throughput", 0.0, "column 'concurrency' is 0"),
    ("p99_ttft_ms", float("inf"), "column 'ttft_p99_s' is inf"),
    ("mean_e2el_ms", float("inf"), "column 'concurrency' is inf"),
    ("total_output_tokens", -5, "column 'mean_output_tokens' is -0.025"),
    ("completed", float("nan"), "field 'completed' is nan"),
])
def test_vllm_bad_value_in_a_folder_names_the_file_and_field(tmp_path, capsys, repo_root, field, value, names):
    # json.dumps writes inf and nan as the JSON extensions Infinity and NaN, which Python reads back
    d = _vllm_folder(tmp_path, broken_rate=4.0, **{field: value})
    with pytest.raises(ValueError, match="serving_qps_4.json: ") as exc:
        read_sweep(d)
    assert names in str(exc.value)
    _refused(capsys, _trace(repo_root, d), "serving_qps_4.json", names)


@pytest.mark.parametrize("keys, value, names", [
    (("load_summary", "requested_rate"), float("inf"), "field 'load_summary.requested_rate' is inf"),
    (("load_summary", "requested_rate"), "inf", "field 'load_summary.requested_rate' is 'inf'"),
    (("load_summary", "requested_rate"), 0, "point stage_1: column 'request_rate_target' is 0"),
    (("load_summary", "requested_rate"), -2, "point stage_1: column 'request_rate_target' is -2"),
    (("successes", "count"), "NaN", "field 'successes.count' is 'NaN'"),
    (("successes", "latency", "time_per_output_token", "median"), float("nan"), "column 'tpot_p50_s' is nan"),
    (("successes", "throughput", "requests_per_sec"), 0.0, "column 'concurrency' is 0"),
    (("successes", "output_len", "mean"), 0.5, "column 'mean_output_tokens' is 0.5"),
])
def test_real_inference_perf_stage_with_one_field_broken(shared_dir, tmp_path, capsys, repo_root, keys, value,
                                                         names):
    d = tmp_path / "results"
    shutil.copytree(shared_dir / IP_RESULTS, d)
    stage = d / "stage_1_lifecycle_metrics.json"
    doc = json.loads(stage.read_text())
    cur = doc
    for k in keys[:-1]:
        cur = cur[k]
    cur[keys[-1]] = value
    stage.write_text(json.dumps(doc))
    err = _refused(capsys, _trace(repo_root, d), "stage_1_lifecycle_metrics.json", names)
    assert "fix the file" in err


@pytest.mark.parametrize("value", ["inf", "-inf", "-5"])
def test_real_guidellm_csv_with_one_cell_broken_names_the_line(shared_dir, tmp_path, capsys, repo_root, value):
    src = (shared_dir / GUIDELLM_CSV).read_text().splitlines()
    header = src[0].split(",")
    cells = src[3].split(",")
    cells[header.index("ttft_median_ms")] = value
    src[3] = ",".join(cells)
    p = tmp_path / "all-benchmarks.csv"
    p.write_text("\n".join(src) + "\n")
    _refused(capsys, _trace(repo_root, p, "--load", "all"), "all-benchmarks.csv: line 4: column 'ttft_p50_s'")


def test_an_inf_request_rate_is_a_saturated_point_with_a_note(tmp_path):
    # vLLM's request_rate "inf" (every request at once) is a real setting: the point is kept out
    # of the levels and the notes say so, it is not dropped silently
    d = _vllm_folder(tmp_path, broken_rate=8.0, request_rate="inf")
    sw = read_sweep(d)
    assert len(sw.concurrency) == 3 and len(sw.saturated) == 1
    assert any("saturated load point" in n and "unbounded request rate" in n for n in sw.notes), sw.notes


# -- 4. other ways to lose a point ---------------------------------------------------------------
def test_csv_value_without_a_column_name_is_refused(tmp_path, capsys, repo_root):
    # pandas would take the first column for an index and shift every column by one
    every = _capbook_csv(tmp_path, repo_root, lambda ls: ls.__setitem__(slice(1, None), [x + ",7" for x in ls[1:]]),
                         name="every.csv")
    _refused(capsys, _trace(repo_root, every), "every.csv: line 2 has 28 fields but the header names 27")
    one = _capbook_csv(tmp_path, repo_root, lambda ls: ls.__setitem__(4, ls[4] + ",7"), name="one.csv")
    _refused(capsys, _trace(repo_root, one), "one.csv: line 5 has 28 fields")
    # delimiters at the end of every line (an empty unnamed column) read as the file without them
    trailing = _capbook_csv(tmp_path, repo_root, lambda ls: ls.__setitem__(slice(None), [x + "," for x in ls]),
                            name="trailing.csv")
    plain = read_sweep(_capbook_csv(tmp_path, repo_root))
    got = read_sweep(trailing)
    assert [c for c in got.table.columns if c.startswith("Unnamed")] == []
    pd.testing.assert_frame_equal(got.table.drop(columns="source_file"), plain.table.drop(columns="source_file"))


def test_repeated_levels_name_the_lines_and_the_flag(tmp_path, capsys, repo_root):
    p = _capbook_csv(tmp_path, repo_root, _set_cell("concurrency", "8", line=4))
    err = _refused(capsys, _trace(repo_root, p), "several points at concurrency [8]", "sweep.csv line 4",
                   "sweep.csv line 5", "--repeats mean")
    assert "repeats=" not in err


def test_empty_folder_and_folder_of_non_results_are_refused(tmp_path, capsys, repo_root):
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(capsys, _trace(repo_root, empty), "empty: folder holds no .json, .jsonl or .csv files")
    other = tmp_path / "other"
    other.mkdir()
    (other / "meta.json").write_text(json.dumps({"node": "a"}))
    (other / "notes.json").write_text("{\"a\": ")
    _refused(capsys, _trace(repo_root, other), "no load points found", "meta.json", "notes.json")


def test_a_level_with_no_successful_request_in_a_folder_is_skipped_with_a_note(tmp_path):
    d = _vllm_folder(tmp_path, broken_rate=2.0, completed=0, failed=200)
    sw = read_sweep(d)
    assert len(sw.concurrency) + len(sw.saturated) == len(RATES) - 1
    assert any("failed run skipped" in n and "serving_qps_2.json" in n for n in sw.notes), sw.notes
    with pytest.raises(ValueError, match=r"serving_qps_2\.json: field 'completed' is 0"):
        read_sweep(d / "serving_qps_2.json")


@pytest.mark.parametrize("command", [["plan"], ["predict", "--rate", "1"], ["compare"]])
def test_every_command_that_reads_a_sweep_refuses_a_truncated_result(tmp_path, capsys, command):
    d = _vllm_folder(tmp_path)
    victim = d / "serving_qps_2.json"
    victim.write_text(victim.read_text()[:300])
    flag = [] if command == ["compare"] else ["--sweep"]
    _refused(capsys, [*command, *flag, str(d)], "serving_qps_2.json: not valid JSON", "line", "column")


def test_plan_output_lists_the_skipped_files(shared_dir, tmp_path, capsys):
    folder = shared_dir / "sweeps/aiperf/anud18-qwen36"
    assert main(["plan", "--sweep", str(folder), "--load", "concurrency", "--no-autoscale", "--no-sim",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "skipped as not load points" in x)
    assert line.startswith("- sweep: 8 files skipped") and "c16/meta.json" in line, line


@pytest.mark.parametrize("name, content", [
    # genai-perf's per-request export beside its summary, AIPerf's inputs: whole files that are
    # not load points are skipped with a note, never an error (a real artifacts folder holds them)
    ("profile_export.json", {"experiments": [{"experiment": {"mode": "concurrency", "value": 4},
                                              "requests": []}], "service_kind": "openai"}),
    ("inputs.json", {"data": [{"payload": [{"messages": []}]}]}),
])
def test_a_tools_per_request_export_beside_the_results_is_skipped_with_a_note(tmp_path, name, content):
    d = _vllm_folder(tmp_path)
    (d / name).write_text(json.dumps(content))
    sw = read_sweep(d)
    assert len(sw.concurrency) + len(sw.saturated) == len(RATES)
    assert name in " ".join(p for p, _ in sw.skipped)
    assert any(name in n and "skipped as not load points" in n for n in sw.notes)
