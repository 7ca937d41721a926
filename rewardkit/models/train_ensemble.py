"""``rewardkit train rm --ensemble K``: K reward models that differ, saved so the ``ensemble``
reward loads them in one line.

Members that err differently disagree where they err, which is what an ensemble's uncertainty
penalty needs (deep ensembles, Lakshminarayanan et al. 2017; Coste et al. 2023, "Reward Model
Ensembles Help Mitigate Overoptimization"). Members differ by seed (head and adapter
initialisation, data order: member *i* uses ``seed + i``) and, with ``bootstrap`` (default),
by their data: each trains on its own bootstrap resample of the training pairs (n pairs drawn
with replacement, from a stream seeded by ``seed + i``). The held-out split is drawn once with
``seed``, before resampling, so every member is evaluated on the same pairs.

Two forms (``ensemble_form``):

* ``models`` — K ordinary ``train rm`` runs in ``OUTPUT/member_i/`` (checkpoints,
  ``metrics.jsonl``, ``final/`` that ``reward_model`` loads; with ``lora`` each member is a LoRA
  adapter on the same frozen base, in ``final/adapter/``). ``OUTPUT/final/rewardkit.json`` is a
  manifest, paths relative to ``OUTPUT/final``::

      {"kind": "rm_ensemble", "form": "models" | "lora",
       "members": ["../member_0/final", ...], "names": ["member_0", ...],
       "base": "<cfg.model>", "adapters": ["../member_0/final/adapter", ...]}   # lora only

  with the tokenizer beside it. ``--resume OUTPUT`` skips the members that finished (their
  ``heldout_rewards.json`` exists), continues the interrupted one from its last checkpoint
  exactly, and trains the rest.
* ``heads`` — one trunk with K linear heads trained jointly (Zhang et al. 2024, "Improving
  Reinforcement Learning from Human Feedback with Efficient Reward Model Ensemble"): one forward
  pass per pair gives all K rewards; the loss is the mean over heads of the Bradley–Terry loss
  (margin and ``center_rewards_coefficient`` per head), head *j* weighting each pair by its
  bootstrap count (fixed for the run), so the heads see different data through one trunk pass.
  Head *j* is initialised from seed ``seed + j``. ``OUTPUT/final`` is a K-head model in the
  format of :mod:`rewardkit.models.multihead`; it is one model, so checkpoints and ``--resume``
  are the single trainer's.

After training every member scores the held-out pairs; ``OUTPUT/ensemble_report.json`` holds
each member's pairwise accuracy, the ensemble-mean accuracy and the members' disagreement (see
:func:`summarize`).
"""
from __future__ import annotations

import dataclasses
import gc
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..compose import ConfigError
from ..runtime import checkpoint as ckpt
from ..runtime.metrics import MetricsLogger
from . import encoding
from .loading import SIDECAR, write_sidecar
from .multihead import HEAD_MODULES
from .reward_trainer import RewardTrainer
from .train_config import RewardTrainConfig

REPORT = "ensemble_report.json"
ENSEMBLE_CONFIG = "ensemble_config.json"
"""The ensemble's options in ``OUTPUT`` (form ``models``): ``--resume OUTPUT`` reads and checks
them."""
MEMBER_DONE = "heldout_rewards.json"
"""Written in ``member_i/`` when member *i* has finished: its held-out rewards and data."""
_BOOTSTRAP_STREAM = 0xB007


def bootstrap_indices(n: int, seed: int) -> np.ndarray:
    """A bootstrap resample of ``range(n)``: n indices drawn with replacement (sorted), from a
    stream derived from ``seed`` (so it does not repeat the seed's other random draws)."""
    rng = np.random.default_rng([_BOOTSTRAP_STREAM, seed % 2 ** 32])
    return np.sort(rng.integers(0, n, size=n)) if n else np.zeros(0, dtype=np.int64)


def subset_members(subsets: Sequence[str], k: int) -> np.ndarray:
    """Which member each pair belongs to under ``members_by_subset``: the distinct subsets,
    sorted, dealt round-robin to the K members. An error with fewer distinct subsets than
    members, since a member would have no pairs."""
    names = sorted(set(subsets))
    if len(names) < k:
        raise ConfigError(f"members_by_subset: the training pairs have {len(names)} distinct "
                          f"subset value(s) ({', '.join(names[:8])}) for {k} members; label "
                          f"the pairs with at least {k} kinds (the `subset` field), or train "
                          "fewer members")
    member = {name: j % k for j, name in enumerate(names)}
    return np.array([member[s] for s in subsets], dtype=np.int64)


