"""Every node kind and wire kind of the twin, declared in one place (see :mod:`twin.nodes.declare`).

What each declaration gives by hand is what the code cannot say: the unit, where the number comes
from and one line of meaning. The defaults (and which fields exist) are read from the code — the
devices' dataclasses and the calibration files' settings models — by :func:`_fields`, which
refuses a declaration that names a field the class does not have or, unless ``partial``, leaves
one of its fields out. So a field added to ``LinkCardParams`` without a declaration stops
``twin components`` (and the tests) instead of drifting silently.

Sources: the measured numbers come from public sources, named here by a short name with the seed
file that keeps their text (``amd-qblox-exchange-runtime.txt``: the AMD blog post with Qblox on the
error-correction loop's interconnect and runtime; ``backline-paper-abstract.txt`` and
``backline-announcement.txt``: Lee et al., "Python in the front, party in the Backline: compiling
quantum workloads across CPUs, GPUs, and FPGAs", arXiv, and "From Python to hardware: real-time
classical co-processing with PennyLane, Backline, and AMD", PennyLane blog); docs/sources.md gives
each one's title, authors and address where known. ``calibrations/*.yaml`` record each value's
provenance; "fitted: <file>" names the fitted set; "assumption" says why.
"""
from __future__ import annotations

from twin.nodes.declare import NodeKind, P, Port, Stat, declare, kind, kinds
from twin.nodes.declare import param_fields as _fields

__all__ = ["kind", "kinds"]  # the lookups, every kind declared

SEED = "AMD-Qblox blog (amd-qblox-exchange-runtime.txt, docs/sources.md)"
BACKLINE = "Backline paper and PennyLane blog (backline-paper-abstract.txt, backline-announcement.txt, docs/sources.md)"
FIT_CARD = "fitted: calibrations/fitted/card_path.yaml"
FIT_ROCE = "fitted: calibrations/fitted/backline_roce.yaml"
FIT_HOSTING = "fitted: calibrations/hosting.yaml (at 64 B)"
ROCE_PRIOR = "calibrations/backline_roce.yaml"

LINK_CARD = "twin.devices.linkcard:LinkCardParams"
CONSUMER = "twin.devices.consumer:ConsumerParams"
HOSTING = "twin.qec.hosting:HostingParams"
HOSTED = "twin.qec.hosting:HostingMode"
TRAFFIC = "twin.devices.generator:TrafficParams"
GAPS = "twin.devices.generator:Gaps"
QBLOX = "twin.devices.qblox:QbloxCluster"
FEEDBACK = "twin.devices.qblox:QbloxFeedback"
WAITS = "twin.devices.generator:Waits"
QBLOX_TRIGGERS = ("Qblox documentation, Feedback Trigger Handling (docs.qblox.com/en/main/products/architecture/"
                  "sequencers/trigger_handling.html)")
SEQUENCER = "twin.devices.qblox:QbloxSequencer"
CONTROLLER = "twin.calibration.roce:ControllerModel"
NIC = "twin.calibration.roce:NicModel"
ETHERNET = "twin.calibration.roce:EthernetModel"
AURORA = "twin.links.aurora:Aurora64B66B"
PCIE = "twin.links.pcie:PcieLink"
PATH = "twin.calibration.params:PathModel"
ROCE_PATH = "twin.links.roce:RoceV2Path"
C2C = "twin.links.c2c:NvlinkC2C"
C2C_MODEL = "twin.calibration.params:C2cModel"
CONSUMER_MODEL = "twin.calibration.params:ConsumerModel"
HANDOFF = "twin.calibration.params:HandoffModel"
NVQLINK = "calibrations/nvqlink.yaml (sources in calibrations/measured/nvqlink.yaml)"
NV_C2C = ("NVIDIA Grace Hopper Superchip Architecture whitepaper: NVLink-C2C 900 GB/s total, 450 GB/s per "
          "direction")
PACKETISER = "twin.links.roce:RoceV2Packetiser"


# -- the control system ----------------------------------------------------------------------------

