"""A decode study's report: the terminal table (:func:`print_decode`) and its files
(:func:`write_decode_outputs`: results.json, stats.csv, queue_depth.csv, requests.parquet or .csv and the two
plots).
The study itself is :mod:`twin.studies.decode`'s.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.stats import percentile, percentile_rows
from twin.studies.decode import DecodeStudy, placement_label


def _label(s: dict) -> str:
    return placement_label(s["device"], s["mode"], s.get("workers", 1), s.get("order", "in_order"),
                           s.get("dispatch"))


def print_decode(study: DecodeStudy, console) -> None:
    """The terminal table of a decode study: per placement a row of reaction-time percentiles and,
    under it, the decoder's own time per request (``decoder only``)."""
    from rich import box
    from rich.table import Table
    doc = study.document
    w = doc["workload"]
    what = (f"{w['circuit']}" if w.get("circuit") else
            f"{w['code']} d={w['distance']} rounds={w['rounds']} p={w['p']:g}")
    tb = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
               title=f"{doc['scenario']}: {what}, "
                     f"{w['shots']} shots, {w['requests']} requests, {doc['decoder']['kind']} decoder")
    for col in ("device", "mode", "differ/mism.", "p50 µs", "p99 µs", "p99.9 µs", "misses", "backlog", "growth",
                "ρ-growth"):
        tb.add_column(col, justify="left" if col in ("device", "mode") else "right", no_wrap=True)
    for s in doc["placements"]:
        b = s["stream"]["backlog"]
        exp = b["expected_growth_per_cycle"]
        tb.add_row(s["device"], s["mode"] + (f" ×{s['workers']} {s['order']}" if "workers" in s else "")
                   + (f" {s['dispatch']}" if "dispatch" in s else ""),
                   f"{s['requests'] - s['identical_corrections']}/{s['card_mismatches']}",
                   *(f"{s['reaction'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")),
                   str(s.get("deadline_misses", "-")), str(s["backlog_max"]),
                   f"{b['growth_per_cycle']:.3f}", "-" if exp is None else f"{exp:.3f}")
        if "decoder_only" in s:  # the decoder's own time per request, beside the reaction time
            tb.add_row("", " decoder only", "",
                       *(f"{s['decoder_only'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")), "", "", "", "")
        for p in s.get("per_device", []):  # each device's part of a shared stream
            pb = p["backlog"]
            pe = pb["expected_growth_per_cycle"]
            tb.add_row(f" {p['device']}", f" {p['requests']} requests", "",
                       *(f"{p['reaction'][k] / 1000:.3f}" for k in ("p50_ns", "p99_ns", "p999_ns")), "",
                       str(pb["max"]), f"{pb['growth_per_cycle']:.3f}", "-" if pe is None else f"{pe:.3f}")
    console.print(tb)
    console.print("p50/p99/p99.9: reaction time, a request's last syndrome round measured -> its correction at the "
                  "control system (decoder only: the decoder's own time); differ/mism.: corrections that differ "
                  "from the direct decode / replies the card found wrong; backlog: "
                  "requests sent and not yet started by a decoder (max); growth: backlog per QEC cycle, ρ-growth "
                  "the expected max(0, 1 - 1/ρ) x arrivals per cycle with ρ = S / (K N T_a), K devices of N decoders")
    from twin.output.program import print_program_table
    print_program_table([(_label(s), s) for s in doc["placements"]], console, "placement")
    for s in doc["placements"]:
        lo, hi = s["ci"]["loop"]
        late = ""
        if "timing_aware" in s["ler"]:  # a correction back after the deadline counts as a failure
            tlo, thi = s["ci"]["timing_aware"]
            late = f"; timing-aware (late = failure) {s['ler']['timing_aware']:.2e} [{tlo:.1e}, {thi:.1e}]"
        console.print(f"{_label(s)}: LER in the loop {s['ler']['loop']:.2e} [{lo:.1e}, {hi:.1e}], decoded directly "
                      f"{s['ler']['direct']:.2e}{late}")
    from twin.output.budget import print_budget_table
    print_budget_table([(_label(s), s) for s in doc["placements"]], console, "placement")
    if any(s.get("budget") for s in doc["placements"]):
        console.print("the stages run from the request entering the card (the controller) to the card having the "
                      "correction; shares are of that round trip; the reaction time adds the syndrome's way to the "
                      "card (none when the controller issues the request itself)")
    pm = doc["stim_pymatching"]
    if pm["logical_errors"] is not None:
        console.print(f"stim+PyMatching direct on the same shots: {pm['logical_errors']} logical errors, "
                      f"LER {pm['ler']:.2e} [{pm['ci'][0]:.1e}, {pm['ci'][1]:.1e}] "
                      f"({doc['interval']['method']}, {doc['interval']['confidence']:.0%})")
    else:
        console.print(f"stim+PyMatching direct: n/a, {pm['how']}")
    ww = doc.get("windowed_vs_whole_shot")
    if ww:
        win = doc["workload"]["window"]
        console.print(f"sliding windows (W={win['rounds']}, C={win['commit']}): LER {ww['windowed']['ler']:.2e} "
                      f"against whole-shot matching {ww['whole_shot']['ler']:.2e}: "
                      + ("within" if ww["windowed_within_whole_shot_ci"] else "OUTSIDE") + " its interval")
    if doc.get("feedback"):
        print_feedback(doc, console)
    for s in doc["placements"]:
        tp = {k: (v or float("nan")) for k, v in s["throughput"].items()}
        c = s["cost"]
        drawn = " + a residual drawn from the fit's quantiles" if c["how"] == "fitted" else ""
        compute = (f"compute {c['how']} {c['base_ns']:g} ns + {c['per_event_ns']:g} ns per detection event{drawn} "
                   f"(mean {s['compute_ns_mean']:g} ns)") if "base_ns" in c else f"compute: {c['how']}"
        console.print(f"{_label(s)}: {compute}; decoding in the loop "
                      f"{tp['loop_decode_requests_per_s']:,.0f} requests/s, direct "
                      f"{tp['direct_decode_requests_per_s']:,.0f} requests/s (this machine); engine {s['engine']}, "
                      f"{s['replies_checked']:,} replies checked byte for byte by the card")


