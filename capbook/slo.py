"""The latency objectives a plan is built to meet: one type for every layer.

:class:`SLO` holds the TTFT target and its quantile, the TPOT target and its percentile, the
wait target and late share of the Erlang C check, and the goodput share; the plan, the fleet
simulation, the costs and autoscaling all read it (``capbook plan --slo``, :meth:`SLO.parse`).
"""
from __future__ import annotations

from dataclasses import dataclass

from capbook.validation import integer, nonnegative, positive, probability

__all__ = ["SLO"]


@dataclass(frozen=True)
class SLO:
    """The latency objectives the plan is built to meet.

    Attributes
    ----------
    ttft_target_s : float
        Time-to-first-token objective, seconds, at quantile ``ttft_quantile``.
    ttft_quantile : float
        e.g. 0.99 for a p99 TTFT objective.
    tpot_target_s : float
        Time-per-output-token objective, seconds, at percentile ``tpot_percentile`` of the
        sweep (it sets the slots per replica, :func:`capbook.sweeps.sweep.choose_slots`).
    tpot_percentile : int
        50, 95 or 99.
    wait_target_s : float
        Erlang C check: at most ``late_share`` of requests wait longer than this, seconds.
    late_share : float
        Largest acceptable share of requests waiting longer than ``wait_target_s``, in (0, 1). This
        is the Erlang C model's target only, not a goodput target.
    goodput_share : float
        Smallest acceptable share of the replayed requests that meet *both* the TTFT and the
        TPOT objective (the replay's goodput), in (0, 1]. Default: ``ttft_quantile`` (a p99
        TTFT objective already asks 99 % of requests to start in time; goodput asks the same
        share to also stream in time).
    """

    ttft_target_s: float = 1.0
    ttft_quantile: float = 0.99
    tpot_target_s: float = 0.05
    tpot_percentile: int = 95
    wait_target_s: float = 0.5
    late_share: float = 0.01
    goodput_share: float | None = None

    def __post_init__(self):
        positive(self.ttft_target_s, "ttft_target_s")
        probability(self.ttft_quantile, "ttft_quantile")
        positive(self.tpot_target_s, "tpot_target_s")
        if integer(self.tpot_percentile, "tpot_percentile") not in (50, 95, 99):
            raise ValueError(f"tpot_percentile must be 50, 95 or 99, got {self.tpot_percentile!r}")
        nonnegative(self.wait_target_s, "wait_target_s")
        probability(self.late_share, "late_share")
        if self.goodput_share is None:
            object.__setattr__(self, "goodput_share", float(self.ttft_quantile))
        probability(self.goodput_share, "goodput_share", hi_open=False)

    _KEYS = {"ttft": "ttft_target_s", "ttft_q": "ttft_quantile", "tpot": "tpot_target_s",
             "tpot_p": "tpot_percentile", "wait": "wait_target_s", "late": "late_share",
             "goodput": "goodput_share"}

    @classmethod
    def parse(cls, text: str) -> "SLO":
        """Parse ``"ttft=2,tpot=0.05,wait=0.5,late=0.01,goodput=0.99"`` (any subset; seconds and shares).

        Keys: ``ttft`` (s), ``ttft_q`` (quantile, 0.99), ``tpot`` (s), ``tpot_p`` (percentile,
        95), ``wait`` (s), ``late`` (share), ``goodput`` (share of replayed requests meeting both
        objectives; default ``ttft_q``). Values may carry ``s`` or ``ms`` (``tpot=50ms``) and
        shares a ``%`` (``late=1%``, ``goodput=99%``).

        Examples
        --------
        >>> s = SLO.parse("ttft=1.5s,tpot=40ms,late=2%")
        >>> s.ttft_target_s, s.tpot_target_s, s.late_share
        (1.5, 0.04, 0.02)
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("slo must be a non-empty string like 'ttft=2,tpot=0.05'")
        kw: dict = {}
        for part in text.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"slo item {part.strip()!r} is not key=value; keys are {sorted(cls._KEYS)}")
            k, v = (s.strip() for s in part.split("=", 1))
            if k not in cls._KEYS:
                raise ValueError(f"slo key {k!r} is unknown; keys are {sorted(cls._KEYS)}")
            scale = 1.0
            if v.endswith("ms"):
                v, scale = v[:-2], 1e-3
            elif v.endswith("%"):
                v, scale = v[:-1], 1e-2
            elif v.endswith("s"):
                v = v[:-1]
            try:
                val = float(v) * scale
            except ValueError:
                raise ValueError(f"slo value for {k!r} is not a number: {v!r}") from None
            kw[cls._KEYS[k]] = int(val) if k == "tpot_p" else val
        return cls(**kw)

    def describe(self) -> str:
        """One line describing the objectives.

        Examples
        --------
        >>> SLO().describe()
        'p99 TTFT ≤ 1 s, p95 TPOT ≤ 50 ms, P(wait > 0.5 s) ≤ 1 %, goodput ≥ 99 %'
        """
        return (f"p{100 * self.ttft_quantile:g} TTFT ≤ {self.ttft_target_s:g} s, p{self.tpot_percentile} TPOT ≤ "
                f"{1000 * self.tpot_target_s:g} ms, P(wait > {self.wait_target_s:g} s) ≤ {100 * self.late_share:g} %, "
                f"goodput ≥ {100 * self.goodput_share:g} %")
