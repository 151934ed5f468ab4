"""Old import paths of capbook's modules, kept for one release (0.1.x) after the package was
laid out by domain (issue 33).

``import capbook.traces`` still gives the module now at :mod:`capbook.logs.requestlog`: the
same module object, so its private names and a test's ``monkeypatch`` reach the real thing.
The names that became subpackages (``capbook.plan``, ``capbook.engine``, ``capbook.sim``,
``capbook.forecast``, ``capbook.autoscale``) are not here: each subpackage exports the public
names of the module it replaced.

Examples
--------
>>> import capbook.traces, capbook.logs.requestlog
>>> capbook.traces is capbook.logs.requestlog
True
"""
from __future__ import annotations

import importlib
import importlib.util
import sys

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


def install() -> None:
    """Put the finder on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _OldPath) for f in sys.meta_path):
        sys.meta_path.append(_OldPath())
