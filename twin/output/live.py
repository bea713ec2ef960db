"""Measured (live) beside simulated: the summary a live node adds to results.json, the table
``twin run`` prints, and ``live_rounds.npz`` (per-round data ``twin calibrate --from-live`` reads).

results.json, per live consumer, key ``live``: ``backend``, ``endpoint`` (one line), ``rounds``
completed, ``service`` (the live device's measured time per round: request written -> reply seen,
p50/p90/p99/p99.9/mean in ns), ``simulated`` (the same loop with the node's ``sim`` model:
card-boundary round trip percentiles in ns), ``error`` (None, or kind, round, detail).

Also ``idle``: the idle time before each round, ``target`` (the simulated one the endpoint waited
for) and ``measured`` (what the device had on the wall clock), percentiles in ns over rounds 2...

A point measured in passes (``benchmarks/live_sweep.py --passes N``: the sweep's points run in
round-robin order, each pass one ``twin run`` of the point's scenario into its own folder) is a folder
holding ``passes.json`` (:func:`read_passes`) and those pass folders; ``twin calibrate --from-live``
and ``twin validate`` take it as one run, its rounds pooled in pass order
(:func:`twin.fitting.live_runs.read_live_rounds`) and its results recomputed from them
(:func:`pooled_summary`).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from twin.stats import summary_ns

NPZ = "live_rounds.npz"
PASSES = "passes.json"
PASSES_SCHEMA = "twin.passes/1"
_PASS_KEYS: dict[str, type | tuple[type, ...]] = {
    "folder": str, "pass": int, "position": int, "seed": int, "started_utc": str, "seconds": (int, float),
    "command": str}
_PASS_NEEDS = ("folder", "pass", "position")


def live_summary(res, failure, sim_rtt_ps: np.ndarray) -> dict:
    """The ``live`` mapping of one live consumer (see module docstring); ``sim_rtt_ps``: the round
    trips of the node's ``sim`` model over the same rounds (the side-by-side)."""
    live = dict(res.stats.get("live", {}))
    live.pop("endpoint_stats", None)
    svc = np.asarray(res.stats.get("service_ns", []), np.int64)
    live["service"] = summary_ns(svc * 1000) if len(svc) else None
    live["simulated"] = summary_ns(sim_rtt_ps)
    live["simulated"]["model"] = "sim"
    idle = np.asarray(res.stats.get("idle_ns", []), np.int64)[1:]
    target = np.asarray(res.stats.get("idle_target_ns", []), np.int64)[1:]
    live["idle"] = {"target": summary_ns(target * 1000), "measured": summary_ns(idle * 1000)} if len(idle) else None
    bad = np.nonzero(~np.asarray(res.ok, bool))[0]
    live["mismatch_rounds"] = [int(i) + 1 for i in bad[:20]]  # the first 20 wrong replies, by round
    live["error"] = None if failure is None else {"kind": failure.kind, "round": failure.round,
                                                  "detail": failure.detail}
    live.update(stall_summary(svc, np.asarray(res.rtt_ps)))
    return live


def stall_summary(service_ns: np.ndarray, rtt_ps: np.ndarray) -> dict:
    """Honest live numbers: ``stalled`` (rounds whose live service lies far beyond the service
    distribution, preempted or interrupted, and those queued behind them:
    :func:`twin.devices.isolation.find_live_stalls`) and ``clean``
    (the round trip's and the service's percentiles without them: the device's own), ``level``
    (whether the clean round trip stayed at one level through the run:
    :func:`twin.devices.isolation.find_level_shift`; None for a short run). The machine's
    state before the run is ``isolation`` (:func:`twin.devices.isolation.check_isolation`, from the
    endpoint's stats). Empty when the series do not match (a run stopped mid-round)."""
    if not len(service_ns) or len(service_ns) != len(rtt_ps):
        return {}
    from twin.devices.isolation import find_level_shift, find_live_stalls
    st = find_live_stalls(service_ns, rtt_ps)
    keep = ~st.mask
    return {"stalled": st.summary(), "level": find_level_shift(rtt_ps, keep),
            "clean": {"round_trip": summary_ns(rtt_ps[keep]) if keep.any() else None,
                      "service": summary_ns(service_ns[keep] * 1000) if keep.any() else None}}


