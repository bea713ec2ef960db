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
            parts.append(f"{self.clipped:,} round{'s' if self.clipped != 1 else ''} above p{CLIP_PERCENTILE:g} = "
                         f"{self.hi_ps / 1e6:.3f} µs not drawn")
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
    from matplotlib.ticker import NullLocator
    ax.yaxis.set_minor_locator(NullLocator())  # decades only: a log axis's minor ticks were a third of the time
    pad = max(0.02, (edges[-1] - edges[0]) * 0.05)
    ax.set_xlim(edges[0] - pad, edges[-1] + pad)
    return Drawn(b, hi, int(len(samples_ps) - len(shown)))


def panel_figure(n: int, width_in: float = 8.0, panel_in: float = 1.9):
    """A figure of ``n`` histogram panels stacked (matplotlib ``(fig, axes)``, axes of shape (n, 1)),
    ``panel_in`` inches each, with fixed margins in inches (room for the y label, a title and the
    x tick labels between panels) instead of ``tight_layout``, which measures every tick label and
    took most of the figure's time. The caller imports matplotlib with the Agg backend first."""
    import matplotlib.pyplot as plt

    height = panel_in * n + 0.6
    left, right, bottom, top, gap = 0.75, 0.15, 0.5, 0.3, 0.5  # inches
    axes_h = (height - bottom - top - gap * (n - 1)) / n
    fig, axes = plt.subplots(n, 1, figsize=(width_in, height), squeeze=False,
                             gridspec_kw={"hspace": gap / axes_h})
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, bottom=bottom / height, top=1 - top / height)
    return fig, axes
