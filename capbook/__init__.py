"""capbook: capacity planning for LLM serving.

The names below are loaded on first use (PEP 562): ``import capbook`` costs no pandas, duckdb,
scipy or altair, so the ``capbook`` command starts at once. ``capbook.<module>`` works the same
way for every module of the package.

Examples
--------
>>> import capbook
>>> capbook.plan_fleet is capbook.plan.fleet.plan_fleet
True
>>> "simulate" in capbook.__all__ and {"simulate", "queueing"} <= set(dir(capbook))
True
"""
from __future__ import annotations

import importlib
import importlib.util

from capbook import _moved

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_EXPORTS = {
    **dict.fromkeys(("Sweep", "choose_slots", "load_sample_sweep"), "sweeps.sweep"),
    **dict.fromkeys(("FleetPlan", "allocate_tpm", "alert_levels", "compare_routing", "plan_fleet"), "plan.fleet"),
    **dict.fromkeys(("event_calendar", "fit_trend_shape", "forecast_tokens"), "forecast.tokens"),
    **dict.fromkeys(("compare_forecasts", "score_forecast"), "forecast.scoring"),
    **dict.fromkeys(("FleetSpec", "Simulation", "simulate"), "sim.slotsim"),
    **dict.fromkeys(("SLO",), "slo"),
    **dict.fromkeys(("CapacityPlan", "capacity_plan"), "plan.steps"),
    **dict.fromkeys(("Mapping", "RequestLog", "load_sample_requests", "read_requests"), "logs.requestlog"),
}

__all__ = list(_EXPORTS)

_moved.install()  # the modules' old paths (capbook.traces, capbook.costs, ...) for one release


def __getattr__(name: str):
    """Import the module of a public name (or a submodule) on first access."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    return sorted(set(globals()) | set(__all__) | modules)
