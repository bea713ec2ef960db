"""Mutated scenarios for the input fuzzer (tests/test_fuzz_scenarios.py, benchmarks/fuzz_scenarios.py).

A case is a bundled scenario (``scenarios/*.yaml``) and one to three mutations drawn by
hypothesis: a value replaced (a wrong type; a negative, huge, non-finite or unicode-digit number or
quantity; a 100,000-character string; an alias bomb; nesting thousands deep; raw YAML such as a
recursive alias, an impossible date, a 5,000-digit integer, a python tag), a key deleted, an
unknown key added, a top-level key written twice, or the bytes changed (a non-UTF-8 byte, a NUL, a
byte-order mark, UTF-16, the file cut short, CRLF line ends), or a number or value of the parameter
set it names changed (written beside it). :func:`attempt` writes it and loads it
with the real loader (:func:`twin.scenario.load_scenario` or :func:`twin.qec.load.load_decode`)
under a wall-clock limit, and optionally runs an accepted one for a few rounds through ``twin run``
/ ``twin decode``, checking that results.json holds no non-finite number.

Not a test module itself (no ``test_`` prefix): the test and the benchmark import it.
"""
from __future__ import annotations

import io
import json
import math
import signal
import time
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted((ROOT / "scenarios").glob("*.yaml"))  # every bundled scenario, run and decode
PATH_KEYS = ("calibration", "measured", "hosting")  # relative to the scenario: made absolute in the base
LOAD_LIMIT_S = 10.0


def base_doc(path: Path) -> dict:
    """The bundled scenario as a dict, its file references made absolute (so a mutant can be
    written anywhere)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for k in PATH_KEYS:
        if isinstance(doc.get(k), str):
            doc[k] = str((path.parent / doc[k]).resolve())
    dec = doc.get("decode") if isinstance(doc.get("decode"), dict) else {}
    for block, k in ((dec, "circuit"), (dec.get("cost") if isinstance(dec.get("cost"), dict) else {}, "file")):
        if isinstance(block.get(k), str):
            block[k] = str((path.parent / block[k]).resolve())
    for n in doc.get("nodes", []):
        if isinstance(n, dict) and isinstance(n.get("rtl"), dict):
            n["rtl"]["sources"] = [str((path.parent / s).resolve()) for s in n["rtl"]["sources"]]
    return doc


def leaf_paths(doc, prefix=(), seen=None) -> list[tuple]:
    """Every key path in ``doc`` (mappings and lists, the containers themselves included); a
    container met again (an alias bomb's shared lists) is not walked again."""
    seen = set() if seen is None else seen
    if id(doc) in seen:
        return []
    out = []
    if isinstance(doc, dict):
        seen.add(id(doc))
        for k, v in doc.items():
            out.append(prefix + (k,))
            out.extend(leaf_paths(v, prefix + (k,), seen))
    elif isinstance(doc, list):
        seen.add(id(doc))
        for i, v in enumerate(doc):
            out.append(prefix + (i,))
            out.extend(leaf_paths(v, prefix + (i,), seen))
    return out


# -- values ----------------------------------------------------------------------------------------
NUMBER_TEXT = ["1e400", "1e-400", "-5", "0", "-0", "nan", "inf", "-inf", "٣", "３", "1_000", "0x10", "1e99999",
               ".5", "5.", "1e", "", "9" * 60, "2.5e-13", "1e5", "0.0004", "+3", "1e-3", "١٠", "999", "0.0001"]
UNIT_TEXT = ["ns", "us", "µs", "μs", "ps", "s", "ms", "parsec", "NS", "Gb/s", "MHz", "", " ns", "ns ns"]
RAW_YAML = ["&r [1, *r]", "2024-13-45", "9" * 5000, "!!python/object:os.system x", "!!binary zzz", "{a: 1, a: 2}",
            "*nowhere", "{[1]: 2}", ".inf", "-.inf", ".nan", "0x1F", "0o17", "!!float nan", "!!int 12x", "~",
            "'\\u0663 ns'", "\"\\ud800\"", "!!timestamp 2024-01-01", "!!set {a, b}", "!!omap [a: 1]", "<<: 3",
            "!!str", "''", "[]", "{}", "'x' 'y'", "\t1", "@x", "%YAML 1.1", "---", "...", "|\n  text"]


def alias_bomb(levels: int, width: int = 10) -> list:
    """A list whose ``width`` items are the same list, ``levels`` deep: yaml.safe_dump writes
    each level once, with anchors and aliases (a "billion laughs" at ``levels`` = 9)."""
    v: object = ["lol"] * width
    for _ in range(levels):
        v = [v] * width
    return v


class Raw(str):
    """A value written into the YAML text as it is (not dumped)."""


def values():
    """Replacement values: wrong types, hostile numbers and quantity strings, big and deep values."""
    nums = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, 1e-300, -1e300, 0.5, 1e6]))
    qty = st.builds(lambda n, u: f"{n} {u}".strip(), st.sampled_from(NUMBER_TEXT), st.sampled_from(UNIT_TEXT))
    small = st.one_of(st.none(), st.booleans(), nums, st.text(max_size=12), qty)
    return st.one_of(
        small, qty, qty,
        st.lists(small, max_size=4), st.dictionaries(st.text(max_size=6), small, max_size=3),
        st.just("x" * 100_000),
        st.integers(3, 9).map(alias_bomb),
        st.integers(10, 3000).map(lambda n: Raw("[" * n + "]" * n)),
        st.sampled_from(RAW_YAML).map(Raw),
    )


