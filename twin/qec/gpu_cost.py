"""A GPU decoder's service from its measurement in a persistent kernel (issue 30, item 3).

A decoder placed on a GPU costs, per request, what it was measured to cost there: the runtime's C
function of that decoder (``qrt_fn_decode_*``, :mod:`twin.qec.functions`) served live by the cuda
backend's persistent kernel (hw_bridge/c/hb_cuda_kernel.cu) on an NVIDIA H200, its round trip over
the echo's in the same kernel, same run, interleaved (``benchmarks/gpu_decoders.py``; the first
record, ``twin run`` repeats of the lookup decoders: calibrations/measured/gpu_decoders/h200_lookup_kernel.yaml).
The echo's own service is the consumer's calibrated service, so the decoder adds only its measured
excess: the library's dispatch on the on-chip copy and the decoding. Per request
``over_echo_p50 + per_event * (detection events - events_p50)`` (ns, at least 0): the p50 over the echo
is the median request's cost, and with a cost that rises with the events the median request is one with
the median events (``events_p50``; a file without it: ``events_mean``); ``per_event``
fitted on the measured round trips by events (0 where the file has none, e.g. a lookup table; a
negative fitted slope is taken as 0: no decoder does less work on more events, and the lookup tables'
fitted -0.6 and -0.1 ns per event of 2026-12-04 are the fit's noise, not a mechanism).

Nothing else sets a GPU decoder's time: the runtime's general path of calibrations/hosting.yaml
(``general_path_ns``, fitted on the card path's Python user function) applies to a Python user
function only (decoder ``function``), and a decoder no file measured in a persistent kernel is
refused (:func:`refusal`: one line, the physical reason), unless the scenario gives its time
(``decode.cost.fixed``).

Files (``calibrations/measured/gpu_decoders/*.yaml``, schema ``twin.gpu_decoder_measurement/1``):
``measured_at`` (ISO UTC), ``machine`` (gpu, host, versions), ``protocol``; per function name the
over-echo p50 (``over_echo_p50_ns``, or ``over_echo_service_p50_ns`` for a service-alone record), and
optionally ``over_echo_p99_ns``, ``per_event_ns``, ``events_p50``, ``events_mean``, the raw per-repeat
``round_trip_p50_ns`` / ``round_trip_p99_ns`` / ``service_p50_ns`` lists. Where several files measure a
function, the latest ``measured_at`` is used. Carrying: a file is an H200 measurement; on another GPU
it is used unchanged and the description says so (an assumption: a one-thread C function of a
persistent kernel and its dispatch cost about the same on another data-centre GPU).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from twin.config.strict import Strict

SCHEMA = "twin.gpu_decoder_measurement/1"
FOLDER = Path("calibrations") / "measured" / "gpu_decoders"


class _File(Strict):
    schema_: str = Field(alias="schema")
    measured_at: str
    machine: dict
    protocol: str
    command: str | None = None
    service_p50_ns: dict[str, list[float]] = {}
    round_trip_p50_ns: dict[str, list[float]] = {}
    round_trip_p99_ns: dict[str, list[float]] = {}
    over_echo_service_p50_ns: dict[str, float] = {}
    over_echo_p50_ns: dict[str, float] = {}
    over_echo_p99_ns: dict[str, float] = {}
    per_event_ns: dict[str, float] = {}
    events_mean: dict[str, float] = {}
    events_p50: dict[str, float] = {}


@dataclass(frozen=True)
class GpuService:
    """One decoder function's measured service in a persistent kernel: ``function`` (the runtime's
    name, e.g. ``decode_rep3``), ``over_echo_ns`` (p50 over the echo), ``per_event_ns``, ``events_at``
    (the detection events the p50 is taken at: the measured requests' median, or their mean in a file
    without it), ``p99_ns`` (over-echo p99 or None), ``file``,
    ``gpu`` (the machine's GPU), ``measured_at``."""

    function: str
    over_echo_ns: float
    per_event_ns: float
    events_at: float
    p99_ns: float | None
    file: str
    gpu: str
    measured_at: str

    def per_request_ns(self, events: np.ndarray) -> np.ndarray:
        """float ns (n,) for requests with ``events`` detection events each (int (n,))."""
        ev = np.asarray(events, np.float64)
        return np.maximum(0.0, self.over_echo_ns + self.per_event_ns * (ev - self.events_at))

    def describe(self, device: str = "") -> str:
        """One line: what was measured where, and the carrying to ``device`` (a consumer name)."""
        tail = f", p99 {self.p99_ns:.0f} ns (the tail not drawn)" if self.p99_ns is not None else ""
        ev = f", {self.per_event_ns:+.1f} ns per detection event" if self.per_event_ns else ""
        where = f"; used unchanged on {device}" if device else ""
        return (f"{self.function} measured in a persistent kernel on {self.gpu} ({self.measured_at}, {self.file}): "
                f"{self.over_echo_ns:.0f} ns over the echo at p50{ev}{tail}{where}")


def load_services(folder: Path | None = None) -> dict[str, GpuService]:
    """Every function measured in ``folder`` (default: the bundled :data:`FOLDER`), the latest file's
    measurement of each. Raises :class:`twin.config.ConfigError` naming a bad file, key and value."""
    from twin.bundled import bundled_path
    from twin.config import ConfigError, load_model
    root = folder or bundled_path(FOLDER)
    out: dict[str, GpuService] = {}
    for f in sorted(Path(root).glob("*.yaml")):
        doc = load_model(f, _File)
        if doc.schema_ != SCHEMA:
            raise ConfigError(f, "schema", doc.schema_, f"expected {SCHEMA}")
        p50 = {**doc.over_echo_service_p50_ns, **doc.over_echo_p50_ns}
        for fn, v in p50.items():
            slope = max(0.0, float(doc.per_event_ns.get(fn, 0.0)))
            at = doc.events_p50.get(fn, doc.events_mean.get(fn, 0.0))  # the p50's request (module docstring)
            s = GpuService(fn, float(v), slope, float(at),
                           doc.over_echo_p99_ns.get(fn), str(FOLDER / f.name) if folder is None else str(f),
                           str(doc.machine.get("gpu", "a GPU")).split(" (")[0], doc.measured_at)
            if fn not in out or s.measured_at > out[fn].measured_at:
                out[fn] = s
    return out


def kernel_function(decoder) -> str | None:
    """The runtime's C function that computes what ``decoder`` computes (a bundled lookup table,
    ``decode_rep3`` / ``decode_steane7``; the union-find graph of the distance-3 surface code,
    ``decode_uf_surface3``), or None: nothing of it runs in the persistent kernel."""
    from twin.qec.decoders.lookup import LookupDecoder
    from twin.qec.decoders.union_find import UnionFindDecoder
    if isinstance(decoder, LookupDecoder):
        from twin.qec.gen_lookup import TABLES
        from twin.qec.lookup import standard_table
        t = decoder.table
        for name in TABLES:
            s = standard_table(name)
            same = (t.n_detectors, t.n_observables) == (s.n_detectors, s.n_observables)
            if same and np.array_equal(t.table, s.table):
                return f"decode_{name}"
    if isinstance(decoder, UnionFindDecoder):
        from twin.qec.union_find import standard_graph
        if decoder.graph.same_as(standard_graph("surface3")):
            return "decode_uf_surface3"
    return None


def refusal(decoder, services: dict[str, GpuService] | None = None) -> str | None:
    """Why ``decoder`` has no GPU service (one sentence, the physical reason), or None."""
    services = load_services() if services is None else services
    fn = kernel_function(decoder)
    if fn is not None and fn in services:
        return None
    what = (f"its C function {fn} was not measured in a persistent kernel" if fn else
            "it has no C function in the persistent kernel, so nothing measured it there")
    return (f"decoder {decoder.name!r} ({decoder.kind}) on a GPU: {what} ({FOLDER}/ measures "
            f"{', '.join(sorted(services)) or 'none'}); give decode.cost.fixed, or place it on a CPU")


def gpu_service(decoder) -> GpuService:
    """The measured service of ``decoder`` on a GPU; raises ValueError with :func:`refusal`'s line."""
    services = load_services()
    why = refusal(decoder, services)
    if why:
        raise ValueError(why)
    fn = kernel_function(decoder)
    assert fn is not None
    return services[fn]
