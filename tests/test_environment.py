"""The conda environment and pyproject.toml must list the same dependencies."""
from __future__ import annotations

import re
import tomllib

import yaml

from conftest import ROOT

# conda-forge names that differ from the PyPI names
CONDA_TO_PYPI = {"python-duckdb": "duckdb"}
NOT_DEPENDENCIES = {"python", "pip"}
# conda packages with no PyPI counterpart: what an extra needs beside Python, which pip cannot
# install (name: (the extra, its version range)); capbook.logs.engines requires Java 17 or newer
CONDA_ONLY = {"openjdk": ("spark", ">=17")}


def _split(spec: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    assert m, f"cannot parse dependency {spec!r}"
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def pyproject_deps() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = data["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():  # every extra, spark too
        specs += extra
    out = dict(_split(s) for s in specs)
    assert len(out) == len(specs), "a dependency is listed twice in pyproject.toml"
    return out


def conda_deps() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out: dict[str, str] = {}
    for item in env["dependencies"]:
        if isinstance(item, dict):
            for spec in item.get("pip", []):
                if spec.startswith("-e"):
                    continue
                name, ver = _split(spec)
                out[name] = ver
        else:
            name, ver = _split(item)
            if name in NOT_DEPENDENCIES or name in CONDA_ONLY:
                continue
            out[CONDA_TO_PYPI.get(name, name)] = ver
    return out


def test_environment_yml_matches_pyproject():
    py, conda = pyproject_deps(), conda_deps()
    missing = sorted(set(py) - set(conda))
    extra = sorted(set(conda) - set(py))
    assert not missing, f"in pyproject.toml but not environment.yml: {missing}"
    assert not extra, f"in environment.yml but not pyproject.toml: {extra}"
    differ = {k: (py[k], conda[k]) for k in py if py[k] != conda[k]}
    assert not differ, f"version ranges differ (pyproject, environment.yml): {differ}"


def conda_only_deps() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    items = (_split(i) for i in env["dependencies"] if isinstance(i, str))
    return {name: ver for name, ver in items if name in CONDA_ONLY}


def test_environment_yml_has_what_pip_cannot_install():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    got = conda_only_deps()
    for name, (extra, spec) in CONDA_ONLY.items():
        assert extra in extras, f"{name} is listed for the {extra!r} extra, which pyproject.toml lacks"
        assert got.get(name) == spec, f"environment.yml should list {name}{spec} (for the {extra} extra)"


def test_every_dependency_is_bounded():
    for name, spec in pyproject_deps().items():
        assert ">=" in spec and "<" in spec, f"{name} should have a lower and an upper bound, got {spec!r}"


def test_constraints_pin_every_dependency():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, ver = line.partition("==")
            pins[name.lower().replace("_", "-")] = ver
    for name in pyproject_deps():
        assert name in pins, f"constraints.txt has no exact pin for {name}"


def test_the_test_extra_can_build_the_wheel_offline():
    # tests/test_packaging.py builds with --no-build-isolation: the test environment's setuptools
    # must satisfy the build system's requirement
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = dict(_split(s) for s in data["build-system"]["requires"])
    test = dict(_split(s) for s in data["project"]["optional-dependencies"]["test"])
    assert "setuptools" in test, "the test extra needs setuptools (tests/test_packaging.py builds the wheel)"
    low = re.search(r">=([\d.]+)", build["setuptools"]).group(1)
    assert f">={low}" in test["setuptools"], (build["setuptools"], test["setuptools"])
