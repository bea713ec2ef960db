"""Run a scenario: every loop of its topology, with the engine check and the comparison to
measurements."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from twin.calibration.measured import Measured, load_measured
from twin.engine.direct import DirectNotApplicable, check_same, run_direct
from twin.engine.event import run_event
from twin.engine.hops import FlowStats, Hops
from twin.engine.paced import paced_refusal, run_paced
from twin.engine.spec import LoopResult, LoopSpec
from twin.engine.stop import Interrupted, deferred, take_stop
from twin.nodes.protocol import keeps_partial
from twin.output.summary import Check, FlowSummary, FlowTiming, Rounds, flow_summary, rounds_of
from twin.scenario import LoadedScenario
from twin.scenario.compile import compile_scenario, is_roce, model_of

if TYPE_CHECKING:
    from twin.calibration.roce import RoceMeasured

Progress = Callable[[str, int], None]
PENDING = "direct+event (pending)"  # run_one(defer=True): the event model's check is still to run


@dataclass
class ConsumerRun:
    """One loop's outcome: the per-round result and its summary record for results.json."""

    node: str
    device: str
    result: LoopResult
    record: FlowSummary

    @property
    def summary(self) -> dict:
        """The loop's entry of results.json's ``consumers`` (:meth:`FlowSummary.to_json`)."""
        return self.record.to_json()


@dataclass
class StudyResult:
    """A whole study: the scenario, its rounds and seed, one :class:`ConsumerRun` per consumer."""

    scenario: LoadedScenario
    rounds: int
    seed: int
    engine: str
    runs: list[ConsumerRun]
    measured: Measured | None
    failures: list = field(default_factory=list)


def run_one(spec: LoopSpec, engine: str, verify_rounds: int,
            progress: Callable[[int], None] | None, defer: bool = False) -> tuple[LoopResult, int, int, str]:
    """Run one loop. Returns (result, replies checked byte for byte, mismatches, engine used).

    ``auto``: the direct engine for every round, and the event model (which moves the bytes and
    checks every reply) over the first ``verify_rounds`` rounds, whose timestamps must equal the
    direct engine's. ``event``: the event model for every round. ``direct``: no byte check.
    Asked to stop (:mod:`twin.engine.stop`), it raises :class:`Interrupted` whose ``outcome`` is
    the same tuple for the whole rounds kept: the direct engine's rounds so far (unchecked), or,
    stopped in the event model's check, the rounds it checked. ``defer``: in ``auto``, return the
    direct engine's result unchecked with engine :data:`PENDING` (the caller runs
    :func:`check_direct` later).
    """
    def event(s: LoopSpec, p) -> LoopResult:
        try:
            res = run_event(s, p)
        except Interrupted as e:
            e.outcome = (e.partial, len(e.partial.ok), e.partial.mismatches, "event")
            raise
        if s.model == "live" and "live" in res.stats:  # why this live flow ran round by round
            res.stats["live"]["pace"] = {"paced": False, "why": paced_refusal(s) or f"engine {engine} asked for"}
        return res
    if spec.model == "live" and engine != "event":
        why = paced_refusal(spec)
        if why is None:
            return _paced(spec, progress)
        if getattr(spec.bridge, "pace", None):
            raise ValueError(f"node {spec.name!r}: bridge.pace: true: {why}")
    if engine == "event":
        res = event(spec, progress)
        return res, len(res.ok), res.mismatches, "event"
    try:
        res = run_direct(spec, progress)
    except DirectNotApplicable:
        if engine == "direct":
            raise
        res = event(spec, progress)
        return res, len(res.ok), res.mismatches, "event"
    except Interrupted as e:
        e.outcome = (e.partial, 0, 0, "direct")
        raise
    if engine == "direct" or verify_rounds <= 0:
        return res, 0, 0, "direct"
    if defer:
        return res, 0, 0, PENDING
    return check_direct(spec, res, verify_rounds)


def _paced(spec: LoopSpec, progress) -> tuple[LoopResult, int, int, str]:
    """A live flow at its pace (:func:`twin.engine.paced.run_paced`): (result, replies checked (every
    one, byte for byte, in C), mismatches, ``"paced"``); a failure or a stop carries ``outcome``, the
    same tuple for the rounds kept."""
    try:
        res = run_paced(spec, progress)
    except Exception as e:
        part = getattr(e, "partial", None)
        if part is not None:
            e.outcome = (part, len(part.ok), part.mismatches, "paced")  # type: ignore[attr-defined]
        raise
    return res, len(res.ok), res.mismatches, "paced"


