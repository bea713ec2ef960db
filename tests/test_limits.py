"""Time and size limits checked at load against the whole run (issue 29, item 4): the int64
picosecond clock's horizon with the program's waits and a gaps file summed over the rounds asked,
a run's memory against the memory there is, the shots' bound for ``--shots``, a poll period that
rounds to 0 ps, a shared stream's devices, a symlink loop behind a file key, a traced node's name,
``sweep --cluster``, a swept calibration, repeated sweep values, an empty scenario path, a 1 MB word
in an error line and the UDP agent's slot size. One reproducer per finding; each refusal is one
line naming file, key and value (and the numbers, where a limit is passed)."""
from __future__ import annotations

import argparse
import io
import socket
import subprocess
import sys
import threading
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from scenario_mutations import ROOT, base_doc, limit

from twin.commands import build_parser, main
from twin.config import ConfigError
from twin.scenario import load_scenario

CARD = base_doc(ROOT / "scenarios" / "card_path_64b.yaml")
ONE = {**{k: v for k, v in CARD.items() if k not in ("measured", "nodes", "links")}, "rounds": 10,
       "traffic": {"mode": "open_loop", "clock": "card", "period": "4 us"},
       "nodes": [{"name": "gen", "kind": "generator"}, {"name": "u55c", "kind": "link_card"},
                 {"name": "epyc7282", "kind": "consumer", "device": "epyc7282"}],
       "links": [{"from": "gen", "to": "u55c", "kind": "on_card"}, {"from": "u55c", "to": "epyc7282", "kind": "pcie"}]}
DECODE = base_doc(ROOT / "scenarios" / "decode_rep3.yaml")
TWO_GPUS = base_doc(ROOT / "scenarios" / "decode_stream_two_gpus.yaml")


