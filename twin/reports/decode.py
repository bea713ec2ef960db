"""A decode study's report: the terminal table (:func:`print_decode`) and its files
(:func:`write_decode_outputs`: results.json, stats.csv, queue_depth.csv, requests.parquet or .csv and the two
plots).
The study itself is :mod:`twin.studies.decode`'s.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.studies.decode import DecodeStudy, placement_label


def _label(s: dict) -> str:
    return placement_label(s["device"], s["mode"], s.get("workers", 1), s.get("order", "in_order"),
                           s.get("dispatch"), s.get("cost", {}).get("call", "native"))


def print_decode(study: DecodeStudy, console) -> None:
    """The terminal table of a decode study: per placement a row of reaction-time percentiles and,
    under it, the decoder's own time per request (``decoder only``)."""
    from twin.output.table import Grid, Num
    doc = study.document
    w = doc["workload"]
    what = (f"{w['circuit']}" if w.get("circuit") else
            f"{w['code']} d={w['distance']} rounds={w['rounds']} p={w['p']:g}")
    tb = Grid(f"{doc['scenario']}: {what}, {w['shots']} shots, {w['requests']} requests, "
              f"{doc['decoder']['kind']} decoder",
              ["device", "mode", "differ/mism.", "p50 µs", "p99 µs", "p99.9 µs", "misses", "backlog", "growth",
               "ρ-growth"], keys=2)

    def us(d: dict) -> list:
        return [Num(d[k] / 1000) for k in ("p50_ns", "p99_ns", "p999_ns")]
    for s in doc["placements"]:
        b = s["stream"]["backlog"]
        exp = b["expected_growth_per_cycle"]
        tb.add_row(s["device"], s["mode"] + (f" {s['model']}" if "model" in s else "")
                   + (f" ×{s['workers']} {s['order']}" if "workers" in s else "")
                   + (f" {s['dispatch']}" if "dispatch" in s else "")
                   + (" via Python" if s.get("cost", {}).get("call") == "python" else ""),
                   f"{s['requests'] - s['identical_corrections']}/{s['card_mismatches']}", *us(s["reaction"]),
                   Num(s["deadline_misses"], ",") if "deadline_misses" in s else None, Num(s["backlog_max"], ","),
                   Num(b["growth_per_cycle"]), None if exp is None else Num(exp))
        if "decoder_only" in s:  # the decoder's own time per request, beside the reaction time
            tb.add_row("", " decoder only", "", *us(s["decoder_only"]), "", "", "", "")
        for p in s.get("per_device", []):  # each device's part of a shared stream
            pb = p["backlog"]
            pe = pb["expected_growth_per_cycle"]
            tb.add_row(f" {p['device']}", f" {p['requests']} requests", "", *us(p["reaction"]), "",
                       Num(pb["max"], ","), Num(pb["growth_per_cycle"]), None if pe is None else Num(pe))
    tb.print(console)
    console.print("p50/p99/p99.9: reaction time, a request's last syndrome round measured -> its correction at the "
                  "control system (decoder only: the decoder's own time); differ/mism.: corrections that differ "
                  "from the direct decode / replies the card found wrong; backlog: "
                  "requests sent and not yet started by a decoder (max); growth: backlog per QEC cycle, ρ-growth "
                  "the expected max(0, 1 - 1/ρ) x arrivals per cycle with ρ = S / (K N T_a), K devices of N decoders")
    for s in doc["placements"]:
        if "live" in s:
            print_live(_label(s), s["live"], doc.get("deadline_ns"), console)
    from twin.output.program import print_program_table
    print_program_table([(_label(s), s) for s in doc["placements"]], console, "placement")
    from twin.output.table import interval
    for s in doc["placements"]:
        late = ""
        if "timing_aware" in s["ler"]:  # a correction back after the deadline counts as a failure
            late = f"; timing-aware (late = failure) {interval(s['ler']['timing_aware'], *s['ci']['timing_aware'])}"
        console.print(f"{_label(s)}: LER in the loop {interval(s['ler']['loop'], *s['ci']['loop'])}, decoded directly "
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
                      f"LER {interval(pm['ler'], *pm['ci'])} "
                      f"({doc['interval']['method']}, {doc['interval']['confidence']:.0%})")
    else:
        console.print(f"stim+PyMatching direct: n/a, {pm['how']}")
    ww = doc.get("windowed_vs_whole_shot")
    if ww:
        win = doc["workload"]["window"]
        what = "sliding windows" if win.get("kind", "streaming") == "streaming" else "parallel windows (A/B)"
        console.print(f"{what} (W={win['rounds']}, C={win['commit']}, B={win.get('buffer')}): "
                      f"LER {ww['windowed']['ler']:.2e} "
                      f"against whole-shot matching {ww['whole_shot']['ler']:.2e}: "
                      + ("within" if ww["windowed_within_whole_shot_ci"] else "OUTSIDE") + " its interval")
    if doc.get("feedback"):
        print_feedback(doc, console)
    for s in doc["placements"]:
        tp = {k: (v or float("nan")) for k, v in s["throughput"].items()}
        console.print(f"{_label(s)}: {compute_line(s)}; decoding in the loop "
                      f"{tp['loop_decode_requests_per_s']:,.0f} requests/s, direct "
                      f"{tp['direct_decode_requests_per_s']:,.0f} requests/s (this machine); engine {s['engine']}, "
                      f"{s['replies_checked']:,} replies checked byte for byte by the card")