def check_direct(spec: LoopSpec, res: LoopResult, verify_rounds: int,
                 progress: Callable[[int], None] | None = None) -> tuple[LoopResult, int, int, str]:
    """The event model's check of a direct-engine result ``res`` of ``spec``: it moves the bytes of
    the first ``verify_rounds`` rounds (all of them when fewer), checks every reply byte for byte,
    and its timestamps must equal the direct engine's (:func:`twin.engine.direct.check_same`
    raises otherwise). Returns (res with ``reply_digest`` over the checked replies, replies checked,
    mismatches, ``"direct+event"``); ``progress(n)`` every 1,000 rounds checked. Asked to stop, it
    raises :class:`Interrupted` whose ``outcome`` is that tuple for the rounds checked so far."""
    n = min(verify_rounds, spec.traffic.rounds)
    try:
        ev = run_event(replace(spec, traffic=replace(spec.traffic, rounds=n)), progress, 1000)
    except Interrupted as e:  # keep the rounds both engines have, checked
        k = len(e.partial.t_in)
        check_same(res, e.partial, k)
        checked = res.head(k)
        e.outcome = (checked, k, e.partial.mismatches, "direct+event")
        e.partial = checked
        raise
    check_same(res, ev, n)
    res.stats["reply_digest"] = ev.stats["reply_digest"]  # over the replies the event model checked
    return res, n, ev.mismatches, "direct+event"


def run_study(loaded: LoadedScenario, rounds: int | None = None, seed: int | None = None, engine: str = "auto",
              verify_rounds: int = 10_000, progress: Progress | None = None,
              trace: tuple[str, int, int] | None = None,
              stopped: Callable[[str, Exception, int], None] | None = None,
              first: Callable[[StudyResult], None] | None = None,
              checking: Progress | None = None, stream_rounds: int | None = None,
              rounds_sink: Callable[..., None] | None = None) -> StudyResult:
    """Run every loop of the scenario; returns per-consumer results and summaries.

    The loops are the flows of the scenario's compiled topology
    (:func:`twin.scenario.compile.compile_scenario`), each run alone, in file order, as the seeds
    measured them. ``trace``: ``(path, first, last)``: VCD waveforms of the loops' RTL nodes for rounds
    first..last (``<path stem>.<node>.vcd`` beside ``path``). A loop that stops early (a live
    endpoint's failure, or :class:`twin.engine.stop.Interrupted`) ends the study: its whole rounds
    so far are kept (summary ``rounds`` completed, ``rounds_requested``), the exception is in
    ``failures`` and ``stopped(node, exception, rounds completed)`` is called the moment it is
    caught, before any summary is computed (a verdict can be printed at once).

    ``first`` (``auto`` with ``verify_rounds`` > 0): every loop's direct engine runs first, then
    ``first(study so far)`` is called (the table can be printed: its timestamps are final, the
    summaries of the loops still to check say engine :data:`PENDING` and 0 replies checked), then
    the event model checks each of those loops exactly as without ``first`` (the same rounds, byte
    for byte, the same results), ``checking(node, rounds checked)`` reporting its progress.

    ``stream_rounds`` (``engine="direct"`` only): stream each loop's rounds in batches of that many
    (:func:`stream_one`), in memory independent of the run's length: the summaries are the same, key
    for key, the results hold no rounds (empty arrays); ``rounds_sink(node, first, t_send, t_in,
    t_have, t_back, hops)`` is given each batch of rounds ``first + 1`` .. as it is computed (the
    per-round file written as the run goes: :class:`twin.reports.run.StreamedRounds`)."""
    if stream_rounds is not None and engine != "direct":
        raise ValueError(f"streamed rounds are the direct engine's, not engine {engine!r}")
    sc = loaded.scenario
    rounds = rounds or sc.rounds
    seed = sc.seed if seed is None else seed
    from twin.scenario.load import check_memory, check_rounds
    check_rounds(loaded, rounds)
    check_memory(loaded, rounds, streamed=stream_rounds is not None)
    measured = _measured(loaded)
    for i, node in enumerate(sc.nodes):  # a user's RTL that will not build is the scenario's error
        if node.rtl is not None:
            from twin.rtl.build import build_user_block
            build_user_block(loaded.path, i, node.rtl.top, node.rtl.sources)
    topo = compile_scenario(loaded, rounds, seed, trace=trace)
    ctx = _Context(loaded, rounds, measured, engine, verify_rounds)
    study = StudyResult(loaded, rounds, seed, engine, [], measured)
    defer = first is not None and engine == "auto" and verify_rounds > 0
    nodes = {n.name: n for n in sc.nodes}
    pending = []  # (index in runs, node, spec) of the loops whose event-model check is deferred
    for flow in topo.flows:
        node = nodes[flow.consumer]
        acc = None
        if stream_rounds is not None:
            kept, failure, acc = _stream_loop(flow.spec, node, stream_rounds, progress, stopped,
                                              None if sc.deadline is None else int(sc.deadline), rounds_sink)
        else:
            kept, failure = _run_loop(flow.spec, node, engine, verify_rounds, progress, stopped, defer)
        if kept is None:  # stopped before its first round
            study.failures.append(failure)
            return study
        res, checked, mism, used = kept
        if used == PENDING:
            pending.append((len(study.runs), node, flow.spec))
        with deferred():  # the loop has ended: its summary (a live node's side-by-side is a loop) runs to its end
            record = _summary(ctx, node, flow.spec, res, checked, mism, used, failure, acc)
        study.runs.append(ConsumerRun(node.name, flow.spec.name, res, record))
        if failure is not None:
            study.failures.append(failure)
            _unchecked(study, pending)
            return study
    if pending and first is not None:  # (pending: deferred, which a first callback asks for)
        first(replace(study, runs=list(study.runs), failures=[]))
        _check_deferred(ctx, study, pending, checking, stopped)
    return study


