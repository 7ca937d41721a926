"""The learned-reward figures in docs/learned.md are the ones benchmarks/learned_figures.py
wrote to docs/learned_figures.json (the table is rendered from that file, so a figure typed by
hand, or a file regenerated without updating the docs, fails here)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script(ROOT / "benchmarks" / "learned_figures.py", "learned_figures")


def test_the_docs_table_is_the_one_rendered_from_the_figures_file():
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    docs = (ROOT / "docs" / "learned.md").read_text()
    assert script.docs_block(docs) == script.render_table(figures)


def test_the_implicit_reward_table_is_the_one_rendered_from_the_figures_file():
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    docs = (ROOT / "docs" / "learned.md").read_text()
    assert "lm_base" in figures["implicit"]
    assert script.docs_block(docs, script.IMPLICIT_START, script.IMPLICIT_END) == \
        script.render_implicit_table(figures)


def test_the_implicit_figures_are_of_the_shipped_lm_base():
    """The figures file names the weights it read; a rebuilt lm_base/ must be re-measured."""
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    shipped = script._sha256(ROOT / "data" / "learned" / "lm_base" / "model.safetensors")
    assert figures["implicit"]["lm_base"]["weights"] == shipped


def test_every_figure_quoted_in_the_prose_is_in_the_figures_file():
    """Numbers written as `figure:KEY=VALUE` comments beside the prose match the file."""
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    docs = (ROOT / "docs" / "learned.md").read_text()
    quoted = re.findall(r"<!-- figure:([\w./-]+)=([\d.]+) -->", docs)
    assert quoted, "docs/learned.md quotes no figure"
    for key, value in quoted:
        node = figures
        for part in key.split("/"):
            node = node[part]
        assert f"{node:.3f}" == value, (key, node, value)


def test_the_recipe_in_the_file_is_the_shipped_recipe():
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    assert figures["recipe"] == script.recipe()


def test_the_likelihood_runs_in_the_file_used_the_shipped_likelihood_recipe():
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    assert figures["implicit"]["likelihood"]["recipe"] == script.recipe(script.LIKELIHOOD_RECIPE)


def test_runs_from_other_bases_used_the_recipe_file_they_name():
    """An entry trained with another recipe file (``--likelihood-from NAME=DIR,RECIPE``)
    records it, and the shipped file still holds those settings."""
    script = _script()
    figures = json.loads((ROOT / "docs" / "learned_figures.json").read_text())
    named = {k: v for k, v in figures["implicit"].items() if "recipe_file" in v}
    assert named, "no run from another base names its recipe file"
    for name, entry in named.items():
        assert entry["recipe"] == script.recipe(entry["recipe_file"]), name
