"""The KL coefficient β: fixed, or adapted every step to hold the KL near a target.

Ziegler et al. (2019), "Fine-Tuning Language Models from Human Preferences", §2.2: with a
target KL, β follows a proportional controller,

    e_t = clip(KL_t / KL_target − 1, −0.2, 0.2),    β_{t+1} = β_t · (1 + K_β · e_t),

so β grows while the policy is further from the reference than the target and shrinks while it
is nearer — here never below ``kl_coef``, the starting β: a run starts inside its budget, and a
β that shrank there for tens of steps would take as long to grow back once the policy leaves
it (measured: β fell from 0.02 to 1e-4 by step 25 and the KL overshot the target 8-fold). Against a learned reward this is a budget on how far the policy may move — Gao et
al. (2023) find the gold reward a function of that distance, rising and then falling — where a
fixed β only slows the drift. ``kl_target`` None keeps β fixed at ``kl_coef``.
"""
from __future__ import annotations

from ..compose import ConfigError


class KLController:
    """β for the next step: ``kl_coef`` fixed, or adapted towards ``target`` at ``rate`` (K_β)
    from the KL measured on each step's training batch, never below ``kl_coef``."""

    def __init__(self, kl_coef: float, target: float | None = None, rate: float = 0.1) -> None:
        if target is not None and (target <= 0 or kl_coef <= 0 or rate <= 0):
            raise ConfigError(f"kl_target needs kl_coef > 0 (the starting β), kl_target > 0 and "
                              f"kl_adapt_rate > 0; got kl_coef {kl_coef}, kl_target {target}, "
                              f"kl_adapt_rate {rate}")
        self.value = self.floor = kl_coef
        self.target = target
        self.rate = rate

    def update(self, kl: float | None) -> None:
        """Adapt β after a step whose training batch measured ``kl`` (None: not measured)."""
        if self.target is None or kl is None:
            return
        error = min(max(kl / self.target - 1.0, -0.2), 0.2)
        self.value = max(self.floor, self.value * (1.0 + self.rate * error))

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        if "value" in state:
            self.value = float(state["value"])
