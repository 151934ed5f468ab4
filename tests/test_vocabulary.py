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


# ---------------------------------------------------------------------------------------------
# One name per quantity (issue 33): the SLO's spellings, units in the name, seconds.
#
#   service time (mean seconds a request holds a slot)  service_time_s
#   wait target of the Erlang C objective                wait_target_s   (its share: late_share)
#   TTFT target                                          ttft_target_s   (with ttft_quantile)
#   goodput target                                       goodput_share
#   TPOT target                                          tpot_target_s
#   the objectives themselves                            slo (a capbook.slo.SLO)
#
# A synonym of these may not name a parameter, a dataclass field or class attribute, an instance
# attribute (self.x = ...), a function or a method anywhere in the package.

SYNONYMS = {
    "mean_holding_s": "service_time_s", "holding_time": "service_time_s", "holding_time_s": "service_time_s",
    "service_time": "service_time_s", "wait_s": "wait_target_s", "max_wait": "wait_target_s",
    "ttft_s": "ttft_target_s", "ttft_objective": "ttft_target_s", "ttft_slo": "ttft_target_s",
    "goodput": "goodput_share", "objectives": "slo",
}
# Names only a parameter may not take (as a field or attribute they may be a measurement).
PARAMETER_ONLY = {"objectives"}

# "module:owner.name" (a field, attribute, function or method) or "module:function(parameter)"
# -> why it stays. (The renames in the files other helpers
# were editing while the vocabulary landed are done: no entry is pending.)
ALLOWED = {
    # measurements, not targets: a run's per-request TTFT, and a window's observed goodput
    "engine.stepmodel:EngineRun.ttft_s": "measured TTFT of each simulated request (an array), not a target",
    "sim.closedloop:ClosedLoopRun.ttft_s": "measured TTFT of each request of a closed-loop run, not a target",
    "sweeps.perrequest:Requests.ttft_s": "measured TTFT of each benchmark request, not a target",
    "autoscale.policies:Observation.__init__(goodput)": "the goodput observed over the window (a measurement a "
                                                        "policy reads), not the target",
    "autoscale.policies:Observation.goodput": "the goodput observed over the window, not the target",
}


def _owned_names(tree: ast.Module):
    """(kind, key, name) of every parameter, field, class attribute, instance attribute, function and method."""
    out = []

    def visit(node, owner: str, in_class: bool):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = f"{owner}.{ch.name}" if owner else ch.name
                out.append(("method" if in_class else "function", q, ch.name))
                a = ch.args
                out.extend(("parameter", f"{q}({x.arg})", x.arg) for x in a.posonlyargs + a.args + a.kwonlyargs)
                if in_class:
                    out.extend(("attribute", f"{owner}.{n.attr}", n.attr) for n in ast.walk(ch)
                               if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                               and isinstance(n.value, ast.Name) and n.value.id == "self")
                visit(ch, q, False)
            elif isinstance(ch, ast.ClassDef):
                q = f"{owner}.{ch.name}" if owner else ch.name
                for b in ch.body:
                    targets = [b.target] if isinstance(b, ast.AnnAssign) else b.targets if isinstance(b, ast.Assign) else []
                    out.extend(("field", f"{q}.{t.id}", t.id) for t in targets if isinstance(t, ast.Name))
                visit(ch, q, True)

    visit(tree, "", False)
    return out


def _synonyms_in_package() -> dict[str, str]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for kind, key, name in _owned_names(ast.parse(path.read_text(encoding="utf-8"))):
            if name in SYNONYMS and (kind == "parameter" or name not in PARAMETER_ONLY):
                found[f"{module}:{key}"] = f"{kind} {name!r}: call it {SYNONYMS[name]!r}"
    return found


def test_one_name_per_quantity():
    bad = {k: v for k, v in _synonyms_in_package().items() if k not in ALLOWED}
    assert not bad, "a synonym of the SLO's vocabulary names these (rename, or allow with a reason):\n" + \
        "\n".join(f"  {k}: {v}" for k, v in sorted(bad.items()))


def test_the_allow_list_has_no_stale_entries():
    stale = set(ALLOWED) - set(_synonyms_in_package())
    assert not stale, f"allowed but no longer in the package (delete the entries): {sorted(stale)}"


def test_the_synonym_scan_sees_what_it_should():
    # the scan reaches every kind of name, in the files other helpers were editing too
    found = _synonyms_in_package()
    assert "engine.stepmodel:EngineRun.ttft_s" in found                         # a dataclass field
    assert "autoscale.policies:Observation.goodput" in found                    # an instance attribute
    assert "autoscale.policies:Observation.goodput" in found
    tree = ast.parse("def f(wait_s, *, service_time=1):\n    pass\nclass C:\n    ttft_slo: float\n"
                     "    def mean_holding_s(self):\n        self.goodput = 1\n")
    assert {k for _, k, n in _owned_names(tree) if n in SYNONYMS} == {
        "f(wait_s)", "f(service_time)", "C.ttft_slo", "C.mean_holding_s", "C.goodput"}
    scanned = {".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py")}
    assert {"plan.steps", "plan.replay", "cost.costs", "autoscale.schedule"} <= scanned


# Names that declare a TTFT target or a goodput target on a class (a field, a class attribute or a
# property): a class with both restates the objectives.
TTFT_TARGETS = {"ttft_target_s", "ttft_s", "ttft_objective", "ttft_slo", "ttft"}
GOODPUT_TARGETS = {"goodput_share", "goodput", "goodput_target"}
OTHER_OBJECTIVE_TYPES = {
}


def _objective_types() -> set[str]:
    types = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            declared = set()
            for b in node.body:
                if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    declared.add(b.target.id)
                elif isinstance(b, ast.Assign):
                    declared |= {t.id for t in b.targets if isinstance(t, ast.Name)}
                elif isinstance(b, ast.FunctionDef) and any(
                        isinstance(d, ast.Name) and d.id in ("property", "cached_property") for d in b.decorator_list):
                    declared.add(b.name)
            subclass_of_slo = any(isinstance(base, ast.Name) and base.id == "SLO" for base in node.bases)
            if (declared & TTFT_TARGETS and declared & GOODPUT_TARGETS) or subclass_of_slo:
                types.add(f"{module}.{node.name}")
    return types


def test_one_objectives_type():
    from capbook.slo import SLO

    assert {"ttft_target_s", "ttft_quantile", "goodput_share", "wait_target_s", "late_share",
            "tpot_target_s"} <= set(SLO.__dataclass_fields__)
    assert _objective_types() - set(OTHER_OBJECTIVE_TYPES) == {"slo.SLO"}
    assert set(OTHER_OBJECTIVE_TYPES) <= _objective_types(), "delete the stale OTHER_OBJECTIVE_TYPES entries"
