"""Argument checks for every public function in capbook: the only ones.

Each check takes the value and the argument's name, returns the value converted (``float``,
``int`` or a float ``numpy`` array) and raises :class:`ValueError` whose message starts with
the argument's name and says why. The rules are the same everywhere:

* a number is an ``int``, a ``float`` or a numpy number (a 0-d array of one counts too);
  ``bool`` and ``str`` are refused (``"3"`` is text, not three; ``True`` is not one);
* NaN is refused, and infinity too unless ``allow_inf=True``;
* an integer may be given as an integral float (``3.0``), never as ``3.5``;
* an array is anything ``numpy.asarray`` turns into real numbers (a list, a tuple, a pandas
  Series); booleans, text and objects are refused.

The integer search :func:`fewest` is the one search behind every "fewest replicas such that"
solver.

Examples
--------
>>> positive(2, "service_time_s")
2.0
>>> integer(3.0, "replicas", minimum=1)
3
>>> positive("3", "rate_rps")
Traceback (most recent call last):
...
ValueError: rate_rps must be a number, got '3' (str)
>>> probability(1.0, "target")
Traceback (most recent call last):
...
ValueError: target must lie strictly between 0 and 1, got 1.0
>>> fewest(lambda n: n * n >= 50, 1)
8
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from numbers import Real

import numpy as np

__all__ = [
    "is_number",
    "number",
    "positive",
    "nonnegative",
    "probability",
    "integer",
    "array",
    "choice",
    "table",
    "fewest",
]


def is_number(x) -> bool:
    """True for an ``int``, ``float``, numpy number or 0-d numeric array; False for bool and str."""
    if isinstance(x, (bool, np.bool_, str, bytes)):
        return False
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in "iuf"
    return isinstance(x, (Real, np.integer, np.floating))


def _kind(x) -> str:
    return type(x).__name__


def _refuse(x, name: str, what: str) -> ValueError:
    return ValueError(f"{name} must be {what}, got {x!r} ({_kind(x)})")


def _bounds_text(lo, lo_open, hi, hi_open) -> str | None:
    if lo is not None and hi is not None:
        if lo == 0 and hi == 1 and lo_open and hi_open:
            return "lie strictly between 0 and 1"
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        return f"lie in {left}{lo:g}, {hi:g}{right}"
    if lo is not None:
        if lo == 0:
            return "be positive" if lo_open else "be non-negative"
        return f"be {'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"be {'<' if hi_open else '<='} {hi:g}"
    return None


def _outside(v, lo, lo_open, hi, hi_open):
    """Boolean mask (or bool) of values outside the bounds."""
    bad = np.zeros(np.shape(v), dtype=bool)
    if lo is not None:
        bad |= (v <= lo) if lo_open else (v < lo)
    if hi is not None:
        bad |= (v >= hi) if hi_open else (v > hi)
    return bad


def number(x, name: str, *, lo: float | None = None, hi: float | None = None,
           lo_open: bool = False, hi_open: bool = False, allow_inf: bool = False) -> float:
    """Check that ``x`` is one real number within the bounds; return it as ``float``.

    Parameters
    ----------
    x : int, float or numpy number
        The value given.
    name : str
        The argument's name, as the caller spells it (it starts the error message).
    lo, hi : float, optional
        Bounds; ``lo_open`` / ``hi_open`` make them strict.
    allow_inf : bool
        Accept ``inf`` (checked against the bounds like any other value).

    Raises
    ------
    ValueError
        For bool, str, None or other non-numbers, NaN, infinity (unless allowed) and values
        outside the bounds.
    """
    if not is_number(x):
        raise _refuse(x, name, "a number")
    v = float(x)
    if math.isnan(v):
        raise ValueError(f"{name} must not be NaN")
    if math.isinf(v) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {x!r}")
    if _outside(v, lo, lo_open, hi, hi_open):
        raise ValueError(f"{name} must {_bounds_text(lo, lo_open, hi, hi_open)}, got {x!r}")
    return v


def positive(x, name: str, *, allow_inf: bool = False) -> float:
    """A number > 0 (finite unless ``allow_inf``); see :func:`number`."""
    return number(x, name, lo=0.0, lo_open=True, allow_inf=allow_inf)


def nonnegative(x, name: str, *, allow_inf: bool = False) -> float:
    """A number >= 0 (finite unless ``allow_inf``); see :func:`number`."""
    return number(x, name, lo=0.0, allow_inf=allow_inf)


def probability(x, name: str, *, closed: bool = False, lo_open: bool | None = None,
                hi_open: bool | None = None) -> float:
    """A share or probability: in (0, 1) by default, [0, 1] with ``closed=True``.

    ``lo_open`` / ``hi_open`` choose each end separately (e.g. ``hi_open=False`` for (0, 1]).
    """
    lo_o = (not closed) if lo_open is None else lo_open
    hi_o = (not closed) if hi_open is None else hi_open
    return number(x, name, lo=0.0, hi=1.0, lo_open=lo_o, hi_open=hi_o)


def integer(x, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number (``3`` or ``3.0``, not ``3.5``, ``True`` or ``"3"``) within the bounds."""
    if not is_number(x):
        raise _refuse(x, name, "an integer")
    v = float(x)
    if not math.isfinite(v) or v != math.floor(v):
        raise ValueError(f"{name} must be an integer, got {x!r}")
    n = int(x) if isinstance(x, (int, np.integer)) else int(v)
    if minimum is not None and n < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {x!r}")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {x!r}")
    return n


