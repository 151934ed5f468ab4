"""Shared pytest fixtures."""
from __future__ import annotations

import os
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


# Property tests run the same examples on every machine: CI must not be flaky.
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("capbook", derandomize=True, print_blob=True)
_hyp_settings.load_profile("capbook")
