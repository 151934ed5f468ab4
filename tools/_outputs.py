"""What the derivation scripts of ``tools/`` share: write a derived file, or check it is current."""
from __future__ import annotations

from pathlib import Path


def write_or_check(out: Path, text: str, *, check: bool, summary: str) -> int:
    """Write ``text`` to ``out`` (UTF-8), or with ``check`` compare it with the file there.

    Returns the exit status: 0 when written or equal, 1 when ``check`` finds the file differs
    or missing. ``summary`` (e.g. ``"42 rows"``) is printed after the path when writing.
    """
    if check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{'ok' if same else 'DIFFERS'} {out}")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({summary})")
    return 0
