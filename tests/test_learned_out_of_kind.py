"""The out-of-kind figures in docs/learned.md are the ones benchmarks/learned_out_of_kind.py
wrote to docs/learned_out_of_kind.json: the tables are rendered from that file, the figures
quoted in the prose are in it, and every slice is labelled in range or out of kind as the data
module says."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script(ROOT / "benchmarks" / "learned_out_of_kind.py", "learned_out_of_kind")


def _figures() -> dict:
    return json.loads((ROOT / "docs" / "learned_out_of_kind.json").read_text())


def test_the_docs_tables_are_the_ones_rendered_from_the_figures_file():
    script = _script()
    docs = (ROOT / "docs" / "learned.md").read_text()
    figures_script = load_script(ROOT / "benchmarks" / "learned_figures.py", "learned_figures")
    assert figures_script.docs_block(docs, script.START, script.END) == \
        script.render_tables(_figures())


def test_slices_are_labelled_as_the_data_module_draws_them():
    assert _figures()["slices"] == _script().slice_notes()


def test_the_figures_were_read_from_the_shipped_slice_files_and_bases():
    script = _script()
    figures = _figures()
    rm, prm = (script._sha256(script.DATA / f) for f in (script.RM_FILE, script.PRM_FILE))
    for name, entry in figures["models"].items():
        for run in entry["runs"]:
            assert run["key"]["rm"] == rm and run["key"]["prm"] == prm, name
    for name, dirs in script.BASES.items():
        (run,) = figures["models"][name]["runs"]
        assert run["key"]["weights"] == script._sha256(dirs[0] / "model.safetensors"), name


def test_every_figure_quoted_in_the_prose_is_in_the_figures_file():
    """Numbers written as `ook:MODEL|WHAT|SLICE=VALUE` comments beside the prose match the
    file (the mean over the model's runs)."""
    figures = _figures()
    docs = (ROOT / "docs" / "learned.md").read_text()
    quoted = re.findall(r"<!-- ook:([^|]+)\|(\w+)\|([\w/]+)=([\d.]+) -->", docs)
    assert quoted, "docs/learned.md quotes no out-of-kind figure"
    for model, what, slice_name, value in quoted:
        got = figures["models"][model]["aggregate"][what][slice_name]["mean"]
        assert f"{got:.3f}" == value, (model, what, slice_name, got, value)


def test_a_run_whose_folder_is_gone_keeps_its_figures_only_if_read_from_the_same_data(tmp_path):
    script = _script()
    (kept,) = _figures()["models"]["`lm_base` (saw 1–99, 2–4 steps)"]["runs"]
    assert script.read_run(tmp_path / "gone", kept) is kept
    other = {**kept, "key": {**kept["key"], "rm": "another file"}}
    with pytest.raises(SystemExit, match="other data or options"):
        script.read_run(tmp_path / "gone", other)
