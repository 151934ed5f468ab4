"""The book's charts: one module per chapter (or pair of chapters), on one theme.

The theme and the chart helpers live in :mod:`capbook.theme` (the base layer, so that a plan or
fleet object can draw itself without importing the chapters' charts); their names are
re-exported here, so ``charts.use_theme()`` and ``charts.PALETTE`` keep working.
"""
from capbook.theme import (HEIGHT, PALETTE, RENDERER_NAME, THEME_NAME, WIDTH, escaped_styler_html,  # noqa: F401
                           script_safe_json, slider, theme_config, use_theme)
from capbook.theme import __all__  # noqa: F401