# -- mutations --------------------------------------------------------------------------------------
NUDGE_FACTORS = (0, -1, 2, 1e-3, 1e-6, 10, 1e3, 1e6, 1e12, 0.5, 1.0000001)


def _insert(byte: bytes):
    return lambda data, at: data[:at] + byte + data[at:]


BYTE_EDITS = {  # a byte mutation: (the scenario's bytes, a position in them) -> the bytes
    "bad_utf8": _insert(b"\xff"),
    "lone_continuation": _insert(b"\x80"),
    "nul": _insert(b"\x00"),
    "bom": lambda data, at: b"\xef\xbb\xbf" + data,
    "utf16": lambda data, at: data.decode("utf-8", "replace").encode("utf-16"),
    "truncate": lambda data, at: data[:at],
    "crlf": lambda data, at: data.replace(b"\n", b"\r\n"),
    "tabs": lambda data, at: data.replace(b"  ", b"\t"),
    "latin1": lambda data, at: data.decode("utf-8", "replace").encode("latin-1", "replace"),
}
BYTE_OPS = tuple(BYTE_EDITS)


def mutation():
    """One mutation, as a tuple whose first item names it; selectors are taken modulo the number
    of key paths of the scenario, so the strategy does not depend on the scenario drawn."""
    sel = st.integers(0, 10**6)
    return st.one_of(
        st.tuples(st.just("replace"), sel, values()),
        st.tuples(st.just("replace"), sel, values()),
        st.tuples(st.just("nudge"), sel, st.sampled_from(NUDGE_FACTORS), st.sampled_from(UNIT_TEXT)),
        st.tuples(st.just("nudge"), sel, st.sampled_from(NUDGE_FACTORS), st.sampled_from(UNIT_TEXT)),
        st.tuples(st.just("delete"), sel),
        st.tuples(st.just("add"), sel, st.sampled_from(["extra", "Name", "rounds ", "ppm", "nodes"]), values()),
        st.tuples(st.just("duplicate"), sel),
        st.tuples(st.just("bytes"), st.sampled_from(BYTE_OPS), st.floats(0, 1)),
        st.tuples(st.just("top"), values()),
        st.tuples(st.just("calibration"), sel, st.sampled_from(NUDGE_FACTORS + (1e300, -1e300)), values()),
    )


def cases():
    """(index of a bundled scenario, 1-3 mutations, whether to run it if accepted)."""
    return st.tuples(st.integers(0, len(BUNDLED) - 1), st.lists(mutation(), min_size=1, max_size=3),
                     st.integers(0, 3).map(lambda k: k == 0))


def _dig_parent(doc, path):
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    return cur


def render(doc: dict, ops: list) -> dict[str, bytes]:
    """The files of the mutant: ``""`` the scenario's bytes (``doc`` with ``ops`` applied, see
    :func:`mutation`), and ``cal.yaml`` when a mutation changed its parameter set (a number of it
    scaled, or replaced by a value)."""
    m = _Mutant(doc)
    for op in ops:
        m.apply(op)
    files = {"": m.scenario_bytes()}
    if m.cal is not None:
        files["cal.yaml"] = yaml.safe_dump(m.cal, sort_keys=False, allow_unicode=True, width=4096).encode("utf-8")
    return files


