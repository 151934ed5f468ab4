"""Re-run the whole book on a reader's data and build the site (``capbook book``).

Every chapter reads its data through :mod:`capbook.app.datasets`, so pointing ``CAPBOOK_REQUESTS``
(and ``CAPBOOK_SWEEP``) at a reader's files is enough to re-run it. :func:`build_book` does
that without touching the repository's own build:

1. copies the book's sources (``_config.yml``, ``_toc.yml``, ``book/``) into a temporary
   folder, with execution switched off in the copied configuration (the repository uses
   ``execute_notebooks: cache``, whose cache would otherwise hold the sample-data results);
2. writes a note at the top of the copied ``intro.md`` saying which data the copy was built
   from (:func:`capbook.app.datasets.data_source`);
3. executes every chapter of the table of contents, one fresh kernel each, with the data
   variables in the kernel's environment, showing progress per chapter; a chapter that fails
   keeps its unexecuted source under an admonition naming the error, and the first page lists it;
4. builds the site from the executed copies with ``jupyter-book build``, writes it beside the
   output folder and renames it into place (nothing half-built is left behind).

The output folder is checked before anything runs (:func:`check_out`): capbook replaces an
earlier build only when the folder holds nothing but the files that build's marker lists, so
it never deletes a file it did not write. Ctrl-C or SIGTERM kills every chapter process with
its kernel and the site build, removes the temporary folders and leaves the output folder as
it was.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path

from capbook.app import datasets
from capbook.slo import SLO
from capbook.validation import integer

__all__ = ["ROOT", "chapter_files", "data_note", "check_out", "build_book"]

#: The repository root (where ``_config.yml`` and ``_toc.yml`` live).
ROOT = Path(__file__).resolve().parents[2]
_MARKER = ".capbook-book.json"
#: The prefix of the folders ``capbook book`` makes beside ``--out`` (the new build, the old one set aside).
_STAGE_PREFIX = ".capbook-book-"


def _toc_files(node) -> list[str]:
    out = []
    if isinstance(node, dict):
        if "file" in node:
            out.append(str(node["file"]))
        for key in ("root",):
            if key in node:
                out.append(str(node[key]))
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                out += _toc_files(child)
    elif isinstance(node, list):
        for child in node:
            out += _toc_files(child)
    return out


def chapter_files(root: Path = ROOT) -> list[Path]:
    """The notebooks of the table of contents, in reading order (paths under ``root``)."""
    import yaml

    toc_path = Path(root) / "_toc.yml"
    if not toc_path.is_file():
        raise FileNotFoundError(f"{toc_path} not found: capbook book needs the repository checkout "
                                "(the book's sources are not part of the installed package)")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    out = []
    for f in _toc_files(toc):
        p = Path(root) / (f if f.endswith(".ipynb") else f + ".ipynb")
        if p.is_file() and p not in out:
            out.append(p)
    return out


@contextmanager
def _environ(env: dict):
    old = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _data_env(requests, requests_format, sweep, requests_options=None, sweep_options=None,
              history=None, prices=None, slo=None) -> dict:
    import json

    return {
        "CAPBOOK_SLO": slo if slo else None,
        "CAPBOOK_HISTORY": str(Path(history).resolve()) if history else None,
        "CAPBOOK_PRICES": str(Path(prices).resolve()) if prices else None,
        "CAPBOOK_REQUESTS": str(Path(requests).resolve()) if requests else None,
        "CAPBOOK_REQUESTS_FORMAT": requests_format if requests and requests_format not in (None, "auto") else None,
        "CAPBOOK_REQUESTS_OPTIONS": json.dumps(requests_options) if requests and requests_options else None,
        "CAPBOOK_SWEEP": str(Path(sweep).resolve()) if sweep else None,
        "CAPBOOK_SWEEP_OPTIONS": json.dumps(sweep_options) if sweep and sweep_options else None,
    }


#: Characters a data note shows as themselves; every other one becomes a numeric character
#: reference (see :func:`_inert`).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.-_/:()+=")


def _inert(value) -> str:
    """``str(value)`` as HTML text that no parser of the page can take for anything but text.

    Letters, digits and a few punctuation marks stay; every other character (``<``, ``&``,
    quotes, backticks, braces, ``$``, ``%``, ``*``, ``[``, ``!``, line breaks, U+2028, …) becomes
    a numeric character reference such as ``&#96;``. So a file name cannot end the HTML block,
    open a tag, or reach MyST as a backtick, a role, a directive, math or a ``{{ }}``
    substitution (which MyST's ``substitution`` extension evaluates with Jinja2).

    Examples
    --------
    >>> _inert("logs/a`{{ x }}<b>.csv")
    'logs/a&#96;&#123;&#123; x &#125;&#125;&#60;b&#62;.csv'
    """
    return "".join(c if c in _PLAIN else f"&#{ord(c)};" for c in str(value))


def _options_text(opts: dict | None) -> str:
    if not opts:
        return ""
    return " (read with " + ", ".join(f"<code>{_inert(f'{k}={v!r}')}</code>" for k, v in opts.items()) + ")"


def data_note(source: dict, when: str) -> str:
    """The note placed at the top of the first page of a reader's build, naming its data.

    It is an HTML block, not MyST: the paths and reading options come from the reader's files
    and command line, and every character of them that could mean something to MyST or to
    HTML is written as a character reference (``_inert``), so a file named
    ``{{ ... }}.csv`` is shown, never evaluated. It renders as the theme's "note" admonition.

    Examples
    --------
    >>> note = data_note({"requests": "logs/gw.parquet", "sweep": "h100/", "sample": False,
    ...                   "requests_options": {"time_unit": "ms"}}, "2026-12-01 16:00 UTC")
    >>> print(note.splitlines()[0])
    <div class="admonition note capbook-data-note">
    >>> for line in note.splitlines()[2:5]:
    ...     print(line)
    <p>Built by <code>capbook book</code> on 2026-12-01 16:00 UTC from:</p>
    <ul>
    <li>request log: <code>logs/gw.parquet</code> (read with <code>time_unit=&#39;ms&#39;</code>)</li>
    """
    items = [("request log", source["requests"], source.get("requests_options")),
             ("sweep", source["sweep"], source.get("sweep_options"))]
    if source.get("history"):
        items.append(("hourly history", source["history"], None))
    if source.get("prices") and not str(source["prices"]).startswith("illustrative"):
        items.append(("prices", source["prices"], None))
    if source.get("slo"):
        items.append(("objectives", source["slo"], None))
    if source["sample"]:
        closing = "These are the book&#39;s sample data, so every figure matches the published book."
    else:
        closing = ("Every number in the chapters was recomputed from these data. Hidden checks of the "
                   "book&#39;s published figures apply only to the sample data and were skipped; where a "
                   "chapter needs something your data lack (weeks of history for a forecast, a column), "
                   "it says so and shows the sample data instead.")
    # one HTML block: no blank line inside (a blank line would end it and hand the rest to MyST)
    lines = ['<div class="admonition note capbook-data-note">',
             '<p class="admonition-title">The data this copy of the book was built from</p>',
             f"<p>Built by <code>capbook book</code> on {_inert(when)} from:</p>",
             "<ul>",
             *(f"<li>{what}: <code>{_inert(path)}</code>{_options_text(opts)}</li>" for what, path, opts in items),
             "</ul>",
             f"<p>{closing}</p>",
             "</div>"]
    return "\n".join(lines) + "\n"


def _prepare_source(work: Path, note: str) -> None:
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    cfg.setdefault("execute", {})["execute_notebooks"] = "off"
    (work / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    shutil.copy2(ROOT / "_toc.yml", work / "_toc.yml")
    shutil.copytree(ROOT / "book", work / "book",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "__pycache__"))
    (work / "site").symlink_to(ROOT / "site", target_is_directory=True)
    toc = yaml.safe_load((work / "_toc.yml").read_text(encoding="utf-8"))
    root_page = work / (str(toc.get("root", "book/intro")) + ".md")
    if root_page.is_file():
        text = root_page.read_text(encoding="utf-8").splitlines(keepends=True)
        # after the page title (the first heading)
        at = next((i + 1 for i, line in enumerate(text) if line.startswith("# ")), 0)
        text[at:at] = ["\n", note, "\n"]
        root_page.write_text("".join(text), encoding="utf-8")


#: The longest single wait on a kernel channel, seconds (see :func:`_sliced_get_msg`).
_POLL_SLICE_S = 1.0


def _sliced_get_msg(get_msg, slice_s: float = _POLL_SLICE_S, clock=time.monotonic):
    """``get_msg(timeout)`` of a kernel channel, waiting in slices of at most ``slice_s`` seconds.

    A channel's ``get_msg`` polls its asyncio ZeroMQ socket once for the whole timeout. When the
    socket's wake-up is missed (seen when two kernels start together, on a cell that sends many
    widget messages), that poll sleeps until the timeout and finds the reply, long there, only
    in its final check: the chapter then waits the whole per-cell timeout (300 s) and goes on
    without an error. Polling in slices makes that final check every ``slice_s`` seconds. The
    timeout is kept: ``queue.Empty`` is raised when ``timeout`` seconds have passed with no
    message, and ``timeout=None`` waits for ever.

    Examples
    --------
    >>> import asyncio, queue
    >>> asked = []
    >>> async def missed_wakeup(timeout=None):  # the reply is there; the poll sees it only at its end
    ...     asked.append(timeout)
    ...     return {"msg_type": "execute_reply"}
    >>> asyncio.run(_sliced_get_msg(missed_wakeup)(timeout=300))["msg_type"], asked
    ('execute_reply', [1.0])
    """
    import queue

    async def get(timeout=None):
        deadline = None if timeout is None else clock() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - clock())
            step = slice_s if left is None else min(slice_s, left)
            try:
                return await get_msg(timeout=step)
            except queue.Empty:
                if left is not None and clock() >= deadline:
                    raise

    return get


def _notebook_client_class():
    """``nbclient.NotebookClient`` whose shell and IOPub channels wait in slices (:func:`_sliced_get_msg`)."""
    from nbclient import NotebookClient

    class SlicedPollClient(NotebookClient):
        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            for channel in (kc.shell_channel, kc.iopub_channel):
                channel.get_msg = _sliced_get_msg(channel.get_msg)
            return kc

    return SlicedPollClient


def _execute(path: Path, env: dict, timeout: int) -> None:
    import nbformat

    from traitlets.config import Config

    NotebookClient = _notebook_client_class()
    nb = nbformat.read(path, as_version=4)
    kernel = (nb.metadata.get("kernelspec") or {}).get("name", "python3")
    # Kernels started at the same time by parallel workers can race for the same TCP ports;
    # Unix sockets in a folder of this worker's own cannot collide (and stay off the network).
    # (in the build's own folder of sockets, which it removes even when this process is killed)
    with tempfile.TemporaryDirectory(prefix="cbk-", dir=os.environ.get("CAPBOOK_SOCKETS")) as sock_dir:
        cfg = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sock_dir) / "k")}})
        client = NotebookClient(nb, timeout=timeout, startup_timeout=120, kernel_name=kernel,
                                allow_errors=False, config=cfg,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=env)
    nbformat.write(nb, path)


def _execute_timed(path: str, env: dict, timeout: int, wall_s: float = 600.0, attempts: int = 2,
                   children: _Children | None = None) -> float:
    """Execute one notebook in place in a child process; returns the seconds it took.

    The child (``python -m capbook.app.bookbuild --execute``) starts the kernel and runs the
    cells. A child that makes no progress for ``wall_s`` seconds (a kernel that stopped
    answering) is killed with its kernel, and the chapter is run again, up to ``attempts``
    times. A cell error is not retried. ``children`` (of :func:`build_book`) knows the child
    while it runs, so that an interrupt kills it; a worker asked to start a chapter after the
    interrupt raises ``_Stopped``.
    """
    children = children or _Children()
    cmd = [sys.executable, "-m", "capbook.app.bookbuild", "--execute", str(path), "--timeout", str(int(timeout))]
    t0 = time.perf_counter()
    for attempt in range(1, attempts + 1):
        proc = children.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=wall_s)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.communicate()
            if attempt < attempts:
                continue
            raise RuntimeError(f"{Path(path).name}: no result after {wall_s:g} s, {attempts} attempts "
                               "(a kernel stopped answering, or the chapter is far too slow)") from None
        finally:
            children.done(proc)
        if children.stopping:
            raise _Stopped()
        if proc.returncode != 0:
            lines = [ln for ln in strip_ansi(err or "").splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else f"exit status {proc.returncode}")
        return time.perf_counter() - t0
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# The output folder: checked before any computation, replaced only when capbook wrote all of it
# --------------------------------------------------------------------------------------------
def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest(folder: Path) -> dict:
    """What a build wrote under ``folder``: its folders and, per file, the size (bytes) and SHA-256."""
    files, folders = {}, []
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        for d in dirnames:
            folders.append((base / d).relative_to(folder).as_posix())
        for f in filenames:
            rel = (base / f).relative_to(folder).as_posix()
            if rel != _MARKER:
                files[rel] = [(base / f).stat().st_size, _file_digest(base / f)]
    return {"files": files, "folders": sorted(folders)}


def _write_marker(site: Path, meta: dict) -> None:
    """Write the marker of a finished build: ``meta`` and the manifest of everything in ``site``."""
    (site / _MARKER).write_text(json.dumps({**meta, "manifest": _manifest(site)}, indent=2), encoding="utf-8")


def _foreign_paths(out: Path) -> list[str] | None:
    """The paths under ``out`` that the build recorded in its marker did not write (or that changed
    since); None when the marker holds no valid manifest (an older capbook's, or not capbook's)."""
    try:
        manifest = json.loads((out / _MARKER).read_text(encoding="utf-8"))["manifest"]
        files, folders = dict(manifest["files"]), set(manifest["folders"])
        if not all(isinstance(v, list) and len(v) == 2 for v in files.values()):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    foreign = []
    for dirpath, dirnames, filenames in os.walk(out):
        base = Path(dirpath)
        for d in list(dirnames):
            rel = (base / d).relative_to(out).as_posix()
            if rel not in folders or (base / d).is_symlink():
                foreign.append(rel + "/")
                dirnames.remove(d)           # nothing inside a foreign folder is capbook's
        for f in filenames:
            rel = (base / f).relative_to(out).as_posix()
            if rel == _MARKER:
                continue
            path = base / f
            if rel not in files or path.is_symlink() or not path.is_file():
                foreign.append(rel)
                continue
            size, digest = files[rel]
            if path.stat().st_size != size or _file_digest(path) != digest:
                foreign.append(rel + " (changed since capbook wrote it)")
    return sorted(foreign)


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_out(out) -> Path:
    """Check the output folder of :func:`build_book` before anything is computed; returns it resolved.

    Raises ValueError naming ``--out`` and saying why when the path is too long a name, lies
    inside the repository's sources, runs through a file, cannot be written (the folder where
    the new build is staged, beside ``out``), or already holds anything ``capbook book`` did not
    write (an earlier build's marker lists every file it wrote, with its size and SHA-256).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     check_out(Path(d) / "site") == (Path(d) / "site").resolve()
    True
    >>> check_out("x" * 300)
    Traceback (most recent call last):
    ...
    ValueError: --out xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...: the name xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... is 300 bytes long; this file system allows 255
    """
    shown = str(out) if len(str(out)) <= 80 else str(out)[:30] + "..."
    given = Path(out)
    if len(os.fsencode(os.path.abspath(given))) >= 4096:
        raise ValueError(f"--out {shown}: the path is {len(os.fsencode(os.path.abspath(given))):,} bytes long; "
                         "this system allows 4,095")
    anchor = Path(os.path.abspath(given))
    while not os.path.lexists(anchor) and anchor != anchor.parent:
        anchor = anchor.parent
    limit = _name_max(anchor if anchor.is_dir() else anchor.parent)
    for part in given.parts:
        if len(os.fsencode(part)) > limit:
            name = part if len(part) <= 40 else part[:30] + "..."
            raise ValueError(f"--out {shown}: the name {name} is {len(os.fsencode(part))} bytes long; "
                             f"this file system allows {limit}")
    out = given.resolve()
    if out == ROOT or ROOT / "book" in (out, *out.parents):
        raise ValueError(f"--out {out}: choose a folder outside the repository's sources")
    anchor = out
    while not os.path.lexists(anchor):
        anchor = anchor.parent
    if anchor != out and not anchor.is_dir():
        raise ValueError(f"--out {out}: {anchor} is a file, not a folder; choose another path")
    if anchor == out:
        if not out.is_dir():
            raise ValueError(f"--out {out} exists and is not a folder")
        if any(out.iterdir()):
            if not (out / _MARKER).is_file():
                raise ValueError(f"--out {out} exists and is not empty (and is not an earlier capbook book "
                                 "build); choose a new folder")
            foreign = _foreign_paths(out)
            if foreign is None:
                raise ValueError(f"--out {out} holds a {_MARKER} without the list of the files capbook wrote "
                                 "(an older capbook's, or not capbook's), so capbook cannot tell its files from "
                                 "yours and deletes nothing: choose a new folder, or empty this one")
            if foreign:
                few = ", ".join(foreign[:4]) + (f", ... ({len(foreign)} in all)" if len(foreign) > 4 else "")
                raise ValueError(f"--out {out} holds files capbook did not write ({few}); capbook never deletes "
                                 "them: choose a new folder or move them out")
        anchor = out.parent
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: cannot write in {anchor} (permission denied or a read-only file system)")
    if os.path.lexists(out):
        for dirpath, _, _ in os.walk(out):  # the old build is deleted once the new one is in place
            if not os.access(dirpath, os.W_OK | os.X_OK):
                raise ValueError(f"--out {out}: cannot delete the earlier build's files in {dirpath} "
                                 "(permission denied); choose a new folder")
    return out


def _stage_folder(out: Path) -> Path:
    """Make the folder the new build is written to, beside ``out`` (so the final rename is atomic)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=_STAGE_PREFIX + "new-", dir=out.parent))
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot write in {out.parent} ({exc.strerror or exc})") from None


