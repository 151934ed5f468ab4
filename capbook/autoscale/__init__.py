"""Autoscaling: the policies and their simulator (:mod:`.policies`) and the plan's week, its schedule
and the policies raced (:mod:`.schedule`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'policies': [
        'ReplicaModel', 'Scaling', 'ProvisioningLag', 'Observation', 'Policy', 'Static',
        'Schedule', 'ReactiveUtilisation', 'ReactiveWaiting', 'ReactiveLatency',
        'ScheduleReactive', 'AutoscaleResult', 'simulate_autoscaling', 'required_replicas',
    ],
    'schedule': [
        'autoscaled', 'design_week', 'week_arrivals', 'forecast_schedule', 'standard_policies',
        'race_policies', 'PolicyRace', 'headroom_check', 'hour_of_week', 'PlanAutoscaling',
        'plan_autoscaling', 'PLAN_CANDIDATES', 'AUTOSCALE_MAX_REQUESTS', 'AUTOSCALE_MAX_REPLICAS',
        'WeekTooLarge', 'log_rate_cv',
    ],
})
