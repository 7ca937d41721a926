"""The step loop both recipes share: its cadence (evaluate, log, save), the recipe's checks, and
a Ctrl-C that lets the step finish and then hands over to the recipe's checkpoint."""
from __future__ import annotations

import os
import signal

import pytest

from rewardkit.runtime.steps import Every, run_steps


class Recipe:
    """Records what the loop asked of it, in order."""

    def __init__(self, done: int = 0, interrupt_at: int | None = None) -> None:
        self.done = done
        self.interrupt_at = interrupt_at
        self.calls: list[tuple] = []

    def step(self) -> dict[str, float]:
        self.done += 1
        if self.done == self.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)  # arrives mid-step: deferred to its end
        self.calls.append(("step", self.done))
        return {"loss": float(self.done)}

    def run(self, total: int, every: Every, **hooks) -> dict[str, float]:
        return run_steps(
            self.step, lambda: self.done, total, every=every,
            evaluate=lambda step, m: (m.update({"eval/x": 1.0}), self.calls.append(("eval", step))),
            log=lambda step, m: self.calls.append(("log", step, "eval/x" in m)),
            save=lambda: self.calls.append(("save", self.done)),
            on_interrupt=lambda: self.calls.append(("interrupted", self.done)),
            progress=False, **hooks)


def test_cadence_never_evaluates_the_last_step_and_logs_it_only_when_asked():
    recipe = Recipe()
    last = recipe.run(4, Every(eval=2, log=1, save=3))
    assert last == {"loss": 4.0}
    assert recipe.calls == [("step", 1), ("log", 1, False),
                            ("step", 2), ("eval", 2), ("log", 2, True),
                            ("step", 3), ("log", 3, False), ("save", 3),
                            ("step", 4)]  # the recipe's final evaluation logs step 4
    recipe = Recipe()
    recipe.run(5, Every(eval=0, log=2, save=0, log_last_step=True))
    assert [c for c in recipe.calls if c[0] == "log"] == [("log", 2, False), ("log", 4, False),
                                                         ("log", 5, False)]


def test_a_resumed_run_continues_from_the_recipes_step_and_a_finished_one_runs_none():
    recipe = Recipe(done=3)
    recipe.run(5, Every(log=1))
    assert [c for c in recipe.calls if c[0] == "step"] == [("step", 4), ("step", 5)]
    assert Recipe(done=5).run(5, Every(log=1)) == {}


def test_ctrl_c_finishes_the_step_then_the_recipe_saves_and_keyboard_interrupt_is_raised():
    recipe = Recipe(interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        recipe.run(5, Every(log=1, save=0))
    assert recipe.calls == [("step", 1), ("log", 1, False), ("step", 2), ("log", 2, False),
                            ("interrupted", 2)]


def test_a_check_that_raises_stops_the_run_after_the_steps_log_and_save_not_as_an_interrupt():
    recipe = Recipe()

    def check(metrics: dict[str, float]) -> None:
        if metrics["loss"] == 2.0:
            raise RuntimeError("no learning signal")

    with pytest.raises(RuntimeError, match="no learning signal"):
        recipe.run(5, Every(log=1, save=2), check=check)
    assert recipe.calls == [("step", 1), ("log", 1, False), ("step", 2), ("log", 2, False),
                            ("save", 2)]
