"""The package's layers: imports point down only, and nothing imports in a circle.

capbook is laid out by domain (CONTRIBUTING.md, "The layers"). Reading every module's imports
from its source (top-level and inside functions alike; imports under ``if TYPE_CHECKING`` are
annotations only and do not count), these tests fail when

* two modules import each other, directly or through others (a cycle);
* a module imports from a layer above its own (the plan reaching into the application, say);
* a module hides an import of capbook inside a function, except where that keeps ``capbook --help``
  and ``import capbook`` fast (the application's command line, the chart theme's altair).
"""
import ast
import collections
from pathlib import Path

import pytest

import capbook

PACKAGE = Path(capbook.__file__).resolve().parent

#: The layers, lowest first. A module may import from its own layer and the layers below.
LAYERS = ["base", "sweeps", "logs", "sim", "engine", "forecast", "plan", "cost", "autoscale", "charts", "app"]
#: The base layer's modules (everything that is not in a subpackage).
BASE = {"capbook", "capbook._lazy", "capbook.formats", "capbook.parallel", "capbook.paths",
        "capbook.queueing", "capbook.routing", "capbook.slo", "capbook.theme", "capbook.validation"}


def _layer(module: str) -> str:
    if module in BASE:
        return "base"
    sub = module.split(".")[1]
    assert sub in LAYERS, f"{module}: not in a layer; add its subpackage to LAYERS (and CONTRIBUTING.md)"
    return sub


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "sample_data" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports() -> list[tuple[str, str, bool]]:
    """(importer, imported, deferred) for every import of a capbook module in the package."""
    mods = _modules()

    def target(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node, deferred):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(child, True)
                    continue
                if isinstance(child, ast.ImportFrom):
                    assert child.level == 0, f"{name}: a relative import ({ast.unparse(child)}); write capbook.…"
                    mod = child.module or ""
                    targets = [target(f"{mod}.{a.name}") if f"{mod}.{a.name}" in mods else target(mod)
                               for a in child.names]
                elif isinstance(child, ast.Import):
                    targets = [target(a.name) for a in child.names]
                else:
                    visit(child, deferred)
                    continue
                found.extend((name, t, deferred) for t in targets if t and t.startswith("capbook") and t != name)

        visit(tree, False)
    return found


def _cycles(edges) -> list[list[str]]:
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def test_the_scan_sees_the_imports():
    edges = {(a, b) for a, b, _ in _imports()}
    assert ("capbook.plan.steps", "capbook.plan.replay") in edges
    assert ("capbook.plan.replay", "capbook.sim.fleetsim") in edges
    assert ("capbook.app.cli", "capbook.app.messages") in edges
    assert len(_modules()) > 60


def test_no_import_cycle():
    assert _cycles({(a, b) for a, b, _ in _imports()}) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]


def test_imports_point_down_the_layers():
    up = sorted({(a, b) for a, b, _ in _imports() if LAYERS.index(_layer(b)) > LAYERS.index(_layer(a))})
    assert not up, f"imports that point up a layer (move the shared thing down, or the caller up): {up}"


#: Where a capbook import may wait inside a function, and why.
DEFERRED_OK = {
    "capbook.app.cli": "each command imports what it runs, so `capbook --help` loads no pandas or scipy",
    "capbook.app": "the package `capbook --help` runs through loads its lazy table's helper on first use",
}
#: Deferred imports of the chart theme (altair) are fine anywhere: a plan or fleet draws itself on demand.
THEME = {"capbook.theme", "capbook.charts"}


def test_imports_wait_inside_functions_only_where_it_keeps_start_up_fast():
    hidden = sorted({(a, b) for a, b, deferred in _imports()
                     if deferred and a not in DEFERRED_OK and b not in THEME})
    assert not hidden, f"imports inside functions (import at the top: the layers have no cycle to hide): {hidden}"


@pytest.mark.parametrize("package", [p for p in LAYERS if p != "base"])
def test_each_subpackage_lists_its_public_api(package):
    import importlib

    mod = importlib.import_module(f"capbook.{package}")
    assert mod.__doc__ and mod.__all__, package
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"capbook.{package}.{name}"


# -- the old import paths, kept for one release ------------------------------------------------
def test_an_old_module_path_is_the_module_at_its_new_place():
    import importlib

    from capbook import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    from capbook.costs import price_plan
    from capbook.cost.costs import price_plan as moved

    assert price_plan is moved
    import capbook.traces

    assert capbook.traces.__spec__.name == "capbook.logs.requestlog"   # its own spec, not the alias's


def test_python_dash_m_runs_a_module_by_its_old_path():
    """``python -m capbook.cli`` (runpy asks the old path's loader for the code) runs the command
    line as ``python -m capbook.app.cli`` does."""
    import subprocess
    import sys

    def run(module, *args):
        return subprocess.run([sys.executable, "-m", module, *args], cwd=PACKAGE.parent, capture_output=True, text=True)

    old, new = run("capbook.cli", "--version"), run("capbook.app.cli", "--version")
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stdout == new.stdout and old.stdout.strip()
    bad = run("capbook.cli", "no-such-command")
    assert bad.returncode == 2 and "invalid choice: 'no-such-command'" in bad.stderr


def _old_public_names(module: str) -> list[str]:
    """``__all__`` of ``capbook/<module>.py`` in the commit before the layout (skips without git)."""
    import subprocess

    r = subprocess.run(["git", "show", f"before-33:capbook/{module}.py"], cwd=PACKAGE.parent,
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("needs the repository's history (tag before-33)")
    for node in ast.parse(r.stdout).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"capbook/{module}.py had no __all__")


#: Names of the old modules that became subpackages and that moved to a layer of their own.
_MOVED_OUT = {"plan": {"CapacityPlan.priced", "CapacityPlan.autoscaled"}, "autoscale": {"Objectives"}}


@pytest.mark.parametrize("old", ["plan", "engine", "sim", "forecast", "autoscale"])
def test_a_module_that_became_a_subpackage_still_exports_its_public_names(old):
    import importlib

    package = importlib.import_module(f"capbook.{old}")
    missing = [n for n in _old_public_names(old) if n not in _MOVED_OUT.get(old, ()) and not hasattr(package, n)]
    assert not missing, f"capbook.{old} lost {missing}"


@pytest.mark.parametrize("package", [p for p in LAYERS if p != "base"])
def test_no_public_name_of_a_subpackage_hides_one_of_its_modules(package):
    # `from capbook.forecast import scoring` must give the module whatever was imported before
    import importlib
    import pkgutil

    mod = importlib.import_module(f"capbook.{package}")
    modules = {m.name for m in pkgutil.iter_modules(mod.__path__)}
    assert not modules & set(mod.__all__), f"capbook.{package}: {sorted(modules & set(mod.__all__))}"
