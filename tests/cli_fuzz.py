"""Argument lists for every ``twin`` subcommand, for the CLI fuzzer (tests/test_cli_fuzz.py and the
longer benchmarks/fuzz_cli.py): flags and positionals read from the real parser, with good values,
bad values, missing files, folders where files belong, huge numbers, unicode and empty strings.

:func:`arguments` is a hypothesis strategy of ``argv`` lists; :func:`run_one` runs one in this
process and returns ``(exit code, stdout, stderr, seconds)``; :func:`problem` says what is wrong
with such a result (``None`` when it is fine: exit 0-3, no traceback, and a failure's last stderr
line is ``twin: ...`` or argparse's ``twin CMD: error: ...``). ``budget``: the argument lists keep
each command's work small (a few dozen rounds or shots, one generation of a fit) unless the fuzzed
flags themselves name another amount, so a run of hundreds of them takes minutes, not hours.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import time
import traceback
from pathlib import Path

from hypothesis import strategies as st

from twin.commands import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
SCEN = ROOT / "scenarios"

# scenarios that run in well under a second at a few dozen rounds (no Verilator build, no live device)
SCENARIOS = [str(SCEN / n) for n in ("card_path_64b.yaml", "mesh_two_controllers_one_gpu.yaml", "decode_rep3.yaml",
                                     "faults_epyc7282.yaml", "qblox_open_loop.yaml", "backline_roce.yaml")]
PRIORS = [str(ROOT / "calibrations" / "card_path.yaml"), str(ROOT / "calibrations" / "backline_roce.yaml")]
WEIRD = ["", " ", "-", "--", "ü", "日本語", "\u202e", "😀", "a" * 300, "../..", "/", ".", "~", "$HOME", "%s", "{}",
         "-1", "--rounds", "\t", "a\nb", "b" * 100_000]
# counts: small good ones in odd spellings, and bad ones (a valid 1e8 rounds would run for minutes; a streamed
# twin run takes up to 1e10, so the large ones are past that)
NUMBERS = ["1", "2", "0", "-1", "-0", "1.5", "1e400", "-1e400", "nan", "inf", "-inf", "1e11",
           "10000000001", "9" * 400, "0x10", "1_0", "٣", "1e-5", " 2", "2 ", "+2", "2e0", "1e8x"]
LOO_PRIOR = "loo_small.yaml"  # `validate --leave-one-out` refits a prior once per target: a small one (budget())
SMALL = {"--rounds": "20", "--shots": "20", "--maxiter": "1", "--popsize": "1", "--workers": "1"}
PARAMS = ["frame_bytes=64,128", "frame_bytes=64:256:64", "frame_bytes=", "=1", "frame_bytes", "nope=1",
          "params.hosts.epyc7282.pcie.lanes=8,16", "traffic.period=2 us,3 us", "frame_bytes=1:0:1", "frame_bytes=a,b",
          "frame_bytes=64:1e9:1", "params.=1", "frame_bytes=0", "frame_bytes=-64", "seed=1,2",
          "frame_bytes=" + ",".join(["64"] * 5000), "frame_bytes=64,64.0", f"calibration={PRIORS[0]},nope.yaml",
          "calibration=", "traffic.gaps.file=/dev/zero", "params.card.reply_poll_period_ns=0.0001"]
WINDOWS = ["1:2", "2", "0:1", "3:2", "1:1e9", ":", "a:b", "1:2:3", "-1:2"]


def sandbox(folder: Path) -> dict[str, list[str]]:
    """Make the awkward files the fuzzer names in ``folder`` (the current folder of the runs)."""
    (folder / "adir").mkdir(exist_ok=True)
    (folder / "empty.yaml").write_text("")
    (folder / "garbage.yaml").write_bytes(b"\xff\xfe\x00\x81: [\n")
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    (folder / "scalar.yaml").write_text("42\n")
    (folder / "notes.txt").write_text("the user's\n")
    import shutil  # copies the fuzzer may refit in place (never the checkout's own files)
    shutil.copyfile(ROOT / "calibrations" / "hosting.yaml", folder / "hosting_copy.yaml")
    shutil.copyfile(ROOT / "calibrations" / "fitted" / "card_path.yaml", folder / "fitted_copy.yaml")
    import yaml  # a prior of one small fit group: what `validate --leave-one-out` refits (budget())
    small = yaml.safe_load((ROOT / "calibrations" / "card_path.yaml").read_text())
    small["fit"] = {"measured": str(ROOT / "calibrations" / "measured" / "card_path_64b.yaml"), "rounds": 20,
                    "groups": [{"consumers": ["v80", "mi210"], "free": {"hosts.epyc7282.p2p.latency_ns": [300, 1500]}}]}
    (folder / LOO_PRIOR).write_text(yaml.safe_dump(small))
    files = ["missing.yaml", "adir", "empty.yaml", "garbage.yaml", "list.yaml", "scalar.yaml", "notes.txt",
             "/dev/null", "/proc/self/nope", "adir/missing.yaml", "notes.txt/x.yaml"]
    outs = ["o1", "o2", "adir", "fitted_copy.yaml", "hosting_copy.yaml", "notes.txt", "notes.txt/sub",
            "new/deeper/o", "/proc/nope", "ü/ñ", "", " ", "x.png", "t.svg", "t.pdf", "t.xyz", "adir/",
            "/dev/null"]  # /dev/null: never replaced, even with --overwrite
    return {"files": files, "outs": outs}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _inside(text: str) -> bool:
    """A path that stays in the scratch folder (the fuzzer runs as whoever runs the tests: as root,
    ``--out /`` would write there)."""
    return not text.startswith(("/", "~")) and ".." not in text


def _values(action: argparse.Action, where: dict) -> st.SearchStrategy[str]:
    dest = action.dest
    weird = st.sampled_from(WEIRD) | st.text(max_size=12)
    if dest in ("out", "dest", "file"):  # written to: stay in the scratch folder
        weird = st.sampled_from([w for w in WEIRD if _inside(w)]) | st.text(max_size=12).filter(_inside)
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return st.sampled_from([str(c) for c in action.choices]) | weird
    if dest in ("rounds", "shots", "maxiter", "popsize", "workers", "verify_rounds", "seed"):
        few = 2 if dest in ("maxiter", "popsize") else 40  # a fit's generations cost seconds each
        whole = st.integers(-10**30, 0) | st.integers(1, few) | st.integers(10**10 + 1, 10**30)
        return st.sampled_from(NUMBERS) | whole.map(str) | weird
    if dest in ("scenario", "prior", "file", "calibration"):
        pool = SCENARIOS if dest == "scenario" else PRIORS if dest == "prior" else \
            ["hosting_copy.yaml"] if dest == "file" else [str(ROOT / "calibrations" / "fitted" / "card_path.yaml")]
        return st.sampled_from(pool) | st.sampled_from(where["files"]) | weird
    if dest in ("out", "dest", "from_live"):
        return st.sampled_from(where["outs"]) | st.sampled_from(where["files"]) | weird
    if dest == "param":
        return st.sampled_from(PARAMS) | weird
    if dest == "trace":
        return st.sampled_from(WINDOWS) | weird
    if dest == "processes":  # above one part a local cluster starts (seconds): one process, or refused values
        return st.sampled_from(["1", "0", "-3", "257", "1e1", "x"]) | weird
    if dest == "cluster":
        return st.sampled_from(["tcp://127.0.0.1:1", "tcp://", "nope", "tcp://[::1]:x", "bogus", "tls://127.0.0.1:1",
                                "ucx://a", "inproc://x", "tcp://127.0.0.1:99999"]) | weird
    if dest in ("name", "kind"):
        return st.sampled_from(["card_path_64b", "decode_rep3", "link_card", "consumer", "pcie", "nope",
                                "../x", "card_path_64b.yaml"]) | weird
    return weird


@st.composite
def _command(draw, name: str, parser: argparse.ArgumentParser, where: dict) -> list[str]:
    argv = [name]
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subs:  # twin scenarios list|copy
        sub = draw(st.sampled_from(sorted(subs[0].choices)) | st.just(""))
        if sub:
            return argv + draw(_command(sub, subs[0].choices[sub], where))
        return argv
    optionals = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    positionals = [a for a in parser._actions if not a.option_strings]
    for a in positionals:
        if a.nargs not in ("?", "*") or draw(st.booleans()):
            argv.append(draw(_values(a, where)))
    for a in draw(st.lists(st.sampled_from(optionals), max_size=5)) if optionals else []:
        flag = draw(st.sampled_from(a.option_strings))
        if a.nargs == 0:
            argv.append(flag)
        else:
            argv += [flag, draw(_values(a, where))]
    if draw(st.integers(0, 9)) == 0:  # now and then a stray word or an unknown flag
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(["--nope", "extra", "-x", "--rounds="])))
    return argv


def budget(argv: list[str]) -> list[str]:
    """``argv`` with the small amounts of :data:`SMALL` added for the flags its command has and it
    does not name, ``--quiet`` where there is one, ``gen`` only as ``gen --check`` (``twin gen``
    rewrites the checkout's generated files), an ``--out`` (calibrate) or ``--file`` (hosting) in
    the current folder where none is named (their defaults are the checkout's committed files), and
    for ``validate --leave-one-out`` the small prior :data:`LOO_PRIOR` where the card path's is named."""
    parsers = _subcommands()
    if not argv or argv[0] not in parsers:
        return argv
    flags = {s for a in parsers[argv[0]]._actions for s in a.option_strings}
    extra = []
    for flag, value in SMALL.items():
        if flag in flags and flag not in argv and not any(x.startswith(flag + "=") for x in argv):
            if flag == "--rounds" and argv[0] == "decode":
                continue
            if flag in ("--maxiter", "--popsize") and argv[0] == "validate" and "--leave-one-out" not in argv:
                continue  # they set the leave-one-out's fits; a validation of runs refuses them
            extra += [flag, value]
    if "--quiet" in flags and "--quiet" not in argv:
        extra.append("--quiet")
    if argv[0] == "gen" and "--check" not in argv:
        extra.append("--check")
    # a fit writes beside its prior by default, and twin hosting --fit the bundled hosting file: in the
    # checkout, that is the checkout's own committed files; the fuzzer's go to the scratch folder
    if argv[0] == "calibrate" and "--out" not in argv:
        extra += ["--out", "fitted_here.yaml"]
    if argv[0] == "validate" and "--leave-one-out" in argv:  # 6 fits of the card path's prior: the small one's 3
        card = {str(ROOT / "calibrations" / n) for n in ("card_path.yaml", "fitted/card_path.yaml")}
        argv = [LOO_PRIOR if a in card else a for a in argv]
    if argv[0] == "hosting" and "--file" not in argv:
        extra += ["--file", "hosting_copy.yaml"]
    if argv[0] == "run" and "--verify-rounds" not in argv and "--engine" not in argv and argv[1:2] != [SCENARIOS[1]]:
        extra += ["--verify-rounds", "10"]
    return argv + extra


def arguments(where: dict) -> st.SearchStrategy[list[str]]:
    """Argument lists (without the program name) for any ``twin`` subcommand, with :func:`budget`."""
    cmds = _subcommands()
    return (st.sampled_from(sorted(cmds)).flatmap(lambda n: _command(n, cmds[n], where))
            | st.lists(st.sampled_from(["--version", "--help", "", "nope", "-h", "run", "--rounds"]), max_size=2)
            ).map(budget)


USAGE = re.compile(r"^twin( [a-z]+)*: error: ")


def run_one(argv: list[str]) -> tuple[int, str, str, float]:
    """Run ``twin argv`` in this process; (exit code, stdout, stderr, seconds). An exception that
    escapes :func:`twin.commands.main` comes back as exit code -1 with its traceback as stderr."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse: --help, --version, usage errors
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except BaseException:  # noqa: BLE001 - what the fuzzer is looking for
            err.write(traceback.format_exc())
            rc = -1
    return rc, out.getvalue(), err.getvalue(), time.monotonic() - t0


def warm_up() -> None:
    """Run a small ``twin run`` and ``twin decode`` once, untimed: the first run in a process pays for
    the imports and compilation every later one shares (the 10 s limit is for the later ones)."""
    for argv in (budget(["run", "--out", "warm"]), budget(["decode", "--out", "warm_d", "--overwrite"])):
        rc, out, err, _ = run_one(argv + (["--overwrite"] if argv[0] == "run" else []))
        if rc != 0 or problem(rc, out, err, 0.0):
            raise RuntimeError(f"warm-up twin {argv!r} failed (exit {rc}):\n{err[-2000:]}")


def problem(rc: int, stdout: str, stderr: str, seconds: float, limit_s: float = 10.0) -> str | None:
    """What is wrong with one run's result, or ``None``."""
    if "Traceback" in stderr or "Traceback" in stdout or rc == -1:
        return "a traceback"
    if rc not in (0, 1, 2, 3):
        return f"exit code {rc}"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if rc == 2 and not lines:
        return "exit 2 with nothing on stderr"
    if rc and lines and not (lines[-1].startswith("twin:") or USAGE.match(lines[-1])):
        return f"stderr's last line is not twin's: {lines[-1]!r}"
    if seconds > limit_s:
        return f"took {seconds:.1f} s"
    return None
