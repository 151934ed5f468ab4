"""capbook's own sweep CSV: a file already in the sweep-table layout (format ``capbook``)."""
from __future__ import annotations

import csv
import io
import math

import pandas as pd

from capbook.formats import FileFormat
from capbook.sweeps.importers._common import _err, _row
from capbook.sweeps.sweep import CONFIG_COLUMNS, METRIC_COLUMNS


def _parse_capbook(text, path):
    recs = list(csv.reader(io.StringIO(text)))
    width = len(recs[0])
    for line, rec in enumerate(recs[1:], start=2):
        extra = [c for c in rec[width:] if c.strip()]
        if extra:  # pandas would take the first column for an index and shift every column by one
            raise _err(path, f"line {line} has {len(rec)} fields but the header names {width} columns "
                             f"(extra value {extra[0]!r} in an unnamed column): every value needs a "
                             "column name in the header line")
    try:
        df = pd.read_csv(io.StringIO(text), index_col=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise _err(path, f"not a readable CSV ({exc})".replace("\n", " ")) from None
    df = df.drop(columns=[c for c in df.columns if str(c).startswith("Unnamed: ") and df[c].isna().all()])
    rows = []
    for line, (_, r) in enumerate(df.iterrows(), start=2):
        row = _row(**{k: (None if (isinstance(v, float) and math.isnan(v) and k in CONFIG_COLUMNS) else v)
                      for k, v in r.items()})
        row["format"] = "capbook"
        if not isinstance(row["load_kind"], str):
            row["load_kind"] = "concurrency"
        if not isinstance(row["concurrency_source"], str):
            row["concurrency_source"] = "set"
        row["source_line"] = line
        rows.append(row)
    return rows


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("capbook", "a CSV already in the sweep-table layout",
               lambda p: set(METRIC_COLUMNS) <= set(p.header),
               lambda p, path, o: _parse_capbook(p.text, path)),
)