_TRAFFIC = {
    "mode": P("", "scenario", "closed_loop (one request in flight per reply; the seeds' measurement) or "
              "open_loop (one request every period)", "scenario traffic.mode"),
    "rounds": P("", "scenario", "number of requests", "scenario rounds"),
    "frame_bytes": P("B", f"{SEED}: the 64-byte frame of the measured round trips", "request payload size",
                     "scenario frame_bytes"),
    "period_ps": P("ps", "scenario", "open loop: the request period, a whole number of generator clock cycles",
                   "scenario traffic.period"),
    "clock": P("", f"{SEED}: traffic generated on the link card's FPGA, on its own clock",
               "card (phase-locked to the card) or independent (own oscillator, random start phase)",
               "scenario traffic.clock"),
    "clock_ps": P("ps", f"{SEED}: the card's 250 MHz clock", "the generator clock's nominal period",
                  "scenario traffic.clock_period"),
    "ppm": P("ppm", "assumption: 0 (an ideal oscillator)", "independent clock: frequency offset",
             "scenario traffic.ppm"),
    "gap_ps": P("ps", "scenario", "closed loop: extra time between a reply and the next request",
                "scenario traffic.gap"),
    "drift_ppb_per_s": P("ppb/s", "assumption: 0 (no drift)", "independent clock: slow drift of its frequency "
                         "offset", "scenario qblox.drift_ppb_per_s"),
    "offset_ps": P("ps", "derived: a Qblox cluster's first publish instant", "independent clock: fixed delay "
                   "added to every send instant", "derived from scenario qblox"),
    "in_flight": P("", f"{SEED}: one request in flight", "closed loop: requests in flight",
                   "scenario traffic.in_flight"),
    "gaps": P("", "scenario", "random gaps between requests (a Gaps) instead of the fixed period or gap; "
              "none: fixed"),
    "syndrome_bits": P("bit", "derived: a Qblox cluster's measurements x bits per measurement",
                       "bits of each frame that carry the round's acquisitions (the rest is zero padding); 0: the "
                       "frame is counter words", "derived from scenario qblox"),
    "share": P("", "derived: a decode placement's devices", "open loop: this generator's round-robin share of "
               "one stream spread over several consumers (index, count, the stream's requests); none: all of it",
               "derived from scenario decode.placements[].devices"),
    "waits": P("", "scenario; derived: a stim circuit's classically controlled gates", "open loop: requests wait "
               "for earlier requests' corrections (a Waits, in clock edges); none: the fixed period",
               "scenario traffic.program.waits; derived from scenario decode.feedback"),
    "feedback": P("", "derived: a Qblox cluster whose programs wait_trigger/set_cond", "a control program that "
                  "listens to the replies (event engine only); none", "derived from scenario qblox"),
}
_WAITS = {
    "pattern": P("", "scenario (for_round k: every request waits for the one -k before it); derived: a stim "
                 "circuit's classically controlled gates (twin.qec.feedback)", "per request of a shot, the offsets "
                 "of the earlier requests whose corrections it waits for", "scenario traffic.program.waits.for_round; "
                 "derived from scenario decode.feedback and decode.circuit"),
    "then_cycles": P("cycle", "scenario (then / clock_period); derived: (period - decode.feedback.slack) / "
                     "clock_period", "generator cycles from the dependent operation (the corrections back) to the "
                     "request leaving", "scenario traffic.program.waits.then; derived from decode.feedback.slack"),
}
_FEEDBACK = {
    "answer_bit": P("bit", "assumption: bit 0 (a decode study's correction of observable 0)", "the reply's bit "
                    "that is the decoder's answer (little-endian bit order)", "scenario qblox.feedback.answer_bit"),
    "answer_address": P("", "assumption: address 1", "trigger address of the answer (sent when the bit is 1)",
                        "scenario qblox.feedback.answer_address"),
    "ready_address": P("", "assumption: address 2", "trigger address of every reply's arrival (after its answer; "
                       "what wait_trigger waits for)", "scenario qblox.feedback.ready_address"),
    "latency_ns": P("ns", f"{QBLOX_TRIGGERS}: all sequencers receive a trigger 212 ns after it is sent",
                    "trigger network latency (LINQ)", "scenario qblox.feedback.latency_ns"),
    "spacing_ns": P("ns", f"{QBLOX_TRIGGERS}: after 252 ns the network is ready for another trigger",
                    "one trigger at a time on the backplane", "scenario qblox.feedback.spacing_ns"),
    "grid_ns": P("ns", "Qblox documentation v0.10 Feedback: the trigger network operates on a 28 ns time grid "
                 "aligned at wait_sync", "triggers leave on the next grid point", "scenario qblox.feedback.grid_ns"),
}
_GAPS = {
    "kind": P("", "scenario", "fixed, uniform [a, b], exponential (mean a: Poisson arrivals) or file"),
    "a_ps": P("ps", "scenario", "fixed gap, uniform minimum or exponential mean"),
    "b_ps": P("ps", "scenario", "uniform maximum"),
    "values_ps": P("ps", "scenario", "file: the gaps in order, repeated"),
}
_QBLOX = {
    "device": P("", f"{SEED}: the Qblox Cluster", "device name", "scenario qblox.device"),
    "sequencers": P("", "scenario", "the Q1 sequencers (name, Q1ASM program, measurements per round)",
                    "scenario qblox.sequencers"),
    "result_latency_ns": P("ns", "assumption: 0 unless the scenario gives it", "end of an acquisition to its "
                           "result leaving the readout module", "scenario qblox.result_latency_ns"),
    "trigger_network_ns": P("ns", f"assumption: parameterised latency of LINQ ({SEED}: results travel the LINQ "
                            "feedback network)", "the intra-stack feedback network to the module driving the link",
                            "scenario qblox.trigger_network_ns"),
    "bits_per_measurement": P("", "assumption: one bit per ancilla", "syndrome bits per acquisition",
                              "scenario qblox.bits_per_measurement"),
    "clock": P("", f"{SEED}: the Qblox Cluster runs across a cable from an independent clock",
               "independent (own 10 MHz reference) or card (phase-locked, for comparison)", "scenario qblox.clock"),
    "ppm": P("ppm", "assumption: 0", "independent clock: frequency offset", "scenario qblox.ppm"),
    "drift_ppb_per_s": P("ppb/s", "assumption: 0", "independent clock: drift of the offset",
                         "scenario qblox.drift_ppb_per_s"),
    "feedback": P("", "scenario", "how replies reach programs that wait_trigger/set_cond (a QbloxFeedback; none: "
                  "its defaults)", "scenario qblox.feedback"),
}
_SEQUENCER = {
    "name": P("", "scenario", "sequencer name (unique)"),
    "program": P("", "scenario", "its Q1ASM program (timing from twin.devices.q1asm)"),
    "measurements_per_round": P("", "scenario", "acquisitions that make up its share of one round's syndrome"),
}

