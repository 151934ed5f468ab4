"""The rows of one model and tier: the one filter the plan, its costs and its autoscaling use."""
from __future__ import annotations

import pandas as pd

__all__ = ["select_scope", "ALL_TIERS"]

#: How a plan's ``source["tier"]`` names a plan of every tier (no tier filter).
ALL_TIERS = "all tiers"


def select_scope(frame, model: str | None = None, tier: str | None = None) -> pd.DataFrame:
    """The rows of ``frame`` of ``model`` and ``tier``.

    Parameters
    ----------
    frame : pandas.DataFrame, capbook.logs.aggregates.LogAggregates or capbook.logs.requestlog.RequestLog
        Rows with ``model`` and ``tier`` columns (per request, per minute or per hour); a
        :class:`~capbook.logs.aggregates.LogAggregates` gives its per-request ``frame``, a
        request log its :meth:`~capbook.logs.requestlog.RequestLog.to_pandas`.
    model : str, optional
        None: every model.
    tier : str, optional
        None or ``"all tiers"`` (:data:`ALL_TIERS`): every tier.

    Returns
    -------
    pandas.DataFrame
        The matching rows (values compared as text); a frame without a ``model`` (``tier``)
        column is not filtered on it.
    """
    if not isinstance(frame, pd.DataFrame):
        frame = frame.frame if hasattr(frame, "per_minute") else frame.to_pandas()
    out = frame
    if model is not None and "model" in out.columns:
        out = out[out["model"].astype(str) == str(model)]
    if tier is not None and tier != ALL_TIERS and "tier" in out.columns:
        out = out[out["tier"].astype(str) == str(tier)]
    return out