class _Mutant:
    """A scenario document being mutated (:func:`render`): the document (a copy), its parameter set
    once a mutation changed it, the raw YAML texts put in (by token), the keys written twice, the
    byte mutations to apply to its text. :meth:`apply` one mutation at a time."""

    def __init__(self, doc: dict):
        import copy
        self.doc = copy.deepcopy(doc)
        self.cal = None
        self.raws: dict[str, str] = {}
        self.dup_keys: list = []
        self.byte_ops: list = []

    def put(self, v):
        """``v`` as it goes into the document: a :class:`Raw` text as a token replaced in the dump."""
        if isinstance(v, Raw):
            token = f"RAW{len(self.raws)}TOKEN"
            self.raws[token] = str(v)
            return token
        return v

    def apply(self, op: tuple) -> None:
        kind = op[0]
        paths = leaf_paths(self.doc) if isinstance(self.doc, (dict, list)) else []
        if kind == "top":
            self.doc = self.put(op[1])
        elif kind == "bytes":
            self.byte_ops.append(op[1:])
        elif kind == "calibration":
            self.calibration(op)
        elif not paths:
            return
        elif kind == "nudge":
            self.nudge(paths[op[1] % len(paths)], op[2], op[3])
        elif kind in ("replace", "delete", "add"):
            self.edit(kind, paths[op[1] % len(paths)], op)
        elif kind == "duplicate" and isinstance(self.doc, dict) and self.doc:
            keys = list(self.doc)
            k = keys[op[1] % len(keys)]
            self.dup_keys.append((k, self.doc[k]))

    def calibration(self, op: tuple) -> None:
        """A number of the scenario's parameter set scaled by ``op[2]``, or another value replaced by
        ``op[3]``; the scenario then names ``cal.yaml``."""
        doc = self.doc
        if self.cal is None and isinstance(doc, dict) and isinstance(doc.get("calibration"), str):
            try:
                self.cal = yaml.safe_load(Path(doc["calibration"]).read_text(encoding="utf-8"))
            except (OSError, ValueError):  # the path itself mutated: nothing to change
                return
        cal = self.cal
        if not isinstance(cal, dict):
            return
        cpaths = [q for q in leaf_paths(cal) if q[0] not in ("provenance", "fitted")]
        q = cpaths[op[1] % len(cpaths)]
        parent = _dig_parent(cal, q)
        v = parent[q[-1]]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            scaled = v * op[2]
            parent[q[-1]] = int(scaled) if isinstance(v, int) and float(scaled).is_integer() else scaled
        else:
            parent[q[-1]] = op[3] if not isinstance(op[3], Raw) else str(op[3])
        doc["calibration"] = "cal.yaml"

    def nudge(self, path: tuple, factor: float, unit_text: str) -> None:
        """A plausible value: a number scaled, a quantity scaled and its unit changed."""
        parent = _dig_parent(self.doc, path)
        v = parent[path[-1]]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parent[path[-1]] = type(v)(v * factor) if isinstance(v, float) or float(factor).is_integer() \
                else v * factor
        elif isinstance(v, str) and v[:1].isdigit() and " " in v:
            num, unit = v.split(" ", 1)
            try:
                parent[path[-1]] = f"{float(num) * factor:g} {unit_text if factor == 1.0000001 else unit}"
            except ValueError:
                pass

    def edit(self, kind: str, path: tuple, op: tuple) -> None:
        """``replace`` the value at ``path``, ``delete`` it, or ``add`` a key beside it (or in it)."""
        parent = _dig_parent(self.doc, path)
        if kind == "replace":
            parent[path[-1]] = self.put(op[2])
        elif kind == "delete":
            del parent[path[-1]]
        else:
            target = parent[path[-1]] if isinstance(parent[path[-1]], dict) else parent
            if isinstance(target, dict):
                target[op[2]] = self.put(op[3])

    def scenario_bytes(self) -> bytes:
        """The document dumped, its keys written twice appended, raw texts put in, byte mutations applied."""
        text = yaml.safe_dump(self.doc, sort_keys=False, allow_unicode=True, width=4096)
        if isinstance(self.doc, dict):
            for k, v in self.dup_keys:
                text += yaml.safe_dump({k: v}, sort_keys=False, allow_unicode=True, width=4096)
        for token, raw in self.raws.items():
            text = text.replace(token, raw)
        data = text.encode("utf-8")
        for name, where in self.byte_ops:
            data = BYTE_EDITS[name](data, int(where * len(data)))
        return data


# -- loading and running -----------------------------------------------------------------------------
class Hang(Exception):
    """The load or run took longer than its limit."""


