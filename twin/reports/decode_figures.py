"""latency_vs_round of a decode study as a paper prints it: every placement's round trip and reaction
time per request on one y axis that keeps each of them readable, logarithmic where the series span
decades (a placement that falls behind by milliseconds beside one that keeps up at 8 µs, the deadline
at 10 µs), the deadline always inside the range, and a legend naming only what is drawn."""
from __future__ import annotations

import numpy as np

from twin.stats import percentile, percentile_rows

LATENCY_POINTS = 10_000  # latency_vs_round.png draws every request up to this many, blocks beyond


def latency_blocks(samples_ps: np.ndarray, points: int = LATENCY_POINTS) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray, int]:
    """What latency_vs_round.png draws of one series (int64 ps per request, in order): up to
    ``points`` requests, every one (x = request number from 1, the value, the value, block 1);
    beyond, consecutive blocks of ``block`` = ceil(n / (points / 2)) requests (the last may be
    shorter): x = each block's first request, its median (lower, an actual request's value) and its
    maximum, and ``block``. Drawing 1e5+ points took seconds; this is a few thousand."""
    n = len(samples_ps)
    if n <= points:
        x = np.arange(1, n + 1)
        return x, samples_ps, samples_ps, 1
    block = -(-n // (points // 2))
    full = n // block * block
    head = samples_ps[:full].reshape(-1, block)
    tail = [samples_ps[full:]] if full < n else []
    mid = np.array([*percentile_rows(head, 50), *(percentile(t, 50) for t in tail)], dtype=np.int64)
    top = np.array([*head.max(axis=1), *(t.max() for t in tail)], dtype=np.int64)
    return np.arange(1, n + 1, block), mid, top, block


def latency_clip(series: list[np.ndarray]) -> tuple[int, int, int]:
    """The y range of latency_vs_round.png: (lowest p0.1, highest p99.9 over ``series``, each int64
    ps per request; :data:`twin.output.histogram.CLIP`, inverted CDF) and how many values of all the
    series lie outside it (counted in the title, not drawn). (0, 0, 0) for no series."""
    from twin.output.histogram import CLIP
    from twin.stats import percentile_ps
    if not series:
        return 0, 0, 0
    lo = min(percentile_ps(ps, CLIP[0]) for ps in series)
    hi = max(percentile_ps(ps, CLIP[1]) for ps in series)
    return lo, hi, int(sum(((ps < lo) | (ps > hi)).sum() for ps in series))


LOG_SPAN = 10.0
"""The y axis is logarithmic where its range (the series' p0.1 to p99.9 and the deadline) spans more
than this factor; linear otherwise."""


def latency_axis(lo_ps: int, hi_ps: int, lines_ps=()) -> tuple[str, float, float]:
    """The y axis of latency_vs_round (µs): ``(scale, bottom, top)`` for series from ``lo_ps`` to
    ``hi_ps`` (the lowest p0.1 and highest p99.9, ps) and horizontal lines ``lines_ps`` (ps, e.g. the
    deadline), every one of them inside: ``log`` from ``lo / 1.5`` to ``hi * 1.25`` where the range
    spans more than :data:`LOG_SPAN` (a 1-2-5 tick below the lowest value: 5 µs under 7.5 µs), else
    ``linear`` with 5 % (at least 10 ns) either side."""
    lo = min([lo_ps, *lines_ps]) / 1e6
    hi = max([hi_ps, *lines_ps]) / 1e6
    if lo > 0 and hi / lo > LOG_SPAN:
        return "log", lo / 1.5, hi * 1.25
    pad = max(0.01, (hi - lo) * 0.05)
    return "linear", lo - pad, hi + pad


def visible(values_us: np.ndarray, bottom: float, top: float) -> bool:
    """Whether any of ``values_us`` lies inside ``[bottom, top]`` (a series drawn on the axis)."""
    v = np.asarray(values_us, dtype=np.float64)
    return bool(((v >= bottom) & (v <= top)).any())


def latency_figure(study, label_of):
    """The latency_vs_round figure of decode study ``study`` (a matplotlib figure, 8 x 4.5 in), each
    placement named by ``label_of(its results.json summary)``: per placement its round trip and
    reaction time per request (every request up to :data:`LATENCY_POINTS`, beyond that a block's
    median as a line and its slowest request as a dot: :func:`latency_blocks`), each series in its
    own colour (:func:`twin.output.figure.series_styles`), the y axis from :func:`latency_axis` over
    every series' p0.1-p99.9 (:func:`latency_clip`) and the deadline, the requests beyond counted in
    the title; the legend names each series with a point on the axis, and the deadline."""
    from twin.output.figure import new_figure, series_styles
    from twin.output.histogram import clip_text
    doc = study.document
    fig = new_figure(8, 4.5)
    ax = fig.subplots()
    series = [(s, what, ps) for s, r in zip(doc["placements"], study.runs)
              for what, ps in (("round trip", r.result.rtt_ps), ("reaction", r.result.t_back - r.result.t_send))
              if len(ps)]
    lo, hi, outside = latency_clip([ps for _, _, ps in series])
    deadline_ps = [int(doc["deadline_ns"] * 1000)] if doc.get("deadline_ns") else []
    scale, bottom, top = latency_axis(lo, hi, deadline_ps) if series else ("linear", 0.0, 1.0)
    handles, block = [], 1
    for (s, what, ps), (colour, _) in zip(series, series_styles(len(series))):
        x, mid, top_ps, block = latency_blocks(ps)
        label, z = f"{label_of(s)} {what}", 3 if what == "round trip" else 2  # the round trip over its reaction
        if block == 1:  # every request a point
            h, = ax.plot(x, mid / 1e6, ".", ms=1.5, color=colour, label=label, zorder=z)
        else:  # a block's median as a line, its slowest request as a point
            h, = ax.plot(x, mid / 1e6, lw=0.8, color=colour, label=label, zorder=z)
            ax.plot(x, top_ps / 1e6, ".", ms=1.5, color=colour, zorder=z)
        if visible(np.concatenate([mid, top_ps]) / 1e6, bottom, top):
            handles.append(h)
    if deadline_ps:
        handles.append(ax.axhline(deadline_ps[0] / 1e6, color="#c00000", lw=1.2, ls="--",
                                  label=f"deadline {deadline_ps[0] / 1e6:g} µs"))
    ax.set_yscale(scale)
    if scale == "log":  # ticks at 1, 2 and 5 of each decade, in plain numbers (µs): 8 us against 10 us read off
        from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, pos: f"{v:,g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.grid(which="major", axis="y", alpha=0.3)
    ax.set_ylim(bottom, top)
    ax.set_xlim(0, max([len(ps) for _, _, ps in series] or [1]) + 1)
    ax.set_xlabel("request (stream order)")
    ax.set_ylabel("round trip, reaction time (µs)" + (", log scale" if scale == "log" else ""))
    ax.set_title(f"{doc['scenario']}: latency vs round" + (
        f" (per block of {block:,} requests: median line, slowest as a dot)" if block > 1 else "")
        + f"\ny axis: {clip_text()} of each series" + (f"; {outside:,} request values off the axis" if outside else ""),
        fontsize=9)
    if handles:
        ax.legend(handles=handles, labels=[h.get_label() for h in handles], markerscale=6, fontsize=7,
                  loc="best", framealpha=0.9)
    fig.tight_layout()
    return fig


__all__ = ["LOG_SPAN", "latency_axis", "latency_figure", "visible"]