declare(NodeKind(
    "generator",
    "The control system: issues requests (closed loop, open loop, random gaps) on its clock and takes the "
    "replies. A Qblox Cluster (scenario qblox:) is a generator whose Q1 programs set the traffic; programs that "
    "wait_trigger/set_cond wait for each reply and branch on its answer (twin.devices.qblox.ListeningCluster).",
    params=(_fields(TRAFFIC, _TRAFFIC) + _fields(GAPS, _GAPS, "gaps.") + _fields(QBLOX, _QBLOX, "qblox.")
            + _fields(SEQUENCER, _SEQUENCER, "qblox.sequencers.") + _fields(WAITS, _WAITS, "waits.")
            + _fields(FEEDBACK, _FEEDBACK, "qblox.feedback.")),
    ports=(Port("send", "out", "requests towards the link card (over on_card or an Aurora link), at the send "
                "instant"),
           Port("reply", "in", "a reply is back at the control side")),
    stats=(Stat("sent", "", "requests sent"),
           Stat("received", "", "replies received"),
           Stat("t_send", "ps", "send instant of every request"),
           Stat("qblox.period_ns", "ns", "Qblox: the programs' round period"),
           Stat("qblox.first_publish_ns", "ns", "Qblox: first round's publish instant"),
           Stat("qblox.syndrome_bits", "", "Qblox: syndrome bits per round"),
           Stat("program.stall_ns", "ns", "a program that waits on replies: stall per round (time the program "
                "stood still on its own clock: total, mean, p50, p99, max, rounds stalled)"),
           Stat("program.period_ns", "ns", "a program that waits on replies: nominal (no wait) and effective round "
                "period (the mean gap between rounds; p50, p99)"),
           Stat("program.conditional", "", "Qblox set_cond: conditional instructions run and skipped, by the "
                "reply's answer bit (ran_on_answer_1, ran_on_answer_0, skipped_on_answer_1)")),
))

# -- the link card ---------------------------------------------------------------------------------

_CARD = {
    "clock_ps": P("ps", f"{SEED}: 250 MHz bridge clock (4 ns timing resolution)", "the card's clock; every card "
                  "timestamp is on its grid", "calibration card.clock"),
    "bridge_bits": P("bit", f"{SEED}: whole frames as 512-bit words at 250 MHz", "bridge word: one per cycle",
                     "calibration card.bridge_bits"),
    "engine_land_ps": P("ps", f"{SEED}: 10 ns landing a request in accelerator memory", "the exchange engine "
                        "landing a request", "calibration card.engine_land_ns"),
    "reply_read_ps": P("ps", f"{SEED}: 40 ns reading the reply out of card memory", "reading a reply out",
                       "calibration card.reply_read_ns"),
    "reply_send_ps": P("ps", f"{SEED}: 30 ns sending it back", "sending the reply back towards the link",
                       "calibration card.reply_send_ns"),
    "reply_poll_period_ps": P("ps", "assumption: the card logic checks its own reply queue once a cycle",
                              "reply poller period", "calibration card.reply_poll_period_ns"),
}
_CONTROLLER = {
    "device": P("", f"{BACKLINE}: AMD Versal Premium VPK120 with the ERNIC", "controller device",
                "calibration controller.device"),
    "clock": P("quantity", f"{BACKLINE}: the FPGA's 200 MHz clock (5 ns resolution)", "controller clock",
               "calibration controller.clock"),
    "datapath_bits": P("bit", f"assumption: 512-bit AXI stream datapath ({ROCE_PRIOR})", "datapath word",
                       "calibration controller.datapath_bits"),
    "issue_ns": P("ns", f"assumption: two 200 MHz cycles ({ROCE_PRIOR})", "request in -> RDMA WRITE handed to "
                  "the ERNIC", "calibration controller.issue_ns"),
    "reply_read_ns": P("ns", f"assumption: two 200 MHz cycles ({ROCE_PRIOR})", "reading a landed reply",
                       "calibration controller.reply_read_ns"),
    "ernic_tx_ns": P("ns", f"assumption: not separable from the host path latency ({ROCE_PRIOR})",
                     "ERNIC send queue -> first bit on the wire", "calibration controller.ernic_tx_ns"),
    "ernic_rx_ns": P("ns", f"assumption: not separable from the host path latency ({ROCE_PRIOR})",
                     "ERNIC last bit in -> bytes in FPGA memory", "calibration controller.ernic_rx_ns"),
}