def bootstrap_counts(n: int, seed: int) -> np.ndarray:
    """How often each of the n pairs is drawn in :func:`bootstrap_indices` (a
    Multinomial(n, 1/n) draw, summing to n)."""
    return np.bincount(bootstrap_indices(n, seed), minlength=n)


def summarize(values: np.ndarray, names: Sequence[str]) -> dict[str, Any]:
    """Held-out figures of K members from their rewards ``values[k, 2n]`` (the n chosen
    completions, then the n rejected ones).

    * ``member_accuracy``: each member's pairwise accuracy (chosen strictly higher).
    * ``ensemble_accuracy``: accuracy of the mean of the members' standardised rewards (each
      member z-scored over the 2n held-out completions — how ``ensemble`` combines with
      ``normalize``); ``ensemble_accuracy_raw``: of the mean of raw rewards.
    * ``disagreement_std``: mean over the 2n completions of the population std across members
      of the standardised rewards, so scale differences between members do not count;
      ``disagreement_std_raw``: the same on raw rewards.
    """
    k, m = values.shape
    n = m // 2
    if n == 0:
        return {"held_out_pairs": 0, "member_accuracy": {name: None for name in names},
                "mean_member_accuracy": None, "ensemble_accuracy": None,
                "ensemble_accuracy_raw": None, "disagreement_std": None,
                "disagreement_std_raw": None}
    mean = values.mean(1, keepdims=True)
    std = values.std(1, keepdims=True)
    z = (values - mean) / np.where(std > 1e-12, std, 1.0)
    accuracy = (values[:, :n] > values[:, n:]).mean(1)
    return {
        "held_out_pairs": n,
        "member_accuracy": {name: float(a) for name, a in zip(names, accuracy)},
        "mean_member_accuracy": float(accuracy.mean()),
        "ensemble_accuracy": float((z[:, :n].mean(0) > z[:, n:].mean(0)).mean()),
        "ensemble_accuracy_raw": float((values[:, :n].mean(0) > values[:, n:].mean(0)).mean()),
        "disagreement_std": float(z.std(0).mean()),
        "disagreement_std_raw": float(values.std(0).mean()),
        "reward_mean": {name: float(v) for name, v in zip(names, mean[:, 0])},
        "reward_std": {name: float(v) for name, v in zip(names, std[:, 0])},
    }


def _report(cfg: RewardTrainConfig, form: str, values: np.ndarray,
            members: list[dict[str, Any]]) -> dict[str, Any]:
    names = [m["name"] for m in members]
    figures = summarize(values, names)
    for m in members:
        for key, out in (("member_accuracy", "accuracy"), ("reward_mean", "reward_mean"),
                         ("reward_std", "reward_std")):
            if key in figures:
                m[out] = figures[key][m["name"]]
    for key in ("member_accuracy", "reward_mean", "reward_std"):
        figures.pop(key, None)
    return {"form": form, "k": len(members), "bootstrap": cfg.bootstrap,
            "members_by_subset": cfg.members_by_subset, "seed": cfg.seed,
            "model": str(Path(cfg.output_dir) / "final"), "members": members, **figures}


def _write_report(cfg: RewardTrainConfig, report: dict[str, Any]) -> None:
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT).write_text(json.dumps(report, indent=1))


def format_report(report: dict[str, Any]) -> str:
    """The report as a short table: one line per member, the ensemble, the disagreement."""
    def num(v: Any, fmt: str = ".3f") -> str:
        return "-" if v is None else format(v, fmt)

    lines = [f"{'member':<12} {'seed':>5} {'train pairs (distinct)':>23} {'held-out acc':>13}"]
    for m in report["members"]:
        lines.append(f"{m['name']:<12} {m['seed']:>5} "
                     f"{str(m['train_pairs']) + ' (' + str(m['distinct_pairs']) + ')':>23} "
                     f"{num(m.get('accuracy')):>13}")
    lines.append(f"{'ensemble':<12} {'':>5} {'mean of standardised rewards':>23} "
                 f"{num(report['ensemble_accuracy']):>13}")
    lines.append(f"disagreement (mean std across members) on {report['held_out_pairs']} "
                 f"held-out pairs: {num(report['disagreement_std'])} standardised, "
                 f"{num(report['disagreement_std_raw'], '.4g')} raw")
    return "\n".join(lines)


