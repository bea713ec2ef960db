"""Figures as a hardware paper prints them: any format (vector PDF/SVG), a tail view with every round,
the latency axis readable, legends naming what is drawn, colours that never repeat, labels that fit;
and the streams' slot bound in rho with its warning."""
from __future__ import annotations

import io
import re
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from test_cli import run_cli

import twin.output.histogram as h
from twin.output.files import RunFolder, savefig_writer

ROOT = Path(__file__).resolve().parents[1]


def _panel_figure(samples, lines=()):
    fig, axes = h.panel_figure(1)
    drawn = h.draw_panel(axes[0, 0], np.asarray(samples, np.int64), 4000, "gpu", lines)
    h.finish_panels(axes, "round trip", 4000, [drawn])
    return fig, axes


def _pdf_streams(data: bytes) -> bytes:
    """Every content stream of a PDF, inflated."""
    out = b""
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            out += zlib.decompress(m.group(1))
        except zlib.error:
            out += m.group(1)
    return out


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_a_figure_saved_as_pdf_or_svg_is_a_vector_drawing_with_the_same_bytes_each_time(fmt, tmp_path):
    rtt = 3_800_000 + np.arange(2000, dtype=np.int64) % 9 * 4000
    fig, _ = _panel_figure(rtt)
    with RunFolder(tmp_path / "run", figure_format=fmt) as folder:
        path = folder.savefig("histograms.png", fig)  # the code names .png; the run writes its format
        folder.commit()
    assert path.name == f"histograms.{fmt}" and path.is_file() and not (tmp_path / "run" / "histograms.png").exists()
    data = path.read_bytes()
    if fmt == "pdf":
        assert data.startswith(b"%PDF") and b"/Subtype /Image" not in data and b"CreationDate" not in data
        body = _pdf_streams(data)
        assert body.count(b" l\n") + body.count(b" l ") > 20  # line-to operators: paths, not pixels
    else:
        text = data.decode()
        assert text.lstrip().startswith("<?xml") and "<image" not in text and text.count("<path") > 20
        assert "<dc:date>" not in text
    again = io.BytesIO()
    savefig_writer(fig, fmt)(again)
    assert again.getvalue() == data  # deterministic: no date, no random ids


def test_a_png_is_printed_at_300_dpi():
    from PIL import Image
    fig, _ = _panel_figure(np.full(100, 2_000_000, np.int64))
    f = io.BytesIO()
    savefig_writer(fig, "png")(f)
    assert Image.open(f).size[0] == round(fig.get_figwidth() * 300)


def test_an_unknown_figure_format_is_refused(tmp_path):
    with pytest.raises(ValueError, match="tiff"):
        RunFolder(tmp_path, figure_format="tiff")
    rc, _, err = run_cli(["run", "--figure-format", "tiff", "--rounds", "10"])
    assert rc == 2 and "--figure-format" in err


def test_twin_run_writes_its_histograms_in_the_asked_format(tmp_path):
    out = tmp_path / "run"
    rc, stdout, err = run_cli(["run", str(ROOT / "scenarios/card_path_64b.yaml"), "--rounds", "300", "--out", str(out),
                               "--quiet", "--no-rounds", "--figure-format", "svg"])
    assert rc == 0, err
    assert (out / "histograms.svg").is_file() and not (out / "histograms.png").exists()
    import json
    assert "histograms.svg" in json.loads((out / "manifest.json").read_text())["files"]


