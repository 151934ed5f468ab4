"""The application: the ``capbook`` command (:mod:`.cli`), the book's data (:mod:`.datasets`), the
book re-run on a reader's data (:mod:`.bookbuild`) and the book's editorial checks
(:mod:`.bookcheck`).

Each name is loaded on first use (:func:`capbook._lazy.attach`, itself imported on the first
name asked for: ``capbook --help`` runs through this package and loads nothing it does not need)."""

_TABLE = {
    'bookbuild': [
        'ROOT', 'chapter_files', 'data_note', 'check_out', 'build_book',
    ],
    'bookcheck': [
        'ChapterLength', 'prose_words', 'chapter_length', 'typed_numbers', 'number_value',
        'computed_numbers', 'code_literals',
    ],
    'cli': [
        'COMMANDS', 'build_parser', 'main', 'plain_text',
    ],
    'datasets': [
        'data_dir', 'SAMPLE_SWEEP_FOR_MODEL', 'GATEWAY_LOG', 'GATEWAY_HISTORY', 'load_gateway',
        'history_path', 'prices_path', 'load_prices', 'PlanInputs', 'plan_log', 'plan_inputs',
        'using_sample_data', 'slo', 'slo_given', 'data_source', 'requests_path', 'sweep_path',
        'load_requests', 'load_sweep', 'load_token_series', 'load_kubecon_sweeps', 'KUBECON_FILE',
        'FIDELITY_FILE', 'load_fidelity_sweeps', 'MOONCAKE_FILE', 'load_mooncake_conversation',
    ],
    'messages': [
        'cli_message',
    ],
}
__all__ = sorted(name for names in _TABLE.values() for name in names)


def __getattr__(name: str):
    from capbook._lazy import attach

    return attach(__name__, _TABLE)[0](name)
