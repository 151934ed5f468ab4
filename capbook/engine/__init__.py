"""One serving replica: the step model fitted to a sweep (:mod:`.stepmodel`), hardware and model facts
(:mod:`.hardware`), the physical model behind the sample sweeps (:mod:`.servingmodel`), the
load-dependent queue (:mod:`.loadqueue`), predictions at an arrival rate (:mod:`.predict`) and how
well they match measurements (:mod:`.fidelity`).

Each name is loaded on first use (:func:`capbook._lazy.attach`)."""
from capbook._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    'fidelity': [
        'stable_stages', 'all_stages', 'fidelity_summary', 'TARGETS', 'TTFT_P99_TARGET_S',
        'WORST_SATURATION_TARGET', 'shortfall_share', 'sweep_loop', 'sweep_levels', 'score_sweep',
        'fidelity_datasets', 'dataset_table', 'datasets_summary', 'shared_datasets',
        'shared_fidelity', 'biggest_misses', 'kubecon_variants',
    ],
    'hardware': [
        'GPU', 'ModelArch', 'Hardware', 'GPUS', 'ARCHITECTURES', 'find_gpu', 'find_model',
        'hardware_for', 'name_dtype', 'dtype_bytes', 'gpu_count', 'close_matches',
        'engine_defaults', 'read_server_facts', 'parse_server_log', 'ACTIVATION_RESERVE',
    ],
    'loadqueue': [
        'LoadDependentQueue', 'QueueSolution', 'from_sweep', 'max_rate', 'replicas_needed',
        'kv_bytes_per_token', 'kv_slots', 'slots_binding', 'SlotsBinding',
    ],
    'predict': [
        'ModelPrediction', 'Prediction', 'MODELS', 'PRIMARY_MODEL',
    ],
    'servingmodel': [
        'Model', 'Deployment', 'Workload', 'MixedWorkload', 'LLMS', 'WORKLOADS', 'simulate_level',
        'generate_sweep', 'stalled_tpot', 'SweepSpec', 'SAMPLE_SPECS', 'LEVELS', 'calibrate',
        'build_sample_sweep', 'sample_sweep_csv', 'sample_scales', 'blend_sweep',
        'default_requests', 'ILLUSTRATIVE_TARGETS',
    ],
    'stepmodel': [
        'ExtrapolationError', 'StepCost', 'EngineLimits', 'EngineModel', 'EngineRun', 'fit_engine',
        'fitted_engine', 'fit_step_cost', 'engine_limits', 'kv_cache_tokens', 'model_config',
        'gpu_memory_gb',
    ],
})