def test_the_tail_view_draws_every_round_and_the_maximum():
    rng = np.random.default_rng(3)
    rtt = (3_800_000 + rng.integers(0, 20, 100_000) * 4000).astype(np.int64)
    rtt[12_345] = 1_000_000_000  # a fault's 1 ms stall: far beyond the p99.9 clip
    t = h.tail_points(rtt)
    assert t.max_ps == 1_000_000_000 and t.survival[-1] == pytest.approx(1 / len(rtt))
    assert t.x_ps[0] == rtt.min() and t.survival[0] == 1.0 and t.total == len(rtt)
    wide = np.arange(1, 50_001, dtype=np.int64) * 4000  # 50,000 distinct values: thinned, ends kept
    tw = h.tail_points(wide, points=1000)
    assert len(tw.x_ps) <= 2000 and tw.x_ps[0] == 4000 and tw.max_ps == 200_000_000
    assert np.all(np.diff(tw.x_ps) > 0) and np.all(np.diff(tw.survival) < 0)
    # in a panel: the histogram clips at p99.9, the tail view beside it reaches the stall and a published maximum
    lines = h.percentile_lines({"max_ns": 2_000_000.0}, "measured", dashed=True, keys=("max",))
    fig, axes = _panel_figure(rtt, lines)
    hist, tail = axes[0]
    assert h.tail_axes(hist) is tail
    assert hist.get_xlim()[1] < 1000 < 2000 < tail.get_xlim()[1]  # µs; the stall and the line in the tail's range
    assert tail.get_xscale() == "log" and tail.get_yscale() == "log"
    curve = tail.get_lines()[0]
    assert curve.get_xdata()[-1] == pytest.approx(1000.0) and curve.get_ydata()[-1] == pytest.approx(1e-5)
    assert tail.get_ylim()[0] < 1e-5
    assert any(ln.get_xdata()[0] == pytest.approx(2000.0) for ln in tail.get_lines())  # the published line drawn
    assert "max 1000.000 µs" in tail.get_title(loc="left")


def _fake_decode_study(deadline_ns=10_000):
    """Two placements: one falling behind to 5 ms, one keeping up at 8 us (decode_stream_two_gpus's shape)."""
    n = 3000
    rng = np.random.default_rng(1)
    t_send = np.arange(n, dtype=np.int64) * 3_000_000
    slow = (4_500_000 + np.arange(n, dtype=np.int64) * 1_600_000).astype(np.int64)
    fast = (7_500_000 + rng.integers(0, 200, n) * 4000).astype(np.int64)

    def run(rtt):
        return SimpleNamespace(result=SimpleNamespace(rtt_ps=rtt, t_send=t_send, t_back=t_send + rtt + 500_000))
    placements = [{"device": "mi210", "mode": "inline"},
                  {"device": "mi210+mi210", "mode": "inline", "dispatch": "round_robin"}]
    return SimpleNamespace(document={"scenario": "two", "deadline_ns": deadline_ns, "placements": placements},
                           runs=[run(slow), run(fast)])


def test_latency_vs_round_reads_8_us_beside_milliseconds_and_names_only_drawn_series():
    from twin.reports.decode import _label
    from twin.reports.decode_figures import latency_axis, latency_figure
    fig = latency_figure(_fake_decode_study(), _label)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert ax.get_yscale() == "log" and lo < 7.5 < 10.0 < hi and hi > 4000  # µs: 8 us, the deadline, 5 ms
    drawn = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    on_axis = [ln.get_label() for ln in drawn
               if np.any((np.asarray(ln.get_ydata()) >= lo) & (np.asarray(ln.get_ydata()) <= hi))]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == on_axis and "deadline 10 µs" in legend and len(legend) == 5
    colours = [ln.get_color() for ln in drawn if "deadline" not in ln.get_label()]
    assert len(set(colours)) == len(colours)
    assert ax.get_ylabel().startswith("round trip, reaction time (µs)")
    # a narrow range stays linear, a deadline above it still inside
    scale, b, t = latency_axis(7_000_000, 8_000_000, [10_000_000])
    assert scale == "linear" and b < 7 and t > 10
    assert latency_axis(7_000_000, 5_000_000_000)[0] == "log"


