"""Editorial checks of the book's chapters: their length, their stated time, their typed numbers.

A chapter says how long it takes ("Time to learn: N minutes"). :func:`chapter_length` computes
that time from what the chapter holds, so the stated time cannot drift from the material:

- the prose a reader reads — the words of the markdown cells, without the MyST markup
  (roles, directives' options, labels, HTML comments), read at :data:`WORDS_PER_MINUTE`;
- the code a reader reads and runs — the non-blank lines of the code cells the site shows
  (cells tagged ``remove-cell`` are hidden bookkeeping and do not count), at
  :data:`CODE_LINES_PER_MINUTE`.

The sum is rounded up to the next 5 minutes. ``tests/test_chapters.py`` fails when a stated time
differs from it.

:func:`typed_numbers` lists the numbers typed in a chapter's prose (not glued, not in math or
code). A number the page computes must be glued, never typed: ``tests/browser`` compares the
typed numbers of each built page with the numbers the page computed (its glued values and cell
outputs, :func:`computed_numbers`) and fails on any typed one among them.
"""
from __future__ import annotations

import io
import json
import math
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

WORDS_PER_MINUTE = 150
"""Reading speed of technical prose with formulas, words per minute."""

CODE_LINES_PER_MINUTE = 10
"""Lines of code a reader reads, runs and looks at the output of, per minute."""

_TIME_RE = re.compile(r"Time to learn\**:?\**\s*(\d+)\s*minutes")


@dataclass(frozen=True)
class ChapterLength:
    """What a chapter holds and the time it takes.

    Attributes
    ----------
    words : int
        Words of prose (markdown cells without MyST markup).
    code_lines : int
        Non-blank lines of the code cells the site shows.
    minutes : int
        ``words / WORDS_PER_MINUTE + code_lines / CODE_LINES_PER_MINUTE``, rounded up to 5.
    stated_minutes : int or None
        The "Time to learn: N minutes" the chapter states, if it states one.
    """

    words: int
    code_lines: int
    minutes: int
    stated_minutes: int | None


def _cells(path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _hidden(cell) -> bool:
    return "remove-cell" in cell.get("metadata", {}).get("tags", [])


_MARKUP = [
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"^\s*:[\w-]+:.*$", re.M), " "),          # directive options (:label: ...)
    (re.compile(r"^\s*(```+|~~~+|:::+)\s*\{?[\w-]*\}?.*$", re.M), " "),  # fences, directives
    (re.compile(r"\{[\w:-]+\}`([^`<]*)(<[^`]*>)?`"), r"\1"),  # roles: keep the visible text
    (re.compile(r"\(([\w-]+)\)=\s*$", re.M), " "),         # targets
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),         # links: keep the text
    (re.compile(r"[#*_|>`$\\]"), " "),
]


def prose_words(text: str) -> int:
    """Words a reader reads in a markdown cell's source (MyST markup removed).

    Examples
    --------
    >>> prose_words("See {term}`TTFT` and [the docs](x.html).\\n:label: ex_1")
    5
    """
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return len([w for w in text.split() if re.search(r"\w", w)])


def chapter_length(path) -> ChapterLength:
    """The words, visible code lines and computed time to learn of one chapter.

    Parameters
    ----------
    path : str or pathlib.Path
        A chapter notebook (``.ipynb``).

    Returns
    -------
    ChapterLength
        ``minutes`` is the time the chapter should state, in minutes.
    """
    words = lines = 0
    stated = None
    for cell in _cells(path):
        src = _source(cell)
        if cell["cell_type"] == "markdown":
            words += prose_words(src)
            m = _TIME_RE.search(src)
            if m and stated is None:
                stated = int(m.group(1))
        elif cell["cell_type"] == "code" and not _hidden(cell):
            lines += sum(1 for line in src.splitlines() if line.strip())
    raw = words / WORDS_PER_MINUTE + lines / CODE_LINES_PER_MINUTE
    return ChapterLength(words, lines, 5 * math.ceil(raw / 5), stated)


# --------------------------------------------------------------------------- typed numbers

# A number as prose writes it: 1,234 or 12.5 or 0.092, optionally with a sign; not part of a word
# (P90, H100, Llama-3.1, x1) and not a version or a date.
_NUMBER_RE = re.compile(r"(?<![\w.,/-])[−-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,.]\d)|"
                        r"(?<![\w.,/-])[−-]?\d+(?:\.\d+)?(?![\w]|[.,]\d)")
