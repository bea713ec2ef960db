"""Mutations of the input surfaces beside the scenario files (issue 29), for tests/test_fuzz_surfaces.py
and benchmarks/fuzz_scenarios.py ``--surfaces``: stim circuits (``decode.circuit``), Q1ASM programs
(``qblox.sequencers[].program``) and live run folders (``twin calibrate --from-live`` / ``twin
validate``). Each :func:`attempt_*` writes its mutant, reads it with the real reader under a time
limit and returns an :class:`scenario_mutations.Outcome`: refused (one line that starts with the file
it names), accepted, or what the fuzzer counts against the twin (traceback, hang, bad_message).
"""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import numpy as np
import yaml
from hypothesis import strategies as st
from scenario_mutations import ROOT, Hang, Outcome, base_doc, limit

CIRCUITS = sorted((ROOT / "scenarios").glob("*.stim"))
FEEDBACK = ROOT / "scenarios" / "decode_feedback_ler.yaml"
USER = ROOT / "scenarios" / "decode_user_circuit.yaml"
QBLOX = [ROOT / "scenarios" / n for n in ("qblox_cluster.yaml", "qblox_feedback.yaml", "decode_qblox_feedback.yaml")]

HOSTILE_LINES = ["DETECTOR rec[-1]", "DETECTOR rec[-100000]", "CX rec[-1] 0", "CX rec[-50] 3", "X_ERROR(1) 0",
                 "X_ERROR(1) 1", "OBSERVABLE_INCLUDE(0)", "OBSERVABLE_INCLUDE(3)", "OBSERVABLE_INCLUDE(9999) rec[-1]",
                 "M 0", "MPP X0*Z1 Y2", "MR 0 1 2", "REPEAT 1000000000000 {", "REPEAT 1000000000 {", "REPEAT 0 {",
                 "REPEAT ٣ {", "}", "{", "H " + "0 " * 5000, "DEPOLARIZE1(1.5) 0", "TICK", "QUBIT_COORDS(1e308) 0",
                 "SHIFT_COORDS(nan)", "DETECTOR(0, 0) rec[-1] rec[-1]", "X_ERROR(0.1) 99999999", "HERALDED_ERASE(1) 0",
                 "M !0", "CX sweep[5] 0", "REPEAT[tag] 5 {", "MPAD 1", "\x00", "M 0 # comment {"]
NUMBERS = ["0", "1", "-1", "4294967296", "1e9", "٣", "３", "7_00", "0x10", "1" * 30, "nan", "1000000000000"]


# -- stim circuits ----------------------------------------------------------------------------------
def circuit_op():
    """One edit of a circuit's lines: insert, replace a number, repeat or wrap a span, delete."""
    at = st.integers(0, 200)
    return st.one_of(
        st.tuples(st.just("insert"), at, st.sampled_from(HOSTILE_LINES)),
        st.tuples(st.just("number"), at, st.sampled_from(NUMBERS)),
        st.tuples(st.just("wrap"), at, st.integers(1, 30), st.sampled_from([2, 1000, 10**6, 10**9, 10**12])),
        st.tuples(st.just("nest"), at, st.sampled_from([17, 100, 3000, 100_000])),
        st.tuples(st.just("copy"), at, st.sampled_from([2, 100, 3000])),
        st.tuples(st.just("delete"), at),
    )


def circuit_cases():
    """(circuit file index, edits, decoder, with feedback)."""
    return st.tuples(st.integers(0, len(CIRCUITS) - 1), st.lists(circuit_op(), min_size=1, max_size=4),
                     st.sampled_from(["matching", "lookup"]), st.booleans())


