"""Backend ``udp``: a board (or ``python -m hw_bridge.agent``) that serves frames over UDP.

Each round sends the request slot's exact bytes as one datagram to ``settings.host:port`` and
waits for the reply slot's bytes. A reply whose sequence number is not the request's (a late
answer to an earlier round) is discarded and counted (``stale_replies``). Timestamps are
``time.monotonic_ns()`` around the exchange (Python is inside the measured round here: this
backend is for boards across a network, where that is small against the wire). A session starts
with the agent's ``HBHELLO1`` handshake, so the agent expects sequence 1 again, and ends with
``HBBYE001`` so the agent takes a session from another address at once.
"""
from __future__ import annotations

import os
import socket
import struct
import time

from hw_bridge.agent import BYE, HELLO, OK
from hw_bridge.endpoint import BridgeSettings, LiveEndpoint, LiveFailure, LiveReply


class UdpEndpoint(LiveEndpoint):
    """A live consumer across UDP (see module docstring)."""

    backend = "udp"

    def __init__(self, settings: BridgeSettings):
        super().__init__(settings)
        self.sock: socket.socket | None = None
        self.stale_replies = 0
        self._sent_ns = 0

    def open(self, slot_bytes: int, slots: int, encoding: str) -> None:
        """Connect the socket and do the handshake (within the timeout)."""
        self.slot_bytes, self.slots, self.encoding = slot_bytes, slots, encoding
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.connect((self.settings.host, self.settings.port))
        except (OSError, UnicodeError) as e:
            self.close()
            raise LiveFailure("error", 0, f"bridge.host: {self.settings.host}: cannot reach the agent "
                              f"({getattr(e, 'strerror', None) or e})", "udp") from None
        nonce = self._nonce = os.urandom(8)
        self.sock.settimeout(self.settings.timeout_ns / 1e9)
        try:
            self.sock.send(HELLO + nonce)
            while True:
                got = self.sock.recv(65536)
                if got == OK + nonce:
                    break
        except OSError as e:
            self.close()
            raise LiveFailure("error", 0, f"no agent answered at {self.settings.host}:{self.settings.port} ({e})",
                              "udp") from None

    def close(self) -> dict:
        """End the agent's session (``HBBYE001``, best effort: not waited for) and close the socket."""
        if self.sock is not None:
            try:
                self.sock.send(BYE + getattr(self, "_nonce", bytes(8)))
            except OSError:
                pass
            self.sock.close()
            self.sock = None
        return {"stale_replies": self.stale_replies}

    def describe(self) -> str:
        """Backend and the agent's address."""
        return f"udp: agent at {self.settings.host}:{self.settings.port}"

    def deliver(self, seq: int, image: bytes) -> None:
        """Send the request slot image as one datagram."""
        self._sent_ns = time.monotonic_ns()
        try:
            self.sock.send(image)
        except OSError as e:
            raise LiveFailure("dead", seq, f"send failed: {e}", "udp") from None

    def wait_reply(self, seq: int, timeout_ns: int | None = None) -> LiveReply:
        """Receive until the reply to ``seq`` arrives or the timeout passes."""
        timeout = self.settings.timeout_ns if timeout_ns is None else timeout_ns
        deadline = self._sent_ns + timeout
        while True:
            left = deadline - time.monotonic_ns()
            if left <= 0:
                raise LiveFailure("hung", seq, f"no reply within {timeout / 1e6:g} ms (agent down, or the frame "
                                               "rejected: see the agent's counters)", "udp")
            self.sock.settimeout(left / 1e9)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as e:  # e.g. ICMP port unreachable: nobody listens
                raise LiveFailure("dead", seq, f"receive failed: {e}", "udp") from None
            t1 = time.monotonic_ns()
            if len(data) >= 16 and len(data) <= self.slot_bytes and struct.unpack_from("<I", data)[0] == seq:
                self._record(self._sent_ns, t1)
                return LiveReply(seq, data, self._sent_ns, t1)
            self.stale_replies += 1
