"""Put RTL nodes into one loop of the event model (``model: rtl`` on the link card or the V80)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twin.rtl import build as B
from twin.rtl.cosim import RtlConsumer, RtlLinkCard


@dataclass(frozen=True)
class RtlConfig:
    """RTL choices of one loop.

    function_top / function_sources: a user's function core standing for the bundled
    ``qrt_functions`` (docs/rtl.md), or ``None``. trace_path / trace_first / trace_last: write VCD
    waveforms of the RTL nodes for rounds ``trace_first..trace_last`` into ``trace_path`` (one file
    per node: ``<stem>.<node>.vcd``), or ``trace_path=None``.
    """

    function_top: str | None = None
    function_sources: tuple[str, ...] = ()
    trace_path: str | None = None
    trace_first: int = 1
    trace_last: int = 10

    def trace_file(self, node: str) -> Path | None:
        """The waveform file of ``node`` (``None`` without tracing)."""
        if self.trace_path is None:
            return None
        p = Path(self.trace_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p.with_name(f"{p.stem}.{node}.vcd")


def cycles(ps: int, period_ps: int) -> int:
    """Whole clock cycles covering ``ps`` (rounded up: logic acts on edges)."""
    return -(-int(ps) // int(period_ps))


def rtl_card(spec, kernel, enc, req_path, rep_region, slot_bytes, reference, on_reply, cfg: RtlConfig):
    """The link card's RTL engine for ``spec`` (a LoopSpec), built on first use."""
    lib = B.build(B.card_sources())
    p = spec.card
    if p.bridge_bits != 512:
        raise ValueError(f"loop {spec.name!r}: the RTL card has a 512-bit bridge, the parameter set says "
                         f"{p.bridge_bits}")
    return RtlLinkCard(kernel, "card", lib, enc, req_path, rep_region, spec.slots, slot_bytes, spec.function,
                       reference, on_reply, p.clock_ps, cycles(p.clock_ps + p.engine_land_ps, p.clock_ps),
                       cycles(p.reply_read_ps, p.clock_ps), trace=cfg.trace_file("card"))


def rtl_consumer(spec, kernel, enc, req_region, rep_path, slot_bytes, phase_ps, cfg: RtlConfig):
    """The V80 consumer logic in RTL for ``spec``; its clock period is the consumer's poll period
    (the logic polls once a cycle) and its answer time ``service_ps`` in whole cycles."""
    c = spec.consumer
    if c.kind != "fpga":
        raise ValueError(f"loop {spec.name!r}: model rtl stands for FPGA consumer logic, {spec.name} is a {c.kind}")
    if c.varies:
        raise ValueError(f"loop {spec.name!r}: the RTL logic answers in fixed cycles; an idle cost or service modes "
                         "have no meaning for it")
    srcs = B.consumer_sources(cfg.function_top, tuple(Path(s) for s in cfg.function_sources))
    lib = B.build(srcs)
    return RtlConsumer(kernel, spec.name, lib, enc, req_region, rep_path, spec.slots, slot_bytes,
                       c.poll_period_ps, phase_ps, cycles(c.service_ps, c.poll_period_ps),
                       trace=cfg.trace_file(spec.name))


def _no_faults(ctx) -> None:
    if ctx.spec.faults.active:
        raise ValueError(f"loop {ctx.spec.name!r}: fault injection is not available with model rtl")


def config_of(spec) -> RtlConfig:
    """The RTL choices of ``spec`` (a LoopSpec): its ``rtl`` block, or the defaults."""
    return spec.rtl if spec.rtl is not None else RtlConfig()


def build_card_endpoint(ctx):
    """Model ``rtl`` of a link card (registered in :mod:`twin.nodes.models`)."""
    _no_faults(ctx)
    card = rtl_card(ctx.spec, ctx.kernel, ctx.enc, ctx.req_path, ctx.rep_region, ctx.slot_bytes, ctx.reference(),
                    ctx.on_reply, config_of(ctx.spec))
    if ctx.workload.keep_replies:  # the replies' bytes as the RTL sends them on (a listening control program)
        card.kept_replies = []
    card.writes.hops = ctx.hops
    return card


def build_consumer_endpoint(ctx):
    """Model ``rtl`` of an FPGA consumer (registered in :mod:`twin.nodes.models`)."""
    _no_faults(ctx)
    con = rtl_consumer(ctx.spec, ctx.kernel, ctx.enc, ctx.req_region, ctx.rep_path, ctx.slot_bytes, ctx.phase_ps,
                       config_of(ctx.spec))
    con.writes.hops = ctx.hops
    return con