def _measured(loaded: LoadedScenario):
    """The measurement file the scenario names (``measured:``), read by its path's reader, or None."""
    if not loaded.measured_path:
        return None
    from twin.calibration.roce import load_roce_measured
    from twin.config import named_input
    with named_input(loaded.path, loaded.measured_path):  # its errors show none of its content
        return (load_roce_measured if is_roce(loaded.params) else load_measured)(loaded.measured_path)


def _run_loop(spec: LoopSpec, node, engine: str, verify_rounds: int, progress: Progress | None,
              stopped: Callable[[str, Exception, int], None] | None, defer: bool):
    """Run one loop (:func:`run_one`). Returns ``(outcome, failure)``: outcome the tuple of
    :func:`run_one` (after a failure, of its whole rounds so far) or None when it stopped before its
    first round; failure the live endpoint's failure or the stop (:class:`Interrupted`), with its
    ``node`` set, or None; ``failure.stop_requested``: a stop was asked for (a signal) before the loop
    ended, taken here when a failure came first (a live endpoint waiting out its timeout when the
    signal came). ``stopped(node, exception, rounds completed)`` is called at once."""
    cb = (lambda n, name=node.name: progress(name, n)) if progress else None
    try:
        return run_one(spec, engine, verify_rounds, cb, defer=defer), None
    except DirectNotApplicable as e:
        raise DirectNotApplicable(f"node {node.name!r}: {e}") from None
    except Exception as e:  # a live endpoint failed, or a stop: keep its rounds so far, end the study
        if not keeps_partial(e):
            raise
        failure: Any = e  # an Interrupted or a LiveFailure: both carry ``partial``; the study names the node
        failure.node = node.name
        # a stop asked for while a live endpoint waited out its timeout (the wait is in C: the signal's
        # handler ran after it) is taken here, so the summaries and the live node's simulated side-by-side
        # run to their end and the rounds are saved; the failure says it came with a stop
        failure.stop_requested = isinstance(e, Interrupted) or take_stop()
        kept = getattr(failure, "outcome", None) or (
            None if failure.partial is None
            else (failure.partial, len(failure.partial.ok), failure.partial.mismatches, "event"))
        if stopped:
            stopped(node.name, e, 0 if kept is None else len(kept[0].t_in))
        if kept is None or not len(kept[0].t_in):
            return None, e
        return kept, e


