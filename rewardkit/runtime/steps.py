"""The step loop both recipes run, the policy trainer's and reward-model training's:

    while steps remain: step → evaluate every N → log every N → checkpoint every N → checks
                        → progress bar; Ctrl-C lets the step finish, then stops

What a step is, what an evaluation prints and what an interruption saves are the recipe's
(hooks); the cadence, the progress bar and the deferred Ctrl-C are this loop's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..console import progress_output
from .health import deferred_sigint

Metrics = dict[str, float]


@dataclass(frozen=True)
class Every:
    """How often, in steps, the loop evaluates, logs and saves a checkpoint (0: never).

    Evaluation never falls on the last step: the recipe's final evaluation follows the loop.
    ``log_last_step``: log the last step here whatever ``log``; otherwise the last step is not
    logged here (the recipe logs it with its final evaluation)."""

    eval: int = 0
    log: int = 1
    save: int = 0
    log_last_step: bool = False


def run_steps(step: Callable[[], Metrics], steps_done: Callable[[], int], total: int, *,
              every: Every, log: Callable[[int, Metrics], Any], save: Callable[[], Any],
              on_interrupt: Callable[[], Any],
              evaluate: Callable[[int, Metrics], Any] | None = None,
              check: Callable[[Metrics], Any] | None = None,
              progress: bool = True, desc: str = "steps",
              show: tuple[str, str] = ("loss", "loss")) -> Metrics:
    """Run ``step()`` until ``steps_done()`` reaches ``total``; returns the last step's metrics
    ({} when no step ran).

    After each step, in this order: ``evaluate(step, metrics)`` adds its figures to this
    step's metrics (and prints what it prints) every ``every.eval`` steps;
    ``log(step, metrics)`` every ``every.log``; ``save()`` every ``every.save``;
    ``check(metrics)`` may raise to stop the run; the progress bar shows ``show = (label,
    metric)``. Ctrl-C (SIGINT) is deferred to the end of the step; then, as on any
    KeyboardInterrupt, the bar closes, ``on_interrupt()`` runs (the recipe's checkpoint) and
    KeyboardInterrupt is raised. Any other exception closes the bar and propagates."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=steps_done(), disable=not progress, desc=desc)
    label, key = show
    last: Metrics = {}
    try:
        with progress_output(), deferred_sigint() as stop_requested:
            while steps_done() < total:
                metrics = step()
                done = steps_done()
                if evaluate is not None and every.eval and done % every.eval == 0 \
                        and done < total:
                    evaluate(done, metrics)
                if (done % every.log == 0 or done == total) if every.log_last_step else \
                        (done % every.log == 0 and done < total):
                    log(done, metrics)
                if every.save and done % every.save == 0:
                    save()
                if check is not None:
                    check(metrics)
                bar.update(1)
                bar.set_postfix({label: f"{metrics.get(key, float('nan')):.3f}"})
                last = metrics
                if stop_requested():
                    raise KeyboardInterrupt
    except KeyboardInterrupt:
        bar.close()
        on_interrupt()
        raise
    except BaseException:
        bar.close()
        raise
    bar.close()
    return last


__all__ = ["Every", "run_steps"]
