"""The twin's loop as a sinter decoder: decode with any decoder AND time every shot through the loop.

``LoopDecoder(inner, calibration, device, ...)`` is a ``sinter.Decoder``: sinter hands it a detector
error model and batches of bit-packed detection events; it decodes them with ``inner`` (a name of
:mod:`twin.qec.decoders.registry`, e.g. ``"bposd"``, or any ``sinter.Decoder`` instance) and sends
every shot of the batch through the twin's loop to ``device`` (:func:`twin.qec.loop.run_decode`,
the one engine: link card, consumer memory, hosted decoder, reply), returning the loop's
corrections. They must equal ``inner``'s own decode of the same shots byte for byte (else
``RuntimeError``). Each batch's per-request round trips (int64 ps) are kept: in memory
(:attr:`LoopDecoder.rtt_ps`, for a decoder used in this process) and, with ``record_dir``, in one
``.npy`` file per batch named by the model's :func:`dem_key` and the decoder's own ``run`` id
(sinter's workers are other processes). :func:`with_loop_latency` then adds the round-trip
percentiles to sinter's stats, from this decoder's records only (an earlier run's files in the same
folder are never mixed in)::

    import sinter
    from twin.qec.sinter_loop import LoopDecoder, with_loop_latency
    loop = LoopDecoder("bposd", "calibrations/fitted/card_path.yaml", "epyc7282", cost_fixed_ns=190_000,
                       record_dir="loop_rtt")
    stats = sinter.collect(num_workers=2, tasks=tasks, decoders=["loop"], custom_decoders={"loop": loop},
                           max_shots=10_000)
    stats = with_loop_latency(stats, tasks, loop)   # json_metadata gains loop_rtt_p50_ns, ...

sinter gives decoders no way to add to a task's ``custom_counts`` or metadata, hence the record
folder and :func:`with_loop_latency` (it matches records to tasks by the detector error model sinter
derives from each task's circuit, :func:`twin.qec.decoders.sinter_adapter.sinter_dem`).
"""
from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import numpy as np
import sinter
import stim

from twin.stats import percentile_ps


def dem_key(dem: stim.DetectorErrorModel) -> str:
    """A short key for a detector error model: the first 16 hex digits of the sha256 of its text."""
    return hashlib.sha256(str(dem).encode()).hexdigest()[:16]


class LoopDecoder(sinter.Decoder):
    """A ``sinter.Decoder`` that decodes through the twin's loop (module docstring).

    inner: a registry decoder name (not ``function``) or a ``sinter.Decoder`` instance;
    calibration: a parameter-set file (card path or RoCE); device: one of its consumers; mode: a
    hosting mode (``inline``, ``worker``, ...); hosting: the hosting-cost file (default the bundled
    ``calibrations/hosting.yaml``); cost_fixed_ns: the decoder's compute time per request under the
    cost model (None: the model's table, :data:`twin.qec.cost.MODEL_NS`; a kind it lacks raises
    :class:`twin.qec.cost.CostError`); slots, seed: as ``twin decode``; record_dir: folder for the
    round-trip records (created). ``calibration`` and ``hosting`` as given, else (a relative path
    that is not here) the bundled file of that name (:func:`twin.bundled.local_or_bundled`, as the
    commands find theirs: ``calibrations/fitted/card_path.yaml`` works outside a clone too). ``run``: this decoder's id
    (12 hex digits, new for each instance), in its record files' names. Picklable: it holds paths
    and numbers, and loads on compile.
    """

    def __init__(self, inner, calibration: str | Path, device: str, mode: str = "inline",
                 hosting: str | Path | None = None, cost_fixed_ns: float | None = None, slots: int = 16,
                 seed: int = 0, record_dir: str | Path | None = None):
        self.inner, self.calibration, self.device, self.mode = inner, str(calibration), device, mode
        self.hosting, self.cost_fixed_ns, self.slots, self.seed = hosting, cost_fixed_ns, slots, seed
        self.record_dir = None if record_dir is None else str(record_dir)
        self.run = uuid.uuid4().hex[:12]
        self.rtt_ps: dict[str, list[np.ndarray]] = {}

    def compile_decoder_for_dem(self, *, dem: stim.DetectorErrorModel) -> "CompiledLoopDecoder":
        """The inner decoder built for ``dem`` and the loop's parameter sets loaded."""
        from twin.bundled import local_or_bundled
        from twin.calibration.roce import load_any_params
        from twin.qec.decoders.registry import build
        from twin.qec.hosting import HostingParams, load_hosting
        if isinstance(self.inner, str):
            if self.inner == "function":
                raise ValueError("LoopDecoder: a user function is not built from a model; wrap it in a sinter.Decoder")
            dec = build(self.inner, dem, name=self.inner)
        else:
            from twin.qec.decoders.sinter_adapter import SinterDecoder
            dec = SinterDecoder(self.inner, dem, name=type(self.inner).__name__)
        if self.hosting is not None:
            hosting = load_hosting(local_or_bundled(self.hosting))[0]
        else:
            from twin.bundled import bundled_path
            hp = bundled_path("calibrations/hosting.yaml")
            hosting = load_hosting(hp)[0] if hp.is_file() else HostingParams()
        params = load_any_params(local_or_bundled(self.calibration))
        return CompiledLoopDecoder(self, dec, params, hosting, dem_key(dem))


