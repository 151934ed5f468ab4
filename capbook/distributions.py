"""Small distribution objects for the simulator: service times, inter-arrival times, tokens.

Each distribution is a tiny object with ``sample(rng, size)``, ``mean`` and ``variance`` (and
the squared coefficient of variation ``scv = variance / mean**2``), in the style of Ciw. They are
parameterised by the numbers capacity planning talks about — a mean and a squared coefficient
of variation (Cs², Ca²) — rather than by each family's textbook parameters.

Units are whatever the caller uses for the quantity: seconds for times, tokens for token counts.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = [
    "Distribution",
    "Exponential",
    "Deterministic",
    "Lognormal",
    "Gamma",
    "Empirical",
    "as_distribution",
]


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


class Distribution:
    """Base class: a non-negative random quantity with a known mean and variance."""

    mean: float
    variance: float

    @property
    def scv(self) -> float:
        """Squared coefficient of variation, ``variance / mean**2`` (dimensionless)."""
        return self.variance / self.mean**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mean={self.mean:g}, scv={self.scv:g})"


class Exponential(Distribution):
    """Exponential distribution with the given mean (Cs² = 1).

    Parameters
    ----------
    mean : float
        Mean, in the caller's unit (seconds for service times).
    """

    def __init__(self, mean: float):
        self.mean = _positive("mean", mean)
        self.variance = self.mean**2

    def sample(self, rng, size):
        return rng.exponential(self.mean, size)


class Deterministic(Distribution):
    """A constant (Cs² = 0).

    Parameters
    ----------
    value : float
        The constant, in the caller's unit.
    """

    def __init__(self, value: float):
        self.mean = _positive("value", value)
        self.variance = 0.0

    def sample(self, rng, size):
        return np.full(size, self.mean)


class Lognormal(Distribution):
    r"""Lognormal distribution given by its mean and squared coefficient of variation.

    With shape :math:`\sigma`, :math:`C_s^2 = e^{\sigma^2} - 1`, so
    :math:`\sigma = \sqrt{\ln(1 + C_s^2)}` and :math:`\mu = \ln(\text{mean}) - \sigma^2/2`.

    Parameters
    ----------
    mean : float
        Mean, in the caller's unit.
    scv : float, optional
        Squared coefficient of variation Cs² (> 0). Give either ``scv`` or ``sigma``.
    sigma : float, optional
        Shape parameter σ of the underlying normal (> 0).
    """

    def __init__(self, mean: float, scv: float | None = None, sigma: float | None = None):
        self.mean = _positive("mean", mean)
        if (scv is None) == (sigma is None):
            raise ValueError("Lognormal needs exactly one of scv or sigma")
        if scv is not None:
            scv = _positive("scv", scv)
            sigma = math.sqrt(math.log1p(scv))
        else:
            sigma = _positive("sigma", sigma)
        self.sigma = float(sigma)
        self.mu = math.log(self.mean) - self.sigma**2 / 2
        self.variance = self.mean**2 * math.expm1(self.sigma**2)

    def sample(self, rng, size):
        return rng.lognormal(self.mu, self.sigma, size)


class Gamma(Distribution):
    """Gamma distribution given by its mean and squared coefficient of variation.

    Shape ``k = 1 / scv`` and scale ``mean * scv``: ``scv = 1`` is exponential, ``scv < 1`` is
    more regular, ``scv > 1`` burstier. Used for renewal arrivals with a chosen Ca².

    Parameters
    ----------
    mean : float
        Mean, in the caller's unit.
    scv : float
        Squared coefficient of variation (> 0).
    """

    def __init__(self, mean: float, scv: float):
        self.mean = _positive("mean", mean)
        self._scv = _positive("scv", scv)
        self.variance = self._scv * self.mean**2

    def sample(self, rng, size):
        return rng.gamma(1.0 / self._scv, self.mean * self._scv, size)


class Empirical(Distribution):
    """Resample (with replacement) from observed values, e.g. a trace's output-token counts.

    Parameters
    ----------
    values : array_like
        Observed non-negative values (at least one).
    """

    def __init__(self, values):
        values = np.asarray(values, dtype=float).ravel()
        if values.size == 0:
            raise ValueError("values must hold at least one observation")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("values must be finite and non-negative")
        if values.mean() <= 0:
            raise ValueError("values must not all be zero")
        self.values = values
        self.mean = float(values.mean())
        self.variance = float(values.var())

    def sample(self, rng, size):
        return rng.choice(self.values, size=size, replace=True)


def as_distribution(value, name: str = "value") -> Distribution:
    """Coerce a number (→ :class:`Deterministic`) or a distribution object to a distribution."""
    if isinstance(value, Distribution):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return Deterministic(float(value))
    if hasattr(value, "sample") and hasattr(value, "mean"):
        return value
    raise TypeError(f"{name} must be a number or a Distribution, got {type(value).__name__}")