def print_live(label: str, lv: dict, deadline_ns: float | None, console) -> None:
    """A paced live placement beside its simulated prediction: per side the requests, reaction
    time, deadline misses, backlog, its growth, rho and throughput per cycle; then the pace (late
    rounds counted and the first named, lateness, live rounds per wall-second) and the failure, if any."""
    from twin.output.table import Grid, Num
    tb = Grid(f"{label} live ({lv['endpoint']}) against the same placement simulated",
              ["", "requests", "p50 µs", "p99 µs", "misses", "backlog", "growth", "ρ", "thr./cycle"], keys=1)
    for name in ("measured", "simulated"):
        x = lv[name]
        r = x["reaction"]
        tb.add_row(name, Num(x["requests"], ","), Num(r["p50_ns"] / 1000), Num(r["p99_ns"] / 1000),
                   None if x["deadline_misses"] is None else Num(x["deadline_misses"], ","),
                   Num(x["backlog"]["max"], ","), Num(x["backlog"]["growth_per_cycle"]),
                   None if x["rho"] is None else Num(x["rho"]),
                   None if x["throughput_per_cycle"] is None else Num(x["throughput_per_cycle"]))
    tb.print(console)
    p = lv["pace"]
    late = p["lateness"] or {}
    rate = "n/a" if p["rounds_per_s"] is None else f"{p['rounds_per_s']:,.0f}"
    console.print(f"{label}: paced, {rate} live requests per wall-second; lateness p50 {late.get('p50_ns', 0):,.0f} "
                  f"ns, p99 {late.get('p99_ns', 0):,.0f} ns; misses over "
                  f"{'no deadline' if deadline_ns is None else f'{deadline_ns:g} ns'}", soft_wrap=True)
    if p["late_rounds"]:
        first = ", ".join(str(i) for i in p["late_first"])
        console.print(f"[yellow]warning: {label}: {p['late_rounds']:,} requests sent more than "
                      f"{p['late_threshold_ns']:,} ns after their instant (the twin could not send them in time: "
                      f"the one in flight had not come back, or the machine preempted it); first: {first}[/yellow]",
                      soft_wrap=True)
    e = lv.get("error")
    if e:
        console.print(f"[red]{label}: live {e['kind']} at request {e['round']:,}: {e['detail']}[/red]", soft_wrap=True)


