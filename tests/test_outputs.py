"""The twin never loses a user's data (twin/output/files.py): it writes only the files its run
manifest names, never over a file it did not write, and each file whole or not at all (a full disk,
a file-size limit or Ctrl-C leave the previous complete file); JSON never holds NaN or Infinity."""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from twin.commands import main
from twin.output.files import MANIFEST, OutputError, RunFolder, dumps_json, mark_partial, read_manifest
from twin.usage import UsageError

ROOT = Path(__file__).resolve().parents[1]
RUN = ["run", "--rounds", "60", "--verify-rounds", "10", "--quiet"]


def snapshot(folder: Path) -> dict[str, str]:
    """name -> sha256 of every file in ``folder`` (and below)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def only_error_line(capsys, rc: int) -> str:
    cap = capsys.readouterr()
    assert rc == 2, cap
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("twin: error: "), cap.err
    assert "Traceback" not in cap.err + cap.out
    return lines[0]


@pytest.fixture
def user_folder(tmp_path) -> Path:
    """An output folder holding the user's own files, named like the twin's outputs."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "rounds.csv").write_text("my own measurements\n1,2,3\n")
    (out / "rounds.parquet").write_bytes(b"PAR1 my own table")
    (out / "histograms.png").write_bytes(b"\x89PNG my own figure")
    (out / "notes.txt").write_text("do not lose me\n")
    return out


def test_no_csv_no_plot_leave_the_users_files_alone(user_folder, capsys):
    before = snapshot(user_folder)
    assert main([*RUN, "--no-csv", "--no-plot", "--out", str(user_folder)]) == 0
    after = snapshot(user_folder)
    assert {k: after[k] for k in before} == before  # the user's files: byte for byte
    manifest = read_manifest(user_folder)
    assert sorted(manifest["files"]) == ["results.json"] and manifest["complete"] and not manifest["partial"]
    assert manifest["files"]["results.json"]["sha256"] == after["results.json"]
    assert manifest["files"]["results.json"]["bytes"] == (user_folder / "results.json").stat().st_size
    assert manifest["command"][:2] == ["twin", "run"] and manifest["seed"] == 20261129
    assert sorted(after) == sorted([*before, "results.json", MANIFEST])


def test_a_user_file_the_run_would_write_is_refused_before_the_run(user_folder, capsys):
    before = snapshot(user_folder)
    line = only_error_line(capsys, main([*RUN, "--no-plot", "--out", str(user_folder)]))
    assert "rounds.parquet" in line and "did not write" in line
    line = only_error_line(capsys, main([*RUN, "--no-plot", "--format", "csv", "--out", str(user_folder)]))
    assert "rounds.csv" in line and "did not write" in line
    line = only_error_line(capsys, main([*RUN, "--no-plot", "--overwrite", "--out", str(user_folder)]))
    assert "rounds.parquet" in line  # --overwrite replaces only a manifest's files
    assert snapshot(user_folder) == before


def test_second_run_is_refused_and_overwrite_replaces_only_the_manifests_files(user_folder, capsys):
    assert main([*RUN, "--no-csv", "--no-plot", "--out", str(user_folder)]) == 0
    first = snapshot(user_folder)
    line = only_error_line(capsys, main([*RUN, "--no-csv", "--no-plot", "--seed", "5", "--out", str(user_folder)]))
    assert "earlier run" in line and "--overwrite" in line
    assert snapshot(user_folder) == first
    assert main([*RUN, "--no-csv", "--no-plot", "--seed", "5", "--overwrite", "--out", str(user_folder)]) == 0
    second = snapshot(user_folder)
    changed = {k for k in first if first[k] != second.get(k)}
    assert changed == {"results.json", MANIFEST}  # rounds.*, histograms.png, notes.txt: untouched
    assert json.loads((user_folder / "results.json").read_text())["seed"] == 5
    assert read_manifest(user_folder)["seed"] == 5