def test_a_sweep_of_many_values_never_repeats_a_colour():
    from twin.studies.sweep import Axis, plot
    values = list(range(1, 15))  # 14 series: matplotlib's C0..C9 cycle repeated from the 11th
    rows = [{"consumer": "mi210", "params.x": x, "params.y": y, "p50_ns": 1000.0 + y, "p90_ns": 1100.0 + y,
             "p99_ns": 1200.0 + y} for y in values for x in (1, 2)]
    got = {}
    folder = SimpleNamespace(savefig=lambda name, fig: got.setdefault("fig", fig))
    plot(rows, [Axis("params.x", (1, 2)), Axis("params.y", tuple(values))], folder, "t")
    ax = got["fig"].axes[0]
    p50 = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(p50) == 14 and len({ln.get_color() for ln in p50}) == 14
    from twin.output.figure import series_styles
    assert len({c for c, _ in series_styles(200)}) == 200


def test_topology_labels_fit_inside_the_figure_whole():
    from twin.output.topology_figure import figure, wrap_label
    from twin.scenario import load_scenario
    assert wrap_label("threadripper_core") == "threadripper_\ncore" and wrap_label("nic") == "nic"
    assert wrap_label("averyveryverylongname") == "averyveryverylongname"  # nothing is cut
    sc = load_scenario(ROOT / "scenarios/backline_roce.yaml").scenario
    fig = figure(sc)
    fig.canvas.draw()
    box = fig.bbox
    texts = [t for ax in fig.axes for t in ax.texts]
    assert any(t.get_text() == "threadripper_\ncore" for t in texts)
    for t in texts:
        e = t.get_window_extent()
        assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, t.get_text()


def test_rho_counts_the_workers_the_slots_let_work():
    from twin.qec.streaming import busy_workers, stream_summary
    n = 400
    arrival = np.arange(n, dtype=np.int64) * 1_000_000  # one request per 1 us cycle
    table = {"arrival_ps": arrival, "start_ps": arrival + 100_000, "service_ps": np.full(n, 20_000_000, np.int64),
             "queue_wait_ps": np.zeros(n, np.int64), "reaction_ps": np.full(n, 21_000_000, np.int64)}
    free = stream_summary(table, 1_000_000, workers=64)
    bound = stream_summary(table, 1_000_000, workers=64, slots=16)
    assert free["rho"] == pytest.approx(20 / 64) and free["backlog"]["expected_growth_per_cycle"] == 0.0
    assert "busy_workers" not in free
    assert bound["rho"] == pytest.approx(20 / 16) and bound["busy_workers"] == 16 and bound["workers"] == 64
    assert bound["backlog"]["expected_growth_per_cycle"] == pytest.approx(1 - 16 / 20, abs=1e-6)
    assert busy_workers(4, 16) == 4 and busy_workers(64, 16) == 16 and busy_workers(3, None) == 3


def test_workers_beyond_the_slots_are_warned_naming_file_key_and_both_numbers(tmp_path):
    text = (ROOT / "scenarios/decode_stream_window.yaml").read_text()
    text = text.replace("slots: 64", "slots: 2").replace("workers: 2, order: in_order", "workers: 8, order: in_order")
    text = re.sub(r"shots: \d+", "shots: 60", text).replace("../calibrations", str(ROOT / "calibrations"))
    sc = tmp_path / "bound.yaml"
    sc.write_text(text)
    rc, out, err = run_cli(["decode", str(sc), "--out", str(tmp_path / "out"), "--quiet", "--no-plot"], columns=300)
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("warning:"))
    assert str(sc) in line and "decode.placements[1].workers: 8 > slots: 2" in line and "6 workers never work" in line
    import json
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    stream = doc["placements"][1]["stream"]
    assert stream["workers"] == 8 and stream["busy_workers"] == 2
    s = stream["service_ns_mean"] * 1000
    assert stream["rho"] == pytest.approx(s * stream["arrivals_per_cycle"] / (2 * 1_000_000), rel=1e-3)  # N = 2
