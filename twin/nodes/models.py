"""The registered models of every node kind (see :mod:`twin.nodes.registry`).

Each refusal states what is physically true of the model, not a gap in the engine: the live
bridge and the Verilated V80 logic serve one request queue; the RTL link card is the U55C's
exchange engine, not a RoCE controller; FPGA logic hosts its function inline.

``supports["blocks"]``: the node blocks of a scenario the model takes (``rtl``, ``bridge``), ``needs``:
those it must have; ``cosim``: co-simulated RTL (it takes a loop's RTL options and ``--trace``);
``real_device``: a real device's times (a run sets model sim's beside them). ``supports["engines"]``:
``direct`` (the direct engine computes it), ``event`` (the simpy reference hosts it), ``compiled`` (the
compiled core, twin/engine/c/core.c, stands for it: the sim and code consumers and the sim link card; what
else the core computes, twin/engine/features.py says).

A consumer's ``supports["decoder_time"]``: where the time its decoder takes comes from,
:data:`COST_MODEL` (``twin.qec.cost``: sim, code) or its own (rtl: the Verilog's cycles; live:
measured); ``supports["workers"]``: parallel decoders on its request queue (``any`` or 1).
"""
from __future__ import annotations

from twin.nodes.registry import MODELS, Model, Situation, function_refusal, model_for, models_for, refusal, register

__all__ = ["MODELS", "COST_MODEL", "Situation", "function_refusal", "model_for", "models_for",
           "refusal"]  # every model registered

RTL_FUNCTIONS = ("echo", "decode_rep3", "decode_steane7")  # the cores of rtl/qrt_functions.v
RTL_MAX_FRAME = 180  # bytes: the RTL's slot images are 2,048 bits wide (rtl/qrt_slot_image.v)
COST_MODEL = "the cost model"  # supports["decoder_time"] of a consumer whose decoder the cost model times


def _fname(s: Situation) -> str:
    return getattr(s.function, "name", "echo")


def _one_stage(s: Situation, what: str) -> str | None:
    if s.stages > 1:
        return (f"{what} serves a request on the device that received it; this consumer hands each request to a "
                "second device through a device queue (calibration consumers.<name>.handoff), which model sim runs")
    return None


def _code_function(fn) -> str | None:
    """Model ``code`` runs the runtime library's C functions, a function with a numba build
    (``native``) when numba is installed, and a function written in Python only (no C, no numba
    build) called back from the library's dispatch table (:mod:`twin.runtime.callback`)."""
    from twin.runtime.functions import has_c_code, numba_available
    from twin.runtime.native import MAX_FUNCTIONS
    if has_c_code(fn):
        return None
    if fn.native is None:
        if fn.id >= MAX_FUNCTIONS:
            return (f"function {fn.name} (id {fn.id}) is Python only, and the runtime library's dispatch table "
                    f"holds ids 1..{MAX_FUNCTIONS - 1}; use model sim")
        return None
    if not numba_available():
        return (f"function {fn.name} runs under model code as a numba build, and numba is not installed "
                "(pip install 'twin[numba]'); or use model sim")
    return None


def _live_function(fn) -> str | None:
    """A live consumer (hw_bridge shm, cuda, udp agent) serves the runtime library's own functions
    only (id 0 or a C symbol)."""
    from twin.runtime.functions import c_refusal
    return c_refusal(fn, "a live consumer")


def _code(s: Situation) -> str | None:
    if _one_stage(s, "the C runtime library"):
        return _one_stage(s, "the C runtime library")
    return _code_function(s.function) if s.function is not None else None


def _live(s: Situation) -> str | None:
    if s.stages > 1:
        return _one_stage(s, "a live endpoint (one process or kernel behind the bridge)")
    if s.queue_pairs > 1:
        return (f"a live endpoint is one consumer process (or kernel) serving one request queue; {s.queue_pairs} "
                "flows are routed to it: route one flow to each live node")
    if s.hosting != "inline":
        return (f"hosting mode {s.hosting} is a timing model of the simulated runtime; a live device hosts its "
                "function as it is built (inline), and its measured time is the service time")
    if "stall" in s.faults:
        return "faults.stall stops a simulated poller; a live consumer is stopped with faults.host_freeze"
    return _live_function(s.function) if s.function is not None else None


def _rtl_consumer(s: Situation) -> str | None:
    if s.device_kind != "fpga":
        return f"model rtl stands for FPGA logic (the V80's exchange logic); this device is a {s.device_kind}"
    if s.queue_pairs > 1:
        return (f"the V80 logic in rtl/qrt_v80.v polls one request queue; {s.queue_pairs} flows are routed to it")
    if _fname(s) not in RTL_FUNCTIONS and s.function is not None and getattr(s.function, "id", 0) >= 0x4000:
        return (f"the V80 logic answers with the Verilog cores of rtl/qrt_functions.v ({', '.join(RTL_FUNCTIONS)}); "
                f"{_fname(s)} is a session decoder with no Verilog core")
    return _rtl_common(s)


def _rtl_common(s: Situation) -> str | None:
    if s.frame_bytes > RTL_MAX_FRAME:
        return f"the RTL's slot images hold frames of at most {RTL_MAX_FRAME} bytes, not {s.frame_bytes}"
    if s.faults:
        return (f"fault injection ({', '.join(sorted(s.faults))}) acts on the behavioural models' writes and "
                "pollers; the RTL's own logic is not altered")
    if s.engine == "direct":
        return "the direct engine computes the behavioural models only; RTL runs in the event engine"
    return None


