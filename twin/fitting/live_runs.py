"""Live run folders as the fits read them: one ``twin run`` output of a ``model: live`` node
(``results.json``, ``live_rounds.npz``) or a point measured in passes (``passes.json`` and one such
folder per pass, pooled in pass order), the scenario it ran, its stalled rounds
(:func:`twin.devices.isolation.find_live_stalls`), and whether run lists overlap. The fit itself
is :mod:`twin.fitting.live`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from twin.config import ConfigError, Located
from twin.devices.isolation import Stalls, find_live_stalls
from twin.output.live import NPZ, PASSES
from twin.stats import percentile_ps
from twin.units import PS_PER_NS


@dataclass
class LiveRun:
    """One live run folder: ``path``, results.json ``doc``, the live node's ``summary``, per-round
    ``rtt_ps`` (card boundary) and ``service_ns``, its ``stalls``, the ``scenario`` file, and what it
    asked: ``frame_bytes``, ``function`` (name), ``encoding``; ``idle_ns``: the idle time the live
    device had before each round on the wall clock, where the run recorded it (``<node>.idle_ns``;
    the first round's is -1, and each pass's first for a point measured in passes); for such a point
    ``pass_index`` (each round's pass, int) and ``passes`` (passes.json's entries: folder, pass,
    position in the sweep's order, seed, start time)."""

    path: Path
    doc: dict
    summary: dict
    rtt_ps: np.ndarray
    service_ns: np.ndarray
    stalls: Stalls
    scenario: Path
    frame_bytes: int
    function: str
    encoding: str
    idle_ns: np.ndarray | None = None  # the idle time the live device had before each round (None: not recorded)
    pass_index: np.ndarray | None = None  # a point measured in passes: each round's pass (None: one run)
    passes: list[dict] = field(default_factory=list)  # its passes.json entries, in pass order

    @property
    def measured_idle_ns(self) -> np.ndarray | None:
        """The idle times the device had, without each run's or pass's first round (-1: none before it)."""
        return None if self.idle_ns is None else self.idle_ns[self.idle_ns >= 0]

    def pass_p50_ns(self) -> list[float]:
        """Per pass (in pass order), the p50 of its clean round trips in ns; [] for one run."""
        if self.pass_index is None:
            return []
        keep = ~self.stalls.mask if len(self.stalls.mask) == len(self.rtt_ps) else np.ones(len(self.rtt_ps), bool)
        return [percentile_ps(self.rtt_ps[keep & (self.pass_index == p["pass"])], 50) / PS_PER_NS
                for p in self.passes]

    @property
    def in_flight(self) -> int | None:
        """The requests the live flow had in flight at most, where the run says: 1 for a flow on the
        paced C loop (``live.pace.paced``; ``twin run`` keeps one in flight there, docs/live.md "At the
        loop's pace": an open-loop request whose instant passes while the previous reply is awaited is
        written when that reply is seen, its round trip measured from then); None otherwise (the
        round-by-round path: the simulated card's slots)."""
        pace = (self.summary.get("live") or {}).get("pace") or {}
        return 1 if pace.get("paced") else None

    @property
    def clean_rtt_ps(self) -> np.ndarray:
        """The round trips without the stalled rounds (the device's own distribution)."""
        if len(self.stalls.mask) != len(self.rtt_ps):
            return self.rtt_ps
        return self.rtt_ps[~self.stalls.mask]

    def pass_note(self) -> str:
        """One line on a point measured in passes: how many were pooled and how far their clean
        round-trip p50s lie apart (the machine's own pass-to-pass spread); "" for one run."""
        meds = self.pass_p50_ns()
        if not meds:
            return ""
        pooled = percentile_ps(self.clean_rtt_ps, 50) / PS_PER_NS
        sd = 100 * float(np.std(meds, ddof=1)) / pooled if len(meds) > 1 else 0.0
        return (f"{self.path}: {len(meds)} passes pooled ({len(self.rtt_ps):,} rounds); clean round-trip p50 per pass "
                f"{min(meds):,.0f}..{max(meds):,.0f} ns ({100 * (max(meds) - min(meds)) / pooled:.1f} % of the pooled "
                f"{pooled:,.0f} ns; pass-to-pass s.d. {sd:.1f} %)")

    @property
    def label(self) -> str:
        """``name`` of the folder (a pass of a point: ``point/pass_KK``, so passes of several points
        are told apart), frame bytes and function (for tables and figure titles)."""
        name = f"{self.path.parent.name}/{self.path.name}" if _is_pass(self.path) else self.path.name
        return f"{name} ({self.frame_bytes} B, {self.function})"


MAX_NAME_CHARS = 100


def plain_name(value: str) -> str:
    """``value`` if it may stand in a file name the twin makes from it (a scenario's or a node's name
    read from a run folder): 1 to :data:`MAX_NAME_CHARS` printable characters, no path separator,
    not starting with a dot (no ``..``, nothing hidden) and no NUL. Raises ValueError: a run folder
    is shared data, and a name taken from it must never lead a file out of its folder."""
    if not value or len(value) > MAX_NAME_CHARS or not value.isprintable() or value[0] == "." \
            or any(ch in value for ch in "/\\\0") or value != value.strip():
        raise ValueError(f"expected a plain name (1 to {MAX_NAME_CHARS} printable characters, no / or \\, not "
                         "starting with a dot): it names the fitted file")
    return value


Name = Annotated[str, AfterValidator(plain_name)]


class _Live(BaseModel):
    """A live consumer's ``live`` mapping, what the fits read of it."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    scenario_file: str | None = Field(None, min_length=1, max_length=4096)
    backend: str | None = None


class _Consumer(BaseModel):
    """A consumer's entry in results.json, as the fits read it: a live one names its node, device
    and encoding."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    node: str | None = Field(None, min_length=1)
    name: str | None = None
    encoding: Literal["classic", "per_piece"] | None = None  # what a consumer's exchange is written in
    function: str = "echo"
    live: _Live | None = None

    @field_validator("function")
    @classmethod
    def _registered(cls, v: str) -> str:  # the fit replays it: a registered function, by name or id
        from twin.runtime.functions import lookup
        try:
            lookup(v)
        except KeyError:
            raise ValueError("not a registered function (the fit replays the run's function: echo, invert, "
                             "xor_fold, sum32, ...; `twin components` lists them)") from None
        return v

    @model_validator(mode="after")
    def _live_keys(self):
        if self.live:
            for key in ("node", "name", "encoding"):
                if getattr(self, key) is None:
                    raise Located((key,), "<missing>", "a live consumer's entry names its node, device and "
                                  "encoding (not a results file of a live `twin run`)")
        return self


class _Results(BaseModel):
    """results.json of a ``twin run`` with a live node, as the fits read it (other keys are kept,
    unread here)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    scenario: Name | None = None  # absent: the run's scenario must be given (run_scenario says so)
    frame_bytes: int | None = Field(None, ge=1, le=2**20, strict=True)
    consumers: list[_Consumer]


def _rounds(npz_path: Path, node: str) -> dict[str, np.ndarray]:
    """The per-round arrays of ``node`` in ``npz_path`` (:func:`twin.config.bounded.read_npz`:
    headers checked before anything is allocated): ``rtt_ps`` (>= 0), ``service_ns`` (>= 0; empty
    where not recorded), ``idle_ns`` (>= -1, where recorded), each of integers. Raises ConfigError."""
    from twin.config.bounded import read_npz
    names = {k: f"{node}.{k}" for k in ("rtt_ps", "service_ns", "idle_ns")}
    got = read_npz(npz_path, list(names.values()))
    if names["rtt_ps"] not in got:
        raise ConfigError(npz_path, names["rtt_ps"], "<missing>", "no round trips for this node")
    arrays: dict[str, np.ndarray] = {"service_ns": np.zeros(0, np.int64)}
    for k, name in names.items():
        if name not in got:
            continue
        a = got[name]
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise ConfigError(npz_path, name, f"shape {a.shape} of {a.dtype}", "expected one integer per round")
        lowest = -1 if k == "idle_ns" else 0
        if len(a) and int(a.min()) < lowest:
            first = int(a.argmin()) + 1
            raise ConfigError(npz_path, name, int(a.min()), f"expected every value >= {lowest} (round {first}): a "
                              "negative time was not measured")
        arrays[k] = a.astype(np.int64)
    return arrays


def _one_run(run: Path, node: str | None) -> tuple[dict, dict, dict[str, np.ndarray]]:
    """One ``twin run`` folder: (results.json document, the live node's summary, its per-round
    arrays ``rtt_ps`` (card boundary, int ps), ``service_ns`` (empty where not recorded) and
    ``idle_ns`` (absent where not recorded; -1 for the first round)). results.json is read bounded
    and checked against :class:`_Results`, live_rounds.npz by :func:`_rounds`. Raises ConfigError
    naming the file, key and value when the folder is not a live run (or has no live node ``node``)."""
    from twin.config import load_model
    from twin.config.bounded import read_json
    res_path, npz_path = run / "results.json", run / NPZ
    for p in (res_path, npz_path):
        if not p.is_file():
            raise ConfigError(run, "RUN", str(run), f"not a live run folder: {p.name} is missing")
    doc = read_json(res_path, "results.json")
    load_model(res_path, _Results, doc)  # the schema: what the fits read is there, and plain
    live = [c for c in doc["consumers"] if c.get("live")]
    if node is not None:
        live = [c for c in live if c["node"] == node]
    if not live:
        raise ConfigError(res_path, "consumers", node or "<any>", "no live consumer in this run")
    s = live[0]
    arrays = _rounds(npz_path, s["node"])
    if len(arrays["rtt_ps"]) < 100:
        raise ConfigError(npz_path, f"{s['node']}.rtt_ps", len(arrays["rtt_ps"]), "needs at least 100 rounds to fit")
    return doc, s, arrays


# what every pass of one point must share (results.json keys; "consumer." = the live node's summary)
_SAME = ("scenario", "frame_bytes", "traffic", "calibration", "consumer.node", "consumer.name",
         "consumer.encoding", "consumer.function", "consumer.live.backend")


def _key(doc: dict, s: dict, key: str):
    where, key = (s, key[len("consumer."):]) if key.startswith("consumer.") else (doc, key)
    for part in key.split("."):
        where = where.get(part) if isinstance(where, dict) else None
    return where


def _pooled(run: Path, node: str | None) -> tuple[dict, dict, dict[str, np.ndarray], list[dict]]:
    """A point measured in passes (``passes.json``: :func:`twin.output.live.read_passes`): every
    pass folder loaded (:func:`_one_run`), checked to be the same point (:data:`_SAME`), and their
    per-round arrays concatenated in pass order, with ``pass_index`` (int, the pass of each round).
    The document and summary are recomputed from the pooled rounds
    (:func:`twin.output.live.pooled_summary`). Raises ConfigError naming the file, key and value."""
    from twin.config.bounded import read_json
    from twin.output.live import check_pass_results, pooled_summary, read_passes
    passes = read_passes(run)
    point = read_json(run / PASSES, PASSES)["point"]  # read_passes checked it
    loaded = []
    for i, p in enumerate(passes):
        folder = run / p["folder"]
        if (folder / PASSES).is_file():
            raise ConfigError(run / PASSES, f"passes[{p['pass']}].folder", p["folder"],
                              "is itself measured in passes (one level of passes only)")
        loaded.append(_one_run(folder, node))
        check_pass_results(run, i, p, point, *loaded[-1][:2])
    doc0, s0, _ = loaded[0]
    for p, (doc, s, arr) in zip(passes[1:], loaded[1:]):
        for key in _SAME:
            if _key(doc, s, key) != _key(doc0, s0, key):
                raise ConfigError(run / p["folder"] / "results.json", key, _key(doc, s, key),
                                  f"differs from pass {passes[0]['pass']}'s {_key(doc0, s0, key)!r} "
                                  f"({passes[0]['folder']}): the passes of one point must be the same point")
    for (doc, s, arr), p in zip(loaded, passes):
        if "idle_ns" in arr and len(arr["idle_ns"]) != len(arr["rtt_ps"]):
            raise ConfigError(run / p["folder"] / NPZ, f"{s['node']}.idle_ns", len(arr["idle_ns"]),
                              f"{len(arr['rtt_ps'])} round trips but this many idle times")
    keys = {"rtt_ps", "service_ns"} | ({"idle_ns"} if all("idle_ns" in a for _, _, a in loaded) else set())
    arrays = {k: np.concatenate([a[k] for _, _, a in loaded]) for k in keys}
    if not all(len(a["service_ns"]) == len(a["rtt_ps"]) for _, _, a in loaded):
        arrays["service_ns"] = np.zeros(0, np.int64)  # some pass lacks it: the pooled run has none
    arrays["pass_index"] = np.concatenate([np.full(len(a["rtt_ps"]), p["pass"], np.int64)
                                           for p, (_, _, a) in zip(passes, loaded)])
    doc, s = pooled_summary(doc0, s0, arrays, passes, [d for d, _, _ in loaded], [x for _, x, _ in loaded])
    return doc, s, arrays, passes


def read_live_rounds(run: str | Path, node: str | None = None) -> tuple[dict, dict, dict[str, np.ndarray], list]:
    """A live run folder, or a point measured in passes (a folder with ``passes.json``; pooled by
    :func:`_pooled`): (results document, the live node's summary, per-round arrays ``rtt_ps``,
    ``service_ns``, ``idle_ns`` where recorded, ``pass_index`` for a pooled point; the passes, [] for
    one run). A folder with both passes.json and a results.json is refused (which would it be?)."""
    run = Path(run)
    if (run / PASSES).is_file():
        for name in ("results.json", NPZ):
            if (run / name).exists():
                raise ConfigError(run / name, name, str(run / name), f"beside {PASSES}: a point measured in "
                                  "passes holds its passes' folders only (which rounds would be the point's?)")
        return _pooled(run, node)
    doc, s, arrays = _one_run(run, node)
    return doc, s, arrays, []


def load_live_run(run: Path, node: str | None = None) -> tuple[dict, dict, np.ndarray]:
    """(results.json document, the live node's summary, its per-round rtt in ps) of a live run
    folder or a point measured in passes (:func:`read_live_rounds`). Raises ConfigError naming the
    file when the run has no live node (or not ``node``)."""
    doc, s, arrays, _ = read_live_rounds(run, node)
    return doc, s, arrays["rtt_ps"]


CALIBRATE_HINT = "pass SCENARIO (twin calibrate --from-live RUN SCENARIO)"


def run_scenario(run: Path, doc: dict, summary: dict, hint: str = CALIBRATE_HINT) -> Path:
    """The scenario file a live run came from: the path ``twin run`` recorded (``live.scenario_file``
    in results.json; where that file is gone, ``scenario.yaml`` in the run folder, or for a pass of
    a point measured in passes, whose folder's passes.json lists it, the point's ``scenario.yaml``
    one level up), or for a run that recorded none ``scenarios/<name>.yaml`` beside the working
    folder or the source tree. Raises ConfigError (naming results.json, ending in ``hint``: how to
    give the scenario to the command at hand) when the recorded file is gone or there is none to find."""
    from twin.bundled import local_or_bundled
    res = run / "results.json"
    rec = summary.get("live", {}).get("scenario_file")
    if rec:
        if Path(rec).is_file():
            return Path(rec)
        for folder in (run, run.parent if _is_pass(run) else None):  # committed with its scenario beside it
            if folder is not None and (folder / "scenario.yaml").is_file():
                return folder / "scenario.yaml"
        raise ConfigError(res, "live.scenario_file", rec, f"the run's scenario file is gone; {hint}")
    if doc.get("scenario") is None:
        raise ConfigError(res, "scenario", "<missing>", f"the run recorded no scenario; {hint}")
    guess = local_or_bundled(f"scenarios/{doc['scenario']}.yaml")
    if not guess.is_file():
        raise ConfigError(res, "scenario", doc["scenario"], f"the run recorded no scenario file and there is no "
                          f"{guess}; {hint}")
    return guess


def _is_pass(run: Path) -> bool:
    """Whether ``run`` is a pass of a point measured in passes: its parent's passes.json (which
    must read) lists it."""
    from twin.output.live import read_passes
    parent = run.resolve().parent
    if not (parent / PASSES).is_file():
        return False
    try:
        return any((parent / p["folder"]).resolve() == run.resolve() for p in read_passes(parent))
    except ConfigError:
        return False


def overlap(runs: list, others: list | None = None) -> tuple[Path, str, Path] | None:
    """The first run folder of ``runs`` that is, holds or lies inside a folder of ``others`` (or,
    with ``others`` None, an earlier one of ``runs``), compared resolved: ``(run, words, other)``
    with ``words`` "the same folder as", "inside" or "holding" (a pass folder of a point measured
    in passes is inside it: their rounds are the same rounds); None when there is none."""
    for i, a in enumerate(runs):
        ra = Path(a).resolve()
        for b in (runs[:i] if others is None else others):
            rb = Path(b).resolve()
            if ra == rb or rb in ra.parents or ra in rb.parents:
                return Path(a), ("the same folder as" if ra == rb else "inside" if rb in ra.parents else "holding"), \
                    Path(b)
    return None


def load_run(run: Path, scenario: str | Path | None = None, node: str | None = None,
             hint: str = CALIBRATE_HINT) -> LiveRun:
    """A live run folder, or a point measured in passes, as a :class:`LiveRun`
    (:func:`read_live_rounds`, :func:`run_scenario` with ``hint``; the frame bytes and function are
    the run's own, from results.json). Raises ConfigError."""
    run = Path(run)
    doc, s, arrays, passes = read_live_rounds(run, node)
    rtt, svc, idle = arrays["rtt_ps"], arrays["service_ns"], arrays.get("idle_ns")
    res = run / (PASSES if passes else "results.json")  # what a message names: the pooled point or the run
    for key, where in (("frame_bytes", doc), ("encoding", s), ("name", s), ("node", s)):
        if where.get(key) is None:
            raise ConfigError(res, key, "<missing>", "not a results file of a live `twin run`")
    sc = Path(scenario) if scenario is not None else run_scenario(run, doc, s, hint)
    st = find_live_stalls(svc, rtt)
    if len(st.mask) == len(rtt) and int((~st.mask).sum()) < 100:
        raise ConfigError(res, "live.stalled", f"{st.count} stalled, {st.queued} queued behind",
                          f"only {int((~st.mask).sum())} of {len(rtt):,} rounds neither stalled nor queued behind a "
                          "stalled one: the run measured the machine's preemption, not the device")
    return LiveRun(run, doc, s, rtt, svc, st, sc, int(doc["frame_bytes"]),
                   s.get("function", "echo"), s["encoding"], idle if idle is not None and len(idle) > 1 else None,
                   arrays.get("pass_index"), passes)
