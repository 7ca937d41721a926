"""The fast subset of the sandbox's attack battery (``benchmarks/code_attacks_limits.py``):
every attack on a limit or on the isolation between runs must be held."""
from __future__ import annotations

import os
import pathlib

import pytest

from tests.conftest import load_script

BATTERY = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "code_attacks_limits.py"


battery = load_script(BATTERY, "code_attacks_limits")


@pytest.mark.skipif(os.geteuid() != 0, reason="the battery measures a sandbox run as root")
@pytest.mark.parametrize("attack", battery.all_attacks(), ids=lambda a: a.name)
def test_every_attack_of_the_fast_battery_is_held(attack):
    rows = attack.run(fast=True)
    assert rows
    broken = [f"{r.attack}: {r.detail}" for r in rows if not r.held]
    assert not broken, broken
