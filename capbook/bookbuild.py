"""Re-run the whole book on a reader's data and build the site (``capbook book``).

Every chapter reads its data through :mod:`capbook.datasets`, so pointing ``CAPBOOK_REQUESTS``
(and ``CAPBOOK_SWEEP``) at a reader's files is enough to re-run it. :func:`build_book` does
that without touching the repository's own build:

1. copies the book's sources (``_config.yml``, ``_toc.yml``, ``book/``) into a temporary
   folder, with execution switched off in the copied configuration (the repository uses
   ``execute_notebooks: cache``, whose cache would otherwise hold the sample-data results);
2. writes a note at the top of the copied ``intro.md`` saying which data the copy was built
   from (:func:`capbook.datasets.data_source`);
3. executes every chapter of the table of contents, one fresh kernel each, with the data
   variables in the kernel's environment, showing progress per chapter;
4. builds the site from the executed copies with ``jupyter-book build`` and moves the HTML to
   the output folder only when everything succeeded (nothing half-built is left behind).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ROOT", "chapter_files", "data_note", "build_book"]

#: The repository root (where ``_config.yml`` and ``_toc.yml`` live).
ROOT = Path(__file__).resolve().parents[1]
_MARKER = ".capbook-book.json"


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
              history=None, prices=None) -> dict:
    import json

    return {
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
    HTML is written as a character reference (:func:`_inert`), so a file named
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
    with tempfile.TemporaryDirectory(prefix="cbk-") as sock_dir:
        cfg = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sock_dir) / "k")}})
        client = NotebookClient(nb, timeout=timeout, startup_timeout=120, kernel_name=kernel,
                                allow_errors=False, config=cfg,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=env)
    nbformat.write(nb, path)


def _execute_timed(path: str, env: dict, timeout: int, wall_s: float = 600.0, attempts: int = 2) -> float:
    """Execute one notebook in place in a child process; returns the seconds it took.

    The child (``python -m capbook.bookbuild --execute``) starts the kernel and runs the
    cells. A child that makes no progress for ``wall_s`` seconds (a kernel that stopped
    answering) is killed, and the chapter is run again, up to ``attempts`` times; the kernel
    exits by itself when its parent dies. A cell error is not retried.
    """
    cmd = [sys.executable, "-m", "capbook.bookbuild", "--execute", str(path), "--timeout", str(int(timeout))]
    t0 = time.perf_counter()
    for attempt in range(1, attempts + 1):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=wall_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            if attempt < attempts:
                continue
            raise RuntimeError(f"{Path(path).name}: no result after {wall_s:g} s, {attempts} attempts "
                               "(a kernel stopped answering, or the chapter is far too slow)") from None
        if proc.returncode != 0:
            lines = [ln for ln in (err or "").splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else f"exit status {proc.returncode}")
        return time.perf_counter() - t0
    raise AssertionError("unreachable")  # pragma: no cover


def _first_error(exc: BaseException) -> str:
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    err = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (err[-1] if err else (lines[-1] if lines else repr(exc)))[:500]


def build_book(out, *, requests=None, requests_format: str = "auto", sweep=None, timeout: int = 300,
               keep_notebooks: bool = False, progress: bool = True, chapters: list[str] | None = None,
               jobs: int = 2, requests_options: dict | None = None,
               sweep_options: dict | None = None, history=None, prices=None) -> int:
    """Execute every chapter on the given data and build the site into ``out``.

    Parameters
    ----------
    out : str or Path
        Output folder; it receives the HTML site (``index.html`` at its top). It must not
        exist, be empty, or hold an earlier ``capbook book`` build (which is replaced).
    requests, sweep : str or Path, optional
        The reader's request log and sweep (default: the sample data). Validate them first
        (``capbook book`` reads both before calling this).
    requests_format : str
        Format of the request log (see :data:`capbook.traces.LOG_FORMATS`).
    history : str or Path, optional
        Hourly history of the reader's log for the capstone's forecast (``CAPBOOK_HISTORY``;
        see :meth:`capbook.plan.LogAggregates.of`).
    prices : str or Path, optional
        Price table for the chapter on costs (``CAPBOOK_PRICES``; see
        :func:`capbook.costs.read_prices`).
    requests_options, sweep_options : dict, optional
        Further keyword arguments of :func:`capbook.traces.read_requests` (``drop_invalid``,
        ``time_unit``, ``sort``) and :func:`capbook.importers.read_sweep` (``load``, ``where``,
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
        0 when the site was built; 1 when a chapter or the site build failed (the message
        names the chapter and the error; ``out`` is left untouched).
    """
    from tqdm.auto import tqdm

    from . import datasets
    from .validation import integer

    jobs = integer(jobs, "jobs", minimum=1)
    timeout = integer(timeout, "timeout", minimum=1)
    out = Path(out).resolve()
    if out == ROOT or ROOT / "book" in (out, *out.parents):
        raise ValueError(f"--out {out}: choose a folder outside the repository's sources")
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"--out {out} exists and is not a folder")
        if any(out.iterdir()) and not (out / _MARKER).is_file():
            raise ValueError(f"--out {out} exists and is not empty (and is not an earlier capbook book "
                             "build); choose a new folder")
    for p, name in ((requests, "requests"), (sweep, "sweep"), (history, "history"), (prices, "prices")):
        if p is not None and not Path(p).exists():
            raise FileNotFoundError(f"--{name} {p}: no such file")
    env_vars = _data_env(requests, requests_format, sweep, requests_options, sweep_options, history, prices)
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
    all_chapters = chapter_files(ROOT)
    if chapters is not None:
        wanted = set(chapters)
        unknown = wanted - {p.stem for p in all_chapters}
        if unknown:
            raise ValueError(f"chapters {sorted(unknown)} are not in _toc.yml")
        all_chapters = [p for p in all_chapters if p.stem in wanted]

    def say(msg):
        if progress:
            tqdm.write(msg, file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="capbook-book-") as tmp:
        work = Path(tmp) / "src"
        work.mkdir()
        _prepare_source(work, data_note(source, when))
        say(f"capbook book: {len(all_chapters)} chapters on requests={source['requests']}, sweep={source['sweep']}")
        bar = tqdm(total=len(all_chapters), desc="chapters", unit="chapter", file=sys.stderr, disable=not progress)
        failed = None
        n_jobs = max(1, min(jobs, len(all_chapters))) if all_chapters else 1
        with ThreadPoolExecutor(max_workers=n_jobs) as pool:
            futures = {pool.submit(_execute_timed, str(work / p.relative_to(ROOT)), env, timeout): p
                       for p in all_chapters}
            for fut in as_completed(futures):
                rel = futures[fut].relative_to(ROOT)
                try:
                    seconds = fut.result()
                except Exception as exc:  # a chapter failed: report it, build nothing
                    failed = (rel, exc)
                    for other in futures:
                        other.cancel()
                    break
                bar.update(1)
                bar.set_postfix_str(rel.stem)
                say(f"  {rel.stem:<24} {seconds:6.1f} s")
        bar.close()
        if failed is not None:
            rel, exc = failed
            print(f"capbook book: chapter {rel} failed on this data: {_first_error(exc)}\n"
                  f"(run it in Jupyter with CAPBOOK_REQUESTS / CAPBOOK_SWEEP set to see the traceback); "
                  f"nothing was written to {out}", file=sys.stderr)
            return 1
        say("capbook book: building the site (execution off; the chapters ran above)")
        build_dir = Path(tmp) / "build"
        jb = Path(sys.executable).with_name("jupyter-book")
        cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(work), "--path-output", str(build_dir)]
        log_path = Path(tmp) / "jupyter-book.log"
        with open(log_path, "w", encoding="utf-8") as fh:
            r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(work))
        html = build_dir / "_build" / "html"
        if r.returncode != 0 or not (html / "index.html").is_file():
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-25:]
            print("capbook book: the site build failed:\n" + "\n".join(tail) + f"\nnothing was written to {out}",
                  file=sys.stderr)
            return 1
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(html, out, symlinks=False)
        if keep_notebooks:
            for src in all_chapters:
                dst = out / "notebooks" / src.name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(work / src.relative_to(ROOT), dst)
        (out / _MARKER).write_text(json.dumps({"built": when, **source}, indent=2), encoding="utf-8")
    print(f"capbook book: built {out / 'index.html'} from requests={source['requests']}, sweep={source['sweep']}")
    return 0


def _main(argv=None) -> int:  # the child process of _execute_timed
    import argparse

    p = argparse.ArgumentParser(prog="python -m capbook.bookbuild")
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
