"""Model ``code``: a consumer whose behaviour is the real C runtime library.

The library works in place on the twin's bytes: its request queue is the consumer's request
region (the bytes the link card's posted writes landed), and it writes replies into the
consumer's window onto the producer's reply queue. Each reply the library completes is carried
to the card as posted writes in the contract's order (classic: header fields and payload, then
the sequence word; per-piece: one burst). Time is accounted by the consumer's calibrated timing
model, exactly as for ``sim``; only the behaviour changes.
"""
from __future__ import annotations

from twin.devices.consumer import PollingConsumer, make_endpoint
from twin.runtime.callback import callback_address, raise_pending
from twin.runtime.functions import REGISTRY, numba_available
from twin.runtime.native import MAX_FUNCTIONS, NativeEndpoint, c_function_address


class NativeAnswer:
    """The answer part of model ``code``: a consumer's requests served by ``qrt_dispatch_one``.

    The library works in place on consumer ``c``'s request region and writes replies into its own
    window onto the reply queue. Every registered function with a C implementation (or a numba
    build, with the extra installed) is installed in the endpoint's dispatch table (id 0, the echo,
    is the library's own); a function written in Python only is installed as a callback
    (:func:`twin.runtime.callback.callback_address`: the library calls its Python back, an exception
    it raises other than ValueError is raised here as it was). Raises RuntimeError if the poller saw
    a request the library does not find (the two disagree on the contract), and QrtError from the library. Statistics:
    ``native_served``.
    """

    def __init__(self, c: PollingConsumer):
        self.name, self.enc = c.name, c.enc
        self.window = bytearray(c.slots * c.slot_bytes)
        self.endpoint = NativeEndpoint(c.requests.buf, self.window, c.slot_bytes, c.slots, c.enc.name)
        for f in REGISTRY.values():
            if f.id and f.c_symbol:
                self.endpoint.register(f.id, c_function_address(f.c_symbol))
            elif f.id and f.native is not None and numba_available():  # a numba build (the extra); without
                self.endpoint.register(f.id, f.native())              # numba the loader refuses such functions
            elif 0 < f.id < MAX_FUNCTIONS and f.native is None:  # Python only: called back (twin.runtime.callback)
                self.endpoint.register(f.id, callback_address(f))
        self.native_served = 0

    def install(self, function_id: int, address: int) -> None:
        """Serve ``function_id`` with the native function at ``address`` (e.g. a numba cfunc)."""
        self.endpoint.register(function_id, address)

    def answer(self, c: PollingConsumer, seq: int, base: int) -> list[tuple[int, bytes]]:
        """Let the C library claim, run and complete the request; return the reply's writes."""
        served = self.endpoint.dispatch_one()
        raise_pending()  # an exception a Python function raised inside the library's call, as it was raised
        if not served:
            raise RuntimeError(f"{self.name}: the poller saw request {seq} complete but the C runtime did not")
        self.native_served += 1
        h = self.enc.header(self.window, base)
        if h.seq != seq:
            raise RuntimeError(f"{self.name}: the C runtime answered sequence {h.seq}, expected {seq}")
        end = base + self.enc.slot_bytes(h.length)
        if self.enc.per_piece:
            return [(0, bytes(self.window[base:end]))]
        return [(4, bytes(self.window[base + 4:end])), (0, bytes(self.window[base:base + 4]))]

    def shutdown(self) -> None:
        """Nothing to release (the endpoint works on the twin's buffers)."""


def build_endpoint(ctx) -> PollingConsumer:
    """Model ``code`` of a consumer (registered in :mod:`twin.nodes.models`): the consumer of
    :func:`twin.devices.consumer.make_endpoint` answering through the C runtime library."""
    ep = make_endpoint(ctx)
    ep.answerer = NativeAnswer(ep)
    return ep
