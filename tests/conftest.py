"""Shared pytest fixtures."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _find_shared() -> Path | None:
    env = os.environ.get("CAPBOOK_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT.parent / "shared")
    for c in candidates:
        if c.is_dir() and (c / "traces").is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ``../shared`` folder of real traces and sweeps; skips when it is absent."""
    path = _find_shared()
    if path is None:
        pytest.skip(
            "../shared (real public traces and load-generator outputs) is not beside the "
            "repository; set CAPBOOK_SHARED to its path to run these tests"
        )
    return path


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession (two cores, UTC), stopped at the end of the session.

    Skips, saying why, where pyspark or a Java 17+ runtime is missing (``make test`` installs
    both where it can); under ``CI=true`` it fails instead, so that CI cannot pass without Spark.
    """
    from capbook.logs import engines

    why = engines.spark_unavailable()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    # the Python workers Spark starts are this interpreter (the one with capbook and pyspark)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = engines.spark_session("local[2]")
    yield session
    session.stop()


# Property tests run the same examples on every machine: CI must not be flaky.
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("capbook", derandomize=True, print_blob=True)
_hyp_settings.load_profile("capbook")