# -- form "models": K trainings -----------------------------------------------------------------
class MemberTrainer(RewardTrainer):
    """One member: a single-model run whose held-out split is drawn with the ensemble's seed
    and whose training pairs are a bootstrap resample (when ``bootstrap``)."""

    def __init__(self, cfg: RewardTrainConfig, split_seed: int, bootstrap: bool,
                 resume: str | Path | None = None,
                 by_subset: tuple[int, int] | None = None) -> None:
        self.split_seed, self.bootstrap, self.by_subset = split_seed, bootstrap, by_subset
        super().__init__(cfg, resume=resume)

    def _split(self, rows: list[Any], seed: int | None = None) -> tuple[list[Any], list[Any]]:
        train, held = super()._split(rows, seed=self.split_seed)
        self.pool_size = len(train)
        if self.by_subset is not None:  # (member index, K): this member's subsets only
            i, k = self.by_subset
            self.resample = np.flatnonzero(subset_members([p.subset for p in train], k) == i)
        elif self.bootstrap:
            self.resample = bootstrap_indices(len(train), self.cfg.seed)
        else:
            self.resample = np.arange(len(train))
        self.train_rows = [train[i] for i in self.resample]
        return self.train_rows, held

    def heldout_rewards(self) -> list[float]:
        """Rewards of the held-out chosen completions, then of the rejected ones."""
        rows = [e.chosen for e in self.eval_examples] + [e.rejected for e in self.eval_examples]
        return [t[0].item() for t in self._forward_rows(rows)] if rows else []


class ModelsEnsembleTrainer:
    """K member runs in ``OUTPUT/member_i``, a manifest in ``OUTPUT/final`` and the report.
    ``train()`` returns the report; ``step_count`` and ``interrupt_checkpoint`` describe the
    member being trained when Ctrl-C arrives."""

    def __init__(self, cfg: RewardTrainConfig, resume: str | Path | None = None) -> None:
        self.cfg = cfg.validate()
        self.output = Path(cfg.output_dir)
        self.resuming = resume is not None
        self.step_count = 0
        self.interrupt_checkpoint: Path | None = None
        self.interrupted_member: str | None = None
        if resume is not None:
            where = Path(resume)
            if where.resolve() != self.output.resolve():
                raise ConfigError(f"--resume {str(where)!r}: an ensemble resumes in its own "
                                  f"output folder; pass --resume {cfg.output_dir} (or set "
                                  f"output_dir to {str(where)!r})")
            saved = where / ENSEMBLE_CONFIG
            if not saved.is_file():
                raise ConfigError(f"--resume {str(where)!r}: no {ENSEMBLE_CONFIG} there; it is "
                                  "not the output folder of an ensemble run")
            ckpt.check_resume_config(json.loads(saved.read_text()), cfg.to_dict(), where)

    def member_config(self, i: int) -> RewardTrainConfig:
        """Member *i*'s own options: seed ``seed + i``, output ``OUTPUT/member_i``."""
        return dataclasses.replace(self.cfg, seed=self.cfg.seed + i, ensemble=1,
                                   members_by_subset=False,  # its share: MemberTrainer's
                                   output_dir=str(self.output / f"member_{i}"))

    def member_trainer(self, i: int, resume: str | Path | None = None) -> MemberTrainer:
        return MemberTrainer(self.member_config(i), split_seed=self.cfg.seed,
                             bootstrap=self.cfg.bootstrap, resume=resume,
                             by_subset=((i, self.cfg.ensemble) if self.cfg.members_by_subset
                                        else None))

    def train(self) -> dict[str, Any]:
        cfg = self.cfg
        self.output.mkdir(parents=True, exist_ok=True)
        (self.output / ENSEMBLE_CONFIG).write_text(json.dumps(cfg.to_dict(), indent=1))
        members, values = [], []
        for i in range(cfg.ensemble):
            member_dir = self.output / f"member_{i}"
            done = member_dir / MEMBER_DONE
            if self.resuming and done.is_file():
                record = json.loads(done.read_text())
            else:
                record = self._train_member(i, member_dir)
                done.write_text(json.dumps(record))
            values.append(record.pop("rewards"))
            members.append(record)
        self._write_manifest()
        report = _report(cfg, "lora" if cfg.lora else "models", np.asarray(values, float),
                         members)
        _write_report(cfg, report)
        logger = MetricsLogger(self.output, tensorboard=False, plots=False)
        logger.log(cfg.steps, {f"ensemble/{k}": v for k, v in report.items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool)})
        logger.close()
        return report

    def _train_member(self, i: int, member_dir: Path) -> dict[str, Any]:
        resume = member_dir if self.resuming and ckpt.list_checkpoints(
            member_dir / "checkpoints") else None
        trainer = self.member_trainer(i, resume=resume)
        try:
            trainer.train()
        except KeyboardInterrupt:
            self.step_count = trainer.step_count
            self.interrupt_checkpoint = trainer.interrupt_checkpoint
            self.interrupted_member = f"member_{i}"
            raise
        record = {"name": f"member_{i}", "seed": trainer.cfg.seed,
                  "path": str(member_dir / "final"), "train_pairs": len(trainer.train_rows),
                  "distinct_pairs": int(len(set(trainer.resample.tolist()))),
                  "rewards": trainer.heldout_rewards()}
        del trainer
        gc.collect()
        return record

    def _write_manifest(self) -> Path:
        return write_manifest(self.output, self.cfg.ensemble,
                              base=self.cfg.model if self.cfg.lora else None)