declare(NodeKind(
    "link_card",
    "The Alveo U55C link card: bridge, exchange engine (posts each request into the consumer's request "
    "queue) and reply poller (watches the reply queue in its own memory). On a RoCE route the FPGA "
    "controller (VPK120 + ERNIC, calibration controller:) plays the card.",
    params=_fields(LINK_CARD, _CARD) + _fields(CONTROLLER, _CONTROLLER, "controller."),
    ports=(Port("submit", "in", "requests from the control side, at a card clock edge; frames pass the shared "
                "bridge in arrival order"),
           Port("requests", "out", "posted-write path into the consumer's request queue (slots x slot_bytes)"),
           Port("replies", "memory", "the reply queue, in the card's own memory; the consumer posts its replies "
                "here and the reply poller watches it"),
           Port("on_reply", "out", "each reply (seq, t_in, t_have, ok) towards the control side")),
    stats=(Stat("issued", "", "requests issued into the request queue"),
           Stat("replies_seen", "", "replies read out"),
           Stat("mismatches", "", "replies that did not match the reference answer (results.json: mismatches)"),
           Stat("backlog_max", "", "most requests waiting for a free slot (results.json: backlog_max; twin decode: "
                "card_backlog_max)"),
           Stat("slot_wait_ps", "ps", "per request: ready to issue -> issued, the wait for a free slot"),
           Stat("reply_timeouts", "", "replies not had within faults.timeout (results.json: "
                "faults.detected.reply_timeouts)"),
           Stat("card_polls", "", "reply poller polls (poller.polls)"),
           Stat("reply_digest", "sha256", "digest of every reply read: sequence, status, payload"),
           Stat("hops.t_in", "ps", "per round: the request enters the card"),
           Stat("hops.ready", "ps", "per round: the engine could issue it (a free slot would send it now)"),
           Stat("hops.issue", "ps", "per round: the engine issues its posted writes"),
           Stat("hops.t_have", "ps", "per round: the card has read the reply"),
           Stat("stage.card", "ps", "per round: t_in -> ready (bridge, landing logic; -> issue where no slot wait "
                "is recorded: an RTL card)"),
           Stat("stage.slot_wait", "ps", "per round: ready -> issue, the wait for a free slot"),
           Stat("stage.card_poll", "ps", "per round: reply landed -> read out (poll and reply_read)")),
))

# -- consumers -------------------------------------------------------------------------------------

