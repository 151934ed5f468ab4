"""The package as installed: a light ``import capbook`` and ``--help``, the public names, and a
wheel that carries the sample data and runs ``capbook plan`` outside the checkout."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import capbook
from conftest import ROOT

#: Modules that cost most of a second to import; ``--help`` must not need any of them.
HEAVY = ("pandas", "duckdb", "altair", "scipy")

#: Prints the heavy modules loaded, on the last line, after the statements given to it.
_REPORT = ("import json, sys\n{body}\n"
           f"print('HEAVY ' + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")


def _heavy_after(body: str, env: dict | None = None, cwd=None) -> tuple[list[str], str]:
    """(heavy modules imported, stdout) after ``body`` runs in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", _REPORT.format(body=body)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    *out, last = r.stdout.splitlines()
    assert last.startswith("HEAVY "), r.stdout
    return json.loads(last[len("HEAVY "):]), "\n".join(out)


def test_import_capbook_loads_no_heavy_module():
    heavy, _ = _heavy_after("import capbook; capbook.__version__; dir(capbook)")
    assert heavy == []


# the console script `capbook` calls its entry point; `python -m capbook.cli` runs the module
_CONSOLE = ("from importlib.metadata import entry_points\n"
            "sys.argv = ['capbook', *{argv!r}]\n"
            "(main,) = entry_points(group='console_scripts', name='capbook')\n"
            "try:\n    main.load()()\nexcept SystemExit:\n    pass")
_MODULE = ("import runpy\n"
           "sys.argv = ['capbook', *{argv!r}]\n"
           "try:\n    runpy.run_module('capbook.cli', run_name='__main__', alter_sys=True)\n"
           "except SystemExit:\n    pass")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["trace", "--help"], ["plan", "--help"],
                                  ["book", "--help"], ["predict", "--help"]])
@pytest.mark.parametrize("entry", [_CONSOLE, _MODULE], ids=["capbook", "python -m capbook.cli"])
def test_help_loads_no_heavy_module(entry, argv):
    heavy, out = _heavy_after(entry.format(argv=argv))
    assert heavy == [], f"capbook {' '.join(argv)} imported {heavy}"
    assert ("capbook 0." in out) if argv == ["--version"] else ("usage: capbook" in out), out


def test_a_command_still_reaches_its_modules():
    # the converse: the lazy imports happen when a command needs them
    heavy, _ = _heavy_after("from capbook.cli import build_parser\n"
                            "build_parser().parse_args(['trace', 'x.csv', '--format', 'burstgpt'])")
    assert "pandas" in heavy and "duckdb" in heavy


def test_star_import_resolves_every_public_name():
    namespace: dict = {}
    exec("from capbook import *", namespace)
    names = capbook.__all__
    assert len(names) == len(set(names)) and names
    assert set(names) <= set(namespace)
    for name in names:
        obj = getattr(capbook, name)
        assert obj is namespace[name]
        assert obj.__module__.startswith("capbook."), name
        assert not name.startswith("_")
    assert set(names) <= set(dir(capbook))


def test_submodules_load_on_attribute_access_and_unknown_names_raise():
    heavy, out = _heavy_after("import capbook\nprint(capbook.paths.__name__, capbook.routing.__name__)")
    assert out == "capbook.paths capbook.routing" and heavy == []
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        capbook.no_such_name  # noqa: B018
    assert not hasattr(capbook, "_private")


# -- the wheel ----------------------------------------------------------------------------------
def _setuptools_version() -> tuple[int, ...]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(p) for p in version("setuptools").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return (0,)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built offline from a copy of the checkout's sources (the checkout stays clean)."""
    if _setuptools_version() < (77,) and not os.environ.get("CI"):
        pytest.skip("building the wheel needs setuptools>=77 (the test extra); run `make setup`")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in ("capbook", "data"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--no-index", "--quiet", "--wheel-dir", str(dist), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = dist.glob("capbook-*.whl")
    return whl


@pytest.mark.wheel
def test_the_wheel_carries_every_sample_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = ROOT / "data"
    expected = {"capbook/sample_data/" + p.relative_to(data).as_posix()
                for p in data.rglob("*") if p.is_file()}
    missing = sorted(expected - names)
    assert not missing, (f"not in the wheel: {missing}; list the folder under "
                         "[tool.setuptools] packages and package-data in pyproject.toml")
    assert "capbook/paths.py" in names and "capbook/cli.py" in names
    assert wheel.name.startswith(f"capbook-{capbook.__version__}-")  # the version is written once
    assert not any(n.startswith(("data/", "tests/", "book/")) for n in names)


def test_every_loader_finds_data_through_capbook_paths():
    """One lookup honours CAPBOOK_DATA and the wheel's copy: no module looks beside the package."""
    beside = sorted(p.name for p in (ROOT / "capbook").glob("*.py")
                    if "parents[1]" in p.read_text(encoding="utf-8") and p.name != "bookbuild.py")
    assert not beside, f"use capbook.paths.data_path in {beside}"


@pytest.mark.wheel
def test_the_installed_wheel_plans_from_its_own_data(wheel, tmp_path):
    target, cwd = tmp_path / "site", tmp_path / "elsewhere"
    cwd.mkdir()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                        "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("CAPBOOK_DATA", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    heavy, out = _heavy_after("import capbook, capbook.paths\n"
                              "print(capbook.__file__)\nprint(capbook.paths.data_dir())", env=env, cwd=cwd)
    package_file, data_dir = out.splitlines()
    assert Path(package_file) == target / "capbook" / "__init__.py"
    assert Path(data_dir) == target / "capbook" / "sample_data"
    r = subprocess.run([sys.executable, "-m", "capbook.cli", "plan", "--no-sim", "--scale", "0.05", "--out", "out"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replicas" in r.stdout.lower()
    assert (cwd / "out" / "plan.csv").is_file() and (cwd / "out" / "plan.md").is_file()
    assert (cwd / "out" / "schedule.csv").read_text().startswith("hour_of_week,replicas\n")
    assert str(ROOT) not in r.stdout + r.stderr
    # and it is that copy it reads: without it, the same command fails on the file it misses
    (target / "capbook" / "sample_data" / "gateway" / "hourly.csv").unlink()
    r = subprocess.run([sys.executable, "-m", "capbook.cli", "plan", "--no-sim", "--no-autoscale", "--out", "out2"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    assert r.returncode == 2 and "hourly.csv" in r.stderr, r.stdout + r.stderr
