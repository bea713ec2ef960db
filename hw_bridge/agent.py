"""``python -m hw_bridge.agent``: serve the exchange layer's frames over UDP for a board on the network.

Each datagram carries one request exactly as it would sit in a request slot (the twin's frame
bytes: classic = 16-byte header + payload; per-piece = whole 16-byte pieces). The agent checks
every datagram before anything runs (:class:`FrameValidator`): its length (at least a header, at
most one slot, and the length the header implies), every piece's sequence number (per-piece),
the sequence number itself (exactly the next one; an older one is a replay, a newer one out of
order) and the function id (only the functions it was started with). A valid frame is served by
the device runtime library (``qrt_dispatch_one`` over a one-slot queue; only the configured
functions are in its dispatch table) and the reply slot's bytes go back to the sender. Anything
else is dropped and counted under its reason (:data:`REASONS`); nothing is executed for it.

A session starts with the control datagram ``HBHELLO1`` + 8 bytes (any nonce): the agent expects
sequence 1 again and answers ``HBOK0001`` + the nonce. Nothing is served outside a session: a frame
before any HELLO, or after the session's BYE, is rejected (``no_session``). The session belongs to
the sender (address and port) whose HELLO opened it: until that sender ends it (``HBBYE001`` +
nonce, answered in kind) or falls silent for ``--session-idle`` seconds, a HELLO or BYE from anyone
else is rejected (``foreign_hello``) and so is a frame (``foreign_sender``), whatever the session's
state, so another program cannot reset, end or feed a session. Every rejected datagram is counted;
one stderr line names each, at most ``--log-rejections`` lines a second (a token bucket: a flood of
junk costs no more than that in output; the lines left out are counted, ``log_suppressed``).
Stats go to stderr on exit (Ctrl-C or SIGTERM; and every ``--stats-every`` seconds).

Binds 127.0.0.1 unless ``--bind`` says otherwise. Usage::

    python -m hw_bridge.agent --port 47000 --function echo --function sum32 --encoding classic
"""
from __future__ import annotations

import argparse
import signal
import socket
import struct
import sys
import threading
import time
from collections import Counter

from twin.exchange.encoding import get_encoding
from twin.runtime.functions import c_refusal, c_served, lookup

HELLO, OK, BYE = b"HBHELLO1", b"HBOK0001", b"HBBYE001"
#: Why a datagram was rejected.
REASONS = ("too_short", "too_long", "bad_length", "torn_piece", "zero_seq", "replay", "out_of_order",
           "unknown_function", "bad_control", "foreign_hello", "foreign_sender", "no_session")
_HDR = struct.Struct("<IHHII")