_CONSUMER = {
    "kind": P("", "calibration consumers.<name>.kind", "cpu (a core), gpu (a persistent kernel) or fpga (logic)",
              "calibration consumers.<name>.kind"),
    "poll_period_ps": P("ps", f"{FIT_CARD} (GPUs: consumers.mi210/mi355x.poll_period_ns); assumption for CPU "
                        "cores (one spin-loop iteration, ~10 ns) and FPGA logic (a 250 MHz clock)",
                        "time between two polls of the request queue",
                        "calibration consumers.<name>.poll_period_ns (fpga: clock_ns)"),
    "poll_cost_ps": P("ps", "assumption: a load that misses after the card's write invalidated the line (~100 ns, "
                      "calibrations/card_path.yaml); GPU: its poll period; FPGA: 0",
                      "a poll's instant to its answer", "calibration consumers.<name>.poll_cost_ns"),
    "service_ps": P("ps", f"{SEED}: the V80's logic answers 28 ns after it sees a request (fpga answer_ns); "
                    "assumption for CPU/GPU echo bodies (calibrations/card_path.yaml)",
                    "the function body: having the request -> the reply's first write",
                    "calibration consumers.<name>.service_ns (fpga: answer_ns)"),
    "encoding": P("", f"{SEED}: GPUs and the EPYC 7282 use per-piece at 64 B; the V80 publishes last",
                  "classic (sequence word last) or per_piece (self-validating 16-byte pieces)",
                  "calibration consumers.<name>.encoding; scenario encoding"),
    "read_ps": P("ps", "assumption: one dependent load (CPU: poll_cost; GPU: one poll period; FPGA: 0)",
                 "classic: the dependent read of the payload after the publish word",
                 "calibration consumers.<name>.read_ns"),
    "piece_check_ps": P("ps", "assumption: checking one 16-byte piece's sequence number (calibrations/card_path.yaml)",
                        "per_piece: per-piece check", "calibration consumers.<name>.piece_check_ns"),
    "fence_ps": P("ps", "assumption: release fence cost (calibrations/card_path.yaml); FPGA: 0, it relies on "
                  "posted-write order", "classic: fence between reply data and ready word",
                  "calibration consumers.<name>.fence_ns"),
    "poll_phase_ps": P("ps", "drawn from the run's seed unless given", "first poll instant (0 <= phase < period)"),
    "preprocess_ps_per_measurement": P("ps", f"assumption: 0 (requests carry detectors); {NVQLINK}: detector "
                                       "formation on the receiving GPU", "host pre-processing per raw measurement "
                                       "(payload bit) before the function: detector formation",
                                       "calibration consumers.<name>.preprocess_ns_per_measurement"),
    "idle": P("ps", "default for a cpu or gpu: its device class's idle prior (calibrations/priors/idle.yaml, fitted "
              "from the H200 host's and the H200's live duty-cycle runs; `idle: none` opts out), none for an fpga; "
              "a live stand-in's own from `twin calibrate --from-live` (docs/calibration.md)",
              "what idling costs: extra service per mechanism as a function of the idle gap (saturating cost * "
              "(1 - exp(-gap/tau)), or a log-gap table)", "calibration consumers.<name>.idle"),
    "modes": P("ps", "default none; fitted from a live run's histogram (docs/calibration.md)",
               "extra modes of the service time: weight, offset, uniform width (a second mode, a tail)",
               "calibration consumers.<name>.service_modes"),
    "idle_mix": P("", "default none; fitted from live duty-cycle runs (docs/calibration.md)",
                  "(gap, fraction) points: how far each service mode moves to its long-idle block after a gap",
                  "calibration consumers.<name>.idle_mix"),
    "host_runtime": P("ps", "default none; measured live by benchmarks/host_runtime.py "
                      "(calibrations/measured/host_runtime/)",
                      "a dispatcher-queue-worker host: enqueue, worker wake-up (spin or futex) and hand-back "
                      "per round, drawn from the measurement by the idle gap (twin.devices.host_runtime)",
                      "scenario nodes[].host_runtime: {file, wake}"),
}
_PLACEMENT = {
    "poll": P("", f"{NVQLINK}: NVLink-C2C placements", "local (the queue in the device's own memory) or c2c (in the "
              "other chip's memory: each poll that sees a request costs the host's c2c.coherence_miss_ns)",
              "calibration consumers.<name>.poll"),
}
_HANDOFF = {
    "to": P("", f"{NVQLINK}: NIC -> GPU -> Grace CPU", "the consumer of the set that serves the request (runs the "
            "function) after the receiving device hands it over through a device queue in its memory",
            "calibration consumers.<name>.handoff.to"),
    "link": P("", f"{NVQLINK}", "c2c (the host's NVLink-C2C) or pcie (the host's PCIe path into host memory)",
              "calibration consumers.<name>.handoff.link"),
}
_HOSTING = {
    "general_path_ps": P("ps", FIT_HOSTING, "runtime's general path for a Python user function on a GPU (dispatch "
                         "by id); a decoder's GPU time is its persistent-kernel measurement (twin.qec.gpu_cost)",
                         "calibrations/hosting.yaml general_path_ns"),
    "worker_handoff_ps": P("ps", FIT_HOSTING, "worker: device-queue push and the worker's poll",
                           "calibrations/hosting.yaml worker_handoff_ns"),
    "omp_self_ps": P("ps", FIT_HOSTING, "external_self: the region's own next/complete and routing",
                     "calibrations/hosting.yaml omp_self_ns"),
    "omp_routed_ps": P("ps", FIT_HOSTING, "external_routed: routing to the region",
                       "calibrations/hosting.yaml omp_routed_ns"),
    "chain_trigger_ps": P("ps", f"{SEED}: the trigger reaches the first kernel in 1.92 us (median)",
                          "chain: median store -> first kernel", "calibrations/hosting.yaml chain_trigger_ns"),
    "chain_trigger_jitter_ps": P("ps", "assumption: exponential, scale = the fitted P2P jitter "
                                 "(calibrations/hosting.yaml)", "chain: the trigger's spread",
                                 "calibrations/hosting.yaml chain_trigger_jitter_ns"),
    "chain_complete_ps": P("ps", "assumption: one MI210 poll period, a load of the completion signal "
                           "(calibrations/hosting.yaml)", "chain: completion signal -> reply",
                           "calibrations/hosting.yaml chain_complete_ns"),
    "rearm_mean_ps": P("ps", FIT_HOSTING, "chain: mean of the host thread's exponential re-arm time",
                       "calibrations/hosting.yaml rearm_mean_ns"),
}
_HOSTED = {
    "mode": P("", f"{SEED}: inline, resident worker, external, kernel chain", "hosting mode: inline, worker, "
              "external_self, external_routed or chain (FPGA logic: inline only; chain: GPU only)",
              "twin decode --hosting"),
    "workers": P("", "scenario (assumption: 1, the seeds' one serving thread)", "parallel decoders sharing the "
                 "request queue (threads, GPU blocks, FPGA units): inline N serving threads, otherwise N hand-off "
                 "executors", "scenario decode.placements[].workers"),
    "order": P("", "scenario", "workers > 1: in_order (a finished reply waits for earlier ones) or as_ready "
               "(replies when done; the card reads replies as they land)", "scenario decode.placements[].order"),
}