def write(tmp_path: Path, doc: dict, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def one_line(err: ConfigError | str, file: Path | str, key: str) -> str:
    msg = str(err)
    assert "\n" not in msg and msg.startswith(f"{file}: {key}: "), msg
    assert len(msg) < 600, msg
    return msg


def refused(fn, *args, **kw) -> ConfigError:
    with limit(20), pytest.raises(ConfigError) as e:
        fn(*args, **kw)
    return e.value


def cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with limit(20), redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's usage error
            code = e.code
    return code, err.getvalue()


# -- the int64 picosecond clock ---------------------------------------------------------------------

def test_program_waits_past_the_clock_are_refused_naming_the_numbers(tmp_path):
    """100,000 rounds that each wait 1,000 s after the correction before reach 10^20 ps: the engines
    overflowed int64 (OverflowError)."""
    doc = {**ONE, "rounds": 100_000, "traffic": {**ONE["traffic"], "period": "1 us",
                                                 "program": {"waits": {"for_round": -1, "then": "1000 s"}}}}
    p = write(tmp_path, doc)
    msg = one_line(refused(load_scenario, p), p, "traffic.program.waits.then")
    assert "'1000 s'" in msg and "100,000 requests x 1,000 s" in msg and "2^62 ps" in msg and "1,157 days" in msg


def test_rounds_beyond_a_gaps_file_are_summed_at_load(tmp_path):
    """A gaps file (repeated when the run is longer) of 1,000 s and 1 us: its 10 rounds fit, but
    ``--rounds 100000`` sums to 5 x 10^19 ps (the clock wrapped: "event queue ran dry")."""
    from twin.scenario.load import check_rounds
    (tmp_path / "gaps.txt").write_text("1000 s\n1 us\n")
    doc = {**ONE, "traffic": {"mode": "open_loop", "clock": "card", "gaps": {"distribution": "file",
                                                                            "file": "gaps.txt"}}}
    p = write(tmp_path, doc)
    loaded = load_scenario(p)
    check_rounds(loaded, 1000)  # 500,000 s: within the horizon
    msg = one_line(refused(check_rounds, loaded, 100_000), p, "traffic.gaps.file")
    assert "100,000 requests at the file's 2 gaps (repeated)" in msg and "5.000e+19 ps" in msg


def test_a_control_sides_own_period_is_held_to_the_clock(tmp_path):
    """A QCCS triggering every second for 10^7 rounds reaches 10^19 ps (past int64 at round 9.2 x 10^6):
    the control side's own period counts too, for the scenario's rounds and for --rounds."""
    from twin.scenario.load import check_rounds
    doc = base_doc(ROOT / "scenarios" / "zhinst_qccs.yaml")
    i, qccs = next((i, n) for i, n in enumerate(doc["nodes"]) if n["kind"] == "zhinst_qccs")
    qccs["params"]["period_ns"] = 10**9
    p = write(tmp_path, {**doc, "rounds": 10**7})
    msg = one_line(refused(load_scenario, p), p, f"nodes[{i}].params")
    assert "10,000,000 rounds x 1 s (the control side's period) reach 1.000e+19 ps (116 days)" in msg
    loaded = load_scenario(write(tmp_path, {**doc, "rounds": 1000}, "ok.yaml"))
    check_rounds(loaded, 10**6)  # 11.6 days: fine
    one_line(refused(check_rounds, loaded, 10**7), loaded.path, f"nodes[{i}].params")


# -- memory ----------------------------------------------------------------------------------------

def test_a_run_that_cannot_fit_in_memory_is_refused_and_a_streamed_one_is_not(monkeypatch):
    """``--rounds 1e8`` over card_path_64b's five loops keeps 5 x 10^8 rounds (needing ~41 GiB: a
    traceback under a memory limit); with 8 GiB to allocate it is refused naming the numbers, while
    the same rounds streamed by the direct engine are not."""
    import twin.engine.memory as memory
    from twin.scenario.load import check_memory
    monkeypatch.setattr(memory, "available_bytes", lambda: (8 * 2**30, "a test's 8 GiB"))
    loaded = load_scenario(ROOT / "scenarios" / "card_path_64b.yaml")
    msg = one_line(refused(check_memory, loaded, 10**8), loaded.path, "--rounds")
    assert "100000000" in msg and "500,000,000 rounds kept over 5 loop(s) x 120 B" in msg and "8.0 GiB" in msg
    check_memory(loaded, 10**8, streamed=True)  # constant memory: never refused
    check_memory(loaded, 10**6)  # 0.8 GiB: fits


def test_twin_run_refuses_memory_before_any_progress_bar_or_folder(monkeypatch, tmp_path, capsys):
    """``twin run --rounds 9e7`` that cannot fit is refused before the progress bars are made and
    before its run folder exists (the study's own check came after the bars were drawn)."""
    import twin.engine.memory as memory
    import twin.output.progress as progress
    from twin.cli import main
    monkeypatch.setattr(memory, "available_bytes", lambda: (8 * 2**30, "a test's 8 GiB"))
    made = []
    monkeypatch.setattr(progress, "progress_bar", lambda *a, **k: made.append(a) or pytest.fail("a bar was made"))
    out = tmp_path / "run"
    rc = main(["run", str(ROOT / "scenarios" / "card_path_64b.yaml"), "--rounds", "9e7", "--no-plot",
               "--out", str(out)])
    assert rc != 0 and not made and not out.exists()
    assert "8.0 GiB" in capsys.readouterr().err


def test_the_memory_there_is_reads_the_address_space_limit(tmp_path):
    """Under ``ulimit -v``, what can be allocated is what the limit leaves above the process, and
    twin run refuses 10^7 rounds of five loops in one line instead of running into a MemoryError."""
    code = ("import resource, sys\n"
            "from twin.engine.memory import _meminfo, available_bytes\n"
            "size = _meminfo('VmSize', '/proc/self/status')\n"
            "resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.RLIM_INFINITY))\n"
            "have, where = available_bytes()\n"
            "assert have <= 2**30 and 'ulimit -v' in where, (have, where)\n"
            "from twin.commands import main\n"
            f"sys.exit(main(['run', {str(ROOT / 'scenarios' / 'card_path_64b.yaml')!r}, '--rounds', '1e7', "
            "'--quiet', '--out', 'never']))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("twin: error: ") and "--rounds: 10000000: 50,000,000 rounds kept" in line and \
        "ulimit -v" in line, line
    assert "Traceback" not in r.stderr


def test_decode_shots_above_the_schemas_bound_are_refused(tmp_path):
    """``twin decode --shots 5e7``: the schema bounds decode.shots at 10^7, and --shots was not held to it."""
    from twin.qec.load import check_shots, load_decode
    ld = load_decode(ROOT / "scenarios" / "decode_rep3.yaml")
    assert check_shots(ld, 1000) == 1000
    msg = one_line(refused(check_shots, ld, 50_000_000), ld.path, "decode.shots")
    assert "50000000" in msg and "at most 10,000,000 shots" in msg


def test_decode_shots_that_cannot_fit_in_memory_are_refused(monkeypatch):
    """10^7 shots of the surface code (120 detectors) on three placements keep about 11 GiB: refused
    naming the numbers where 2 GiB can be allocated; 10^4 shots fit."""
    import twin.engine.memory as memory
    from twin.qec.load import check_shots, load_decode
    monkeypatch.setattr(memory, "available_bytes", lambda: (2 * 2**30, "a test's 2 GiB"))
    ld = load_decode(ROOT / "scenarios" / "decode_surface_d5.yaml")
    msg = one_line(refused(check_shots, ld, 10**7), ld.path, "decode.shots")
    assert "10,000,000 shots of 120 detectors and 1 request(s) over 3 placement(s)" in msg and "2.0 GiB" in msg
    assert check_shots(ld, 10**4) == 10**4


# -- parameter and placement limits ----------------------------------------------------------------

@pytest.mark.parametrize("key, where", [("reply_poll_period_ns: 4.0", "card.reply_poll_period_ns"),
                                        ("poll_period_ns: 10.0", "consumers.epyc7282.poll_period_ns")])
def test_a_poll_period_that_rounds_to_0_ps_is_refused(tmp_path, key, where):
    """A poll period of 0.0001 ns is > 0 but 0 ps in the engine: the card's made the compiled core
    divide by zero (SIGFPE), a consumer's was a ValueError traceback."""
    from twin.scenario.load import load_calibration
    text = (ROOT / "calibrations" / "fitted" / "card_path.yaml").read_text()
    assert key in text
    name = key.split(":")[0]
    cal = tmp_path / "cal.yaml"
    cal.write_text(text.replace(key, f"{name}: 0.0001", 1))
    p = write(tmp_path, {**ONE, "calibration": str(cal)})
    e = refused(load_calibration, p, str(cal))
    assert e.file == str(cal) and e.key == where and e.value == 0.0001 and "rounds to 0 ps" in e.problem, str(e)
    cal.write_text(text.replace(key, f"{name}: 0.004", 1) if "reply" not in key else text)
    load_calibration(p, str(cal))  # 4 ps: fine


def test_a_stream_shared_over_more_devices_than_requests_is_refused(tmp_path):
    """``devices: [mi210, mi210]`` with one shot: a device with nothing to decode (a ValueError
    traceback from the share); at load, and for ``--shots 1``."""
    from twin.qec.load import check_shots, load_decode
    doc = {**TWO_GPUS, "decode": {**TWO_GPUS["decode"], "shots": 1}}
    p = write(tmp_path, doc)
    i = next(i for i, pl in enumerate(doc["decode"]["placements"]) if "devices" in pl)
    msg = one_line(refused(load_decode, p), p, f"decode.placements[{i}].devices")
    assert "2 devices share a stream of 1 request(s)" in msg
    ld = load_decode(ROOT / "scenarios" / "decode_stream_two_gpus.yaml")
    msg = one_line(refused(check_shots, ld, 1), ld.path, "decode.shots")
    assert "2 devices share a stream of 1 request(s)" in msg


# -- files and names -------------------------------------------------------------------------------

def _loop(tmp_path: Path, name: str) -> str:
    a, b = tmp_path / name, tmp_path / f"b_{name}"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    return name


@pytest.mark.parametrize("key", ["calibration", "measured", "traffic.gaps.file", "hosting", "decode.circuit",
                                 "decode.function"])
def test_a_symlink_loop_behind_any_file_key_is_one_line(tmp_path, key):
    """A symlink loop named by a file key is a refusal naming the key (decode.function's C library
    was a RuntimeError traceback from Path.resolve)."""
    from twin.qec.load import load_decode
    if key in ("calibration", "measured", "traffic.gaps.file"):
        doc = {**ONE, "traffic": dict(ONE["traffic"])}
        if key == "traffic.gaps.file":
            doc["traffic"] = {"mode": "open_loop", "clock": "card",
                              "gaps": {"distribution": "file", "file": _loop(tmp_path, "g.txt")}}
        else:
            doc[key] = _loop(tmp_path, "f.yaml")
        loader = load_scenario
    else:
        doc = {**DECODE, "decode": dict(DECODE["decode"])}
        if key == "hosting":
            doc["hosting"] = _loop(tmp_path, "h.yaml")
        elif key == "decode.circuit":
            for k in ("code", "distance", "rounds", "p", "noise"):
                doc["decode"].pop(k, None)
            doc["decode"]["circuit"] = _loop(tmp_path, "c.stim")
        else:
            doc["decode"].update(decoder="function", function=_loop(tmp_path, "lib.so") + ":decode")
        loader = load_decode
    p = write(tmp_path, doc)
    msg = one_line(refused(loader, p), p, key)
    assert "symlink loop" in msg


def test_a_traced_node_whose_name_is_a_path_is_refused(tmp_path):
    """``--trace`` names its waveform files by node: a node named ``../../evil`` built a path from
    it (a ValueError traceback, or a file outside the run folder). A node's name is a plain name,
    refused at load (twin.scenario.schema), whatever the command."""
    doc = base_doc(ROOT / "scenarios" / "v80_rtl.yaml")
    rtl = next(n for n in doc["nodes"] if n.get("model") == "rtl" and n["kind"] == "consumer")
    old, rtl["name"] = rtl["name"], "../../evil"
    for link in doc["links"]:
        link["to"] = "../../evil" if link["to"] == old else link["to"]
    p = write(tmp_path, doc)
    i = doc["nodes"].index(rtl)
    msg = one_line(refused(load_scenario, p), p, f"nodes[{i}].name")
    assert "'../../evil'" in msg
    code, err = cli("run", str(p), "--trace", "1:2", "--rounds", "20", "--quiet", "--out", str(tmp_path / "o"))
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"twin: error: {p}: nodes[{i}].name: ")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("address", ["bogus", "tcp://", "tcp://[::1]:x", "tcp://127.0.0.1:99999", "tls://127.0.0.1:1",
                                     "ucx://a", "inproc://x", ""])
def test_sweep_cluster_is_a_tcp_address(address):
    """``twin sweep --cluster bogus`` was a ValueError traceback in distributed's address parser."""
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as e:
        build_parser().parse_args(["sweep", "s.yaml", "--param", "frame_bytes=64", "--cluster", address])
    assert e.value.code == 2
    assert err.getvalue().strip().splitlines()[-1].startswith("twin sweep: error: argument --cluster: a Dask")


def test_a_cluster_address_that_answers_garbage_is_one_line(tmp_path):
    """A TCP server that is not a Dask scheduler (it sends bytes that declare a 3 EiB frame): one
    line naming the address, not distributed's MemoryError."""
    from twin.studies.sweep import SweepError, parse_param, run_sweep
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.sendall(b"\x31" * 4096)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    p = write(tmp_path, ONE)
    try:
        with limit(60), pytest.raises(SweepError) as e:
            run_sweep(p, [parse_param("frame_bytes=64")], rounds=10, cluster=f"tcp://127.0.0.1:{port}")
    finally:
        srv.close()
    assert str(e.value).startswith(f"--cluster tcp://127.0.0.1:{port}: cannot connect to a Dask scheduler there")
    assert "\n" not in str(e.value) and len(str(e.value)) < 600


def test_a_swept_calibration_is_the_one_each_point_runs(tmp_path):
    """``--param calibration=A,B``: every point ran the unswept scenario's parameter set."""
    from twin.studies.sweep import SweepError, load_point
    text = (ROOT / "calibrations" / "fitted" / "card_path.yaml").read_text()
    assert "poll_cost_ns: 100.0" in text
    (tmp_path / "slow.yaml").write_text(text.replace("poll_cost_ns: 100.0", "poll_cost_ns: 900.0", 1))
    p = write(tmp_path, ONE)
    assert load_point(str(p), {}).params.consumers["epyc7282"].poll_cost_ns == 100.0
    assert load_point(str(p), {"calibration": "slow.yaml"}).params.consumers["epyc7282"].poll_cost_ns == 900.0
    swept = load_point(str(p), {"calibration": "slow.yaml", "params.consumers.epyc7282.service_ns": 5.0}).params
    assert swept.consumers["epyc7282"].poll_cost_ns == 900.0 and swept.consumers["epyc7282"].service_ns == 5.0
    with pytest.raises(SweepError) as e:
        load_point(str(p), {"calibration": "missing.yaml"})
    assert str(e.value).startswith("--param calibration='missing.yaml': calibration: no such file")


def test_a_sweep_value_given_twice_is_refused():
    """5,000 copies of one value ran 5,000 points for one result."""
    from twin.studies.sweep import SweepError, parse_param
    with pytest.raises(SweepError) as e:
        parse_param("frame_bytes=" + ",".join(["64"] * 5000))
    msg = str(e.value)
    assert "the value 64 is given 5,000 times (5,000 values, 1 distinct)" in msg and len(msg) < 400
    with pytest.raises(SweepError, match="the value 64 is given 2 times"):
        parse_param("frame_bytes=64,128,64.0")
    assert parse_param("frame_bytes=64,128").values == (64, 128)


@pytest.mark.parametrize("argv", [["run", ""], ["decode", " "], ["sweep", "", "--param", "frame_bytes=64"],
                                  ["topology", ""], ["calibrate", ""], ["validate", "", "x"],
                                  ["hosting", "--file", ""]])
def test_an_empty_file_name_is_refused(argv):
    """``twin run ""`` ran the bundled default scenario (and ``calibrate ""`` fitted the default prior)."""
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2
    assert "an empty name" in err.getvalue().strip().splitlines()[-1]


def test_a_megabyte_word_is_cut_in_an_error_line(tmp_path):
    """A 1 MB function name was echoed whole in the problem text (the key and value were cut), and
    a 100 KB argument whole in twin's usage errors."""
    from twin.config.errors import SHORT_KEY_CHARS, SHORT_LINE_CHARS
    big = "k" * 1_000_000
    p = write(tmp_path, {**ONE, "function": big})
    msg = str(refused(load_scenario, p))  # (its list of the functions there are grows with those registered)
    assert "\n" not in msg and msg.startswith(f"{p}: function: 'kkk") and "kkk..." in msg
    assert len(msg) <= SHORT_LINE_CHARS and max(map(len, msg.split())) <= SHORT_KEY_CHARS
    code, err = cli("run", "x" * 100_000 + ".yaml", "--out", str(tmp_path / "o"))
    assert code == 2 and len(err) < 600 and err.startswith("twin: error: xxx"), err[:300]


def test_the_udp_agents_slot_is_one_datagram():
    """``--slot-bytes 1073741824`` allocated two 1 GiB slots (MemoryError under a limit): a slot is at
    most one IPv4 UDP datagram's 65,507 bytes, a multiple of 16."""
    from hw_bridge.agent import MAX_SLOT_BYTES, _slot_bytes
    assert MAX_SLOT_BYTES == 65_504 and _slot_bytes("65504") == 65_504
    for text in ("1073741824", "65520", "16"):
        with pytest.raises(argparse.ArgumentTypeError):
            _slot_bytes(text)
