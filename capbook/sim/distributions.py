"""Small distribution objects for the simulator: service times, inter-arrival times, tokens.

Each distribution is a tiny object with ``sample(rng, size)``, ``mean`` and ``variance`` (and
the squared coefficient of variation ``scv = variance / mean**2``), in the style of Ciw. They are
parameterised by the numbers capacity planning talks about — a mean and a squared coefficient
of variation (Cs², Ca²) — rather than by each family's textbook parameters.

Units are whatever the caller uses for the quantity: seconds for times, tokens for token counts.

>>> import numpy as np
>>> service = Lognormal(2.0, scv=4.0)            # mean 2 s, Cs² = 4
>>> round(service.variance, 6), round(service.scv, 6)
(16.0, 4.0)
>>> round(float(Exponential(0.5).sample(np.random.default_rng(0), 100_000).mean()), 2)
0.5
>>> as_distribution(3, "service_s")
Deterministic(mean=3, scv=0)
>>> Gamma(1.0, scv=0)
Traceback (most recent call last):
...
ValueError: scv must be positive, got 0
"""
from __future__ import annotations

import math

import numpy as np

from capbook.validation import array, is_number, positive

__all__ = [
    "Distribution",
    "Exponential",
    "Deterministic",
    "Lognormal",
    "Gamma",
    "Empirical",
    "as_distribution",
]


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
        self.mean = positive(mean, "mean")
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
        self.mean = positive(value, "value")
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
        self.mean = positive(mean, "mean")
        if (scv is None) == (sigma is None):
            raise ValueError("Lognormal needs exactly one of scv or sigma")
        if scv is not None:
            scv = positive(scv, "scv")
            sigma = math.sqrt(math.log1p(scv))
        else:
            sigma = positive(sigma, "sigma")
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
        self.mean = positive(mean, "mean")
        self._scv = positive(scv, "scv")
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
        values = array(values, "values", lo=0.0, nonempty=True).ravel()
        if values.mean() <= 0:
            raise ValueError("values must not all be zero")
        self.values = values
        self.mean = float(values.mean())
        self.variance = float(values.var())

    def sample(self, rng, size):
        return rng.choice(self.values, size=size, replace=True)


def as_distribution(value, name: str = "value") -> Distribution:
    """Coerce a number (→ :class:`Deterministic`) or a distribution object to a distribution.

    ``name`` is the caller's argument name, for the error message.
    """
    if isinstance(value, Distribution):
        return value
    if is_number(value) or isinstance(value, (str, bytes, bool, np.bool_)):
        return Deterministic(positive(value, name))     # text and bool are refused by name
    if hasattr(value, "sample") and hasattr(value, "mean"):
        return value
    raise TypeError(f"{name} must be a number or a Distribution, got {type(value).__name__}")
