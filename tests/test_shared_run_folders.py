"""Run folders safe to share (twin/output/files.py, twin/output/lock.py): one run at a time per
folder, an earlier run's files replaced or removed only while they are still the files its
manifest describes (bytes and sha256), so a planted manifest deletes nothing and a file the user
edited since is never replaced."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from twin.commands import main
from twin.output.files import MANIFEST, RunFolder, read_manifest
from twin.output.lock import LOCK_NAME, FolderLock
from twin.usage import UsageError

ROOT = Path(__file__).resolve().parents[1]
RUN = ["run", "--rounds", "60", "--verify-rounds", "10", "--quiet", "--no-plot"]


def test_a_second_run_on_a_locked_folder_is_refused_naming_the_pid(tmp_path):
    out = tmp_path / "o"
    first = RunFolder(out).check(["a.txt"])
    with pytest.raises(UsageError) as e:
        RunFolder(out).check(["a.txt"])
    msg = str(e.value)
    assert f"pid {os.getpid()}" in msg and str(out) in msg and "\n" not in msg
    first.write("a.txt", "first\n")
    first.commit()
    assert not (out / LOCK_NAME).exists()  # released, and its file removed
    with pytest.raises(UsageError, match="earlier run"):  # no lock now: the earlier run is what refuses
        RunFolder(out).check(["a.txt"])
    again = RunFolder(out, overwrite=True).check(["a.txt"])
    again.write("a.txt", "second\n")
    again.commit()
    assert (out / "a.txt").read_text() == "second\n"


def test_discard_releases_the_lock_and_removes_the_folder_it_made(tmp_path):
    out = tmp_path / "a" / "b"
    with RunFolder(out).check(["x"]):
        assert (out / LOCK_NAME).exists()
    assert not (tmp_path / "a").exists()
    RunFolder(out).check(["x"]).discard()  # lockable again
    assert not (tmp_path / "a").exists()


def test_a_dead_runs_lock_file_is_taken_over(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / LOCK_NAME).write_text("999999\n")  # left by a killed run: the file is there, nobody holds it
    folder = RunFolder(out).check(["a.txt"])
    folder.write("a.txt", "x")
    folder.commit()
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", MANIFEST]


def test_a_planted_lock_link_is_refused(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="symbolic link"):
        RunFolder(out).check(["a.txt"])
    assert not (tmp_path / "elsewhere").exists()


def _hold(folder: str, names: list[str], text: str, started, go, results) -> None:
    """One process's run: check (taking the lock), wait, stage, commit; records ok or the refusal."""
    try:
        f = RunFolder(folder).check(names)
    except UsageError as e:
        results.put(("refused", str(e)))
        started.set()
        return
    started.set()
    go.wait(10)
    for n in names:
        f.write(n, text)
    f.commit()
    results.put(("ok", text))


def test_ten_concurrent_pairs_one_winner_each_never_replaced(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for pair in range(10):
        out = str(tmp_path / f"o{pair}")
        results = ctx.Queue()
        go = ctx.Event()
        procs = []
        for who in ("A", "B"):
            started = ctx.Event()
            p = ctx.Process(target=_hold, args=(out, ["results.json"], who, started, go, results))
            p.start()
            started.wait(10)
            procs.append(p)
        go.set()
        for p in procs:
            p.join(30)
        got = sorted(results.get(timeout=5) for _ in procs)
        assert [g[0] for g in got] == ["ok", "refused"], got
        winner = got[0][1]
        assert "another twin run" in got[1][1]
        assert (Path(out) / "results.json").read_text() == winner
        assert read_manifest(out)["complete"]


def test_two_twin_runs_on_one_out_the_loser_is_refused(tmp_path):
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "twin", *RUN, "--rounds", "20000", "--out", str(out)]
    a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (out / LOCK_NAME).exists() and a.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    b = subprocess.run([*cmd, "--seed", "5"], capture_output=True, text=True, env=env, timeout=120)
    a.wait(120)
    assert a.returncode == 0, a.stderr.read() if a.stderr else ""
    assert b.returncode == 2 and len(b.stderr.splitlines()) == 1, b.stderr
    assert "another twin run" in b.stderr or "earlier run" in b.stderr, b.stderr
    assert json.loads((out / "results.json").read_text())["seed"] != 5