def compute_line(s: dict) -> str:
    """The decoder time a placement ``s`` (results.json's) used, in words: the cost model's line, a CPU's
    per-call measurement (:func:`measured_line`) or a GPU's persistent-kernel measurement."""
    c = s["cost"]
    if "source" in c:  # measured per call: which distribution, from where
        return measured_line(c, s["compute_ns_mean"])
    if c.get("gpu_kernel"):  # a GPU: the persistent-kernel measurement (twin.qec.gpu_cost)
        return f"compute {c['gpu_kernel']['line']} (mean here {s['compute_ns_mean']:g} ns)"
    if "base_ns" not in c:
        return f"compute: {c['how']}"
    drawn = " + a residual drawn from the fit's quantiles" if c["how"] == "fitted" else ""
    return (f"compute {c['how']} {c['base_ns']:g} ns + {c['per_event_ns']:g} ns per detection event{drawn} "
            f"(mean {s['compute_ns_mean']:g} ns)")


def measured_line(c: dict, mean_ns: float) -> str:
    """The cost a ``measured`` placement used, in words: the call, the file, machine, date, how carried."""
    src, m = c["source"], c["measured_ns"]
    return (f"compute measured per call ({c['call']}): {src['file']}, {src['machine']} ({src['host_class']}), "
            f"{src['measured_at']}, {src['calls']:,} calls (p50 {m['p50'] / 1000:.3f} µs, p99 {m['p99'] / 1000:.3f} µs "
            f"there){'' if c['exact_workload'] else ', another workload (no file for this one)'}; "
            f"x{c['factor']:.3f} ({c['carried']}) (mean here {mean_ns:g} ns)")


def print_feedback(doc: dict, console) -> None:
    """The LER vs latency table of a feedback study: per placement and injected latency, the
    reaction time, the program's stall per cycle and per shot, the effective cycle and the LER
    with the stalls as idle noise; then what each placement buys against the first."""
    from twin.output.table import Grid, Num, interval_digits
    fb = doc["feedback"]
    idle = fb["idle"]
    model = (f"T1 {idle['t1_us']:g} µs, T2 {idle['t2_us']:g} µs" if idle["model"] == "t1t2"
             else f"depolarising {idle['rate_per_us']:g} per µs")
    tb = Grid(f"feedback: {fb['gates']} gates wait for the loop, slack {fb['slack_ns']:g} ns, idle noise "
              f"{model} on qubits {fb['qubits']}",
              ["placement", "+µs", "reaction", "stall/cycle", "stall/shot", "cycle", "LER idle", "low", "high"],
              keys=2)
    for s in doc["placements"]:
        for p in s.get("feedback", []):
            e = f".{interval_digits(p['ler'], *p['ci'])}e"
            tb.add_row(_label(s), Num(p["inject_ns"] / 1000, "g"), Num(p["reaction"]["p50_ns"] / 1000),
                       Num(p["stall_per_cycle_ns"] / 1000), Num(p["stall_per_shot"]["p50_ns"] / 1000),
                       Num(p["effective_cycle_ns"] / 1000), Num(p["ler"], e), Num(p["ci"][0], e), Num(p["ci"][1], e))
    tb.print(console)
    console.print("µs: +µs the latency injected into the decoder's time; reaction (p50) a request's last syndrome "
                  "measured -> its correction back; stall/cycle the program's mean idle per QEC cycle, stall/shot "
                  "(p50) per shot (one logical operation); cycle the effective QEC cycle; LER idle: the shots "
                  f"sampled again with their stalls as idle noise, decoded by the same decoder, low-high its "
                  f"interval ({doc['interval']['method']}, {doc['interval']['confidence']:.0%})")
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
    from twin.reports.decode_figures import latency_figure
    paths.append(folder.savefig(DECODE_FILES[4], latency_figure(study, _label)))  # its own tight layout
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