def print_feedback(doc: dict, console) -> None:
    """The LER vs latency table of a feedback study: per placement and injected latency, the
    reaction time, the program's stall per cycle and per shot, the effective cycle and the LER
    with the stalls as idle noise; then what each placement buys against the first."""
    from rich import box
    from rich.table import Table
    fb = doc["feedback"]
    idle = fb["idle"]
    model = (f"T1 {idle['t1_us']:g} µs, T2 {idle['t2_us']:g} µs" if idle["model"] == "t1t2"
             else f"depolarising {idle['rate_per_us']:g} per µs")
    tb = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
               title=f"feedback: {fb['gates']} gates wait for the loop, slack {fb['slack_ns']:g} ns, idle noise "
                     f"{model} on qubits {fb['qubits']}")
    for col in ("placement", "+µs", "reaction", "stall/cycle", "stall/shot", "cycle", "LER idle", "interval"):
        tb.add_column(col, justify="left" if col == "placement" else "right", no_wrap=True)
    for s in doc["placements"]:
        for p in s.get("feedback", []):
            tb.add_row(_label(s), f"{p['inject_ns'] / 1000:g}", f"{p['reaction']['p50_ns'] / 1000:.3f}",
                       f"{p['stall_per_cycle_ns'] / 1000:.3f}", f"{p['stall_per_shot']['p50_ns'] / 1000:.3f}",
                       f"{p['effective_cycle_ns'] / 1000:.3f}", f"{p['ler']:.2e}",
                       f"[{p['ci'][0]:.1e}, {p['ci'][1]:.1e}]")
    console.print(tb)
    console.print("µs: +µs the latency injected into the decoder's time; reaction (p50) a request's last syndrome "
                  "measured -> its correction back; stall/cycle the program's mean idle per QEC cycle, stall/shot "
                  "(p50) per shot (one logical operation); cycle the effective QEC cycle; LER idle: the shots "
                  "sampled again with their stalls as idle noise, decoded by the same decoder")
    base = [s for s in doc["placements"] if s.get("feedback")]
    for s in base[1:]:
        a, b = base[0]["feedback"][0], s["feedback"][0]
        console.print(f"moving the decoder from {_label(base[0])} to {_label(s)}: reaction p50 "
                      f"{a['reaction']['p50_ns'] / 1000:.2f} -> {b['reaction']['p50_ns'] / 1000:.2f} µs, LER with idle "
                      f"{a['ler']:.2e} -> {b['ler']:.2e}")


