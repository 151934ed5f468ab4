"""Load-generator results: the sweep table (:mod:`.sweep`), importers of each tool's output
(:mod:`.importers`), per-request results (:mod:`.perrequest`), configuration identity
(:mod:`.configurations`) and a replica's rating (:mod:`.replicas`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'configurations': [
        'KEY_ORDER', 'canonical_key', 'parse_gpu', 'vllm_recorded', 'sglang_recorded',
        'path_recorded', 'divide_fleet', 'fleet_notes', 'fleet_kind', 'derive_lengths',
    ],
    'importers': [
        'read_sweep', 'read_points', 'detect_sweep_format', 'SWEEP_FORMATS', 'LIMIT_COLUMNS',
        'TOKEN_COLUMNS',
    ],
    'perrequest': [
        'COLUMN_SYNONYMS', 'Requests', 'match_columns', 'missing_columns_message',
        'rate_from_name', 'series_from_name', 'requests_from_frame', 'summarise', 'BACKLOG_RATIO',
        'BACKLOG_MIN_S', 'LAUNCH_SHARE',
    ],
    'replicas': [
        'ReplicaRating', 'rating_from_sweep', 'rating_from_sweeps', 'ReplicaNeed',
        'replicas_for_tokens', 'replicas_disaggregated',
    ],
    'sweep': [
        'METRIC_COLUMNS', 'CONFIG_COLUMNS', 'QUANTILES', 'Sweep', 'SlotChoice', 'choose_slots',
        'token_rates_at_capacity', 'blended_service_time', 'blended_capacity',
        'capacity_vs_long_share', 'load_sample_sweep', 'list_sample_sweeps',
    ],
})