def _edit(lines: list[str], op: tuple) -> list[str]:
    kind, at = op[0], op[1] % (len(lines) + 1)
    if kind == "insert":
        return lines[:at] + [op[2]] + lines[at:]
    if kind == "number" and lines:
        i = at % len(lines)
        words = lines[i].split(" ")
        for j in range(len(words) - 1, 0, -1):
            if any(ch.isdigit() for ch in words[j]):
                words[j] = "".join(op[2] if ch.isdigit() else ch for ch in words[j][:1]) + words[j][1:]
                break
        return lines[:i] + [" ".join(words)] + lines[i + 1:]
    if kind == "wrap":
        span = lines[at:at + op[2]]
        return lines[:at] + [f"REPEAT {op[3]} {{"] + span + ["}"] + lines[at + op[2]:]
    if kind == "nest":
        return lines[:at] + ["REPEAT 1 {"] * op[2] + ["M 0"] + ["}"] * op[2] + lines[at:]
    if kind == "copy" and lines:
        return lines[:at] + [lines[at % len(lines)]] * op[2] + lines[at:]
    if kind == "delete" and lines:
        i = at % len(lines)
        return lines[:i] + lines[i + 1:]
    return lines


def render_circuit(index: int, ops: list) -> str:
    lines = CIRCUITS[index].read_text(encoding="utf-8").splitlines()
    for op in ops:
        lines = _edit(lines, op)
    return "\n".join(lines) + "\n"


def _refusal(e: Exception, named: tuple[str, ...], dt: float) -> Outcome:
    msg = str(e)
    if "\n" in msg or not msg.startswith(named) or len(msg) > 800:
        return Outcome("bad_message", msg[:2000], dt)
    return Outcome("refused", msg, dt)


def _attempt(call, refusal: type[Exception], named: tuple[str, ...], seconds: float, hang: str = "") -> Outcome:
    """``call()`` under the time limit, classified: ``refused`` (a ``refusal`` whose one line starts
    with one of ``named``; otherwise ``bad_message``), ``hang`` (``hang`` before its detail),
    ``traceback`` (anything else raised) or ``accepted``."""
    t0 = time.perf_counter()
    try:
        with limit(seconds):
            call()
    except refusal as e:
        return _refusal(e, named, time.perf_counter() - t0)
    except Hang as e:
        return Outcome("hang", f"{hang}{e}", time.perf_counter() - t0)
    except BaseException:  # noqa: BLE001 (what the fuzzer counts)
        return Outcome("traceback", traceback.format_exc(), time.perf_counter() - t0)
    return Outcome("accepted", "", time.perf_counter() - t0)


def attempt_circuit(case: tuple, folder: Path, seconds: float = 20) -> Outcome:
    """Load a decode scenario whose ``decode.circuit`` is the mutant (``case``: :func:`circuit_cases`)."""
    from twin.config import ConfigError
    from twin.qec.load import load_decode
    index, ops, decoder, feedback = case
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "c.stim").write_text(render_circuit(index, ops), encoding="utf-8")
    doc = base_doc(FEEDBACK if feedback else USER)
    doc["decode"].update(circuit="c.stim", decoder=decoder, shots=10)
    for k in ("function", "window"):
        doc["decode"].pop(k, None)
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return _attempt(lambda: load_decode(path), ConfigError, (f"{path}: ",), seconds, hang="load: ")


# -- Q1ASM ------------------------------------------------------------------------------------------
def programs() -> list[str]:
    out = []
    for f in QBLOX:
        for s in yaml.safe_load(f.read_text(encoding="utf-8"))["qblox"]["sequencers"]:
            out.append(s["program"])
    return out


PROGRAMS = programs()
Q1_BITS = [" " * 64_000, "\t" * 1000, "٣", "３", "7_00", "0x100000003", "4294967296", "-2147483649", "0b2", "R64",
           "@nowhere", "#", ":", "x:", "::", "Wait", "\x00", "9" * 200, ",", ",,,", "@", "R", "-0", "0x", "é"]


def q1asm_cases():
    """(program index, [(line, column, text inserted or replacing a token)])."""
    edit = st.tuples(st.integers(0, 60), st.integers(0, 40), st.sampled_from(Q1_BITS), st.booleans())
    return st.tuples(st.integers(0, len(PROGRAMS) - 1), st.lists(edit, min_size=1, max_size=4))


