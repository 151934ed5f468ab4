"""What capacity costs: GPU prices, the cost of a plan, the cheapest configuration, what-ifs
(:mod:`.costs`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'costs': [
        'priced', 'PRICE_COLUMNS', 'HOURS_PER_YEAR', 'SAMPLE_PRICES', 'GpuPrice', 'PriceTable',
        'read_prices', 'load_sample_prices', 'as_prices', 'ReplicaPrice', 'replica_price',
        'PlanCost', 'plan_cost', 'PlanPricing', 'price_plan', 'FleetCurve', 'WeekDemand',
        'week_demand', 'price_of_quantiles', 'OptimalQuantile', 'optimal_quantile', 'ReserveSplit',
        'reserve_split', 'Comparison', 'compare_configurations', 'price_of_objectives',
        'price_of_pools', 'time_zone_regions', 'price_of_regions',
    ],
})
