"""Tests of the tokens-to-replicas conversion."""
from __future__ import annotations

import math

import numpy as np
import pytest

from capbook.sweeps import replicas as rp
from capbook.sweeps.sweep import load_sample_sweep


def test_published_figures():
    rating = rp.ReplicaRating(9_000, 60_000)
    base = rp.replicas_for_tokens(27_600, 6 * 27_600, rating, 0.8)
    assert round(base.output_equivalents, 2) == 3.07
    assert round(base.input_equivalents, 2) == 2.76
    assert base.replicas == 8
    long_ctx = rp.replicas_for_tokens(27_600, 12 * 27_600, rating, 0.8)
    assert long_ctx.output_equivalents == base.output_equivalents  # output tokens unchanged
    assert long_ctx.replicas == 11
    growth = long_ctx.replicas / base.replicas - 1
    assert 0.35 <= growth < 0.40  # "nearly 40 % more"


def test_replicas_is_smallest_meeting_headroom():
    rating = rp.ReplicaRating(2_000, 10_000)
    for out in np.linspace(100, 50_000, 37):
        need = rp.replicas_for_tokens(out, 4 * out, rating, 0.75)
        assert need.equivalents / need.replicas <= 0.75 + 1e-12
        if need.replicas > 1:
            assert need.equivalents / (need.replicas - 1) > 0.75


def test_rating_from_sweep_makes_operating_point_full():
    sw = load_sample_sweep()
    rating = rp.rating_from_sweep(sw, 32)
    tab = sw.table.set_index("concurrency")
    out = tab.loc[32, "output_throughput_tps"]
    inp = tab.loc[32, "request_throughput_rps"] * tab.loc[32, "mean_input_tokens"]
    assert rating.fraction(out, inp) == pytest.approx(1.0, rel=1e-12)
    # the decode-only rating exceeds slots / TPOT(32): measured TPOT includes prefill pauses
    assert rating.output_tps > 32 / float(sw.tpot(32))
    assert rating.input_tps == pytest.approx(sw.prefill_rate_tps)


def test_rating_from_two_mixes_recovers_known_ratings():
    true = rp.ReplicaRating(2_500, 20_000)
    # saturated operating points of three mixes generated from the true ratings
    pts = []
    for ratio in (2.0, 6.0, 20.0):
        out = 1 / (1 / true.output_tps + ratio / true.input_tps)
        pts.append((out, ratio * out))
    est = rp.rating_from_sweeps(pts)
    assert est.output_tps == pytest.approx(2_500, rel=1e-9)
    assert est.input_tps == pytest.approx(20_000, rel=1e-9)


def test_disaggregated_pools_sized_separately():
    r = rp.replicas_disaggregated(27_600, 6 * 27_600, 9_000, 60_000, 0.8)
    assert r == {"decode": math.ceil(27_600 / 9_000 / 0.8), "prefill": math.ceil(6 * 27_600 / 60_000 / 0.8),
                 "total": math.ceil(27_600 / 9_000 / 0.8) + math.ceil(6 * 27_600 / 60_000 / 0.8)}


@pytest.mark.parametrize("call, name", [
    (lambda: rp.ReplicaRating(0, 60_000), "output_tps"),
    (lambda: rp.ReplicaRating(9_000, float("nan")), "input_tps"),
    (lambda: rp.replicas_for_tokens(-1, 0, rp.ReplicaRating(1, 1)), "output_tps"),
    (lambda: rp.replicas_for_tokens(1, 1, rp.ReplicaRating(1, 1), headroom=1.2), "headroom"),
    (lambda: rp.replicas_for_tokens(1, 1, rp.ReplicaRating(1, 1), headroom=0), "headroom"),
    (lambda: rp.replicas_for_tokens(1, 1, (9000, 60000)), "rating"),
    (lambda: rp.rating_from_sweep(load_sample_sweep(), 1000), "slots"),
    (lambda: rp.rating_from_sweeps([(1.0, 2.0)]), "points"),
    (lambda: rp.rating_from_sweeps([(1.0, 2.0), (2.0, 4.0)]), "linear mix"),
    (lambda: rp.replicas_disaggregated(1, 1, 0, 1), "decode_rating_tps"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