declare(NodeKind(
    "consumer",
    "A CPU core, GPU persistent kernel or FPGA logic that polls its request queue, runs the function and "
    "posts the reply into the card's reply queue; one serving thread per node serves its queues first come "
    "first served. Hosting modes (twin decode) set how the function is hosted.",
    params=_fields(CONSUMER, _CONSUMER) + _fields(HOSTED, _HOSTED, "hosting.", partial=True)
    + _fields(HOSTING, _HOSTING, "hosting.") + _fields(CONSUMER_MODEL, _PLACEMENT, "placement.", partial=True)
    + _fields(HANDOFF, _HANDOFF, "handoff."),
    ports=(Port("requests", "memory", "the request queue, in the consumer's memory (host memory for a CPU, "
                "device memory for a GPU or FPGA): slots x slot_bytes; the card posts requests here"),
           Port("reply", "out", "posted-write path into the card's reply queue (classic: data, fence, ready word; "
                "per_piece: one burst)"),
           Port("handoff", "out", "two-stage consumer: posted-write path into the hand-off queue in the serving "
                "device's memory (c2c or pcie); the serving device polls it and replies on reply")),
    stats=(Stat("served", "", "requests served (this queue)"),
           Stat("consumer_polls", "", "polls of the request queue (poller.polls)"),
           Stat("poller.hits", "", "polls that found a request"),
           Stat("poll_phase_ps", "ps", "the poll phase this run used"),
           Stat("threads.served", "", "requests served by the node's serving thread (results.json: shared.threads)"),
           Stat("threads.busy_ps", "ps", "time the serving thread was busy, poll cost included"),
           Stat("hosting.waited_for_rearm", "", "chain: requests that waited for the host to re-arm the chain"),
           Stat("hosting.trigger_ps", "ps", "chain: the trigger's own latency per request"),
           Stat("hosting.executor", "", "workers > 1: which decoder served each request"),
           Stat("hosting.held_ps", "ps", "in_order: per request, how long its finished reply waited for earlier ones"),
           Stat("hosting.decode_busy", "ps", "per request: how long it kept its decoder from the next one"),
           Stat("hops.seen", "ps", "per round: the poll that saw the request has its answer"),
           Stat("hops.start", "ps", "per round: the serving thread takes it"),
           Stat("hops.reply", "ps", "per round: the reply's first posted write"),
           Stat("hops.publish", "ps", "per round: the reply's publishing write"),
           Stat("stage.poll", "ps", "per round: request landed -> the poll that saw it"),
           Stat("stage.queue", "ps", "per round: waiting for the serving thread"),
           Stat("stage.service", "ps", "per round: read, function, compute"),
           Stat("stage.fence", "ps", "per round: release fence before the publishing word"),
           Stat("handed_off", "", "two-stage consumer: requests handed to the serving device"),
           Stat("hops.inner", "ps", "two-stage consumer: per round, the hand-off issued, landed, seen and taken "
                "(h_issue, h_land, h_seen, h_start)"),
           Stat("stage.preprocess", "ps", "two-stage: taken -> handed off (read, detector formation)"),
           Stat("stage.handoff_write", "ps", "two-stage: the hand-off's posted writes, issue -> landed"),
           Stat("stage.handoff_poll", "ps", "two-stage: landed -> the serving device's poll that saw it"),
           Stat("stage.handoff_queue", "ps", "two-stage: waiting for the serving device's thread")),
))

# -- the RoCE route's NIC and switch ------------------------------------------------------------------

