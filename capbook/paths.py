"""Where capbook's sample data lives: the one lookup every loader uses.

The folder is, in order:

1. ``CAPBOOK_DATA``, when set (it must be a folder);
2. the repository's ``data/`` beside the package, when capbook runs from a checkout;
3. the copy installed with the package (``capbook/sample_data`` inside a wheel).

Examples
--------
>>> data_path("sweeps").name
'sweeps'
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_DATA", "data_dir", "data_path"]

#: The environment variable that moves the sample data folder.
ENV_DATA = "CAPBOOK_DATA"

_PACKAGE = Path(__file__).resolve().parent


def data_dir() -> Path:
    """The folder of capbook's sample data (see the module docstring for the order).

    Raises
    ------
    FileNotFoundError
        When ``CAPBOOK_DATA`` names a folder that does not exist, or neither the checkout's
        ``data/`` nor the installed copy is there.
    """
    env = os.environ.get(ENV_DATA)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"{ENV_DATA}={env}: no such folder; set {ENV_DATA} to a folder laid out like capbook's data/")
        return path
    for path in (_PACKAGE.parent / "data", _PACKAGE / "sample_data"):
        if (path / "README.md").is_file():
            return path
    raise FileNotFoundError(
        f"capbook's sample data is missing (looked in {_PACKAGE.parent / 'data'} and "
        f"{_PACKAGE / 'sample_data'}); reinstall capbook or set {ENV_DATA}")


def data_path(*parts: str | os.PathLike) -> Path:
    """A path inside :func:`data_dir`, e.g. ``data_path("sweeps", "llama8b_h100_chat.csv")``.

    The path is not checked: the loader that opens it says what is missing.
    """
    return data_dir().joinpath(*parts)
