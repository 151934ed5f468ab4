"""Where a request log is aggregated: DuckDB on this machine, or Apache Spark next to the data.

capbook computes every aggregate of a request log (validation counts, hourly tokens, the
statistics the book needs) from one definition, the portable SQL of :mod:`capbook.logs.sql`.
This module runs that SQL: :class:`DuckDBEngine` (the default: one machine, bounded memory)
or :class:`SparkEngine` (PySpark, the optional extra ``capbook[spark]``, with a Java runtime).

A Spark engine starts a local master (``local[*]``, every core of this machine) unless it is
given another master URL (``spark://host:7077``, ``yarn``, ``k8s://...``); the session is
created once per master and reused.

Examples
--------
>>> spark_unavailable() is None or "Java" in spark_unavailable() or "pyspark" in spark_unavailable()
True
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from typing import Any
from capbook.logs.sql import DUCKDB, SPARK

__all__ = ["ENGINES", "spark_session", "spark_unavailable"]

#: The engines :func:`capbook.logs.requestlog.read_requests` accepts (``engine=``).
ENGINES = ("duckdb", "spark")

_SESSIONS: dict[str, Any] = {}
_SESSION_LOCK = threading.Lock()


def _java() -> str | None:
    """The java executable Spark will start (``JAVA_HOME`` first, then ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def spark_unavailable() -> str | None:
    """Why the Spark engine cannot run here, or None when it can.

    Returns
    -------
    str or None
        A sentence naming what is missing (the ``pyspark`` package, a Java runtime, or a Java
        older than 17) and how to install it; None when both are there.
    """
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return ("the Spark engine needs the pyspark package: pip install 'capbook[spark]' "
                "(make test installs it)")
    java = _java()
    if java is None:
        return ("the Spark engine needs a Java runtime (17 or newer) and none was found on PATH "
                "or in JAVA_HOME: install one, e.g. apt-get install default-jre-headless "
                "(make test does this where it runs as root)")
    major = _java_major(java)
    if major is not None and major < 17:
        return (f"the Spark engine needs Java 17 or newer; {java} is Java {major}: install a newer "
                f"runtime (apt-get install default-jre-headless) or point JAVA_HOME at one")
    return None


_LOG4J2 = """# capbook's Spark logging: errors only (capbook reports what went wrong itself)
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration file that keeps Spark's JVM to errors (written once, in the
    temporary directory)."""
    import tempfile

    path = os.path.join(tempfile.gettempdir(), "capbook-spark-log4j2.properties")
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == _LOG4J2:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(_LOG4J2)
    os.replace(tmp, path)
    return path


def raised_by_an_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a ``KeyboardInterrupt`` or was raised while one was handled (a
    ``KeyboardInterrupt`` in its chain of causes and contexts)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class _Py4JInterruptFilter:
    """Drops py4j's reports of a call interrupted by Ctrl-C (see :func:`_start_session`).

    py4j logs the interrupted call itself through the root logger, then, while it closes the
    connection in its ``except KeyboardInterrupt`` block, any error of that clean-up (a
    ``BrokenPipeError`` when the JVM has already gone) through ``py4j.clientserver``: both carry
    the interrupt in their exception chain. Other py4j records pass.
    """

    def filter(self, record) -> bool:
        if not (record.name.startswith("py4j") or "py4j" in (record.pathname or "")):
            return True
        return not (record.exc_info and raised_by_an_interrupt(record.exc_info[1]))


def _start_session(builder):
    """``builder.getOrCreate()`` in a thread of its own, so that Ctrl-C stays Python's.

    Started in the main thread, a SparkContext replaces the SIGINT handler with one that
    cancels the running jobs over the py4j connection; when the main thread is itself waiting on
    that connection the handler makes a reentrant call on the socket, py4j logs pages of
    tracebacks, and the interrupt becomes a failed read ("Spark could not read the file", exit
    2) or an internal error. Started in another thread it installs nothing, and Ctrl-C raises
    ``KeyboardInterrupt`` in the main thread, whether the session is still starting (the wait
    below is interruptible) or a query runs; ``capbook`` then exits 130 and the JVM (which
    pyspark starts ignoring SIGINT) ends with its parent's gateway.
    """
    _quiet_py4j_interrupts()
    if threading.current_thread() is not threading.main_thread():
        return builder.getOrCreate()
    box: dict[str, Any] = {}

    def start():
        try:
            box["session"] = builder.getOrCreate()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["error"] = exc

    t = threading.Thread(target=start, name="capbook-spark-start", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.25)
    if "error" in box:
        raise box["error"]
    return box["session"]


def _quiet_py4j_interrupts() -> None:
    """py4j reports a call interrupted by Ctrl-C with a traceback, before re-raising the
    interrupt; the interrupt itself is what the user needs to see.

    A logger's filters see only the records logged on that logger (not those propagated from its
    children), so the filter goes on the root logger (py4j's ``logging.exception``) and on every
    py4j logger.
    """
    import logging

    names = {"", "py4j", "py4j.clientserver", "py4j.java_gateway"}
    names.update(n for n in list(logging.root.manager.loggerDict) if n.startswith("py4j."))
    for name in sorted(names):
        log = logging.getLogger(name)
        if not any(isinstance(f, _Py4JInterruptFilter) for f in log.filters):
            log.addFilter(_Py4JInterruptFilter())


def spark_session(master: str | None = None):
    """The SparkSession capbook runs its SQL on (created once per master, then reused).

    Parameters
    ----------
    master : str, optional
        A Spark master URL. Default ``local[*]``: Spark in this process's JVM on every core.
        On a cluster pass its master (``spark://host:7077``, ``yarn``, ``k8s://https://...``).

    Returns
    -------
    pyspark.sql.SparkSession
        With the session time zone UTC (capbook's times are UTC) and, for a local master, the
        driver bound to the loopback address and the web UI off.

    Raises
    ------
    RuntimeError
        When pyspark or Java is missing (the message says what to install).
    """
    master = master or "local[*]"
    with _SESSION_LOCK:
        s = _SESSIONS.get(master)
        if s is not None and s.sparkContext._jsc is not None:
            return s
        why = spark_unavailable()  # checked before a JVM starts, not on every reuse
        if why is not None:
            raise RuntimeError(why)
        from pyspark.sql import SparkSession

        b = (SparkSession.builder.master(master).appName("capbook")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             # capbook's SQL (capbook.logs.sql) is written for ANSI SQL with "quoted" names
             .config("spark.sql.ansi.enabled", "true")
             .config("spark.sql.ansi.doubleQuotedIdentifiers", "true")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
        if master.startswith("local"):
            # the JVM binds to loopback (and does not warn that the host name resolves to it)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            b = (b.config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2)))))
        if "SPARK_CONF_DIR" not in os.environ:  # a user's own Spark configuration wins
            b = b.config("spark.driver.extraJavaOptions",
                         f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}")
        s = _start_session(b)
        s.sparkContext.setLogLevel("ERROR")
        try:  # capbook turns a failed query into a sentence; pyspark would also log it whole
            import logging

            from pyspark.logger import PySparkLogger

            PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        except ImportError:  # pragma: no cover - pyspark before 4.0
            pass
        _SESSIONS[master] = s
        return s


# --------------------------------------------------------------------------------------------
# the engines: run capbook's SQL, return small results
# --------------------------------------------------------------------------------------------
class DuckDBEngine:
    """capbook's SQL on one DuckDB connection (one per request log).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    """

    name = "duckdb"

    def __init__(self, con):
        self.con = con
        self.dialect = DUCKDB

    def table(self, name: str) -> str:
        """The name a table or view of this log has in the engine (DuckDB: as given)."""
        return name

    def one(self, sql: str) -> tuple | None:
        """The first row of a query."""
        return self.con.execute(sql).fetchone()

    def all(self, sql: str) -> list[tuple]:
        """Every row of a query."""
        return self.con.execute(sql).fetchall()

    def df(self, sql: str):
        """A query's result as a pandas DataFrame (through Arrow)."""
        rel = self.con.execute(sql)
        fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
        return fetch().to_pandas()

    def numpy(self, sql: str) -> dict:
        """A query's result as a dict of numpy arrays."""
        return self.con.execute(sql).fetchnumpy()

    def view(self, name: str, sql: str) -> None:
        """Name a query (computed when read)."""
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")


class SparkEngine:
    """capbook's SQL on a SparkSession (shared by the logs read on the same master).

    The tables and views of one log get a suffix of their own (``req`` of this log is
    ``req_<n>``); :meth:`df` and :meth:`one` point the plain names at this log's before they
    run a query, so the statistics' SQL reads ``req`` on either engine.

    Parameters
    ----------
    master : str, optional
        As :func:`spark_session`.
    """

    name = "spark"
    _counter = 0
    _query_lock = threading.Lock()

    def __init__(self, master: str | None = None):
        self.spark = spark_session(master)
        self.dialect = SPARK
        with _SESSION_LOCK:
            SparkEngine._counter += 1
            self.suffix = f"_{SparkEngine._counter}"
        self._names: set[str] = set()
        self._cached: list = []

    def table(self, name: str) -> str:
        return name + self.suffix

    _aliased_for: tuple | None = None  # (engine suffix, names) the plain names point at now

    def _aliased(self, sql: str):
        """Run ``sql`` with the plain names of this log's views (``req``, ``pass1``, ...)."""
        with SparkEngine._query_lock:
            key = (self.suffix, frozenset(self._names))
            if SparkEngine._aliased_for != key:
                for n in self._names:
                    self.spark.sql(f"CREATE OR REPLACE TEMP VIEW {n} AS SELECT * FROM {n}{self.suffix}")
                SparkEngine._aliased_for = key
            return self.spark.sql(sql)

    def one(self, sql: str) -> tuple | None:
        rows = self._aliased(sql).limit(1).collect()
        return tuple(rows[0]) if rows else None

    def all(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self._aliased(sql).collect()]

    def df(self, sql: str):
        import warnings

        sdf = self._aliased(sql)
        with warnings.catch_warnings():  # pyspark's own use of pandas' deprecated copy=
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message="The copy keyword is deprecated")
            return sdf.toPandas()

    def numpy(self, sql: str) -> dict:
        d = self.df(sql)
        return {c: d[c].to_numpy() for c in d.columns}

    def materialize(self, name: str, sql: str) -> None:
        sdf = self._aliased(sql)
        sdf = sdf.persist()
        sdf.count()  # compute it now, once
        self._cached.append(sdf)
        sdf.createOrReplaceTempView(name + self.suffix)
        self._names.add(name)
        SparkEngine._aliased_for = None

    def view(self, name: str, sql: str) -> None:
        self._aliased(sql).createOrReplaceTempView(name + self.suffix)
        self._names.add(name)
        SparkEngine._aliased_for = None

    def release(self) -> None:
        """Drop this log's cached tables (its RequestLog calls this when it is collected)."""
        for sdf in self._cached:
            try:
                sdf.unpersist()
            except Exception:  # noqa: BLE001 - a stopped session holds nothing
                pass
        self._cached.clear()
