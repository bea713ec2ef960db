"""Histogram panels from counts binned once (twin/output/histogram.py): the clip range p0.1-p99.9 by
the inverted CDF, the rounds outside counted, the same bins whichever way the range was found."""
from __future__ import annotations

import numpy as np
import pytest

import twin.output.histogram as h
from twin.stats import percentile_ps


def test_the_rounds_outside_the_clip_are_counted_not_drawn():
    # 1,001 rounds: 0 ps, 998 at 2 us, then 2.4 us and 3 us. p0.1 is the 2nd round (rank ceil(1001 * 0.001)),
    # p99.9 the 1,000th (ceil(1001 * 0.999)): 0 ps is below, 3 us above; 2.4 us is the last drawn bin.
    s = np.array([0] + [2_000_000] * 998 + [2_400_000, 3_000_000], np.int64)
    b = h.bin_rounds(s, 4000)
    assert (b.below, b.above, b.total) == (1, 1, 1001)
    assert b.start_ps == 2_000_000 and b.bin_ps == 4000 and len(b.counts) == 400_000 // 4000 + 1
    assert b.counts[0] == 998 and b.counts[-1] == 1 and b.counts.sum() == 999
    assert "1 below p0.1, 1 above p99.9 not drawn" in b.note(4000)


def test_the_clip_falls_on_the_rounds_percentile_ps_names():
    # where n * q / 100 is whole (n = 1,000), numpy's float index (99.9 / 100 > 0.999) picks the next
    # round: the figure's p99.9 is results.json's p99.9 round either way
    rng = np.random.default_rng(3)
    for n in (1, 2, 999, 1000, 1001, 2000, 12345):
        s = np.sort(rng.integers(0, 5000, n)) * 4000  # within MAX_BINS: no widening
        b = h.bin_rounds(s, 4000)
        assert b.start_ps == percentile_ps(s, 0.1) and b.end_ps - 4000 == percentile_ps(s, 99.9), n


def test_a_stall_far_out_takes_the_percentile_path_with_the_same_bins():
    rng = np.random.default_rng(7)
    body = rng.integers(500, 700, 20_000) * 4000  # 2.0-2.8 us on the 4 ns clock
    near = h.bin_rounds(np.append(body, 10**9), 4000)  # span 250,000 bins: one bincount
    far = h.bin_rounds(np.append(body, 10**13), 4000)  # 2.5e9 bins: np.percentile, then the range alone
    assert 10**13 // 4000 > h.FULL_SPAN_BINS >= 10**9 // 4000
    assert (near.start_ps, near.bin_ps, near.below, near.above) == (far.start_ps, far.bin_ps, far.below, far.above)
    assert np.array_equal(near.counts, far.counts)
    s = np.append(body, 10**13)
    assert near.start_ps == percentile_ps(s, 0.1) and near.end_ps - 4000 == percentile_ps(s, 99.9)
    assert near.below == int((s < near.start_ps).sum()) and near.above == int((s >= near.end_ps).sum())


def test_wide_ranges_are_summed_into_at_most_max_bins():
    s = np.arange(100_000, dtype=np.int64) * 4000  # one round per bin: the clip keeps bins 100 .. 99,900
    b = h.bin_rounds(s, 4000, max_bins=20_000)
    assert len(b.counts) <= 20_000 and b.bin_ps % 4000 == 0 and b.bin_ps > 4000
    assert b.counts.sum() + b.below + b.above == 100_000
    assert (b.below, b.above) == (99, 99)  # p0.1 the 100th round, p99.9 the 99,901st (numpy's float index)
    assert "bins widened to" in b.note(4000)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no samples"):
        h.bin_rounds(np.array([], np.int64), 4000)
    with pytest.raises(ValueError, match="bin_ps"):
        h.bin_rounds(np.array([1], np.int64), 0)


def test_decode_latency_axis_clips_each_series_to_its_percentiles():
    from twin.reports.decode_figures import latency_clip
    # 1,001 values each: p0.1 is the 2nd (ceil(1001 * 0.001)), p99.9 the 1,000th (ceil(1001 * 0.999))
    a = np.arange(1, 1002, dtype=np.int64) * 1000
    b = np.arange(1, 1002, dtype=np.int64) * 2000
    lo, hi, outside = latency_clip([a, b])
    assert (lo, hi) == (2 * 1000, 1000 * 2000)  # the lowest p0.1 (a's), the highest p99.9 (b's)
    assert outside == 1 + 1  # a's 1 ns below, b's 2,002 ns above
    assert latency_clip([]) == (0, 0, 0)


def test_log_axis_labels_are_decades_in_plain_text():
    from twin.output.figure import decade_label
    assert [decade_label(10.0 ** e) for e in (0, 1, 2, 3, 6)] == ["10⁰", "10¹", "10²", "10³", "10⁶"]
    assert (decade_label(0.01), decade_label(1e-12)) == ("10⁻²", "10⁻¹²")
    assert (decade_label(20), decade_label(0.5), decade_label(0)) == ("20", "0.5", "0")  # not decades: as %g