def _save(folder, name: str, fig) -> Path:
    """Stage ``fig`` as ``name`` in ``folder`` (tight layout; :func:`twin.output.files.savefig_writer`)."""
    fig.tight_layout()
    return folder.savefig(name, fig)


def write_ler_latency(study: DecodeStudy, folder, plots: bool = True) -> list[Path]:
    """A feedback study's ler_vs_latency.csv (placement, injected latency, reaction p50, stall per
    cycle, effective cycle, errors, shots, LER and interval) and, with ``plots``, ler_vs_latency.png
    (LER with idle noise against the reaction time p50, µs, one series per placement, error bars
    the interval)."""
    doc = study.document
    rows = [(s, p) for s in doc["placements"] for p in s.get("feedback", [])]

    def csv(f) -> None:
        f.write("placement,inject_ns,reaction_p50_ns,stall_per_cycle_ns,effective_cycle_ns,logical_errors,shots,"
                "ler,ci_low,ci_high\n")
        f.writelines(f"{_label(s)},{p['inject_ns']:g},{p['reaction']['p50_ns']:g},{p['stall_per_cycle_ns']:g},"
                     f"{p['effective_cycle_ns']:g},{p['logical_errors']},{p['shots']},{p['ler']!r},"
                     f"{p['ci'][0]!r},{p['ci'][1]!r}\n" for s, p in rows)
    paths = [folder.write(FEEDBACK_FILES[0], csv)]
    if not plots:
        return paths
    from twin.output.figure import new_figure
    fig = new_figure(7, 4)
    ax = fig.subplots()
    for s in doc["placements"]:
        pts = s.get("feedback", [])
        if not pts:
            continue
        x = np.array([p["reaction"]["p50_ns"] / 1000 for p in pts])
        y = np.array([p["ler"] for p in pts])
        lo = np.array([p["ci"][0] for p in pts])
        hi = np.array([p["ci"][1] for p in pts])
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o-", ms=4, capsize=3, label=_label(s))
    ax.set_xlabel("loop reaction time p50 (µs)")
    ax.set_ylabel("logical error rate per shot")
    ax.set_title(f"{doc['scenario']}: LER vs latency (idle noise from the program's stalls; bars: "
                 f"{doc['interval']['method']} {doc['interval']['confidence']:.0%})", fontsize=9)
    ax.legend(fontsize=8)
    paths.append(_save(folder, FEEDBACK_FILES[1], fig))
    return paths


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



FEEDBACK_FILES = ("ler_vs_latency.csv", "ler_vs_latency.png")  # written with decode.feedback
DECODE_FILES = ("results.json", "stats.csv", "queue_depth.csv", "requests.parquet", "latency_vs_round.png",
                "backlog_vs_time.png", *FEEDBACK_FILES)
"""The files of a decode study with the per-request file in its default format (Parquet)."""


def decode_files(fmt: str = "parquet", plots: bool = True) -> tuple[str, ...]:
    """:data:`DECODE_FILES` with the per-request file ``requests.<fmt>`` (``parquet`` or ``csv``);
    without the figures (``.png``) when ``plots`` is False."""
    from twin.output.rows import file_name
    names = (*DECODE_FILES[:3], file_name("requests", fmt), *DECODE_FILES[4:])
    return names if plots else tuple(n for n in names if not n.endswith(".png"))


def write_requests(study: DecodeStudy, folder, fmt: str = "parquet") -> Path:
    """Stage ``requests.parquet`` (or ``requests.csv``, ``fmt``) in ``folder``: one row per request of
    every placement, in stream order: ``placement``, ``device`` (the device that decoded it), then
    :data:`twin.qec.streaming.CSV_COLUMNS` (integers; ps for the ``_ps`` columns), through
    :func:`twin.output.rows.write_rows`. Returns its path."""
    from twin.output.rows import Block, write_rows
    from twin.qec.streaming import CSV_COLUMNS
    blocks = [Block((name, t["device"]), tuple(t[c] for c in CSV_COLUMNS)) for name, t in study.tables or ()]
    return write_rows(folder, "requests", fmt, ("placement", "device"), CSV_COLUMNS, blocks)


