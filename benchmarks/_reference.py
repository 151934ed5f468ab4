"""A reference version of capbook to benchmark against in the same run: a commit's ``capbook/``
and ``data/``, extracted with ``git archive`` into a temporary folder (needs the repository's
history: a clone, not an exported tree)."""
from __future__ import annotations

import atexit
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The commit before the package was laid out by domain (issue 33).
DEFAULT_REF = "before-33"


def reference_tree(ref: str = DEFAULT_REF) -> Path:
    """A folder holding ``ref``'s ``capbook/`` and ``data/`` (removed when the process ends).

    Raises
    ------
    SystemExit
        When ``ref`` is not a commit of this repository (a shallow clone: fetch it, or pass
        another ``--ref``).
    """
    r = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        # a fresh clone may lack the tag: the commit it names is the parent of the first issue-33 commit
        raise SystemExit(f"--ref {ref}: not a commit here (git fetch --tags, or pass --ref COMMIT)")
    out = Path(tempfile.mkdtemp(prefix="capbook-ref-"))
    atexit.register(shutil.rmtree, out, True)
    archive = subprocess.run(["git", "archive", "--format=tar", ref, "capbook", "data"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(out, filter="data")
    return out


def cli_module(tree: Path) -> str:
    """The module that runs the ``capbook`` command in ``tree`` (it moved in issue 33)."""
    return "capbook.app.cli" if (tree / "capbook" / "app" / "cli.py").is_file() else "capbook.cli"
