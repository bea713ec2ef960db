"""A round-trip histogram panel as a hardware paper prints it: rounds per timing-clock bin on a log
scale, from counts binned once (:func:`bin_rounds`: one ``np.bincount`` over the rounds), drawn as
one filled step outline (thousands of bins draw in milliseconds as one shape), clipped to the
percentile range :data:`CLIP` (p0.1 to p99.9): the rounds outside are counted in the panel's
title, not drawn, so one stall of a millisecond does not squeeze the distribution into one bar.
Beside each panel, its tail view (:func:`draw_tail`): the survival function (CCDF: the fraction of
rounds at or above x, log y) of every round, the slowest included, with the same lines, so a fault's
stall, the maximum and a source's published maximum are always drawn."""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from twin.stats import percentile

CLIP = (0.1, 99.9)
"""The drawn range in percent: from the bin of the 0.1st percentile round to the bin of the 99.9th
(inverted CDF, the very rounds :func:`twin.stats.percentile_ps` picks: results.json's p99.9 is the
last drawn round's)."""
MAX_BINS = 20_000
"""At most this many bins drawn: beyond, neighbouring bins are summed (the width is said in the title)."""
FULL_SPAN_BINS = 1 << 22
"""Counts over the whole span in one ``np.bincount`` up to this many bins (32 MB); a wider span (a
rare stall far out) finds the clip range by :func:`twin.stats.percentile` first and bins only inside it."""


def clip_text() -> str:
    """The clip range in words, e.g. ``p0.1-p99.9``."""
    return f"p{CLIP[0]:g}-p{CLIP[1]:g}"


@dataclass(frozen=True)
class Binned:
    """Rounds counted per bin inside the clip range.

    ``bin_ps``: the bin width (ps; the timing clock's, or a whole multiple of it when more than
    :data:`MAX_BINS` bins would be drawn); ``start_ps``: the first bin's start; ``counts``: int64,
    rounds per bin from ``start_ps`` (the bins of the p0.1 and p99.9 rounds included, empty bins
    kept); ``below`` / ``above``: rounds outside the drawn bins; ``total``: all rounds."""

    bin_ps: int
    start_ps: int
    counts: np.ndarray
    below: int
    above: int
    total: int

    @property
    def end_ps(self) -> int:
        """The end of the last drawn bin (ps)."""
        return self.start_ps + len(self.counts) * self.bin_ps

    def note(self, bin_ps: int, aside: str = "") -> str:
        """The title's note: the rounds left out, the bins if widened from ``bin_ps`` ('' when neither;
        the drawn range itself is said once, in the x label: :func:`axis_label`). ``aside``: rounds
        set apart before binning (e.g. ``"163 stalled rounds"``), said first, the clip's counts then
        being of the rest."""
        lo, hi = (f"p{q:g}" for q in CLIP)
        clipped = f"{self.below:,} below {lo}, {self.above:,} above {hi}"
        if aside:
            parts = [f"{aside}{', then ' + clipped if self.below or self.above else ''} not drawn"]
        else:
            parts = [f"{clipped} not drawn"] if self.below or self.above else []
        if self.bin_ps != bin_ps:
            parts.append(f"bins widened to {self.bin_ps / 1000:g} ns")
        return f" ({'; '.join(parts)})" if parts else ""


def axis_label(what: str, bin_ps: int, drawn=()) -> str:
    """The x label of a figure of histogram panels: ``what`` in µs, the bin width and the clip range.
    ``drawn``: the panels' :class:`Binned` (or their widths in ps), so that the width said is every
    panel's: ``bin_ps`` when no panel was widened, the one width when all were widened alike
    (``208 ns bins (4 ns clock bins summed)``), else ``bin_ps`` and that a title names a wider one
    (``4 ns bins (wider where a title says)``)."""
    widths = {getattr(b, "bin_ps", b) for b in drawn} or {bin_ps}
    base = f"{bin_ps / 1000:g} ns"
    if widths == {bin_ps}:
        bins = f"{base} bins"
    elif len(widths) == 1:
        bins = f"{next(iter(widths)) / 1000:g} ns bins ({base} clock bins summed)"
    else:
        bins = f"{base} bins (wider where a title says)"
    return f"{what} (µs), {bins}, each panel {clip_text()} of its rounds"


