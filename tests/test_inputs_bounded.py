"""Inputs are bounded and strict (issue 17): each finding of the issue, and the limits of
twin.config.load, as one case. Every refusal is one ``twin: error:`` line (exit 2) or a
:class:`ConfigError` naming the file and the key; nothing blocks, recurses, overflows or grows.
"""
from __future__ import annotations

import copy
import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel
from scenario_mutations import ROOT, base_doc, limit

from twin.commands import main
from twin.config import ConfigError, load_yaml
from twin.config.load import MAX_INPUT_BYTES, MAX_YAML_DEPTH
from twin.qec.load import load_decode
from twin.scenario import load_scenario

FAULTS = base_doc(ROOT / "scenarios" / "faults_epyc7282.yaml")
LIVE = base_doc(ROOT / "scenarios" / "live_cpu_shm.yaml")
DECODE = base_doc(ROOT / "scenarios" / "decode_rep3.yaml")


def write(tmp_path: Path, doc, name="s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return p


def edited(doc: dict, **changes) -> dict:
    doc = copy.deepcopy(doc)
    for dotted, v in changes.items():
        *head, last = dotted.split("__")
        cur = doc
        for k in head:
            cur = cur[int(k)] if isinstance(cur, list) else cur[k]
        cur[int(last) if isinstance(cur, list) else last] = v
    return doc


def refused(path: Path, loader=load_scenario) -> ConfigError:
    with limit(10), pytest.raises(ConfigError) as e:
        loader(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    assert len(msg) < 600, msg
    return e.value


def cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with limit(10), redirect_stdout(io.StringIO()), redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


# -- files that are not files ----------------------------------------------------------------------
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)  # nobody writes it: opening it for reading would block forever
    code, err = cli("run", str(fifo), "--quiet")
    assert code == 2 and err == f"twin: error: {fifo}: a FIFO (named pipe), not a regular file; give a file\n"


@pytest.mark.parametrize("what", ["folder", "device"])
def test_a_folder_or_device_is_refused(tmp_path, what):
    target = tmp_path if what == "folder" else Path("/dev/null")
    code, err = cli("run", str(target), "--quiet")
    assert code == 2 and err.startswith(f"twin: error: {target}: a ") and err.count("\n") == 1, err


def test_a_file_over_16_mib_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "s.yaml"
    with p.open("wb") as f:
        f.truncate(MAX_INPUT_BYTES + 1)  # sparse: nothing written
    assert "larger than 16 MiB" in str(refused(p))


def test_a_fifo_named_as_calibration_or_gaps_file_is_refused_by_key(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    e = refused(write(tmp_path, edited(FAULTS, calibration=str(tmp_path / "pipe"))))
    assert e.key == "calibration" and "not a regular file" in e.problem
    doc = edited(FAULTS, traffic={"mode": "open_loop", "gaps": {"distribution": "file", "file": "pipe"}})
    del doc["faults"]["drop_frame"]
    e = refused(write(tmp_path, doc))
    assert e.key == "traffic.gaps.file" and "not a regular file" in e.problem


def test_a_name_too_long_for_the_system_is_refused_by_key(tmp_path):
    e = refused(write(tmp_path, edited(FAULTS, measured="x" * 5000)))
    assert e.key == "measured" and "cannot read it" in e.problem


# -- bytes and YAML --------------------------------------------------------------------------------
def test_a_non_utf8_byte_in_a_comment_names_the_line(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes(b"# caf\xe9\n" + yaml.safe_dump(FAULTS).encode())
    assert str(refused(p)) == f"{p}: line 1: byte 0xe9 is not UTF-8 text (scenario, calibration, measurement " \
                              "and gaps files are UTF-8)"


def test_a_16_kb_alias_bomb_is_refused_without_being_expanded(tmp_path):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]  # 10^9 values
    text = "\n".join(lines) + "\n" + yaml.safe_dump(edited(FAULTS, description="x")).replace(
        "description: x", "description: *a8")
    assert len(text) < 2000
    e = refused(write(tmp_path, text))
    assert "aliases expand to more than 4,000,000 values" in e.problem


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 3000])
def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path, depth):
    e = refused(write(tmp_path, yaml.safe_dump(FAULTS) + "x: " + "[" * depth + "]" * depth + "\n"))
    assert "nest" in e.problem, e.problem


