"""A stop (SIGINT or SIGTERM) that reaches ``twin run`` while it waits out a live consumer that hung
(SIGSTOP) or died (SIGKILL): one repetition, :func:`stop_during_live_failure`, shared by
tests/test_interrupts.py (one repetition in the default suite, ten in a ``slow`` test) and
``benchmarks/live_stop.py`` (the count, recorded in BENCHMARKS.md).

What one repetition does, on a real ``twin run`` of a live shm consumer on this machine:

1. start ``python -m twin run`` (``--rounds 2e6``: far more than run before the stop) and wait
   until its consumer has served ``served`` requests, read from the session's shared memory (the
   consumer's counter at bytes 16..24 of the control block, ``/dev/shm/twin-hb-<pid>-0``): a
   progress marker, not a blind sleep;
2. SIGSTOP (``hang``) or SIGKILL (``die``) the consumer, then, ``delay_s`` later (the twin is
   inside the C wait for the next reply by then), send the signal to the twin;
3. read the twin's stderr and its run folder.

It passes when the twin exits 130 with two lines, the live verdict (node, round, ``being saved``)
and the stop's line (node, round, the rounds completed, the folder), and the folder holds those
rounds exactly as a live failure's partial run (results.json and the manifest ``partial``,
live_rounds.npz with one row per round completed, the failure's kind).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
STOP_LINE = re.compile(r"twin: interrupted while node 'live' waited for its reply to round ([\d,]+) of 2,000,000 "
                       r"\(live shm (hung|dead)\); the ([\d,]+) rounds completed are saved in (.+) \(partial\)")
VERDICT = re.compile(r"twin: error: node 'live': live shm (hung|dead) at round (\d+): .*; ([\d,]+) rounds completed, "
                     r"being saved in (.+)")


def live_scenario(folder: Path, timeout: str, rounds: int = 2_000_000) -> Path:
    """A one-consumer scenario whose consumer is a live shm process (``bridge.timeout``: ``timeout``)."""
    doc = {"name": "live_stop", "calibration": str(ROOT / "calibrations" / "fitted" / "card_path.yaml"), "seed": 5,
           "rounds": rounds, "frame_bytes": 64, "slots": 8,
           "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                     {"name": "live", "kind": "consumer", "device": "epyc7282", "model": "live",
                      "bridge": {"backend": "shm", "timeout": timeout}}],
           "links": [{"from": "gen", "to": "u55c", "kind": "on_card"}, {"from": "u55c", "to": "live", "kind": "pcie"}]}
    p = folder / "live.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def consumer_of(pid: int) -> int | None:
    """The pid of process ``pid``'s live shm consumer child, if running."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            rest = stat[stat.rindex(")") + 2:].split()
            if stat[stat.index("(") + 1:stat.rindex(")")].startswith("hb_shm_consume") and int(rest[1]) == pid:
                return int(d)
    return None


def served(twin_pid: int) -> int:
    """Requests the twin's first live session has served so far (0 before it exists)."""
    try:
        with open(f"/dev/shm/twin-hb-{twin_pid}-0", "rb") as f:
            f.seek(16)
            return int.from_bytes(f.read(8), "little")
    except OSError:
        return 0


@dataclass
class Outcome:
    """One repetition: ``ok`` and, when not, ``why``; ``done`` the rounds saved, ``failed_at`` the
    round the line names, ``verdict_s`` signal -> the live verdict (the end of the wait: the bridge's
    timeout bounds it), ``wait_s`` signal -> exit (the files written)."""

    ok: bool
    why: str = ""
    done: int = 0
    failed_at: int = 0
    wait_s: float = 0.0
    verdict_s: float = 0.0
    returncode: int | None = None
    stderr: str = ""


def stop_during_live_failure(folder: Path, how: str = "hang", sig: int = signal.SIGINT, timeout: str = "2 s",
                             served_first: int = 2000, delay_s: float = 0.2, limit_s: float = 180) -> Outcome:
    """One repetition (see the module docstring) in the empty folder ``folder``."""
    out = folder / "out"
    p = subprocess.Popen([sys.executable, "-m", "twin", "run", str(live_scenario(folder, timeout)), "--out", str(out),
                          "--quiet", "--no-plot"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + limit_s
        while served(p.pid) < served_first:
            if p.poll() is not None:
                return Outcome(False, "the twin ended before serving", returncode=p.returncode,
                               stderr=p.communicate()[1])
            if time.monotonic() > deadline:
                return Outcome(False, "no progress")
            time.sleep(0.01)
        consumer = consumer_of(p.pid)
        if consumer is None:
            return Outcome(False, "no consumer process")
        os.kill(consumer, signal.SIGSTOP if how == "hang" else signal.SIGKILL)
        time.sleep(delay_s)  # the twin waits for the reply that will not come
        p.send_signal(sig)
        t = time.monotonic()
        first = p.stderr.readline()  # the verdict: the wait has ended
        verdict_s = time.monotonic() - t
        _, err = p.communicate(timeout=limit_s)
        wait_s = time.monotonic() - t
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    o = _judge(p.returncode, first + err, out, how, wait_s)
    o.verdict_s = verdict_s
    return o


def _judge(rc: int, err: str, out: Path, how: str, wait_s: float) -> Outcome:
    lines = err.strip().splitlines()
    bad = Outcome(False, "", returncode=rc, stderr=err, wait_s=wait_s)
    if rc != 130 or len(lines) != 2:
        bad.why = f"exit {rc}, {len(lines)} stderr lines"
        return bad
    v, s = VERDICT.fullmatch(lines[0]), STOP_LINE.fullmatch(lines[1])
    if not (v and s):
        bad.why = "lines"
        return bad
    kind = "hung" if how == "hang" else "dead"
    at, done = int(v.group(2)), int(s.group(3).replace(",", ""))
    if not (v.group(1) == s.group(2) == kind and int(s.group(1).replace(",", "")) == at == done + 1
            and int(v.group(3).replace(",", "")) == done and Path(v.group(4)) == Path(s.group(4)) == out):
        bad.why = "the lines disagree"
        return bad
    try:
        doc = json.loads((out / "results.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        with np.load(out / "live_rounds.npz") as z:
            rows = len(z["live.service_ns"])
    except (OSError, ValueError, KeyError) as e:
        bad.why = f"the run folder: {e}"
        return bad
    c = doc["consumers"][0]
    err_doc = c["live"]["error"] or {}
    if not (doc["partial"] is True and manifest["partial"] is True and "live shm" in manifest["partial_reason"]
            and doc["rounds"] == c["rounds"] == rows == done > 0 and err_doc.get("kind") == kind
            and err_doc.get("round") == at and c["mismatches"] == 0):
        bad.why = "the run folder's contents"
        return bad
    return Outcome(True, done=done, failed_at=at, wait_s=wait_s, returncode=rc, stderr=err)
