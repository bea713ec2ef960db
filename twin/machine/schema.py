"""The machine scenario: ``machine:`` — patches, program, windows, decoder pools, links.

A scenario file::

    name: machine_100q
    seed: 7
    machine:
      cycle: 1 us               # the QEC cycle: every patch measures a syndrome round per cycle
      cycles: 2000              # how long the run lasts, in cycles
      code: surface
      distance: 7
      p: 0.001                  # circuit noise: picks the per-call file (how: measured), the decoded sample (ler:)
      layout: {rows: 10, cols: 10}
      program: {t_rate: 0.1, merge_rate: 0.2}       # per patch per logical step (d cycles)
      window: {kind: streaming, commit: 7, buffer: 7}
      deadline: 20 us           # a decode job's deadline after its data is in (met / missed is counted)
      decoder: {name: matching, cost: {how: measured, call: native}}   # or cost: {fixed: 5 us}
      links:
        syndrome: {kind: aurora, latency: 400 ns}   # control system -> a pool's dispatcher
        correction: {kind: aurora, latency: 400 ns} # a decoder node -> the control system
        fabric: {kind: roce, latency: 2 us}         # decoder node <-> decoder node (boundary data)
        local: 200 ns                               # boundary data between decoders of one node
      pools:
        - name: cpus
          policy: least_loaded  # static | least_loaded | edf
          queue: 256            # jobs waiting in the pool at most; more hold the control side
          nodes:
            - {name: host0, device: epyc9755, decoders: 8}
            - {name: host1, device: epyc9755, decoders: 8}
      ler: {shots: 2000}        # decode a logical step for real, with and without the stalls' rounds
      check: {calls: 5000}      # time real decodes of a job-sized window here against the cost's draw

Every key changes the outcome or is refused at load in one line naming file, key and value
(:class:`twin.config.ConfigError`); every value is of its key's type (:class:`twin.config.strict.StrictTyped`:
``decoders: "24"``, ``rows: 10.0`` or ``shots: true`` are refused, not read as numbers).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator, model_validator

from twin.config.errors import Located
from twin.config.strict import StrictTyped as Strict
from twin.scenario.schema import PLAIN_NAME, Duration

MAX_PATCHES = 20_000
MAX_CYCLES = 10_000_000


class Layout(Strict):
    """Patches on a ``rows`` x ``cols`` grid, row-major: patch ``i`` at (i // cols, i % cols);
    neighbours share an edge (the patches a lattice-surgery merge may join)."""
    rows: int = Field(ge=1, le=1000)
    cols: int = Field(ge=1, le=1000)

    @model_validator(mode="after")
    def _size(self):
        if self.rows * self.cols > MAX_PATCHES:
            raise Located(("rows",), self.rows, f"{self.rows} x {self.cols} patches: at most {MAX_PATCHES:,}")
        return self


class Program(Strict):
    """The logical program, one operation per patch per logical step (``d`` cycles): a T-type gate
    with probability ``t_rate`` (its next operation waits for the correction), a merge with a
    neighbour with probability ``merge_rate`` (paired at random among neighbours that draw one;
    a merge waits for both patches), else a logical idle (memory)."""
    t_rate: float = Field(0.0, ge=0, le=1)
    merge_rate: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _sum(self):
        if self.t_rate + self.merge_rate > 1:
            raise Located(("merge_rate",), self.merge_rate, f"t_rate + merge_rate = {self.t_rate + self.merge_rate:g}: "
                          "each is a share of a patch's steps, they add to at most 1")
        return self


class Window(Strict):
    """The streaming decoder's windows: ``streaming`` (each window commits ``commit`` rounds with
    ``buffer`` rounds of lookahead and hands its boundary to the next: sequential per patch) or
    ``parallel`` (A/B layers in time: A windows independent, each B window fills a seam of ``buffer``
    rounds once both neighbouring A windows are done; :mod:`twin.qec.parallel_window`)."""
    kind: Literal["streaming", "parallel"] = "streaming"
    commit: int = Field(ge=1, le=10_000)
    buffer: int = Field(ge=0, le=10_000)

    @model_validator(mode="after")
    def _seams(self):
        if self.kind == "parallel" and self.buffer == 0:
            raise Located(("buffer",), 0, "parallel windows need seams (buffer >= 1): with none, nothing reconciles "
                          "two A windows and the decode is measurably wrong (docs/qec.md, Window decoders)")
        return self


class Cost(Strict):
    """A job's decoding time: ``fixed`` (every job), or ``how: measured``: a call drawn from the
    decoder's shipped per-call file (``call``: native or through Python; ``file`` another one),
    scaled to the job's detectors."""
    how: Literal["measured", "fixed"] | None = None
    fixed: Duration | None = None
    call: Literal["native", "python"] = "native"
    file: str | None = None

    @model_validator(mode="after")
    def _how(self):
        how = self.how or ("fixed" if self.fixed is not None else "measured")
        if how == "fixed" and self.fixed is None:
            raise Located(("fixed",), "<missing>", "how: fixed needs fixed: a duration (e.g. '5 us')")
        if how == "fixed" and int(self.fixed or 0) <= 0:
            raise Located(("fixed",), self.fixed, "a decoding time must be > 0")
        if how == "measured" and self.fixed is not None:
            raise Located(("fixed",), self.fixed, "applies to how: fixed (how: measured draws from the per-call file)")
        if how == "fixed" and (self.file is not None or self.call != "native"):
            key = "file" if self.file is not None else "call"
            raise Located((key,), getattr(self, key), "applies to how: measured (a fixed time is not drawn)")
        self.how = how
        return self


