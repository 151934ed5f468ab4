"""The form of capbook's file-format registries, shared by request logs and sweeps.

:data:`capbook.logs.requestlog.LOG_FORMATS` (request logs) and :data:`capbook.sweeps.importers.SWEEP_FORMATS`
(load-generator output) both map a format's name to a :class:`FileFormat`: what the format is,
how a file is recognised as one, and how it is read. Their ``detect_*`` functions try the
formats in the registry's order and name the first whose ``detect`` accepts the file; a new
format is one entry in the registry.

Examples
--------
>>> f = FileFormat("csv-ish", "comma-separated text", detect=lambda header: "," in header,
...                read=str.split)
>>> f.detect("a,b"), f.read("a b")
(True, ['a', 'b'])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["FileFormat"]


@dataclass(frozen=True)
class FileFormat:
    """One format a capbook reader recognises.

    Attributes
    ----------
    name : str
        The name users pass (``format=`` of :func:`capbook.logs.requestlog.read_requests`, the CLI's
        ``--format``) and the ``detect_*`` functions return.
    description : str
        What the format is, in a few words (where it comes from, its key fields).
    detect : callable
        ``detect(probe) -> bool``: whether a file is of this format, from the registry's
        probe of it (the column names and a first value for request logs; the parsed JSON or
        the CSV header for sweeps).
    read : object
        How a file of this format is read: the column :class:`capbook.logs.requestlog.Mapping` for a
        request log (or a function of the file's column names that builds it, when the names
        vary: ``per-request``), the parser of the load points for a sweep file.
    """

    name: str
    description: str
    detect: Callable[[Any], bool]
    read: Any
