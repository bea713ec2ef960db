"""``twin calibrate decoder SCENARIO.yaml``: measure a decode scenario's decoder per call on this host.

By default (:mod:`twin.qec.percall`): one request per call, warm, timer cost removed, through
Python and natively (the binding's per-call overhead measured apart), the tail kept; one file per
workload (the scenario's, or each ``--distance``), ``calibrations/measured/decoders/<decoder>_<code>_
d<d>_r<r>_p<p>_<noise>.yaml``, which ``decode.cost.how: measured`` (the default) reads; it prints
native and through-Python percentiles apart, and beside a file already there, the change against it.
With ``--fit`` (:mod:`twin.qec.cost_fit`): the across-distance fit of overhead + per-event slope +
residual quantiles that ``decode.cost: {how: fitted, file: ...}`` reads."""
from __future__ import annotations

import argparse
import shlex
from datetime import datetime, timezone
from pathlib import Path

from twin.commands.common import UsageError, out_error

DEFAULT_FOLDER = Path("calibrations") / "measured" / "decoders"
DECODER_ONLY = ("distance", "calls", "warmup", "outlier_mads", "seed", "fit")  # options of `calibrate decoder` only
NOT_FOR_DECODER = ("from_live", "node", "rounds", "maxiter", "popsize")  # options of the other calibrations


def add_options(c) -> None:
    """The ``calibrate decoder`` options, on the ``calibrate`` parser."""
    g = c.add_argument_group("twin calibrate decoder SCENARIO.yaml (time the scenario's decoder per call, "
                             "fit its cost)")
    g.add_argument("--distance", type=int, action="append", metavar="D",
                   help="time these distances of the scenario's code instead of its own (repeat for several; "
                        "rounds follow the distance when the scenario's rounds equal its distance)")
    g.add_argument("--calls", type=_calls, help="timed calls per distance (default 20000)")
    g.add_argument("--warmup", type=int, help="untimed calls per distance first (default 1000)")
    g.add_argument("--outlier-mads", type=float, dest="outlier_mads",
                   help="a call whose residual is above median + K MAD is an outlier (default 10)")
    g.add_argument("--seed", type=int, help="workload and call order (default: the scenario's seed)")
    g.add_argument("--fit", action="store_true", default=None,
                   help="fit overhead + per-event slope + residual quantiles across the distances (decode.cost "
                        "how: fitted) instead of the per-call measurement (how: measured)")


def _calls(text: str) -> int:
    from twin.commands.common import _count
    n = _count(text)
    if n < 100:
        raise argparse.ArgumentTypeError(f"at least 100 calls for a fit: {text!r}")
    return n


def refuse_decoder_options(args: argparse.Namespace) -> None:
    """A ``calibrate`` that is not ``calibrate decoder`` given a decoder option: UsageError."""
    for k in DECODER_ONLY:
        if getattr(args, k, None) is not None:
            raise UsageError(f"--{k.replace('_', '-')}: only for `twin calibrate decoder SCENARIO.yaml`")


def cmd_calibrate_decoder(args: argparse.Namespace, console, scenarios: list[str]) -> int:
    """Measure per call (default) or fit across distances (``--fit``). Returns 0; raises
    UsageError / ConfigError for bad input."""
    for k in NOT_FOR_DECODER:
        if getattr(args, k, None) is not None:
            raise UsageError(f"--{k.replace('_', '-')}: not for `twin calibrate decoder` (it times the decoder)")
    if len(scenarios) != 1:
        raise UsageError(f"calibrate decoder: give one decode scenario, got {len(scenarios)}")
    if args.fit:
        return _fit_distances(args, console, scenarios)
    if args.outlier_mads is not None:
        raise UsageError("--outlier-mads: only with --fit (the per-call measurement keeps every call, the tail too)")
    from twin.commands.calibrate_percall import per_call
    return per_call(args, console, Path(scenarios[0]))


