"""Token forecasting (:mod:`.tokens`), scoring forecasts and backtests (:mod:`.scoring`) and demand shapes
(:mod:`.shapes`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'scoring': [
        'pinball_loss', 'coverage', 'attach_actuals', 'score_forecast', 'peak_hour_scores',
        'backtest', 'score_backtest', 'compare_forecasts',
    ],
    'shapes': [
        'DEMAND_SHAPE_FILE', 'DEMAND_SHAPE_SOURCE', 'demand_shape_path', 'load_demand_shape',
    ],
    'tokens': [
        'HOURS_PER_WEEK', 'MIN_TREND_WEEKS', 'TrendShapeFit', 'TokenForecast', 'hourly_series',
        'validate_hourly', 'fit_trend_shape', 'forecast_tokens', 'rolling_log_errors',
        'peak_to_mean', 'idle_share', 'weekly_profile', 'synthetic_token_series', 'event_calendar',
        'describe_events', 'overlay_factors', 'apply_overlays', 'remove_overlays',
        'sample_token_path', 'load_sample_series', 'trim_to_whole_weeks', 'read_servegen_hourly',
        'quantile_name', 'HOURLY_COLUMNS', 'MAX_REQUESTS_PER_HOUR', 'MAX_TOKENS_PER_REQUEST',
        'read_token_csv',
    ],
})
