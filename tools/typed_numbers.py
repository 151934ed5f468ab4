"""List the numbers typed in chapters' prose (capbook.app.bookcheck.typed_numbers).

Usage: python tools/typed_numbers.py [--write-times] book/X.ipynb [...]   (default: every chapter)
--write-times rewrites each chapter's "Time to learn: N minutes" to the computed time.
A number the page computes must be glued; a typed number is fine for a definition or a figure
quoted from a cited source.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from capbook.app.bookcheck import chapter_length, typed_numbers  # noqa: E402

import json  # noqa: E402
import re  # noqa: E402

write = "--write-times" in sys.argv
paths = [a for a in sys.argv[1:] if a != "--write-times"]
paths = paths or sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "book").glob("*.ipynb"))
for p in paths:
    n = chapter_length(p)
    print(f"== {p}: {n.words} words, {n.code_lines} visible code lines -> {n.minutes} min "
          f"(states {n.stated_minutes})")
    for cell, num, ctx in typed_numbers(p):
        print(f"  cell {cell:3d}  {num:>10}  … {ctx} …")
    if write and n.stated_minutes != n.minutes:
        nb = json.loads(Path(p).read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            new = re.sub(r"(Time to learn\**:?\**\s*)\d+(\s*minutes)", rf"\g<1>{n.minutes}\2", src, count=1)
            if cell["cell_type"] == "markdown" and new != src:
                cell["source"] = new.splitlines(keepends=True)
                break
        Path(p).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"  wrote {n.minutes} minutes")

if write:  # the landing page's parts table: each part's time is the sum of its chapters'
    import yaml  # noqa: E402

    root = Path(__file__).resolve().parents[1]
    intro = root / "book" / "intro.md"
    text = intro.read_text(encoding="utf-8")
    for part in yaml.safe_load((root / "_toc.yml").read_text())["parts"]:
        if part["caption"] == "Reference":
            continue
        total = sum(chapter_length(root / f"{c['file']}.ipynb").minutes for c in part["chapters"])
        text = re.sub(rf"(\| {re.escape(part['caption'])} \|[^\n]*\| )\d+( minutes \|)",
                      rf"\g<1>{total}\2", text)
    intro.write_text(text, encoding="utf-8")