@pytest.mark.parametrize("text, problem", [
    ("a: &a [1, *a]\n", "recursive"),
    ("name: a\nname: b\n", "duplicate key"),
    ("a: 2024-13-45\n", "month"),
    ("a: " + "9" * 5000 + "\n", "digits"),
    ("a: !!python/object:os.system x\n", "constructor"),
])
def test_odd_yaml_is_refused_in_one_line(tmp_path, text, problem):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_yaml(p)
    assert problem in str(e.value) and "\n" not in str(e.value)


def test_an_error_shows_a_huge_value_cut_short(tmp_path):
    e = refused(write(tmp_path, edited(FAULTS, deadline="9" * 100_000 + " ns")))
    assert e.key == "deadline" and len(str(e)) < 400


# -- numbers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1e400 ns", "1e-400 ns", "0.4 ps", "٣ ns", "３ ns", "nan ns", "inf ns", ".inf",
                                   "1e99999 ns", "-5 ns", "5 parsec", float("inf"), float("nan")])
def test_a_duration_must_be_finite_ascii_and_in_range(tmp_path, value):
    assert refused(write(tmp_path, edited(FAULTS, deadline=value))).key == "deadline"


@pytest.mark.parametrize("ppm", [-999999, 20_000, float("inf"), float("nan")])
def test_ppm_is_a_real_oscillators(tmp_path, ppm):
    doc = edited(FAULTS, traffic={"mode": "closed_loop", "clock": "independent", "ppm": ppm})
    assert refused(write(tmp_path, doc)).key == "traffic.ppm"


def test_ppm_within_spread_spectrum_is_accepted(tmp_path):
    doc = edited(FAULTS, traffic={"mode": "closed_loop", "clock": "independent", "ppm": -5000})
    assert load_scenario(write(tmp_path, doc)).scenario.traffic.ppm == -5000


@pytest.mark.parametrize("scale", [float("inf"), float("nan"), 1e9, 0.0])
def test_cost_scale_is_finite_and_in_range(tmp_path, scale):
    doc = edited(DECODE, decode__cost={"how": "host_timed", "scale": scale})
    assert refused(write(tmp_path, doc), load_decode).key == "decode.cost.scale"


@pytest.mark.parametrize("kind", ["stall", "host_freeze"])
def test_a_window_of_no_time_is_refused(tmp_path, kind):
    doc = edited(FAULTS, faults={"timeout": "50 us", kind: [{"at": "1 us", "duration": "0 ns"}]})
    assert refused(write(tmp_path, doc)).key == f"faults.{kind}[0].duration"


def test_consumer_and_producer_on_one_core_is_refused(tmp_path):
    doc = edited(LIVE, nodes__2__bridge={"backend": "shm", "cpu": 1, "producer_cpu": 1})
    e = refused(write(tmp_path, doc))
    assert e.key == "nodes[2].bridge.producer_cpu" and "preemption" in e.problem


def test_every_input_model_refuses_non_finite_numbers():
    """pydantic's allow_inf_nan=False on every model a file is validated as."""
    import twin.calibration.measured
    import twin.calibration.roce
    import twin.exchange.gen
    import twin.qec.hosting
    import twin.scenario.schema  # noqa: F401

    def walk(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    models = [m for m in walk(BaseModel) if m.__module__.startswith("twin.")]
    assert len(models) > 20
    loose = [f"{m.__module__}.{m.__name__}" for m in models if m.model_config.get("allow_inf_nan", True)]
    assert not loose


def test_a_long_fault_list_loads(tmp_path):
    rounds = list(range(1, 20_001))
    doc = edited(FAULTS, rounds=30_000, faults__corrupt_piece={"rounds": rounds, "path": "request"})
    loaded = load_scenario(write(tmp_path, doc))
    assert loaded.scenario.faults.plan().corrupt_rounds == frozenset(rounds)


@pytest.mark.parametrize("flag, value", [("--rounds", "٣"), ("--seed", "٣"), ("--trace", "١:٣"), ("--rounds", "1e400")])
def test_command_line_numbers_are_ascii_and_in_range(flag, value):
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(["run", str(ROOT / "scenarios" / "card_path_64b.yaml"), flag, value, "--quiet"])
    assert e.value.code == 2 and f"argument {flag}" in err.getvalue()


@pytest.mark.parametrize("section, key", [("card", "engine_land_ns"), ("hosts.epyc7282.pcie", "tlp_overhead_bytes")])
def test_a_parameter_set_number_beyond_any_hop_is_refused(tmp_path, section, key):
    cal = yaml.safe_load((ROOT / "calibrations" / "fitted" / "card_path.yaml").read_text(encoding="utf-8"))
    cur = cal
    for k in section.split("."):
        cur = cur[k]
    cur[key] = 10**300 if key.endswith("bytes") else 1e300  # overflowed the engine's integers
    cal_path = write(tmp_path, cal, "cal.yaml")
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, edited(FAULTS, calibration=str(cal_path))))
    assert e.value.file == str(cal_path) and e.value.key == f"{section}.{key}", str(e.value)


