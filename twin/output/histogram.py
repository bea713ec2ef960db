"""A round-trip histogram panel as a hardware paper prints it: counts per timing-clock bin on a log
scale up to the 99.9th percentile (the rounds beyond are counted in the panel's title, not drawn),
as one filled step outline (thousands of bins draw in milliseconds as one shape)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.stats import histogram_ps, percentile_ps, plot_bin_ps

CLIP_PERCENTILE = 99.9


@dataclass(frozen=True)
class Drawn:
    """What a panel shows: ``bin_ps`` (the bin width used, ps), ``hi_ps`` (the last round trip drawn:
    the 99.9th percentile), ``clipped`` (rounds beyond it, not drawn)."""

    bin_ps: int
    hi_ps: int
    clipped: int

    def note(self, bin_ps: int) -> str:
        """The title's note on what the panel leaves out or widens ('' when nothing)."""
        parts = [f"bins widened to {self.bin_ps / 1000:g} ns"] if self.bin_ps != bin_ps else []
        if self.clipped:
            parts.append(f"{self.clipped:,} rounds above p{CLIP_PERCENTILE:g} = {self.hi_ps / 1e6:.3f} µs not drawn")
        return f" ({'; '.join(parts)})" if parts else ""


def draw_histogram(ax, samples_ps: np.ndarray, bin_ps: int, colour: str = "#3b6ea8") -> Drawn:
    """Draw ``samples_ps`` (int64 ps, at least one) on ``ax`` in µs: bins of ``bin_ps`` (widened to
    span the drawn range in at most 20,000 bins, :func:`twin.stats.plot_bin_ps`) up to the 99.9th
    percentile, counts on a log scale. Returns what was drawn (:class:`Drawn`)."""
    hi = percentile_ps(samples_ps, CLIP_PERCENTILE)
    shown = samples_ps[samples_ps <= hi]
    b = plot_bin_ps(shown, bin_ps)
    starts, counts = histogram_ps(shown, b)
    edges = np.append(starts, starts[-1] + b) / 1e6
    ax.stairs(counts, edges, fill=True, color=colour, linewidth=0, baseline=0.5)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)
    pad = max(0.02, (edges[-1] - edges[0]) * 0.05)
    ax.set_xlim(edges[0] - pad, edges[-1] + pad)
    return Drawn(b, hi, int(len(samples_ps) - len(shown)))
