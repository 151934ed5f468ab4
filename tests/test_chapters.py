"""The committed notebooks are the only source of the chapters: stored clean and canonical."""

import json
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} cell {i} has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_json_is_in_the_canonical_layout(path):
    """One layout (json.dump with indent=1, UTF-8 kept, final newline), so every edit diffs cleanly."""
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n", (
        f"{path.name}: rewrite it with json.dump(nb, f, indent=1, ensure_ascii=False) and a final newline "
        "(see CONTRIBUTING.md, 'Editing chapters')")


def test_cell_ids_are_unique():
    for path in CHAPTERS:
        ids = [c.get("id") for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
        assert len(ids) == len(set(ids)), f"{path.name} has duplicate cell ids"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_stated_time_is_computed_from_the_material(path):
    """"Time to learn: N minutes" is the prose at 150 words a minute plus the visible code at
    10 lines a minute, rounded up to 5 (capbook.app.bookcheck.chapter_length)."""
    from capbook.app.bookcheck import chapter_length

    n = chapter_length(path)
    assert n.stated_minutes is not None, f"{path.name} states no 'Time to learn: N minutes'"
    assert n.stated_minutes == n.minutes, (
        f"{path.name} states {n.stated_minutes} minutes; its {n.words:,} words of prose and "
        f"{n.code_lines} visible code lines take {n.minutes}: run "
        "`python tools/typed_numbers.py --write-times` (or edit the line)")


def test_chapter_length_counts_what_a_reader_reads(tmp_path):
    from capbook.app.bookcheck import chapter_length

    words = " ".join(["word"] * 300)  # 2 minutes of prose
    cells = [{"cell_type": "markdown", "source": f"# T\n\n**Time to learn**: 5 minutes.\n\n{words}"},
             {"cell_type": "code", "source": "\n".join(["x = 1"] * 25), "metadata": {}},
             {"cell_type": "code", "source": "\n".join(["glue('x', x)"] * 500),
              "metadata": {"tags": ["remove-cell"]}}]
    f = tmp_path / "c.ipynb"
    f.write_text(json.dumps({"cells": cells}))
    n = chapter_length(f)
    assert (n.code_lines, n.stated_minutes) == (25, 5)  # hidden bookkeeping does not count
    assert 300 < n.words < 310 and n.minutes == 5  # 2 + 2.5 minutes, rounded up to 5


MAX_CODE_LINE = 90


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_visible_code_fits_the_column(path):
    """Code the site shows wraps under 90 characters: longer lines scroll sideways."""
    long = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "code" or "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        long += [f"cell {i}: {line[:70]}…" for line in "".join(cell["source"]).splitlines()
                 if len(line) > MAX_CODE_LINE]
    assert not long, (f"{path.name}: {len(long)} visible code line(s) longer than {MAX_CODE_LINE} "
                      "characters:\n  " + "\n  ".join(long[:10]))
