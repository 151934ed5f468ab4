"""Package messages in command-line spelling: keyword hints become flags (:func:`cli_message`)."""
from __future__ import annotations

import re
import shlex

__all__ = ["cli_message"]

# Python keyword spellings in the package's messages -> the flags that do the same thing.
_Q = r"""['"]?"""
_FLAG_HINTS = [
    (r"\(simulate\s*=\s*False\)", "(--no-sim)"),
    (r"\bsimulate\s*=\s*False\b", "--no-sim"),
    (r"\bsweep\s*=\s*\(a capbook\.sweeps\.sweep\.Sweep\)", "--sweep PATH with --slots S"),
    (r"a sweep \(with concurrency=\)", "--sweep PATH with --slots S"),
    (r"\btpot_s\s*=", "--tpot SECONDS"),
    (r"\bprefill_rate_tps is taken from", "the prefill rate is taken from"),
    (r"\bsweep\s*=(?!\S)", "--sweep PATH"),
    (r"\bload\s*=(?!\S)", "--load"),
    (r"\bengine\s*=(?!\S)", "--engine"),
    (r"\bpass format=\s*(?=one of)", "pass --format "),
    (r"\bpass format=(?= or a capbook\.logs\.requestlog\.Mapping)", "pass --format FORMAT"),
    (r", or set Mapping\.time_unit", ""),
    (r"\bpass q\s*=\s*50 for the median instead", "give the TPOT objective at a percentile the sweep reports "
     "(--slo 'tpot=50ms,tpot_p=50' for the median)"),
    (r"drop_invalid\s*=\s*True", "--drop-invalid"),
    (r"sort\s*=\s*True", "--sort"),
    (r"check_units\s*=\s*False", "--no-unit-check"),
    (rf"time_unit\s*=\s*{_Q}(s|ms|us|ns){_Q}", r"--time-unit \1"),
    (r"time_unit\s*=", "--time-unit"),
    (rf"load\s*=\s*{_Q}(concurrency|rate|all|auto){_Q}", r"--load \1"),
    (rf"repeats\s*=\s*{_Q}(mean|error){_Q}", r"--repeats \1"),
    (rf"where\s*=\s*\{{\s*{_Q}([\w.-]+){_Q}\s*:\s*{_Q}([^'\"{{}},]+?){_Q}\s*\}}",
     lambda m: "--where " + shlex.quote(f"{m.group(1)}={m.group(2)}")),   # quoted when it holds a space
    (r"where\s*=\s*(\{[^}]*\}|\.\.\.)?", "--where KEY=VALUE"),
    (r"max_num_seqs\s*=\s*(\d+)", r"--max-num-seqs \1"),
    (r"max_num_seqs\s*=", "--max-num-seqs N"),
    (r"\bconcurrency\s*=(?!\s*\d)", "--sweep-concurrency N"),
    (rf"\bformat\s*=\s*{_Q}([\w-]+){_Q}", r"--format \1"),
    (r"\bformat\s*=", "--format"),
    (r"\bmodel\s*=(?!\S)", "--model"),
    (r"\btier\s*=(?!\S)", "--tier"),
    (r"\binput_tps\s*=?(?!\w)", "--prefill-rate TPS"),
    (r"\bprefill_rate_tps\s*=", "--prefill-rate TPS"),
    (r"\bmapping\s*=", "--format"),
    (r"a capbook\.logs\.requestlog\.Mapping naming (?:your|the) columns",
     "--columns arrival_time=COLUMN,input_tokens=COLUMN,output_tokens=COLUMN naming your columns"),
    (r"a capbook\.logs\.requestlog\.Mapping with (?:another|an) epoch", "--columns ...,epoch=DATE"),
    (r"\bor a capbook\.logs\.requestlog\.Mapping\b", "or --columns FIELD=COLUMN,..."),
    (r"set Mapping\.time_unit", "pass --time-unit"),
    (rf"engine\s*=\s*{_Q}(duckdb|spark){_Q}", r"--engine \1"),
    (r"\bspark_master\s*=", "--spark-master"),
    (rf"\brouter\s*=\s*{_Q}([\w-]+){_Q}", r"--router \1"),
    (r"\bslo\s*=\s*'([^']*)'", r"--slo '\1'"),
    (r"\bslo\s*=(?!\S)", "--slo"),
    (r"^slo value for\b", "--slo: the value for"),
    (r"\bkv_cache_tokens\s*=", "--kv-cache-tokens N"),
    (r"\bkv_cache_tokens(?=\s+\d)", "--kv-cache-tokens"),
    (r"\bttft_p99_target_s\b", "--ttft-p99-target"),
    (r"\bgpu\s*=\s*'NAME'", "--gpu NAME"),
    (r"\bgpu\s*=(?!\S)", "--gpu NAME"),
    (r"\btensor_parallel\s*=\s*N\b", "--tensor-parallel N"),
    (r"\btensor_parallel\s*=(?!\S)", "--tensor-parallel N"),
    (r"pass extrapolate\s*=\s*True to extend the end segments linearly",
     "choose a value within the measured range (the command line reads a sweep where it was "
     "measured and does not extend it)"),
    (r"\blead_time_weeks\s*=\s*(?=[\d.])", "--horizon "),
    (r"\blead_time_weeks\b", "--horizon"),
    (r"\bdemand_scale\b", "--scale"),
    (r"\bgrowth_per_week\b", "--growth"),
    (r"\bhistory\s*=(?!\S)", "--history"),
    (r"\bzones\s*=\s*(\d+)", r"--zones \1"),
    (r"\bhorizon_weeks\s*=\s*(?=\d)", "--horizon "),
    (r"more than max_rows=([\d,]+);", r"more than the \1 rows capbook reads into memory for this step;"),
    (r"aggregate with hourly\(\) or pass max_rows\s*=\s*None",
     "give the busiest hours as --requests and the whole log's hourly sums as --history "
     "(capbook trace LOG --hourly h.csv writes them)"),
]


def cli_message(message: str) -> str:
    """Rewrite a package error message for the command line: keyword hints become flags.

    The Python API names its keyword arguments (``pass drop_invalid=True``); under ``capbook``
    the same advice names the flag (``pass --drop-invalid``).

    Examples
    --------
    >>> cli_message("3 rows have a negative token count; pass drop_invalid=True to drop them")
    '3 rows have a negative token count; pass --drop-invalid to drop them'
    >>> cli_message("holds 2 configurations; pass where={'config': 'vllm'} to read one")
    'holds 2 configurations; pass --where config=vllm to read one'
    """
    text = str(message)
    # the Python objects' attributes a note points to ("(sweep.saturated)"): the note says it all
    text = re.sub(r" \((?:each with its reason in )?sweep\.[a-z_]+\)", "", text)
    for pattern, repl in _FLAG_HINTS:
        # a keyword stands on its own: not inside a path or a name (".../SERVE--max_num_seqs=4/")
        guard = r"(?<![\w/.=:-])"
        if not pattern.startswith("where"):  # nor is it the KEY of a translated --where KEY=VALUE
            guard += r"(?<!--where )"
        text = re.sub(guard + pattern, repl, text)
    return re.sub(r"(--where [\w.-]+=)\.\.\.", r"\1VALUE", text)