class Decoder(Strict):
    """The decoder every pool runs (``matching``: PyMatching) and its cost per job."""
    name: Literal["matching"] = "matching"
    cost: Cost = Field(default_factory=Cost)


class Wire(Strict):
    """A link: ``kind`` (the wire model of :mod:`twin.links`) and its one-way ``latency`` on top of
    serialisation, ``jitter`` the mean of an exponential extra wait per transfer."""
    kind: Literal["pcie", "aurora", "roce", "c2c"]
    latency: Duration
    jitter: Duration | None = None


class Links(Strict):
    """The machine's links: syndrome (control system -> a pool's dispatcher), correction (a decoder
    node -> the control system), fabric (between decoder nodes: boundary data), local (boundary
    data between decoders of one node: a shared-memory hand-off)."""
    syndrome: Wire
    correction: Wire
    fabric: Wire
    local: Duration


class Node(Strict):
    """A decoder node: ``decoders`` decoders (cores, or a device's decoding engines) on one
    ``device`` (the class its per-call time is carried to: calibrations/decoder_hosts.yaml)."""
    name: str = Field(pattern=PLAIN_NAME, max_length=64)
    device: str = Field(pattern=PLAIN_NAME, max_length=64)
    decoders: int = Field(ge=1, le=100_000)

    @field_validator("device")
    @classmethod
    def _device(cls, dev: str) -> str:
        known = known_devices()
        if dev not in known:
            raise ValueError(f"not a device of a host class in calibrations/decoder_hosts.yaml (its per-call time "
                             f"could not be carried to it): one of {', '.join(known)}")
        return dev


@lru_cache(maxsize=1)
def known_devices() -> tuple[str, ...]:
    """The devices a node may name: those the host classes of calibrations/decoder_hosts.yaml list
    (:func:`twin.qec.percall.load_hosts`), sorted."""
    from twin.qec.percall import load_hosts
    return tuple(sorted({d for c in load_hosts().classes.values() for d in c.devices}))


class Ensemble(Strict):
    """Each job sent to ``size`` decoders at once: the first answer wins, the other copies are
    cancelled at that instant (a queued copy is dropped, a running one frees its decoder)."""
    size: int = Field(ge=2, le=64)