def _fit_distances(args: argparse.Namespace, console, scenarios: list[str]) -> int:
    """``--fit``: time, fit, write, print."""
    import numpy as np

    from twin.output.progress import progress_bar
    from twin.qec.cost_fit import fit_calls, fit_document, machine, time_calls
    from twin.qec.load import build_decoder, load_decode
    from twin.qec.workload import sample
    from twin.stats import percentile

    path = Path(scenarios[0])
    ld = load_decode(path, find_percall=False)  # this fit stands apart from the per-call files
    d = ld.sc.decode
    if d.circuit is not None:
        raise UsageError(f"calibrate decoder {path}: fits a named code's decoder across distances (the scenario's "
                         "or --distance values); this scenario's decode.circuit is a file with one size (time it "
                         "with decode.cost how: host_timed)")
    calls = args.calls or 20_000
    warmup = 1000 if args.warmup is None else args.warmup
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: must be >= 0")
    k_mad = 10.0 if args.outlier_mads is None else args.outlier_mads
    if not k_mad > 0:
        raise UsageError(f"--outlier-mads {k_mad}: must be > 0")
    seed = ld.sc.seed if args.seed is None else args.seed
    if seed < 0:
        raise UsageError(f"--seed {seed}: must be >= 0")
    distances = args.distance or [d.distance]
    if any(x < 2 or x > 25 for x in distances):
        raise UsageError(f"--distance {distances}: each from 2 to 25")
    shots = max(calls, 20_000)
    out = _out(args, d, distances)
    jobs, workloads = [], []
    for i, dist in enumerate(distances):
        rounds = dist if d.rounds == d.distance else d.rounds
        try:
            w = sample(d.code, dist, rounds, d.p, shots, seed=seed + i, noise=d.noise_model, frame_bytes=d.frame_bytes,
                       per=d.per)
        except ValueError as e:
            raise UsageError(f"--distance {dist}: {str(e).splitlines()[0]}") from None
        frames = w.cumulative_frames() if w.per == "round" else w.frames()
        events = w.cumulative_detectors().sum(axis=1).astype(np.int64)
        label = f"{d.code} d={dist} r={rounds} p={d.p:g} {d.noise_model}" + (" per round" if d.per == "round" else "")
        jobs.append((label, build_decoder(ld, w), [f.tobytes() for f in frames], events))
        workloads.append({"label": label, "code": d.code, "distance": dist, "rounds": rounds, "p": d.p,
                          "noise": d.noise_model})
    console.print(f"timing {jobs[0][1].name if len(jobs) == 1 else d.decoder} per call: {calls:,} calls per "
                  f"workload after {warmup:,} warm-up calls, interleaved, spread over the numbers of detection "
                  "events")
    with progress_bar(console) as bar:
        task = bar.add_task("decoder calls", total=calls * len(jobs) + warmup * len(jobs))
        times, timer = time_calls(jobs, calls, warmup=warmup, seed=seed, stratify=True,
                                  progress=lambda done, total: bar.update(task, completed=done))
    ev = np.concatenate([t.events for t in times])
    ns = np.concatenate([t.ns for t in times])
    fit = fit_calls(ev, ns, k_mad=k_mad)
    fit.decoder = d.decoder
    thr = fit.outliers["threshold_ns"]
    masks = np.split(fit.outlier_mask, np.cumsum([len(t.ns) for t in times])[:-1])
    from twin.output.table import Grid, Num
    tb = Grid(f"{d.decoder} decoder per call on this host: measured vs fitted (outliers left out of both)",
              ["workload", "calls", "events", "outliers", "p50 measured", "p50 fitted", "p99 measured", "p99 fitted"])
    for t, wd, out_t in zip(times, workloads, masks):
        kept = t.ns[~out_t]
        draw = fit.draw_ns(t.events[~out_t], seed)
        wd.update(calls=int(len(t.ns)), outliers=int(out_t.sum()),
                  events={"min": int(t.events.min()), "max": int(t.events.max()),
                          "mean": round(float(t.events.mean()), 3)},
                  measured_ns={k: round(float(percentile(t.ns, q)), 1)
                               for k, q in (("p50", 50), ("p99", 99), ("p99.9", 99.9))})
        tb.add_row(t.label, Num(len(t.ns), ","), f"{t.events.min()}-{t.events.max()}", Num(int(out_t.sum()), "d"),
                   *(Num(percentile(x, q) / 1000, ".3f", " µs") for q in (50, 99) for x in (kept, draw)))
    meta = {"description": f"{d.decoder} decoder timed per call on this host by `twin calibrate decoder` "
                           "(twin/qec/cost_fit.py); read by decode.cost: {how: fitted, file: ...}",
            "decoder": d.decoder, "implementation": _implementation(jobs[0][1]),
            "entry_point": "Decoder.decode_payload (one request payload per call)",
            "machine": machine(), "measured_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "twin calibrate decoder " + " ".join(shlex.quote(a) for a in _argv(args, scenarios)),
            "seed": seed, "warmup": warmup, "stratified": True, "timer_overhead_ns": float(timer),
            "workloads": workloads, "min_group": 20}
    _write(out, fit_document(fit, meta))
    tb.print(console)
    console.print(f"fit: {fit.overhead_ns:.0f} ns + {fit.per_event_ns:.0f} ns per detection event; residual p50 "
                  f"{np.interp(0.5, fit.levels, fit.residual_ns):+.0f} ns, p99 "
                  f"{np.interp(0.99, fit.levels, fit.residual_ns):+.0f} ns; {fit.outliers['count']:,} of "
                  f"{fit.n_calls:,} calls ({100 * fit.outliers['fraction']:.2f} %) were outliers (residual above "
                  f"{thr:.0f} ns = median + {k_mad:g} MAD), left out; timer's own {timer} ns subtracted")
    console.print(f"wrote {out}")
    return 0