@pytest.mark.parametrize("where, edit, key, value", [
    ("loop", {"traffic__in_flight": 4}, "traffic.in_flight", 4),
    ("mesh", {}, "flows[0].traffic.mode", "open_loop"),  # the bundled mesh's flows are open loop
    ("mesh", {"flows__1__traffic__in_flight": 2}, "flows[1].traffic.in_flight", 2),
])
def test_a_dropped_frame_needs_one_request_in_flight_in_every_loop(tmp_path, where, edit, key, value):
    """drop_frame's resend after the timeout keeps the order only with one request in flight: a loop
    or a mesh flow with several (or open loop) is refused at load, one line naming the key."""
    if where == "loop":
        doc = edited(FAULTS, faults__drop_frame={"rounds": [10]})
    else:
        doc = base_doc(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml")
        doc["faults"] = {"drop_frame": {"rounds": [10]}, "timeout": "20 us"}
        if edit:
            for f in doc["flows"]:
                f["traffic"] = {"mode": "closed_loop"}
    e = refused(write(tmp_path, edited(doc, **edit)))
    assert e.key == key and e.value == value and "one request in flight" in e.problem


@pytest.mark.parametrize("kind, rounds, key, value, why", [
    ("corrupt_piece", [7, 9, 7], "faults.corrupt_piece.rounds[2]", 7, "listed twice"),
    ("drop_frame", [3, 3], "faults.drop_frame.rounds[1]", 3, "listed twice"),
    ("corrupt_piece", [100, 20_001], "faults.corrupt_piece.rounds[1]", 20_001, "last round (20,000)"),
    ("drop_frame", [20_000, 25_000], "faults.drop_frame.rounds[1]", 25_000, "last round (20,000)"),
])
def test_a_fault_that_could_never_happen_is_refused(tmp_path, kind, rounds, key, value, why):
    """A round listed twice would fault once, and one past the scenario's 20,000 rounds never: each
    is refused at load, one line naming the key (rounds are numbered 1..rounds)."""
    doc = edited(FAULTS, **{f"faults__{kind}": {"rounds": rounds}})
    e = refused(write(tmp_path, doc))
    assert (e.key, e.value) == (key, value) and why in e.problem, str(e)


def test_a_mesh_fault_past_every_flows_last_round_is_refused(tmp_path):
    """In a mesh the faults block applies to every flow: a round is refused only past the longest flow."""
    doc = base_doc(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml")
    doc["flows"][0]["rounds"], doc["flows"][1]["rounds"] = 50, 80
    doc["faults"] = {"corrupt_piece": {"rounds": [60]}}
    load_scenario(write(tmp_path, doc))  # flow 1 reaches round 60
    doc["faults"] = {"corrupt_piece": {"rounds": [60, 81]}}
    e = refused(write(tmp_path, doc))
    assert (e.key, e.value) == ("faults.corrupt_piece.rounds[1]", 81) and "in any flow" in e.problem, str(e)


@pytest.mark.parametrize("edit, key, says", [
    (lambda t: t.replace("description:", "description: !!binary aGVsbG8=\n#", 1), "line 4", "binary values"),
    (lambda t: t + "deadline: !!set {a: null}\n", "line", "set values"),
    (lambda t: t + 'deadline: "3\x00 us"\n', "line", "character #x0000"),
    (lambda t: t + "deadline: .inf\n", "deadline", "not a finite number"),
])
def test_yaml_types_no_input_holds_are_refused_with_their_line(tmp_path, edit, key, says):
    """!!binary (bytes) and !!set are not turned into text or lists; a NUL byte's error names its
    line (the reader gives a position, not a mark); .inf is not offered a unit."""
    text = (ROOT / "scenarios" / "card_path_64b.yaml").read_text(encoding="utf-8")
    text = text.replace("../calibrations", str(ROOT / "calibrations"))
    e = refused(write(tmp_path, edit(text)))
    assert e.key.startswith(key) and says in str(e) and "inf ns" not in str(e), str(e)


@pytest.mark.parametrize("line, says", [
    ("rounds: 020000", "leading 0"),    # YAML 1.1: octal 8,192
    ("rounds: 5:33:20", "base 60"),     # YAML 1.1: 20,000
    ("seed: 2026-12-02", "seed: 2026-12-02: "),  # a date, shown as written (not datetime.date(...))
])
def test_numbers_that_yaml_reads_as_other_numbers_are_refused(tmp_path, line, says):
    text = (ROOT / "scenarios" / "card_path_64b.yaml").read_text(encoding="utf-8")
    text = text.replace("../calibrations", str(ROOT / "calibrations"))
    key = line.split(":")[0]
    text = "\n".join(line if ln.startswith(key + ":") else ln for ln in text.splitlines()) + "\n"
    e = refused(write(tmp_path, text))
    assert says in str(e), str(e)


def test_a_merge_key_merges_and_the_keys_beside_it_override(tmp_path):
    """`<<: *anchor` is YAML's merge: its keys come in, a key written beside it wins (not a duplicate);
    a key written twice by hand is still refused."""
    p = write(tmp_path, "base: &b {rounds: 5, seed: 3}\nother:\n  <<: *b\n  rounds: 7\n", "m.yaml")
    assert load_yaml(p) == {"base": {"rounds": 5, "seed": 3}, "other": {"rounds": 7, "seed": 3}}
    with pytest.raises(ConfigError, match="duplicate key"):
        load_yaml(write(tmp_path, "other:\n  rounds: 5\n  rounds: 7\n", "d.yaml"))


@pytest.mark.parametrize("kind, windows, key, value", [
    ("stall", [{"at": "20 ms", "duration": "200 us"}, {"at": "20 ms", "duration": "200 us"}], "faults.stall[1].at",
     "20 ms"),
    ("stall", [{"at": "1 ms", "duration": "1 ms"}, {"at": "1500 us", "duration": "10 us"}], "faults.stall[1].at",
     "1500 us"),  # inside the first
    ("host_freeze", [{"at": "5 ms", "duration": "1 ms"}, {"at": "4 ms", "duration": "1001 us"}],
     "faults.host_freeze[1].at", "4 ms"),  # ends 1 us into the first
])
def test_overlapping_stop_windows_are_refused(tmp_path, kind, windows, key, value):
    """Two windows of one kind that overlap stop the consumer once but would count twice: refused,
    naming the later-listed one; windows that only touch ([1, 2) ms and [2, 3) ms) are two stops."""
    e = refused(write(tmp_path, edited(FAULTS, **{f"faults__{kind}": windows})))
    assert (e.key, e.value) == (key, value) and "overlaps" in e.problem, str(e)
    load_scenario(write(tmp_path, edited(FAULTS, **{f"faults__{kind}": [{"at": "1 ms", "duration": "1 ms"},
                                                                         {"at": "2 ms", "duration": "1 ms"}]})))


@pytest.mark.parametrize("faults, key, value", [
    ({"timeout": "1 us"}, "faults.timeout", "1 us"),  # a timeout with nothing to time
    ({}, "faults", "{}"),
    ({"drop_frame": {"rounds": [True]}}, "faults.drop_frame.rounds[0]", True),  # was round 1
    ({"corrupt_piece": {"rounds": ["5"]}}, "faults.corrupt_piece.rounds[0]", "5"),
])
def test_a_faults_block_that_would_change_nothing_or_is_not_rounds_is_refused(tmp_path, faults, key, value):
    e = refused(write(tmp_path, edited(FAULTS, faults=faults)))
    assert (e.key, e.value) == (key, value), str(e)
