"""Fixtures for the browser tests of the built site (``_build/html``).

The tests drive Debian's Chromium (``/usr/bin/chromium``) with the ``playwright`` package from
PyPI; they never run ``playwright install`` (which downloads a browser). Where Chromium, the
Playwright package or the built site is missing they skip with a message saying how to get it
-- except in CI (``CI=true``), where ``.ci/run`` installs Chromium and ``make test`` builds the
site first, so a missing piece is a failure.

Environment variables:

* ``CAPBOOK_SITE`` -- the built HTML folder to test (default ``_build/html``);
* ``CAPBOOK_CHROMIUM`` -- the Chromium executable (default: ``chromium`` on ``PATH``, then
  ``/usr/bin/chromium``).

Screenshots of every page go to ``screenshots/`` beside the HTML folder (``_build/screenshots``).
"""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Flags from the issue: headless, no sandbox (containers run as root), nothing in the
#: background that could phone home (component updates, sync, field trials).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

#: The viewport of the screenshots and of the "no sideways scrolling" check: a common laptop.
VIEWPORT = {"width": 1280, "height": 800}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str):
    """Skip on a reader's machine; fail in CI, where everything is installed on purpose."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the browser tests must run in CI)", pytrace=False)
    pytest.skip(reason)


def site_dir() -> Path:
    return Path(os.environ.get("CAPBOOK_SITE", ROOT / "_build" / "html")).resolve()


def site_pages(root: Path) -> list[str]:
    """Every HTML page of the built site, as paths relative to ``root`` (``/``-separated)."""
    skip = {"_static", "_sources", "_images"}
    pages = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.html")
        if not skip.intersection(p.relative_to(root).parts)
    ]
    return sorted(pages)


def find_chromium() -> str | None:
    env = os.environ.get("CAPBOOK_CHROMIUM")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    for cand in (shutil.which("chromium"), "/usr/bin/chromium", shutil.which("chromium-browser")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.fixture(scope="session")
def site() -> Path:
    root = site_dir()
    if not (root / "index.html").is_file():
        missing(f"no built site at {root}: build it first with `make site` "
                "(or set CAPBOOK_SITE to a built _build/html folder)")
    return root


def pytest_generate_tests(metafunc):
    """One ``test_page`` per HTML page of the built site."""
    if "page_path" in metafunc.fixturenames:
        root = site_dir()
        pages = site_pages(root) if (root / "index.html").is_file() else ["(site not built)"]
        metafunc.parametrize("page_path", pages)


@pytest.fixture(scope="session")
def pages(site: Path) -> list[str]:
    return site_pages(site)


@pytest.fixture(scope="session")
def screenshot_dir(site: Path) -> Path:
    out = site.parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # The browser drops connections it no longer needs when a test closes a page.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def server(site: Path):
    """Serve the built site on 127.0.0.1 at a free port; yields its base URL (with ``/``)."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    """A Chromium context with an empty, throw-away user-data directory.

    ``launch_persistent_context`` is used because it is the Playwright call that takes the
    user-data directory explicitly: we create it empty and check Chromium wrote its profile
    into it (proving no existing profile, extension or cached policy was used).
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package is not installed: `pip install playwright` "
                "(the Python package only; do not run `playwright install`)")
    chromium = find_chromium()
    if chromium is None:
        missing("Chromium is not installed: `apt-get install chromium` (Debian/Ubuntu), or set "
                "CAPBOOK_CHROMIUM to a Chromium executable")
    profile = tmp_path_factory.mktemp("chromium-profile")
    assert not any(profile.iterdir()), f"user-data dir {profile} is not empty"
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
            service_workers="block",
            accept_downloads=False,
        )
        try:
            assert any(profile.iterdir()), "Chromium did not use the empty user-data dir given to it"
            yield context
        finally:
            context.close()