def _first(values: np.ndarray) -> str:
    flat = np.ravel(values)
    return repr(flat[0].item()) if flat.size else "?"


def array(x, name: str, *, lo: float | None = None, hi: float | None = None,
          lo_open: bool = False, hi_open: bool = False, allow_inf: bool = False,
          integer: bool = False, nonempty: bool = False, ndim: int | None = None) -> np.ndarray:
    """Check an array (or a scalar) of real numbers; return a float ``numpy`` array.

    Parameters
    ----------
    x : array_like
        Numbers: a scalar, list, tuple, numpy array or pandas Series / Index.
    name : str
        The argument's name.
    lo, hi, lo_open, hi_open, allow_inf
        As in :func:`number`, applied to every element.
    integer : bool
        Every element must be a whole number.
    nonempty : bool
        Refuse an empty array.
    ndim : int, optional
        Required number of dimensions (``1`` for a series of values).

    Raises
    ------
    ValueError
        Naming ``name`` and the first offending value.
    """
    if isinstance(x, (str, bytes, bool, np.bool_)) or x is None:
        raise _refuse(x, name, "a number or an array of numbers")
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):
        x = x.to_numpy()
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError):
        raise _refuse(x, name, "a number or an array of numbers") from None
    if raw.dtype.kind == "b":
        raise ValueError(f"{name} must be numbers, got booleans")
    if isinstance(x, (list, tuple)) and raw.dtype.kind in "iuf":
        # numpy turns (1, True) into (1, 1) and (1, "2") into text: look at what was given
        bad = next((v for v in np.ravel(np.asarray(x, dtype=object))
                    if isinstance(v, (bool, np.bool_))), None)
        if bad is not None:
            raise ValueError(f"{name} must be numbers, got {bad!r} ({_kind(bad)})")
    if raw.dtype.kind not in "iuf":
        if raw.dtype.kind == "O":
            if not all(is_number(v) for v in raw.ravel()):
                bad = next(v for v in raw.ravel() if not is_number(v))
                raise ValueError(f"{name} must be numbers, got {bad!r} ({_kind(bad)})")
        else:
            raise ValueError(f"{name} must be numbers, got an array of {raw.dtype}")
    arr = raw.astype(float)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN")
    if not allow_inf and np.isinf(arr).any():
        raise ValueError(f"{name} must be finite")
    if integer and (arr != np.floor(arr)).any():
        raise ValueError(f"{name} must be whole numbers, got {_first(arr[arr != np.floor(arr)])}")
    bad = _outside(arr, lo, lo_open, hi, hi_open)
    if np.any(bad):
        raise ValueError(f"{name} must {_bounds_text(lo, lo_open, hi, hi_open)}, got {_first(arr[bad])}")
    return arr


def choice(x, name: str, options: Iterable[str]) -> str:
    """One of a fixed set of names (case-sensitive); the message lists them."""
    opts = tuple(options)
    if not isinstance(x, str) or x not in opts:
        raise ValueError(f"{name} must be one of {', '.join(repr(o) for o in opts)}; got {x!r}")
    return x


def table(df, name: str, columns: Iterable[str] = ()):
    """A pandas DataFrame holding ``columns``; the message names the argument and what is missing."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    need = list(columns)
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; needs {need}")
    return df


def fewest(ok: Callable[[int], bool], start: int, *, what: str = "replicas",
           limit: int = 1 << 40) -> int:
    """Smallest integer ``n >= start`` with ``ok(n)`` true, for ``ok`` false-then-true.

    Doubles the step from ``start`` until ``ok`` holds, then bisects: ``O(log n)`` calls of
    ``ok``. This is the search behind every "fewest replicas (slots, servers) such that ..."
    solver.

    Parameters
    ----------
    ok : callable
        ``ok(n) -> bool``, monotone: once true it stays true for every larger ``n``.
    start : int
        The smallest candidate (often a lower bound such as the stability floor).
    what : str
        What ``n`` counts, for the error message.
    limit : int
        Give up beyond ``start + limit``.

    Raises
    ------
    ValueError
        When no ``n`` up to ``start + limit`` satisfies ``ok``.
    """
    start = int(start)
    if ok(start):
        return start
    lo, step = start, 1
    while not ok(start + step):
        lo = start + step
        step *= 2
        if step > limit:
            raise ValueError(f"no finite number of {what} meets the objective")
    hi = start + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
