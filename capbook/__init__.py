__version__ = "0.1.0"
from .sweep import Sweep, choose_slots, load_sample_sweep  # noqa: E402,F401
from .fleet import FleetPlan, allocate_tpm, alert_levels, compare_routing, plan_fleet  # noqa: E402,F401
from .forecast import event_calendar, fit_trend_shape, forecast_tokens  # noqa: E402,F401
from .backtest import compare_forecasts, score_forecast  # noqa: E402,F401
from .sim import FleetSpec, Simulation, simulate  # noqa: E402,F401
from .plan import SLO, CapacityPlan, capacity_plan  # noqa: E402,F401
from .traces import Mapping, RequestLog, load_sample_requests, read_requests  # noqa: E402,F401