def _implementation(decoder) -> str:
    from importlib.metadata import version

    from twin.qec.decoders import LookupDecoder, MatchingDecoder
    if isinstance(decoder, MatchingDecoder):
        return f"PyMatching {version('pymatching')} Matching.decode_batch on one bit-packed shot"
    if isinstance(decoder, LookupDecoder):
        return "twin lookup table (twin.qec.lookup.decode_payload)"
    return f"user function {decoder.name}"


def _argv(args: argparse.Namespace, scenarios: list[str]) -> list[str]:
    out = list(scenarios)
    for x in args.distance or []:
        out += ["--distance", str(x)]
    for k in ("calls", "warmup", "outlier_mads", "seed", "out"):
        v = getattr(args, k, None)
        if v is not None:
            out += [f"--{k.replace('_', '-')}", str(v)]
    return out + (["--fit"] if getattr(args, "fit", None) else [])


def _out(args: argparse.Namespace, d, distances: list[int]) -> Path:
    import re
    decoder = re.sub(r"[^A-Za-z0-9_.-]", "_", d.decoder).lstrip(".")  # the scenario's text: a name, never a path
    name = f"{decoder}_{d.code}_" + "_".join(f"d{x}" for x in distances) + f"_p{d.p:g}.yaml"
    out = Path(args.out) if args.out else DEFAULT_FOLDER / name
    from twin.output.files import check_file
    check_file(out, args.overwrite, "--out", (HEAD_MARK,))  # before the timing, not after it
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # fail now, not after the timing
    except OSError as e:
        raise out_error("--out", out, e) from None
    return out


HEAD_MARK = "Decoder cost measured on this host by `twin calibrate decoder`"  # a file it may refit in place


def _write(out: Path, doc: dict) -> None:
    """Write the calibration whole (staged, fsynced, renamed into place; OutputError names the file)."""
    import yaml

    from twin.output.files import write_file
    head = (f"# {HEAD_MARK} (see twin/qec/cost_fit.py): one\n"
            "# request per call through the decoder's per-request entry point. Machine, versions and date below.\n")
    write_file(out, head + yaml.safe_dump(doc, sort_keys=False, width=120))
