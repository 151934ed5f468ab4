__version__ = "0.1.0"
from .sweep import Sweep, choose_slots, load_sample_sweep  # noqa: E402,F401