def write_manifest(output: str | Path, k: int, base: str | None = None) -> Path:
    """``OUTPUT/final``: the manifest of the K members in ``OUTPUT/member_i/final`` (LoRA
    adapters of ``base`` when it is given) and member 0's tokenizer, as ``ensemble`` loads it."""
    from transformers import AutoTokenizer

    output = Path(output)
    final = output / "final"
    final.mkdir(parents=True, exist_ok=True)
    AutoTokenizer.from_pretrained(output / "member_0" / "final").save_pretrained(final)
    manifest: dict[str, Any] = {
        "kind": "rm_ensemble", "form": "lora" if base is not None else "models",
        "members": [f"../member_{i}/final" for i in range(k)],
        "names": [f"member_{i}" for i in range(k)]}
    if base is not None:
        manifest["base"] = base
        manifest["adapters"] = [f"../member_{i}/final/adapter" for i in range(k)]
    write_sidecar(final, manifest)
    return final


# -- form "heads": K heads on one trunk --------------------------------------------------------
class HeadsEnsembleTrainer(RewardTrainer):
    """One trunk, K linear heads, one forward pass per pair; head *j* weights each training
    pair by its bootstrap count and starts from its own seeded initialisation."""

    def __init__(self, cfg: RewardTrainConfig, resume: str | Path | None = None) -> None:
        super().__init__(cfg, resume=resume)
        k, n = self.cfg.ensemble, len(self.train_examples)
        self.head_names = [f"head_{j}" for j in range(k)]
        if self.cfg.members_by_subset:  # head j weighs only the pairs of its own subsets
            member = subset_members(self.train_subsets, k)
            self.counts = np.stack([(member == j).astype(np.int64) for j in range(k)], 1)
        else:
            self.counts = np.stack([bootstrap_counts(n, self.cfg.seed + j)
                                    if self.cfg.bootstrap else np.ones(n, dtype=np.int64)
                                    for j in range(k)], 1)
        for example, row in zip(self.train_examples, self.counts):
            example.weights = row.astype(float).tolist()

    def _split(self, rows: list[Any], seed: int | None = None) -> tuple[list[Any], list[Any]]:
        train, held = super()._split(rows, seed=seed)
        self.train_subsets = [pair.subset for pair in train]
        return train, held

    def num_outputs(self) -> int:
        return self.cfg.ensemble

    def init_heads(self, model: Any) -> None:
        """Head *j* (row *j* of the classification layer) drawn from N(0, initializer_range²)
        with seed ``seed + j``, bias 0: the heads start apart."""
        layer = _head_layer(model, self.cfg.ensemble)
        std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
        with torch.no_grad():
            for j in range(self.cfg.ensemble):
                gen = torch.Generator().manual_seed(self.cfg.seed + j)
                row = torch.randn(layer.weight.shape[1], generator=gen) * std
                layer.weight[j].copy_(row.to(layer.weight.dtype))
            if layer.bias is not None:
                layer.bias.zero_()

    def loss(self, examples: Sequence[Any], denominator: float) -> tuple[torch.Tensor, dict]:
        """Mean over heads of each head's bootstrap-weighted Bradley–Terry loss."""
        rows = [e.chosen for e in examples] + [e.rejected for e in examples]
        batch = encoding.pad(rows, self.tokenizer.pad_token_id, self.device)
        with self.autocast():
            rewards = self.model(**batch, use_cache=False).logits.float()
        r_c, r_r = rewards.chunk(2)
        margin = torch.tensor([[e.margin] for e in examples], device=self.device)
        per_pair = -F.logsigmoid(r_c - r_r - margin)
        if self.cfg.center_rewards_coefficient:
            per_pair = per_pair + self.cfg.center_rewards_coefficient * (r_c + r_r) ** 2
        weights = torch.tensor([e.weights for e in examples], device=self.device)
        loss = (per_pair * weights).sum() / (denominator * self.cfg.ensemble)
        stats = {"correct": (r_c > r_r).float().mean(1).sum().detach(),
                 "margin": (r_c - r_r).mean(1).sum().detach(), "count": len(examples)}
        return loss, stats

    def heldout_values(self) -> np.ndarray:
        """``[K, 2n]`` rewards of the held-out chosen, then rejected, completions."""
        rows = [e.chosen for e in self.eval_examples] + [e.rejected for e in self.eval_examples]
        if not rows:
            return np.zeros((self.cfg.ensemble, 0))
        return torch.stack(self._forward_rows(rows), 1).numpy().astype(float)

    def evaluate(self) -> dict[str, float]:
        """``eval/accuracy`` of the heads' standardised mean, each head's accuracy and the
        heads' disagreement."""
        if not self.eval_examples:
            return {}
        figures = summarize(self.heldout_values(), self.head_names)
        out = {"eval/accuracy": figures["ensemble_accuracy"],
               "eval/mean_head_accuracy": figures["mean_member_accuracy"],
               "eval/disagreement_std": figures["disagreement_std"],
               "eval/disagreement_std_raw": figures["disagreement_std_raw"]}
        out.update({f"eval/accuracy/{name}": a
                    for name, a in figures["member_accuracy"].items()})
        return out

    def train(self) -> dict[str, Any]:  # type: ignore[override]
        """Train (as the single trainer), then write and return the ensemble report."""
        super().train()
        members = [{"name": name, "seed": self.cfg.seed + j,
                    "train_pairs": int(self.counts[:, j].sum()),
                    "distinct_pairs": int((self.counts[:, j] > 0).sum())}
                   for j, name in enumerate(self.head_names)]
        report = _report(self.cfg, "heads", self.heldout_values(), members)
        _write_report(self.cfg, report)
        return report

    def save_final(self) -> Path:
        final = ckpt.save_final(self.output, self.model, self.tokenizer, self.cfg.lora)
        write_sidecar(final, {"kind": "rm_heads", "heads": self.cfg.ensemble,
                              "head_names": self.head_names,
                              "chat_template": self.cfg.chat_template,
                              "plain_format": self.cfg.plain_format})
        return final