def render_program(index: int, edits: list) -> str:
    lines = PROGRAMS[index].splitlines()
    for line, col, text, replace in edits:
        i = line % len(lines)
        s = lines[i]
        c = col % (len(s) + 1)
        if replace:  # the token at c
            end = c
            while end < len(s) and s[end] not in " ,":
                end += 1
            lines[i] = s[:c] + text + s[end:]
        else:
            lines[i] = s[:c] + text + s[c:]
    return "\n".join(lines) + "\n"


def attempt_q1asm(case: tuple, seconds: float = 10) -> Outcome:
    """Parse and run the mutant program (``case``: :func:`q1asm_cases`) alone."""
    from twin.devices.q1asm import Q1AsmError, Sequencer
    text = render_program(*case)
    return _attempt(lambda: Sequencer("s", text).run(), Q1AsmError, ("sequencer 's': ", "line "), seconds)


# -- live run folders ---------------------------------------------------------------------------------
JSON_VALUES = ["NaN", "Infinity", "-1", "0", "1e999", '"../../x"', '"/tmp/x"', '".."', "null", "[]", "{}", "true",
               '"' + "x" * 100_000 + '"', "[" * 5000 + "]" * 5000, "9" * 5000, '"64"', "-64"]
JSON_PATHS = [("scenario",), ("frame_bytes",), ("consumers",), ("consumers", 0), ("consumers", 0, "node"),
              ("consumers", 0, "name"), ("consumers", 0, "encoding"), ("consumers", 0, "live"),
              ("consumers", 0, "live", "scenario_file"), ("consumers", 0, "function")]
NPZ_EDITS = ["huge_shape", "more_than_held", "object", "float", "negative", "truncate", "not_zip", "missing",
             "two_d", "symlink_loop", "empty"]


def run_cases():
    """(JSON edits [(path, value or None to delete)], NPZ edit or None)."""
    js = st.lists(st.tuples(st.sampled_from(JSON_PATHS), st.one_of(st.none(), st.sampled_from(JSON_VALUES))),
                  max_size=3)
    return st.tuples(js, st.one_of(st.none(), st.sampled_from(NPZ_EDITS)))


def _set(doc: dict, path: tuple, raw: str | None) -> None:
    cur = doc
    for k in path[:-1]:
        try:
            cur = cur[k]
        except (KeyError, IndexError, TypeError):
            return
    if not isinstance(cur, (dict, list)):
        return
    if raw is None:
        if isinstance(cur, dict):
            cur.pop(path[-1], None)
        return
    try:
        cur[path[-1]] = {"__raw__": raw}
    except (IndexError, TypeError):
        return


def _dumps(doc) -> str:
    """JSON with raw values spliced in (NaN, 10^5 brackets: what json.dumps would not write)."""
    if isinstance(doc, dict) and set(doc) == {"__raw__"}:
        return doc["__raw__"]
    if isinstance(doc, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v)}" for k, v in doc.items()) + "}"
    if isinstance(doc, list):
        return "[" + ", ".join(_dumps(v) for v in doc) + "]"
    return json.dumps(doc)


