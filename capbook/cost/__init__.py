"""What capacity costs: GPU prices (:mod:`.prices`), the price of a plan (:mod:`.pricing`) and what-ifs
that plan again (:mod:`.whatif`); :mod:`.costs` holds all their names in one namespace.

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'prices': [
        'PRICE_COLUMNS', 'HOURS_PER_YEAR', 'SAMPLE_PRICES', 'GpuPrice', 'PriceTable',
        'read_prices', 'load_sample_prices', 'as_prices', 'ReplicaPrice', 'replica_price',
    ],
    'pricing': [
        'PlanCost', 'plan_cost', 'FleetCurve', 'WeekDemand', 'week_demand', 'price_of_quantiles',
        'OptimalQuantile', 'optimal_quantile', 'ReserveSplit', 'reserve_split', 'PlanPricing',
        'price_plan', 'priced',
    ],
    'whatif': [
        'Comparison', 'compare_configurations', 'price_of_objectives', 'price_of_pools',
        'time_zone_regions', 'price_of_regions',
    ],
})
