"""The bundled-file lookup (twin.bundled) and `twin scenarios` (list, copy, refusing to overwrite)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import twin.bundled as bundled
from twin.commands import main

ROOT = Path(__file__).resolve().parent.parent


def one_line_error(capsys, rc: int) -> str:
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_checkout_lookup_is_the_repository_top_level():
    # an editable checkout has no twin/_bundled: the top-level folders are the bundled ones
    assert not bundled.INSTALLED.exists()
    assert bundled.bundled_root() == ROOT
    assert bundled.bundled_path("scenarios/card_path_64b.yaml") == ROOT / "scenarios" / "card_path_64b.yaml"
    assert bundled.bundled_path("rtl/qrt_contract.vh").is_file()
    assert [p.name for p in bundled.scenario_files()] == sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))


def test_installed_layout_wins_when_present(tmp_path, monkeypatch):
    inst = tmp_path / "twin" / "_bundled"
    (inst / "scenarios").mkdir(parents=True)
    monkeypatch.setattr(bundled, "INSTALLED", inst)
    assert bundled.bundled_root() == inst
    assert bundled.bundled_path("calibrations/hosting.yaml") == inst / "calibrations" / "hosting.yaml"
    assert bundled.is_bundled(inst / "calibrations" / "card_path.yaml")
    assert not bundled.is_bundled(ROOT / "calibrations" / "card_path.yaml")


def test_local_file_first_then_bundled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert bundled.local_or_bundled("scenarios/card_path_64b.yaml") == ROOT / "scenarios" / "card_path_64b.yaml"
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "card_path_64b.yaml").write_text("name: mine\n")
    assert bundled.local_or_bundled("scenarios/card_path_64b.yaml") == Path("scenarios/card_path_64b.yaml")


def test_no_library_module_imports_the_commands():
    """Commands import libraries, never the reverse (twin/cli.py is the commands' own shim; twin/launch.py
    and twin/__main__.py are the program, which starts them)."""
    offenders = []
    for f in [*(ROOT / "twin").rglob("*.py"), *(ROOT / "hw_bridge").rglob("*.py")]:
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith("twin/commands/") or rel in ("twin/cli.py", "twin/__main__.py", "twin/launch.py"):
            continue
        for line in f.read_text().splitlines():
            s = line.strip()
            if s.startswith(("from twin.commands", "import twin.commands", "from twin.cli", "import twin.cli",
                             "from twin import cli", "from twin import commands")):
                offenders.append(f"{rel}: {s}")
    assert offenders == []


def test_scenarios_lists_every_bundled_one_with_kind_and_description(capsys):
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line and not line.startswith(" ")}
    for f in (ROOT / "scenarios").glob("*.yaml"):
        doc = yaml.safe_load(f.read_text())
        line = rows[f.stem]
        assert line.split()[1] == ("machine" if "machine" in doc else "decode" if "decode" in doc else "run"), line
        assert " ".join(doc["description"].split()) in line
    assert main(["scenarios", "list"]) == 0
    assert capsys.readouterr().out == out


def test_scenarios_copy_rewrites_data_paths_and_runs_from_the_users_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios", "copy", "card_path_64b"]) == 0
    copy = tmp_path / "card_path_64b.yaml"
    text = copy.read_text()
    src = (ROOT / "scenarios" / "card_path_64b.yaml").read_text()
    doc, orig = yaml.safe_load(text), yaml.safe_load(src)
    assert doc["calibration"] == "bundled:calibrations/fitted/card_path.yaml"
    assert doc["measured"] == "bundled:calibrations/measured/card_path_64b.yaml"
    assert {k: v for k, v in doc.items() if k not in ("calibration", "measured")} == \
        {k: v for k, v in orig.items() if k not in ("calibration", "measured")}
    def comments(t):
        return [ln for ln in t.splitlines() if ln.startswith("#")]
    assert comments(text) == comments(src)  # the copy keeps the file's comments
    capsys.readouterr()
    assert main(["run", "card_path_64b.yaml", "--rounds", "200", "--verify-rounds", "20", "--quiet", "--no-plot",
                 "--no-csv"]) == 0
    results = (tmp_path / "runs" / "card_path_64b" / "results.json").read_text()
    # the paths it records are the names the scenario wrote, not where the twin is installed
    assert json.loads(results)["measured"]["file"] == "bundled:calibrations/measured/card_path_64b.yaml"
    assert str(ROOT) not in results and "site-packages" not in results


@pytest.mark.parametrize("value", ["bundled:../pyproject.toml", "bundled:/etc/hostname", "bundled:twin/units.py",
                                   "bundled:"])
def test_a_bundled_name_stays_inside_the_bundle(tmp_path, value):
    from twin.config import ConfigError, named_file
    with pytest.raises(ConfigError) as e:
        named_file(tmp_path / "s.yaml", "calibration", value)
    assert "calibration" in str(e.value) and "inside the bundled files" in str(e.value)


def test_scenarios_copy_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "card_path_64b.yaml").write_text("mine\n")
    line = one_line_error(capsys, main(["scenarios", "copy", "card_path_64b"]))
    assert line == ("twin: error: scenarios copy: card_path_64b.yaml exists; not overwriting it "
                    "(remove it or name another DEST)")
    assert (tmp_path / "card_path_64b.yaml").read_text() == "mine\n"
    line = one_line_error(capsys, main(["scenarios", "copy", "no_such_study"]))
    assert line.startswith("twin: error: scenarios copy no_such_study: no bundled scenario of that name (there are: ")
    assert "card_path_64b" in line


def test_scenarios_copy_into_a_folder_brings_the_user_decoder_along(tmp_path, capsys):
    dest = tmp_path / "mine"
    assert main(["scenarios", "copy", "decode_rep3_user.yaml", f"{dest}/"]) == 0
    err = capsys.readouterr().err  # the copy says the scenario runs code (a scenario is a program)
    assert err.startswith(f"twin: note: scenario {dest / 'decode_rep3_user.yaml'} runs code: module examples.rep3_rule "
                          "(key decode.function)") and err.count("\n") == 1, err
    doc = yaml.safe_load((dest / "decode_rep3_user.yaml").read_text())
    assert doc["hosting"] == "bundled:calibrations/hosting.yaml"
    assert (dest / "examples" / "rep3_rule.py").read_bytes() == (ROOT / "examples" / "rep3_rule.py").read_bytes()
    # the decoder's module is the copy beside the scenario, not the repository's
    from twin.qec.load import function_roots
    assert function_roots(dest / "decode_rep3_user.yaml")[0] == dest.resolve()
    # a second copy would overwrite the decoder: refused before anything is written
    (dest / "decode_rep3_user.yaml").unlink()
    line = one_line_error(capsys, main(["scenarios", "copy", "decode_rep3_user", str(dest)]))
    assert f"{dest / 'examples' / 'rep3_rule.py'} exists" in line
    assert not (dest / "decode_rep3_user.yaml").exists()


def test_python_m_twin_and_the_twin_cli_shim(tmp_path):
    for mod in ("twin", "twin.cli"):
        proc = subprocess.run([sys.executable, "-m", mod, "--version"], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0 and proc.stdout.startswith("twin "), (mod, proc.stderr)


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")))
def test_every_bundled_scenario_copies_to_a_file_that_loads_elsewhere(name, tmp_path, monkeypatch, capsys):
    """The copy's paths resolve from another folder: it loads (a decode scenario with its decoder)."""
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios", "copy", name]) == 0
    doc = yaml.safe_load((tmp_path / f"{name}.yaml").read_text())
    for key in ("calibration", "hosting", "measured"):
        if doc.get(key):
            assert doc[key].startswith("bundled:") and (ROOT / doc[key][8:]).is_file(), (key, doc[key])
    if "decode" in doc:
        from twin.qec.load import load_decode
        def ours(mod: str) -> bool:
            return mod == "examples" or mod.startswith("examples.")
        saved = {m: sys.modules.pop(m) for m in list(sys.modules) if ours(m)}  # an earlier test's, from the checkout
        try:
            load_decode(tmp_path / f"{name}.yaml")  # imports a copied decoder (examples.rep3_rule) from tmp_path
        finally:
            for mod in [m for m in sys.modules if ours(m)]:  # ... which later tests must not find already imported
                del sys.modules[mod]
            sys.modules.update(saved)
    elif "machine" in doc:
        from twin.machine.study import load_machine
        load_machine(tmp_path / f"{name}.yaml")
    else:
        from twin.scenario import load_scenario
        load_scenario(tmp_path / f"{name}.yaml")
