"""The routing vocabulary shared by fleet sizing, the simulator, the CLI and the book.

A routing policy name stands for two things: the *queue model* that the closed-form sizing
(:mod:`capbook.plan.fleet`) uses for it, and the *dispatch* the simulator (:mod:`capbook.sim.slotsim`) runs.

=======================  ===============  ======================  =========================================
name                     queue model      simulated as            what the router does
=======================  ===============  ======================  =========================================
``pooled``               pooled           one shared queue        a free slot anywhere takes the next request
``load-aware``           pooled           one shared queue        same as ``pooled`` (the book's word)
``jsq``                  pooled           join shortest queue     send to the replica with the fewest in flight
``least-outstanding``    pooled           join shortest queue     same as ``jsq`` (the load balancers' word)
``p2c``                  (none)           power of two choices    the less loaded of two random replicas
``random``               per-replica      random split            a uniformly random replica
``per-replica``          per-replica      random split            same as ``random``
``round-robin``          per-replica      (none)                  cycling, from many dispatchers
``strict-round-robin``   cyclic           one cycling dispatcher  exactly every n-th request to each replica
``cyclic``               cyclic           one cycling dispatcher  same as ``strict-round-robin``
=======================  ===============  ======================  =========================================

``round-robin`` is sized as a random split, the conservative side: real ingresses run several
balancers, each cycling on its own. The simulator asks which one you mean (``random`` or
``strict-round-robin``). ``jsq`` is sized as one shared queue, a slight flattery (a request
committed to a replica cannot move); ``p2c`` has no closed form here: simulate it.

Examples
--------
>>> resolve("round-robin").queue_model
'per-replica'
>>> resolve("jsq").dispatch
'jsq'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Routing", "ROUTINGS", "QUEUE_MODELS", "DISPATCHES", "resolve", "queue_model", "dispatch"]

#: Queue models of the closed-form sizing.
QUEUE_MODELS = ("pooled", "per-replica", "cyclic")
#: Dispatch rules the simulator implements.
DISPATCHES = ("pooled", "jsq", "p2c", "random", "strict-round-robin")


@dataclass(frozen=True)
class Routing:
    """One routing policy name and what it stands for.

    Attributes
    ----------
    name : str
        The name as accepted (lower case, words joined by hyphens).
    queue_model : str or None
        ``"pooled"`` (one M/M/c of all slots), ``"per-replica"`` (one M/M/c per replica fed
        a random share) or ``"cyclic"`` (one E_n/M/c per replica); None where no closed form
        applies.
    dispatch : str or None
        The simulator's dispatch rule (one of :data:`DISPATCHES`), None where the name is
        ambiguous for a simulation.
    label : str
        A short description for tables and charts.
    """

    name: str
    queue_model: str | None
    dispatch: str | None
    label: str


ROUTINGS: dict[str, Routing] = {r.name: r for r in (
    Routing("pooled", "pooled", "pooled", "load-aware (one shared queue)"),
    Routing("load-aware", "pooled", "pooled", "load-aware (one shared queue)"),
    Routing("jsq", "pooled", "jsq", "join the shortest queue"),
    Routing("least-outstanding", "pooled", "jsq", "least outstanding requests"),
    Routing("p2c", None, "p2c", "power of two choices"),
    Routing("random", "per-replica", "random", "random split (a queue per replica)"),
    Routing("per-replica", "per-replica", "random", "random split (a queue per replica)"),
    Routing("round-robin", "per-replica", None, "random / round-robin (a queue per replica)"),
    Routing("strict-round-robin", "cyclic", "strict-round-robin",
            "strict round-robin from one dispatcher (a queue per replica)"),
    Routing("cyclic", "cyclic", "strict-round-robin",
            "strict round-robin from one dispatcher (a queue per replica)"),
)}

#: Names used before the vocabulary was unified, and what to write instead.
_RENAMED = {"shared": "pooled", "round_robin": "strict-round-robin",
            "strict_round_robin": "strict-round-robin", "least_outstanding": "least-outstanding",
            "load_aware": "load-aware", "per_replica": "per-replica"}


def resolve(routing, name: str = "routing") -> Routing:
    """The :class:`Routing` for a policy name (case and surrounding spaces ignored).

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones) or a name from before the
        vocabulary was unified (the message gives the new one).
    """
    key = routing.strip().lower() if isinstance(routing, str) else None
    if key in ROUTINGS:
        return ROUTINGS[key]
    if key in _RENAMED:
        raise ValueError(f"{name}={routing!r} is now spelled {_RENAMED[key]!r}")
    raise ValueError(f"unknown {name} {routing!r}; choose one of {', '.join(ROUTINGS)}")


def queue_model(routing, name: str = "routing") -> str:
    """The closed-form queue model of a policy; a clear error where there is none."""
    r = resolve(routing, name)
    if r.queue_model is None:
        raise ValueError(
            f"{name}={routing!r} has no closed-form queue model; size it with 'pooled' as the "
            "optimistic bound and check it with the simulator (capbook.sim.slotsim)")
    return r.queue_model


def dispatch(routing, name: str = "routing") -> str:
    """The simulator's dispatch rule for a policy; a clear error where the name is ambiguous."""
    r = resolve(routing, name)
    if r.dispatch is None:
        raise ValueError(
            f"{name}={routing!r} is ambiguous for a simulation: pass 'random' (many balancers, "
            "what the sizing assumes) or 'strict-round-robin' (one dispatcher cycling)")
    return r.dispatch