def write_decode_outputs(study: DecodeStudy, folder, fmt: str = "parquet", plots: bool = True) -> list[Path]:
    """Stage in ``folder`` (a :class:`twin.output.files.RunFolder`) results.json (deterministic for
    a seed: no wall-clock numbers; a NaN or infinity refused naming the field), stats.csv (sinter's
    CSV, :mod:`twin.qec.sinter_stats`; also deterministic), queue_depth.csv (requests in the card at
    200 instants per placement: placement, t_ps, depth), requests.parquet or requests.csv (``fmt``;
    every request: :func:`write_requests`; when the runs keep their tables),
    latency_vs_round.png (round trip and reaction time per request), backlog_vs_time.png (requests
    waiting anywhere for a decoder) (:data:`DECODE_FILES`); ``plots`` False: no figures (the
    feedback study's ler_vs_latency.csv still). Returns their paths."""
    doc = study.document
    clean = dict(doc)
    clean["placements"] = [{k: v for k, v in s.items() if k != "throughput"} for s in doc["placements"]]
    paths = [folder.write_json(DECODE_FILES[0], clean, default=float)]
    from twin.qec.sinter_stats import stats_csv
    paths.append(folder.write(DECODE_FILES[1], stats_csv(study)))  # sinter's CSV: `sinter plot --in stats.csv`

    def queue_csv(f) -> None:
        f.write("placement,t_ps,depth\n")
        for s, (tq, depth) in zip(doc["placements"], study.queues):
            f.writelines(f"{_label(s)},{int(t)},{int(d)}\n" for t, d in zip(tq, depth))
    paths.append(folder.write(DECODE_FILES[2], queue_csv))
    if study.tables is not None:
        paths.append(write_requests(study, folder, fmt))
    if plots:
        paths += _decode_figures(study, folder)
    if doc.get("feedback"):
        paths += write_ler_latency(study, folder, plots)
    return paths


def _decode_figures(study: DecodeStudy, folder) -> list[Path]:
    """Stage latency_vs_round.png and backlog_vs_time.png (:func:`write_decode_outputs`)."""
    from twin.output.figure import new_figure
    doc = study.document
    paths = []
    fig = new_figure(8, 4)
    ax = fig.subplots()
    block = 1
    series = [(s, what, ps) for s, r in zip(doc["placements"], study.runs)
              for what, ps in (("round trip", r.result.rtt_ps), ("reaction", r.result.t_back - r.result.t_send))
              if len(ps)]
    lo, hi, outside = latency_clip([ps for _, _, ps in series])
    for s, what, ps in series:
        x, mid, top, block = latency_blocks(ps)
        if block == 1:  # every request a point
            ax.plot(x, mid / 1e6, ".", ms=1, label=f"{_label(s)} {what}")
        else:  # a block's median as a line, its slowest request as a point
            line, = ax.plot(x, mid / 1e6, lw=0.8, label=f"{_label(s)} {what}")
            ax.plot(x, top / 1e6, ".", ms=1.5, color=line.get_color())
    if doc["deadline_ns"]:
        ax.axhline(doc["deadline_ns"] / 1000, color="r", lw=1, label="deadline")
    if series:  # the tails clipped: p0.1 to p99.9 of every series on the axis, the requests beyond counted
        pad = max(0.01, (hi - lo) / 1e6 * 0.05)
        ax.set_ylim(lo / 1e6 - pad, hi / 1e6 + pad)
    ax.set_xlabel("request")
    ax.set_ylabel("round trip, reaction time (µs)")
    from twin.output.histogram import clip_text
    ax.set_title(f"{doc['scenario']}: latency vs round" + (
        f" (per block of {block:,} requests: median line, slowest as a dot)" if block > 1 else "")
        + f"\ny axis: {clip_text()} of each series" + (f"; {outside:,} request values off the axis" if outside else ""),
        fontsize=9)
    ax.legend(markerscale=8, fontsize=8)
    paths.append(_save(folder, DECODE_FILES[4], fig))
    fig = new_figure(8, 4)
    ax = fig.subplots()
    for s, (tq, depth) in zip(doc["placements"], study.backlogs or study.queues):
        ax.step((tq - tq[0]) / 1e6, depth, where="post", label=_label(s))
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("requests waiting for a decoder" if study.backlogs else "requests in the card (queue depth)")
    ax.set_title(f"{doc['scenario']}: backlog vs time")
    ax.legend(fontsize=8)
    paths.append(_save(folder, DECODE_FILES[5], fig))
    return paths
