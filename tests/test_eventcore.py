"""Tests of the discrete-event core (capbook.sim.eventcore) that sim, fleetsim and autoscale run on.

The simulators' own tests check what they compute on it; these check the core's contract:
time order, the tie orders, versioned cancellation, the client's due time and control ticks.
"""
import math

import pytest

from capbook.sim.eventcore import EventCore


def _log_core(times, arrivals_first, on_due=None):
    log = []
    core = EventCore(times, lambda j, t: log.append(("arrive", j, t)),
                     (lambda a, b, t: log.append(("ev", a, t)),), arrivals_first=arrivals_first, on_due=on_due)
    return core, log


def test_events_and_arrivals_come_in_time_order_with_either_tie_order():
    for first in (True, False):
        core, log = _log_core([1.0, 2.0, 3.0], first)
        core.push(2.0, 0, "x")
        core.push(0.5, 0, "y")
        core.push(2.0, 0, "z")          # same time as x: after it (scheduled later)
        assert core.run() == 3
        arrival_2 = ("arrive", 1, 2.0)
        ties = [arrival_2, ("ev", "x", 2.0), ("ev", "z", 2.0)] if first else \
            [("ev", "x", 2.0), ("ev", "z", 2.0), arrival_2]
        assert log == [("ev", "y", 0.5), ("arrive", 0, 1.0)] + ties + [("arrive", 2, 3.0)]


def test_a_stale_version_is_how_a_client_cancels():
    ver = {"r": 0}
    fired = []

    def end(obj, v, t):
        if v == ver[obj]:
            fired.append(t)

    core = EventCore([], None, (end,))
    core.push(5.0, 0, "r", 0)
    ver["r"] += 1                       # rescheduled earlier: the event at 5 s is stale
    core.push(3.0, 0, "r", 1)
    core.run()
    assert fired == [3.0]


def test_the_due_time_comes_before_events_and_arrivals_of_its_time():
    seen = []

    def due(i, t):
        seen.append(("due", i, t))
        core.due_t = math.inf if t >= 2.0 else 2.0

    core, log = _log_core([2.0], False, on_due=due)
    core.due_t, core.due_id = 1.0, 7
    core.push(2.0, 0, "e")
    core.run()
    assert seen == [("due", 7, 1.0), ("due", 7, 2.0)]
    assert log == [("ev", "e", 2.0), ("arrive", 0, 2.0)]
    with pytest.raises(ValueError, match="arrivals_first=False"):
        EventCore([], None, on_due=due)


def test_ticks_run_until_the_tick_says_stop_and_see_arrivals_done():
    ticks = []
    core = EventCore([0.5, 2.0], lambda j, t: None)

    def tick(t):
        ticks.append((t, core.arrivals_done(t)))
        return t + 1.0 if t < 3.0 else None

    core.every(0.0, tick)
    core.run()
    assert ticks == [(0.0, False), (1.0, False), (2.0, True), (3.0, True)]
