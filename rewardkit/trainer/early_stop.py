"""Stop a run before it over-optimises, without reading the gold reward.

``stop_on_overoptimisation`` (:mod:`.overoptimisation`) stops when the gold reward falls, which
needs the gold reward at training time — and a run that has it could train on it. This rule
reads only what a real run has: the training reward and a reward ensemble's disagreement on the
same held-out samples. A policy that exploits a learned reward moves where the reward model was
not trained, and reward models that disagree there are the cheap sign of it (Coste et al. 2024,
"Reward Model Ensembles Help Mitigate Overoptimization"; Eisenstein et al. 2023, "Helping or
Herding?" on when members share their errors and the sign fails).

``monitor_reward`` names the ensemble (any reward whose scores carry ``Score.uncertainty``); the
trainer scores every evaluation's samples with it and logs ``eval/disagreement`` (the mean
uncertainty) and ``eval/monitor_mean`` (its mean reward). ``stop_on_disagreement: N`` stops the run once, for N evaluations in a row, the
training reward rose while the disagreement rose, and the disagreement stands more than
``disagreement_margin`` (relative) above its value at the first evaluation. The policy kept is
the one at the stop; with ``keep_before_stop`` the policy of the evaluation before the stop
is saved too (:class:`BeforeStop`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..compose import ConfigError
from ..runtime.checkpoint import save_final
from ..types import Score
from .overoptimisation import PROXY, Overoptimised

DISAGREEMENT, MONITOR = "eval/disagreement", "eval/monitor_mean"


def mean_disagreement(scores: Sequence[Score], name: str = "monitor_reward") -> float:
    """The mean ``Score.uncertainty`` of ``scores``; an error when a score has none (the
    monitor is not an ensemble, or a member failed), since the rule cannot then be applied."""
    missing = sum(s.uncertainty is None for s in scores)
    if missing or not scores:
        raise ConfigError(f"{name} must report Score.uncertainty on every sample (an ensemble "
                          f"reward does); {missing} of {len(scores)} scores had none")
    return sum(float(s.uncertainty) for s in scores) / len(scores)  # type: ignore[arg-type]


class DisagreementStop:
    """Counts evaluations where the training reward and the monitor's disagreement both rose
    while the disagreement is above ``(1 + margin)`` × its first value. ``patience`` 0 never
    stops."""

    def __init__(self, patience: int = 0, margin: float = 0.0) -> None:
        if patience < 0 or margin < 0:
            raise ConfigError(f"stop_on_disagreement and disagreement_margin must be >= 0, got "
                              f"{patience} and {margin}")
        self.patience = patience
        self.margin = margin
        self.first: float | None = None
        self.previous: tuple[float, float] | None = None
        self.streak = 0

    def update(self, metrics: dict[str, float]) -> None:
        if PROXY not in metrics or DISAGREEMENT not in metrics:
            return
        proxy, spread = metrics[PROXY], metrics[DISAGREEMENT]
        if self.first is None:
            self.first = spread
        if self.previous is not None:
            rising = proxy > self.previous[0] and spread > self.previous[1]
            above = spread > (1.0 + self.margin) * self.first
            self.streak = self.streak + 1 if rising and above else 0
        self.previous = (proxy, spread)

    @property
    def stopping(self) -> bool:
        """The last evaluation is the one the rule stops at."""
        return bool(self.patience and self.streak >= self.patience)

    def raise_if_diverging(self) -> None:
        if self.stopping:
            raise Overoptimised(
                f"stopped: the training reward and the monitor ensemble's disagreement rose for "
                f"{self.streak} evaluations in a row (disagreement {self.previous[1]:.3f}, "
                f"{self.previous[1] / self.first - 1:+.0%} on the first evaluation): the policy "
                "is moving where the reward models disagree. Set stop_on_disagreement: 0 to "
                "train on regardless")

    def state_dict(self) -> dict:
        return {"first": self.first, "previous": self.previous, "streak": self.streak}

    def load_state_dict(self, state: dict) -> None:
        self.first = state.get("first")
        previous = state.get("previous")
        self.previous = (tuple(previous)  # type: ignore[assignment]
                         if previous is not None else None)
        self.streak = int(state.get("streak", 0))


class BeforeStop:
    """The policy as it was at the last evaluation that did not stop the run, kept on the CPU
    so that a stop can save it. Why a copy: the stop is decided after the policy has moved on
    (the evaluation that fires), and by then the earlier weights are gone."""

    def __init__(self, enabled: bool, sharded: bool = False) -> None:
        if enabled and sharded:
            raise ConfigError("keep_before_stop copies the whole policy at each evaluation; a "
                              "sharded run has no whole copy on one process: drop it")
        self.enabled = enabled
        self.step: int | None = None
        self.state: dict[str, Any] | None = None

    def remember(self, model: Any, step: int, stopping: bool) -> None:
        """After an evaluation: keep this policy unless this evaluation is the one that
        stops the run."""
        if self.enabled and not stopping:
            self.state = {k: v.detach().to("cpu", copy=True)
                          for k, v in model.state_dict().items()}
            self.step = step

    def save(self, model: Any, output: Path, policy: Any, say: Callable[[str], None]
             ) -> Path | None:
        """Load the kept weights into ``model`` (the run is over) and save them as a final
        model in ``output/before_stop/final``; None when nothing was kept."""
        if self.state is None:
            return None
        model.load_state_dict(self.state)
        where = save_final(output / "before_stop", model, policy.tokenizer, policy.uses_lora)
        (output / "before_stop" / "step.txt").write_text(f"{self.step}\n")
        say(f"the policy of step {self.step}, the evaluation before the stop, is in {where}")
        return where