def test_overwrite_removes_the_earlier_runs_own_stale_files_only(tmp_path):
    out = tmp_path / "o"
    assert main([*RUN, "--out", str(out)]) == 0
    (out / "notes.txt").write_text("mine\n")
    assert main([*RUN, "--no-csv", "--no-plot", "--overwrite", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "notes.txt", "results.json"]


def test_ctrl_c_while_writing_leaves_the_previous_run(tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert main([*RUN, "--no-plot", "--out", str(out)]) == 0
    before = snapshot(out)
    import twin.reports.run

    def interrupted(study, folder, fmt):
        folder.write(f"rounds.{fmt}", "half a fi")
        raise KeyboardInterrupt
    monkeypatch.setattr(twin.reports.run, "write_rounds", interrupted)
    assert main([*RUN, "--no-plot", "--seed", "9", "--overwrite", "--out", str(out)]) == 130  # twin: interrupted
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


def test_a_refused_or_failed_run_into_a_new_folder_leaves_no_folder(tmp_path, monkeypatch):
    import twin.reports.run
    monkeypatch.setattr(twin.reports.run, "write_rounds", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main([*RUN, "--no-plot", "--out", str(tmp_path / "a" / "b")]) == 130
    assert not (tmp_path / "a").exists()


def _mount_tmpfs(where: Path, size: str) -> None:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                       text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")


def test_full_disk_keeps_the_previous_results_and_names_the_file(tmp_path, capsys):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "64k")
    try:
        out = disk / "run"
        assert main([*RUN, "--no-csv", "--no-plot", "--out", str(out)]) == 0  # results.json, ~16 kB
        before = snapshot(out)
        (disk / "filler").write_bytes(b"\0" * 24_000)  # what the next run writes no longer fits
        capsys.readouterr()
        rc = main([*RUN, "--no-plot", "--format", "csv", "--seed", "7", "--overwrite", "--out", str(out)])
        line = only_error_line(capsys, rc)
        assert line.startswith("twin: error: cannot write ") and "No space left on device" in line, line
        assert str(out) in line and ("rounds.csv" in line or "results.json" in line or MANIFEST in line), line
        assert snapshot(out) == before  # the previous results, whole; no temporary file left
        assert json.loads((out / "results.json").read_text())["seed"] == 20261129
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_file_size_limit_keeps_the_previous_results(tmp_path):
    out = tmp_path / "o"
    assert main([*RUN, "--no-csv", "--no-plot", "--out", str(out)]) == 0
    before = snapshot(out)
    code = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing us
        from twin.commands import main
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
        sys.exit(main({[*RUN, "--no-plot", "--format", "csv", "--seed", "3", "--overwrite", "--out", str(out)]!r}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert lines == [f"twin: error: cannot write {out / 'rounds.csv'}: File too large"], r.stderr
    assert snapshot(out) == before


# -- JSON ------------------------------------------------------------------------------------------

def strict(text: str):
    """json.loads that refuses NaN / Infinity (Python's reader accepts them; JSON does not)."""
    def refuse(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_json_refuses_nan_and_infinity_naming_the_field(tmp_path, bad):
    doc = {"schema": "x", "placements": [{"cost": {"scale": 1.0}}, {"cost": {"scale": bad}}]}
    with pytest.raises(OutputError) as e:
        dumps_json(doc, tmp_path / "results.json")
    msg = str(e.value)
    assert msg.startswith(f"cannot write {tmp_path / 'results.json'}: placements[1].cost.scale = ") and "\n" not in msg
    folder = RunFolder(tmp_path / "o")
    with folder, pytest.raises(OutputError):
        folder.write_json("results.json", doc)
    assert not (tmp_path / "o").exists()  # nothing written, not even the folder


def test_results_json_is_strict_json(tmp_path):
    out = tmp_path / "o"
    assert main([*RUN, "--no-csv", "--no-plot", "--out", str(out)]) == 0
    for name in ("results.json", MANIFEST):
        strict((out / name).read_text())


# -- the other writers -----------------------------------------------------------------------------

def test_topology_refuses_to_replace_an_image_without_overwrite(tmp_path, capsys):
    img = tmp_path / "t.svg"
    img.write_text("<svg>mine</svg>")
    scen = str(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml")
    line = only_error_line(capsys, main(["topology", scen, "--out", str(img)]))
    assert str(img) in line and "--overwrite" in line and img.read_text() == "<svg>mine</svg>"
    assert main(["topology", scen, "--out", str(img), "--overwrite"]) == 0
    assert img.read_text().lstrip().startswith("<?xml") and not list(tmp_path.glob(".*"))


def test_calibrate_refuses_a_file_it_did_not_write_before_fitting(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: my own set\n")
    line = only_error_line(capsys, main(["calibrate", str(ROOT / "calibrations" / "card_path.yaml"),
                                         "--out", str(mine)]))
    assert str(mine) in line and mine.read_text() == "name: my own set\n"


def test_mark_partial_and_foreign_manifest(tmp_path):
    out = tmp_path / "o"
    folder = RunFolder(out, command=["twin", "x"], seed=1)
    folder.write("a.txt", "a\n")
    folder.mark_partial("stopped by Ctrl-C at round 7")
    assert folder.commit() == [out / "a.txt"]
    m = read_manifest(out)
    assert m["partial"] and m["partial_reason"] == "stopped by Ctrl-C at round 7" and m["complete"]
    mark_partial(out, "again")
    assert read_manifest(out)["partial_reason"] == "again"
    (out / MANIFEST).write_text('{"mine": true}')
    with pytest.raises(UsageError, match="not a twin run manifest"):
        RunFolder(out, overwrite=True).check(["a.txt"])
    (tmp_path / "precious").write_text("x")  # a manifest naming a file outside its folder is not the twin's
    (out / MANIFEST).write_text(json.dumps({"schema": "twin.manifest/1", "files": {"../precious": {}}}))
    with pytest.raises(UsageError, match="not a twin run manifest"):
        RunFolder(out, overwrite=True).check(["a.txt"])
    assert (tmp_path / "precious").exists()


@pytest.mark.parametrize("argv", [
    ["run", str(ROOT / "scenarios" / "mesh_two_controllers_one_gpu.yaml"), "--rounds", "30", "--quiet", "--no-plot"],
    ["decode", str(ROOT / "scenarios" / "decode_rep3.yaml"), "--shots", "30", "--verify-rounds", "10", "--quiet"],
], ids=["mesh", "decode"])
def test_mesh_and_decode_keep_to_their_manifest(tmp_path, capsys, argv):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert main([*argv, "--out", str(out)]) == 0
    first = snapshot(out)
    assert set(read_manifest(out)["files"]) == set(first) - {"notes.txt", MANIFEST}
    line = only_error_line(capsys, main([*argv, "--out", str(out)]))
    assert "earlier run" in line and snapshot(out) == first
    assert main([*argv, "--seed", "11", "--overwrite", "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine\n" and read_manifest(out)["seed"] == 11
