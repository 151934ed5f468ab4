"""Charts of the capstone chapter (*The capacity plan*)."""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from capbook.validation import number, positive
from capbook.theme import slider

__all__ = ["rating_explorer"]


def rating_explorer(output_tps: float, input_tps: float, rating_output_tps: float, rating_input_tps: float,
                    *, headroom: float = 0.8, max_scale: float = 3.0):
    """Replicas by the two-number rating as demand grows, with sliders computed in the browser.

    The line is :math:`\\lceil (s O / R_\\text{out} + r\\, s O / R_\\text{in}) / h \\rceil` over the
    demand multiple :math:`s`, with the headroom :math:`h` and the input-to-output ratio
    :math:`r` bound to sliders (Vega-Lite parameters: the page recomputes it without Python).
    The dashed rule marks the plan's peak (:math:`s = 1`).

    Parameters
    ----------
    output_tps, input_tps : float
        The plan's peak, output and input tokens per second (> 0).
    rating_output_tps, rating_input_tps : float
        The replica's rating, output and input tokens per second (> 0).
    headroom : float
        Initial headroom slider value, in [0.5, 1].
    max_scale : float
        Largest demand multiple drawn (> 0.1).

    Returns
    -------
    altair.LayerChart
    """
    out = positive(output_tps, "output_tps")
    inp = positive(input_tps, "input_tps")
    r_out = positive(rating_output_tps, "rating_output_tps")
    r_in = positive(rating_input_tps, "rating_input_tps")
    h0 = number(headroom, "headroom", lo=0.5, hi=1.0)
    top = number(max_scale, "max_scale", lo=0.1, lo_open=True)
    ratio0 = float(np.clip(round(inp / out, 1), 1.0, 20.0))
    frame = pd.DataFrame({"scale": np.round(np.arange(0.05, top + 1e-9, 0.05), 2)})
    h_param = slider("headroom", h0, 0.5, 1.0, 0.05, "headroom (share of the rating)")
    r_param = slider("ratio", ratio0, 1.0, 20.0, 0.5, "input tokens per output token")
    line = alt.Chart(frame).transform_calculate(
        out_tps=f"datum.scale * {out:.6g}",
        replicas=f"ceil((datum.scale * {out:.6g} / {r_out:.6g} + ratio * datum.scale * {out:.6g} / {r_in:.6g})"
                 " / headroom - 1e-9)",
    ).mark_line(interpolate="step-after").encode(
        x=alt.X("scale:Q", title="demand, multiple of the plan's peak"),
        y=alt.Y("replicas:Q", title="replicas by rating"),
        tooltip=[alt.Tooltip("scale:Q", title="multiple"),
                 alt.Tooltip("out_tps:Q", format=",.0f", title="output tok/s"),
                 alt.Tooltip("replicas:Q", title="replicas")],
    )
    rule = alt.Chart(pd.DataFrame({"scale": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(x="scale:Q")
    return (line + rule).add_params(h_param, r_param).properties(
        title=f"Replicas by rating ({r_out:,.0f} out / {r_in:,.0f} in tok/s per replica)")
