"""Simulation: the discrete-event core (:mod:`.eventcore`), arrivals (:mod:`.arrivals`),
distributions (:mod:`.distributions`), the slot simulator (:mod:`.slotsim`), the step-level fleet
simulator (:mod:`.fleetsim`) and closed-loop load (:mod:`.closedloop`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'arrivals': [
        'ArrivalStream', 'PoissonArrivals', 'RenewalArrivals', 'TraceArrivals',
        'stack_busy_periods', 'RateArrivals', 'TokenLengths', 'rate_cv_from_log',
    ],
    'closedloop': [
        'ClosedLoopRun', 'simulate_closed',
    ],
    'distributions': [
        'Distribution', 'Exponential', 'Deterministic', 'Lognormal', 'Gamma', 'Empirical',
        'as_distribution',
    ],
    'eventcore': [
        'EventCore',
    ],
    'fleetsim': [
        'ROUTERS', 'FleetRun', 'simulate_fleet', 'run_fleet',
    ],
    'slotsim': [
        'FixedService', 'ContinuousBatching', 'Admission', 'RetryPolicy', 'FleetSpec',
        'Simulation', 'SimResult', 'simulate',
    ],
})
