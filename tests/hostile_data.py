"""Hostile inputs for ``capbook book``: the sample gateway with names that try to run code.

Shared by ``tests/test_hostile_book.py`` and by hand runs
(``python tests/hostile_data.py DIR`` prints the ``capbook book`` command line).

Every payload tries to run something in one of the places a reader's data reaches: the MyST
parser of the first page (Jinja2 through the ``substitution`` extension, roles, directives),
the HTML of the published pages (elements with event handlers, a ``</script>`` that would
close the inline script holding a chart's data), and Markdown links. The Jinja payloads
``touch`` the file named by the environment variable :data:`MARKER_ENV`, so a test can tell
whether any of them ran.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

#: The environment variable naming the file the Jinja payloads create (``touch $CAPBOOK_PWNED``).
MARKER_ENV = "CAPBOOK_PWNED"

JINJA = '{{ cycler.__init__.__globals__.os.system("touch $CAPBOOK_PWNED") }}'
JINJA_STMT = '{% set x = cycler.__init__.__globals__.os.system("touch $CAPBOOK_PWNED") %}'
SCRIPT = "</script><script>alert(1)</script>"
SVG = "<svg onload=alert(5)>"
IMG = "<img src=x onerror=alert(6)>"
MD_LINK = "[x](javascript:alert(2))"
MD_IMAGE = "![](x onerror=alert(3))"
RST = "```{eval-rst}"
MATH = "$$x$$"

#: The renamed values of the sample gateway: model ``chat``, tier ``batch``, its four tenants.
MODEL = "x" + SCRIPT + JINJA
TIER = "batch`" + SVG + JINJA_STMT + "`"
TENANTS = {
    "mobile": "mobile" + IMG + "{raw}`html` <b>",
    "web": "web`" + MD_LINK + "` " + MD_IMAGE,
    "agents": "agents<!--" + SCRIPT,
    "etl": "etl\u2028" + JINJA,
}

#: Strings that must never appear unescaped in a built page's HTML (outside an escaped JSON string).
PAYLOADS = (SCRIPT, "<script>alert(1)", SVG, IMG, "javascript:alert(2)", "onerror=alert(3)",
            "os.system(")

#: The folders and file names (no "/" in a name: the three levels spell "</script>" across them).
_DIR = "a` " + JINJA + " `b " + IMG + " {% raw %} <"
_SUB = "script><script>alert(1)<"
_LEAF = "script> " + MD_IMAGE + " " + MD_LINK + " " + SVG


def make_hostile_inputs(root: Path) -> dict:
    """Write the hostile log, sweep, history and prices under ``root``; return their paths.

    The log is the sample gateway's three busiest hours (``data/gateway/peak_hours.parquet``)
    with its model, tier ``batch`` and tenants renamed to the payloads above; the history is the
    gateway's hourly sums renamed alike; the sweep and the prices are the sample ones, under
    hostile names.
    """
    import pandas as pd

    from capbook.paths import data_path

    root = Path(root)
    folder = root / _DIR / _SUB
    folder.mkdir(parents=True)

    def rename(df):
        df = df.copy()
        df["model"] = df["model"].astype(str).replace({"chat": MODEL})
        df["tier"] = df["tier"].astype(str).replace({"batch": TIER})
        df["tenant"] = df["tenant"].astype(str).replace(TENANTS)
        return df

    log = folder / (_LEAF + ".parquet")
    rename(pd.read_parquet(data_path("gateway", "peak_hours.parquet"))).to_parquet(log, index=False)
    history = folder / ("script> history " + JINJA + ".csv")
    rename(pd.read_csv(data_path("gateway", "hourly.csv"))).to_csv(history, index=False)
    sweep = folder / ("script> sweep " + SVG + " `" + JINJA_STMT + "`.csv")
    shutil.copy(data_path("sweeps", "illustrative_chat.csv"), sweep)
    prices = folder / ("script> prices " + IMG + " " + MATH + ".csv")
    shutil.copy(data_path("prices", "illustrative.csv"), prices)
    for p in (log, history, sweep, prices):
        assert SCRIPT in str(p), p
    return {"requests": log, "history": history, "sweep": sweep, "prices": prices}


def book_argv(paths: dict, out: Path) -> list[str]:
    """``capbook book`` arguments on the hostile inputs (with a reading option shown in the note)."""
    return ["book", "--requests", str(paths["requests"]), "--sweep", str(paths["sweep"]),
            "--history", str(paths["history"]), "--prices", str(paths["prices"]),
            "--sort", "--out", str(out)]


if __name__ == "__main__":  # pragma: no cover - a hand run
    paths = make_hostile_inputs(Path(sys.argv[1]))
    import shlex

    print(shlex.join(book_argv(paths, Path(sys.argv[1]) / "out")))
