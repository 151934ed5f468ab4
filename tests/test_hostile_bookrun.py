"""``capbook book`` against a hostile output folder, interrupts and chapters that fail (issue 28).

- a rebuild never deletes what capbook did not write: the marker lists every file a build wrote
  (size and SHA-256), and a folder holding anything more, or a marker without that list, is refused
  before any computation; the new build is swapped in whole (old or new, never half);
- ``--out`` problems (a file on the path, a read-only folder, too long a name) exit 2 before any
  chapter runs;
- Ctrl-C (and SIGTERM) stops the build within seconds and leaves no process and no temporary folder;
- a failing chapter does not cost the book: it shows its code with the error (escaped) at its top.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from capbook.app import bookbuild
from capbook.app.bookbuild import ROOT, _MARKER, check_out
from capbook.app.cli import main


def _earlier_build(folder: Path) -> Path:
    """A folder as a finished ``capbook book`` build leaves it (pages and the marker with its manifest)."""
    (folder / "book").mkdir(parents=True)
    (folder / "index.html").write_text("<html>old</html>")
    (folder / "book" / "intro.html").write_text("<html>intro</html>")
    bookbuild._write_marker(folder, {"built": "earlier", "requests": "r", "sweep": "s", "sample": True})
    return folder


@pytest.fixture
def no_inputs_read(monkeypatch):
    """The CLI must refuse --out before it reads the data (and long before any chapter runs)."""
    import capbook.app.cli

    def refuse(*a, **k):
        raise AssertionError("the inputs were read before --out was checked")

    monkeypatch.setattr(capbook.app.cli, "_load_inputs", refuse)
    monkeypatch.setattr(bookbuild, "_stage_folder", refuse)


# --------------------------------------------------------------------------------------------
# a rebuild never deletes the user's files
# --------------------------------------------------------------------------------------------
def test_a_rebuild_refuses_a_folder_holding_the_users_files(tmp_path, capsys, no_inputs_read):
    out = _earlier_build(tmp_path / "site")
    check_out(out)                                    # capbook's own build alone: may be replaced
    (out / "notes.md").write_text("my notes")
    (out / "drafts").mkdir()
    (out / "drafts" / "ch1.md").write_text("draft")
    assert main(["book", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"capbook book: --out {out} holds files capbook did not write (drafts/, notes.md)")
    assert "move them" in err and err.count("\n") == 1
    assert (out / "notes.md").read_text() == "my notes" and (out / "drafts" / "ch1.md").read_text() == "draft"


def test_a_changed_or_extra_file_of_the_build_counts_as_the_users(tmp_path):
    out = _earlier_build(tmp_path / "site")
    (out / "book" / "intro.html").write_text("<html>intro, with my annotations</html>")
    for i in range(6):
        (out / f"n{i}.txt").write_text("x")
    with pytest.raises(ValueError, match=r"book/intro.html \(changed since capbook wrote it\), n0.txt, n1.txt, "
                                         r"n2.txt, \.\.\. \(7 in all\)"):
        check_out(out)


@pytest.mark.parametrize("marker", ["{}", "not json", '{"manifest": {"files": {"x": 1}, "folders": []}}',
                                    '{"built": "2026", "requests": "r", "sweep": "s", "sample": true}'])
def test_a_planted_or_old_marker_is_refused(tmp_path, capsys, no_inputs_read, marker):
    out = tmp_path / "site"
    out.mkdir()
    (out / "unrelated.txt").write_text("mine")
    (out / _MARKER).write_text(marker)
    assert main(["book", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out} holds a {_MARKER} without the list of the files capbook wrote" in err
    assert "deletes nothing" in err
    assert (out / "unrelated.txt").read_text() == "mine"


def test_the_new_build_is_swapped_in_whole(tmp_path):
    out = _earlier_build(tmp_path / "site")
    stage = bookbuild._stage_folder(out)
    assert stage.parent == out.parent and stage.name.startswith(".capbook-book-")
    new = stage / "site"
    new.mkdir()
    (new / "index.html").write_text("<html>new</html>")
    bookbuild._swap_in(new, out)
    assert (out / "index.html").read_text() == "<html>new</html>" and not (out / "book").exists()
    stage.rmdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]      # the old build is gone, nothing aside


def test_a_failed_swap_leaves_the_old_build(tmp_path, monkeypatch):
    out = _earlier_build(tmp_path / "site")
    new = tmp_path / "new"
    new.mkdir()
    (new / "index.html").write_text("<html>new</html>")
    real_rename, calls = os.rename, []

    def rename(a, b):
        calls.append((a, b))
        if len(calls) == 2:                         # the new build onto out: the disk is full
            raise OSError(28, "No space left on device")
        real_rename(a, b)

    monkeypatch.setattr(bookbuild.os, "rename", rename)
    with pytest.raises(OSError):
        bookbuild._swap_in(new, out)
    assert (out / "index.html").read_text() == "<html>old</html>" and (out / "book" / "intro.html").is_file()


def test_ctrl_c_during_the_swap_waits_for_its_end(tmp_path, monkeypatch):
    out = _earlier_build(tmp_path / "site")
    new = tmp_path / "new"
    new.mkdir()
    (new / "index.html").write_text("<html>new</html>")
    real_rename = os.rename

    def rename(a, b):
        os.kill(os.getpid(), signal.SIGINT)        # Ctrl-C between the two renames
        real_rename(a, b)

    monkeypatch.setattr(bookbuild.os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        with bookbuild._Signals() as signals, signals.deferred():
            bookbuild._swap_in(new, out)
    assert (out / "index.html").read_text() == "<html>new</html>"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored


# --------------------------------------------------------------------------------------------
# --out problems: exit 2 before any computation
# --------------------------------------------------------------------------------------------
def test_output_path_problems_exit_2_before_any_computation(tmp_path, capsys, monkeypatch, no_inputs_read):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    long_name = tmp_path / ("n" * 300)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == read_only else real_access(p, mode, **k))
    cases = [(a_file, "exists and is not a folder"),
             (a_file / "site", f"{a_file} is a file, not a folder"),
             (long_name / "site", "is 300 bytes long; this file system allows 255"),
             (read_only / "site", f"cannot write in {read_only} (permission denied"),
             (read_only / "deeper" / "site", f"cannot write in {read_only} (permission denied")]
    for out, why in cases:
        assert main(["book", "--out", str(out)]) == 2, out
        err = capsys.readouterr().err
        assert err.startswith("capbook book: --out ") and why in err and err.count("\n") == 1, err
    assert not (read_only / "deeper").exists()
    with pytest.raises(ValueError, match="this file system allows 255"):
        bookbuild.build_book(long_name)


def test_an_unwritable_parent_found_on_creation_is_named(tmp_path, monkeypatch):
    import errno
    import tempfile

    def read_only_fs(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkdtemp", read_only_fs)
    with pytest.raises(ValueError, match=rf"^--out {tmp_path / 'site'}: cannot write in {tmp_path} "
                                         r"\(Read-only file system\)"):
        bookbuild._stage_folder(tmp_path / "site")


# --------------------------------------------------------------------------------------------
# a failed chapter: its error at its top, escaped; the intro lists it
# --------------------------------------------------------------------------------------------
HOSTILE = ("ValueError: column '<script>alert(1)</script>' {glue:text}`x` $\\sum$ [a](javascript:x) ```{danger}\n\n"
           "# heading\n\n<img src=x onerror=alert(1)> :::{admonition} \x1b[31mred\x1b[0m")


def test_the_failed_chapter_admonition_is_one_escaped_html_block():
    from markdown_it import MarkdownIt

    for block in (bookbuild.failed_chapter_admonition(HOSTILE),
                  bookbuild.failed_chapters_note({"Title <b>{x}</b>": HOSTILE})):
        assert "<script" not in block and "<img" not in block and "<b>" not in block
        assert not any(ch in block for ch in "{}$`\x1b")
        assert "\n\n" not in block
        tokens = MarkdownIt("commonmark").parse(block)
        assert [t.type for t in tokens] == ["html_block"]        # passed through whole, nothing parsed
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in block and "&#123;glue&#58;text&#125;" in block


def test_a_failed_chapter_keeps_its_source_under_the_error(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# The knee\n\nIntro text."),
                                         nbformat.v4.new_code_cell("x = 1")])
    path = tmp_path / "the_knee.ipynb"
    nbformat.write(nb, path)
    assert bookbuild._mark_failed(path, "ZeroDivisionError: float division by zero") == "The knee"
    cells = nbformat.read(path, 4).cells
    assert cells[0].source.startswith("# The knee\n\n<div class=\"admonition error capbook-failed\">")
    assert "ZeroDivisionError&#58; float division by zero" in cells[0].source and "Intro text." in cells[0].source
    assert cells[1].source == "x = 1" and cells[1].outputs == []
    intro = tmp_path / "intro.md"
    note = bookbuild.data_note({"requests": "r", "sweep": "s", "sample": False}, "now")
    intro.write_text(f"# Book\n\n{note}\nThe intro.\n")
    bookbuild._note_failures(intro, note, {"The knee": "ZeroDivisionError: float division by zero"})
    text = intro.read_text()
    assert text.index(note) < text.index("1 chapter did not run on these data") < text.index("The intro.")


# --------------------------------------------------------------------------------------------
# interrupts: every process of the build is killed, kernels included
# --------------------------------------------------------------------------------------------
def test_kill_tree_kills_a_grandchild_in_a_session_of_its_own():
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True); "
            "print(p.pid, flush=True); time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    grandchild = int(child.stdout.readline())
    bookbuild._kill_tree(child.pid)
    child.wait(timeout=10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{grandchild}").exists() and time.monotonic() < deadline:
        if (Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0]) == "Z":
            break                                   # killed; waiting for its new parent to reap it
        time.sleep(0.05)
    assert not Path(f"/proc/{grandchild}").exists() or \
        Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _tagged(tag: str) -> list[tuple[int, str]]:
    """Processes whose environment holds ``tag`` (the build's and everything it started)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if tag.encode() not in Path(f"/proc/{pid}/environ").read_bytes():
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append((int(pid), cmd))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("signals", [(signal.SIGINT,), (signal.SIGINT, signal.SIGINT), (signal.SIGTERM,)],
                         ids=["ctrl-c", "ctrl-c-twice", "sigterm"])
def test_an_interrupt_stops_the_book_and_leaves_nothing(tmp_path, signals):
    out = _earlier_build(tmp_path / "site")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    tmpdir = Path(tempfile.mkdtemp(prefix="cbt-", dir="/tmp"))   # short: kernel sockets go there
    tag = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir), "CAPBOOK_INTERRUPT_TEST": tag}
    proc = subprocess.Popen([sys.executable, "-m", "capbook.app.cli", "book", "--out", str(out),
                             "--chapters", "little_law,the_knee"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any("ipykernel" in cmd for _, cmd in _tagged(tag)):
            assert proc.poll() is None and time.monotonic() < deadline, "no chapter kernel started"
            time.sleep(0.2)
        t0 = time.monotonic()
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.05)
        code = proc.wait(timeout=15)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert code == 130 and err.rstrip().endswith("capbook book: interrupted"), err
    assert took < 10
    time.sleep(0.5)
    assert _tagged(tag) == []                           # no chapter, kernel or site build left running
    assert list(tmpdir.iterdir()) == []                 # the temporary folders are gone
    tmpdir.rmdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]   # nothing staged beside --out
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# --------------------------------------------------------------------------------------------
# end to end, on a two-chapter subset: a failing chapter and the site is still built
# --------------------------------------------------------------------------------------------
@pytest.mark.book_build
def test_a_failing_chapter_leaves_the_site_built(tmp_path, monkeypatch, capsys):
    import re

    def execute(path, env, timeout, children=None):     # the other chapters stay unexecuted (fast)
        if Path(path).stem == "the_knee":
            raise RuntimeError(HOSTILE)
        return 0.0

    monkeypatch.setattr(bookbuild, "_execute_timed", execute)
    out = tmp_path / "site"
    assert bookbuild.build_book(out, chapters=["little_law", "the_knee"], progress=False) == 1
    err = capsys.readouterr().err
    assert "1 of 2 chapters failed on this data" in err and "book/the_knee.ipynb: " in err
    page = (out / "book" / "the_knee.html").read_text()
    assert "This chapter did not run on your data" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "onerror=alert" not in page.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    intro = re.sub(r"<[^>]+>", "", (out / "book" / "intro.html").read_text())
    assert "1 chapter did not run on these data" in intro
    marker = json.loads((out / _MARKER).read_text())
    assert list(marker["failed"]) == ["book/the_knee.ipynb"]
    check_out(out)                                        # its manifest covers every file it wrote


# --------------------------------------------------------------------------------------------
# the project's own request log through the two chapters that failed on it
# --------------------------------------------------------------------------------------------
@pytest.mark.book_build
@pytest.mark.parametrize("chapter", ["variability", "autoscaling"])
def test_chapters_run_on_the_projects_sample_requests(tmp_path, chapter):
    import shutil

    from capbook.paths import data_path

    shutil.copytree(ROOT / "book", tmp_path / "book")
    env = {**os.environ, **{k: v for k, v in bookbuild._data_env(data_path("requests", "sample_requests.parquet"),
                                                                 "auto", None).items() if v}}
    bookbuild._execute_timed(str(tmp_path / "book" / f"{chapter}.ipynb"), env, 300)
