"""Tests of ``capbook plan`` and ``capbook book``.

The end-to-end builds (marked ``book_build``; slow, deselect them with ``-m "not book_build"``)
are elsewhere: tests/test_hostile_book.py builds the whole book on hostile data and checks the
site a reader gets (the note, the marker file, no traceback, the capstone's plan), and
tests/test_book_realdata.py builds it on real public logs. A build on the sample data would
repeat what ``make test`` already does (nbval executes every chapter on it; the site is built).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from capbook.app.bookbuild import ROOT, chapter_files, data_note
from capbook.app.cli import main
from capbook.plan.steps import capacity_plan
from capbook.paths import data_path
from capbook.sweeps.sweep import load_sample_sweep
from capbook.logs.requestlog import read_requests


def _log(tmp_path, hours=2.0, rate=3.0, seed=7):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, int(rate * hours * 3600 * 1.2)))
    t = t[t < hours * 3600]
    n = t.size
    df = pd.DataFrame({
        "arrival_time": pd.Timestamp("2026-02-02", tz="UTC") + pd.to_timedelta(np.round(t * 1e6), unit="us"),
        "input_tokens": rng.integers(200, 3000, n), "output_tokens": rng.integers(20, 600, n),
        "model": "m", "tier": "interactive", "status": "served",
    })
    p = tmp_path / "log.parquet"
    df.to_parquet(p, index=False)
    return p


SWEEP_CSV = data_path("sweeps", "illustrative_chat.csv")


# --------------------------------------------------------------------------------------------
# capbook plan
# --------------------------------------------------------------------------------------------
def test_plan_command_prints_and_exports_the_api_plan(tmp_path, capsys):
    log_path = _log(tmp_path)
    out = tmp_path / "plan"
    code = main(["plan", "--requests", str(log_path), "--sweep", str(SWEEP_CSV), "--out", str(out),
                 "--no-sim", "--slo", "tpot=100ms", "--horizon", "12", "--spares", "2", "--no-autoscale"])
    assert code == 0
    text = capsys.readouterr().out
    api = capacity_plan(read_requests(log_path), load_sample_sweep("illustrative_chat"),
                        slo=capacity_plan.__globals__["SLO"](tpot_target_s=0.1), lead_time_weeks=12, spares=2,
                        simulate=False)
    assert text.startswith(f"Capacity plan: {api.total} replicas of m for week 12")
    assert api.slots.S == 64                      # the 100 ms TPOT objective reached the plan
    table = pd.read_csv(out / "plan.csv")
    got = dict(zip(table["quantity"], table["value"]))
    assert int(float(got["total replicas"])) == api.total and int(float(got["failure spare"])) == 2
    assert float(got["output tokens"]) == pytest.approx(api.output_tps, rel=1e-9)
    md = (out / "plan.md").read_text()
    assert md.startswith(f"# Capacity plan: {api.total} replicas")


@pytest.mark.parametrize("argv, word", [
    (["--requests", "/nonexistent/log.csv"], "no such file"),
    (["--sweep", "/nonexistent/sweep.json"], "no such file"),
    (["--slo", "ttft=fast"], "not a number"),
    (["--headroom", "1.5"], "headroom"),
])
def test_plan_command_rejects_bad_input(tmp_path, capsys, argv, word):
    out = tmp_path / "plan"
    assert main(["plan", "--no-sim", "--out", str(out), *argv]) == 2
    assert word in capsys.readouterr().err
    assert not out.exists()


def test_plan_command_rejects_a_file_that_is_not_a_log(tmp_path, capsys):
    bad = tmp_path / "notes.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["plan", "--requests", str(bad), "--no-sim", "--out", str(tmp_path / "o")]) == 2
    assert "notes.csv" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# capbook book: validation and the pieces
# --------------------------------------------------------------------------------------------
def test_book_validates_before_building(tmp_path, capsys):
    out = tmp_path / "site"
    bad_sweep = tmp_path / "sweep.csv"
    bad_sweep.write_text("x,y\n1,2\n")
    assert main(["book", "--sweep", str(bad_sweep), "--out", str(out)]) == 2
    assert "--sweep" in capsys.readouterr().err and not out.exists()
    assert main(["book", "--requests", str(tmp_path / "missing.parquet"), "--out", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err and not out.exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert main(["book", "--out", str(busy)]) == 2
    assert "not empty" in capsys.readouterr().err and (busy / "keep.txt").read_text() == "mine"
    assert main(["book", "--out", str(ROOT / "book" / "x")]) == 2
    assert "outside the repository" in capsys.readouterr().err


def test_chapter_list_follows_the_toc():
    import yaml

    toc = (ROOT / "_toc.yml").read_text()
    files = [p.stem for p in chapter_files()]
    in_toc = re.findall(r"file:\s*book/(\w+)", toc)
    assert files == [f for f in in_toc if (ROOT / "book" / f"{f}.ipynb").is_file()]
    # the capstone closes the story and the chapter that prices its plan follows it
    assert files[-2:] == ["capstone_plan", "what_capacity_costs"]
    assert yaml.safe_load(toc)["parts"][-1]["caption"] == "Reference"


def test_data_note_names_the_sources():
    note = data_note({"requests": "/data/log.parquet", "sweep": "sample sweeps (data/sweeps)", "sample": False},
                     "2026-11-30 12:00 UTC")
    assert note.startswith('<div class="admonition note') and note.rstrip().endswith("</div>")
    assert "<code>/data/log.parquet</code>" in note and "skipped" in note
    assert "matches the published book" in data_note(
        {"requests": "sample", "sweep": "sample", "sample": True}, "now")
    # (what a file name cannot do to the note: tests/test_hostile_book.py)


# The builds on real logs (and what the forecasting chapters say of a log of an hour or two)
# are tests/test_book_realdata.py's.


def test_a_failing_chapter_is_reported_with_its_error(tmp_path):
    import nbformat

    from capbook.app.bookbuild import _execute_timed

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("raise ValueError('the log has 2 periods')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "bad.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RuntimeError, match="the log has 2 periods"):
        _execute_timed(str(path), {**__import__("os").environ}, 60)
    with pytest.raises(ValueError, match="jobs"):
        __import__("capbook.app.bookbuild").bookbuild.build_book(tmp_path / "o", jobs=0)


def test_a_hung_chapter_is_killed_and_reported(tmp_path):
    import nbformat

    from capbook.app.bookbuild import _execute_timed

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(600)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "hang.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(RuntimeError, match="no result after 15 s, 1 attempts"):
        _execute_timed(str(path), {**__import__("os").environ}, 300, wall_s=15, attempts=1)
    assert nbformat.read(path, 4).cells[0].outputs == []      # nothing half-written


class _FakeChannel:
    """A kernel channel on a fake clock: each poll sleeps its whole timeout (a missed wake-up) and then
    finds the reply if one has arrived, as the asyncio ZeroMQ poll's final check does."""

    def __init__(self, reply_at_s):
        self.now, self.reply_at_s, self.polls = 0.0, reply_at_s, []

    def clock(self):
        return self.now

    async def get_msg(self, timeout=None):
        import queue

        assert timeout is not None, "a sliced wait never polls without a timeout"
        self.polls.append(timeout)
        self.now += timeout
        if self.reply_at_s is not None and self.now >= self.reply_at_s:
            return {"msg_type": "execute_reply"}
        raise queue.Empty


