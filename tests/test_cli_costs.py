"""``capbook plan --prices``, ``capbook compare`` and ``capbook book --prices``: the cost of a plan on
the command line, on the sample gateway and on a real log and sweep."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd
import pytest

from capbook.app import bookbuild
from capbook.app import datasets
from capbook.app.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
PRICES = ROOT / "data" / "prices" / "illustrative.csv"


def _cost_rows(path: Path) -> dict:
    t = pd.read_csv(path)
    c = t[t["step"] == "cost"]
    return dict(zip(c["quantity"], c["value"]))


@pytest.fixture(scope="module")
def sample_plan(tmp_path_factory):
    """``capbook plan --prices`` on the sample gateway, once: (stdout, plan.csv cost rows, plan.md)."""
    out = tmp_path_factory.mktemp("plan")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["plan", "--prices", str(PRICES), "--no-autoscale", "--out", str(out)]) == 0
    return buf.getvalue(), _cost_rows(out / "plan.csv"), (out / "plan.md").read_text(), pd.read_csv(out / "plan.csv")


def test_plan_prices_rows_are_the_arithmetic(sample_plan):
    text, rows, md, table = sample_plan
    total = int(table.loc[(table["step"] == "fleet") & (table["quantity"] == "total replicas"), "value"].iloc[0])
    # the sample sweep is one A100 per replica; the illustrative table prices it at 2.20 / 1.40
    assert rows["GPU"] == "A100-SXM-80GB" and int(rows["GPUs per replica"]) == 1 and int(rows["GPUs"]) == total
    assert float(rows["USD per hour"]) == pytest.approx(total * 2.20)
    assert float(rows["USD per week"]) == pytest.approx(total * 2.20 * 168)
    assert float(rows["USD per year"]) == pytest.approx(total * 2.20 * 8760)
    assert float(rows["USD per hour (reserved)"]) == pytest.approx(total * 1.40)
    # the per-token pair shares the fleet's hour between output and input tokens by replica time: the
    # tokens of the planned peak hour, priced, pay exactly for the fleet's hour
    out_tps = float(table.loc[(table["step"] == "peak") & (table["quantity"] == "output tokens"), "value"].iloc[0])
    in_tps = float(table.loc[(table["step"] == "peak") & (table["quantity"] == "input tokens"), "value"].iloc[0])
    paid = (float(rows["USD per million output tokens"]) * out_tps
            + float(rows["USD per million input tokens"]) * in_tps) * 3600 / 1e6
    assert paid == pytest.approx(total * 2.20, rel=1e-9)
    # the reserve split: break-even is the price ratio
    assert float(rows["break-even share of hours (reserved / on-demand price)"]) == pytest.approx(1.40 / 2.20)
    assert 0 < int(float(rows["replicas to reserve (following the week)"])) <= total
    assert int(float(rows["replicas at the P50 peak hour"])) <= int(float(rows["replicas at the P90 peak hour"])) \
        <= int(float(rows["replicas at the P99 peak hour"]))
    # printed and in the review document
    assert "\nCost\n" in text and f"{total} replicas × 1 A100-SXM-80GB" in text
    assert "## Cost" in md and "USD" not in md.split("## Cost")[0].split("## Replicas")[0]


def test_prices_flag_errors_name_the_flag(tmp_path, capsys):
    # --gpu serves the engine model too (no --prices needed), but must be a GPU capbook knows
    assert cli_main(["plan", "--no-sim", "--gpu", "H101", "--out", str(tmp_path / "a")]) == 2
    assert "--gpu 'H101': not a GPU capbook knows" in capsys.readouterr().err
    assert cli_main(["plan", "--no-sim", "--prices", str(tmp_path / "none.csv"), "--out", str(tmp_path / "b")]) == 2
    assert "--prices" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour\nA100-SXM-80GB,2.2,\n")
    assert cli_main(["plan", "--no-sim", "--prices", str(bad), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"capbook plan: --prices {bad}, line 2 (A100-SXM-80GB): missing reserved_usd_per_gpu_hour")
    other = tmp_path / "other.csv"
    other.write_text("gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour\nB200,6,4\n")
    assert cli_main(["plan", "--no-sim", "--prices", str(other), "--out", str(tmp_path / "d")]) == 2
    assert "no price for GPU 'A100-SXM-80GB' (the table prices B200)" in capsys.readouterr().err
    assert not (tmp_path / "d" / "plan.csv").exists()


def test_gpu_and_tensor_parallel_flags_price_a_sweep_that_does_not_say(tmp_path, capsys):
    sweep = pd.read_csv(ROOT / "data" / "sweeps" / "illustrative_chat.csv").drop(columns=["gpu", "tensor_parallel"])
    path = tmp_path / "mine.csv"
    sweep.to_csv(path, index=False)
    log = ROOT / "data" / "gateway" / "peak_hours.parquet"
    args = ["plan", "--requests", str(log), "--sweep", str(path), "--no-sim", "--no-autoscale", "--prices", str(PRICES)]
    assert cli_main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "pass --gpu NAME" in capsys.readouterr().err
    assert cli_main([*args, "--gpu", "h100 sxm 80gb", "--out", str(tmp_path / "b")]) == 2
    assert "pass --tensor-parallel N" in capsys.readouterr().err
    assert cli_main([*args, "--gpu", "h100 sxm 80gb", "--tensor-parallel", "2", "--out", str(tmp_path / "c")]) == 0
    rows = _cost_rows(tmp_path / "c" / "plan.csv")
    assert rows["GPU"] == "H100-SXM-80GB" and int(rows["GPUs per replica"]) == 2
    assert float(rows["USD per hour"]) == pytest.approx(int(rows["GPUs"]) * 4.00)
    assert cli_main([*args, "--gpu", "H100-SXM-80GB", "--tensor-parallel", "1.5", "--out", str(tmp_path / "e")]) == 2
    assert "--tensor-parallel" in capsys.readouterr().err


def test_compare_default_picks_the_h100_and_says_why(tmp_path, capsys):
    assert cli_main(["compare", "--no-sim", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    t = pd.read_csv(tmp_path / "compare.csv")
    assert list(t["sweep"]) == ["llama8b_h100_chat", "illustrative_chat", "llama8b_l4_chat"]
    ok = t[t["status"] == "ok"]
    assert (ok["usd_per_hour"] == ok["replicas"] * ok["gpus_per_replica"]
            * ok["gpu"].map({"H100-SXM-80GB": 4.0, "A100-SXM-80GB": 2.2})).all()
    assert ok["usd_per_hour"].is_monotonic_increasing
    l4 = t[t["sweep"] == "llama8b_l4_chat"].iloc[0]
    assert l4["status"] == "cannot meet" and "TPOT" in l4["reason"]
    assert "Cheapest: llama8b_h100_chat" in text and "% more" in text and "requests per dollar" in text
    assert "llama8b_l4_chat: cannot meet the objectives" in text
    assert "| llama8b_l4_chat | L4 | 1 |  |" in (tmp_path / "compare.md").read_text()


def test_compare_tensor_parallel_layouts(tmp_path, capsys):
    assert cli_main(["compare", "llama70b_h100_tp4_chat", "llama70b_h100_tp8_chat", "--no-sim",
                     "--out", str(tmp_path)]) == 0
    t = pd.read_csv(tmp_path / "compare.csv").set_index("sweep")
    assert t.loc["llama70b_h100_tp4_chat", "gpus"] == 4 * t.loc["llama70b_h100_tp4_chat", "replicas"]
    assert t.loc["llama70b_h100_tp8_chat", "gpus"] == 8 * t.loc["llama70b_h100_tp8_chat", "replicas"]
    cheaper = t["usd_per_hour"].idxmin()
    assert capsys.readouterr().out.count(f"Cheapest: {cheaper}") == 1


def test_compare_refuses_what_it_cannot_compare(tmp_path, capsys):
    assert cli_main(["compare", "no_such_sweep", "--out", str(tmp_path)]) == 2
    assert "not a sample sweep" in capsys.readouterr().err
    assert cli_main(["compare", "illustrative_chat", "llama70b_h100_tp4_chat", "--no-sim", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "different models" in err and "Llama-3.1-70B" in err and "same_model" not in err


def test_book_prices_flag_sets_the_chapters_environment(tmp_path):
    env = bookbuild._data_env(None, "auto", None, prices=str(PRICES))
    assert env["CAPBOOK_PRICES"] == str(PRICES.resolve())
    with bookbuild._environ(env):
        assert datasets.prices_path() == PRICES.resolve()
        assert not datasets.using_sample_data()  # the published figures assume the illustrative prices
        assert datasets.load_prices().gpus == ["H100-SXM-80GB", "A100-SXM-80GB", "L4"]
        note = bookbuild.data_note(datasets.data_source(), "now")
        assert f"prices: {PRICES.resolve()}" in html.unescape(re.sub(r"<[^>]+>", "", note))
    assert datasets.prices_path() is None


def test_plan_prices_on_a_real_log_and_sweep(shared_dir, tmp_path, capsys):
    """The Azure 2023 conversation trace planned on the KubeCon vLLM sweep (one H100, named
    'nvidia-h100-80gb' by its manifests) and priced with the illustrative table."""
    log = shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"
    sweep = shared_dir / "realdata" / "inference-perf-kubecon-na-2025" / "vllm"
    if not (log.is_file() and sweep.is_dir()):
        pytest.skip("the Azure conversation trace or the KubeCon sweep is not in ../shared")
    assert cli_main(["plan", "--requests", str(log), "--sweep", str(sweep), "--no-sim", "--no-autoscale",
                     "--prices", str(PRICES), "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    rows = _cost_rows(tmp_path / "plan.csv")
    t = pd.read_csv(tmp_path / "plan.csv")
    total = int(t.loc[t["quantity"] == "total replicas", "value"].iloc[0])
    assert rows["GPU"] == "H100-SXM-80GB" and float(rows["USD per hour"]) == pytest.approx(4.0 * total)
    assert "priced as 'H100-SXM-80GB'" in text
    for k in ("USD per million output tokens", "USD per million input tokens"):
        assert 0 < float(rows[k]) < 1e3
    # a trace of hours cannot be forecast: one note says what is missing, not three
    assert text.count("no per-token cost over the forecast week") == 1
    import re

    assert not re.search(r"\b(nan|inf|None)\b", (tmp_path / "plan.md").read_text())


def test_data_readme_states_the_shipped_prices():
    """data/README.md's table of illustrative prices is the CSV's, and both say they are not quotes."""
    import re

    from capbook.cost.costs import read_prices

    table = read_prices(PRICES)
    readme = (ROOT / "data" / "README.md").read_text()
    section = readme.split("## Illustrative GPU prices")[1]
    assert "not price quotes" in section and "2026-12-01" in section
    assert any("NOT price quotes" in c for c in table.comments) and any("2026-12-01" in c for c in table.comments)
    rows = {m[0]: (float(m[1]), float(m[2])) for m in re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| ([\d.]+) \|", section, re.M)}
    assert rows == {r.gpu: (r.on_demand_usd_per_gpu_hour, r.reserved_usd_per_gpu_hour)
                    for r in table.frame.itertuples()}


def test_saturation_price_flag(tmp_path, capsys):
    """--saturation-price adds the fleet minimising capacity + saturation cost; the rows agree with
    optimal_quantile on the same plan, and a higher price never buys fewer replicas."""
    got = {}
    for usd in ("0.01", "1"):
        out = tmp_path / usd
        assert cli_main(["plan", "--no-sim", "--no-autoscale", "--prices", str(PRICES), "--saturation-price", usd,
                         "--out", str(out)]) == 0
        text = capsys.readouterr().out
        rows = _cost_rows(out / "plan.csv")
        assert float(rows["price of saturation"]) == float(usd)
        got[usd] = int(float(rows["replicas minimising capacity + saturation cost"]))
        assert float(rows["USD per week, capacity + saturation, at that fleet"]) <= \
            float(rows["USD per week, capacity + saturation, at the P90 fleet"]) + 1e-9
        assert "per late request" in text and "capacity plus saturation is cheapest with" in text
    assert got["0.01"] <= got["1"]
    assert cli_main(["plan", "--no-sim", "--saturation-price", "1", "--out", str(tmp_path / "x")]) == 2
    assert "give --prices CSV too" in capsys.readouterr().err
    assert cli_main(["plan", "--no-sim", "--prices", str(PRICES), "--saturation-price", "-1",
                     "--out", str(tmp_path / "y")]) == 2
    assert "--saturation-price" in capsys.readouterr().err


def test_an_unverified_plan_says_so_beside_its_price(shared_dir, tmp_path, capsys):
    """Mooncake's conversation trace on the KubeCon chunking sweep: its p99 prompt's prefill alone
    exceeds the 1 s TTFT objective, so the fleet simulation cannot verify any fleet, and the cost section
    says the replicas it prices are Erlang C's count."""
    log = shared_dir / "traces" / "conversation_trace.jsonl"
    sweep = shared_dir / "realdata" / "inference-perf-kubecon-na-2025" / "vllm+chunking_and_prefix_caching"
    if not (log.is_file() and sweep.is_dir()):
        pytest.skip("the Mooncake trace or the KubeCon sweep is not in ../shared")
    assert cli_main(["plan", "--requests", str(log), "--sweep", str(sweep), "--prices", str(PRICES),
                     "--no-autoscale", "--out", str(tmp_path)]) == 3   # written, NOT VERIFIED
    text = capsys.readouterr().out
    assert "NOT VERIFIED" in text.splitlines()[0]
    assert "priced are Erlang C's count, which the fleet simulation could not verify" in text.split("\nCost\n")[1]
