"""What ``twin validate`` writes: ``validate.json`` (per run: the comparison and the 4 ns histograms
of measured and predicted) and ``validate.png`` (per run, the two histograms overlaid)."""
from __future__ import annotations

import numpy as np

from twin.stats import histogram_4ns, histogram_ps, percentile_ps

CLIP = (0.5, 99.5)  # percentiles of the measured and predicted rounds together: the range drawn


def validation_document(cal: str, checks) -> dict:
    """The JSON document: calibration, and per run its comparison and both 4 ns histograms."""
    return {"schema": "twin.validate/1", "calibration": cal,
            "runs": [{"run": str(v.run.path), "consumer": v.consumer, "frame_bytes": v.run.frame_bytes,
                      "function": v.run.function, "stalled_rounds_left_out": v.run.stalls.count,
                      "queued_behind_left_out": v.run.stalls.queued,
                      **v.comparison.as_dict(),
                      "histogram_measured": histogram_4ns(v.run.clean_rtt_ps),
                      "histogram_predicted": histogram_4ns(v.predicted_ps)} for v in checks]}


def overlay_figure(checks, cal: str):
    """One panel per run: the measured and predicted card-boundary round trips' 4 ns histograms
    (fraction of rounds per bin) overlaid, x in µs, clipped to the measured and predicted rounds'
    p0.5..p99.5 together (stated in each panel's title). Returns the matplotlib figure."""
    from twin.output.figure import new_figure
    fig = new_figure(8, 2.4 * len(checks) + 0.4)
    axes = fig.subplots(len(checks), 1, squeeze=False)
    for ax, v in zip(axes[:, 0], checks):
        m, p = v.run.clean_rtt_ps, v.predicted_ps
        both = np.concatenate([m, p])
        lo, hi = percentile_ps(both, CLIP[0]), percentile_ps(both, CLIP[1])
        for data, colour, label in ((m, "#3b6ea8", "measured (live)"), (p, "#d9822b", "predicted (twin)")):
            shown = data[(data >= lo) & (data <= hi)]
            starts, counts = histogram_ps(shown, 4000)
            ax.stairs(counts / len(data), np.append(starts, starts[-1] + 4000) / 1e6, color=colour, label=label,
                      fill=colour == "#3b6ea8", alpha=0.6 if colour == "#3b6ea8" else 1.0)
        c = v.comparison
        ax.set_title(f"{v.run.label}: p50 {c.error_pct('p50'):+.2f} %, p99 {c.error_pct('p99'):+.2f} %, W1 "
                     f"{c.w1_pct:.2f} % of p50, KS {c.ks:.3f} (drawn: p{CLIP[0]:g}..p{CLIP[1]:g} = "
                     f"{lo / 1e6:.3f}..{hi / 1e6:.3f} µs)", fontsize=8)
        ax.set_xlabel("card-boundary round trip (µs), 4 ns bins")
        ax.set_ylabel("fraction of rounds")
        ax.legend(fontsize=7)
    fig.suptitle(f"{cal}: predicted vs measured", fontsize=9)
    fig.tight_layout()
    return fig