_NIC = {
    "device": P("", f"{BACKLINE}: the host's RDMA NIC", "NIC device", "calibration nic.device"),
    "rx_ns": P("ns", f"assumption: NIC receive pipeline, not separable from the host path latency ({ROCE_PRIOR})",
               "packet in -> DMA write issued", "calibration nic.rx_ns"),
    "tx_ns": P("ns", f"assumption: NIC transmit pipeline from doorbell ({ROCE_PRIOR})",
               "doorbell seen -> first bit on the wire", "calibration nic.tx_ns"),
    "doorbell": P("", f"assumption: the reply is posted inline with the doorbell ({ROCE_PRIOR})",
                  "inline or dma_read (the NIC fetches work request and payload)", "calibration nic.doorbell"),
    "dma_read_ns": P("ns", "assumption", "dma_read doorbell: the PCIe read round trip", "calibration nic.dma_read_ns"),
}
_SWITCH = {
    "switch_latency_ns": P("ns", f"assumption: port-to-port latency of a cut-through switch; the measured route "
                           f"has no switch ({ROCE_PRIOR})", "port-to-port latency",
                           "calibration ethernet.switch_latency_ns"),
    "switch_store_and_forward": P("", "assumption: cut-through", "store-and-forward (takes the whole packet "
                                  "before passing it on) or cut-through",
                                  "calibration ethernet.switch_store_and_forward"),
}

declare(NodeKind(
    "nic",
    "The host's RDMA NIC on a RoCE route: receives RDMA WRITEs and DMA-writes them over PCIe into the "
    "consumer's memory; sends the consumer's reply when it rings the doorbell. Part of the RoCE wire model.",
    params=_fields(NIC, _NIC, "nic."),
    ports=(Port("rx", "in", "RDMA WRITE packets from Ethernet (checks ICRC/FCS: one store-and-forward hop)"),
           Port("dma", "out", "the DMA write over the host's PCIe link into the consumer's request queue"),
           Port("doorbell", "in", "the consumer's MMIO doorbell write (calibration doorbell_ns per consumer)"),
           Port("tx", "out", "the reply's RDMA WRITE onto Ethernet")),
    stats=(),
))
declare(NodeKind(
    "switch",
    "An Ethernet switch hop on a RoCE route (port-to-port latency; store-and-forward or cut-through). Part of "
    "the RoCE wire model.",
    params=_fields(ETHERNET, _SWITCH, "ethernet.", partial=True),
    ports=(Port("in", "in", "packets from the previous hop"), Port("out", "out", "packets to the next hop")),
    stats=(),
))

# -- wires -----------------------------------------------------------------------------------------

_LANE_STATS = (Stat("writes", "", "posted writes carried (results.json: shared.lanes.<a->b>.writes)"),
               Stat("bytes", "B", "payload bytes carried"),
               Stat("busy_ps", "ps", "time spent serialising"),
               Stat("reorders_held", "", "writes held back to keep posted-write order"),
               Stat("stage.request_write", "ps", "per round: the request's writes, issue -> landed"),
               Stat("stage.reply_write", "ps", "per round: the reply's publishing write, issue -> landed"))

_AURORA = {
    "lanes": P("", f"{SEED}: four lanes", "bonded lanes", "calibration aurora.lanes"),
    "lane_rate_bps": P("bit/s", f"{SEED}: 10.3125 Gb/s per lane", "line rate per lane", "calibration aurora.lane_rate"),
    "link_stage_ps": P("ps", f"derived: link round trip / 2 - serialisation of a 64 B frame ({FIT_CARD}, "
                       "from calibrations/measured/card_path_64b.yaml)", "both ends' link stages and the cable, one "
                       "direction", "calibration aurora.link_stage_ns"),
}
_PCIE = {
    "generation": P("", "assumption: the U55C's PCIe Gen3 x16 link (calibrations/card_path.yaml)", "PCIe generation "
                    "(transfer rate and line coding)", "calibration hosts.<host>.pcie.generation"),
    "lanes": P("", "assumption: x16", "lanes", "calibration hosts.<host>.pcie.lanes"),
    "max_payload_bytes": P("B", "assumption: MPS 256 B", "MPS: a write is split into ceil(n / MPS) TLPs",
                           "calibration hosts.<host>.pcie.max_payload_bytes"),
    "tlp_header_bytes": P("B", "assumption: 4-DW memory-write header", "TLP header",
                          "calibration hosts.<host>.pcie.tlp_header_bytes"),
    "tlp_overhead_bytes": P("B", "PCIe base specification: Gen3+ STP token and LCRC", "per-TLP framing",
                            "calibration hosts.<host>.pcie.tlp_overhead_bytes"),
    "latency_ps": P("ps", f"{FIT_CARD} (per host and path class)", "one-way latency on top of serialisation",
                    "calibration hosts.<host>.<host_memory|p2p>.latency_ns"),
}
_PATH = {
    "jitter_ns": P("ns", f"{FIT_CARD} (per host and path class)", "scale of the path's exponential extra delay "
                   "(queueing)", "calibration hosts.<host>.<host_memory|p2p>.jitter_ns"),
}
_ROCE = {
    "rate_bps": P("bit/s", "assumption: 100 GbE between the VPK120 and the NIC", "Ethernet line rate",
                  "calibration ethernet.rate"),
    "store_and_forward_hops": P("", "derived: the receiving NIC, plus each store-and-forward switch",
                                "hops that take a whole packet before passing it on", "scenario route"),
    "latency_ps": P("ps", f"derived: ERNIC, switches, cable, NIC and host path latency ({FIT_ROCE})",
                    "fixed one-way latency on top of serialisation", "derived from calibration"),
}
_PACKETISER = {
    "mtu_bytes": P("B", f"assumption: RoCE path MTU 4096 ({ROCE_PRIOR})", "payload bytes per packet",
                   "calibration ethernet.mtu_bytes"),
    "vlan": P("", "assumption: no VLAN tag", "an 802.1Q tag on every frame", "calibration ethernet.vlan"),
}
_CABLE = {
    "cable_ns": P("ns", f"assumption: about 2 m of cable ({ROCE_PRIOR})", "cable per hop",
                  "calibration ethernet.cable_ns"),
}