class Pool(Strict):
    """K decoders on nodes serving the patches ``patches`` = [first, end) (row-major; default every
    patch, with one pool), with a scheduling ``policy``; ``queue``: the jobs that may wait in the
    pool (beyond, the control system holds them: back-pressure)."""
    name: str = Field(pattern=PLAIN_NAME, max_length=64)
    policy: Literal["static", "least_loaded", "edf"] = "least_loaded"
    queue: int | None = Field(None, ge=1, le=10**9)
    ensemble: Ensemble | None = None
    patches: list[int] | None = Field(None, min_length=2, max_length=2)
    nodes: list[Node] = Field(min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _policy(self):
        if self.ensemble is not None and self.policy == "edf":
            raise Located(("ensemble",), "{...}", "an ensemble's copies are placed on decoders when the job arrives; "
                          "edf's shared queue places a job only when a decoder is free (use static or least_loaded)")
        if self.ensemble is not None and self.ensemble.size > self.decoders:
            raise Located(("ensemble", "size"), self.ensemble.size, f"more copies than the pool's {self.decoders} "
                          "decoders")
        names = [n.name for n in self.nodes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise Located(("nodes",), dup, "two nodes of one pool share a name")
        return self

    @property
    def decoders(self) -> int:
        return sum(n.decoders for n in self.nodes)


class LerSample(Strict):
    """Decode ``shots`` of one logical step (a memory experiment of ``d`` rounds) for real, and of
    the step with the run's stalls (a stalled patch keeps streaming rounds: :mod:`twin.machine.ler`)."""
    shots: int = Field(ge=1, le=10_000_000)


class CostCheck(Strict):
    """Time ``calls`` real decodes of a job-sized memory experiment here and print them beside the
    model's draw (:mod:`twin.machine.check`; needs ``cost how: measured``)."""
    calls: int = Field(ge=100, le=1_000_000)


class Machine(Strict):
    """The ``machine:`` section (module docstring)."""
    cycle: Duration
    cycles: int = Field(ge=1, le=MAX_CYCLES)
    code: str = "surface"
    distance: int = Field(ge=3, le=51)
    p: float | None = Field(None, gt=0, lt=0.5)
    layout: Layout
    program: Program = Field(default_factory=Program)
    window: Window
    deadline: Duration | None = None
    decoder: Decoder = Field(default_factory=Decoder)
    links: Links
    pools: list[Pool] = Field(min_length=1, max_length=1000)
    ler: LerSample | None = None
    check: CostCheck | None = None

    @field_validator("code")
    @classmethod
    def _code(cls, c: str) -> str:
        if c != "surface":
            raise ValueError(f"{c[:40]!r}: a machine's patches are rotated surface codes (its windows, seams and "
                             "merges are cut by the patch's rows, columns and rounds; other codes of the registry "
                             "decode in twin decode)")
        return c

    @field_validator("distance")
    @classmethod
    def _odd(cls, d: int) -> int:
        if d % 2 == 0:
            raise ValueError(f"the rotated surface code's distance is odd, got {d}")
        return d

    @model_validator(mode="after")
    def _machine(self):
        if int(self.cycle) <= 0:
            raise Located(("cycle",), self.cycle, "a QEC cycle must be > 0")
        if self.deadline is not None and int(self.deadline) <= 0:
            raise Located(("deadline",), self.deadline, "a job's deadline must be > 0 (leave it out for none)")
        why = self.too_short(self.cycles)
        if why:
            raise Located(("cycles",), self.cycles, why)
        if self.check is not None and self.decoder.cost.how != "measured":
            raise Located(("check",), "{...}", "checks the measured cost's draw: with cost fixed there is none")
        uses_p = self.ler is not None or self.decoder.cost.how == "measured"
        if self.p is None and uses_p:
            raise Located(("p",), "<missing>", "the circuit noise picks the per-call file (cost how: measured) and "
                          "makes the decoded sample (ler): give p, e.g. 0.001")
        if self.p is not None and not uses_p:
            raise Located(("p",), self.p, "picks the per-call file and makes the decoded sample: with cost fixed and "
                          "no ler it changes nothing")
        self._check_pools(self.patches)
        return self

    def _check_pools(self, n: int) -> None:
        names = [p.name for p in self.pools]
        dup = next((x for x in names if names.count(x) > 1), None)
        if dup is not None:
            raise Located(("pools",), dup, "two pools share a name")
        if len(self.pools) == 1 and self.pools[0].patches is None:
            return
        owner = [-1] * n
        for i, p in enumerate(self.pools):
            if p.patches is None:
                raise Located(("pools", i, "patches"), "<missing>", "with several pools each names its patches "
                              "[first, end)")
            lo, hi = p.patches
            if not 0 <= lo < hi <= n:
                raise Located(("pools", i, "patches"), list(p.patches), f"outside the layout's patches [0, {n})")
            for k in range(lo, hi):
                if owner[k] >= 0:
                    raise Located(("pools", i, "patches"), list(p.patches), f"patch {k} is pool "
                                  f"{self.pools[owner[k]].name}'s already")
                owner[k] = i
        if -1 in owner:
            raise Located(("pools",), "[...]", f"patch {owner.index(-1)} has no pool")

    @property
    def patches(self) -> int:
        return self.layout.rows * self.layout.cols

    def too_short(self, cycles: int) -> str | None:
        """Why a run of ``cycles`` cycles shows nothing (None when it is long enough): it must reach the
        first window's last round (commit + buffer, streaming and A windows alike) and one logical step."""
        first = self.window.commit + self.window.buffer
        need = max(first, self.distance)
        if cycles >= need:
            return None
        return (f"the run must reach the first window's last round ({first}: commit + buffer) and one logical step "
                f"({self.distance} rounds): at least {need} cycles")


class MachineScenario(Strict):
    """A machine scenario file (module docstring)."""
    name: str = Field(pattern=PLAIN_NAME, max_length=128)
    description: str = Field("", max_length=2000)
    seed: int = Field(0, ge=0, le=2**63 - 1)
    machine: Machine
