"""One vocabulary: no public name is defined twice in the package."""

import ast
import collections
from pathlib import Path

import capbook

PACKAGE = Path(capbook.__file__).resolve().parent


def _public_definitions() -> dict[str, list[str]]:
    defs = collections.defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)  # a package's own
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id.isupper():
                names = [node.target.id]
            defs.update({n: defs[n] + [module] for n in names if not n.startswith("_")})
    return defs


def test_no_public_name_is_defined_in_two_modules():
    twice = {name: mods for name, mods in _public_definitions().items() if len(mods) > 1}
    assert not twice, f"defined in more than one module: {twice}"


def test_the_scan_sees_the_package():
    defs = _public_definitions()
    assert defs["capacity_plan"] == ["plan.steps"] and defs["FleetSpec"] == ["sim.slotsim"]
    assert defs["LOG_FORMATS"] == ["logs.requestlog"] and defs["SWEEP_FORMATS"] == ["sweeps.importers"]
    assert defs["SLO"] == ["slo"] and defs["LogAggregates"] == ["logs.aggregates"]


def test_every_exported_name_is_defined_where_init_says():
    for name, module in capbook._EXPORTS.items():
        assert name in _public_definitions() and module in _public_definitions()[name], name