def _rtl_card(s: Situation) -> str | None:
    if s.path != "card":
        return ("the RTL link card (rtl/qrt_card.v) is the U55C's exchange engine behind an Aurora link; a RoCE "
                "route's controller is an FPGA's ERNIC")
    if s.queue_pairs > 1:
        return f"rtl/qrt_card.v drives one consumer's queue pair; {s.queue_pairs} flows pass this card"
    if _fname(s) not in RTL_FUNCTIONS and s.function is not None and getattr(s.function, "id", 0) >= 0x4000:
        return f"the RTL card checks replies against the bundled functions; {_fname(s)} is a session decoder"
    return _rtl_common(s)


def _sim_consumer(s: Situation) -> str | None:
    if s.stages > 1 and s.queue_pairs > 1:
        return (f"a consumer that hands its requests to a second device serves one request queue; {s.queue_pairs} "
                "flows are routed to it")
    if s.stages > 1 and s.faults:
        return (f"fault injection ({', '.join(sorted(s.faults))}) acts on a one-stage consumer's writes and poller; "
                "this consumer hands each request to a second device")
    if s.stages > 1 and s.engine == "direct":
        return ("a hand-off to a second device runs in the event engine (LoopSpec.event_only); use --engine auto "
                "or event")
    return None


SUPPORT_ALL = {"encodings": ["classic", "per_piece"], "paths": ["card", "roce"], "queue_pairs": "any"}

register(Model("consumer", "sim", "behavioural CPU core / GPU persistent kernel / FPGA logic (calibrated timing)",
               "twin.devices.handoff:build_sim_endpoint",
               {**SUPPORT_ALL, "functions": "any registered function (Python implementation)",
                "faults": ["corrupt_piece", "drop_frame", "stall", "host_freeze"],
                "engines": ["direct", "event", "compiled"],
                "hosting": ["inline", "worker", "external_self", "external_routed", "chain"],
                "stages": "1, or 2: a hand-off to a second device (twin.devices.handoff; event engine only, "
                          "no faults)", "decoder_time": COST_MODEL, "workers": "any"},
               _sim_consumer))
register(Model("consumer", "code", "the C runtime library (qrt.h) serving the twin's bytes; timing as sim",
               "twin.devices.code:build_endpoint",
               {**SUPPORT_ALL, "functions": "functions with C code, a numba build, or Python only (called back)",
                "faults": ["corrupt_piece", "drop_frame", "stall", "host_freeze"], "engines": ["event", "compiled"],
                "hosting": ["inline", "worker", "external_self", "external_routed", "chain"],
                "decoder_time": COST_MODEL, "workers": "any"}, _code, _code_function))
register(Model("consumer", "rtl", "the V80 exchange logic in Verilog (rtl/qrt_v80.v), Verilated, cycle by cycle",
               "twin.rtl.loop:build_consumer_endpoint",
               {"encodings": ["classic", "per_piece"], "paths": ["card", "roce"], "queue_pairs": 1,
                "functions": f"{', '.join(RTL_FUNCTIONS)} or a user's Verilog core (rtl: block)",
                "faults": [], "engines": ["event"], "hosting": ["inline"], "device_kinds": ["fpga"],
                "max_frame_bytes": RTL_MAX_FRAME, "decoder_time": "the Verilog's own cycles", "workers": 1,
                "cosim": "verilator (twin run --trace: VCD)", "blocks": ["rtl"]},
               _rtl_consumer))
register(Model("consumer", "live", "a real device through hw_bridge (shm process, CUDA kernel, UDP agent)",
               "twin.devices.live:build_endpoint",
               {"encodings": ["classic", "per_piece"], "paths": ["card", "roce"], "queue_pairs": 1,
                "functions": "the runtime library's C functions", "faults": ["host_freeze", "corrupt_piece",
                                                                            "drop_frame"],
                "engines": ["event"], "hosting": ["inline"], "decoder_time": "measured on the live device",
                "workers": 1, "blocks": ["bridge"], "needs": ["bridge"],
                "real_device": True}, _live, _live_function))
register(Model("link_card", "sim", "behavioural U55C link card: bridge, exchange engine, reply poller",
               "twin.devices.linkcard:build_endpoint",
               {**SUPPORT_ALL, "faults": ["corrupt_piece", "drop_frame", "timeout"],
                "engines": ["direct", "event", "compiled"]}))
register(Model("link_card", "rtl", "the U55C exchange engine in Verilog (rtl/qrt_card.v), Verilated",
               "twin.rtl.loop:build_card_endpoint",
               {"encodings": ["classic", "per_piece"], "paths": ["card"], "queue_pairs": 1, "faults": [],
                "engines": ["event"], "max_frame_bytes": RTL_MAX_FRAME, "cosim": "verilator (twin run --trace: VCD)"},
               _rtl_card))
register(Model("generator", "sim", "control-side traffic: closed loop, open loop, random gaps, waits on replies "
               "(traffic.program), Qblox programs (listening ones: event engine only)",
               "twin.devices.generator:build_control",
               {"traffic": ["closed_loop", "open_loop", "gaps", "waits", "qblox", "qblox_feedback"],
                "engines": ["direct", "event"]}))
register(Model("zhinst_qccs", "sim", "Zurich Instruments QCCS: rounds on its trigger clock, the loop's reaction "
               "against the published native feedback latency (zhinst-timing-models)",
               "twin.devices.zhinst:build_node", {"traffic": ["open_loop on its trigger"], "engines": ["event"]}))
register(Model("nic", "sim", "RDMA NIC: store-and-forward hop and DMA write (part of the RoCE wire model)",
               "twin.links.roce:RoceV2Path", {"engines": ["direct", "event"]}))
register(Model("switch", "sim", "Ethernet switch hop (part of the RoCE wire model)",
               "twin.links.roce:RoceV2Path", {"engines": ["direct", "event"]}))
