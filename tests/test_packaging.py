"""The package as installed: a light ``import capbook`` and ``--help``, the public names, and a
wheel that carries the sample data and runs ``capbook plan`` outside the checkout."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
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


# the console script `capbook` calls its entry point; `python -m capbook.app.cli` runs the module
_CONSOLE = ("from importlib.metadata import entry_points\n"
            "sys.argv = ['capbook', *{argv!r}]\n"
            "(main,) = entry_points(group='console_scripts', name='capbook')\n"
            "try:\n    main.load()()\nexcept SystemExit:\n    pass")
_MODULE = ("import runpy\n"
           "sys.argv = ['capbook', *{argv!r}]\n"
           "try:\n    runpy.run_module('capbook.app.cli', run_name='__main__', alter_sys=True)\n"
           "except SystemExit:\n    pass")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["trace", "--help"], ["plan", "--help"],
                                  ["book", "--help"], ["predict", "--help"]])
@pytest.mark.parametrize("entry", [_CONSOLE, _MODULE], ids=["capbook", "python -m capbook.app.cli"])
def test_help_loads_no_heavy_module(entry, argv):
    heavy, out = _heavy_after(entry.format(argv=argv))
    assert heavy == [], f"capbook {' '.join(argv)} imported {heavy}"
    assert ("capbook 0." in out) if argv == ["--version"] else ("usage: capbook" in out), out


def test_a_command_still_reaches_its_modules():
    # the converse: the lazy imports happen when a command needs them
    heavy, _ = _heavy_after("from capbook.app.cli import build_parser\n"
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
    assert "capbook/paths.py" in names and "capbook/app/cli.py" in names
    assert {f"capbook/{p}/__init__.py" for p in ("logs", "sweeps", "engine", "sim", "forecast", "plan", "cost",
                                                 "autoscale", "charts", "app")} <= names
    assert wheel.name.startswith(f"capbook-{capbook.__version__}-")  # the version is written once
    assert not any(n.startswith(("data/", "tests/", "book/")) for n in names)


def test_every_loader_finds_data_through_capbook_paths():
    """One lookup honours CAPBOOK_DATA and the wheel's copy: no module looks beside the package."""
    beside = sorted(p.name for p in (ROOT / "capbook").rglob("*.py")
                    if re.search(r"parents\[\d\]", p.read_text(encoding="utf-8")) and p.name != "bookbuild.py")
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
    r = subprocess.run([sys.executable, "-m", "capbook.app.cli", "plan", "--no-sim", "--scale", "0.05", "--out", "out"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replicas" in r.stdout.lower()
    assert (cwd / "out" / "plan.csv").is_file() and (cwd / "out" / "plan.md").is_file()
    assert (cwd / "out" / "schedule.csv").read_text().startswith("hour_of_week,replicas\n")
    assert str(ROOT) not in r.stdout + r.stderr
    # and it is that copy it reads: without it, the same command fails on the file it misses
    (target / "capbook" / "sample_data" / "gateway" / "hourly.csv").unlink()
    r = subprocess.run([sys.executable, "-m", "capbook.app.cli", "plan", "--no-sim", "--no-autoscale", "--out", "out2"],
                       capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
    assert r.returncode == 2 and "hourly.csv" in r.stderr, r.stdout + r.stderr


# -- the Spark extra and its Java runtime (make test) -------------------------------------------
def _make_rule(target: str) -> tuple[list[str], list[str]]:
    """(prerequisites, recipe lines) of one rule of the Makefile."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:(?!=)(.*)\n((?:\t.*\n)*)", text, re.M)
    assert m, f"the Makefile has no rule for {target}"
    return m.group(1).split(), [line.strip() for line in m.group(2).splitlines()]


def test_the_spark_extra_is_pinned():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [s.split(">")[0] for s in extras["spark"]] == ["pyspark"]
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().split())
    assert pins["pyspark"].startswith("4.") and "py4j" in pins  # py4j: the Python-JVM bridge pyspark uses


def test_make_test_installs_spark_and_java_but_make_book_does_not():
    for target in ("test", "unit"):
        assert "spark" in _make_rule(target)[0], f"make {target} should depend on spark"
    assert "spark" not in _make_rule("book")[0] and "spark" not in _make_rule("setup")[0]
    assert set(_make_rule("spark")[0]) == {"$(SPARK)", "java"}
    prereqs, recipe = _make_rule("$(SPARK)")
    assert {"pyproject.toml", "constraints.txt"} <= set(prereqs)
    assert any("-c constraints.txt" in line and "'.[book,test,spark]'" in line for line in recipe), recipe
    assert _make_rule("java")[1] == ["@sh tools/ensure_java.sh"]


ENSURE_JAVA = ROOT / "tools" / "ensure_java.sh"
#: A fake java printing the banner of this version, as `java -version` does (on stderr).
_JAVA = "echo 'openjdk version \"{}\" 2025-04-15' >&2"

posix_only = pytest.mark.skipif(not (Path("/bin/sh").exists() and shutil.which("sed") and shutil.which("chmod")),
                                reason="tools/ensure_java.sh is a POSIX shell script")


def _ensure_java(tmp_path, uid: int, java: str | None = None,
                 apt_get: str = "") -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run tools/ensure_java.sh with a PATH holding sed, chmod and fakes only: ``id`` printing
    ``uid``, ``java`` (a version) where given, and an ``apt-get`` that logs its arguments and
    then runs ``apt_get``. Never the real apt-get. Returns the run and the apt-get calls."""
    bin_, log = tmp_path / "bin", tmp_path / "apt.log"
    bin_.mkdir()
    for tool in ("sed", "chmod"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    fakes = {"id": f"echo {uid}", "apt-get": f'echo "$*" >> {log}\n{apt_get}'}
    if java:
        fakes["java"] = _JAVA.format(java)
    for name, body in fakes.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")  # new files: never through a symlink
        (bin_ / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bin_)
    r = subprocess.run(["/bin/sh", str(ENSURE_JAVA)], capture_output=True, text=True, timeout=60, env=env)
    return r, log.read_text().splitlines() if log.exists() else []


@posix_only
def test_ensure_java_leaves_a_java_17_alone(tmp_path):
    r, apt = _ensure_java(tmp_path, 0, java="17.0.15")
    assert (r.returncode, r.stdout, r.stderr, apt) == (0, "", "", [])


@posix_only
@pytest.mark.parametrize("java", [None, "1.8.0_392"])
def test_ensure_java_without_root_warns_in_one_line_and_carries_on(tmp_path, java):
    r, apt = _ensure_java(tmp_path, 1000, java=java)
    assert r.returncode == 0 and apt == []
    (line,) = r.stderr.splitlines()
    assert line.startswith("warning: ") and "apt-get install default-jre-headless" in line
    assert ("Java 8" in line) if java else ("no Java runtime" in line)


@posix_only
def test_ensure_java_as_root_installs_debians_default_runtime(tmp_path):
    # the fake apt-get "installs" a Java 21 (Debian 13's default) into the PATH
    java = tmp_path / "bin" / "java"
    write_java = f"printf '%s\\n' '#!/bin/sh' {shlex.quote(_JAVA.format('21.0.8'))} > {java}; chmod +x {java}"
    r, apt = _ensure_java(tmp_path, 0, apt_get=f'case "$*" in *install*) {write_java};; esac')
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert 'version "21.0.8"' in java.read_text()
    assert apt == ["update -qq", "install -y -qq default-jre-headless"]
    assert "installing default-jre-headless" in r.stdout


@posix_only
def test_ensure_java_as_root_says_when_the_install_did_not_help(tmp_path):
    r, apt = _ensure_java(tmp_path, 0, apt_get="exit 100")
    assert r.returncode == 0 and apt == ["update -qq"]
    assert r.stderr.splitlines()[-1].startswith("warning: no Java runtime")