def stream_one(spec: LoopSpec, batch: int, progress: Callable[[int], None] | None = None,
               deadline_ps: int | None = None, rows: Callable[..., None] | None = None,
               ) -> tuple[LoopResult, FlowStats, Interrupted | None]:
    """One loop on the direct engine, streamed in batches of ``batch`` rounds
    (:func:`twin.engine.direct.run_direct`'s ``sink``) into a :class:`twin.engine.hops.FlowStats`,
    once: each batch counted as it comes (the budget's median round and slowest 1 % too, from the
    stages' sums per round-trip value). Returns (the result without its rounds, the statistics, the
    stop that ended it or None: the statistics are then those of the rounds done, exactly).
    ``rows(first, t_send, t_in, t_have, t_back, hops)`` sees each batch. Raises DirectNotApplicable
    as the direct engine does (and for what it cannot stream)."""
    acc = FlowStats(deadline_ps)

    def count(i: int, c: dict) -> None:
        h = Hops(**{k: c[k] for k in ("issue", "land", "seen", "start", "reply", "publish", "rland")},
                 ready=c["issue"])  # the direct engine: no round waits for a slot
        acc.add(i, c["t_send"], c["t_in"], c["t_have"], c["t_back"], h)
        if rows is not None:
            rows(i, c["t_send"], c["t_in"], c["t_have"], c["t_back"], h)
    stop = None
    try:
        res = run_direct(spec, progress, batch, sink=count)
    except Interrupted as e:
        stop, res = e, e.partial
    return res, acc, stop


def _stream_loop(spec: LoopSpec, node, batch: int, progress: Progress | None,
                 stopped: Callable[[str, Exception, int], None] | None, deadline_ps: int | None,
                 rounds_sink: Callable[..., None] | None = None):
    """:func:`_run_loop` of a streamed loop (:func:`stream_one`): ``(outcome, failure, statistics)``."""
    cb = (lambda n, name=node.name: progress(name, n)) if progress else None
    rows = (lambda *a, name=node.name: rounds_sink(name, *a)) if rounds_sink else None
    try:
        res, acc, stop = stream_one(spec, batch, cb, deadline_ps, rows)
    except DirectNotApplicable as e:
        raise DirectNotApplicable(f"node {node.name!r}: {e}") from None
    if stop is not None:
        stop.node = node.name
        if stopped:
            stopped(node.name, stop, acc.n)
        if not acc.n:
            return None, stop, acc
    return (res, 0, 0, "direct"), stop, acc


def _unchecked(study: StudyResult, pending: list) -> None:
    """A study that ends before the event model's deferred check: the ``pending`` loops ran on the
    direct engine alone, unchecked (engine ``direct``, 0 replies checked), in ``study`` in place."""
    for i, _, _ in pending:
        r = study.runs[i]
        study.runs[i] = replace(r, record=replace(r.record, check=_check(r.result, 0, 0, "direct")))


def _check_deferred(ctx: "_Context", study: StudyResult, pending: list, checking: Progress | None,
                    stopped: Callable[[str, Exception, int], None] | None) -> None:
    """The event model's check of the ``pending`` loops (after the first table), in ``study`` in place:
    each loop's summary gets the check's keys. A stop ends it: the rounds checked so far of the loop
    being checked replace its run and those after it (none when it had checked no round), the stop
    is in ``failures``."""
    runs = study.runs
    for i, node, spec in pending:
        cb = (lambda n, name=node.name: checking(name, n)) if checking else None
        try:
            res, checked, mism, used = check_direct(spec, runs[i].result, ctx.verify_rounds, cb)
        except Interrupted as e:  # the rounds checked so far end the study, as a stop in run_one would
            e.node = node.name
            if e.outcome is None:  # check_direct sets it before it raises
                raise
            res, checked, mism, used = e.outcome
            if stopped:
                stopped(node.name, e, len(res.t_in))
            with deferred():
                kept = [ConsumerRun(node.name, runs[i].device, res, _summary(ctx, node, spec, res, checked, mism, used,
                                                                             e))] if len(res.t_in) else []
            runs[i:] = kept
            study.failures.append(e)
            return
        runs[i] = replace(runs[i], record=replace(runs[i].record, check=_check(res, checked, mism, used)))


@dataclass(frozen=True)
class _Context:
    """What every loop's summary needs of its study."""

    loaded: LoadedScenario
    rounds: int
    measured: Measured | RoceMeasured | None  # a RoCE file when the scenario's path is RoCE
    engine: str
    verify_rounds: int


def _check(res: LoopResult, checked: int, mism: int, used: str) -> Check:
    """The event model's check of a loop (after a deferred check it replaces the pending one: the rest
    of the summary comes from the timestamps, which the check leaves as they are)."""
    return Check(used, int(checked), int(mism), res.stats.get("reply_digest"))


