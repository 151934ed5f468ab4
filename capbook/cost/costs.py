r"""What capacity costs: GPU prices, the cost of a plan, the cheapest configuration, the price
of each choice — every name of :mod:`capbook.cost.prices`, :mod:`capbook.cost.pricing` and
:mod:`capbook.cost.whatif` in one namespace (this was one module before issue 33; the chapters
and ``capbook.costs`` read it here).

A capacity plan ends in a purchase. These modules turn the replicas of a
:class:`capbook.plan.steps.CapacityPlan` into dollars and asks what each decision of the plan costs:

1. **Prices as data** (:func:`read_prices`): a CSV with the header
   ``gpu,on_demand_usd_per_gpu_hour,reserved_usd_per_gpu_hour``, one row per GPU type as the
   sweeps name it (``H100-SXM-80GB``). Lines starting with ``#`` are comments. The repository
   ships illustrative round numbers (:func:`load_sample_prices`), not quotes: replace them.
2. **The cost of a plan** (:func:`plan_cost`): replicas × GPUs per replica (tensor parallel) ×
   price per GPU-hour, per hour, week and year; and the price of a token, as a pair (output,
   input) because the replica's rating is a pair: a replica's hour is shared between output
   tokens at ``R_out`` and input tokens at ``R_in`` tokens/s, so an output token costs
   ``price / (3600 R_out)`` and an input token ``price / (3600 R_in)`` at the rating, and
   ``N / E`` times that when ``N`` replicas carry ``E`` replica-equivalents of work.
3. **The cheapest configuration** (:func:`compare_configurations`): the same plan on each sweep
   of one model (GPU types, tensor-parallel layouts), ranked by cost, with what binds on each.
4. **The price of each choice**: the planned quantile (:func:`price_of_quantiles`), the TTFT
   objective (:func:`price_of_objectives`), dedicated tenant pools (:func:`price_of_pools`) and
   regional pools (:func:`price_of_regions`); and, given a price of saturation (dollars per
   request served late or refused), the quantile that minimises capacity plus saturation cost
   (:func:`optimal_quantile`).
5. **Reserved against on-demand** (:func:`reserve_split`): how many replicas to reserve when the
   fleet follows the hour-of-week demand, from the break-even share ``reserved / on-demand``.

The sizing behind 4 and 5 is :class:`FleetCurve`: the plan's own pipeline (rating and headroom,
Erlang C, the load-dependent model, the engine model, burst headroom, failure spares) as a
function of the peak, so that a plan at another quantile or for another pool is sized exactly
as the plan itself was (``FleetCurve.replicas(plan.output_tps)`` is the plan's count; a test
checks it against :func:`capbook.plan.steps.capacity_plan` at other peaks).

Units: US dollars (USD); prices per GPU-hour; tokens per second for token rates, requests per
second for arrival rates; a week is 168 hours and a year 8,760 (365 days).
"""
from __future__ import annotations

from capbook.cost.prices import *  # noqa: F401,F403
from capbook.cost.prices import __all__ as _prices
from capbook.cost.pricing import *  # noqa: F401,F403
from capbook.cost.pricing import __all__ as _pricing
from capbook.cost.whatif import *  # noqa: F401,F403
from capbook.cost.whatif import __all__ as _whatif

__all__ = [*_prices, *_pricing, *_whatif]