def test_a_missed_wakeup_costs_one_poll_slice_not_the_cell_timeout():
    # regression: sweep_to_slots (and the_knee, little_law: whichever chapter raced another kernel's start)
    # waited the whole 300 s cell timeout for an execute_reply that had arrived at once
    import asyncio

    from capbook.app.bookbuild import _POLL_SLICE_S, _sliced_get_msg

    ch = _FakeChannel(reply_at_s=0.0)
    assert asyncio.run(ch.get_msg(timeout=300)) and ch.now == 300            # the unsliced poll: 300 s
    ch = _FakeChannel(reply_at_s=0.0)
    get = _sliced_get_msg(ch.get_msg, clock=ch.clock)
    assert asyncio.run(get(timeout=300))["msg_type"] == "execute_reply"
    assert ch.polls == [_POLL_SLICE_S] and ch.now <= 1.0                    # seconds waited: one slice
    ch = _FakeChannel(reply_at_s=3.5)                                        # a reply that takes 3.5 s
    assert asyncio.run(_sliced_get_msg(ch.get_msg, clock=ch.clock)(timeout=None))
    assert ch.polls == [1.0] * 4 and ch.now == 4.0


def test_a_sliced_wait_keeps_the_timeout():
    import asyncio
    import queue

    from capbook.app.bookbuild import _sliced_get_msg

    ch = _FakeChannel(reply_at_s=None)
    with pytest.raises(queue.Empty):
        asyncio.run(_sliced_get_msg(ch.get_msg, clock=ch.clock)(timeout=2.5))
    assert ch.polls == [1.0, 1.0, 0.5] and ch.now == 2.5


