"""Request logs: reading them (:mod:`.requestlog`), the SQL that sums them (:mod:`.sql`), where it runs
(:mod:`.engines`: DuckDB here, Spark next to the data) and their statistics (:mod:`.stats`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'aggregates': [
        'LogAggregates',
    ],
    'engines': [
        'ENGINES', 'spark_session', 'spark_unavailable',
    ],
    'hourly': [
        'HOURLY_COLUMNS', 'MAX_REQUESTS_PER_HOUR', 'MAX_TOKENS_PER_REQUEST', 'read_token_csv',
        'read_history',
    ],
    'requestlog': [
        'CANONICAL_COLUMNS', 'LOG_FORMATS', 'MAX_TOKENS', 'STATUSES', 'Mapping', 'RequestLog',
        'ReplayArrays', 'detect_log_format', 'load_sample_requests', 'read_requests',
        'SAMPLE_REQUESTS',
    ],
    'scope': [
        'select_scope', 'ALL_TIERS',
    ],
    'sql': [
        'DUCKDB', 'SPARK', 'Dialect', 'gap_moments_sql', 'busy_hours_sql', 'busy_rows_sql',
        'group_counts_sql', 'hourly_sql', 'minute_counts_sql', 'traffic_where',
        'measured_service_sql', 'resolution_sql', 'service_moments_sql', 'status_counts_sql',
        'token_stats_sql', 'window_counts_sql',
    ],
    'stats': [
        'LogStats', 'busiest_window', 'format_duration',
    ],
})