def test_a_panel_shows_its_decades_its_bins_in_us_and_the_clip():
    import io

    from PIL import Image

    from twin.output.files import savefig_writer
    # three 4 ns bins from 2 us; the fullest holds 1,500 rounds: the log axis from 0.5 rounds to above
    # 1,500 shows the decades 1, 10, 100, 1,000
    b = h.Binned(4000, 2_000_000, np.array([1, 1500, 30]), below=2, above=3, total=1536)
    fig, axes = h.panel_figure(1)
    ax = axes[0, 0]
    h.draw_counts(ax, b)
    ax.set_xlabel(h.axis_label("round trip", 4000))
    f = io.BytesIO()
    savefig_writer(fig, "png")(f)
    assert Image.open(f).size[0] == round(fig.get_figwidth() * 300)  # 300 dots per inch
    lo, hi = ax.get_ylim()
    assert lo == 0.5 and hi > 1500
    shown = [(t.get_loc(), t.label1.get_text()) for t in ax.yaxis.get_major_ticks() if lo <= t.get_loc() <= hi]
    assert shown == [(1, "10⁰"), (10, "10¹"), (100, "10²"), (1000, "10³")]
    x0, x1 = ax.get_xlim()
    assert x0 < 2.000 and 2.012 < x1 < 2.1  # µs: the bins span 2.000-2.012
    assert "(µs), 4 ns bins, each panel p0.1-p99.9 of its rounds" in ax.get_xlabel()
    assert b.note(4000) == " (2 below p0.1, 3 above p99.9 not drawn)"


def test_the_x_label_names_every_panels_bins():
    base = "round trip (µs), 4 ns bins, each panel p0.1-p99.9 of its rounds"
    assert h.axis_label("round trip", 4000) == h.axis_label("round trip", 4000, [4000, 4000]) == base
    assert "208 ns bins (4 ns clock bins summed)" in h.axis_label("round trip", 4000, [208_000])
    assert "4 ns bins (wider where a title says)" in h.axis_label("round trip", 4000, [4000, 16_000])


def test_every_line_in_the_legend_is_on_its_axis_and_every_tick_label_in_the_figure():
    # one round (3.776 us) and published p50/p90 72 ns below and 28 ns above it: the drawn bins alone
    # span 4 ns, so the x range must widen to show the dashed lines the legend names
    fig, axes = h.panel_figure(1)
    ax = axes[0, 0]
    lines = h.percentile_lines({"p50_ns": 3776.0, "p90_ns": 3776.0}, "twin") + h.percentile_lines(
        {"p50_ns": 3708.0, "p90_ns": 3804.0, "p99_ns": None}, "measured", dashed=True, keys=("p50", "p90", "p99"))
    drawn = h.draw_panel(ax, np.array([3_776_000], np.int64), 4000, "mi210", lines)
    h.finish_panels(axes, "round trip", 4000, [drawn])
    x0, x1 = ax.get_xlim()
    assert all(x0 < line.get_xdata()[0] < x1 for line in ax.get_lines()) and len(ax.get_lines()) == 4
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["twin p50", "twin p90", "measured p50",
                                                                  "measured p90"]
    assert ax.get_ylabel() == "rounds"
    # twin p50 and p90 lie on one x: each published (dashed) line carries a marker at the top, solid ones none
    assert [(ln.get_linestyle(), ln.get_marker()) for ln in ax.get_lines()] == [("-", "None"), ("-", "None"),
                                                                                ("--", "v"), ("--", "v")]
    _tick_labels_inside(fig, ax)
    fig, axes = h.panel_figure(1)  # the round alone: the axis ends on a tick (3.800 us), whose label stays in
    h.finish_panels(axes, "round trip", 4000, [h.draw_panel(axes[0, 0], np.array([3_776_000]), 4000, "mi210",
                                                            lines[:2])])
    assert axes[0, 0].get_xlim()[1] == pytest.approx(3.8)
    _tick_labels_inside(fig, axes[0, 0])


def _tick_labels_inside(fig, ax):
    fig.canvas.draw()
    box = fig.bbox
    lo, hi = ax.get_xlim()
    shown = [t.label1 for t in ax.xaxis.get_major_ticks() if lo <= t.get_loc() <= hi]
    for t in shown + [ax.title, ax.xaxis.label, *fig.legends[0].get_texts()]:
        if t.get_visible() and t.get_text():
            e = t.get_window_extent()
            assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, t.get_text()


def test_a_live_panel_sets_its_stalled_rounds_apart_and_names_its_lines_live():
    from types import SimpleNamespace

    from twin.output.live import stall_summary
    from twin.reports.run import histogram_panel
    from twin.stats import summary_ns
    # 1,000 live rounds: service 400 ns, round trip 2.5 us; 30 of them preempted for 4 ms (3 %: far more
    # than the 0.1 % the clip leaves out)
    svc = np.full(1000, 400, np.int64)
    rtt = np.full(1000, 2_500_000, np.int64) + np.arange(1000) % 5 * 4000
    svc[::33], rtt[::33] = 4_000_000, 4_002_500_000
    live = {"backend": "shm", **stall_summary(svc, rtt)}
    assert live["stalled"]["rounds"] == 31
    run = SimpleNamespace(node="cpu_live", result=SimpleNamespace(rtt_ps=rtt, stats={"service_ns": svc}),
                          summary={**summary_ns(rtt), "device": "AMD EPYC 7282, one core", "live": live})
    fig, axes = h.panel_figure(1)
    ax = axes[0, 0]
    drawn = histogram_panel(ax, run, 4000)
    assert drawn.total == 1000 - 31 and ax.get_xlim()[1] < 3  # µs: the stalls are not on the axis
    assert "live shm consumer in place of the AMD EPYC 7282" in ax.get_title(loc="left")
    assert "(31 stalled rounds not drawn)" in ax.get_title(loc="left")
    clean = live["clean"]["round_trip"]
    assert [(ln.get_label(), ln.get_xdata()[0]) for ln in ax.get_lines()] == [
        ("live p50, stalled left out", clean["p50_ns"] / 1000), ("live p90, stalled left out", clean["p90_ns"] / 1000)]