class TokenBucket:
    """At most ``rate`` events a second on average and ``burst`` at once (a bucket of ``burst``
    tokens refilled at ``rate`` a second; :meth:`take` spends one). ``clock``: seconds, monotonic."""

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic):
        self.rate = rate
        self.burst = rate if burst is None else burst
        self.clock = clock
        self.tokens = self.burst
        self.at = clock()

    def take(self) -> bool:
        """True (and a token spent) if one is left, else False."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class FrameValidator:
    """Checks request datagrams of one session. ``encoding``: "classic" | "per_piece";
    ``slot_bytes``: the largest frame (a slot); ``functions``: the ids served.

    :meth:`check` returns None for a frame to serve (and moves on to the next sequence number) or
    the rejection reason; ``rejected`` counts them by reason, ``accepted`` the good ones."""

    def __init__(self, encoding: str, slot_bytes: int, functions: set[int]):
        self.enc = get_encoding(encoding)
        self.slot_bytes = slot_bytes
        self.functions = frozenset(functions)
        self.expect = 1
        self.accepted = 0
        self.rejected: Counter = Counter()

    def reset(self) -> None:
        """A new session: expect sequence 1."""
        self.expect = 1

    def check(self, data: bytes) -> str | None:
        """None if ``data`` is the next valid request, else the reason (counted)."""
        why = self._why(data)
        if why is None:
            self.accepted += 1
            self.expect = self.expect + 1 if self.expect < 0xFFFFFFFF else 1
        else:
            self.rejected[why] += 1
        return why

    def _why(self, data: bytes) -> str | None:
        n = len(data)
        if n < _HDR.size:
            return "too_short"
        if n > self.slot_bytes:
            return "too_long"
        seq, function, length, _flags, _res = _HDR.unpack_from(data, 0)
        if self.enc.slot_bytes(length) != n:
            return "bad_length"
        if self.enc.per_piece:
            for off in range(16, n, 16):
                if struct.unpack_from("<I", data, off)[0] != seq:
                    return "torn_piece"
        if seq == 0:
            return "zero_seq"
        if seq != self.expect:
            behind = (self.expect - seq) & 0xFFFFFFFF
            return "replay" if 0 < behind < 0x80000000 else "out_of_order"
        if function not in self.functions:
            return "unknown_function"
        return None


def resolve_function(key: str | int):
    """The :class:`twin.runtime.functions.Function` named (or numbered) ``key`` that the agent can
    serve; raises ValueError (one line, no quotes around the message) for an unknown function or one
    without a C implementation (:func:`twin.runtime.functions.c_refusal`, the rule a scenario's
    model live follows too). The "have" list names only the servable functions."""
    try:
        f = lookup(int(key) if str(key).isdigit() else key)
    except KeyError:
        raise ValueError(f"no function {key!r} (have: {', '.join(c_served())})") from None
    why = c_refusal(f, "a live consumer")
    if why:
        raise ValueError(why)
    return f


class Agent:
    """The UDP server (see module docstring). ``functions``: names or ids from
    :mod:`twin.runtime.functions`; each needs a C implementation (the built-in echo is the
    runtime's own). Statistics (:meth:`stats`): ``validator.accepted``, ``validator.rejected`` (by
    reason), ``served``, ``log_suppressed`` (rejection lines left out by the ``log_per_s`` limit;
    ``log``: where the lines go, default stderr)."""

    def __init__(self, functions: list[str], encoding: str = "classic", slot_bytes: int = 1024,
                 bind: str = "127.0.0.1", port: int = 0, session_idle_s: float = 5.0, log_per_s: float = 10.0,
                 log=None):
        from twin.runtime.native import NativeEndpoint, c_function_address

        fns = [resolve_function(f) for f in functions]
        self.fn_ids = {f.id for f in fns}
        self.encoding = encoding
        self.slot_bytes = slot_bytes
        self.validator = FrameValidator(encoding, slot_bytes, self.fn_ids)
        self._req = bytearray(slot_bytes)
        self._rep = bytearray(slot_bytes)
        self._symbols = {f.id: c_function_address(f.c_symbol) for f in fns if f.id}
        self._endpoint_class = NativeEndpoint
        self._new_endpoint(1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((bind, port))
        self.sock.settimeout(0.2)
        self.address = self.sock.getsockname()
        self.served = 0
        self.session_idle_s = session_idle_s
        self.peer = None          # the address that opened the session (HELLO)
        self._session = False     # a HELLO has opened a session (until BYE)
        self._last = 0.0          # monotonic time of the peer's last datagram
        self._stop = threading.Event()
        self._log_bucket = TokenBucket(log_per_s)
        self.log_suppressed = 0
        self._log = log

    def _new_endpoint(self, first_seq: int) -> None:
        self._req[:] = bytes(self.slot_bytes)
        self._rep[:] = bytes(self.slot_bytes)
        self.ep = self._endpoint_class(self._req, self._rep, self.slot_bytes, 1, self.encoding, first_seq=first_seq)
        for fid, addr in self._symbols.items():
            self.ep.register(fid, addr)

    def live(self, now: float | None = None) -> bool:
        """True while a session is open and its peer was heard within ``session_idle_s``."""
        now = time.monotonic() if now is None else now
        return self._session and now - self._last < self.session_idle_s

    def handle(self, data: bytes, addr=None) -> bytes | None:
        """The answer to one datagram from ``addr`` (the sender's (host, port)), or None (rejected,
        counted and, within the log limit, logged). A session belongs to the sender whose HELLO
        opened it: while it is live, a HELLO from anyone else is ``foreign_hello``; a BYE from
        anyone else always is; a frame from anyone else is ``foreign_sender``, and a frame with no
        session (none opened yet, or ended by BYE) ``no_session``."""
        why = None
        out = self._answer(data, addr)
        if isinstance(out, str):
            why, out = out, None
        if why is not None:
            self._rejected(why, addr, len(data))
        return out

    def _answer(self, data: bytes, addr) -> bytes | str | None:
        """The reply, or the reason to reject (a str; the validator's own reasons already counted)."""
        now = time.monotonic()
        if data[:8] in (HELLO, BYE):
            if len(data) != 16:
                return self._count("bad_control")
            if data[:8] == BYE:
                if not self._session:
                    return self._count("no_session")
                if addr != self.peer:
                    return self._count("foreign_hello")
                self._session = False
                return BYE + data[8:]
            if self.live(now) and addr != self.peer:
                return self._count("foreign_hello")
            self.validator.reset()
            self._new_endpoint(1)
            self.peer, self._session, self._last = addr, True, now
            return OK + data[8:]
        if not self._session:
            return self._count("no_session")
        if addr != self.peer:
            return self._count("foreign_sender")
        self._last = now
        why = self.validator.check(data)
        if why is not None:
            return why
        # the frame lands in the one request slot: every byte but the sequence word, then that word
        self._req[4:len(data)] = data[4:]
        self._req[len(data):] = bytes(self.slot_bytes - len(data))
        self._req[0:4] = data[0:4]
        if not self.ep.dispatch_one():
            raise RuntimeError("the runtime did not claim a frame the validator accepted")
        self.served += 1
        length = _HDR.unpack_from(self._rep, 0)[2]
        return bytes(self._rep[:get_encoding(self.encoding).slot_bytes(length)])

    def serve(self, stats_every: float = 0.0) -> None:
        """Serve until :meth:`stop` (or Ctrl-C)."""
        last = time.monotonic()
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                data = None
            if self._stop.is_set():  # stop()'s wake-up datagram, or one that came with it: not served
                break
            if data is not None:
                out = self.handle(data, addr)
                if out is not None:
                    self.sock.sendto(out, addr)
            if stats_every and time.monotonic() - last >= stats_every:
                last = time.monotonic()
                print(self.stats_line(), file=sys.stderr, flush=True)

    def stop(self) -> None:
        """Make :meth:`serve` return at once: an empty datagram to the agent's own address wakes
        its wait for the next datagram (else it would notice within the socket's 0.2 s timeout)."""
        self._stop.set()
        host, port = self.address[:2]
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"", ("127.0.0.1" if host == "0.0.0.0" else host, port))
        except OSError:
            pass  # the timeout still ends the wait

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def _count(self, why: str) -> str:
        self.validator.rejected[why] += 1
        return why

    def _rejected(self, why: str, addr, nbytes: int) -> None:
        """One log line for a rejected datagram, if the token bucket allows; else counted as left out."""
        if not self._log_bucket.take():
            self.log_suppressed += 1
            return
        who = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)
        print(f"hw_bridge.agent: rejected {nbytes}-byte datagram from {who}: {why}", file=self._log or sys.stderr,
              flush=True)

    def stats(self) -> dict:
        """The counters: served, accepted, rejected (by reason, every reason present), rejected_total,
        log_suppressed."""
        rej = {r: int(self.validator.rejected.get(r, 0)) for r in REASONS}
        return {"served": self.served, "accepted": self.validator.accepted, "rejected": rej,
                "rejected_total": sum(rej.values()), "log_suppressed": self.log_suppressed}

    def stats_line(self) -> str:
        """One line: served, accepted, rejected by reason, rejection lines left out."""
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.validator.rejected.items())) or "none"
        return (f"hw_bridge.agent: served {self.served}, accepted {self.validator.accepted}, rejected: {rej}; "
                f"{self.log_suppressed} rejection lines left out")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block): ``hw_bridge.agent: error: argument --OPT: VALUE:
    why``, exit 2."""

    def error(self, message: str):
        self.exit(2, f"hw_bridge.agent: error: {message} (see --help)\n")


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v}: a UDP port is 0..65535 (0: any free port)")
    return v


#: The largest slot: one request is one datagram, and an IPv4 UDP datagram carries at most 65,535 - 20
#: (IP header) - 8 (UDP header) = 65,507 bytes (RFC 768, RFC 791); the largest multiple of 16 in it.
MAX_SLOT_BYTES = 65_507 // 16 * 16


def _slot_bytes(text: str) -> int:
    shown = text if len(text) <= 40 else text[:37] + "..."
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown!r}: not a whole number") from None
    if v < 32 or v % 16 or v > MAX_SLOT_BYTES:
        raise argparse.ArgumentTypeError(f"{shown}: a slot is a multiple of 16 bytes, at least 32 (the runtime "
                                         f"library's rule) and at most {MAX_SLOT_BYTES:,} (one request is one UDP "
                                         "datagram, at most 65,507 bytes over IPv4)")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number of seconds") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number of seconds >= 0")
    return v


def _per_second(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number of lines a second") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number of lines a second >= 0 (0: none)")
    return v


def _function(text: str) -> str:
    try:
        return resolve_function(text).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point. Bad options: one line naming the option and value, exit 2. Prints
    the counters on exit: Ctrl-C (SIGINT) or SIGTERM."""
    ap = _Parser(prog="python -m hw_bridge.agent", description=__doc__.splitlines()[0])
    ap.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1: loopback only)")
    ap.add_argument("--port", type=_port, default=0, help="UDP port (default 0: any free port, printed)")
    ap.add_argument("--function", action="append", required=True, type=_function,
                    help="a function to serve, by name or id (repeat); nothing else is executed")
    ap.add_argument("--encoding", choices=("classic", "per_piece"), default="classic")
    ap.add_argument("--slot-bytes", type=_slot_bytes, default=1024,
                    help="largest frame accepted (a slot), bytes: a multiple of 16, at least 32")
    ap.add_argument("--stats-every", type=_seconds, default=0.0, help="print counters every N seconds")
    ap.add_argument("--session-idle", type=_seconds, default=5.0,
                    help="seconds of silence after which another sender may open a new session (default 5)")
    ap.add_argument("--log-rejections", type=_per_second, default=10.0, metavar="N",
                    help="at most N lines a second naming a rejected datagram (default 10, 0: none; all are "
                         "counted)")
    a = ap.parse_args(argv)
    try:
        agent = Agent(a.function, a.encoding, a.slot_bytes, a.bind, a.port, a.session_idle, a.log_rejections)
    except OSError as e:
        print(f"hw_bridge.agent: error: --bind {a.bind} --port {a.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    except (KeyError, ValueError) as e:
        print(f"hw_bridge.agent: error: {e}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: agent.stop())  # before "serving" is said
    print(f"hw_bridge.agent: serving {sorted(agent.fn_ids)} ({a.encoding}) on {agent.address[0]}:{agent.address[1]}",
          file=sys.stderr, flush=True)
    try:
        agent.serve(a.stats_every)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        print(agent.stats_line(), file=sys.stderr, flush=True)
        agent.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