def test_a_planted_manifest_deletes_nothing(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work\n")
    (out / "results.json").write_text('{"mine": true}\n')
    (out / MANIFEST).write_text(json.dumps({"schema": "twin.manifest/1", "files": {
        "thesis.tex": {"bytes": 14, "sha256": "0" * 64}, "results.json": {"bytes": 15, "sha256": "1" * 64}}}))
    rc = main([*RUN, "--overwrite", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "is not the file manifest.json records" in err, err
    assert (out / "thesis.tex").read_text() == "years of work\n"
    assert (out / "results.json").read_text() == '{"mine": true}\n'


def test_a_file_the_user_edited_since_is_not_replaced(tmp_path, capsys):
    out = tmp_path / "o"
    assert main([*RUN, "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    doc["note"] = "my annotation"
    (out / "results.json").write_text(json.dumps(doc))
    edited = (out / "results.json").read_bytes()
    capsys.readouterr()
    rc = main([*RUN, "--overwrite", "--seed", "3", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "results.json is not the file manifest.json records" in err, err
    assert (out / "results.json").read_bytes() == edited
    # untouched, the earlier run's files are replaced with --overwrite as before
    (out / "results.json").unlink()
    assert main([*RUN, "--overwrite", "--seed", "3", "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["seed"] == 3


def test_a_file_changed_during_the_run_is_not_replaced(tmp_path):
    out = tmp_path / "o"
    first = RunFolder(out)
    first.write("a.txt", "the twin's\n")
    first.commit()
    folder = RunFolder(out, overwrite=True).check(["a.txt"])
    (out / "a.txt").write_text("the user's, written while the run ran\n")
    folder.write("a.txt", "new\n")
    with folder, pytest.raises(UsageError, match="changed during the run"):
        folder.commit()
    assert (out / "a.txt").read_text() == "the user's, written while the run ran\n"
    assert not (out / LOCK_NAME).exists()


def test_the_lock_is_the_kernels_a_killed_holder_frees_it(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    code = ("import sys, time; from pathlib import Path; from twin.output.lock import FolderLock; "
            "FolderLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        with pytest.raises(UsageError, match=f"pid {p.pid}"):
            RunFolder(out).check(["a.txt"])
    finally:
        p.kill()
        p.wait()
    lock = FolderLock(out).acquire()
    assert lock.held
    lock.release()


@pytest.mark.parametrize("plant", ["deep", "dev_zero", "fifo"])
def test_a_hostile_manifest_is_refused_in_one_line(tmp_path, capsys, plant):
    out = tmp_path / "o"
    out.mkdir()
    m = out / MANIFEST
    if plant == "deep":
        m.write_text("[" * 1000 + "]" * 1000)  # json.loads: RecursionError
    elif plant == "dev_zero":
        m.symlink_to("/dev/zero")  # read whole: MemoryError
    else:
        os.mkfifo(m)  # read: waits for a writer for ever
    rc = main([*RUN, "--overwrite", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "is not a twin run manifest" in err, err


def test_a_planted_manifest_that_matches_the_users_file_still_removes_nothing(tmp_path):
    import hashlib
    out = tmp_path / "o"
    out.mkdir()
    mine = out / "mine.txt"
    mine.write_bytes(b"my notes\n")
    entry = {"bytes": 9, "sha256": hashlib.sha256(b"my notes\n").hexdigest()}
    (out / MANIFEST).write_text(json.dumps({"schema": "twin.manifest/1", "files": {"mine.txt": entry}}))
    assert main([*RUN, "--overwrite", "--out", str(out)]) == 0
    assert mine.read_bytes() == b"my notes\n"  # not a name the twin writes: never removed
    assert "mine.txt" not in read_manifest(out)["files"]
