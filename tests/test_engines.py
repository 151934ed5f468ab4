"""The Spark engine's session, and the reasons it gives where Spark cannot run."""
from __future__ import annotations

import sys
import types

import pytest

from capbook.logs import engines


def test_the_session_runs_sql_in_utc(spark):
    assert spark.sql("SELECT 1 AS x").collect()[0].x == 1
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


@pytest.fixture
def with_pyspark(monkeypatch):
    """An importable pyspark, installed or not (the checks below are of Java)."""
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))


def test_without_pyspark_it_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark raises ImportError
    assert "capbook[spark]" in engines.spark_unavailable()


def test_without_java_it_says_how_to_install_one(monkeypatch, with_pyspark):
    monkeypatch.setattr(engines, "_java", lambda: None)
    assert "apt-get install default-jre-headless" in engines.spark_unavailable()


def test_an_old_java_is_refused(monkeypatch, with_pyspark):
    monkeypatch.setattr(engines, "_java", lambda: "/opt/jdk11/bin/java")
    monkeypatch.setattr(engines, "_java_major", lambda java: 11)
    why = engines.spark_unavailable()
    assert "17" in why and "Java 11" in why and "/opt/jdk11/bin/java" in why


def test_java_17_is_accepted(monkeypatch, with_pyspark):
    monkeypatch.setattr(engines, "_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(engines, "_java_major", lambda java: 17)
    assert engines.spark_unavailable() is None


@pytest.mark.skipif(sys.platform == "win32", reason="the fake java is a shell script")
@pytest.mark.parametrize(("banner", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_392"', 8),
    ('no version here', None),
])
def test_java_major_reads_java_version(tmp_path, banner, major):
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\necho 'OpenJDK Runtime Environment' >&2\n")
    java.chmod(0o755)
    assert engines._java_major(str(java)) == major


def test_java_major_of_a_missing_executable_is_none(tmp_path):
    assert engines._java_major(str(tmp_path / "no-java")) is None


def test_the_session_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(engines, "spark_unavailable", lambda: "no Java runtime here")
    with pytest.raises(RuntimeError, match="no Java runtime here"):
        engines.spark_session()