_STRIP = [
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"^\s*(```+|~~~+).*?^\s*\1\s*$", re.S | re.M), " "),  # fenced code
    (re.compile(r"^\s*:[\w-]+:.*$", re.M), " "),
    (re.compile(r"^\s*:::+.*$", re.M), " "),
    (re.compile(r"\$\$.*?\$\$", re.S), " "),
    (re.compile(r"\$[^$\n]+\$"), " "),
    (re.compile(r"\{[\w:-]+\}`[^`]*`"), " "),  # roles: glue, term, doc, cite, ref
    (re.compile(r"`[^`]*`"), " "),
    (re.compile(r"\]\([^)]*\)"), "]"),
    (re.compile(r"\(([\w-]+)\)="), " "),
]


#: HTTP status codes the book names: identifiers, not quantities.
NAMES = frozenset({"200", "404", "429", "500", "503"})


def _significant(token: str) -> bool:
    """A number worth checking: has a decimal point or thousands separator, or >= 3 digits
    that are not a year or an HTTP status code."""
    t = token.lstrip("−-")
    if t in NAMES:
        return False
    if "." in t or "," in t:
        return True
    return len(t) >= 3 and not (len(t) == 4 and t[:2] in ("19", "20"))


def _prose_numbers(text: str) -> list[str]:
    return [m.group(0) for m in _NUMBER_RE.finditer(text) if _significant(m.group(0))]


def typed_numbers(path) -> list[tuple[int, str, str]]:
    """Numbers typed in a chapter's prose: ``(cell index, number, context)`` for each.

    Math, code, roles (``{glue:text}`` and the rest) and directive options are skipped, as are
    numbers inside words (P90, H100) and years. Only numbers with a decimal point, a thousands
    separator or three digits or more are listed: small counts and section numbers are not.

    Parameters
    ----------
    path : str or pathlib.Path
        A chapter notebook (``.ipynb``).

    Returns
    -------
    list of tuple
        One entry per typed number, in reading order.
    """
    found = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        text = _source(cell)
        for pattern, repl in _STRIP:
            text = pattern.sub(repl, text)
        for m in _NUMBER_RE.finditer(text):
            if _significant(m.group(0)):
                ctx = " ".join(text[max(0, m.start() - 50):m.end() + 30].split())
                found.append((i, m.group(0), ctx))
    return found


def number_value(token: str) -> float:
    """The value of a number as prose writes it (``1,234.5``, ``−3``).

    Examples
    --------
    >>> number_value("−1,234.5")
    -1234.5
    """
    return float(token.replace("−", "-").replace(",", ""))


def computed_numbers(text: str) -> set[str]:
    """The significant numbers in text a page computed (glued values, cell outputs), as written.

    Examples
    --------
    >>> sorted(computed_numbers("p99 = 1,234 ms at 98.2 % (2026)"))
    ['1,234', '98.2']
    """
    return set(_prose_numbers(text))


_LITERAL_RE = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def code_literals(path) -> set[float]:
    """The numbers written as literals in a chapter's code cells, with their ×100 and ×1000.

    These are the chapter's inputs (a 0.5 s target, a 60 % load): prose may type them, also as
    500 ms or 50 %.

    Examples
    --------
    >>> import json, tempfile, os
    >>> nb = {"cells": [{"cell_type": "code", "source": "slo = SLO(ttft_target_s=0.5)"}]}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = os.path.join(d, "x.ipynb")
    ...     _ = open(f, "w").write(json.dumps(nb))
    ...     sorted(code_literals(f))
    [0.5, 50.0, 500.0]
    """
    out: set[float] = set()
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        for token in _number_tokens(_source(cell)):
            v = float(token.replace("_", ""))
            out |= {v, round(v * 100, 9), round(v * 1000, 9)}
    return out


def _number_tokens(code: str) -> list[str]:
    """Python number literals of code (not in comments or strings)."""
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline)
                if t.type == tokenize.NUMBER and not t.string.endswith(("j", "J"))]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        code = re.sub(r"#.*", " ", code)
        return _LITERAL_RE.findall(re.sub(r"([\"']).*?\1", " ", code))
