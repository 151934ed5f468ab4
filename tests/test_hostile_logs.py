"""Request logs nobody here has seen: each is read right (with a note) or refused with exit 2
naming the file, row, column and the flag to use, never a NULL, a traceback or a wrong number.

Tiny files in ``tmp_path``; the command line through :func:`capbook.app.cli.main`. The same cases
on the Spark engine are in tests/test_spark_engine.py."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import pytest

import capbook
from capbook.app import cli
from capbook.app.cli import main
from capbook.logs.requestlog import MAX_TOKENS, read_requests

HEADER = "arrival_time,input_tokens,output_tokens"


def _rows(n: int = 30, *, end: bool = False) -> list[str]:
    """``n`` requests a minute apart (on 2024-01-01, UTC)."""
    out = []
    for k in range(n):
        row = f"2024-01-01T00:{k:02d}:00Z,{100 + k},{50 + k}"
        out.append(row + (f",2024-01-01T00:{k:02d}:05Z" if end else ""))
    return out


def _write(path: Path, rows: list[str], header: str = HEADER) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _read(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return read_requests(path, **kw)


def _trace(capsys, *argv) -> tuple[int, str, str]:
    code = main(["trace", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


# --------------------------------------------------------------------------------------------
# 1. token counts beyond any context, and beyond 64 bits
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1000000000000", str(2**63 + 5), "1e30", '"1e12"',
                                   str(MAX_TOKENS + 1), "-9223372036854775813"])
def test_an_impossible_token_count_is_an_invalid_row(tmp_path, capsys, value):
    rows = _rows()
    rows[3] = f"2024-01-01T00:03:00Z,{value},53"
    p = _write(tmp_path / "log.csv", rows)
    code, _, err = _trace(capsys, p)
    assert code == 2
    assert f"{p}: invalid rows" in err and "column 'input_tokens'" in err and "row 4" in err, err
    reason = "negative token count" if value.startswith("-") else f"above {MAX_TOKENS:,}"
    assert reason in err and "--drop-invalid" in err and "Traceback" not in err, err
    log = _read(p, drop_invalid=True)  # the row goes, the others stay, the report says so
    assert log.rows == 29 and log.report[0]["first_rows"][0][0] == 4
    assert int(log.hourly()["input_tokens"].sum()) == sum(100 + k for k in range(30)) - 103


def test_the_largest_count_allowed_is_max_tokens(tmp_path):
    rows = _rows()
    rows[3] = f"2024-01-01T00:03:00Z,{MAX_TOKENS},53"
    log = _read(_write(tmp_path / "log.csv", rows))
    assert int(log.token_stats().loc["input_tokens", "max"]) == MAX_TOKENS


def test_a_parquet_uint64_count_above_bigint_is_refused_not_nulled(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 30
    t = pd.date_range("2024-01-01", periods=n, freq="min", tz="UTC")
    inp = pa.array([100] * 3 + [2**63 + 5] + [100] * (n - 4), type=pa.uint64())
    utc = pa.array(t.tz_convert(None).to_numpy(), type=pa.timestamp("ns", tz="UTC"))  # no .values
    pq.write_table(pa.table({"arrival_time": utc, "input_tokens": inp,
                             "output_tokens": pa.array([5] * n, type=pa.int64())}),
                   tmp_path / "log.parquet")
    with pytest.raises(ValueError, match=r"row 4 \('9223372036854775813'\)"):
        _read(tmp_path / "log.parquet")
    assert _read(tmp_path / "log.parquet", drop_invalid=True).rows == n - 1


# --------------------------------------------------------------------------------------------
# 2. paths are paths
# --------------------------------------------------------------------------------------------
def test_a_file_name_with_glob_characters_is_that_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "log1.csv", _rows(30))
    _write(tmp_path / "log[1].csv", _rows(10))
    code, out, err = _trace(capsys, "log[1].csv", "--json")
    assert code == 0, err
    assert '"rows": 10' in out and "log1.csv" not in out.replace("log[1].csv", "")
    assert _read(tmp_path / "log[1].csv").rows == 10
    assert _read(str(tmp_path / "log[1].csv").replace("[1]", "[12]")).rows == 30  # a glob


def test_a_glob_matching_nothing_says_so(tmp_path, capsys):
    code, _, err = _trace(capsys, tmp_path / "log[2].csv")
    assert code == 2 and "no file matches this pattern" in err, err


def test_help_says_paths_are_paths(capsys):
    for argv in (["trace", "--help"], ["plan", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "a file that exists is read as that file" in text, argv


# --------------------------------------------------------------------------------------------
# 3. every input path checked before any computation
# --------------------------------------------------------------------------------------------
def _deny(monkeypatch, path: Path) -> None:
    """Make ``path`` unreadable to capbook.app.cli's open (the tests run as root, where chmod 000
    does not stop reads; test_unreadable_file_as_nobody runs the real thing)."""
    real = open

    def fake(p, *a, **k):
        if os.path.abspath(p) == os.path.abspath(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p, *a, **k)

    monkeypatch.setattr(cli, "open", fake, raising=False)


@pytest.mark.parametrize("flag", ["LOG", "--requests", "--history", "--prices", "--sweep"])
@pytest.mark.parametrize("problem", ["unreadable", "folder", "missing"])
def test_every_input_path_is_checked_first(tmp_path, capsys, monkeypatch, flag, problem):
    log = _write(tmp_path / "log.csv", _rows())
    bad = tmp_path / "bad.csv"
    if problem == "unreadable":
        _write(bad, _rows())
        _deny(monkeypatch, bad)
    elif problem == "folder":
        bad.mkdir()
        (bad / "x.csv").write_text("a\n1\n")
    if problem == "folder" and flag == "--sweep":  # a sweep may be a folder: its files are checked
        _deny(monkeypatch, bad / "x.csv")
    computed = []
    monkeypatch.setattr("capbook.logs.requestlog.read_requests", lambda *a, **k: computed.append(a))
    if flag == "LOG":
        code, _, err = _trace(capsys, bad)
        prefix = f"capbook trace: {bad}"
    else:
        argv = ["plan", "--requests", str(log), "--no-sim", "--no-autoscale",
                "--out", str(tmp_path / "out")]
        argv = [a if a != str(log) or flag != "--requests" else str(bad) for a in argv]
        if flag != "--requests":
            argv += [flag, str(bad)]
        code = main(argv)
        err = capsys.readouterr().err
        prefix = f"capbook plan: {flag} {bad}"
    assert code == 2, err
    why = {"unreadable": "not readable (permission denied",
           "folder": "is a folder, not a file" if flag != "--sweep" else "not readable",
           "missing": "no such file"}[problem]
    assert err.startswith(prefix) and why in err and err.count("\n") == 1, err
    assert not computed  # refused before the log was read


@pytest.mark.parametrize("flag", ["--prices", "--history", "--requests"])
def test_compare_checks_its_paths_first(tmp_path, capsys, monkeypatch, flag):
    log = _write(tmp_path / "log.csv", _rows())
    bad = _write(tmp_path / "bad.csv", _rows())
    _deny(monkeypatch, bad)
    argv = ["compare", "--requests", str(log), "--no-sim", "--out", str(tmp_path / "out")]
    argv = argv[:1] + (argv[1:] if flag != "--requests" else argv[3:]) + [flag, str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"capbook compare: {flag} {bad}: not readable (permission denied)\n", err


def test_an_unreadable_folder_above_a_file_is_named(tmp_path, monkeypatch):
    def denied(p, *a, **k):
        raise PermissionError(13, "Permission denied", str(p))

    monkeypatch.setattr(cli.os, "stat", denied)
    with pytest.raises(ValueError, match="--history h.csv: not readable .permission denied on a folder"):
        cli._check_path("--history", "h.csv")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv")
                    or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, setpriv and a system python3 to run the CLI as nobody")
def test_unreadable_file_as_nobody():
    """The real permission error: `capbook trace` as the user nobody on a chmod 000 file (the
    path check runs before anything outside the standard library is imported)."""
    root = Path(capbook.__file__).resolve().parents[1]
    d = Path(tempfile.mkdtemp())
    try:
        d.chmod(0o755)
        p = _write(d / "log.csv", _rows())
        p.chmod(0o000)
        (d / "sub").mkdir(mode=0o000)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
               "-m", "capbook.app.cli", "trace"]
        env = {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
        for target, why in ((p, "not readable (permission denied)"),
                            (d / "sub" / "x.csv", "not readable (permission denied on a folder above it)")):
            r = subprocess.run([*cmd, str(target)], capture_output=True, text=True, env=env,
                               cwd=str(d), timeout=120)
            if "No module named" in r.stderr:
                pytest.skip(f"the system python3 cannot import capbook.app.cli: {r.stderr[-200:]}")
            assert r.returncode == 2, r.stderr
            assert r.stderr == f"capbook trace: {target}: {why}\n"
    finally:
        (d / "sub").chmod(0o755)
        shutil.rmtree(d)


# --------------------------------------------------------------------------------------------
# 4. encodings, compression, long lines
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding, named", [("utf-16", "UTF-16 -t"), ("utf-16-le", "UTF-16LE"),
                                             ("utf-16-be", "UTF-16BE")])
def test_utf16_is_named_with_the_command_that_converts_it(tmp_path, capsys, encoding, named):
    p = tmp_path / "log.csv"
    p.write_bytes((HEADER + "\n" + "\n".join(_rows()) + "\n").encode(encoding))
    code, _, err = _trace(capsys, p)
    assert code == 2 and err.startswith(f"capbook trace: {p}: UTF-16 text"), err
    assert f"`iconv -f {named}" in err and "UTF-8" in err and "binary" not in err, err


def test_gzip_under_a_plain_name_is_read_with_a_note(tmp_path, capsys):
    p = tmp_path / "log.csv"
    p.write_bytes(gzip.compress((HEADER + "\n" + "\n".join(_rows()) + "\n").encode()))
    code, out, err = _trace(capsys, p)
    assert code == 0, err
    assert "rows      30" in out and "gzip-compressed although its name does not say so" in out


def test_zstd_under_a_plain_name_is_read_with_a_note(tmp_path):
    import duckdb

    src = _write(tmp_path / "plain.csv", _rows())
    duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{src}', all_varchar=true)) TO "
                             f"'{tmp_path / 'log.csv'}' (FORMAT csv, COMPRESSION zstd)")
    log = _read(tmp_path / "log.csv")
    assert log.rows == 30 and any("zstd-compressed" in n for n in log.notes)


def test_bzip2_is_named(tmp_path, capsys):
    import bz2

    p = tmp_path / "log.csv"
    p.write_bytes(bz2.compress((HEADER + "\n" + "\n".join(_rows())).encode()))
    code, _, err = _trace(capsys, p)
    assert code == 2 and "bzip2-compressed" in err and "binary" not in err, err


def test_a_long_field_is_read_and_a_longer_one_named_with_its_line(tmp_path, capsys):
    rows = _rows(10)
    rows[4] = f'2024-01-01T00:04:00Z,104,54,"{"x" * 3_000_000}"'
    p = _write(tmp_path / "log.csv", [r + ",note" if k != 4 else r for k, r in enumerate(rows)],
               HEADER + ",comment")
    assert _read(p).rows == 10  # 3 MB: under the 8 MiB limit (DuckDB's own is 2 MB)
    rows[4] = f'2024-01-01T00:04:00Z,104,54,"{"x" * 9_000_000}"'
    p = _write(tmp_path / "log.csv", [r + ",note" if k != 4 else r for k, r in enumerate(rows)],
               HEADER + ",comment")
    code, _, err = _trace(capsys, p)
    assert code == 2, err
    assert f"{p}: line 6 of the file" in err and "longer than the CSV reader's limit of 8,388,608" in err
    assert "quote" not in err, err


def test_a_long_bad_value_is_quoted_short(tmp_path, capsys):
    rows = _rows()
    rows[2] = f"2024-01-01T00:02:00Z,{'9' * 5000}x,52"
    code, _, err = _trace(capsys, _write(tmp_path / "log.csv", rows))
    assert code == 2 and "row 3 ('" + "9" * 80 + "...')" in err and len(err) < 1000, err


# --------------------------------------------------------------------------------------------
# 5. silent wrong results
# --------------------------------------------------------------------------------------------
def test_one_end_before_its_arrival_is_one_invalid_row(tmp_path, capsys):
    rows = _rows(end=True)
    rows[4] = "2024-01-01T00:04:00Z,104,54,2024-01-01T00:03:00Z"
    p = _write(tmp_path / "log.csv", rows, HEADER + ",end_time")
    code, _, err = _trace(capsys, p)
    assert code == 2 and "column 'end_time'" in err and "row 5" in err and "--drop-invalid" in err, err
    code, out, err = _trace(capsys, p, "--drop-invalid")
    assert code == 0, err
    assert "Cs2       0.000  (measured; mean service time 5 s)" in out, out


def test_why_cs2_is_missing_is_said(tmp_path, capsys):
    rows = [r + ",,throttled" for r in _rows()]
    p = _write(tmp_path / "log.csv", rows, HEADER + ",end_time,status")
    code, out, err = _trace(capsys, p)
    assert code == 0, err
    assert "Cs2       n/a (no served row has an end time; pass --sweep" in out, out


def test_naive_and_offset_times_mixed_are_read_as_utc_with_a_note(tmp_path):
    rows = _rows()
    rows[3] = "2024-01-01T00:03:00,103,53"
    rows[6] = "2024-01-01T02:06:00+02:00,106,56"
    log = _read(_write(tmp_path / "log.csv", rows))
    note = [n for n in log.notes if "UTC offset" in n]
    assert len(note) == 1 and "(29 rows, first: data row 1)" in note[0], log.notes
    assert "(1 rows, first: data row 4)" in note[0] and "read as UTC" in note[0]
    assert log.to_pandas()["arrival_time"].is_monotonic_increasing  # +02:00 converted
    assert not any("UTC offset" in n for n in _read(_write(tmp_path / "z.csv", _rows())).notes)


@pytest.mark.parametrize("value, why", [("1e30", "duration out of range"), ("inf", "unparseable duration")])
def test_a_duration_that_cannot_end_is_an_invalid_row(tmp_path, value, why):
    rows = [f"{k * 60},ChatGPT,100,50,150,Conversation log,{value if k == 5 else 1.5}" for k in range(30)]
    p = _write(tmp_path / "bg.csv", rows,
               "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Elapsed time")
    with pytest.raises(ValueError, match=rf"'Elapsed time' \(end_time\): 1 rows with {why}; first: row 6"):
        _read(p, check_units=False)


def _plan_history(capsys, tmp_path, log) -> None:
    h = tmp_path / "h.csv"
    code, _, err = _trace(capsys, log, "--hourly", h)
    assert code == 0, err
    frame = pd.read_csv(h)
    hours = pd.to_datetime(frame["period_start"])
    span = int((hours.max() - hours.min()).total_seconds() // 3600) + 1
    groups = [c for c in ("model", "tier", "tenant") if c in frame]
    for _, g in frame.groupby(groups):  # every hour of the span, zeros included
        assert len(g) == span and g["period_start"].is_unique
    code = main(["plan", "--requests", str(log), "--history", str(h), "--no-sim", "--no-autoscale",
                 "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    return frame


def test_trace_hourly_round_trips_through_plan_history_with_zero_hours(tmp_path, capsys):
    rows, k = [], 0
    for h in range(24 * 8):
        if h % 24 in (3, 4):  # two silent hours a night
            continue
        for m in range(60):
            k += 1
            rows.append(f"2024-01-01T00:00:00Z,{100 + k % 50},{40 + k % 30},m,interactive")
    stamps = pd.date_range("2024-01-01", periods=24 * 8 * 60, freq="1min", tz="UTC")
    stamps = [t for t in stamps if t.hour not in (3, 4)]
    rows = [f"{t:%Y-%m-%dT%H:%M:%SZ}" + r[len("2024-01-01T00:00:00Z"):] for t, r in zip(stamps, rows)]
    p = _write(tmp_path / "gap.csv", rows, HEADER + ",model,tier")
    frame = _plan_history(capsys, tmp_path, p)
    assert (frame["requests"] == 0).sum() == 2 * 8  # two silent hours in each of 8 nights


def test_trace_hourly_round_trips_on_the_sample_gateway(repo_root, tmp_path, capsys):
    _plan_history(capsys, tmp_path, repo_root / "data" / "gateway" / "peak_hours.parquet")


def test_trace_hourly_round_trips_on_a_real_log(shared_dir, tmp_path, capsys):
    _plan_history(capsys, tmp_path, shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv")


# --------------------------------------------------------------------------------------------
# trace --hourly: where it writes is checked before the log is read; it replaces only its own
# kind of file (or with --force), through a temporary file renamed over the old one
# --------------------------------------------------------------------------------------------
def _no_reading(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the log was read before --hourly was checked")

    monkeypatch.setattr("capbook.logs.requestlog.read_requests", refuse)


@pytest.mark.parametrize("problem", ["foreign file", "folder", "missing folder", "long name", "read-only"])
def test_trace_hourly_output_is_checked_before_the_log_is_read(tmp_path, capsys, monkeypatch, problem):
    log = _write(tmp_path / "log.csv", _rows())
    target = tmp_path / "hourly.csv"
    if problem == "foreign file":
        target.write_text("my own notes\n")
    elif problem == "folder":
        target.mkdir()
    elif problem == "missing folder":
        target = tmp_path / "no" / "such" / "hourly.csv"
    elif problem == "long name":
        target = tmp_path / ("h" * 300 + ".csv")
    else:
        real_mkstemp = tempfile.mkstemp

        def denied(*a, dir=None, **k):
            if dir is not None and os.path.samefile(dir, tmp_path):
                raise PermissionError(13, "Permission denied")
            return real_mkstemp(*a, dir=dir, **k)

        monkeypatch.setattr(tempfile, "mkstemp", denied)
    _no_reading(monkeypatch)
    code, _, err = _trace(capsys, log, "--hourly", target)
    assert code == 2
    assert err.startswith("capbook trace: --hourly ") and "Traceback" not in err
    if problem == "foreign file":
        assert "--force" in err and target.read_text() == "my own notes\n"   # untouched


def test_trace_hourly_replaces_its_own_csv_and_a_foreign_file_only_with_force(tmp_path, capsys):
    log = _write(tmp_path / "log.csv", _rows())
    target = tmp_path / "hourly.csv"
    assert _trace(capsys, log, "--hourly", target)[0] == 0
    first = target.read_text()
    assert first.startswith(cli._HOURLY_HEADER)
    assert _trace(capsys, log, "--hourly", target)[0] == 0          # its own file: replaced
    assert target.read_text() == first
    target.write_text("notes\n")
    assert _trace(capsys, log, "--hourly", target)[0] == 2
    assert _trace(capsys, log, "--hourly", target, "--force")[0] == 0
    assert target.read_text() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hourly.csv", "log.csv"]  # no temporary left


def test_trace_hourly_interrupted_while_writing_leaves_the_old_file(tmp_path, capsys, monkeypatch):
    log = _write(tmp_path / "log.csv", _rows())
    target = tmp_path / "hourly.csv"
    target.write_text(cli._HOURLY_HEADER + "requests\nold\n")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli._write_hourly(_read(log), str(target))
    assert target.read_text() == cli._HOURLY_HEADER + "requests\nold\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hourly.csv", "log.csv"]