def _npz_edit(npz: Path, how: str) -> None:
    import io
    import zipfile

    from numpy.lib import format as npformat
    with np.load(npz) as z:
        arrays = dict(z)
    key = next(k for k in arrays if k.endswith(".rtt_ps"))

    def member(shape, dtype="<i8", payload=b"\0" * 800):
        buf = io.BytesIO()
        npformat.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
        with zipfile.ZipFile(npz, "w") as zf:
            zf.writestr(key + ".npy", buf.getvalue() + payload)
    if how == "huge_shape":
        member((750_000_000,))
    elif how == "more_than_held":
        member((1000, 1000))
    elif how == "object":
        member((10,), "|O")
    elif how in ("float", "negative", "two_d", "empty", "missing"):
        a = arrays[key]
        arrays[key] = {"float": a.astype(np.float64), "negative": a - a.max() - 1, "two_d": a.reshape(-1, 2)
                       if len(a) % 2 == 0 else a[None], "empty": a[:0], "missing": None}[how]
        np.savez(npz, **{k: v for k, v in arrays.items() if v is not None})
    elif how == "truncate":
        data = npz.read_bytes()
        npz.write_bytes(data[:len(data) // 2])
    elif how == "not_zip":
        npz.write_bytes(b"PK\x03\x04" + b"\xff" * 100)
    elif how == "symlink_loop":
        npz.unlink()
        npz.symlink_to(npz.parent / "loop")
        (npz.parent / "loop").symlink_to(npz)


def attempt_run(base: Path, case: tuple, folder: Path, seconds: float = 20) -> Outcome:
    """Copy the live run folder ``base`` to ``folder``, mutate it (``case``: :func:`run_cases`) and
    read it as ``twin calibrate --from-live`` does (:func:`twin.fitting.live_runs.load_run`)."""
    import shutil

    from twin.config import ConfigError
    from twin.fitting.live_runs import load_run
    edits, npz_edit = case
    run = folder / "run"
    shutil.copytree(base, run, symlinks=True)
    doc = json.loads((run / "results.json").read_text())
    for path, raw in edits:
        _set(doc, path, raw)
    (run / "results.json").write_text(_dumps(doc))
    if npz_edit:
        _npz_edit(run / "live_rounds.npz", npz_edit)
    return _attempt(lambda: load_run(run), ConfigError, (f"{run}",), seconds)


# -- gaps files (traffic.gaps: {distribution: file}) ----------------------------------------------------
GAP_LINES = ["1 us", "0 ns", "0", "-1 ns", "1e400 ns", "1e-400 ns", "nan ns", "inf us", "٣ ns", "３ ns", "1_000 ns",
             "999999999999999 s", "1001 s", "1000 s", "1 parsec", " " * 64_000, "#", "# only a comment", "\x00",
             "1 us # c", "1us", "1 µs", "1 μs", "0x10 ns", "1e3 ns", "\ufeff1 us", "1 us 2 us", "", "1" * 5000 + " ns",
             "4 ns", "0.001 ps", "1 ps", "-0 ns", "+5 ns", "5 NS", "\u202e5 ns"]
GAP_BASE = ROOT / "scenarios" / "card_path_64b.yaml"


def gaps_cases():
    """([(line, times)], traffic mode, rounds, whether to run the accepted ones, raw bytes appended)."""
    line = st.tuples(st.sampled_from(GAP_LINES), st.sampled_from([1, 3, 1000, 100_000]))
    return st.tuples(st.lists(line, min_size=0, max_size=5), st.sampled_from(["open_loop", "closed_loop"]),
                     st.sampled_from([50, 10**6, 10**8, 10**12]), st.booleans(),
                     st.sampled_from([b"", b"\xff\xfe", b"\x00" * 10, b"\xe2\x82"]))


def attempt_gaps(case: tuple, folder: Path, seconds: float = 20) -> Outcome:
    """Load (and, for an accepted one with the flag, run 50 rounds of) ``card_path_64b`` whose traffic
    draws its gaps from the mutant file (``case``: :func:`gaps_cases`)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from twin.config import ConfigError
    lines, mode, rounds, run, raw = case
    folder.mkdir(parents=True, exist_ok=True)
    # at most ~20 MB of lines (past the 16 MiB bound the reader refuses; more would spend the harness's memory)
    (folder / "gaps.txt").write_bytes("".join((text + "\n") * min(n, 1 + 20_000_000 // (len(text) + 1))
                                              for text, n in lines).encode() + raw)
    doc = base_doc(GAP_BASE)
    doc["rounds"] = rounds
    doc["traffic"] = {"mode": mode, "gaps": {"distribution": "file", "file": "gaps.txt"}}
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def call():
        from twin.scenario import load_scenario
        load_scenario(path)
        if run:
            from twin.commands import main
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                code = main(["run", str(path), "--rounds", "50", "--no-plot", "--no-csv", "--quiet",
                             "--out", str(folder / "out")])
            if code not in (0, 1, 2):
                raise RuntimeError(f"twin run exited {code}")
    return _attempt(call, ConfigError, (f"{path}: ", f"{folder / 'gaps.txt'}: "), seconds, hang="load: ")