class CompiledLoopDecoder(sinter.CompiledDecoder):
    """A :class:`LoopDecoder` compiled for one detector error model."""

    def __init__(self, owner: LoopDecoder, decoder, params, hosting, key: str):
        self.owner, self.decoder, self.params, self.hosting, self.key = owner, decoder, params, hosting, key
        self.calls = 0

    def decode_shots_bit_packed(self, *, bit_packed_detection_event_data: np.ndarray) -> np.ndarray:
        """Every shot through the loop (closed loop, one request per shot); returns the loop's
        corrections, uint8 (shots, ceil(K/8)). Raises RuntimeError when they differ from the inner
        decoder's own decode of the same shots."""
        from twin.exchange import contract as C
        from twin.qec.cost import CostModel
        from twin.qec.loop import run_decode
        from twin.qec.workload import Workload
        d = np.ascontiguousarray(bit_packed_detection_event_data, np.uint8)
        dec = self.decoder
        if len(d) == 0:
            return np.zeros((0, dec.reply_bytes), np.uint8)
        det = np.unpackbits(d, axis=1, bitorder=C.SYNDROME_NUMPY_BITORDER, count=dec.n_detectors).astype(bool)
        frame = max(16, -(-dec.syndrome_bytes // 16) * 16)
        # the loop needs no ground truth to time and decode; observables are sinter's to count
        w = Workload(f"sinter_{self.key}", None, det, np.zeros((len(d), dec.n_observables), bool), frame)
        o = self.owner
        r = run_decode(self.params, o.device, w, dec, mode=o.mode, hosting=self.hosting,
                       cost=CostModel(fixed_ns=o.cost_fixed_ns), seed=o.seed + self.calls, slots=o.slots,
                       engine="auto")
        self.calls += 1
        if not r.identical:
            raise RuntimeError(f"LoopDecoder: the loop's corrections differ from {dec.name}'s direct decode")
        rtt = np.asarray(r.result.rtt_ps, np.int64)
        o.rtt_ps.setdefault(self.key, []).append(rtt)
        if o.record_dir is not None:
            from twin.output.files import binary, write_file  # whole or not at all: a reader never sees half
            write_file(Path(o.record_dir) / f"{self.key}-{o.run}-{os.getpid()}-{uuid.uuid4().hex[:8]}.npy",
                       binary(lambda f: np.save(f, rtt)))
        return r.corrections


def recorded_rtt_ps(record_dir: str | Path, dem: stim.DetectorErrorModel, run: str | None = None) -> np.ndarray:
    """Every round trip (int64 ps) recorded in ``record_dir`` for ``dem`` by the :class:`LoopDecoder`
    whose ``run`` id is ``run``, in no particular order. ``run`` None: the folder must hold one
    decoder's records for ``dem``; records of several (an earlier run's files left in the folder)
    raise ValueError naming them, rather than being mixed."""
    key = dem_key(dem)
    files = sorted(Path(record_dir).glob(f"{key}-{run}-*.npy" if run else f"{key}-*.npy"))
    if run is None:
        runs = sorted({f.name.split("-")[1] for f in files})
        if len(runs) > 1:
            raise ValueError(f"{record_dir}: records of {len(runs)} LoopDecoder runs for one model "
                             f"({', '.join(runs)}): pass the LoopDecoder itself to with_loop_latency (its run's "
                             "records alone), or empty the folder before a run")
    return np.concatenate([np.load(f) for f in files]) if files else np.zeros(0, np.int64)


def with_loop_latency(stats: list, tasks: list, records: LoopDecoder | str | Path) -> list:
    """``stats`` (``sinter.TaskStats``) with the loop's round trips of each task added: its
    ``json_metadata`` (a dict) gains ``loop_rtt_p50_ns``, ``loop_rtt_p99_ns``, ``loop_requests``
    (from the records for the model sinter derives from the task's circuit). ``records``: the
    :class:`LoopDecoder` that ran (its ``record_dir``, its own run's records alone), or a record
    folder holding one run's (:func:`recorded_rtt_ps`: several runs' raise ValueError). Stats of
    other tasks, or with no records, are returned unchanged."""
    run = records.run if isinstance(records, LoopDecoder) else None
    record_dir = records.record_dir if isinstance(records, LoopDecoder) else records
    if record_dir is None:
        raise ValueError("with_loop_latency: the LoopDecoder has no record_dir (its workers' round trips are not "
                         "kept): give it one")
    from twin.qec.decoders.sinter_adapter import sinter_dem

    def with_decoder(t, decoder):  # sinter fills in a task's decoder (collect(decoders=[...])) and model
        if t.decoder is not None and t.detector_error_model is not None:
            return t
        return sinter.Task(circuit=t.circuit, decoder=t.decoder or decoder,
                           detector_error_model=t.detector_error_model or sinter_dem(t.circuit),
                           postselection_mask=t.postselection_mask,
                           postselected_observables_mask=t.postselected_observables_mask,
                           json_metadata=t.json_metadata)
    out = []
    for s in stats:
        t = next((t for t in tasks if with_decoder(t, s.decoder).strong_id() == s.strong_id), None)
        rtt = recorded_rtt_ps(record_dir, t.detector_error_model or sinter_dem(t.circuit), run) if t else np.zeros(0)
        if len(rtt) and isinstance(s.json_metadata, dict):
            meta = dict(s.json_metadata, loop_rtt_p50_ns=percentile_ps(rtt, 50) / 1000,
                        loop_rtt_p99_ns=percentile_ps(rtt, 99) / 1000, loop_requests=int(len(rtt)))
            s = sinter.TaskStats(strong_id=s.strong_id, decoder=s.decoder, json_metadata=meta, shots=s.shots,
                                 errors=s.errors, discards=s.discards, seconds=s.seconds,
                                 custom_counts=s.custom_counts)
        out.append(s)
    return out
