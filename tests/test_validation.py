"""The one validation module, the routing vocabulary and the data-path lookup."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from capbook import paths, routing, validation as v


@pytest.mark.parametrize("bad", ["3", b"3", True, False, np.bool_(True), None, [1.0], {"x": 1}])
@pytest.mark.parametrize("check", [v.number, v.positive, v.nonnegative, v.probability, v.integer])
def test_scalar_checks_refuse_text_bool_and_containers_the_same_way(check, bad):
    with pytest.raises(ValueError, match=r"^rate_rps must be (a number|an integer), got .*\(") as e:
        check(bad, "rate_rps")
    assert type(bad).__name__ in str(e.value)


@pytest.mark.parametrize("good, want", [(3, 3.0), (2.5, 2.5), (np.int32(4), 4.0), (np.float64(0.5), 0.5),
                                        (np.array(7.0), 7.0)])
def test_number_accepts_python_and_numpy_numbers(good, want):
    out = v.number(good, "x")
    assert out == want and type(out) is float


def test_number_bounds_and_nan_inf_messages():
    with pytest.raises(ValueError, match="x must not be NaN"):
        v.number(float("nan"), "x")
    with pytest.raises(ValueError, match="x must be finite"):
        v.positive(math.inf, "x")
    assert v.positive(math.inf, "x", allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="x must be positive, got 0"):
        v.positive(0, "x")
    with pytest.raises(ValueError, match="x must be non-negative, got -1"):
        v.nonnegative(-1, "x")
    assert v.nonnegative(0, "x") == 0.0
    with pytest.raises(ValueError, match=r"x must lie in \(0, 2\], got 3"):
        v.number(3, "x", lo=0, lo_open=True, hi=2)
    with pytest.raises(ValueError, match="x must be >= 1, got 0.5"):
        v.number(0.5, "x", lo=1)


def test_probability_ends():
    for p in (0, 1):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            v.probability(p, "target")
        assert v.probability(p, "target", closed=True) == p
    assert v.probability(1, "share", hi_open=False) == 1.0
    with pytest.raises(ValueError, match=r"share must lie in \(0, 1\]"):
        v.probability(0, "share", hi_open=False)


def test_integer():
    assert v.integer(3.0, "n") == 3 and type(v.integer(np.int64(3), "n")) is int
    assert v.integer(10**20, "n") == 10**20          # big ints stay exact
    with pytest.raises(ValueError, match="n must be an integer, got 3.5"):
        v.integer(3.5, "n")
    with pytest.raises(ValueError, match="n must be an integer, got inf"):
        v.integer(math.inf, "n")
    with pytest.raises(ValueError, match="n must be at least 1, got 0"):
        v.integer(0, "n", minimum=1)
    with pytest.raises(ValueError, match="n must be at most 4, got 5"):
        v.integer(5, "n", maximum=4)


def test_array():
    out = v.array(pd.Series([1, 2, 3]), "xs", lo=0, lo_open=True)
    assert out.dtype == float and out.tolist() == [1.0, 2.0, 3.0]
    assert v.array(2, "xs").shape == ()
    with pytest.raises(ValueError, match="xs must be positive, got -1.0"):
        v.array([1, -1, -2], "xs", lo=0, lo_open=True)
    with pytest.raises(ValueError, match="xs must be numbers, got booleans"):
        v.array([True, False], "xs")
    with pytest.raises(ValueError, match=r"xs must be numbers, got True \(bool\)"):
        v.array((1, True), "xs")
    with pytest.raises(ValueError, match=r"xs must be numbers, got '3' \(str\)"):
        v.array(np.array([1, "3"], dtype=object), "xs")
    with pytest.raises(ValueError, match="xs must be numbers, got an array of <U"):
        v.array(["1", "2"], "xs")
    with pytest.raises(ValueError, match="xs must be a number or an array of numbers"):
        v.array("1 2", "xs")
    with pytest.raises(ValueError, match="xs is empty"):
        v.array([], "xs", nonempty=True)
    with pytest.raises(ValueError, match="xs must not be NaN"):
        v.array([1, np.nan], "xs")
    with pytest.raises(ValueError, match="xs must be whole numbers, got 1.5"):
        v.array([1, 1.5], "xs", integer=True)
    with pytest.raises(ValueError, match="xs must be 1-dimensional"):
        v.array([[1, 2]], "xs", ndim=1)


def test_choice():
    assert v.choice("a", "mode", ("a", "b")) == "a"
    with pytest.raises(ValueError, match="mode must be one of 'a', 'b'; got 'c'"):
        v.choice("c", "mode", ("a", "b"))


@given(st.integers(0, 10**6), st.integers(0, 50))
def test_fewest_finds_the_threshold_of_a_monotone_predicate(threshold, start):
    calls = []

    def ok(n):
        calls.append(n)
        return n >= threshold

    assert v.fewest(ok, start) == max(threshold, start)
    assert len(calls) <= 2 * max(1, threshold - start).bit_length() + 2     # logarithmic, not linear


def test_fewest_gives_up_with_a_message():
    with pytest.raises(ValueError, match="no finite number of servers meets"):
        v.fewest(lambda n: False, 1, what="servers", limit=1 << 10)


def test_routing_vocabulary():
    assert routing.queue_model("Round-Robin ") == "per-replica"
    assert routing.queue_model("strict-round-robin") == "cyclic"
    assert routing.dispatch("least-outstanding") == "jsq"
    assert set(routing.DISPATCHES) == {r.dispatch for r in routing.ROUTINGS.values()} - {None}
    assert set(routing.QUEUE_MODELS) == {r.queue_model for r in routing.ROUTINGS.values()} - {None}
    with pytest.raises(ValueError, match="routing='shared' is now spelled 'pooled'"):
        routing.resolve("shared")
    with pytest.raises(ValueError, match="unknown routing 'fastest'"):
        routing.resolve("fastest")
    with pytest.raises(ValueError, match="ambiguous for a simulation"):
        routing.dispatch("round-robin")
    with pytest.raises(ValueError, match="no closed-form queue model"):
        routing.queue_model("p2c")


def test_data_dir_honours_capbook_data(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ENV_DATA, raising=False)
    assert (paths.data_dir() / "README.md").is_file()
    assert paths.data_path("sweeps").is_dir()
    monkeypatch.setenv(paths.ENV_DATA, str(tmp_path))
    assert paths.data_path("x", "y.csv") == tmp_path / "x" / "y.csv"
    monkeypatch.setenv(paths.ENV_DATA, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="CAPBOOK_DATA=.*no such folder"):
        paths.data_dir()


def test_table_names_the_argument_and_the_missing_columns():
    import pandas as pd

    from capbook.validation import table

    df = pd.DataFrame({"a": [1], "b": [2]})
    assert table(df, "df", ["a"]) is df and table(df, "df") is df
    with pytest.raises(ValueError, match=r"^df must be a pandas DataFrame, got dict"):
        table({"a": [1]}, "df", ["a"])
    with pytest.raises(ValueError, match=r"^df lacks column\(s\) \['c'\]; needs \['a', 'c'\]"):
        table(df, "df", ["a", "c"])
