"""Convert a "percent"-format script into a chapter notebook stored without outputs.

Authoring aid for chapters: cells start with ``# %%`` (code) or ``# %% [markdown]``; tags go
on the marker line as ``tags=["remove-cell"]``. Markdown cell lines may start with ``# `` (as in
jupytext) or be plain. Usage::

    python tools/pct2nb.py chapter.py book/chapter.ipynb
"""
from __future__ import annotations

import json
import re
import sys

import nbformat

MARK = re.compile(r"^# %%(?P<md>\s*\[markdown\])?(?P<rest>.*)$")


def convert(text: str) -> nbformat.NotebookNode:
    cells, cur, kind, tags = [], [], None, []

    def flush():
        if kind is None:
            return
        src = "\n".join(cur).strip("\n")
        if kind == "markdown":
            lines = src.split("\n")
            if all(l.startswith("# ") or l == "#" for l in lines if l):
                lines = [l[2:] if l.startswith("# ") else ("" if l == "#" else l) for l in lines]
            src = "\n".join(lines)
            cell = nbformat.v4.new_markdown_cell(src)
        else:
            cell = nbformat.v4.new_code_cell(src)
        if tags:
            cell.metadata["tags"] = list(tags)
        cells.append(cell)

    for line in text.split("\n"):
        m = MARK.match(line)
        if m:
            flush()
            kind = "markdown" if m.group("md") else "code"
            tm = re.search(r"tags=(\[.*?\])", m.group("rest"))
            tags = json.loads(tm.group(1)) if tm else []
            cur = []
        else:
            cur.append(line)
    flush()
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i:03d}"
    return nb


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    nb = convert(open(src, encoding="utf-8").read())
    nbformat.validate(nb)
    nbformat.write(nb, dst)
    print(f"wrote {dst}: {len(nb.cells)} cells")