@contextmanager
def limit(seconds: float):
    """Raise :class:`Hang` in the main thread after ``seconds`` of wall-clock time (SIGALRM)."""
    def on_alarm(signum, frame):
        raise Hang(f"more than {seconds:g} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    """What became of one mutant: ``kind`` refused | accepted | traceback | hang | bad_message |
    nonfinite; ``detail`` the message or traceback; ``seconds`` to load; ``ran`` whether it ran."""

    kind: str
    detail: str
    seconds: float
    ran: bool = False


def is_decode(path: Path) -> bool:
    """The bundled scenario at ``path`` is a ``twin decode`` one."""
    return study_of(path) == "decode"


def study_of(path: Path) -> str:
    """The command of the bundled scenario at ``path``: ``machine``, ``decode`` or ``run``."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return "machine" if "machine" in doc else "decode" if "decode" in doc else "run"


def runnable_here(loaded) -> bool:
    """A loaded scenario that runs in a second here: no live endpoint, no Verilog to build."""
    sc = getattr(loaded, "scenario", None) or getattr(loaded, "sc", None)
    models = [n.model for n in getattr(sc, "nodes", [])] + [p.model for p in getattr(getattr(sc, "decode", None),
                                                                                     "placements", [])]
    return not any(m in ("live", "rtl") for m in models)


def _nonfinite(obj) -> bool:
    if isinstance(obj, float):
        return not math.isfinite(obj)
    if isinstance(obj, dict):
        return any(_nonfinite(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_nonfinite(v) for v in obj)
    return False


def attempt(bundled: Path, files: dict[str, bytes], folder: Path, run: bool = False, rounds: int = 50) -> Outcome:
    """:func:`_attempt`, leaving no user module it imported (``decode.function``'s
    ``examples.rep3_rule``) in ``sys.modules``: a later test importing a same-named module from
    elsewhere would be refused."""
    import sys
    before = set(sys.modules)
    try:
        return _attempt(bundled, files, folder, run, rounds)
    finally:
        for name in set(sys.modules) - before:
            mod = sys.modules[name]
            where = [getattr(mod, "__file__", None) or "", *map(str, getattr(mod, "__path__", []) or [])]
            if any(w.startswith((str(folder), str(ROOT / "examples"))) for w in where):
                del sys.modules[name]


def _attempt(bundled: Path, files: dict[str, bytes], folder: Path, run: bool = False, rounds: int = 50) -> Outcome:
    """Write ``files`` (:func:`render`) in ``folder`` and load the scenario with the real loader (decode or
    run, as ``bundled`` is) within :data:`LOAD_LIMIT_S`; if accepted and ``run``, run it for
    ``rounds`` rounds (shots) and check results.json. Never raises for what the twin does."""
    import traceback

    from twin.config import ConfigError
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / bundled.name
    for name, data in files.items():
        (folder / (name or bundled.name)).write_bytes(data)
    study = study_of(bundled)
    decode = study == "decode"
    t0 = time.perf_counter()
    try:
        with limit(LOAD_LIMIT_S):
            if decode:
                from twin.qec.load import load_decode
                loaded = load_decode(path)
            elif study == "machine":
                from twin.machine.study import load_machine
                loaded = load_machine(path)
            else:
                from twin.scenario import load_scenario
                loaded = load_scenario(path)
    except ConfigError as e:
        dt = time.perf_counter() - t0
        msg = str(e)
        named = [f"{folder / (name or bundled.name)}: " for name in files]  # the scenario, or its parameter set
        if "\n" in msg or not msg.startswith(tuple(named)):
            return Outcome("bad_message", msg, dt)
        return Outcome("refused", msg, dt)
    except Hang as e:
        return Outcome("hang", f"load: {e}", time.perf_counter() - t0)
    except BaseException:  # noqa: BLE001 (what the fuzzer counts)
        return Outcome("traceback", traceback.format_exc(), time.perf_counter() - t0)
    dt = time.perf_counter() - t0
    if not run or not runnable_here(loaded):
        return Outcome("accepted", "", dt)
    from twin.commands import main
    out = folder / "out"
    argv = (["decode", str(path), "--shots", str(rounds)] if decode else
            ["machine", str(path), "--cycles", str(max(rounds, 30)), "--no-plot"] if study == "machine" else
            ["run", str(path), "--rounds", str(rounds), "--no-plot", "--no-csv"]) + ["--quiet", "--out", str(out)]
    err = io.StringIO()
    try:
        with limit(60), redirect_stdout(io.StringIO()), redirect_stderr(err):
            code = main(argv)
    except Hang as e:
        return Outcome("hang", f"run: {e}", dt, ran=True)
    except BaseException:  # noqa: BLE001
        return Outcome("traceback", traceback.format_exc(), dt, ran=True)
    res = out / "results.json"
    if code == 0 and res.exists():
        doc = json.loads(res.read_text(), parse_constant=lambda c: float(c))
        if _nonfinite(doc):
            return Outcome("nonfinite", f"{res}: a non-finite number", dt, ran=True)
    if code not in (0, 1, 2, 3):
        return Outcome("traceback", f"exit {code}: {err.getvalue()}", dt, ran=True)
    return Outcome("accepted", err.getvalue(), dt, ran=True)
