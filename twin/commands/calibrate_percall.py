"""``twin calibrate decoder SCENARIO.yaml`` (default): the decoder measured per call on this host
(:mod:`twin.qec.percall`), native and through Python apart, one file per workload; against a file
already at the target, the change is printed and the new one written beside it (``-YYYYMMDD-HHMM``)
unless ``--overwrite`` or ``--out``."""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
from datetime import datetime, timezone
from pathlib import Path

from twin.commands.common import UsageError

HEAD_MARK = "Decoder cost per call measured on this host by `twin calibrate decoder`"
CONDITIONS_VM = ("a shared 2-core VM: other processes ran beside it (load average in machine); run under "
                 "`nice -n 0`; the through-Python tail holds the host's preemptions")


def per_call(args: argparse.Namespace, console, path: Path) -> int:
    """Measure, write, print. Returns 0; raises UsageError / ConfigError."""
    from twin.qec.load import load_decode
    ld = load_decode(path, find_percall=False)  # it writes the per-call file, it need not find one
    d = ld.sc.decode
    if d.per == "window":
        raise UsageError(f"calibrate decoder {path}: windows are decoded by the sliding-window decoder as they are "
                         "served; its per-call cost is not measured here (give decode.cost fixed)")
    if args.distance and d.circuit is not None:
        raise UsageError(f"--distance: {path} decodes a circuit file (one size); leave --distance out")
    calls = args.calls or 20_000
    warmup = 1000 if args.warmup is None else args.warmup
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: must be >= 0")
    seed = ld.sc.seed if args.seed is None else args.seed
    if seed < 0:
        raise UsageError(f"--seed {seed}: must be >= 0")
    distances = args.distance or [None]
    if any(x is not None and (x < 2 or x > 25) for x in distances):
        raise UsageError(f"--distance {distances}: each from 2 to 25")
    if args.out and len(distances) > 1:
        raise UsageError("--out: one file for one workload; with several --distance the files are named for them")
    for i, dist in enumerate(distances):
        _one(args, console, ld, dist, calls, warmup, seed + i, path)
    return 0


def _workload(ld, dist: int | None, shots: int, seed: int):
    """The workload to time and its description for the file."""
    import stim  # noqa: F401  (the circuit's type)

    from twin.qec.workload import sample, sample_circuit
    d = ld.sc.decode
    if d.circuit is not None:
        text = str(ld.circuit)
        w = sample_circuit(ld.circuit, shots, seed=seed, frame_bytes=d.frame_bytes, per=d.per)
        return w, {"circuit": d.circuit, "circuit_sha256": hashlib.sha256(text.encode()).hexdigest(), "per": d.per}
    dist = d.distance if dist is None else dist
    rounds = dist if (d.rounds == d.distance and dist != d.distance) else d.rounds
    try:
        w = sample(d.code, dist, rounds, d.p, shots, seed=seed, noise=d.noise_model, frame_bytes=d.frame_bytes,
                   per=d.per)
    except ValueError as e:
        raise UsageError(f"--distance {dist}: {str(e).splitlines()[0]}") from None
    return w, {"code": d.code, "distance": dist, "rounds": rounds, "p": d.p, "noise": d.noise_model, "per": d.per}


def _one(args, console, ld, dist, calls: int, warmup: int, seed: int, path: Path) -> None:
    import numpy as np

    from twin.output.progress import progress_bar
    from twin.qec import percall as P
    from twin.qec.load import build_decoder
    w, wd = _workload(ld, dist, max(calls, 20_000), seed)
    decoder = build_decoder(ld, w)
    frames = w.cumulative_frames() if w.per == "round" else w.frames()
    events = w.cumulative_detectors().sum(axis=1).astype(np.int64)
    name = P.file_name(ld.sc.decode.decoder, wd.get("code"), wd.get("distance"), wd.get("rounds"), wd.get("p"),
                       wd.get("noise"), wd["per"], wd.get("circuit"), wd.get("circuit_sha256"))
    target = Path(args.out) if args.out else P.FOLDER / name
    out = _writable(target, args)
    label = name.removesuffix(".yaml")
    console.print(f"timing {decoder.name} per call on {label}: {calls:,} requests after {warmup:,} warm-up calls, "
                  "each through Python and natively (the syndrome repeated in one batch)")
    from twin.qec.cost_fit import machine
    load0 = os.getloadavg()
    with progress_bar(console) as bar:
        task = bar.add_task("decoder calls", total=calls * P.PASSES)
        s = P.measure(decoder, decoder.syndromes(frames), events, calls, warmup=warmup, seed=seed,
                      progress=lambda done, total: bar.update(task, completed=done))
    m = machine()
    m["load_average_1_5_15_before"] = [round(x, 2) for x in load0]
    doc = _document(args, ld, decoder, wd, w, s, m, seed, warmup, path)
    shipped = _shipped(target)
    _print(console, label, doc, shipped)
    _write(out, doc)
    console.print(f"wrote {out}")


