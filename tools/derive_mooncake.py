"""Derive ``data/realdata/mooncake_conversation.parquet`` from Mooncake's FAST'25 conversation trace.

Usage::

    python tools/derive_mooncake.py [FILE]            # write the table
    python tools/derive_mooncake.py [FILE] --check    # exit 1 if the committed table differs

``FILE`` is ``FAST25-release/traces/conversation_trace.jsonl`` of kvcache-ai/Mooncake at commit
``3b5a5941`` (added in ``3cca71da``; git blob ``5a371794``; Apache-2.0); default
``../shared/traces/conversation_trace.jsonl`` beside the repository. The script refuses a file
whose git blob id is not that one, so the table always derives from the same bytes.

Each JSONL line is one request, ``{"timestamp", "input_length", "output_length", "hash_ids"}``
(milliseconds from the start of the trace, tokens, tokens, the remapped hashes of the prompt's
512-token prefix blocks). Every row is kept, in file order, with its values unchanged; only the
names and the container change: ``timestamp`` → ``arrival_time_ms`` (int64), ``input_length`` →
``input_tokens`` (int32), ``output_length`` → ``output_tokens`` (int32), ``hash_ids`` a list of
int32. The Parquet file is zstd-compressed with the hash lists delta-encoded (consecutive new
blocks have consecutive ids), about 0.24 MB for the trace's 3.0 MB of JSON; its schema metadata
carries the attribution. ``--check`` compares the table (values and metadata), not the bytes,
which depend on the pyarrow version. ``data/README.md`` describes the file;
:func:`capbook.app.datasets.load_mooncake_conversation` reads it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "conversation_trace.jsonl"
OUT = ROOT / "data" / "realdata" / "mooncake_conversation.parquet"

#: git blob id of FAST25-release/traces/conversation_trace.jsonl at Mooncake commit 3b5a5941.
SOURCE_BLOB = "5a371794b81d7fc7487ec8a02a2c631bcc7fbdf8"
#: Tokens per hashed prefix block.
BLOCK_TOKENS = 512
#: The derived table's columns, in order.
COLUMNS = ("arrival_time_ms", "input_tokens", "output_tokens", "hash_ids")
#: Schema metadata written with the table (the attribution travels with the file).
METADATA = {
    "source": "kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl",
    "commit": "3b5a594133958449a1feaf1c9e0fc1b553e34a28 (file added in 3cca71da, blob 5a371794)",
    "licence": "Apache-2.0 (Mooncake's LICENSE-APACHE; copied as LICENSE-mooncake)",
    "derived": "every row in file order, values unchanged; renamed timestamp->arrival_time_ms, "
               "input_length->input_tokens, output_length->output_tokens; JSONL to Parquet "
               "(tools/derive_mooncake.py)",
    "block_tokens": str(BLOCK_TOKENS),
}
_KEYS = {"timestamp", "input_length", "output_length", "hash_ids"}


def git_blob_id(data: bytes) -> str:
    """The id git gives a file with these bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _int(v, path: Path, line: int, key: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise SystemExit(f"{path}: line {line}, {key!r}: {v!r} is not an integer >= {minimum}")
    return v


def read_trace(path: Path) -> dict[str, list]:
    """The columns of the JSONL trace, checked line by line."""
    data = path.read_bytes()
    blob = git_blob_id(data)
    if blob != SOURCE_BLOB:
        raise SystemExit(f"{path}: git blob {blob[:8]}, expected {SOURCE_BLOB[:8]} (Mooncake "
                         "FAST25-release/traces/conversation_trace.jsonl at commit 3b5a5941)")
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    last = 0
    for line, text in enumerate(data.decode("utf-8").splitlines(), start=1):
        row = json.loads(text)
        if not isinstance(row, dict) or set(row) != _KEYS:
            raise SystemExit(f"{path}: line {line} is not an object with the keys {sorted(_KEYS)}")
        t = _int(row["timestamp"], path, line, "timestamp", last)
        inp = _int(row["input_length"], path, line, "input_length", 1)
        out = _int(row["output_length"], path, line, "output_length", 1)
        hs = row["hash_ids"]
        if not isinstance(hs, list) or not hs or len(hs) * BLOCK_TOKENS < inp:
            raise SystemExit(f"{path}: line {line}, 'hash_ids': not one hash per {BLOCK_TOKENS}-token "
                             f"block of the {inp}-token prompt")
        hs = [_int(h, path, line, "hash_ids", 0) for h in hs]
        last = t
        for c, v in zip(COLUMNS, (t, inp, out, hs)):
            cols[c].append(v)
    return cols


def to_table(cols: dict[str, list]):
    """The pyarrow table of the derived file, with its schema metadata."""
    import pyarrow as pa

    schema = pa.schema([("arrival_time_ms", pa.int64()), ("input_tokens", pa.int32()),
                        ("output_tokens", pa.int32()), ("hash_ids", pa.list_(pa.int32()))],
                       metadata=METADATA)
    return pa.table([pa.array(cols[c], schema.field(c).type) for c in COLUMNS], schema=schema)


def write(table, out: Path) -> None:
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=19, use_dictionary=False,
                   column_encoding={"arrival_time_ms": "DELTA_BINARY_PACKED", "input_tokens": "PLAIN",
                                    "output_tokens": "PLAIN", "hash_ids.list.element": "DELTA_BINARY_PACKED"})
    tmp.replace(out)


def same(table, out: Path) -> bool:
    """True when the file at ``out`` holds ``table`` (values, types and metadata)."""
    import pyarrow.parquet as pq

    if not out.is_file():
        return False
    old = pq.read_table(out)
    return old.equals(table) and (old.schema.metadata or {}) == table.schema.metadata


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, nargs="?", default=SOURCE,
                    help="the Mooncake conversation_trace.jsonl (default ../shared/traces/conversation_trace.jsonl)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    if not args.file.is_file():
        raise SystemExit(f"{args.file}: no such file; pass Mooncake's FAST25-release/traces/conversation_trace.jsonl")
    table = to_table(read_trace(args.file))
    if args.check:
        ok = same(table, args.out)
        print(f"{'ok' if ok else 'DIFFERS'} {args.out}")
        return 0 if ok else 1
    write(table, args.out)
    print(f"wrote {args.out} ({table.num_rows} requests, {args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
