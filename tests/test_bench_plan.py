"""benchmarks/bench_plan.py: how it compares two plans' plan.md (the benchmark's verdict)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_plan", ROOT / "benchmarks" / "bench_plan.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _plan(rows, seconds="2.5", serving=21):
    table = "\n".join(f"| {n} | 0.648 | 0 | {g} | 0.0015 | 2 | {m} |" for n, g, m in rows)
    return (f"# Plan\n\nServing replicas: {serving}\n\nFleet sizes simulated ({seconds} s; margins are 95 % half-widths):\n\n"
            "| replicas | ttft_q_s | ttft_q_margin_s | goodput_share | goodput_margin | seeds | meets |\n"
            f"|---|---|---|---|---|---|---|\n{table}\n\nReproduce: `capbook simulate --replicas {serving}`\n")


def test_plan_md_comparison_tells_a_search_that_simulated_other_sizes_from_a_different_plan(tmp_path):
    compare_md = _bench().compare_md
    old = [(13, 0.01, False), (20, 0.988, False), (21, 0.994, True), (24, 0.998, True)]
    new = [(20, 0.988, False), (21, 0.994, True)]
    files = {}
    for name, text in {"old": _plan(old, "7.1"), "new": _plan(new), "same": _plan(new, "9.9"),
                       "other_row": _plan([(20, 0.97, False), (21, 0.994, True)]),
                       "other_plan": _plan(new, serving=22)}.items():
        files[name] = tmp_path / f"{name}.md"
        files[name].write_text(text)
    assert compare_md(files["new"], files["same"]) == "identical"          # the search's seconds are not compared
    verdict = compare_md(files["old"], files["new"])
    assert verdict.startswith("identical but for the search table")
    assert "reference simulated: 13, 24;" in verdict and "only the working tree: none" in verdict
    assert compare_md(files["new"], files["other_row"]) == "DIFFERS"       # a size both simulated, measured differently
    assert compare_md(files["new"], files["other_plan"]) == "DIFFERS"      # a line outside the table
