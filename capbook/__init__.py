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
>>> import capbook.traces, capbook.logs.requestlog   # an old module path, for one release
>>> capbook.traces is capbook.logs.requestlog
True
"""
from __future__ import annotations

import importlib
import importlib.util
import sys


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

# -- the modules' old paths, kept for one release (0.1.x) after the layout by domain (issue 33) --------
# ``import capbook.traces`` gives the module now at capbook.logs.requestlog: the same module object,
# so its private names and a test's monkeypatch reach the real thing. The names that became
# subpackages (capbook.plan, .engine, .sim, .forecast, .autoscale) export the public names of the
# module they replaced. (Here rather than in a module of its own: every command imports it.)
#: Old module path -> where the module lives now.
MOVED = {f"capbook.{old}": f"capbook.{new}" for old, new in {
    "traces": "logs.requestlog", "logsql": "logs.sql", "engines": "logs.engines", "tracestats": "logs.stats",
    "sweep": "sweeps.sweep", "replicas": "sweeps.replicas", "configurations": "sweeps.configurations",
    "perrequest": "sweeps.perrequest", "importers": "sweeps.importers",
    "hardware": "engine.hardware", "servingmodel": "engine.servingmodel", "predict": "engine.predict",
    "fidelity": "engine.fidelity", "loadqueue": "engine.loadqueue",
    "closedloop": "sim.closedloop", "fleetsim": "sim.fleetsim", "eventcore": "sim.eventcore",
    "arrivals": "sim.arrivals", "distributions": "sim.distributions",
    "backtest": "forecast.scoring", "fleet": "plan.fleet", "replay": "plan.replay",
    "costs": "cost.costs", "autoscale_plan": "autoscale.schedule",
    "cli": "app.cli", "datasets": "app.datasets", "bookbuild": "app.bookbuild", "bookcheck": "app.bookcheck",
}.items()}


class _OldPath:
    """Finds an old path and hands back the module at its new one (a meta path finder and its
    loader; importlib.abc is not imported, it would cost every command's start-up)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # its own spec, which the import system overwrites next
        return module

    def exec_module(self, module):
        # the import system stamped the old path's spec on the module: give it back its own
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):
        """The new module's code, for ``python -m`` (runpy): ``python -m capbook.cli`` runs the
        command line as ``python -m capbook.app.cli`` does."""
        new = MOVED[fullname]
        return importlib.util.find_spec(new).loader.get_code(new)


if not any(isinstance(f, _OldPath) for f in sys.meta_path):
    sys.meta_path.append(_OldPath())


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
