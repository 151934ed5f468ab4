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
