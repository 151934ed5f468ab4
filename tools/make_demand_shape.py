"""Derive ``data/demand/servegen_m_large_10min.csv``, a real day-and-week demand shape, from ServeGen.

Usage::

    python tools/make_demand_shape.py [FOLDER]            # write the file
    python tools/make_demand_shape.py [FOLDER] --check    # exit 1 if the committed file differs

``FOLDER`` holds Alibaba ServeGen's per-client rate descriptors of the language model
"m-large" (alibaba/ServeGen ``data/language/m-large/chunk-<client>-trace.csv``, commit
``f891d118``, Apache-2.0); default ``../shared/traces/servegen/language/m-large`` beside the
repository. Each file has no header and the columns ``window_start_s, rate_req_per_s, iat_cv,
iat_dist, shape, scale``, one row per 600 s window (an inactive window is ``t,0,0,,0,0``).

For every window the script sums ``rate_req_per_s`` over the clients, in the order of their
client number, and counts the clients with a non-zero rate. The output starts with ``#``
comment lines (source, licence, commit, how it was derived), then the header
``window_start_s,rate_req_per_s,active_clients`` and one row per window, the rate rounded to 4
decimals. Only the standard library does the arithmetic, so the file is byte-for-byte
reproducible. ``data/README.md`` describes it; :func:`capbook.app.datasets.load_demand_shape`
reads it.
"""
from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools._outputs import write_or_check  # noqa: E402

SOURCE = ROOT.parent / "shared" / "traces" / "servegen" / "language" / "m-large"
OUT = ROOT / "data" / "demand" / "servegen_m_large_10min.csv"

#: The window length of the ServeGen descriptors, in seconds.
WINDOW_S = 600
#: The header of the derived file.
HEADER = ("window_start_s", "rate_req_per_s", "active_clients")
_CHUNK = re.compile(r"chunk-(\d+)-trace\.csv")


def client_files(folder: Path) -> list[Path]:
    """The ``chunk-<n>-trace.csv`` files of ``folder``, ordered by client number ``n``."""
    files = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _CHUNK.fullmatch(p.name))]
    if not files:
        raise SystemExit(f"{folder}: no chunk-<n>-trace.csv files (the ServeGen m-large folder?)")
    return [p for _, p in sorted(files)]


def read_client(path: Path) -> list[tuple[int, float]]:
    """``(window_start_s, rate_req_per_s)`` of one client file, checked row by row."""
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.reader(f), start=1):
            if len(row) != 6:
                raise SystemExit(f"{path}: row {line} has {len(row)} columns, expected 6 "
                                 "(window_start_s, rate_req_per_s, iat_cv, iat_dist, shape, scale)")
            try:
                start, rate = int(row[0]), float(row[1])
            except ValueError:
                raise SystemExit(f"{path}: row {line}: window_start_s {row[0]!r} or rate_req_per_s "
                                 f"{row[1]!r} is not a number") from None
            if not math.isfinite(rate) or rate < 0:
                raise SystemExit(f"{path}: row {line}: rate_req_per_s {row[1]} is not a finite rate >= 0")
            expected = (line - 1) * WINDOW_S
            if start != expected:
                raise SystemExit(f"{path}: row {line}: window_start_s {start}, expected {expected} "
                                 f"(windows of {WINDOW_S} s from 0)")
            rows.append((start, rate))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return rows


def derive(folder: Path) -> tuple[int, list[tuple[int, float, int]]]:
    """``(clients, rows)``: each row is ``(window_start_s, summed rate, active clients)``."""
    files = client_files(folder)
    starts: list[int] | None = None
    total: list[float] = []
    active: list[int] = []
    for path in files:
        rows = read_client(path)
        if starts is None:
            starts = [s for s, _ in rows]
            total, active = [0.0] * len(rows), [0] * len(rows)
        elif len(rows) != len(starts):
            raise SystemExit(f"{path}: {len(rows)} windows, but {files[0].name} has {len(starts)}")
        for i, (_, rate) in enumerate(rows):
            total[i] += rate
            active[i] += rate > 0
    return len(files), list(zip(starts, total, active))


def to_csv_text(clients: int, rows: list[tuple[int, float, int]]) -> str:
    """The derived file: comment lines, the header, one row per window (``\\n`` line ends)."""
    days = len(rows) * WINDOW_S / 86400
    lines = [
        "# Aggregate request rate of Alibaba Bailian's language model m-large, from ServeGen",
        "# source: alibaba/ServeGen data/language/m-large/chunk-{0..%d}-trace.csv" % (clients - 1),
        "# commit f891d118 (2025-06-09); data from 4d6f0c77 (2025-06-07); licence Apache-2.0",
        f"# derived: sum over {clients} clients of rate_req_per_s per {WINDOW_S} s window; "
        "rates in requests per second",
        f"# {len(rows)} windows = {days:g} days; window_start_s is an offset (day 0 is not a known weekday); "
        "active_clients = clients with a non-zero rate",
        "# made by tools/make_demand_shape.py",
        ",".join(HEADER),
    ]
    lines += [f"{start},{rate:.4f},{n}" for start, rate, n in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, nargs="?", default=SOURCE,
                    help="the ServeGen m-large folder (default ../shared/traces/servegen/language/m-large)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        raise SystemExit(f"{args.folder}: no such folder; pass the ServeGen data/language/m-large folder")
    clients, rows = derive(args.folder)
    return write_or_check(args.out, to_csv_text(clients, rows), check=args.check,
                          summary=f"{len(rows)} windows, {clients} clients")


if __name__ == "__main__":
    raise SystemExit(main())
