"""The real demand shape (data/demand, tools/make_demand_shape.py, capbook.forecast.shapes.load_demand_shape).

The file is checked against its source (the script on ../shared's ServeGen folder gives it byte
for byte), against an independent reader of the same source
(:func:`capbook.forecast.tokens.read_servegen_hourly`), against data/README.md's facts, and the
loader and the script against malformed copies. Tests on ../shared skip where it is absent.
"""
from __future__ import annotations

import csv
import importlib.util
import math
import re

import numpy as np
import pandas as pd
import pytest

from capbook.app import datasets
from capbook.forecast.tokens import read_servegen_hourly
from conftest import ROOT

FILE = ROOT / "data" / "demand" / "servegen_m_large_10min.csv"
HEADER = ["window_start_s", "rate_req_per_s", "active_clients"]


def _script():
    spec = importlib.util.spec_from_file_location("make_demand_shape", ROOT / "tools" / "make_demand_shape.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(path=FILE) -> tuple[list[str], list[list[str]]]:
    """(comment lines, data rows) of the file, read with the csv module (not pandas)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comments = [ln for ln in lines if ln.startswith("#")]
    body = list(csv.reader(ln for ln in lines if not ln.startswith("#")))
    assert body[0] == HEADER
    return comments, body[1:]


@pytest.fixture(scope="module")
def servegen(shared_dir):
    folder = shared_dir / "traces" / "servegen" / "language" / "m-large"
    if not folder.is_dir():
        pytest.skip(f"{folder} (Alibaba ServeGen's m-large descriptors) is absent; the shipped file "
                    "is checked against it only where it is present")
    return folder


# --------------------------------------------------------------------------------------------
# the file
# --------------------------------------------------------------------------------------------
def test_the_script_gives_the_shipped_file_byte_for_byte(servegen):
    mod = _script()
    clients, rows = mod.derive(servegen)
    assert clients == 162
    assert mod.to_csv_text(clients, rows) == FILE.read_text(encoding="utf-8"), (
        "data/demand/servegen_m_large_10min.csv is stale: run python tools/make_demand_shape.py")
    assert mod.main([str(servegen), "--check"]) == 0


def test_the_file_has_2016_windows_of_600_s_with_positive_finite_rates():
    comments, rows = _rows()
    assert len(rows) == 2016
    assert [int(r[0]) for r in rows] == list(range(0, 2016 * 600, 600))
    rates = [float(r[1]) for r in rows]
    assert all(math.isfinite(x) and x > 0 for x in rates)
    assert all(re.fullmatch(r"\d+\.\d{4}", r[1]) for r in rows)  # rounded to 4 decimals
    active = [int(r[2]) for r in rows]
    assert all(1 <= n <= 162 for n in active)
    head = "\n".join(comments)
    for needed in ("alibaba/ServeGen", "Apache-2.0", "f891d118", "4d6f0c77",
                   "derived: sum over 162 clients of rate_req_per_s per 600 s window; rates in requests per second"):
        assert needed in head, needed


def test_active_client_windows_match_the_shared_readme():
    # ../shared/traces/README.md, hand-computed there: 99,839 active client-windows
    assert sum(int(r[2]) for r in _rows()[1]) == 99_839


def test_the_loader_returns_the_file():
    s = datasets.load_demand_shape()
    _, rows = _rows()
    assert datasets.demand_shape_path() == datasets.data_dir() / "demand" / "servegen_m_large_10min.csv"
    assert s.name == "rate_req_per_s" and s.index.name == "window_start_s"
    assert s.index.dtype == np.int64 and s.dtype == np.float64
    assert s.index.tolist() == [int(r[0]) for r in rows]
    assert s.tolist() == [float(r[1]) for r in rows]
    assert s.attrs["bin_s"] == 600.0
    src = s.attrs["source"]
    assert "\n" not in src and "ServeGen" in src and "Apache-2.0" in src and "f891d118" in src


def test_the_loader_follows_capbook_data(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("moved\n")
    (tmp_path / "demand").mkdir()
    lines = FILE.read_text().splitlines()
    (tmp_path / "demand" / FILE.name).write_text("\n".join(lines[:9]) + "\n")  # first two windows
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    assert datasets.demand_shape_path() == tmp_path / "demand" / FILE.name
    assert len(datasets.load_demand_shape()) == 2


def test_the_hourly_sums_equal_the_independent_reader(servegen):
    s = datasets.load_demand_shape()
    hourly = (s * s.attrs["bin_s"]).groupby(s.index // 3600).sum()
    other = read_servegen_hourly(servegen)
    assert len(hourly) == len(other) == 336
    # each window's rate is rounded to 4 decimals: at most 6 × 600 × 0.00005 requests an hour
    assert np.abs(hourly.to_numpy() - other.to_numpy()).max() <= 6 * 600 * 0.5e-4 + 1e-6
    # ../shared/traces/README.md: hourly requests mean 705,038, min 210,644, max 1,313,036
    assert (round(hourly.mean()), round(hourly.min()), round(hourly.max())) == (705_038, 210_644, 1_313_036)


def _readme_facts() -> dict[str, float]:
    text = (ROOT / "data" / "README.md").read_text(encoding="utf-8")
    section = text.split("## A real day-and-week demand shape (`data/demand/`)")[1].split("\n## ")[0]
    table = section.split("### Facts (computed from the file)")[1]
    return {m[0]: float(m[1]) for m in re.findall(r"^\| ([a-z /]+?) \| ([\d.]+) \|", table, re.M)}


def test_the_readme_facts_are_the_file_s():
    _, rows = _rows()
    start = np.array([int(r[0]) for r in rows])
    rate = np.array([float(r[1]) for r in rows])
    by_hour = np.array([rate[(start // 3600) % 24 == h].mean() for h in range(24)])
    facts = _readme_facts()
    assert facts == {
        "mean rate": round(rate.mean(), 2),
        "min rate": round(rate.min(), 2),
        "max rate": round(rate.max(), 2),
        "peak / mean": round(rate.max() / rate.mean(), 2),
        "busiest hour of day": int(by_hour.argmax()),
        "quietest hour of day": int(by_hour.argmin()),
    }
    text = (ROOT / "data" / "README.md").read_text(encoding="utf-8")
    assert f"window {start[rate.argmin()]:,} s" in text and f"window {start[rate.argmax()]:,} s" in text
    assert f"mean {by_hour.max():.1f} requests/s" in text and f"mean {by_hour.min():.1f} requests/s" in text


# --------------------------------------------------------------------------------------------
# malformed copies: the loader
# --------------------------------------------------------------------------------------------
def _copy(tmp_path, edit) -> "Path":  # noqa: F821
    frame = pd.read_csv(FILE, comment="#")
    frame = edit(frame)
    path = tmp_path / "shape.csv"
    frame.to_csv(path, index=False)
    return path


def test_the_loader_names_a_missing_column(tmp_path):
    path = _copy(tmp_path, lambda f: f.drop(columns="rate_req_per_s"))
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: no 'rate_req_per_s' column"):
        datasets.load_demand_shape(path)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_the_loader_refuses_a_negative_or_missing_rate(tmp_path, bad):
    def edit(f):
        f.loc[5, "rate_req_per_s"] = bad
        return f

    path = _copy(tmp_path, edit)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: data row 6, column rate_req_per_s: .* "
                                         r"not a finite rate >= 0"):
        datasets.load_demand_shape(path)


@pytest.mark.parametrize("edit, row", [
    (lambda f: f.drop(index=10).reset_index(drop=True), 11),     # a window missing
    (lambda f: f.assign(window_start_s=f.window_start_s * 2), 2),  # 1,200 s windows
    (lambda f: f.assign(window_start_s=f.window_start_s + 600), 1),  # not from 0
])
def test_the_loader_refuses_uneven_windows(tmp_path, edit, row):
    path = _copy(tmp_path, edit)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: data row {row}, column window_start_s: "
                                         r".*windows of 600 s from 0"):
        datasets.load_demand_shape(path)


def test_the_loader_says_how_to_make_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="make_demand_shape"):
        datasets.load_demand_shape(tmp_path / "absent.csv")


# --------------------------------------------------------------------------------------------
# the script on a small hand-made folder, and on malformed copies
# --------------------------------------------------------------------------------------------
def _folder(tmp_path, clients: dict[int, list[str]]):
    for n, lines in clients.items():
        (tmp_path / f"chunk-{n}-trace.csv").write_text("".join(ln + "\n" for ln in lines))
    return tmp_path


def test_the_script_sums_a_hand_made_folder(tmp_path):
    mod = _script()
    folder = _folder(tmp_path, {
        2: ["0,1.5,1.0,Gamma,1.0,0.6", "600,0,0,,0,0"],
        10: ["0,0.25,2.0,Weibull,0.5,1.0", "600,0.125,1.0,Gamma,1.0,8.0"],
    })
    clients, rows = mod.derive(folder)
    assert [p.name for p in mod.client_files(folder)] == ["chunk-2-trace.csv", "chunk-10-trace.csv"]
    assert (clients, rows) == (2, [(0, 1.75, 2), (600, 0.125, 1)])
    text = mod.to_csv_text(clients, rows)
    assert text.splitlines()[-3:] == ["window_start_s,rate_req_per_s,active_clients", "0,1.7500,2", "600,0.1250,1"]
    out = tmp_path / "out.csv"
    assert mod.main([str(folder), "--out", str(out)]) == 0
    assert out.read_text() == text and mod.main([str(folder), "--out", str(out), "--check"]) == 0
    s = datasets.load_demand_shape(out)
    assert s.tolist() == [1.75, 0.125]


@pytest.mark.parametrize("line, why", [
    ("600,0.5,1.0,Gamma,1.0", "row 2 has 5 columns, expected 6"),
    ("600,-0.5,1.0,Gamma,1.0,2.0", "row 2: rate_req_per_s -0.5 is not a finite rate >= 0"),
    ("1200,0.5,1.0,Gamma,1.0,2.0", "row 2: window_start_s 1200, expected 600"),
])
def test_the_script_names_the_malformed_file(tmp_path, line, why):
    mod = _script()
    folder = _folder(tmp_path, {0: ["0,1,1,Gamma,1,1", "600,1,1,Gamma,1,1"], 1: ["0,1,1,Gamma,1,1", line]})
    with pytest.raises(SystemExit, match=re.escape(f"{folder / 'chunk-1-trace.csv'}: {why}")):
        mod.derive(folder)