def _swap_in(stage: Path, out: Path) -> None:
    """Put the finished build ``stage`` at ``out``: the old build is renamed aside, the new one renamed
    to ``out``, the old one removed. Call it with signals deferred (see :class:`_Signals`)."""
    if os.path.lexists(out) and not any(out.iterdir()):
        out.rmdir()
    if not os.path.lexists(out):
        os.rename(stage, out)
        return
    foreign = _foreign_paths(out)
    if foreign is None or foreign:  # the user wrote there while the chapters ran
        raise ValueError(f"--out {out} changed while the book was built ({', '.join((foreign or [_MARKER])[:4])}); "
                         "nothing was replaced: choose a new folder")
    aside = Path(tempfile.mkdtemp(prefix=_STAGE_PREFIX + "old-", dir=out.parent))
    os.rename(out, aside)        # onto an empty folder: atomic
    try:
        os.rename(stage, out)
    except BaseException:
        os.rename(aside, out)    # the old build back in place
        raise
    shutil.rmtree(aside, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Interrupts: every chapter process is known, and killed with its kernel
# --------------------------------------------------------------------------------------------
class _Stopped(Exception):
    """Raised in a worker asked to start a chapter after the build was interrupted."""


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, grandchildren, ...), read from /proc; [] elsewhere."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(pid: int) -> None:
    """Kill the process ``pid`` (a session leader), its process group and every descendant, the
    kernels included (jupyter_client starts them in sessions of their own)."""
    try:
        os.killpg(pid, signal.SIGSTOP)  # frozen, the group starts nothing more while it is listed
    except OSError:
        pass
    pids = [pid, *_descendants(pid)]
    groups = set()
    for p in pids:
        try:
            if os.getpgid(p) == p:
                groups.add(p)
        except OSError:
            pass
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    for g in groups | {pid}:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass


class _Children:
    """The processes a build has running (chapters, the site build), so that an interrupt stops them all."""

    def __init__(self):
        self._lock = threading.Lock()
        self._procs: set = set()
        self.stopping = False

    def start(self, cmd, **kwargs) -> subprocess.Popen:
        with self._lock:
            if self.stopping:
                raise _Stopped()
            proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
            self._procs.add(proc)
        return proc

    def done(self, proc) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            procs = list(self._procs)
        for proc in procs:
            _kill_tree(proc.pid)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


class _Signals:
    """SIGINT and SIGTERM during a build: the first raises KeyboardInterrupt (SIGTERM too), later ones
    are ignored while the build cleans up; inside :meth:`deferred` a signal waits for the block's end.
    Does nothing outside the main thread (where Python cannot install handlers)."""

    def __init__(self):
        self.interrupted = False
        self._defer = 0
        self._pending = False
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        return False

    def _handle(self, signum, frame):
        if self.interrupted:
            return                       # already stopping: a second Ctrl-C changes nothing
        if self._defer:
            self._pending = True
            return
        self.interrupted = True
        raise KeyboardInterrupt

    def cleaning_up(self) -> None:
        """From now on every signal is ignored (the build is stopping or done)."""
        self.interrupted = True

    @contextmanager
    def deferred(self):
        self._defer += 1
        try:
            yield
        finally:
            self._defer -= 1
        if not self._defer and self._pending and not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt


# --------------------------------------------------------------------------------------------
# A chapter that fails on the reader's data: its source, the error at its top, a line in the intro
# --------------------------------------------------------------------------------------------
#: Terminal colour and control sequences in a kernel's traceback text: CSI (``ESC[0;31m``), OSC
#: (``ESC]8;;url ESC\`` hyperlinks, ended by BEL or ST), other two-character escapes, the same
#: sequences written out as a repr shows them (``\x1b[0m``, ``\u001b[0m``, ``\033[0m``), the other
#: escapes (``ESC c``, ``ESC ( B``), the one-byte CSI, and control characters other than tab and
#: line breaks. The one definition: the CLI's output (:func:`capbook.app.cli.plain_text`) uses it too.
_ESC = r"(?:\x1b|\\x1b|\\u001b|\\033)"
_ANSI = re.compile(_ESC + r"(?:\[[0-9;?:<=>]*[ -/]*[@-~]|\][^\x07\x1b\\]*(?:\x07|" + _ESC + r"\\|\\)?|[ -/]*[0-~])"
                   r"|\x9b[0-9;?]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def strip_ansi(text) -> str:
    r"""``text`` without terminal colour codes or other control characters (tabs and line breaks stay).

    Examples
    --------
    >>> strip_ansi("\x1b[0;31mValueError\x1b[0m: bad \x1b]8;;file:///x.py\x1b\\x.py\x1b]8;;\x1b\\ here")
    'ValueError: bad x.py here'
    >>> strip_ansi(r"\x1b[31mKeyError\x1b[39m: 'tpot_p95_s' \u001b[1;32mok\033[0m")
    "KeyError: 'tpot_p95_s' ok"
    """
    return _ANSI.sub("", str(text))


#: Characters written as HTML entities in an error shown on a page: HTML's own and MyST's markup.
_ENTITIES = {ord(ch): f"&#{ord(ch)};" for ch in "{}$`*_[]|:\\~^@#!%'\""}
_ENTITIES.update({ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"})


def _html_text(text: str, limit: int = 400) -> str:
    """``text`` on one line, HTML-escaped, with the characters MyST reads as markup written as entities
    (it sits in a raw HTML block, which MyST passes through unparsed; the entities make sure of it)."""
    one = " ".join(strip_ansi(text).split())
    one = "".join(ch for ch in one if ch.isprintable())
    if len(one) > limit:
        one = one[:limit - 3] + "..."
    return one.translate(_ENTITIES)


def failed_chapter_admonition(error: str) -> str:
    """The HTML block placed under the title of a chapter that failed on the reader's data.

    Examples
    --------
    >>> print(failed_chapter_admonition("ValueError: <b>{glue}`x`</b> $1"))
    <div class="admonition error capbook-failed">
    <p class="admonition-title">This chapter did not run on your data</p>
    <p>It failed with <code>ValueError&#58; &lt;b&gt;&#123;glue&#125;&#96;x&#96;&lt;/b&gt; &#36;1</code>. The code below is the chapter's, unexecuted; run it in Jupyter with the data variables set (CAPBOOK_REQUESTS, CAPBOOK_SWEEP) to see the traceback.</p>
    </div>
    """
    return ("<div class=\"admonition error capbook-failed\">\n"
            "<p class=\"admonition-title\">This chapter did not run on your data</p>\n"
            f"<p>It failed with <code>{_html_text(error)}</code>. The code below is the chapter's, unexecuted; "
            "run it in Jupyter with the data variables set (CAPBOOK_REQUESTS, CAPBOOK_SWEEP) to see the "
            "traceback.</p>\n</div>\n")


def failed_chapters_note(failed: dict) -> str:
    """The HTML block listing, on the first page, the chapters that failed (``{title: error}``).

    Examples
    --------
    >>> print(failed_chapters_note({"Variability": "ZeroDivisionError: float division by zero"}))
    <div class="admonition error capbook-failed">
    <p class="admonition-title">1 chapter did not run on these data</p>
    <ul>
    <li>Variability&#58; <code>ZeroDivisionError&#58; float division by zero</code></li>
    </ul>
    <p>Each shows its code unexecuted, with the error at its top.</p>
    </div>
    """
    n = len(failed)
    items = "".join(f"<li>{_html_text(title, 200)}&#58; <code>{_html_text(err)}</code></li>\n"
                    for title, err in failed.items())
    return ("<div class=\"admonition error capbook-failed\">\n"
            f"<p class=\"admonition-title\">{n} chapter{'s' if n != 1 else ''} did not run on these data</p>\n"
            f"<ul>\n{items}</ul>\n<p>Each shows its code unexecuted, with the error at its top.</p>\n</div>\n")


def _chapter_title(nb) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return None


def _mark_failed(path: Path, error: str) -> str:
    """Put the error admonition under the chapter's title (the notebook stays unexecuted); returns the title."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    block = failed_chapter_admonition(error)
    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.lstrip().startswith("# "):
        head, _, rest = first.source.lstrip().partition("\n")
        first.source = f"{head}\n\n{block}\n{rest}"
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(block))
    nbformat.write(nb, path)
    return _chapter_title(nb) or path.stem


def _note_failures(root_page: Path, note: str, failed: dict) -> None:
    """Add :func:`failed_chapters_note` under the data note of the first page."""
    if not failed or not root_page.is_file():
        return
    text = root_page.read_text(encoding="utf-8")
    block = "\n" + failed_chapters_note(failed) + "\n"
    at = text.find(note)
    if at >= 0:
        text = text[:at + len(note)] + block + text[at + len(note):]
    else:
        lines = text.splitlines(keepends=True)
        i = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
        text = "".join(lines[:i]) + block + "".join(lines[i:])
    root_page.write_text(text, encoding="utf-8")


def _first_error(exc: BaseException) -> str:
    text = strip_ansi(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    err = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (err[-1] if err else (lines[-1] if lines else repr(exc)))[:500]


def build_book(out, *, requests=None, requests_format: str = "auto", sweep=None, timeout: int = 300,
               keep_notebooks: bool = False, progress: bool = True, chapters: list[str] | None = None,
               jobs: int = 2, requests_options: dict | None = None,
               sweep_options: dict | None = None, history=None, prices=None, slo: str | None = None) -> int:
    """Execute every chapter on the given data and build the site into ``out``.

    Parameters
    ----------
    out : str or Path
        Output folder; it receives the HTML site (``index.html`` at its top). It must not
        exist, be empty, or hold an earlier ``capbook book`` build and nothing else: the
        build's marker (``.capbook-book.json``) lists every file it wrote with its size and
        SHA-256, and a folder holding anything more (notes, a ``drafts/`` folder, a changed
        file) or a marker without that list is refused before anything is computed. The new
        build is written beside ``out`` and renamed into place once finished (the old build
        renamed aside, then deleted), so an interrupt leaves the old build or the new, never half.
    requests, sweep : str or Path, optional
        The reader's request log and sweep (default: the sample data). Validate them first
        (``capbook book`` reads both before calling this).
    requests_format : str
        Format of the request log (see :data:`capbook.logs.requestlog.LOG_FORMATS`).
    history : str or Path, optional
        Hourly history of the reader's log for the capstone's forecast (``CAPBOOK_HISTORY``;
        see :meth:`capbook.logs.aggregates.LogAggregates.of`).
    prices : str or Path, optional
        Price table for the chapter on costs (``CAPBOOK_PRICES``; see
        :func:`capbook.cost.prices.read_prices`).
    slo : str, optional
        The objectives, as ``capbook plan --slo`` takes them (:meth:`capbook.slo.SLO.parse`);
        every chapter with objectives uses them (``CAPBOOK_SLO``, :func:`capbook.app.datasets.slo`).
        Default: each chapter's own sample objectives.
    requests_options, sweep_options : dict, optional
        Further keyword arguments of :func:`capbook.logs.requestlog.read_requests` (``drop_invalid``,
        ``time_unit``, ``sort``) and :func:`capbook.sweeps.importers.read_sweep` (``load``, ``where``,
        ``repeats``, ``max_num_seqs``, ``concurrency``), JSON-serialisable; every chapter reads
        the data with them (``CAPBOOK_REQUESTS_OPTIONS`` / ``CAPBOOK_SWEEP_OPTIONS``).
    timeout : int
        Seconds allowed per notebook cell.
    keep_notebooks : bool
        Also copy the executed notebooks to ``out/notebooks``.
    progress : bool
        Show a progress bar and per-chapter times on standard error.
    chapters : list of str, optional
        Only these chapter stems (for tests); the site then holds the others unexecuted.
    jobs : int
        Chapters executed at once (each in its own kernel); 2 suits a two-core machine.

    Returns
    -------
    int
        0 when the site was built; 1 when the site was built but chapters failed (each shows
        its code unexecuted under an admonition naming the error, the first page lists them,
        and the message names each chapter and its error) or when the site build failed
        (``out`` is then left untouched).

    Raises
    ------
    ValueError
        On a bad ``out`` (see :func:`check_out`) or argument, before anything is computed.
    KeyboardInterrupt
        On Ctrl-C (SIGINT) or SIGTERM: queued chapters are cancelled, running ones killed with
        their kernels (and the site build), the temporary folders removed; ``out`` is untouched.
    """
    from tqdm.auto import tqdm

    jobs = integer(jobs, "jobs", minimum=1)
    timeout = integer(timeout, "timeout", minimum=1)
    out = check_out(out)
    if slo is not None:
        try:
            SLO.parse(slo)
        except ValueError as exc:
            raise ValueError(f"--slo {slo!r}: {exc}") from None
    for p, name in ((requests, "requests"), (sweep, "sweep"), (history, "history"), (prices, "prices")):
        if p is not None and not Path(p).exists():
            raise FileNotFoundError(f"--{name} {p}: no such file")
    all_chapters = chapter_files(ROOT)
    if chapters is not None:
        wanted = set(chapters)
        unknown = wanted - {p.stem for p in all_chapters}
        if unknown:
            raise ValueError(f"chapters {sorted(unknown)} are not in _toc.yml")
        all_chapters = [p for p in all_chapters if p.stem in wanted]
    env_vars = _data_env(requests, requests_format, sweep, requests_options, sweep_options, history, prices, slo)
    with _environ(env_vars):
        source = datasets.data_source()
    env = os.environ.copy()
    for k, v in env_vars.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    env.setdefault("MPLBACKEND", "Agg")
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def say(msg):
        if progress:
            tqdm.write(msg, file=sys.stderr)

    children = _Children()
    with _Signals() as signals:
        tmp = stage = sockets = pool = bar = None
        try:
            with signals.deferred():      # a folder made is a folder known to the clean-up below
                stage = _stage_folder(out)
                tmp = Path(tempfile.mkdtemp(prefix="capbook-book-"))
                # a Unix socket's path has at most 107 bytes: the kernels' go in a short one
                short = tempfile.gettempdir() if len(tempfile.gettempdir()) <= 40 else "/tmp"
                sockets = Path(tempfile.mkdtemp(prefix="cbk-", dir=short))
            # the kernels' connection files and the chapters' temporary files go there too
            env["CAPBOOK_SOCKETS"] = env["TMPDIR"] = str(sockets)
            work = tmp / "src"
            work.mkdir()
            note = data_note(source, when)
            _prepare_source(work, note)
            say(f"capbook book: {len(all_chapters)} chapters on requests={source['requests']}, sweep={source['sweep']}")
            bar = tqdm(total=len(all_chapters), desc="chapters", unit="chapter", file=sys.stderr, disable=not progress)
            failed: dict[Path, str] = {}
            pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(all_chapters))) if all_chapters else 1)
            futures = {pool.submit(_execute_timed, str(work / p.relative_to(ROOT)), env, timeout,
                                   children=children): p for p in all_chapters}
            for fut in as_completed(futures):
                rel = futures[fut].relative_to(ROOT)
                try:
                    seconds = fut.result()
                except Exception as exc:  # a chapter failed: the others go on, it shows its error
                    failed[rel] = _first_error(exc)
                    say(f"  {rel.stem:<24} failed: {failed[rel]}")
                else:
                    say(f"  {rel.stem:<24} {seconds:6.1f} s")
                bar.update(1)
                bar.set_postfix_str(rel.stem)
            bar.close()
            titles = {rel: _mark_failed(work / rel, err) for rel, err in failed.items()}
            _note_failures(_root_page(work), note, {titles[rel]: err for rel, err in failed.items()})
            say("capbook book: building the site (execution off; the chapters ran above)")
            build_dir = tmp / "build"
            jb = Path(sys.executable).with_name("jupyter-book")
            cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(work), "--path-output", str(build_dir)]
            log_path = tmp / "jupyter-book.log"
            with open(log_path, "w", encoding="utf-8") as fh:
                with signals.deferred():
                    proc = children.start(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(work))
                proc.wait()
                children.done(proc)
            html = build_dir / "_build" / "html"
            if proc.returncode != 0 or not (html / "index.html").is_file():
                tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
                print("capbook book: the site build failed:\n" + "\n".join(tail) + f"\nnothing was written to {out}",
                      file=sys.stderr)
                return 1
            site = stage / "site"
            shutil.copytree(html, site, symlinks=False)
            if keep_notebooks:
                for src in all_chapters:
                    dst = site / "notebooks" / src.name
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(work / src.relative_to(ROOT), dst)
            _write_marker(site, {"built": when, **source, "failed": {str(rel): err for rel, err in failed.items()}})
            with signals.deferred():
                _swap_in(site, out)
        finally:
            signals.cleaning_up()        # from here on, Ctrl-C and SIGTERM are ignored until all is gone
            children.stop_all()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            if bar is not None:
                bar.close()
            for folder in (tmp, stage, sockets):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
    built = f"capbook book: built {out / 'index.html'} from requests={source['requests']}, sweep={source['sweep']}"
    if failed:
        lines = [f"capbook book: {len(failed)} of {len(all_chapters)} chapters failed on this data; the site was "
                 "built with each of them unexecuted, its error at its top:"]
        lines += [f"  {rel}: {err}" for rel, err in sorted(failed.items())]
        lines.append("(run a chapter in Jupyter with CAPBOOK_REQUESTS / CAPBOOK_SWEEP set to see the traceback)")
        print("\n".join(lines), file=sys.stderr)
    print(built)
    return 1 if failed else 0


def _root_page(work: Path) -> Path:
    import yaml

    toc = yaml.safe_load((work / "_toc.yml").read_text(encoding="utf-8"))
    return work / (str(toc.get("root", "book/intro")) + ".md")


def _main(argv=None) -> int:  # the child process of _execute_timed
    import argparse

    p = argparse.ArgumentParser(prog="python -m capbook.app.bookbuild")
    p.add_argument("--execute", required=True, help="notebook to execute in place")
    p.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = p.parse_args(argv)
    try:
        _execute(Path(args.execute), os.environ.copy(), args.timeout)
    except Exception as exc:
        print(_first_error(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
