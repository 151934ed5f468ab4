"""``capbook book`` completes on every log × sweep that ``capbook plan`` accepts: the edge cases.

A full site build takes minutes; most of it is chapters that never read the reader's data. So
the matrix here runs only the chapters that do, each in this process: every code cell of the
chapter in one namespace, no kernel (``run_chapter``), with the data variables set as
``capbook book`` sets them. That executes exactly the code a build executes, hidden cells
included, in seconds a chapter. The cases (``tests/book_edgecases.py``) are logs with no tenant
column, one tenant, a tenant per user (thousands with one or two requests), one model, ten
minutes, three weeks, two quiet days, no end times; sweeps with the median percentiles only, a
single load level, open-loop levels from 8 (none near 1), open-loop only, closed-loop only and
vLLM's default output (no p95, top level 16). Each pair runs the chapters its case reaches;
the sweep chapters run once more with ``--slo`` objectives no level meets. One full ``capbook book`` build on an edge pair is marked ``book_build``.

Besides not failing, each test checks the sentence a chapter writes where the data cannot give
what it computes (the percentile used instead, the sample sweep shown instead, the tier split
instead of the tenant split), and the new functions behind them are tested directly.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import book_edgecases as cases  # noqa: E402

from capbook.app import bookbuild
from capbook.app import datasets  # noqa: E402
from capbook.sweeps.importers import read_sweep  # noqa: E402
from capbook.plan.steps import SLO  # noqa: E402
from capbook.sweeps.sweep import Sweep, load_sample_sweep  # noqa: E402
from capbook.logs.requestlog import read_requests  # noqa: E402

BOOK = bookbuild.ROOT / "book"
_ENV = ("CAPBOOK_REQUESTS", "CAPBOOK_SWEEP", "CAPBOOK_SLO", "CAPBOOK_HISTORY", "CAPBOOK_PRICES",
        "CAPBOOK_REQUESTS_OPTIONS", "CAPBOOK_SWEEP_OPTIONS", "CAPBOOK_REQUESTS_FORMAT")


@pytest.fixture(scope="module")
def edge(tmp_path_factory):
    """Every generated log and sweep, written once: {name: path}."""
    folder = tmp_path_factory.mktemp("edge")
    made = {f"log:{k}": f(folder) for k, f in cases.LOGS.items()}
    made.update({f"sweep:{k}": f(folder) for k, f in cases.SWEEPS.items()})
    return made


class Glued(dict):
    """The values a chapter glued, by name."""


def run_chapter(stem: str, monkeypatch, **env) -> tuple[Glued, str]:
    """Execute every code cell of ``book/<stem>.ipynb`` here, with ``env`` as the data variables.

    Returns the glued values (``myst_nb.glue`` is recorded, not displayed) and what the chapter
    printed. A cell that raises fails the test with the cell's id and the error.
    """
    import myst_nb

    for k in _ENV:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    glued = Glued()

    def glue(name, value, display=True):
        glued[name] = value

    monkeypatch.setattr(myst_nb, "glue", glue)
    nb = json.loads((BOOK / f"{stem}.ipynb").read_text(encoding="utf-8"))
    ns: dict = {"__name__": "__main__"}
    out = io.StringIO()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(src, f"{stem}.ipynb[{cell.get('id')}]", "exec"), ns)
        except Exception as exc:  # the test's failure names the cell
            pytest.fail(f"{stem} cell {cell.get('id')} failed on {env}: {type(exc).__name__}: {exc}")
    return glued, out.getvalue()


def _text(glued: Glued) -> str:
    return " ".join(str(v) for v in glued.values() if isinstance(v, str))


def _no_missing(stem: str, glued: Glued) -> None:
    """No glued sentence prints a missing value where a number or a word should be."""
    bad = re.compile(r"(?<![\w.+\-])(-?inf|nan|NaN|NaT|None)(?![\w\-])")
    for name, v in glued.items():
        if isinstance(v, str):
            assert not bad.search(v), f"{stem}: glue {name!r} reads {v!r}"
        elif isinstance(v, (float, np.floating)):
            assert np.isfinite(v) or name.endswith("_p99_prompt"), f"{stem}: glue {name!r} is {v!r}"


# --------------------------------------------------------------------------------------------
# The new functions the chapters call
# --------------------------------------------------------------------------------------------
def test_percentile_for_falls_back_as_plan_does(edge):
    medians = read_sweep(edge["sweep:p50_only"])
    assert medians.percentile_for("tpot", 95)[0] == 50
    assert "less strict than asked" in medians.percentile_for("tpot", 95)[1]
    vllm = read_sweep(edge["sweep:vllm_default"])     # medians and p99, no p95: the stricter one
    q, note = vllm.percentile_for("tpot", 95)
    assert (q, "checked at p99") == (99, note[note.index("checked"):])
    assert vllm.percentile_for("tpot", 99) == (99, None)
    assert load_sample_sweep().percentile_for("ttft", 95) == (95, None)
    empty = Sweep.from_frame(load_sample_sweep().table.assign(ttft_p95_s=np.nan, ttft_p99_s=np.nan), name="x")
    assert empty.percentile_for("ttft", 99)[0] == 50
    with pytest.raises(ValueError, match="one of"):
        load_sample_sweep().percentile_for("tpot", 90)


def test_plan_uses_the_same_percentile_rule(edge):
    from capbook.plan.steps import _checked_percentile

    vllm = read_sweep(edge["sweep:vllm_default"])
    notes: list = []
    assert _checked_percentile(vllm, SLO(), notes).tpot_percentile == 99
    assert notes == [vllm.percentile_for("tpot", 95)[1]]


def test_slots_at_objective(edge):
    pick = datasets.slots_at_objective(load_sample_sweep(), SLO())
    assert (pick.S, pick.q, pick.met, pick.text) == (32, 95, True, "")
    slow = datasets.slots_at_objective(load_sample_sweep(), SLO(tpot_target_s=0.005))
    assert (slow.S, slow.met) == (1, False) and "lowest level, 1" in slow.text and "--slo" in slow.text
    low = read_sweep(edge["sweep:vllm_default"])
    p = datasets.slots_at_objective(low, SLO(tpot_target_s=0.5))
    assert p.S == 16 and p.q == 99 and p.met and "p99" in p.text   # never above the top level measured


def test_slo_reads_capbook_slo(monkeypatch):
    monkeypatch.delenv("CAPBOOK_SLO", raising=False)
    assert datasets.slo(tpot_target_s=0.04).tpot_target_s == 0.04 and not datasets.slo_given()
    monkeypatch.setenv("CAPBOOK_SLO", "ttft=2,tpot=80ms")
    got = datasets.slo(tpot_target_s=0.04)          # the reader's objectives win over the chapter's
    assert got == SLO.parse("ttft=2,tpot=80ms") and datasets.slo_given()
    assert not datasets.using_sample_data()         # the published figures no longer apply
    assert datasets.data_source()["slo"] == "ttft=2,tpot=80ms"
    monkeypatch.setenv("CAPBOOK_SLO", "tpot=fast")
    with pytest.raises(ValueError, match="CAPBOOK_SLO"):
        datasets.slo()


def test_load_sweep_or_sample(edge, monkeypatch):
    monkeypatch.setenv("CAPBOOK_SWEEP", str(edge["sweep:single_level"]))
    sweep, note = datasets.load_sweep_or_sample(min_levels=3)
    assert sweep.name == "illustrative_chat" and "1 load level" in note and "sample sweep" in note
    sweep, note = datasets.load_sweep_or_sample(min_levels=1)
    assert sweep.name == "single_level" and note is None
    monkeypatch.setenv("CAPBOOK_SWEEP", str(edge["sweep:closed_loop"]))
    assert datasets.load_sweep_or_sample(min_levels=3)[1] is None


@pytest.mark.parametrize("raw", [
    "\x1b[0;31mValueError\x1b[0m: concurrency [32.0] outside the measured range",
    "\x1b[38;5;28;01mValueError\x1b[39;00m: concurrency [32.0] outside the measured range",
    "\x1b]8;;file:///x.py\x1b\\ValueError\x1b]8;;\x1b\\: concurrency [32.0] outside the measured range",
    r"\x1b[31mValueError\x1b[39m: concurrency [32.0] outside the measured range",
    r"\u001b[31mValueError\u001b[39m: concurrency [32.0] outside the measured range",
])
def test_failed_chapter_text_has_no_terminal_codes(raw):
    want = "ValueError: concurrency [32.0] outside the measured range"
    assert bookbuild.strip_ansi(raw) == want
    assert bookbuild._first_error(RuntimeError("Traceback...\n" + raw)) == want
    block = bookbuild.failed_chapter_admonition(raw)
    assert "\x1b" not in block and "[31m" not in block and "[0m" not in block and "001b" not in block


def test_book_takes_slo_as_plan_does(tmp_path, capsys):
    from capbook.app.cli import main

    assert main(["book", "--slo", "tpot=quick", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "--slo 'tpot=quick'" in err and "not a number" in err and not (tmp_path / "b").exists()
    env = bookbuild._data_env(None, "auto", None, slo="ttft=2,tpot=80ms")
    assert env["CAPBOOK_SLO"] == "ttft=2,tpot=80ms"
    note = bookbuild.data_note({"requests": "a", "sweep": "b", "sample": False, "slo": "ttft=2,tpot=80ms"}, "now")
    assert "objectives: <code>ttft=2,tpot=80ms</code>" in note


# --------------------------------------------------------------------------------------------
# The matrix: the chapters that read the reader's data, on every edge case
# --------------------------------------------------------------------------------------------
SWEEP_CHAPTERS = ("sweep_to_slots", "mixed_workloads", "know_your_traffic", "variability")
LOG_CHAPTERS = ("know_your_traffic", "variability", "replay_trace")


@pytest.mark.parametrize("case", sorted(cases.SWEEPS))
def test_sweep_chapters_on_each_sweep(case, edge, monkeypatch):
    sweep = read_sweep(edge[f"sweep:{case}"])
    q, q_note = sweep.percentile_for("tpot", 95)
    for stem in SWEEP_CHAPTERS:
        glued, printed = run_chapter(stem, monkeypatch, CAPBOOK_REQUESTS=edge["log:base"],
                                     CAPBOOK_SWEEP=edge[f"sweep:{case}"])
        _no_missing(stem, glued)
        if stem == "sweep_to_slots":
            assert glued["sts_q"] == q                      # the percentile plan would read
            assert (q_note or "") in glued["sts_rule_text"].replace("The sweep", "the sweep")
            assert f"p{q} TPOT" in glued["sts_rule_text"]


def test_sweep_chapters_when_no_level_meets_the_objectives(edge, monkeypatch):
    sweep = read_sweep(edge["sweep:closed_loop"])
    lowest = float(sweep.concurrency[0])
    for stem in SWEEP_CHAPTERS:
        glued, printed = run_chapter(stem, monkeypatch, CAPBOOK_REQUESTS=edge["log:base"],
                                     CAPBOOK_SWEEP=edge["sweep:closed_loop"], CAPBOOK_SLO="tpot=5ms")
        _no_missing(stem, glued)
        said = f"this page reads the sweep at its lowest level, {lowest:g}"
        assert said in (_text(glued) + printed), stem
    assert glued["var_sweep_intro"].startswith(f"We use your sweep, closed_loop, read at {int(lowest)} running")


@pytest.mark.parametrize("case", ["p50_only", "single_level", "open_from_8", "vllm_default"])
def test_textbook_breaks_on_thin_sweeps(case, edge, monkeypatch):
    glued, _ = run_chapter("textbook_breaks", monkeypatch, CAPBOOK_REQUESTS=edge["log:base"],
                           CAPBOOK_SWEEP=edge[f"sweep:{case}"])
    _no_missing("textbook_breaks", glued)
    if case == "single_level":   # the load-dependent model needs 3 levels: the sample, and why
        assert "has 1 load level" in glued["tb_sweep_intro"] and "sample sweep" in glued["tb_sweep_intro"]
    elif case == "p50_only":     # no p95 of TPOT or TTFT: the median, said so
        assert "checked at p50" in glued["tb_sweep_intro"] and glued["tb_q_ttft"] == 50
    elif case == "open_from_8":  # no level at 1: a lone request is read at the lowest level, said so
        lowest = float(read_sweep(edge["sweep:open_from_8"]).concurrency[0])
        assert lowest > 1 and f"ran one request alone (its lowest is {lowest:g}" in glued["tb_sweep_intro"]


@pytest.mark.parametrize("case", sorted(cases.LOGS))
def test_log_chapters_on_each_log(case, edge, monkeypatch):
    for stem in LOG_CHAPTERS:
        glued, printed = run_chapter(stem, monkeypatch, CAPBOOK_REQUESTS=edge[f"log:{case}"],
                                     CAPBOOK_SWEEP=edge["sweep:closed_loop"])
        _no_missing(stem, glued)
        if stem == "know_your_traffic" and case == "tenant_per_user":
            assert "No tenant of the" in glued["kt_split_text"] and "by tier" in glued["kt_split_text"]


@pytest.mark.parametrize("log, sweep, slo", [
    ("tenant_per_user", "vllm_default", None),
    ("no_end_times", "single_level", "ttft=2,tpot=40ms,tpot_p=99"),   # objectives of the reader's own
    ("quiet", "open_from_8", "ttft=2,tpot=60ms"),    # a few requests an hour; no level at 1
])
def test_capstone_on_edge_pairs(log, sweep, slo, edge, monkeypatch):
    env = {"CAPBOOK_REQUESTS": edge[f"log:{log}"], "CAPBOOK_SWEEP": edge[f"sweep:{sweep}"]}
    if slo:
        env["CAPBOOK_SLO"] = slo
    glued, printed = run_chapter("capstone_plan", monkeypatch, **env)
    want = SLO.parse(slo) if slo else SLO()
    assert glued["cp_slo"] == want.describe()                  # the objectives the reader gave, or plan's
    assert f"At {1000 * 0.6 * want.tpot_target_s:g} ms" in glued["cp_ex4_text"]
    assert "no plan on your data" not in printed                # planned on the reader's data, as plan does


def test_autoscaling_on_a_quiet_log(edge, monkeypatch):
    """Most hours of the design day have no request: the climb starts at a positive rate."""
    glued, printed = run_chapter("autoscaling", monkeypatch, CAPBOOK_REQUESTS=edge["log:quiet"],
                                 CAPBOOK_SWEEP=edge["sweep:open_from_8"], CAPBOOK_SLO="ttft=2,tpot=60ms")
    assert "no plan on your data" not in printed


def test_costs_with_a_tenant_per_user(edge, monkeypatch):
    """Thousands of tenants: no dedicated pool each (thousands of plans, many minutes), a sentence instead."""
    from capbook.paths import data_path

    glued, _ = run_chapter("what_capacity_costs", monkeypatch, CAPBOOK_REQUESTS=edge["log:tenant_per_user"],
                           CAPBOOK_SWEEP=data_path("sweeps", "illustrative_chat.csv"))   # a sweep naming its GPU
    _no_missing("what_capacity_costs", glued)
    n = read_requests(edge["log:tenant_per_user"]).to_pandas()["tenant"].nunique()
    assert f"it has {n:,} tenants" in glued["wc_pools_text"] and "at most 50" in glued["wc_pools_text"]


# --------------------------------------------------------------------------------------------
# One full build on an edge pair
# --------------------------------------------------------------------------------------------
@pytest.mark.book_build
def test_full_book_on_an_edge_pair(edge, tmp_path, capsys):
    from capbook.app.cli import main

    out = tmp_path / "site"
    code = main(["book", "--requests", str(edge["log:tenant_per_user"]), "--sweep", str(edge["sweep:vllm_default"]),
                 "--slo", "ttft=2,tpot=60ms", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    assert "failed" not in err and "\x1b[" not in err
    intro = (out / "book" / "intro.html").read_text(encoding="utf-8")
    assert "ttft=2,tpot=60ms" in intro and "did not run" not in intro
    slots = (out / "book" / "sweep_to_slots.html").read_text(encoding="utf-8")
    assert "p99 TPOT" in slots and "the TPOT objective is checked at p99" in slots
    kt = (out / "book" / "know_your_traffic.html").read_text(encoding="utf-8")
    assert "so the split below is by tier" in kt
