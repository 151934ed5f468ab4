"""Regenerate the book's modelled sample sweeps in ``data/sweeps/`` (deterministic).

Usage::

    python tools/make_sweeps.py            # write every sample sweep
    python tools/make_sweeps.py --check    # exit 1 if a committed file differs

The sweeps are modelled by :mod:`capbook.engine.servingmodel`, not measured; ``data/README.md``
documents the physics, the calibration and the units of every column.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capbook.engine.servingmodel import SAMPLE_SPECS, sample_sweep_csv  # noqa: E402

OUT = ROOT / "data" / "sweeps"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in SAMPLE_SPECS:
        text = sample_sweep_csv(name)
        path = OUT / f"{name}.csv"
        if args.check:
            same = path.exists() and path.read_text() == text
            print(f"{'ok     ' if same else 'DIFFERS'} {path.relative_to(ROOT)}")
            status |= not same
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
