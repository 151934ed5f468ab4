r"""The discrete-event core that every simulator of capbook runs on.

One loop, three sources of events, taken in time order:

* **arrivals**: a sorted list of arrival times, read in order (no heap entry per request);
* **timed events**: a binary heap of ``(time_s, seq, kind, a, b)``; ``seq`` breaks ties in the
  order the events were scheduled, ``kind`` indexes the client's table of handlers, each called
  as ``handler(a, b, time_s)``. A client cancels an event it scheduled by versioning: it keeps a
  counter per object, puts it in ``b`` and ignores an event whose version is stale;
* **one due time** kept by the client itself (optional): the earliest of many per-object clocks
  that change too often to go through the heap (the continuous-batching replicas of
  :mod:`capbook.sim.slotsim` keep their next decode completion there, in :attr:`EventCore.due_t`).

Control ticks (:meth:`EventCore.every`) are timed events whose handler says when the next one is:
the fleet simulator adds and drains replicas at them (:mod:`capbook.sim.fleetsim`), the autoscaling
simulator runs its whole control loop on them (:mod:`capbook.autoscale.policies`).

The clients: :class:`capbook.sim.fleetsim._Fleet` (engine replicas, step by step),
:class:`capbook.sim.slotsim._SlotFleet` (the slot model, M/G/c, and the continuous-batching fluid
model, with admission, retries, timeouts and priorities) and :class:`capbook.autoscale.policies._Run`
(replicas that come and go under a scaling policy).

**Ties.** Each client keeps the order it was validated with: ``arrivals_first=True`` (the fleet
simulator) takes an arrival before a timed event of the same time; ``False`` (the slot model)
takes the due time first, then timed events, then arrivals.
"""
from __future__ import annotations

import itertools
import math
from heapq import heappop, heappush

__all__ = ["EventCore"]

_INF = math.inf


class EventCore:
    """A run's event queue and its loop.

    Parameters
    ----------
    times : list of float
        Arrival times, non-decreasing; the first ``n`` are the arrivals (a client may append
        more entries of its own after them).
    arrive : callable
        ``arrive(j, time_s)`` for arrival ``j``.
    handlers : sequence of callable
        ``handlers[kind](a, b, time_s)`` for a timed event of that kind.
    n : int, optional
        Number of arrivals (default ``len(times)``).
    arrivals_first : bool
        At equal times, an arrival comes before a timed event (else after).
    on_due : callable, optional
        ``on_due(due_id, due_t)`` when the client's own due time :attr:`due_t` is the earliest
        (before timed events and arrivals of the same time); the client keeps :attr:`due_t` and
        :attr:`due_id` up to date. Only with ``arrivals_first=False``.
    """

    __slots__ = ("heap", "seq", "times", "n", "arrive", "handlers", "arrivals_first", "on_due",
                 "due_t", "due_id")

    def __init__(self, times, arrive, handlers=(), *, n: int | None = None, arrivals_first: bool = True,
                 on_due=None):
        if on_due is not None and arrivals_first:
            raise ValueError("a due time goes with arrivals_first=False")
        self.heap = []
        self.seq = itertools.count(1)     # clients on the hot path push (t, next(seq), kind, a, b) themselves
        self.times = times
        self.n = len(times) if n is None else int(n)
        self.arrive = arrive
        self.handlers = list(handlers)
        self.arrivals_first = arrivals_first
        self.on_due = on_due
        self.due_t = _INF
        self.due_id = 0

    def push(self, t: float, kind: int, a=0, b=0) -> None:
        """Schedule a timed event of ``kind`` at ``t``."""
        heappush(self.heap, (t, next(self.seq), kind, a, b))

    def every(self, t: float, tick) -> int:
        """Call ``tick(time_s)`` at ``t``, and again at each time it returns, until it returns None.

        Returns the kind of the tick events.
        """
        kind = len(self.handlers)
        push = self.push

        def handler(a, b, now):
            nxt = tick(now)
            if nxt is not None:
                push(nxt, kind)

        self.handlers.append(handler)
        push(t, kind)
        return kind

    def arrivals_done(self, t: float) -> bool:
        """At an event of time ``t``: every arrival has been handled."""
        n = self.n
        if not n:
            return True
        last = self.times[n - 1]
        return last <= t if self.arrivals_first else last < t

    def run(self) -> int:
        """Process every event in time order; returns the arrivals handled."""
        heap, times, n = self.heap, self.times, self.n
        handlers, arrive = self.handlers, self.arrive
        j = 0
        ta = times[0] if n else _INF
        if self.on_due is not None:
            due = self.on_due
            while True:
                th = heap[0][0] if heap else _INF
                tn = self.due_t
                if tn <= th and tn <= ta and tn < _INF:
                    due(self.due_id, tn)
                    continue
                if th <= ta and th < _INF:
                    t, _, kind, x, y = heappop(heap)
                    handlers[kind](x, y, t)
                elif j < n:
                    arrive(j, ta)
                    j += 1
                    ta = times[j] if j < n else _INF
                else:
                    break
        elif self.arrivals_first:
            while True:
                th = heap[0][0] if heap else _INF
                if ta <= th:
                    if j >= n:
                        break
                    arrive(j, ta)
                    j += 1
                    ta = times[j] if j < n else _INF
                    continue
                t, _, kind, x, y = heappop(heap)
                handlers[kind](x, y, t)
        else:
            while True:
                th = heap[0][0] if heap else _INF
                if th <= ta and th < _INF:
                    t, _, kind, x, y = heappop(heap)
                    handlers[kind](x, y, t)
                elif j < n:
                    arrive(j, ta)
                    j += 1
                    ta = times[j] if j < n else _INF
                else:
                    break
        return j
