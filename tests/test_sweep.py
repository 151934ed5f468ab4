"""Tests of capbook.sweeps.sweep: interpolation, choosing S, T, capacity and blended mixes.

The book's reference figures (S = 32, TPOT 40 ms, prefill 0.25 s, T = 12.25 s, 2.61 req/s,
784 vs 800 tok/s, 1.33 s / 9.33 s for the summarisation slice, 11.38 s and 2.81 QPS for the
70/30 blend) come from the content brief of the book, not from this code; the illustrative
sample sweep must reproduce them when read from its committed CSV.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import capbook
from capbook.sweeps.sweep import (
    CONFIG_COLUMNS,
    METRIC_COLUMNS,
    Sweep,
    blended_capacity,
    blended_service_time,
    capacity_vs_long_share,
    choose_slots,
    list_sample_sweeps,
    load_sample_sweep,
    token_rates_at_capacity,
)
from capbook.queueing import replica_capacity


def make_table(n, tpot50, tpot95=None, tpot99=None, ttft50=None, inp=1000.0, out=200.0):
    n = np.asarray(n, float)
    tpot50 = np.asarray(tpot50, float)
    tpot95 = tpot50 * 1.1 if tpot95 is None else np.asarray(tpot95, float)
    tpot99 = tpot95 * 1.05 if tpot99 is None else np.asarray(tpot99, float)
    ttft50 = np.full_like(n, 0.2) if ttft50 is None else np.asarray(ttft50, float)
    return pd.DataFrame({
        "concurrency": n,
        "ttft_p50_s": ttft50,
        "ttft_p95_s": ttft50 * 1.5,
        "ttft_p99_s": ttft50 * 2,
        "tpot_p50_s": tpot50,
        "tpot_p95_s": tpot95,
        "tpot_p99_s": tpot99,
        "request_throughput_rps": n / (0.2 + out * tpot50),
        "output_throughput_tps": n / tpot50,
        "mean_input_tokens": inp,
        "mean_output_tokens": out,
        "num_requests": 100,
        "model": "m", "params_b": 8.0, "gpu": "g", "tensor_parallel": 1,
        "engine": "e", "precision": "bf16", "workload": "w",
    })


# -- the book's illustrative figures -------------------------------------------------------------
@pytest.fixture(scope="module")
def illus():
    return load_sample_sweep("illustrative_chat")


def test_illustrative_slots(illus):
    c = choose_slots(illus, 0.050, q=95, margin=0.10)
    assert c.S == 32
    assert c.next_level == 48
    assert "48" in c.reason and "p95 TPOT" in c.reason
    assert c.limit_s == pytest.approx(0.045)
    assert c.tpot_at_S <= 0.045
    assert int(c) == 32


def test_illustrative_figures(illus):
    assert round(float(illus.tpot(32)), 3) == 0.040
    assert 1 / float(illus.tpot(32, q="mean")) == pytest.approx(25.0, abs=1e-6)   # calibrated on the mean
    assert f"{float(illus.prefill_time(1500)):.2f}" == "0.25"
    T = float(illus.service_time_s(32, 1500, 300))
    assert f"{T:.2f}" == "12.25"
    assert T == pytest.approx(float(illus.prefill_time(1500)) + 300 * float(illus.tpot(32, q="mean")))
    lam = float(replica_capacity(32, T))
    assert f"{lam:.2f}" == "2.61"
    x = token_rates_at_capacity(illus, 32, 1500, 300)
    assert f"{x['output_tps']:.0f}" == "784"
    assert f"{x['decode_only_tps']:.0f}" == "800"
    # the gap is exactly the prefill share of T
    assert x["output_tps"] / x["decode_only_tps"] == pytest.approx(1 - x["prefill_share"])
    assert x["prefill_share"] == pytest.approx(float(illus.prefill_time(1500)) / T)
    # summarisation slice
    assert f"{float(illus.prefill_time(8000)):.2f}" == "1.33"
    assert f"{float(illus.service_time_s(32, 8000, 200)):.2f}" == "9.33"
    mix = [(0.7, 1500, 300), (0.3, 8000, 200)]
    Tb = blended_service_time(illus, mix, 32)
    assert f"{Tb:.2f}" == "11.38"
    assert f"{blended_capacity(illus, mix, 32):.2f}" == "2.81"
    assert Tb == pytest.approx(0.7 * T + 0.3 * float(illus.service_time_s(32, 8000, 200)))


def test_illustrative_config_and_reexport(illus):
    assert capbook.Sweep is Sweep
    assert illus.config["model"] == "Llama-3.1-8B"
    assert illus.config["tensor_parallel"] == 1
    assert set(CONFIG_COLUMNS) <= set(illus.config)
    assert list(illus.table.columns[: len(METRIC_COLUMNS)]) == METRIC_COLUMNS
    assert illus.notes == []


def test_sample_sweeps_listed_and_loadable():
    names = list_sample_sweeps()
    assert len(names) >= 4
    assert "illustrative_chat" in names
    gpus, tps, workloads = set(), set(), set()
    for name in names:
        s = load_sample_sweep(name)
        gpus.add(s.config["gpu"])
        tps.add(s.config["tensor_parallel"])
        workloads.add(s.config["workload"].split()[0])
        # TPOT rises with concurrency in every modelled sweep (batching costs per step)
        assert np.all(np.diff(s.table["tpot_p50_s"]) > 0), name
        # percentiles are ordered
        t = s.table
        assert np.all(t.tpot_p50_s <= t.tpot_p95_s) and np.all(t.tpot_p95_s <= t.tpot_p99_s)
        assert np.all(t.ttft_p50_s <= t.ttft_p95_s) and np.all(t.ttft_p95_s <= t.ttft_p99_s)
    assert {"H100-SXM-80GB", "L4"} <= gpus
    assert {4, 8} & tps
    assert {"chat", "summarisation"} <= workloads or {"chat", "retrieval"} <= workloads
    with pytest.raises(ValueError, match="unknown sample sweep"):
        load_sample_sweep("nope")


# -- interpolation ------------------------------------------------------------------------------
def test_interpolation_is_linear_between_levels():
    n = [1, 2, 4, 8]
    y = [0.010, 0.012, 0.016, 0.030]
    s = Sweep.from_frame(make_table(n, y))
    assert float(s.tpot(3)) == pytest.approx(0.014)
    assert float(s.tpot(6)) == pytest.approx(0.023)
    got = s.tpot(np.array([[1, 1.5], [8, 4]]))
    assert got.shape == (2, 2)
    assert got == pytest.approx(np.array([[0.010, 0.011], [0.030, 0.016]]))
    assert float(s.tpot(3, q=95)) == pytest.approx(0.014 * 1.1)
    assert float(s.ttft(5)) == pytest.approx(0.2)


def test_interpolation_range_errors_and_extrapolation():
    s = Sweep.from_frame(make_table([2, 4, 8], [0.010, 0.012, 0.020]), name="x")
    with pytest.raises(ValueError, match=r"outside the measured range \[2, 8\]"):
        s.tpot(16)
    with pytest.raises(ValueError, match="outside"):
        s.tpot([1, 4])
    assert float(s.tpot(16, extrapolate=True)) == pytest.approx(0.020 + 8 * 0.002)
    assert float(s.tpot(1, extrapolate=True)) == pytest.approx(0.009)
    with pytest.raises(ValueError, match="q=90"):
        s.tpot(4, q=90)
    with pytest.raises(ValueError, match="concurrency"):
        s.tpot(-1)
    assert any("lowest level is concurrency 2" in x for x in s.notes)


def test_missing_percentile_is_an_error_not_a_nan():
    t = make_table([1, 2, 4], [0.01, 0.011, 0.013])
    t["tpot_p95_s"] = np.nan
    s = Sweep.from_frame(t, name="vllm-like")
    assert not s.has("tpot", 95) and s.has("tpot", 99)
    with pytest.raises(ValueError, match="tpot_p95_s"):
        s.tpot(2, q=95)
    with pytest.raises(ValueError, match="tpot_p95_s"):
        choose_slots(s, 0.05, q=95)
    assert choose_slots(s, 0.05, q=99).S == 4


# -- validation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mutate, match", [
    (lambda t: t.drop(columns="tpot_p50_s"), "tpot_p50_s"),
    (lambda t: t.assign(concurrency=[1, 1, 4]), "several rows at concurrency"),
    (lambda t: t.assign(concurrency=[0, 2, 4]), "concurrency"),
    (lambda t: t.assign(tpot_p50_s=["a", "b", "c"]), "not numeric"),
    (lambda t: t.assign(mean_input_tokens=[1.0, np.nan, 2.0]), r"mean_input_tokens.*row\(s\) \[1\]"),
    (lambda t: t.assign(model=["a", "b", "a"]), "constant within one sweep"),
    (lambda t: t.iloc[:0], "no rows"),
    (lambda t: t.assign(ttft_p95_s=[-1.0, 0.1, 0.1]), "negative"),
])
def test_bad_tables(mutate, match):
    t = make_table([1, 2, 4], [0.01, 0.011, 0.013])
    with pytest.raises(ValueError, match=match):
        Sweep.from_frame(mutate(t))


def test_table_is_sorted_and_copied():
    t = make_table([4, 1, 2], [0.013, 0.01, 0.011])
    s = Sweep.from_frame(t)
    assert s.concurrency.tolist() == [1, 2, 4]
    tab = s.table
    tab.loc[0, "tpot_p50_s"] = 99
    assert float(s.tpot(1)) == pytest.approx(0.01)
    with pytest.raises(TypeError):
        Sweep.from_frame({"concurrency": [1]})


def test_from_csv_names_the_file(tmp_path):
    p = tmp_path / "bad.csv"
    make_table([1, 2], [0.01, 0.02]).drop(columns="num_requests").to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"bad\.csv.*num_requests"):
        Sweep.from_csv(p)
    with pytest.raises(ValueError, match="does not exist"):
        Sweep.from_csv(tmp_path / "missing.csv")


# -- choosing S ---------------------------------------------------------------------------------
def test_choose_slots_stops_at_first_failure_even_if_a_later_level_passes():
    # noisy sweep: level 8 fails, 16 passes again; S must be 4 (every level up to S passes)
    s = Sweep.from_frame(make_table([1, 2, 4, 8, 16], [0.01, 0.02, 0.03, 0.05, 0.03],
                                    tpot95=[0.01, 0.02, 0.03, 0.05, 0.03]))
    c = choose_slots(s, 0.04, q=95, margin=0)
    assert c.S == 4 and c.next_level == 8
    assert c.table["ok"].tolist() == [True, True, True, False, True]


def test_choose_slots_edge_cases():
    s = Sweep.from_frame(make_table([1, 2, 4], [0.01, 0.02, 0.03], tpot95=[0.01, 0.02, 0.03]))
    c = choose_slots(s, 1.0)
    assert c.S == 4 and c.next_level is None and "sweep ends at 4" in c.reason
    c0 = choose_slots(s, 0.005)
    assert c0.S == 0 and np.isnan(c0.tpot_at_S) and "cannot meet" in c0.reason
    # TTFT objective also binds
    c2 = choose_slots(s, 1.0, ttft_target_s=0.25, ttft_q=95)  # ttft p95 = 0.3 everywhere
    assert c2.S == 0 and "TTFT" in c2.reason
    for bad in [dict(tpot_target_s=0), dict(tpot_target_s=np.nan), dict(tpot_target_s=0.05, margin=1),
                dict(tpot_target_s=0.05, margin=-0.1), dict(tpot_target_s=0.05, q=90)]:
        with pytest.raises(ValueError):
            choose_slots(s, **bad)
    with pytest.raises(TypeError):
        choose_slots(s.table, 0.05)


@settings(max_examples=40, deadline=None)
@given(
    incs=st.lists(st.floats(0.0, 0.02), min_size=2, max_size=8),
    target=st.floats(0.005, 0.2),
    margin=st.floats(0.0, 0.5),
)
def test_choose_slots_properties(incs, target, margin):
    n = 2 ** np.arange(len(incs))
    y = 0.005 + np.cumsum(incs)
    s = Sweep.from_frame(make_table(n, y, tpot95=y))
    c = choose_slots(s, target, q=95, margin=margin)
    limit = target * (1 - margin)
    ok = y <= limit
    # oracle: S is the level before the first failure
    first_fail = np.argmin(ok) if not ok.all() else len(n)
    expect = 0 if first_fail == 0 else int(n[first_fail - 1])
    assert c.S == expect
    # a looser target never gives fewer slots, a larger margin never gives more
    assert choose_slots(s, target * 1.5, q=95, margin=margin).S >= c.S
    assert choose_slots(s, target, q=95, margin=min(0.99, margin + 0.2)).S <= c.S


# -- service time and mixes ---------------------------------------------------------------------
def test_service_time_defaults_and_vectorisation():
    s = Sweep.from_frame(make_table([1, 2, 4], [0.01, 0.02, 0.03], inp=1000, out=200))
    rate = 1000 / 0.2
    assert s.prefill_rate_tps == pytest.approx(rate)
    assert float(s.service_time_s(2)) == pytest.approx(1000 / rate + 200 * 0.02)
    got = s.service_time_s([1, 4], [500, 2000], [100, 10])
    assert got == pytest.approx([500 / rate + 100 * 0.01, 2000 / rate + 10 * 0.03])
    with pytest.raises(ValueError, match="input_tokens"):
        s.prefill_time(-5)
    with pytest.raises(ValueError, match="output_tokens"):
        s.service_time_s(2, 100, -1)
    assert replica_capacity([32, 16], [12.25, 8]) == pytest.approx([32 / 12.25, 2])
    with pytest.raises(ValueError, match="service_time"):
        replica_capacity(32, 0)


def test_blends_validate_and_match_linear_mix(illus):
    with pytest.raises(ValueError, match="sum to 1"):
        blended_service_time(illus, [(0.5, 1500, 300), (0.4, 8000, 200)], 32)
    with pytest.raises(ValueError, match="empty"):
        blended_service_time(illus, [], 32)
    with pytest.raises(ValueError, match="lacks column"):
        blended_service_time(illus, pd.DataFrame({"share": [1.0]}), 32)
    df = pd.DataFrame({"share": [0.7, 0.3], "input_tokens": [1500, 8000], "output_tokens": [300, 200]})
    m = {"chat": (0.7, 1500, 300), "summ": (0.3, 8000, 200)}
    assert blended_service_time(illus, df, 32) == pytest.approx(blended_service_time(illus, m, 32))
    curve = capacity_vs_long_share(illus, 32, (1500, 300), (8000, 200))
    assert curve["long_share"].iloc[0] == 0 and curve["long_share"].iloc[-1] == 1
    row30 = curve.loc[np.isclose(curve.long_share, 0.3)].iloc[0]
    assert row30.capacity_rps == pytest.approx(blended_capacity(illus, m, 32))
    # long summarisation requests here hold a slot for less time (200 vs 300 outputs), so
    # requests/s rises while input tokens/s rises much faster
    assert np.all(np.diff(curve.input_tps) > 0)
    with pytest.raises(ValueError):
        capacity_vs_long_share(illus, 32, (1500, 300), (8000, 200), shares=[1.5])


def test_choose_slots_on_open_loop_levels():
    # open-loop sweeps have fractional mean in-flight levels; S is the passing level rounded
    # down (at least one slot) and .level names the measured row
    s = Sweep.from_frame(make_table([0.49, 17.0, 41.6, 93.3], [0.0035, 0.004, 0.005, 0.0074],
                                    tpot95=[0.0035, 0.004, 0.005, 0.0094]))
    c = choose_slots(s, 0.006, q=95, margin=0)
    assert c.S == 41 and c.level == 41.6 and c.next_level == 93.3
    assert c.tpot_at_S == pytest.approx(0.005)
    assert "93.3" in c.reason
    c1 = choose_slots(s, 0.0038, q=95, margin=0)
    assert c1.S == 1 and c1.level == 0.49


# -- one- and two-level sweeps, saturated points -------------------------------------------------
def test_single_level_sweep_plans_and_says_why():
    s = Sweep.from_frame(make_table([1], [0.01]), name="one")
    c = choose_slots(s, 0.05, q=95)
    assert c.S == 1 and c.level == 1 and c.next_level is None
    assert c.reason.startswith("the sweep has a single level (1): S is that level")
    assert c.reason.endswith("measure higher concurrency to know whether more slots fit")
    # TPOT/TTFT are read flat at any concurrency (callers ask at other levels), with a note
    assert float(s.tpot(8)) == pytest.approx(0.01) and float(s.ttft(0.5, q=99)) == pytest.approx(0.4)
    assert s.tpot([1, 2, 16]) == pytest.approx([0.01] * 3)
    assert float(s.service_time_s(4)) == pytest.approx(1000 / (1000 / 0.2) + 200 * 0.01)
    assert any("single level (1)" in n and "flat" in n for n in s.notes)
    with pytest.raises(ValueError, match="concurrency"):
        s.tpot(0)
    bad = choose_slots(s, 0.005, q=95)
    assert bad.S == 0 and "only level (1) already fails" in bad.reason


def test_two_level_sweep_interpolates_and_says_so():
    s = Sweep.from_frame(make_table([0.5, 40.0], [0.01, 0.03], tpot95=[0.01, 0.03]), name="two")
    assert float(s.tpot(20.25)) == pytest.approx(0.02)
    c = choose_slots(s, 0.05, q=95, margin=0)
    assert c.S == 40 and "only two levels (0.5, 40)" in c.reason
    assert any("only two levels" in n for n in s.notes)
    with pytest.raises(ValueError, match="outside the measured range"):
        s.tpot(80)  # beyond the last level still needs extrapolate=True
    assert float(s.tpot(80, extrapolate=True)) > 0.03


def test_fractional_lowest_level_reads_flat_down_to_its_floor():
    # open-loop levels are fractional; S = floor(level) may sit just below the lowest level
    s = Sweep.from_frame(make_table([1.12, 1.45, 1.66], [0.0059, 0.0062, 0.0064]))
    c = choose_slots(s, 0.05, q=50)
    assert c.S == 1 and c.level == 1.66 and "rounded down to 1" in c.reason
    assert float(s.tpot(1)) == pytest.approx(0.0059) and float(s.service_time_s(1)) > 0
    with pytest.raises(ValueError, match="outside"):
        s.tpot(0.9)


def test_saturated_rows_are_kept_apart():
    t = make_table([1, 2, 4, 8], [0.01, 0.02, 0.03, 0.05])
    t["saturated"] = [False, False, True, True]
    t["saturation_reason"] = [None, None, "achieved send rate 80% of requested", "x"]
    t["request_rate_target"] = [1.0, 2.0, 4.0, 8.0]
    s = Sweep.from_frame(t, name="sat")
    assert s.concurrency.tolist() == [1, 2] and len(s.saturated) == 2
    assert s.saturation_rps == pytest.approx(t.request_throughput_rps.iloc[2:].max())
    assert any("2 saturated load points" in n and "rate 4 req/s (achieved" in n for n in s.notes)
    c = choose_slots(s, 1.0, q=95)
    assert c.S == 2 and "2 saturated points above it" in c.reason
    t["saturated"] = True
    with pytest.raises(ValueError, match="every load point .* is saturated"):
        Sweep.from_frame(t, name="all")
    # a CSV round trip keeps the flag (strings "True"/"False")
    t["saturated"] = ["False", "False", "True", "True"]
    assert Sweep.from_frame(t).concurrency.tolist() == [1, 2]


def test_an_implausibly_slow_derived_prefill_is_flagged():
    base = load_sample_sweep("illustrative_chat")
    assert not any("implausibly slow" in n for n in base.notes)
    # a TTFT of 1.4 s for 150 input tokens (hidden reasoning tokens before the first visible one)
    t = base.table.assign(mean_input_tokens=150.0, ttft_p50_s=1.4)
    slow = Sweep.from_frame(t, name="reasoning")
    assert slow.prefill_rate_tps == pytest.approx(150 / 1.4)
    assert any("implausibly slow" in n and "prefill_rate_tps=" in n for n in slow.notes)
    slow.set_prefill_rate(12_000, "measured")
    assert not any("implausibly slow" in n for n in slow.notes)
    assert slow.prefill_time(12_000) == pytest.approx(1.0)


def test_zero_slots_have_no_capacity_anywhere(illus):
    # sweep's capacity used to return 0 for S = 0 where queueing.replica_capacity raised: one
    # implementation now, and a blend or a token check at zero slots is refused the same way
    with pytest.raises(ValueError, match="slots"):
        replica_capacity(0, 12.25)
    with pytest.raises(ValueError, match="slots"):
        blended_capacity(illus, [(1.0, 1500, 300)], 0)
    with pytest.raises(ValueError, match="slots"):
        token_rates_at_capacity(illus, 0, 1500, 300)


@pytest.mark.parametrize("bad", ["3", True, float("nan")])
def test_public_functions_refuse_text_bools_and_nan(illus, bad):
    with pytest.raises(ValueError, match="^tpot_target_s"):
        choose_slots(illus, bad)
    with pytest.raises(ValueError, match="^margin"):
        choose_slots(illus, 0.05, margin=bad)
    with pytest.raises(ValueError, match="^q"):
        choose_slots(illus, 0.05, q=bad)
    with pytest.raises(ValueError, match="^concurrency"):
        illus.tpot(bad if not isinstance(bad, float) else [4, bad])
    with pytest.raises(ValueError, match="^input_tokens"):
        illus.prefill_time(bad)
    with pytest.raises(ValueError, match="^prefill_rate_tps"):
        load_sample_sweep().set_prefill_rate(bad)


def test_sample_sweeps_honour_capbook_data(tmp_path, monkeypatch):
    (tmp_path / "sweeps").mkdir()
    src = load_sample_sweep().table
    src.to_csv(tmp_path / "sweeps" / "only_mine.csv", index=False)
    monkeypatch.setenv("CAPBOOK_DATA", str(tmp_path))
    assert list_sample_sweeps() == ["only_mine"]
    assert load_sample_sweep("only_mine").name == "only_mine"
    with pytest.raises(ValueError, match="unknown sample sweep"):
        load_sample_sweep()


# -- the mean TPOT (q="mean"): what Little's law needs for a mean holding time ---------------
def test_mean_tpot_interpolates_the_tpot_mean_column(illus):
    t = illus.table
    n, col = t["concurrency"].to_numpy(float), t["tpot_mean_s"].to_numpy(float)
    assert illus.has("tpot", "mean") and illus.has("ttft", "mean")
    for c in (1, 20, 32, 40.5, 64):
        assert illus.tpot(c, q="mean") == pytest.approx(float(np.interp(c, n, col)), rel=1e-12)
    np.testing.assert_allclose(illus.tpot([3, 32, 50], q="mean"), np.interp([3, 32, 50], n, col))
    # the mean and median TPOT at S differ by far less than a millisecond on the sample sweep
    assert abs(illus.tpot(32, q="mean") - illus.tpot(32)) < 1e-4


def test_mean_service_time_uses_the_mean_tpot(illus):
    T = float(illus.service_time_s(32, 1500, 300, q="mean"))
    assert T == pytest.approx(float(illus.prefill_time(1500)) + 300 * illus.tpot(32, q="mean"), rel=1e-12)
    # the mean is the default where the sweep reports it (Little's law needs the mean holding time) ...
    assert illus.holding_statistic == "mean"
    assert float(illus.service_time_s(32, 1500, 300)) == T
    assert float(illus.service_time_s(32, 1500, 300, q=50)) == pytest.approx(
        float(illus.prefill_time(1500)) + 300 * illus.tpot(32, q=50), rel=1e-12)
    assert float(illus.service_time_s(32, 1500, 300, q=50)) != T
    # ... and the median stands in for it where the sweep does not
    nomean = Sweep.from_frame(make_table([1, 2, 4], [0.01, 0.012, 0.015]), name="nomean")
    assert nomean.holding_statistic == 50
    assert float(nomean.service_time_s(2, 100, 10)) == float(nomean.service_time_s(2, 100, 10, q=50))
    x = token_rates_at_capacity(illus, 32, 1500, 300, q="mean")
    assert x["service_time_s"] == pytest.approx(T)
    assert float(blended_service_time(illus, [(1.0, 1500, 300)], 32, q="mean")) == pytest.approx(T)


def test_mean_tpot_missing_column_names_it_and_suggests_q50():
    sw = Sweep.from_frame(make_table([1, 2, 4], [0.01, 0.012, 0.015]), name="nomean")
    assert not sw.has("tpot", "mean")
    with pytest.raises(ValueError, match=r"tpot_mean_s.*q=50"):
        sw.tpot(2, q="mean")
    with pytest.raises(ValueError, match=r"tpot_mean_s.*q=50"):
        sw.service_time_s(2, 1000, 200, q="mean")
    # a column with a missing value at some level is refused the same way
    df = make_table([1, 2, 4], [0.01, 0.012, 0.015]).assign(tpot_mean_s=[0.01, np.nan, 0.015])
    with pytest.raises(ValueError, match="tpot_mean_s"):
        Sweep.from_frame(df).tpot(2, q="mean")
    with pytest.raises(ValueError, match="'median' must be 'mean' or one of"):
        sw.tpot(2, q="median")
