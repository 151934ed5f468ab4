"""The sums of a request log that a plan reads, computed once (:class:`LogAggregates`)."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import pandas as pd

from capbook.logs.hourly import read_history

__all__ = ["LogAggregates"]


@dataclass(frozen=True, eq=False)
class LogAggregates:
    """The sums of a request log that the plan reads, computed once.

    :func:`~capbook.plan.steps.capacity_plan` builds one from a log; build it yourself with :meth:`of` and pass it
    instead of the log to plan the same log several times (other models, tiers, objectives)
    without summing it again. The memo lives on this object, held by the caller.

    Attributes
    ----------
    log : capbook.logs.requestlog.RequestLog
    label : str
        How the plan names the log (default: its path).
    hourly : pandas.DataFrame
        Hourly sums per model and tier that the forecast reads: the log's own
        (:meth:`capbook.logs.requestlog.RequestLog.hourly`), or the ``history`` given to :meth:`of`.
    per_minute : pandas.DataFrame
        Per-minute sums by model, tier and, when the log has one, tenant.
    has_tenants : bool
        Whether ``per_minute`` is split by tenant.
    history_label : str or None
        Where ``hourly`` came from when it is not the log's own (None: the log).
    """

    log: object
    label: str
    hourly: pd.DataFrame = field(repr=False)
    per_minute: pd.DataFrame = field(repr=False)
    has_tenants: bool
    history_label: str | None = None

    @classmethod
    def of(cls, log, label: str | None = None, *, history=None,
           history_label: str | None = None) -> "LogAggregates":
        """Sum ``log`` (a :class:`capbook.logs.requestlog.RequestLog`; a :class:`LogAggregates` is
        returned as it is, relabelled when ``label`` is given).

        Parameters
        ----------
        log : capbook.logs.requestlog.RequestLog or LogAggregates
        label : str, optional
            How the plan names the log.
        history : str, pathlib.Path or pandas.DataFrame, optional
            Hourly sums covering more weeks than the log (a gateway's long history beside a
            log of its busiest hours): a CSV in the hourly layout
            (:func:`capbook.logs.hourly.read_token_csv`: ``period_start``, ``model``, ``tier``,
            ``requests``, ``throttled``, ``input_tokens``, ``output_tokens`` per hour; other
            columns such as ``tenant`` are summed over) or such a frame. The forecast then
            reads it; the lengths, the burstiness, the busiest 60 minutes, the tenant limits and
            the replay still come from the log.
        history_label : str, optional
            How the plan names the history (default: its path).
        """
        if isinstance(log, cls):
            if history is not None:
                raise ValueError("history: give it with the request log, not with an already summed LogAggregates")
            return log if label is None else dataclasses.replace(log, label=label)
        if not hasattr(log, "hourly") or not hasattr(log, "per_minute"):
            raise ValueError(f"log must be a capbook.logs.requestlog.RequestLog, got {type(log).__name__}")
        if history is None:
            hourly = log.hourly()
        else:
            hourly, where = read_history(history)
            history_label = history_label or where
        try:
            minute, tenants = log.per_minute(by=("model", "tier", "tenant")), True
        except ValueError:
            minute, tenants = log.per_minute(by=("model", "tier")), False
        if label is None:
            label = str(getattr(log, "path", "")) or "request log"
        return cls(log, label, hourly, minute, tenants, history_label)

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """Every request of the log as one pandas frame (read on first use; the plan does not: its
        replay and autoscaling week read sums and the busiest hours' rows from SQL)."""
        return self.log.to_pandas()