def _summary(ctx: _Context, node, spec: LoopSpec, res: LoopResult, checked: int, mism: int, used: str,
             failure: Exception | None, acc: FlowStats | None = None) -> FlowSummary:
    """One loop's results.json summary (docs/results.md), its common part by :func:`flow_summary`;
    ``acc``: a streamed loop's statistics (``res`` then holds no rounds)."""
    loaded, rounds = ctx.loaded, ctx.rounds
    sc = loaded.scenario
    dev = loaded.params.consumers[node.device]
    q = sc.qblox if spec.aurora is not None else None  # from a round's last acquisition to the reply at the link
    timing = flow_summary(res, loop=spec.aurora is not None,
                          publish_extra_ns=None if q is None else q.result_latency_ns + q.trigger_network_ns,
                          deadline_ps=sc.deadline, faults=sc.faults, plan=spec.faults, acc=acc)
    measured, error_pct = _against_measured(ctx, node, rounds_of(res, acc), timing)
    return FlowSummary(
        name=node.device, node=node.name, model=node.model, function=sc.function, device=dev.device, kind=dev.kind,
        host=dev.host, encoding=spec.consumer.encoding, check=_check(res, checked, mism, used),
        # a live run stopped early: the rounds it completed, and what was asked
        rounds=int(rounds) if failure is None else rounds_of(res, acc).n,
        rounds_requested=None if failure is None else int(rounds), timing=timing, rtl=res.stats.get("rtl"),
        live=_live(ctx, node, spec, res, failure), measured=measured, error_pct=error_pct)


def _live(ctx: _Context, node, spec: LoopSpec, res: LoopResult, failure: Exception | None) -> dict | None:
    """A live node's report beside its sim model over the same rounds (:func:`twin.output.live.live_summary`),
    or None for the other models."""
    if not model_of(node).supports.get("real_device"):
        return None
    from twin.output.live import live_summary
    n = max(1, len(res.t_in))  # after a failure: the rounds completed
    sim_spec = replace(spec, model="sim", bridge=None, traffic=replace(spec.traffic, rounds=n))
    # the node's sim model over the same rounds (after a stop: no event-model check, to end soon)
    sim, _, _, _ = run_one(sim_spec, ctx.engine, ctx.verify_rounds if failure is None else 0, None)
    live = live_summary(res, None if isinstance(failure, Interrupted) else failure, sim.rtt_ps)
    live["scenario_file"] = str(Path(ctx.loaded.path).resolve())  # for `twin calibrate --from-live RUN`
    return live


def _roles(ctx: _Context, device: str, stats) -> dict[str, str]:
    """Each measured number's role for the scenario's parameter set: ``fit`` (a number it was fitted
    to) or ``held out`` (:func:`twin.calibration.targets.roles`)."""
    from twin.calibration.targets import roles
    lo = ctx.loaded
    return roles(lo.params, lo.calibration_path, lo.measured_path, device, list(stats))


def _against_measured(ctx: _Context, node, res: Rounds, timing: FlowTiming) -> tuple[dict | None, dict | None]:
    """``(measured, error_pct)``: the row of the scenario's measurement file for the node's device and
    the twin's error against it (%), or (None, None)."""
    measured = ctx.measured
    row = measured.consumers.get(node.device) if measured else None
    from twin.calibration.roce import RoceMeasuredRow
    if isinstance(row, RoceMeasuredRow):  # a RoCE measurement file (the scenario's path is RoCE)
        have = row.stats_ps()
        extra = {"max_samples": row.max_samples, "max_samples_source": row.max_samples_source} \
            if row.max is not None else {}
        return ({f"{k}_ns": v / 1000 for k, v in have.items()} | {"device": row.device} | extra
                | {"role": _roles(ctx, node.device, have)},
                {k: round(100 * (res.rtt_percentile(row.quantile(k)) - v) / v, 3) for k, v in have.items()})
    if row is not None:
        rtt = timing.rtt
        return ({"p50_ns": row.p50_ps / 1000, "p90_ns": row.p90_ps / 1000, "device": row.device,
                 "platform": row.platform, "role": _roles(ctx, node.device, ("p50", "p90"))},
                {"p50": round(100 * (rtt.p50_ns * 1000 - row.p50_ps) / row.p50_ps, 3),
                 "p90": round(100 * (rtt.p90_ns * 1000 - row.p90_ps) / row.p90_ps, 3)})
    return None, None