def _document(args, ld, decoder, wd: dict, w, s, m: dict, seed: int, warmup: int, path: Path) -> dict:
    import numpy as np

    from twin.qec import percall as P
    from twin.qec.cost_fit import _line
    ev = s.events
    groups = {}
    for call, x in (("native", s.native_ns), ("python", s.python_ns)):
        a, b, g = _line(ev, np.asarray(x, np.float64), 20)
        groups[call] = {"intercept_ns": round(a, 1), "slope_ns": round(max(b, 0.0), 1), "medians": g}
    wd = dict(wd, detectors=int(w.n_detectors), events={"min": int(ev.min()), "max": int(ev.max()),
                                                        "mean": round(float(ev.mean()), 3)})
    hc = P.measuring_class(m)
    return {"schema": P.SCHEMA,
            "description": f"{ld.sc.decode.decoder} decoder per call on {m['cpu']}: one request per call, warm, "
                           "timer cost removed; native and through Python (twin/qec/percall.py)",
            "decoder": ld.sc.decode.decoder, "implementation": _implementation(decoder), "workload": wd,
            "machine": m, "host_class": hc,
            "conditions": CONDITIONS_VM if hc == P.load_hosts().reference.host_class else "as measured (see machine)",
            "measured_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "twin calibrate decoder " + " ".join(shlex.quote(a) for a in _argv(args, path)),
            "seed": seed, "warmup": warmup, "calls": int(len(ev)), "timer_ns": float(s.timer_ns),
            "native_repeat": s.repeat, "native_check": s.native_check,
            "python_ns": P.quantiles(s.python_ns, seed), "native_ns": P.quantiles(s.native_ns, seed),
            "binding_ns": P.quantiles(s.binding_ns, seed),
            "per_event": {"method": "Theil-Sen (scipy.stats.theilslopes) through the median of each number of "
                                    "detection events seen in >= 20 calls: extrapolates a draw past the sample's "
                                    "event counts", **groups},
            "sample": P.encode_sample(s)}


def _implementation(decoder) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from twin.qec.decoders import LookupDecoder, MatchingDecoder

    def v(pkg):
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "?"
    if isinstance(decoder, MatchingDecoder):
        return f"PyMatching {v('pymatching')} Matching.decode_batch (bit-packed shots)"
    if isinstance(decoder, LookupDecoder):
        return "twin lookup table (numpy index of the packed syndrome, twin/qec/decoders/lookup.py)"
    if decoder.kind == "bposd":
        return f"ldpc {v('ldpc')} BpOsdDecoder through stimbposd {v('stimbposd')} (its sinter decoder, defaults)"
    return f"{decoder.kind} decoder {decoder.name} ({type(decoder).__name__}.decode_shots_bit_packed)"


def _argv(args: argparse.Namespace, path: Path) -> list[str]:
    """The command's arguments as given (for the file)."""
    out = [str(path)]
    for x in args.distance or []:
        out += ["--distance", str(x)]
    for k in ("calls", "warmup", "seed", "out"):
        v = getattr(args, k, None)
        if v is not None:
            out += [f"--{k}", str(v)]
    return out + (["--overwrite"] if args.overwrite else [])


def _writable(target: Path, args) -> Path:
    """Where to write: ``target`` if it is not there, or ``--overwrite`` / ``--out``; else a new
    stamped name beside it (the shipped file stays, the change against it is printed). Checked
    before the timing: raises UsageError for a file it may not replace or a folder it cannot make."""
    from twin.commands.common import out_error, stamped
    from twin.output.files import check_file
    if target.exists() and not args.overwrite and not args.out:
        target = stamped(target)
    check_file(target, args.overwrite, "--out", (HEAD_MARK,))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise out_error("--out", target, e) from None
    return target


def _shipped(target: Path):
    """The per-call file already at ``target`` (a dict of its quantiles), or None."""
    if not target.is_file():
        return None
    from twin.qec.percall import load_percall
    try:
        return load_percall(target).doc
    except Exception:  # not a per-call file: nothing to compare against
        return None


def _print(console, label: str, doc: dict, shipped: dict | None) -> None:
    from twin.output.table import Grid, Num
    cols = ["call", "calls", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "mean µs"]
    if shipped:
        cols += ["p50 vs file", "p99 vs file"]
    tb = Grid(f"{label}: per call on {doc['machine']['cpu']} ({doc['host_class']})", cols)
    for call in ("native", "python", "binding"):
        q = doc[f"{call}_ns"]
        row = [{"python": "through Python", "binding": "binding overhead"}.get(call, call), Num(doc["calls"], ","),
               *(Num(q[k] / 1000, ".3f") for k in ("p50", "p90", "p99", "p99.9", "mean"))]
        if shipped:
            row += [Num(100 * (q[k] / shipped[f"{call}_ns"][k] - 1), "+.1f", " %") for k in ("p50", "p99")]
        tb.add_row(*row)
    tb.print(console)
    n = doc["native_check"]
    console.print(f"native: the syndrome repeated {doc['native_repeat']} times in one call, less the binding's "
                  f"{n['binding_overhead_ns']:g} ns per call, over {doc['native_repeat']}, levelled by each event "
                  f"count's distinct syndromes in one batch ({n['batch_of_the_sample_mean_ns_per_shot']:g} ns a shot; "
                  f"repeated {n['repeated_syndrome_mean_ns']:g} ns); timer's own {doc['timer_ns']:g} ns subtracted"
                  + (f"; vs file: against {shipped['measured_at']}'s {shipped['calls']:,} calls" if shipped else ""))


def _write(out: Path, doc: dict) -> None:
    import yaml

    from twin.output.files import write_file
    head = (f"# {HEAD_MARK} (twin/qec/percall.py):\n"
            "# one request per call, warm, timer cost removed; native and through Python; machine, versions, "
            "date below.\n")
    write_file(out, head + yaml.safe_dump(doc, sort_keys=False, width=120))