def _rank(n: int, q: float) -> int:
    """The 1-based rank among ``n`` sorted rounds of the ``q``-th percentile, inverted CDF, computed
    as numpy's ``percentile(method="inverted_cdf")`` does (index ``n * q / 100 - 1`` in float64,
    rounded up when it has a fraction), so the clip falls on the rounds :func:`twin.stats.percentile_ps`
    names (an exact integer rank differs where ``n * q / 100`` is whole: 99.9 / 100 is not 0.999)."""
    index = n * (q / 100) - 1
    k = int(np.floor(index))
    return min(n, max(1, (k + 1 if index > k else k) + 1))


def bin_rounds(samples_ps: np.ndarray, bin_ps: int, max_bins: int = MAX_BINS) -> Binned:
    """Count ``samples_ps`` (int64 ps, at least one) per ``bin_ps`` bin (bins start at whole
    multiples of ``bin_ps``) and keep the bins from the one holding the p0.1 round to the one
    holding the p99.9 round (:data:`CLIP`), summing neighbours when more than ``max_bins`` remain.
    One pass of ``np.bincount`` over the samples when their span is at most
    :data:`FULL_SPAN_BINS` bins (the percentiles then come from the cumulative counts); else the
    percentiles by :func:`twin.stats.percentile` first. Raises ValueError for no samples or ``bin_ps`` < 1."""
    n = len(samples_ps)
    if n == 0 or bin_ps < 1:
        raise ValueError("no samples" if n == 0 else f"bin_ps {bin_ps} < 1")
    s = np.asarray(samples_ps, dtype=np.int64)
    first = int(s.min()) // bin_ps * bin_ps
    span = (int(s.max()) - first) // bin_ps + 1
    if span <= FULL_SPAN_BINS:
        counts = np.bincount((s - first) // bin_ps, minlength=span)
        cum = np.cumsum(counts)
        k_lo, k_hi = (int(np.searchsorted(cum, _rank(n, t))) for t in CLIP)
        below, above = int(cum[k_lo - 1]) if k_lo else 0, n - int(cum[k_hi])
        counts, start = counts[k_lo:k_hi + 1], first + k_lo * bin_ps
    else:  # a far outlier: find the range first, then count inside it (and the rest at both ends)
        lo, hi = (int(v) for v in percentile(s, list(CLIP)))
        start = lo // bin_ps * bin_ps
        width = bin_ps * max(1, -(-((hi - start) // bin_ps + 1) // max_bins))
        nb = (hi - start) // width + 1
        idx = np.clip((s - start) // width + 1, 0, nb + 1)
        counts = np.bincount(idx, minlength=nb + 2)
        return _widen(Binned(width, start, counts[1:-1], int(counts[0]), int(counts[-1]), n), max_bins)
    return _widen(Binned(bin_ps, start, counts, below, above, n), max_bins)


def _widen(b: Binned, max_bins: int) -> Binned:
    """``b`` with each ``k`` neighbouring bins summed so that at most ``max_bins`` remain (the first
    bin still starts at ``b.start_ps``; the last wider bin may reach past the clip range)."""
    k = -(-len(b.counts) // max_bins)
    if k <= 1:
        return b
    padded = np.zeros(-(-len(b.counts) // k) * k, np.int64)
    padded[:len(b.counts)] = b.counts
    return Binned(b.bin_ps * k, b.start_ps, padded.reshape(-1, k).sum(axis=1), b.below, b.above, b.total)


def draw_counts(ax, binned: Binned, colour: str = "#3b6ea8", include_us=()) -> Binned:
    """Draw ``binned`` on ``ax`` in µs: one filled step outline (a ``StepPatch`` added as an artist:
    ``ax.stairs`` walks every vertex in Python to widen the data limits, milliseconds a hundred bins,
    and both limits are set here), rounds on a log scale from 0.5 to 5 % of the log span above the
    fullest bin (matplotlib's autoscale margin), ticked at decades (:func:`twin.output.figure.decades`),
    x from the first bin's start to the last bin's end, widened to take in every value of
    ``include_us`` (the lines the panel draws), with 5 % (at least 20 ns) either side.
    Returns ``binned``."""
    from matplotlib.patches import StepPatch

    from twin.output.figure import decades
    edges = (binned.start_ps + np.arange(len(binned.counts) + 1, dtype=np.int64) * binned.bin_ps) / 1e6
    ax.add_artist(StepPatch(binned.counts, edges, fill=True, color=colour, linewidth=0, baseline=0.5))
    ax.set_yscale("log")
    top = max(1, int(binned.counts.max()))
    ax.set_ylim(0.5, top * (top / 0.5) ** 0.05)
    decades(ax.yaxis)
    lo, hi = min([edges[0], *include_us]), max([edges[-1], *include_us])
    pad = max(0.02, (hi - lo) * 0.05)
    ax.set_xlim(lo - pad, hi + pad)
    return binned


def draw_histogram(ax, samples_ps: np.ndarray, bin_ps: int, colour: str = "#3b6ea8", include_us=()) -> Binned:
    """:func:`bin_rounds` then :func:`draw_counts`: ``samples_ps`` (int64 ps, at least one) on
    ``ax``, ``bin_ps`` bins, clipped to :data:`CLIP`. Returns what was drawn (:class:`Binned`:
    its :meth:`Binned.note` goes in the panel's title)."""
    return draw_counts(ax, bin_rounds(samples_ps, bin_ps), colour, include_us)


@dataclass(frozen=True)
class Line:
    """A vertical line of a histogram panel: at ``ns``, named ``label`` in the figure's legend."""

    ns: float
    label: str
    colour: str
    width: float = 1.0
    style: str = "-"


_COLOURS = {"p50": "#c03030", "p90": "#e08020", "p99": "#208040", "max": "#6040a0"}


def percentile_lines(summary: dict, who: str, dashed: bool = False, keys=("p50", "p90")) -> list[Line]:
    """The lines of ``summary``'s ``{key}_ns`` for each of ``keys`` present (results.json's names),
    labelled ``{who} {key}``: solid, p50 thick (the twin's, or a live device's round trip), or
    ``dashed`` all thin (a published measurement)."""
    return [Line(summary[f"{k}_ns"], f"{who} {k}", _COLOURS[k], 2.2 if k == "p50" and not dashed else 1.0,
                 "--" if dashed else "-") for k in keys if summary.get(f"{k}_ns") is not None]


NEAR_SPANS = 3.0
"""A line within this many drawn spans (at least :data:`NEAR_MIN_US`) of a panel's bins widens the
panel to show it; one farther (a published maximum far out, a stall) is marked at the panel's edge
and drawn on the tail view (:func:`draw_panel`)."""
NEAR_MIN_US = 0.2


def _near_and_far(binned: Binned, lines) -> tuple[list, list]:
    """``lines`` split into those near the drawn bins of ``binned`` and those far (:data:`NEAR_SPANS`)."""
    lo, hi = binned.start_ps / 1e6, binned.end_ps / 1e6
    reach = max(NEAR_SPANS * (hi - lo), NEAR_MIN_US)
    near = [ln for ln in lines if lo - reach <= ln.ns / 1000 <= hi + reach]
    return near, [ln for ln in lines if ln not in near]


TAIL_POINTS = 4000
"""At most about twice this many vertices per tail curve (:func:`tail_points`)."""


@dataclass(frozen=True)
class Tail:
    """The survival function of a panel's rounds as drawn: ``x_ps`` (int64, increasing: round-trip
    values), ``survival`` (float64: the fraction of all ``total`` rounds at or above each x; 1.0 at
    the fastest round, ``1 / total`` at the slowest, ``x_ps[-1]`` being the maximum)."""

    x_ps: np.ndarray
    survival: np.ndarray
    total: int

    @property
    def max_ps(self) -> int:
        """The slowest round (ps)."""
        return int(self.x_ps[-1])


def tail_points(samples_ps: np.ndarray, points: int = TAIL_POINTS, log_x: bool = False) -> Tail:
    """The survival function of ``samples_ps`` (int64 ps, at least one): for each distinct value x,
    the fraction of rounds >= x. Every round counts; where more than ``points`` distinct values
    exist, the x span (linear, or log with ``log_x``) is cut into ``points`` equal cells and each
    keeps its first and last value (the curve is monotone, so nothing it would draw is lost: the
    fastest and slowest rounds always stay). Raises ValueError for no samples."""
    s = np.asarray(samples_ps, dtype=np.int64)
    if len(s) == 0:
        raise ValueError("no samples")
    x, counts = np.unique(s, return_counts=True)
    n = int(counts.sum())
    surv = (n - np.concatenate([[0], np.cumsum(counts)[:-1]])) / n  # rounds >= x over all rounds
    if len(x) > 2 * points:
        pos = np.log(np.maximum(x, 1).astype(np.float64)) if log_x else x.astype(np.float64)
        cell = np.minimum(((pos - pos[0]) / ((pos[-1] - pos[0]) or 1.0) * points).astype(np.int64), points - 1)
        edge = np.flatnonzero(np.diff(cell)) if len(cell) > 1 else np.array([], np.int64)
        keep = np.unique(np.concatenate([[0, len(x) - 1], edge, edge + 1]))
        x, surv = x[keep], surv[keep]
    return Tail(x, surv, n)


LOG_X_SPAN = 10.0
"""A tail view's x axis is logarithmic where its range (the rounds and the lines) spans more than this
factor (a stall of a millisecond beside microsecond rounds), linear otherwise."""


def draw_tail(ax, samples_ps: np.ndarray, lines=(), colour: str = "#3b6ea8") -> Tail:
    """The tail view of a histogram panel on ``ax``: the survival function of every round
    (:func:`tail_points`) as a step line, x in µs (log where the range spans more than
    :data:`LOG_X_SPAN`), y the fraction of rounds at or above x on a log scale down to half of one
    round (``1 / total``), the slowest round marked with a dot and ``max``, the ``lines``
    (:class:`Line`) drawn too: the x range takes in the maximum and every line. Returns the
    :class:`Tail`."""
    from twin.output.figure import decades
    lo_ps = int(np.min(samples_ps))
    hi_ps = max([int(np.max(samples_ps)), *(ln.ns * 1000 for ln in lines)])
    log_x = lo_ps > 0 and hi_ps / lo_ps > LOG_X_SPAN
    t = tail_points(samples_ps, log_x=log_x)
    ax.step(t.x_ps / 1e6, t.survival, where="pre", color=colour, lw=1.0)  # P(X >= x) on (x_i-1, x_i]: x_i's
    ax.plot([t.max_ps / 1e6], [t.survival[-1]], "o", color=colour, ms=3)
    ax.annotate("max", (t.max_ps / 1e6, t.survival[-1]), xytext=(-3, 3), textcoords="offset points", fontsize=6,
                ha="right")  # left of the dot: the dot is at the axis' right end
    for ln in lines:
        ax.axvline(ln.ns / 1000, color=ln.colour, lw=ln.width, ls=ln.style)
    ax.set_yscale("log")
    ax.set_ylim(0.5 / t.total, 1.5)
    decades(ax.yaxis)
    lo, hi = min([lo_ps, *(ln.ns * 1000 for ln in lines)]) / 1e6, hi_ps / 1e6
    if log_x:
        ax.set_xscale("log")
        decades(ax.xaxis)
        ax.set_xlim(lo / 1.1, hi * 1.1)
    else:
        pad = max(0.01, (hi - lo) * 0.05)
        ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylabel("rounds ≥ x (fraction)", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_title(f"tail: all {t.total:,} rounds, max {t.max_ps / 1e6:.3f} µs", fontsize=7, loc="left", y=1.0)
    return t


_TAILS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each histogram axes of a :func:`panel_figure` -> the axes of its tail view beside it."""


def tail_axes(ax):
    """The tail view's axes beside histogram axes ``ax`` of a :func:`panel_figure` (None for axes made
    otherwise)."""
    return _TAILS.get(ax)


def draw_panel(ax, samples_ps: np.ndarray, bin_ps: int, title: str, lines=(), aside: str = "") -> Binned:
    """One histogram panel as every figure of them draws it: ``samples_ps`` in ``bin_ps`` bins clipped to
    :data:`CLIP` (:func:`draw_histogram`), the ``lines`` (:class:`Line`) on it with the x range widened
    to show each of them (a line the legend names is always visible), the y axis labelled ``rounds``,
    ``title`` with the note of what was not drawn (:meth:`Binned.note`, ``aside`` first), in 9 points
    or smaller to fit the figure's width (a line farther than :data:`NEAR_SPANS` drawn spans from the
    bins is marked at the panel's edge with its value instead of squeezing the bins); and beside it
    (axes of a :func:`panel_figure`) the tail view of every round (:func:`draw_tail`), where the
    rounds beyond the clip and every line are drawn.
    Returns the :class:`Binned` drawn."""
    binned = bin_rounds(samples_ps, bin_ps)
    near, far = _near_and_far(binned, lines)
    drawn = draw_counts(ax, binned, include_us=[ln.ns / 1000 for ln in near])
    for ln in near:  # a dashed (published) line carries a ▼ at the top: seen where it lies on a solid one
        mark = {"marker": "v", "markevery": [1], "markersize": 6, "clip_on": False} if ln.style != "-" else {}
        ax.axvline(ln.ns / 1000, color=ln.colour, lw=ln.width, ls=ln.style, label=ln.label, **mark)
    x0, x1 = ax.get_xlim()
    for i, ln in enumerate(far):  # beyond the drawn range: a ► at the panel's edge with its value, the line on the tail
        side = x1 if ln.ns / 1000 > x1 else x0
        ax.plot([side], [ax.get_ylim()[1]], ">" if side == x1 else "<", color=ln.colour, ms=6, clip_on=False,
                label=f"{ln.label} (off the panel: tail view)")
        ax.annotate(f"{ln.label} {ln.ns / 1000:,.3f} µs", (side, ax.get_ylim()[1]), xytext=(-4 if side == x1 else 4,
                    -10 - 9 * i), textcoords="offset points", ha="right" if side == x1 else "left", fontsize=6,
                    color=ln.colour)
    ax.set_ylabel("rounds")
    text = title + drawn.note(bin_ps, aside)
    # y given: the title is not placed by measuring the tick labels (most of the figure's time)
    fig = ax.figure
    aside_in = fig.get_figwidth() * (1 - ax.get_position().width)  # the figure's width beside this panel
    ax.set_title(text, fontsize=_fitting(fig, text, 9.0, aside_in + 0.1), loc="left", y=1.0)
    tail = tail_axes(ax)
    if tail is not None:
        draw_tail(tail, samples_ps, lines)
    return drawn


def _fitting(fig, text: str, points: float, margins_in: float) -> float:
    """The font size, ``points`` or less (not under 6), at which ``text`` fits the width of ``fig`` less
    ``margins_in`` inches, estimated, not measured (measuring text is most of a figure's time): an
    average glyph of the default font (DejaVu Sans) is about 0.55 em wide."""
    return max(6.0, min(points, (fig.get_figwidth() - margins_in) * 72 / (0.55 * len(text))))


_LEFT, _RIGHT, _BOTTOM, _TOP, _GAP = 0.75, 0.3, 0.5, 0.3, 0.5
"""panel_figure's margins and gap between panels (inches): room for the y label, the title, the x tick
labels and the x label; on the right, half the widest x tick label at the axis' end ("12000", "3.800")."""
_TAIL_IN, _TAIL_GAP = 2.6, 0.85
"""Width of each tail view and the gap between a histogram panel and its tail view (inches: room for
the tail's y tick labels and y label)."""
_LEGEND_ROW = 0.2
"""Inches below the x label per row of the legend (:func:`finish_panels`)."""


def finish_panels(axes, what: str, bin_ps: int, drawn) -> None:
    """One legend for the figure, naming each line label once (a legend per panel was a quarter of the
    figure's time), under the x label (:func:`axis_label` of the panels ``drawn``) and outside every
    panel, so it hides no bar or line: the figure grows by :data:`_LEGEND_ROW` per row of it, the
    panels keeping their size."""
    legend: dict = {}
    for ax in axes[:, 0]:
        for line in ax.get_lines():
            legend.setdefault(line.get_label(), line)
    fig = axes[0, 0].figure
    label = axis_label(what, bin_ps, drawn)  # centred under the panels: its room is twice the nearer side's
    side = fig.get_figwidth() * (1 - axes[-1, 0].get_position().width) / 2
    axes[-1, 0].set_xlabel(label, fontsize=_fitting(fig, label, 10.0, 2 * side + 0.2))
    if axes.shape[1] > 1:
        axes[-1, 1].set_xlabel(f"{what} (µs), every round", fontsize=8)
    if not legend:
        return
    w, h = fig.get_size_inches()
    # entries per row by their estimated width at 7 points (0.55 em a glyph; handle, pad and spacing 4.8 em)
    per = [7 * (0.55 * len(label) + 4.8) for label in legend]
    ncol = max(1, max(k for k in range(1, len(per) + 1) if sum(per[:k]) <= (w - 0.4) * 72))
    extra = _LEGEND_ROW * -(-len(per) // ncol)
    fig.set_size_inches(w, h + extra)
    fig.subplots_adjust(bottom=(_BOTTOM + extra) / (h + extra), top=1 - _TOP / (h + extra))
    fig.legend(list(legend.values()), list(legend), fontsize=7, loc="lower center", ncol=ncol, frameon=False,
               bbox_to_anchor=(0.5, 0.0))


def panel_figure(n: int, width_in: float = 8.0, panel_in: float = 1.9, tails: bool = True):
    """A figure of ``n`` histogram panels stacked (``(fig, axes)``, a matplotlib figure from
    :func:`twin.output.figure.new_figure` and axes of shape (n, 2): column 0 the histogram panels
    ``width_in`` inches wide with their margins, column 1 each panel's tail view, :data:`_TAIL_IN`
    wide, the figure being that much wider; ``tails`` False: shape (n, 1), no tail view),
    ``panel_in`` inches each, with fixed margins in inches (:data:`_LEFT` ...) instead of
    ``tight_layout``, which measures every tick label and took most of the figure's time.
    :func:`draw_panel` on a histogram axes draws its tail view too (:func:`tail_axes`)."""
    from twin.output.figure import new_figure

    height = panel_in * n + 0.6
    axes_h = (height - _BOTTOM - _TOP - _GAP * (n - 1)) / n
    main_in = width_in - _LEFT - _RIGHT
    total = width_in + (_TAIL_GAP + _TAIL_IN if tails else 0.0)
    fig = new_figure(total, height)
    grid = {"hspace": _GAP / axes_h}
    if tails:
        grid.update(width_ratios=[main_in, _TAIL_IN], wspace=_TAIL_GAP / ((main_in + _TAIL_IN) / 2))
    axes = fig.subplots(n, 2 if tails else 1, squeeze=False, gridspec_kw=grid)
    fig.subplots_adjust(left=_LEFT / total, right=1 - _RIGHT / total, bottom=_BOTTOM / height,
                        top=1 - _TOP / height)
    if tails:
        for ax, tail in axes:
            _TAILS[ax] = tail
    return fig, axes