declare(NodeKind(
    "on_card", "The generator on the link card's own FPGA (the seeds' measurement): frames enter the card at "
    "its clock edges, no wire.", role="link",
    ports=(Port("tx", "in", "frames from the generator"), Port("rx", "out", "frames into the card")),
))
declare(NodeKind(
    "aurora", "Aurora 64B/66B from an external control system to the link card: n // 8 + 1 66-bit blocks per "
    "frame striped over the lanes, plus the link stages.", role="link",
    params=_fields(AURORA, _AURORA),
    ports=(Port("tx", "in", "frames in"), Port("rx", "out", "frames out, lossless and in order")),
))
declare(NodeKind(
    "pcie", "PCIe posted writes (memory-write TLPs) into a device's memory: host memory or peer to peer; "
    "serialised on the link, then the path's latency and exponential jitter.", role="link",
    params=_fields(PCIE, _PCIE) + _fields(PATH, _PATH, "path.", partial=True),
    ports=(Port("tx", "in", "posted writes from the writer"),
           Port("rx", "out", "writes landing in the target memory region, in order")),
    stats=_LANE_STATS,
))
declare(NodeKind(
    "ethernet", "RoCE v2 RDMA WRITEs over UDP/IPv4/Ethernet: packets on the sender's link, store-and-forward "
    "hops, the NIC's DMA write over PCIe.", role="link",
    params=(_fields(ROCE_PATH, _ROCE, partial=True) + _fields(PACKETISER, _PACKETISER, "packetiser.")
            + _fields(ETHERNET, _CABLE, "ethernet.", partial=True)),
    ports=(Port("tx", "in", "RDMA WRITE messages from the sender's RDMA engine"),
           Port("rx", "out", "messages complete in the target memory")),
    stats=_LANE_STATS,
))
_C2C = {
    "bytes_per_s": P("B/s", NV_C2C, "link rate of one direction (measured copies on a GH200: 375 GB/s host-to-device, "
                     "297 GB/s device-to-host, HPCwire report of the KTH study, 2024)",
                     "calibration hosts.<host>.c2c.rate"),
    "latency_ps": P("ps", f"assumption: no published figure quoted ({NVQLINK})", "a store's one-way latency across "
                    "the link", "calibration hosts.<host>.c2c.latency_ns"),
    "coherence_miss_ps": P("ps", f"assumption: no published figure quoted ({NVQLINK})", "a load of a line the other "
                           "chip wrote, served across the link: the cost of a c2c poll that sees a request",
                           "calibration hosts.<host>.c2c.coherence_miss_ns"),
    "line_bytes": P("B", "the 64-byte cache line", "coherence granule: writes serialise in whole lines"),
}
_C2C_JITTER = {
    "jitter_ns": P("ns", "assumption: 0", "scale of the exponential extra delay of each write across the link",
                   "calibration hosts.<host>.c2c.jitter_ns"),
}

declare(NodeKind(
    "c2c", "NVLink-C2C between the CPU and the GPU of a superchip (Grace Hopper, Grace Blackwell): hardware-coherent "
    "loads and stores of the other chip's memory. Writes (a two-stage consumer's hand-off) serialise in cache lines at "
    "the link's rate and land after its latency; a poll of a line the other chip wrote costs a coherence miss. In a "
    "scenario it joins the two consumer nodes of one superchip.", role="link",
    params=_fields(C2C, _C2C) + _fields(C2C_MODEL, _C2C_JITTER, "c2c.", partial=True),
    ports=(Port("tx", "in", "stores from the writing chip"),
           Port("rx", "out", "writes landing in the other chip's memory, in order; coherent loads across it")),
    stats=_LANE_STATS,
))

# -- kinds declared in their own module (a new kind is one file: docs/architecture.md, "Adding a node kind") --
import twin.devices.zhinst  # noqa: E402

declare(twin.devices.zhinst.KIND)
