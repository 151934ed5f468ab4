"""Per-request results files, one load point each: LMCache LMBench CSVs (format ``lmbench``) and
any CSV / JSON / JSONL whose columns :mod:`capbook.sweeps.perrequest` recognises
(``per-request``)."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from capbook.formats import FileFormat
from capbook.sweeps import perrequest
from capbook.sweeps.importers._common import _Probe, _ReadOptions, _err, _perrequest_row, _records, _summarise


def _read_table(p: "_Probe", path: Path) -> pd.DataFrame:
    """A per-request file as a table: JSON records or CSV text."""
    if p.json is not None:
        return pd.DataFrame(p.json)
    try:
        return pd.read_csv(io.StringIO(p.text), index_col=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise _err(path, f"not a readable CSV ({exc})".replace("\n", " ")) from None


def _parse_perrequest(p: "_Probe", path: Path, o: "_ReadOptions", fmt: str) -> list:
    """A per-request results file (LMBench, or any with recognised columns) as one level: the rate
    the file name states (else the launch rate), or closed loop at concurrency= when given."""
    df = _read_table(p, path)
    line = 2 if p.json is None else 1
    req = perrequest.requests_from_frame(
        df, path, row_name=(lambda i: f"line {i + line}") if p.json is None else (lambda i: f"record {i + 1}"))
    rate = perrequest.rate_from_name(path.name)
    s = _summarise(req, path, concurrency=o.concurrency, rate_rps=rate)
    row = _perrequest_row(s, fmt, "requested rate (request_rate_target) from the file name"
                          if rate is not None else "")
    row["point"] = path.stem
    # the run series the name states (LMBench's {KEY}_{workload}: another key or workload is
    # another configuration, not more levels of this one)
    row["workload"] = perrequest.series_from_name(path.name)
    return [row]


_LMBENCH_COLUMNS = ("prompt_tokens", "generation_tokens", "ttft", "generation_time", "launch_time",
                    "finish_time")


def _is_perrequest(p: _Probe) -> bool:
    """A table of per-request records whose columns :mod:`capbook.sweeps.perrequest` recognises."""
    if p.json is not None:
        if not _records(p.json):
            return False
        cols = list(dict.fromkeys(k for r in p.json[:50] for k in r))
    else:
        cols = p.header
    return bool(cols) and perrequest.missing_columns_message(perrequest.match_columns(cols), cols, "") is None


#: This family's formats (:data:`capbook.sweeps.importers.SWEEP_FORMATS` orders them for detection).
_FORMATS = (
    FileFormat("lmbench", "LMCache LMBench per-request CSV (prompt_tokens, generation_tokens, ttft, "
               "generation_time, launch_time, finish_time), one file per rate",
               lambda p: set(_LMBENCH_COLUMNS) <= set(p.header),
               lambda p, path, o: _parse_perrequest(p, path, o, "lmbench")),
    FileFormat("per-request", "any per-request results CSV or JSON/JSONL (TTFT, latency or launch and "
               "finish times, prompt and output tokens; column names in capbook.sweeps.perrequest)",
               _is_perrequest,
               lambda p, path, o: _parse_perrequest(p, path, o, "per-request")),
)
