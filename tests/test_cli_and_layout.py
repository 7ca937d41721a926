import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from rewardkit.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_list_prints_every_reward_with_description(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("exact_match ") and "normalisation" in line for line in out.splitlines())
    assert main(["list", "--json"]) == 0
    assert "regex" in json.loads(capsys.readouterr().out)


def test_option_values_are_parsed_as_yaml():
    from rewardkit.cli import parse_key_value

    assert parse_key_value("final_form=true") == ("final_form", True)
    assert parse_key_value("tol=1e-3") == ("tol", 1e-3)
    assert parse_key_value("pattern=^a$") == ("pattern", "^a$")


def test_top_level_folders_are_importable_only_inside_the_rewardkit_namespace():
    import rewardkit.sandboxes
    import rewardkit.verifiers

    assert Path(rewardkit.verifiers.__file__).parent == ROOT / "verifiers"
    assert Path(rewardkit.sandboxes.__file__).parent == ROOT / "sandboxes"
    # run from a neutral directory so the repository root is not on sys.path
    code = "import importlib.util as u; print(u.find_spec('verifiers'), u.find_spec('sandboxes'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         check=True).stdout
    assert str(ROOT) not in out


def test_cli_module_runs_as_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "rewardkit", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("rewardkit ")