def test_chapters_execute_with_sliced_channel_waits(tmp_path):
    import nbformat

    from capbook.app.bookbuild import _notebook_client_class

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    seen = []

    def record(cell, cell_index):
        seen.extend(getattr(ch.get_msg, "__qualname__", "") for ch in (client.kc.shell_channel, client.kc.iopub_channel))

    client = _notebook_client_class()(nb, timeout=60, kernel_name="python3", on_cell_execute=record)
    client.execute()
    assert seen == ["_sliced_get_msg.<locals>.get"] * 2


@pytest.mark.parametrize("kw, name", [({"jobs": True}, "jobs"), ({"jobs": "2"}, "jobs"), ({"jobs": 1.5}, "jobs"),
                                      ({"timeout": 0}, "timeout"), ({"timeout": float("nan")}, "timeout")])
def test_build_book_refuses_bad_numbers_naming_the_argument(tmp_path, kw, name):
    from capbook.app.bookbuild import build_book

    with pytest.raises(ValueError, match=rf"^{name} must"):
        build_book(tmp_path / "o", **kw)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, flag", [(["--jobs", "0"], "--jobs"), (["--jobs", "two"], "--jobs"),
                                        (["--timeout", "-5"], "--timeout"), (["--timeout", "1.5"], "--timeout")])
def test_book_number_flags_are_checked_and_named(tmp_path, capsys, argv, flag):
    assert main(["book", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"capbook book: {flag} ") and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_book_takes_the_replica_hardware_a_sweep_does_not_record(tmp_path, monkeypatch, capsys):
    """--gpu and --tensor-parallel reach every chapter as the sweep's configuration (filled where
    the sweep is silent), without --prices; a bad count names its flag."""
    from capbook.app import bookbuild
    from capbook.app import datasets

    seen = {}
    monkeypatch.setattr(bookbuild, "build_book", lambda out, **kw: seen.update(kw) or 0)
    sweep = data_path("sweeps", "illustrative_chat.csv")
    t = pd.read_csv(sweep).drop(columns=["gpu", "tensor_parallel"], errors="ignore")
    t.to_csv(tmp_path / "s.csv", index=False)
    assert main(["book", "--sweep", str(tmp_path / "s.csv"), "--gpu", "H100-SXM-80GB",
                 "--tensor-parallel", "4", "--out", str(tmp_path / "o")]) == 0
    assert seen["sweep_options"]["config"] == {"gpu": "H100-SXM-80GB", "tensor_parallel": 4}
    # what a chapter then reads through capbook.app.datasets
    monkeypatch.setenv("CAPBOOK_SWEEP", str(tmp_path / "s.csv"))
    monkeypatch.setenv("CAPBOOK_SWEEP_OPTIONS", __import__("json").dumps(seen["sweep_options"]))
    sw = datasets.load_sweep()
    assert sw.config["gpu"] == "H100-SXM-80GB" and sw.config["tensor_parallel"] == 4
    assert main(["book", "--tensor-parallel", "0", "--out", str(tmp_path / "p")]) == 2
    assert "--tensor-parallel" in capsys.readouterr().err