def stall_mask(service_ns, rtt_ps: np.ndarray) -> np.ndarray | None:
    """The rounds :func:`stall_summary` leaves out of ``clean`` (stalled, or queued behind a stalled
    one; bool per round), or None where it has none to leave out (the series do not match)."""
    service_ns = np.asarray(service_ns, np.int64)
    if not len(service_ns) or len(service_ns) != len(rtt_ps):
        return None
    from twin.devices.isolation import find_live_stalls
    return find_live_stalls(service_ns, np.asarray(rtt_ps)).mask


def print_live(study, console) -> None:
    """For each live consumer: measured (live) and simulated (its sim model) side by side."""
    from twin.output.table import Grid, Num

    rows = [r for r in study.runs if r.summary.get("live")]
    if not rows:
        return
    tb = Grid("live vs simulated: card-boundary round trip in µs (live: the card path simulated, the consumer "
              "measured)", ["consumer", "source", "p50", "p90", "p99", "p99.9", "mean", "rounds"], keys=2)

    def us(d: dict) -> list:
        return [Num(d[k] / 1000) for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns")]
    for r in rows:
        s, lv = r.summary, r.summary["live"]
        tb.add_row(r.node, f"measured ({lv.get('backend', '?')})", *us(s), Num(len(r.result.t_in), ","))
        tb.add_row("", f"simulated (sim {s['name']})", *us(lv["simulated"]), Num(s["rounds"], ","))
        if lv.get("service"):
            tb.add_row("", "live service alone", *us(lv["service"]), None)
        st, cl = lv.get("stalled"), (lv.get("clean") or {}).get("round_trip")
        if st and st["rounds"] and cl:
            tb.add_row("", "measured, stalled rounds left out", *us(cl),
                       Num(len(r.result.t_in) - st["rounds"] - st.get("queued_behind", 0), ","))
    tb.print(console)
    for r in rows:
        lv = r.summary["live"]
        for w in (lv.get("isolation") or {}).get("warnings", []):
            console.print(f"[yellow]warning: {r.node}: machine not quiet before the run: {w}[/yellow]", soft_wrap=True)
        st = lv.get("stalled")
        if st and st["rounds"]:
            console.print(f"[yellow]warning: {r.node}: {st['rounds']:,} of {len(r.result.t_in):,} rounds "
                          f"({100 * st['fraction']:.2f} %) stalled (service > {st['threshold_ns'] / 1000:.3f} µs, "
                          f"longest {st['longest_ns'] / 1000:,.1f} µs; {st.get('queued_behind', 0):,} more queued "
                          "behind them): "
                          "preemption or interrupts, not the device; "
                          "the row 'stalled rounds left out' is the device's own distribution[/yellow]", soft_wrap=True)
        lvl = lv.get("level")
        if lvl and lvl["shifted"]:
            meds = lvl["block_p50_ns"]
            console.print(f"[yellow]warning: {r.node}: the round trip changed level during the run: the p50 of "
                          f"{lvl['blocks']} consecutive blocks ranged {min(meds) / 1000:.3f} to "
                          f"{max(meds) / 1000:.3f} µs "
                          f"({lvl['spread_pct']:.1f} % of p50; Kruskal-Wallis p {lvl['kruskal_p']:.1e}): the machine "
                          "changed state mid-run (a thread moved to another core or cache domain, a clock "
                          "changed); its percentiles mix two machines[/yellow]", soft_wrap=True)
    for r in rows:
        print_pace(r.node, r.summary["live"].get("pace"), console)
    for r in rows:
        console.print(f"{r.node}: {r.summary['live'].get('endpoint', '')}")
        if r.summary["live"].get("mismatch_rounds"):
            console.print(f"[red]{r.node}: the live device answered wrongly at round(s) "
                          f"{', '.join(map(str, r.summary['live']['mismatch_rounds']))}[/red]")
        hf = r.summary.get("host_freeze")
        if hf:
            console.print(f"{r.node}: host freeze: " + "; ".join(
                f"{w['stalled_rounds']} round(s) stalled in the freeze at {w['at_ns'] / 1e3:g} µs, back to normal "
                f"{w['recovered_after_rounds']} round(s) after" for w in hf["windows"])
                + f"; {r.summary['mismatches']} verification failures; {hf['stalled_rounds']} rounds over the "
                  f"timeout in the whole run (longest {hf['longest_stall_ns'] / 1e3:.1f} µs)")


def print_pace(node: str, pace: dict | None, console) -> None:
    """One line on how the live node was paced (:func:`twin.engine.paced.pace_summary`): lateness
    and the late rounds, named; or why it ran round by round."""
    if not pace:
        return
    if not pace.get("paced"):
        console.print(f"{node}: round by round (not paced: {pace.get('why')}); the device saw the twin's own "
                      "gaps where they exceed the simulated ones", soft_wrap=True)
        return
    lt, gap = pace.get("lateness") or {}, pace.get("device_gap_error")
    line = (f"{node}: paced in C ({'closed' if pace['closed'] else 'open'} loop): lateness p50 "
            f"{lt.get('p50_ns', 0) / 1000:.3f} µs, p99 {lt.get('p99_ns', 0) / 1000:.3f} µs; "
            f"{pace['rounds_per_s'] or 0:,.0f} rounds/s")
    if gap:
        line += (f"; gap seen by the device - simulated: p50 {gap['p50_ns'] / 1000:.3f} µs, "
                 f"p99 {gap['p99_ns'] / 1000:.3f} µs")
    console.print(line, soft_wrap=True)
    if pace["late_rounds"]:
        named = ", ".join(map(str, pace["late_first"]))
        more = " ..." if pace["late_rounds"] > len(pace["late_first"]) else ""
        console.print(f"[yellow]warning: {node}: {pace['late_rounds']:,} round(s) sent more than "
                      f"{pace['late_threshold_ns'] / 1000:g} µs after their instant (the device saw a longer gap "
                      f"there): round(s) {named}{more}[/yellow]", soft_wrap=True)


def write_live_rounds(study, folder) -> Path | None:
    """Stage ``live_rounds.npz`` in ``folder`` (a :class:`twin.output.files.RunFolder`): per live
    consumer ``<node>.rtt_ps``, ``<node>.service_ns``, ``<node>.t_in_ps``, ``<node>.t_have_ps``,
    ``<node>.idle_ns`` and ``<node>.idle_target_ns`` (the idle time before each round, measured and
    simulated, ns; the first round's measured one is -1); a paced run (:mod:`twin.engine.paced`) also
    ``<node>.lateness_ps`` (request sent - its planned instant, ps), ``<node>.planned_ns`` (the planned
    wall instant, CLOCK_MONOTONIC ns) and ``<node>.device_in_ns`` / ``<node>.device_out_ns`` (the
    consumer's own clock: request seen landed, reply published; -1 where it has none).
    Returns its path, or None without live consumers (an earlier run's file is then the folder's
    business: its manifest)."""
    arrays = {}
    for r in study.runs:
        if r.summary.get("live"):
            arrays[f"{r.node}.rtt_ps"] = r.result.rtt_ps
            arrays[f"{r.node}.t_in_ps"] = r.result.t_in
            arrays[f"{r.node}.t_have_ps"] = r.result.t_have
            for k in ("service_ns", "idle_ns", "idle_target_ns"):
                arrays[f"{r.node}.{k}"] = np.asarray(r.result.stats.get(k, []), np.int64)
            if "lateness_ns" in r.result.stats:  # a paced run (twin.engine.paced): how late each request left
                arrays[f"{r.node}.lateness_ps"] = np.asarray(r.result.stats["lateness_ns"], np.int64) * 1000
                for k in ("planned_ns", "device_in_ns", "device_out_ns"):
                    arrays[f"{r.node}.{k}"] = np.asarray(r.result.stats[k], np.int64)
    if not arrays:
        return None
    return folder.savez(NPZ, arrays)


def read_passes(run: Path) -> list[dict]:
    """The passes of a point measured in passes, from ``run/passes.json``: ``{"schema":
    "twin.passes/1", "point": label, "passes": [{"folder", "pass", "position", "seed",
    "started_utc", "seconds", "command"}, ...]}``. ``folder``: the pass's ``twin run`` output, a
    folder name inside ``run``; ``pass``: 0, 1, ... in list order (its rounds' place in the pooled
    arrays); ``position``: its place in the sweep's order of ``twin run``s (0-based, all points and
    passes: round robin puts pass k of every point before pass k + 1 of any); ``seed``: its
    ``twin run --seed``; ``started_utc``, ``seconds`` (wall clock, s), ``command``: when and how it
    ran. ``folder``, ``pass`` and ``position`` are required; any other key is refused; a folder
    or a seed listed twice, a ``command`` whose ``--out`` is not ``<point>/<folder>`` or whose ``--seed`` is not
    the pass's, and a folder in ``run`` that passes.json does not list (``pass_KK``, or one holding a
    run) are refused. That each pass's results.json agrees (seed, the point's scenario) is
    :func:`check_pass_results`. Returns the entries in list order; raises ConfigError naming
    passes.json, the key and the value."""
    from twin.config import ConfigError
    f = Path(run) / PASSES
    doc = _read_passes_doc(f)
    passes = doc["passes"]
    for i, p in enumerate(passes):
        if not isinstance(p, dict):
            raise ConfigError(f, f"passes[{i}]", p, "expected a mapping")
        _check_pass_keys(f, i, p)
        _check_pass_order(f, i, p, passes)
        _check_pass_folder(f, i, p, passes, Path(run))
        _check_pass_clock(f, i, p)
        _check_pass_seed(f, i, p, passes)
        _check_command(f, i, p, doc["point"])
    _check_unlisted_folders(f, Path(run), passes)
    return passes


def _read_passes_doc(f: Path) -> dict:
    """passes.json ``f`` read, its top level checked: the schema, the point's label, a non-empty
    list of passes (the entries are the callers' to check)."""
    from twin.config import ConfigError
    from twin.config.bounded import read_json
    doc = read_json(f, PASSES)  # bounded: size, depth, no NaN/Infinity
    if not isinstance(doc, dict):
        raise ConfigError(f, PASSES, type(doc).__name__, "expected a mapping with schema, point, passes")
    for key in doc:
        if key not in ("schema", "point", "passes"):
            raise ConfigError(f, key, doc[key], "unknown key (schema, point, passes)")
    if doc.get("schema") != PASSES_SCHEMA:
        raise ConfigError(f, "schema", doc.get("schema"), f"expected {PASSES_SCHEMA}")
    if not isinstance(doc.get("point"), str) or not doc["point"]:
        raise ConfigError(f, "point", doc.get("point"), "expected the point's label")
    passes = doc.get("passes")
    if not isinstance(passes, list) or not passes:
        raise ConfigError(f, "passes", passes, "expected a non-empty list of passes")
    return doc


def _check_pass_keys(f: Path, i: int, p: dict) -> None:
    """``passes[i]`` holds only the known keys (:data:`_PASS_KEYS`), each of its type, and the required ones."""
    from twin.config import ConfigError
    for key, value in p.items():
        want = _PASS_KEYS.get(key)
        if want is None:
            raise ConfigError(f, f"passes[{i}].{key}", value, f"unknown key ({', '.join(_PASS_KEYS)})")
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(f, f"passes[{i}].{key}", value, "wrong type")
    for key in _PASS_NEEDS:
        if key not in p:
            raise ConfigError(f, f"passes[{i}].{key}", "<missing>", "required")


def _check_pass_order(f: Path, i: int, p: dict, passes: list) -> None:
    """``passes[i]`` is pass ``i`` and ran after the pass before it (its ``position``)."""
    from twin.config import ConfigError
    if p["pass"] != i:
        raise ConfigError(f, f"passes[{i}].pass", p["pass"], f"expected {i}: passes are listed in pass order")
    if p["position"] < 0 or (i and p["position"] <= passes[i - 1]["position"]):
        raise ConfigError(f, f"passes[{i}].position", p["position"], "expected a position >= 0 after the pass "
                          "before it's (pass k + 1 ran after pass k)")


def _check_pass_folder(f: Path, i: int, p: dict, passes: list, run: Path) -> None:
    """``passes[i].folder`` names a folder inside ``run`` that no earlier pass lists."""
    from twin.config import ConfigError
    name = p["folder"]
    if not name or Path(name).name != name or name in (".", ".."):
        raise ConfigError(f, f"passes[{i}].folder", name, "expected a folder name inside the point's folder")
    if not (run / name).is_dir():
        raise ConfigError(f, f"passes[{i}].folder", name, "no such folder")
    same = [j for j, q in enumerate(passes[:i]) if (run / q["folder"]).resolve() == (run / name).resolve()]
    if same:
        raise ConfigError(f, f"passes[{i}].folder", name, f"also passes[{same[0]}]'s folder: a pass folder is "
                          "listed once (its rounds would be pooled twice)")


def _check_pass_clock(f: Path, i: int, p: dict) -> None:
    """``passes[i]``'s wall time is not negative and its ``started_utc`` reads as the sweep writes it."""
    import datetime

    from twin.config import ConfigError
    if p.get("seconds", 0) < 0:
        raise ConfigError(f, f"passes[{i}].seconds", p["seconds"], "a pass's wall time is not negative")
    if "started_utc" in p:
        try:
            datetime.datetime.strptime(p["started_utc"], "%Y-%m-%d %H:%M:%S UTC")
        except ValueError:
            raise ConfigError(f, f"passes[{i}].started_utc", p["started_utc"], "expected a time as the sweep "
                              "writes it, e.g. '2026-12-02 01:48:15 UTC'") from None


def _check_pass_seed(f: Path, i: int, p: dict, passes: list) -> None:
    """``passes[i]``'s seed is no earlier pass's."""
    from twin.config import ConfigError
    twin = [j for j, q in enumerate(passes[:i]) if "seed" in p and q.get("seed") == p["seed"]]
    if twin:
        raise ConfigError(f, f"passes[{i}].seed", p["seed"], f"also passes[{twin[0]}]'s seed: each pass has its "
                          "own (the sweep's seed + its pass); one seed twice is a pass copied, or one draw of "
                          "gaps run twice")


def _check_unlisted_folders(f: Path, run: Path, passes: list) -> None:
    """No pass folder in ``run`` (``pass_KK``, or one holding a run) that passes.json does not list."""
    from twin.config import ConfigError
    listed = {(run / p["folder"]).resolve() for p in passes}
    for child in sorted(run.iterdir()):
        if child.is_dir() and child.resolve() not in listed and (
                re.fullmatch(r"pass_\d+", child.name) or (child / "results.json").exists() or (child / NPZ).exists()):
            raise ConfigError(f, "passes", child.name, "a pass folder that passes.json does not list (a pass that "
                              "did not finish?): list it, or move it out of the point's folder")

def _check_command(f: Path, i: int, p: dict, point: str) -> None:
    """A pass's recorded ``command`` (``twin run SCENARIO ... --out DIR --seed S``) must be that
    pass's: ``--out`` ends in ``<point>/<folder>`` and ``--seed`` is its ``seed``."""
    import shlex

    from twin.config import ConfigError
    if "command" not in p:
        return
    try:
        words = shlex.split(p["command"])
    except ValueError as e:
        raise ConfigError(f, f"passes[{i}].command", p["command"], f"not a command line: {e}") from None
    opt = {w: words[k + 1] for k, w in enumerate(words[:-1]) if w in ("--out", "--seed")}
    if "--out" in opt and Path(opt["--out"]).parts[-2:] != (point, p["folder"]):
        raise ConfigError(f, f"passes[{i}].command", p["command"], f"--out {opt['--out']} is not this pass's "
                          f"folder ({point}/{p['folder']})")
    if "--seed" in opt and "seed" in p and opt["--seed"] != str(p["seed"]):
        raise ConfigError(f, f"passes[{i}].command", p["command"], f"--seed {opt['--seed']} but the pass's seed is "
                          f"{p['seed']}")


def check_pass_results(run: Path, i: int, p: dict, point: str, doc: dict, summary: dict) -> None:
    """That pass ``p`` (``passes[i]`` of ``run/passes.json``, of point ``point``) is the run its
    folder holds (results.json ``doc``, the live node's ``summary``): the same ``seed``, and a
    scenario named for the point (``point`` itself, or ``<scenario>_<point>`` run from
    ``<point>/scenario.yaml``, as benchmarks/live_sweep.py names them). Raises ConfigError naming
    passes.json, the key and the value."""
    from twin.config import ConfigError
    f, res = Path(run) / PASSES, f"{p['folder']}/results.json"
    if "seed" in p and doc.get("seed") != p["seed"]:
        raise ConfigError(f, f"passes[{i}].seed", p["seed"], f"but {res} has seed {doc.get('seed', '<missing>')!r}: "
                          "not that pass's run")
    name, rec = doc.get("scenario"), (summary.get("live") or {}).get("scenario_file")
    if name != point and not (isinstance(name, str) and name.endswith("_" + point) and rec
                              and Path(rec).parent.name == point):
        raise ConfigError(f, "point", point, f"but {res} ran scenario {name!r} from {rec}: a point's passes run "
                          "the scenario named for it (the point's name, or <scenario>_<point> from "
                          "<point>/scenario.yaml)")


def pooled_summary(doc0: dict, s0: dict, arrays: dict, passes: list[dict], docs: list[dict],
                   summaries: list[dict]) -> tuple[dict, dict]:
    """The results document and live-node summary of a point measured in passes, recomputed from
    its pooled rounds (``arrays``: ``rtt_ps`` int ps, ``service_ns``, ``idle_ns`` where recorded,
    ``pass_index``; ``passes``: :func:`read_passes`; ``docs``, ``summaries``: each pass's results.json
    and live-node summary). What every pass shares (scenario, frame bytes, traffic, the node and its
    device) comes from the first; the rest is recomputed: ``rounds``, ``mismatches`` and
    ``replies_checked`` (sums), p50/p90/p99/p99.9/mean of the pooled round trip, ``live.service``,
    ``live.idle.measured`` (the passes' first rounds, which had no previous reply, left out),
    ``live.stalled``/``clean``/``level`` (:func:`stall_summary` on the pooled rounds: the level's
    blocks then span passes), ``live.mismatch_rounds`` (1-based rounds of the pooled series),
    ``live.error`` (the first pass's that has one, with its ``pass``), ``live.pace`` where every pass ran
    on the paced loop (``paced``, ``closed``, ``late_rounds`` summed) and ``live.passes`` (each
    pass's folder, pass, position, rounds and clean round-trip p50 in ns). What needs more than the
    rounds (the ``sim`` model beside, the latency budget, the slowest round's stages, the seed of the
    whole) is not carried: each pass's own results.json has it."""
    from twin.devices.isolation import find_live_stalls
    rtt, svc, idx = arrays["rtt_ps"], arrays["service_ns"], arrays["pass_index"]
    doc = {k: doc0[k] for k in ("schema", "scenario", "calibration", "frame_bytes", "traffic", "timing_boundary")
           if k in doc0}
    doc.update(rounds=int(len(rtt)), seeds=[d.get("seed") for d in docs], pooled_from=PASSES)
    s = {k: s0[k] for k in ("node", "name", "device", "kind", "host", "encoding", "function", "model") if k in s0}
    s.update(rounds=int(len(rtt)), mismatches=int(sum(x.get("mismatches", 0) for x in summaries)),
             replies_checked=int(sum(x.get("replies_checked", 0) for x in summaries)), **summary_ns(rtt))
    lv0 = s0.get("live", {})
    live = {k: lv0[k] for k in ("backend", "endpoint", "scenario_file") if k in lv0}
    live["rounds"] = int(len(rtt))
    live["service"] = summary_ns(svc * 1000) if len(svc) else None
    idle = arrays.get("idle_ns")
    idle = idle[idle >= 0] if idle is not None else np.zeros(0, np.int64)
    live["idle"] = {"measured": summary_ns(idle * 1000)} if len(idle) else None
    start, bad = 0, []
    for x in summaries:
        bad += [start + int(r) for r in x.get("live", {}).get("mismatch_rounds", [])]
        start += int(x.get("live", {}).get("rounds", x.get("rounds", 0)))
    live["mismatch_rounds"] = bad[:20]
    errors = [{**x["live"]["error"], "pass": p["pass"]} for p, x in zip(passes, summaries)
              if x.get("live", {}).get("error")]
    live["error"] = errors[0] if errors else None
    paces = [x.get("live", {}).get("pace") or {} for x in summaries]
    if paces and all(p.get("paced") for p in paces):  # on the paced loop: one request in flight (twin run's)
        live["pace"] = {"paced": True, "closed": paces[0].get("closed"),
                        "late_rounds": int(sum(p.get("late_rounds", 0) for p in paces))}
    live.update(stall_summary(svc, rtt))
    st = find_live_stalls(svc, rtt)
    keep = ~st.mask if len(st.mask) == len(rtt) else np.ones(len(rtt), bool)
    rows = []
    for p in passes:
        mine = idx == p["pass"]
        clean = rtt[mine & keep]
        rows.append({"folder": p["folder"], "pass": p["pass"], "position": p["position"], "rounds": int(mine.sum()),
                     "p50_ns": summary_ns(clean)["p50_ns"] if len(clean) else None})
    live["passes"] = rows
    s["live"] = live
    doc["consumers"] = [s]
    return doc, s
