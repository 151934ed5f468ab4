"""The capacity plan: its steps and :class:`~capbook.plan.steps.CapacityPlan` (:mod:`.steps`), fleet
sizing and routing (:mod:`.fleet`) and the fleet simulation that verifies it (:mod:`.replay`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'fleet': [
        'late_share', 'replicas_for_routing', 'replicas_partitioned', 'late_share_round_robin',
        'replicas_round_robin', 'RoutingComparison', 'compare_routing', 'ScaleUpLag',
        'BurstHeadroom', 'burst_headroom', 'replicas_surviving_zone_loss', 'failure_spares',
        'FleetPlan', 'plan_fleet', 'UtilisationPlan', 'plan_by_utilisation', 'TokenRates',
        'token_rates', 'allocate_tpm', 'check_tpm_limits', 'AlertLevels', 'alert_levels',
        'waterfall_chart',
    ],
    'replay': [
        'Verification', 'verify_plan', 'replay_plan', 'simulate_serving', 'replay_requests',
        'busy_hours', 'explain_checks', 'judge_fleet', 'check_fleet', 'SIM_CAP_MAX',
        'SIM_BUDGET_S', 'MAX_SEEDS',
    ],
    'steps': [
        'HORIZONS', 'InfeasibleObjective', 'CapacityPlan', 'capacity_plan',
        'horizon_for_lead_time', 'horizon_limit_weeks', 'HORIZON_HISTORY_FACTOR',
        'GROWTH_PER_WEEK_RANGE', 'MAX_DEMAND_SCALE', 'peak_forecast', 'PeakForecast', 'Traffic',
        'select_traffic', 'Demand', 'forecast_demand', 'Replica', 'rate_replica', 'QueueingCheck',
        'check_queueing', 'EngineCheck', 'check_engine', 'stack_fleet', 'ServingCheck',
        'check_serving', 'TenantLimits', 'tenant_limits', 'SLO', 'LogAggregates',
    ],
})
