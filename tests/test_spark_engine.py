"""The Spark engine gives DuckDB's answers: the same SQL (capbook.logs.sql) on both engines.

Every log in ``../shared/traces``, a generated multi-million-row Parquet log and logs with
every kind of problem are read by both engines; the hourly tables must be equal exactly, the
validation outcome (rows, report, notes, error messages) identical, and the statistics equal
within floating-point rounding. Spark runs in local mode (the ``spark`` fixture: skips where
pyspark or Java is missing, fails under CI=true)."""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from capbook.app import cli
from capbook.logs.sql import DUCKDB, SPARK, java_pattern
from capbook.logs.requestlog import read_requests

MASTER = "local[2]"


def _read(path, engine, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if engine == "spark":
            kw["spark_master"] = MASTER
        return read_requests(path, engine=engine, **kw)


def _error(path, engine, **kw) -> str:
    with pytest.raises(ValueError) as exc:
        _read(path, engine, **kw)
    return str(exc.value)


def _close(a, b, rel=1e-9):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == pytest.approx(b, rel=rel, abs=1e-12)


def assert_same(path, hourly_by=(("model", "tier"), ("status",)), **kw):
    """Both engines read ``path`` alike: rows, report, notes, hourly tables, statistics."""
    a, b = _read(path, "duckdb", **kw), _read(path, "spark", **kw)
    assert b.engine == "spark" and a.engine == "duckdb"
    for attr in ("rows", "rows_read", "dropped", "first_us", "last_us", "format", "columns",
                 "report", "notes"):
        assert getattr(a, attr) == getattr(b, attr), attr
    for by in hourly_by:
        ha, hb = a.hourly(by=by), b.hourly(by=by)
        assert len(ha) > 0
        pd.testing.assert_frame_equal(ha, hb, check_dtype=False)  # sums exactly
    sa, sb = a.summary(), b.summary()
    assert sa["status"] == sb["status"]
    pd.testing.assert_frame_equal(sa["groups"], sb["groups"], check_dtype=False)
    pd.testing.assert_frame_equal(sa["tokens"], sb["tokens"], check_dtype=False, rtol=1e-12)
    if sa["arrivals"] is not None:
        for k, v in sa["arrivals"].items():
            if k == "idc":
                assert v.keys() == sb["arrivals"][k].keys()
                assert all(_close(v[w], sb["arrivals"][k][w]) for w in v)
            elif isinstance(v, float):
                assert _close(v, sb["arrivals"][k], rel=1e-9), k
            else:
                assert v == sb["arrivals"][k], k
    pd.testing.assert_frame_equal(sa["peak_to_mean"], sb["peak_to_mean"], check_dtype=False)
    return a, b


# --------------------------------------------------------------------------------------------
# the dialects
# --------------------------------------------------------------------------------------------
def test_java_pattern_translates_strptime():
    assert java_pattern("%d/%m/%Y %H:%M:%S") == "dd/MM/yyyy HH:mm:ss"
    assert java_pattern("%Y-%m-%dT%H:%M:%S.%f") == "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"
    with pytest.raises(ValueError, match="'%a'"):
        java_pattern("%a %d")


def test_dialects_differ_only_in_spelling():
    assert DUCKDB.idiv("t", 10) == "(t) // 10" and SPARK.idiv("t", 10) == "(t) DIV 10"
    assert DUCKDB.epoch_us("x") == "epoch_us(x)" and SPARK.epoch_us("x") == "unix_micros(x)"
    con = duckdb.connect()
    assert con.execute(f"SELECT {DUCKDB.isinf('CAST(? AS DOUBLE)')}", ["inf"]).fetchone()[0]


def test_spark_spellings_run_on_spark(spark):
    row = spark.sql(
        f"SELECT {SPARK.idiv('7', 2)}, {SPARK.isinf(chr(39) + 'Infinity' + chr(39) + '::DOUBLE')}, "
        f"{SPARK.epoch_us(chr(39) + '1970-01-01 00:00:01' + chr(39) + '::TIMESTAMP')}, "
        f"{SPARK.strptime(chr(39) + '02/01/2024 03:04:05' + chr(39), '%d/%m/%Y %H:%M:%S')}").collect()[0]
    assert row[0] == 3 and row[1] is True and row[2] == 1_000_000
    assert row[3] == pd.Timestamp("2024-01-02 03:04:05").to_pydatetime()


# --------------------------------------------------------------------------------------------
# every shared log
# --------------------------------------------------------------------------------------------
SHARED_LOGS = ["AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv",
               "conversation_trace.jsonl", "synthetic_trace.jsonl",
               "burstgpt/burstgpt_slice.csv", "burstgpt/burstgpt3_slice.csv"]


@pytest.mark.parametrize("name", SHARED_LOGS)
def test_every_shared_log_gives_the_same_answer(spark, shared_dir, name):
    path = shared_dir / "traces" / name
    if not path.exists():
        pytest.skip(f"{path} is not in this copy of ../shared")
    try:
        _read(path, "duckdb")
    except ValueError as exc:  # an invalid row: both engines refuse it with the same message
        assert _error(path, "spark") == str(exc)
        a, b = assert_same(path, drop_invalid=True)
        assert a.report and a.dropped > 0
    else:
        assert_same(path)


def test_the_shared_folder_has_no_other_request_log(shared_dir):
    """A log added to ../shared/traces is added to SHARED_LOGS (ServeGen holds rate descriptors)."""
    found = {str(p.relative_to(shared_dir / "traces")) for p in (shared_dir / "traces").rglob("*")
             if p.suffix in (".csv", ".jsonl", ".parquet") and "servegen" not in p.parts
             and p.name != "summary.jsonl"}
    assert found == set(SHARED_LOGS)


def test_servegen_descriptor_is_refused_alike(spark, shared_dir):
    files = sorted((shared_dir / "traces" / "servegen").rglob("*.csv"))
    if not files:
        pytest.skip("no ServeGen descriptor in ../shared")
    assert "ServeGen" in _error(files[0], "spark") == _error(files[0], "duckdb")


# --------------------------------------------------------------------------------------------
# a multi-million-row Parquet log, read in many Spark partitions
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    """Two million canonical rows over a week, millisecond times (so ties), three tenants."""
    path = tmp_path_factory.mktemp("big") / "requests.parquet"
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute(f"""
    COPY (SELECT make_timestamp((1772409600000000 + (i * 302400 + hash(i) % 1000) // 1000 * 1000)
                     ::BIGINT)::TIMESTAMPTZ AS arrival_time,
                 1 + hash(i * 7) % 4000 AS input_tokens, hash(i * 11) % 900 AS output_tokens,
                 CASE WHEN hash(i * 3) % 3 = 0 THEN 'big' ELSE 'small' END AS model,
                 CASE WHEN hash(i * 5) % 5 = 0 THEN 'batch' ELSE 'interactive' END AS tier,
                 CASE WHEN hash(i * 13) % 50 = 0 THEN 'throttled'
                      WHEN hash(i * 17) % 400 = 0 THEN 'failed' ELSE 'served' END AS status,
                 'team-' || (hash(i * 19) % 3)::VARCHAR AS tenant
          FROM range(2000000) r(i) ORDER BY arrival_time)
    TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 100000)""")
    return path


def test_multi_million_row_parquet_log(spark, big_log):
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4MB")  # many partitions, many seams
    try:
        a, b = assert_same(big_log, hourly_by=(("model", "tier", "tenant"), ("status",), ()))
        parts = b._eng.one(f'SELECT count(DISTINCT "__pos" DIV {2**33}) FROM {b._src}')[0]
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert parts > 4  # the seams between partitions were checked
    assert a.rows == 2_000_000
    assert b.query_one("SELECT count(DISTINCT tenant) FROM req")[0] == 3


# --------------------------------------------------------------------------------------------
# problems: the same counts, first rows and messages on both engines
# --------------------------------------------------------------------------------------------
def _canonical_csv(path: Path, n: int, *, seed: int, swaps=(), bad=(), dup=(), ids=False) -> Path:
    rng = np.random.default_rng(seed)
    t = pd.Timestamp("2026-01-05", tz="UTC") + pd.to_timedelta(np.cumsum(rng.exponential(2.0, n)), unit="s")
    df = pd.DataFrame({
        "arrival_time": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "input_tokens": rng.integers(1, 3000, n).astype(str),
        "output_tokens": rng.integers(0, 800, n).astype(str),
        "model": rng.choice(["m1", "m2"], n), "tier": rng.choice(["interactive", "batch"], n),
        "status": rng.choice(["served", "served", "served", "throttled"], n),
    })
    if ids:
        df.insert(0, "request_id", [f"r{k}" for k in range(n)])
        df.loc[n // 2, "request_id"] = "r7"
    for k in swaps:  # row k arrives before the row above it
        df.loc[[k, k + 1], "arrival_time"] = df.loc[[k + 1, k], "arrival_time"].to_numpy()
    for k in bad:
        df.loc[k, "input_tokens"] = "-3" if k % 2 else "twelve"
    for k in dup:
        df.loc[k + 1] = df.loc[k]
    df.to_csv(path, index=False)
    return path


@pytest.fixture
def small_partitions(spark):
    spark.conf.set("spark.sql.files.maxPartitionBytes", "32KB")
    yield
    spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_unsorted_rows_across_partition_seams(tmp_path, small_partitions):
    # ~80 bytes a row: 32 KB partitions cut the file every ~400 rows; swap rows everywhere,
    # several of them across a cut
    path = _canonical_csv(tmp_path / "unsorted.csv", 6000, seed=1,
                          swaps=list(range(37, 6000, 211)) + list(range(390, 6000, 401)))
    msg = _error(path, "duckdb")
    assert "not sorted" in msg and _error(path, "spark") == msg
    a, _ = assert_same(path, sort=True)
    assert a.report[0]["reason"] == "row earlier than the row above it"


def test_invalid_rows_duplicates_and_repeated_ids(tmp_path, small_partitions):
    path = _canonical_csv(tmp_path / "bad.csv", 5000, seed=2, bad=(10, 11, 2500, 4999),
                          dup=(100, 3000), ids=True)
    msg = _error(path, "duckdb")
    assert "invalid rows" in msg and "request id" in msg
    assert _error(path, "spark") == msg
    a, _ = assert_same(path, drop_invalid=True)
    assert {r["reason"] for r in a.report} >= {"negative token count", "unparseable token count",
                                              "repeated request id"}


def test_exact_duplicates_are_kept_and_noted_alike(tmp_path):
    path = _canonical_csv(tmp_path / "dups.csv", 3000, seed=3, dup=(5, 1200, 2990))
    a, _ = assert_same(path)
    assert any("identical to an earlier row" in n for n in a.notes)


def test_a_glob_of_files_in_name_order(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    whole = _canonical_csv(tmp_path / "all.csv", 4000, seed=4)
    df = pd.read_csv(whole, dtype=str)
    df.iloc[2000:].to_csv(d / "part-a.csv", index=False)  # later rows in the first file
    df.iloc[:2000].to_csv(d / "part-b.csv", index=False)
    pattern = str(d / "*.csv")
    msg = _error(pattern, "duckdb")
    assert "not sorted" in msg and _error(pattern, "spark") == msg
    a, _ = assert_same(pattern, sort=True)
    assert a.rows == 4000


def test_numeric_epoch_times_and_a_strptime_format(tmp_path):
    n = 2000
    t = 1_767_600_000 + np.cumsum(np.full(n, 1.5))
    pd.DataFrame({"arrival_time": t, "input_tokens": 10, "output_tokens": 20}).to_csv(
        tmp_path / "epoch.csv", index=False)
    a, _ = assert_same(tmp_path / "epoch.csv", hourly_by=((),))
    assert any("epoch seconds" in note for note in a.notes)
    from capbook.logs.requestlog import Mapping

    ts = pd.to_datetime(t, unit="s").strftime("%d/%m/%Y %H:%M:%S")
    pd.DataFrame({"ts": ts, "p": 10, "c": 20}).to_csv(tmp_path / "fmt.csv", index=False)
    m = Mapping(arrival_time="ts", input_tokens="p", output_tokens="c", time_format="%d/%m/%Y %H:%M:%S")
    assert_same(tmp_path / "fmt.csv", hourly_by=((),), mapping=m)


def test_a_url_is_read_by_spark_alone(tmp_path):
    """A URL (s3a://, hdfs://, here file://) goes to Spark's reader without DuckDB's look."""
    path = _canonical_csv(tmp_path / "u.csv", 3000, seed=8, swaps=(40,))
    url = path.as_uri()
    a = _read(path, "duckdb", sort=True)
    b = _read(url, "spark", sort=True)
    assert (a.rows, a.report, a.first_us) == (b.rows, b.report, b.first_us)
    pd.testing.assert_frame_equal(a.hourly(), b.hourly(), check_dtype=False)
    with pytest.raises(ValueError, match="no such file"):
        _read((tmp_path / "missing.csv").as_uri(), "spark")
    (tmp_path / "header.csv").write_text("arrival_time,input_tokens,output_tokens\n")
    with pytest.raises(ValueError, match="no rows"):
        _read((tmp_path / "header.csv").as_uri(), "spark")


def test_the_session_logs_errors_only(spark):
    opts = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
    conf = opts.split("log4j2.configurationFile=file:")[1]
    assert "rootLogger.level = error" in Path(conf).read_text()
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.ansi.doubleQuotedIdentifiers") == "true"


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------
def test_cli_trace_engine_spark_prints_duckdbs_summary(spark, shared_dir, tmp_path, capsys):
    path = str(shared_dir / "traces" / "burstgpt" / "burstgpt_slice.csv")
    out = {}
    for engine in ("duckdb", "spark"):
        hourly = tmp_path / f"{engine}.csv"
        args = ["trace", path, "--json", "--hourly", str(hourly), "--engine", engine]
        if engine == "spark":
            args += ["--spark-master", MASTER]
        assert cli.main(args) == 0
        out[engine] = (json.loads(capsys.readouterr().out), hourly.read_text())
    assert out["spark"][1] == out["duckdb"][1]  # the history `capbook plan --history` reads
    js, jd = out["spark"][0], out["duckdb"][0]
    assert js["arrivals"]["ca2"] == pytest.approx(jd["arrivals"]["ca2"], rel=1e-9)
    js["arrivals"], jd["arrivals"] = None, None
    assert js == jd


def test_cli_spark_master_without_engine_names_the_flag(tmp_path, capsys):
    path = _canonical_csv(tmp_path / "x.csv", 50, seed=5)
    assert cli.main(["trace", str(path), "--spark-master", "local[2]"]) == 2
    err = capsys.readouterr().err
    assert "--spark-master applies to --engine spark" in err


def test_cli_without_spark_says_what_to_install(tmp_path, capsys, monkeypatch):
    import capbook.logs.engines

    monkeypatch.setattr(capbook.logs.engines, "spark_unavailable",
                        lambda: "the Spark engine needs a Java runtime (17 or newer)")
    path = _canonical_csv(tmp_path / "x.csv", 50, seed=6)
    assert cli.main(["trace", str(path), "--engine", "spark"]) == 2
    err = capsys.readouterr().err
    assert "--engine spark: the Spark engine needs a Java runtime" in err
    assert "Traceback" not in err


def test_duckdb_settings_are_refused_under_spark(tmp_path):
    path = _canonical_csv(tmp_path / "x.csv", 50, seed=7)
    with pytest.raises(ValueError, match="threads= and memory_limit= are DuckDB settings"):
        read_requests(path, engine="spark", threads=2)
    with pytest.raises(ValueError, match="spark_master= applies to engine='spark'"):
        read_requests(path, spark_master="local[2]")
    with pytest.raises(ValueError, match="engine"):
        read_requests(path, engine="polars")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("wait_s", [0.0, 8.0], ids=["while-starting", "while-reading"])
def test_ctrl_c_stops_a_spark_read_at_once_without_tracebacks(spark, big_log, wait_s):
    """pyspark's own SIGINT handler made Ctrl-C print pages of py4j tracebacks and end in
    "Spark could not read the file" (exit 2) or an internal error; capbook starts the session
    where pyspark installs no handler, so Ctrl-C stays Python's, while the session starts or
    while a query runs."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "capbook.app.cli", "trace", "--engine", "spark",
                             "--spark-master", MASTER, str(big_log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None and not any("log level" in ln for ln in lines):
        time.sleep(0.2)
    jvm = [p for p in _children(proc.pid) if b"java" in (Path("/proc") / str(p) / "cmdline").read_bytes()]
    assert jvm, "the Spark JVM never started"
    time.sleep(wait_s)  # 8 s: the session is up and reading two million rows (a minute's work)
    assert proc.poll() is None, "the read ended before the interrupt: the test needs a bigger log"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    reader.join(timeout=10)
    err = "".join(lines)
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 130, err
    assert "capbook trace: interrupted" in err
    assert "Traceback" not in err and "could not read" not in err, err
    for _ in range(40):
        if not any(_alive(p) for p in jvm):
            break
        time.sleep(0.5)
    assert not any(_alive(p) for p in jvm), "the JVM outlived capbook"


class _DeadSocket:
    """A socket whose peer (the JVM) has gone: every send fails as it did in CI."""

    def sendall(self, data):
        raise BrokenPipeError(32, "Broken pipe")

    def close(self):
        pass


def _py4j_clean_up(interrupted: bool):
    """py4j's own clean-up of a connection (``ClientServerConnection.shutdown_socket``) on a dead
    socket: inside ``except KeyboardInterrupt`` as ``GatewayClient.send_command`` calls it, or
    outside any interrupt."""
    import io

    clientserver = pytest.importorskip("py4j.clientserver")

    class Connection(clientserver.ClientServerConnection):
        def __init__(self):  # no gateway: only what shutdown_socket reads
            self.is_connected, self.stream, self.socket = True, io.BytesIO(), _DeadSocket()

        def close(self, reset=False):
            pass

    conn = Connection()
    if not interrupted:
        conn.shutdown_socket(1, 2)
        return
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        conn.shutdown_socket(1, 2)


def _py4j_interrupted_call():
    """py4j's ``GatewayClient.send_command`` interrupted by Ctrl-C: it logs the interrupt with
    ``logging.exception`` on the root logger, then re-raises it."""
    java_gateway = pytest.importorskip("py4j.java_gateway")

    class Interrupted:
        socket = None

        def send_command(self, command):
            raise KeyboardInterrupt

    class Client(java_gateway.GatewayClient):
        def __init__(self):  # no gateway: only what send_command reads
            pass

        def _get_connection(self):
            return Interrupted()

    with pytest.raises(KeyboardInterrupt):
        Client().send_command("c\n")


def test_py4j_reports_after_ctrl_c_are_dropped_and_others_kept(caplog, monkeypatch):
    """The flaky case of the test above (seen once in CI): after Ctrl-C, py4j closes the
    connection, the JVM has already gone, and py4j logs "Exception occurred while shutting down
    connection" with a BrokenPipeError chained to the KeyboardInterrupt, on its own logger
    (``py4j.clientserver``), which a filter on the root logger never sees (a logger's filters
    see only its own records). capbook filters the root logger and every py4j logger; the same
    error outside an interrupt is still logged."""
    import logging

    from capbook.logs import engines

    pytest.importorskip("py4j.clientserver")
    for name in ("", "py4j", "py4j.clientserver", "py4j.java_gateway"):  # as before any session
        log = logging.getLogger(name)
        monkeypatch.setattr(log, "filters",
                            [f for f in log.filters if not isinstance(f, engines._Py4JInterruptFilter)])
    caplog.set_level(logging.INFO)

    def reported():
        names = sorted(r.name for r in caplog.records if r.exc_info)
        caplog.clear()
        return names

    _py4j_interrupted_call()
    _py4j_clean_up(interrupted=True)
    assert reported() == ["py4j.clientserver", "root"]  # py4j does log both, with tracebacks
    engines._quiet_py4j_interrupts()
    _py4j_interrupted_call()
    _py4j_clean_up(interrupted=True)
    assert reported() == []
    _py4j_clean_up(interrupted=False)  # a broken pipe with no Ctrl-C behind it is reported
    try:  # and so is a record of someone else's code during an interrupt
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        logging.getLogger("myapp").error("stopping", exc_info=True)
    assert reported() == ["myapp", "py4j.clientserver"]


def test_a_spark_error_raised_by_ctrl_c_is_the_interrupt_not_a_bad_file():
    """Every Spark failure of a read becomes a sentence about the file (``_spark_error``), but
    one raised while py4j cleaned up after Ctrl-C is the interrupt again: never "Spark could
    not read the file" (exit 2) for a file that is fine."""
    from capbook.logs.requestlog import _spark_error

    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        try:
            raise OSError(9, "Bad file descriptor")
        except OSError as exc:
            during = exc
    with pytest.raises(KeyboardInterrupt) as info:
        _spark_error("log.csv", during)
    assert info.value.__cause__ is during
    assert _spark_error("log.csv", OSError(9, "Bad file descriptor")) == (
        "log.csv: Spark could not read the file: [Errno 9] Bad file descriptor")


@pytest.mark.parametrize("error", [BrokenPipeError, OSError])
def test_an_error_raised_while_stopping_for_ctrl_c_is_an_interruption(capsys, monkeypatch, error):
    """A library's clean-up that fails during Ctrl-C (py4j's ``getsockname`` on a closed socket)
    raises a new exception chained to the interrupt: capbook reports the interrupt (exit 130),
    not an internal error (1) or a closed output pipe (0)."""
    def command(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise error(9, "Bad file descriptor")

    args = cli.build_parser().parse_args(["trace", "x.csv"])
    monkeypatch.setattr(args, "func", command)
    assert cli._run_command(args, []) == 130
    assert capsys.readouterr().err == "capbook trace: interrupted\n"

    def unrelated(args):
        raise error(9, "Bad file descriptor")

    monkeypatch.setattr(args, "func", unrelated)
    assert cli._run_command(args, []) == (0 if error is BrokenPipeError else 1)


# --------------------------------------------------------------------------------------------
# hostile logs (tests/test_hostile_logs.py): the same outcome on both engines
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1000000000000", str(2**63 + 5), "1e30", "1e12", "-1e30",
                                   str(10_000_001)])
def test_impossible_token_counts_are_refused_alike(spark, tmp_path, value):
    """Above MAX_TOKENS, or beyond 64 bits: the same invalid row on both engines (never a NULL,
    an overflow or a Java stack), and the same drop with drop_invalid=True."""
    path = _canonical_csv(tmp_path / "big.csv", 3000, seed=11)
    df = pd.read_csv(path, dtype=str)
    df.loc[1500, "output_tokens"] = value
    df.to_csv(path, index=False)
    msg = _error(path, "duckdb")
    assert "column 'output_tokens'" in msg and "row 1501" in msg and "java" not in msg.lower()
    assert _error(path, "spark") == msg
    a, _ = assert_same(path, drop_invalid=True)
    assert a.rows == 2999


def test_a_name_with_glob_characters_is_that_file_on_both_engines(spark, tmp_path):
    whole = _canonical_csv(tmp_path / "log1.csv", 3000, seed=12)
    pd.read_csv(whole, dtype=str).iloc[:1000].to_csv(tmp_path / "log[1].csv", index=False)
    pd.read_csv(whole, dtype=str).iloc[:500].to_csv(tmp_path / "log{1}.csv", index=False)
    a, _ = assert_same(tmp_path / "log[1].csv")
    assert a.rows == 1000
    a, _ = assert_same(tmp_path / "log{1}.csv")
    assert a.rows == 500


def test_end_before_arrival_and_mixed_offsets_alike(spark, tmp_path):
    path = _canonical_csv(tmp_path / "e.csv", 3000, seed=13)
    df = pd.read_csv(path, dtype=str)
    t = pd.to_datetime(df["arrival_time"], utc=True)
    df["end_time"] = (t + pd.Timedelta(seconds=3)).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    df.loc[700, "end_time"] = (t[700] - pd.Timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    df.loc[100, "arrival_time"] = t[100].strftime("%Y-%m-%d %H:%M:%S.%f")  # no offset: UTC
    df.loc[200, "arrival_time"] = (t[200] + pd.Timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%f+02:00")
    df.to_csv(path, index=False)
    msg = _error(path, "duckdb")
    assert "column 'end_time'" in msg and "row 701" in msg and _error(path, "spark") == msg
    a, b = assert_same(path, drop_invalid=True)
    assert a.rows == 2999
    assert any("without one (1 rows, first: data row 101)" in n for n in a.notes), a.notes
    sa, sb = a.service_times(), b.service_times()
    assert sa["requests"] == sb["requests"] and sa["mean_s"] == pytest.approx(sb["mean_s"])


def test_encodings_and_compression_alike(spark, tmp_path):
    import gzip

    path = _canonical_csv(tmp_path / "plain.csv", 500, seed=14)
    text = path.read_bytes()
    (tmp_path / "u16.csv").write_bytes(text.decode().encode("utf-16"))
    msg = _error(tmp_path / "u16.csv", "duckdb")
    assert "UTF-16 text" in msg and _error(tmp_path / "u16.csv", "spark") == msg
    (tmp_path / "gz.csv").write_bytes(gzip.compress(text))
    assert _read(tmp_path / "gz.csv", "duckdb").rows == 500  # DuckDB reads it, with a note
    msg = _error(tmp_path / "gz.csv", "spark")  # Spark picks the codec from the name
    assert "gzip-compressed" in msg and "name it gz.csv.gz" in msg
    (tmp_path / "gz.csv.gz").write_bytes(gzip.compress(text))
    assert_same(tmp_path / "gz.csv.gz")


def test_cli_spark_refuses_a_huge_count_without_a_java_stack(spark, tmp_path):
    """In a process of its own, so that the JVM's own output (fd 2, not sys.stderr) is seen:
    before, 2**63+5 ended in a Java overflow stack of 34 lines."""
    import os
    import subprocess
    import sys

    path = _canonical_csv(tmp_path / "c.csv", 2000, seed=15)
    df = pd.read_csv(path, dtype=str)
    df.loc[5, "input_tokens"] = str(2**63 + 5)
    df.to_csv(path, index=False)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([sys.executable, "-m", "capbook.app.cli", "trace", str(path), "--engine", "spark",
                        "--spark-master", MASTER], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 2, r.stderr
    assert "row 6" in r.stderr and "--drop-invalid" in r.stderr, r.stderr
    assert "org.apache" not in r.stderr and "Exception" not in r.stderr, r.stderr