def _head_layer(model: Any, k: int) -> torch.nn.Linear:
    for name in HEAD_MODULES:
        module = getattr(model, name, None)
        if module is None:
            continue
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)
                   and m.out_features == k]
        if linears:
            return linears[-1]
    raise ConfigError(f"ensemble_form heads needs a classification layer named "
                      f"{' or '.join(HEAD_MODULES)} with {k} outputs; this model has none "
                      "(use ensemble_form: models)")


def ensemble_trainer(cfg: RewardTrainConfig, resume: str | Path | None = None
                     ) -> ModelsEnsembleTrainer | HeadsEnsembleTrainer:
    """The trainer of ``cfg.ensemble`` ≥ 2 members in ``cfg.ensemble_form``; ``.train()``
    returns the report."""
    cfg.validate()
    if cfg.ensemble < 2:
        raise ConfigError("ensemble_trainer trains K >= 2 members; set ensemble: K")
    if cfg.ensemble_form == "heads":
        return HeadsEnsembleTrainer(cfg, resume=resume)
    return ModelsEnsembleTrainer(cfg, resume=resume)


__all__ = ["ModelsEnsembleTrainer", "HeadsEnsembleTrainer", "MemberTrainer", "ensemble_trainer",
           "summarize", "format_report", "bootstrap_indices", "bootstrap_counts", "subset_members",
           "REPORT",
           "SIDECAR"]
