"""The single-model trainer of ``rewardkit train rm|prm``: reward-model training on the runtime
room's machinery (checkpoints, metrics, Ctrl-C, exact resume, config validation).

One step reads top to bottom:

    rows → encode (as the Scorer will) → forward → loss → backward (micro-batches)
         → clip → optimizer step

* rm, Bradley–Terry (Bradley & Terry 1952; Ouyang et al. 2022): chosen and rejected go through
  one forward pass; ``loss = −log σ(r_c − r_r − m) + c·mean((r_c + r_r)²)`` with the
  per-pair margin m (Touvron et al. 2023) and ``center_rewards_coefficient`` c (Eisenstein
  et al. 2023), as TRL's RewardTrainer computes it.
* prm: cross-entropy on the step marks only (every other token is −100), TRL PRMTrainer's
  objective (Lightman et al. 2023; Wang et al. 2024).
* rm with ``objective: likelihood``: the model stays a causal LM and learns the chosen
  completions (next-token cross-entropy on the completion's tokens and EOS, summed and divided
  by the batch's completion tokens); held-out accuracy compares the two sides' summed
  log-likelihoods, as ``implicit_reward`` will score them. With ``replay_data`` a share of
  every batch is text the base learned from, learned the same way (rehearsal).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..compose import ConfigError
from ..console import evaluation_line, say
from ..runtime import checkpoint as ckpt
from ..runtime.allocator import retain_freed_memory
from ..runtime.device import dtype_kwarg, host_values, memory_metrics
from ..runtime.metrics import MetricsLogger, plot_panels
from ..runtime.sampling import EpochSampler
from ..runtime.schedule import lr_factor
from ..runtime.steps import Every, run_steps
from . import encoding, evaluation
from .data import Completion, Pair, Solution, read_completions, read_pairs, read_solutions
from .loading import resolve_device_dtype, write_sidecar
from .process_reward import encode_steps
from .train_config import RewardTrainConfig

PLOT_PANELS = (
    ("rm_training", ("loss", "train/accuracy", "eval/accuracy")),
    ("prm_training", ("loss", "train/step_accuracy", "eval/f1", "eval/step_accuracy")),
)


@dataclass
class PairExample:
    chosen: list[int]
    rejected: list[int]
    margin: float
    weights: list[float] | None = None
    """Per-head weights of this pair (bootstrap counts of a K-head ensemble), else None."""
    starts: tuple[int, int] = (0, 0)
    """``objective: likelihood``: the first completion token of chosen and of rejected."""


@dataclass
class StepExample:
    ids: list[int]
    labels: list[int]
    first_wrong: int


class RewardTrainer:
    """Train an outcome (``task="rm"``) or process (``task="prm"``) reward model.
    ``RewardTrainer(cfg).train()`` runs it all and saves ``output_dir/final``."""

    def __init__(self, cfg: RewardTrainConfig, resume: str | Path | None = None) -> None:
        self.cfg = cfg.validate()
        if cfg.ensemble > 1 and self.num_outputs() != cfg.ensemble:
            raise ConfigError(f"ensemble={cfg.ensemble}: RewardTrainer trains one model; train "
                              "an ensemble with train_reward_model(cfg) or `rewardkit train rm "
                              "--ensemble K`")
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.device, self.dtype = resolve_device_dtype(cfg.device, cfg.dtype)
        if self.device.type == "cpu":  # each step would page-fault its activations back in
            retain_freed_memory()
        # Half-precision training keeps fp32 master weights and optimizer state and runs the
        # forwards under autocast (as the policy trainer does): AdamW on bf16 weights loses
        # almost every small update to rounding.
        self.compute_dtype = self.dtype
        if self.dtype in (torch.bfloat16, torch.float16):
            self.dtype = torch.float32
        checkpoint = ckpt.find_checkpoint(resume) if resume is not None else None
        self.state = ckpt.load_state(checkpoint) if checkpoint is not None else None
        if self.state is not None:
            ckpt.check_resume_config(self.state.get("config"), cfg.to_dict(), checkpoint)
        self.tokenizer = self._load_tokenizer()
        self.model = self._load_model(checkpoint)
        rows = (read_pairs(cfg.data, cfg.margin_field) if cfg.task == "rm"
                else read_solutions(cfg.data))
        train_rows, eval_rows = self._split(rows)
        self.train_examples = [self.encode(r) for r in train_rows]
        self.eval_rows = eval_rows
        self.eval_examples = [self.encode(r, training=False) for r in eval_rows]
        self.sampler = EpochSampler(self.train_examples, seed=cfg.seed)
        self.replay_sampler = EpochSampler(
            [self._encode_replay(r) for r in read_completions(cfg.replay_data)],
            seed=cfg.seed + 1, what="replay rows") if cfg.replay_data else None
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate,
                                           weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, self.cfg))
        self.step_count = 0
        self._updating = False
        self.interrupt_checkpoint: Path | None = None
        self.output = Path(cfg.output_dir)
        self.logger = MetricsLogger(self.output, cfg.tensorboard, plots=False)
        if self.state is not None:
            self._restore(checkpoint)

    # -- model and data ---------------------------------------------------------------------------
    def _load_tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(self.cfg.model)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"could not load a tokenizer from {self.cfg.model!r}: {exc}") from exc
        if tok.pad_token is None:
            if tok.eos_token is None:
                raise ConfigError(f"the tokenizer of {self.cfg.model!r} has neither a pad nor an "
                                  "EOS token to pad with")
            tok.pad_token = tok.eos_token
        if self.cfg.task == "prm" and self.cfg.layout == "step_token" and \
                self.cfg.step_token not in tok.get_vocab():
            tok.add_tokens([self.cfg.step_token], special_tokens=True)
        if self.likelihood and not getattr(tok, "is_fast", False):
            raise ConfigError(f"objective: likelihood needs a fast tokenizer (its character "
                              f"offsets tell the prompt's tokens from the completion's); "
                              f"{self.cfg.model!r} has none (no tokenizer.json)")
        tok.padding_side = "right"
        return tok

    @property
    def likelihood(self) -> bool:
        """``objective: likelihood``: a causal LM trained on the chosen completions."""
        return self.cfg.objective == "likelihood"

    def _load_model(self, checkpoint: Path | None) -> Any:
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, \
            AutoModelForTokenClassification

        cfg = self.cfg
        cls = AutoModelForCausalLM if self.likelihood else \
            AutoModelForSequenceClassification if cfg.task == "rm" else \
            AutoModelForTokenClassification
        head = {} if self.likelihood else {"num_labels": self.num_outputs()}
        source = checkpoint if checkpoint is not None and not cfg.lora else cfg.model
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg.seed)  # the new head's initialisation
                model = cls.from_pretrained(source, **head, **dtype_kwarg(self.dtype))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"could not load {cfg.model!r} as a {cls.__name__[12:]} model: "
                              f"{exc}") from exc
        if model.get_input_embeddings().num_embeddings < len(self.tokenizer):
            model.resize_token_embeddings(len(self.tokenizer), mean_resizing=False)
        model.config.pad_token_id = self.tokenizer.pad_token_id
        for module in model.modules():  # deterministic forward passes, as the policy trainer
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        if checkpoint is None or cfg.lora:
            self.init_heads(model)
        model.to(self.device)
        if cfg.lora:
            model = self._add_lora(model)
            if checkpoint is not None:
                ckpt.load_model_weights(model, checkpoint, uses_lora=True)
        return model

    def num_outputs(self) -> int:
        """Outputs of the new head: one reward (rm) or two classes (prm)."""
        return 1 if self.cfg.task == "rm" else 2

    def init_heads(self, model: Any) -> None:
        """Hook on a freshly built model before LoRA and training (the ensemble form re-seeds
        each head); the default keeps ``from_pretrained``'s initialisation."""

    def _add_lora(self, model: Any) -> Any:
        from peft import LoraConfig, get_peft_model

        cfg = self.cfg
        lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=cfg.lora_target_modules,
                          task_type="CAUSAL_LM" if self.likelihood else
                          "SEQ_CLS" if cfg.task == "rm" else "TOKEN_CLS")
        try:
            return get_peft_model(model, lora)
        except ValueError as exc:
            raise ConfigError(f"lora_target_modules {cfg.lora_target_modules!r}: {exc}") from exc

    def _split(self, rows: list[Any], seed: int | None = None) -> tuple[list[Any], list[Any]]:
        """Training and held-out rows; ``seed`` (default ``cfg.seed``) draws the split."""
        cfg = self.cfg
        if cfg.eval_data:
            held = read_pairs(cfg.eval_data, cfg.margin_field) if cfg.task == "rm" else \
                read_solutions(cfg.eval_data)
            return rows, held
        n_eval = int(len(rows) * cfg.eval_fraction)
        if n_eval == 0:
            return rows, []
        order = list(range(len(rows)))
        random.Random(cfg.seed if seed is None else seed).shuffle(order)
        held = set(order[:n_eval])
        return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in sorted(held)]

    def encode(self, row: Pair | Solution, training: bool = True) -> PairExample | StepExample:
        """Token ids exactly as ``reward_model`` / ``process_reward`` will read them."""
        cfg, tok = self.cfg, self.tokenizer
        if isinstance(row, Pair):
            plain = not (cfg.chat_template and getattr(tok, "chat_template", None))
            if self.likelihood:
                return self._encode_likelihood(row, plain)
            sides = []
            for completion in (row.chosen, row.rejected):
                prefix, full = encoding.render(tok, row.prompt, completion, cfg.chat_template,
                                               cfg.plain_format)
                sides.append(encoding.encode_text(tok, prefix, full, cfg.max_length, plain).ids)
            return PairExample(sides[0], sides[1], row.margin)
        enc = encode_steps(tok, row.prompt, row.steps, cfg.layout, cfg.step_separator,
                           cfg.step_token, cfg.chat_template, None, cfg.max_length)
        labels = [-100] * len(enc.ids)
        marks = list(zip(enc.positions, row.labels))
        if training and cfg.train_on_last_step_only:
            marks = marks[-1:]
        for pos, ok in marks:
            labels[pos] = int(ok)
        return StepExample(enc.ids, labels, row.first_wrong)

    def _encode_likelihood(self, row: Pair, plain: bool) -> PairExample:
        """Both sides as ``implicit_reward`` reads them, with where each completion starts;
        past ``max_length`` the prompt keeps its start and the completion its end."""
        (chosen, c_start), (rejected, r_start) = (
            self._likelihood_side(row.prompt, completion, plain)
            for completion in (row.chosen, row.rejected))
        return PairExample(chosen, rejected, row.margin, starts=(c_start, r_start))

    def _likelihood_side(self, prompt: Any, completion: Any, plain: bool
                         ) -> tuple[list[int], int]:
        """One prompt + completion's token ids and the first completion token."""
        cfg = self.cfg
        prefix, full = encoding.render(self.tokenizer, prompt, completion, cfg.chat_template,
                                       cfg.plain_format)
        ids, _, first = encoding.encode_with_completion_start(self.tokenizer, prefix, full, plain)
        cut = encoding.truncate(ids, first, cfg.max_length)
        return cut.ids, max(1, min(int(cut.prompt_tokens or 0), len(cut.ids) - 1))

    def _encode_replay(self, row: Completion) -> PairExample:
        """A replayed row as the likelihood loss reads a pair (only the chosen side trains)."""
        plain = not (self.cfg.chat_template and getattr(self.tokenizer, "chat_template", None))
        ids, start = self._likelihood_side(row.prompt, row.completion, plain)
        return PairExample(ids, ids, 0.0, starts=(start, start))

    def autocast(self) -> Any:
        """Autocast forwards to the configured half dtype (a no-op in fp32)."""
        return torch.autocast(self.device.type, dtype=self.compute_dtype,
                              enabled=self.compute_dtype != torch.float32)

    # -- the step ---------------------------------------------------------------------------------
    def loss(self, examples: Sequence[Any], denominator: float) -> tuple[torch.Tensor, dict]:
        """This micro-batch's share of the batch loss, and its statistics (numbers or 0-dim
        tensors, read from the device once the step is done: :func:`host_values`)."""
        pad_id = self.tokenizer.pad_token_id
        if self.likelihood:  # next-token targets: position t predicts token t + 1
            return self._token_loss([e.chosen for e in examples],
                                    [[-100] * e.starts[0] + e.chosen[e.starts[0]:]
                                     for e in examples], denominator, shift=True)
        if self.cfg.task == "rm":
            rows = [e.chosen for e in examples] + [e.rejected for e in examples]
            batch = encoding.pad(rows, pad_id, self.device)
            with self.autocast():
                rewards = self.model(**batch, use_cache=False).logits[:, 0].float()
            r_c, r_r = rewards.chunk(2)
            margin = torch.tensor([e.margin for e in examples], device=self.device)
            per_pair = -F.logsigmoid(r_c - r_r - margin)
            if self.cfg.center_rewards_coefficient:
                per_pair = per_pair + self.cfg.center_rewards_coefficient * (r_c + r_r) ** 2
            stats = {"correct": (r_c > r_r).float().sum().detach(),
                     "margin": (r_c - r_r).sum().detach(), "count": len(examples)}
            return per_pair.sum() / denominator, stats
        return self._token_loss([e.ids for e in examples], [e.labels for e in examples],
                                denominator, shift=False)

    def _token_loss(self, rows: Sequence[list[int]], labels: Sequence[list[int]],
                    denominator: float, shift: bool) -> tuple[torch.Tensor, dict]:
        """Summed cross-entropy of the token logits against ``labels`` (−100: no target),
        divided by ``denominator``, with token accuracy. ``shift``: the logits at position t
        are scored against the label at t + 1 (a language model's next token)."""
        batch = encoding.pad(rows, self.tokenizer.pad_token_id, self.device, labels)
        targets = batch.pop("labels")
        with self.autocast():
            logits = self.model(**batch, use_cache=False).logits.float()
        if shift:
            logits, targets = logits[:, :-1], targets[:, 1:]
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100,
                               reduction="sum")
        mask = targets != -100
        # a masked sum, not boolean indexing: indexing must wait for the device to size its result
        stats = {"correct": ((logits.argmax(-1) == targets) & mask).float().sum(),
                 "count": mask.sum()}
        return loss / denominator, stats

    def step(self) -> dict[str, float]:
        """One optimizer step over ``batch_size`` rows in micro-batches."""
        cfg = self.cfg
        start = time.perf_counter()
        replayed = cfg.replay_rows()
        examples = self.sampler.next(cfg.batch_size - replayed)
        if self.replay_sampler is not None:
            examples += self.replay_sampler.next(replayed)
        micro = cfg.micro_batch_size or cfg.batch_size
        if self.likelihood:  # completion tokens of the batch
            denominator = float(max(1, sum(len(e.chosen) - e.starts[0] for e in examples)))
        elif cfg.task == "rm":
            denominator = float(cfg.batch_size)
        else:
            denominator = float(max(1, sum(sum(1 for x in e.labels if x != -100)
                                           for e in examples)))
        self.model.train()
        self._updating = True
        parts = []  # each micro-batch's loss and statistics, read from the device after the step
        for lo in range(0, len(examples), micro):
            loss, stats = self.loss(examples[lo:lo + micro], denominator)
            loss.backward()
            parts.append((loss.detach(), stats))
        norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm or math.inf)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self._updating = False
        self.step_count += 1
        read = iter(host_values([norm] + [x for loss, stats in parts
                                          for x in (loss, *stats.values())]))
        norm_value = next(read)
        total, sums = 0.0, {"correct": 0.0, "margin": 0.0, "count": 0.0}
        for _, stats in parts:
            total += next(read)
            for k in stats:
                sums[k] += next(read)
        out = {"loss": total, "grad_norm": norm_value, "lr": self.scheduler.get_last_lr()[0],
               "time/step": time.perf_counter() - start, **memory_metrics(self.device)}
        if self.likelihood:
            out["train/token_accuracy"] = sums["correct"] / max(1.0, sums["count"])
        elif cfg.task == "rm":
            out["train/accuracy"] = sums["correct"] / max(1.0, sums["count"])
            out["train/margin"] = sums["margin"] / max(1.0, sums["count"])
        else:
            out["train/step_accuracy"] = sums["correct"] / max(1.0, sums["count"])
        return out

    # -- evaluation -------------------------------------------------------------------------------
    @torch.no_grad()
    def _forward_rows(self, rows: Sequence[list[int]]) -> list[torch.Tensor]:
        """Logits per row (``[outputs]`` for rm, ``[tokens, outputs]`` for prm), in token-budget
        batches."""
        self.model.eval()
        out: list[Any] = [None] * len(rows)
        for idx in encoding.token_budget_batches([len(r) for r in rows],
                                                 self.cfg.eval_batch_tokens):
            batch = encoding.pad([rows[i] for i in idx], self.tokenizer.pad_token_id, self.device)
            with self.autocast():
                logits = self.model(**batch, use_cache=False).logits.float().cpu()
            for j, i in enumerate(idx):
                out[i] = logits[j] if logits.dim() == 2 else logits[j, :len(rows[i])]
        return out

    @torch.no_grad()
    def _completion_logprobs(self, rows: Sequence[list[int]], starts: Sequence[int]
                             ) -> list[float]:
        """Summed log-probability of each row's tokens from ``starts[i]`` on, in token-budget
        batches (one row's softmax over the vocabulary at a time)."""
        self.model.eval()
        out = [0.0] * len(rows)
        # every token yields a vocabulary-sized row of logits: the budget implicit_reward uses
        budget = min(self.cfg.eval_batch_tokens, 4096)
        for idx in encoding.token_budget_batches([len(r) for r in rows], budget):
            batch = encoding.pad([rows[i] for i in idx], self.tokenizer.pad_token_id, self.device)
            with self.autocast():
                logits = self.model(**batch, use_cache=False).logits
            for j, i in enumerate(idx):
                n, first = len(rows[i]), starts[i]
                lp = torch.log_softmax(logits[j, first - 1:n - 1].float(), -1)
                out[i] = lp.gather(-1, batch["input_ids"][j, first:n, None]).sum().item()
        return out

    def evaluate(self) -> dict[str, float]:
        """Held-out pairwise accuracy (rm) or step accuracy and ProcessBench F1 (prm)."""
        if not self.eval_examples:
            return {}
        if self.likelihood:
            n = len(self.eval_examples)
            values = self._completion_logprobs(
                [e.chosen for e in self.eval_examples] + [e.rejected for e in self.eval_examples],
                [e.starts[0] for e in self.eval_examples] +
                [e.starts[1] for e in self.eval_examples])
            correct = [1.0 if c > r else 0.5 if c == r else 0.0
                       for c, r in zip(values[:n], values[n:])]
            return {"eval/accuracy": float(np.mean(correct)),
                    "eval/margin": float(np.mean(np.subtract(values[:n], values[n:])))}
        if self.cfg.task == "rm":
            rows = [e.chosen for e in self.eval_examples] + \
                [e.rejected for e in self.eval_examples]
            values = [t[0].item() for t in self._forward_rows(rows)]
            n = len(self.eval_examples)
            correct = [float(c > r) for c, r in zip(values[:n], values[n:])]
            return {"eval/accuracy": float(np.mean(correct)),
                    "eval/margin": float(np.mean(np.subtract(values[:n], values[n:])))}
        logits = self._forward_rows([e.ids for e in self.eval_examples])
        scores, hits, count = [], 0, 0
        for e, lg in zip(self.eval_examples, logits):
            pos = [i for i, y in enumerate(e.labels) if y != -100]
            probs = torch.softmax(lg[pos], -1)[:, 1]
            scores.append(probs.tolist())
            hits += int(((probs >= self.cfg.threshold).long() ==
                         torch.tensor([e.labels[i] for i in pos])).sum())
            count += len(pos)
        bench = evaluation.processbench_block(
            [evaluation.first_wrong(s, self.cfg.threshold) for s in scores],
            [e.first_wrong for e in self.eval_examples])
        return {"eval/step_accuracy": hits / max(1, count), "eval/f1": bench["f1"],
                "eval/error_accuracy": bench["error_accuracy"],
                "eval/correct_accuracy": bench["correct_accuracy"]}

    # -- the run ----------------------------------------------------------------------------------
    def train(self) -> dict[str, float]:
        """Run to ``cfg.steps`` with periodic evaluation and checkpoints; Ctrl-C finishes the
        step, saves a checkpoint and raises KeyboardInterrupt (``--resume`` continues exactly).
        Saves ``output_dir/final`` and returns the last evaluation."""
        cfg = self.cfg
        last = run_steps(self.step, lambda: self.step_count, cfg.steps,
                         every=Every(cfg.eval_every, cfg.log_every, cfg.save_every),
                         evaluate=self._evaluate_during_run, log=self.logger.log,
                         save=self.save, on_interrupt=self._save_on_interrupt,
                         progress=cfg.progress, desc=f"train {cfg.task}", show=("loss", "loss"))
        last = {**last, **self.evaluate()}
        say(evaluation_line(self.step_count, last, self.logger.path))
        self.logger.log(self.step_count, last)
        self.save()
        self.save_final()
        self.logger.close()
        if cfg.plots:
            self.plot()
        return last

    def _evaluate_during_run(self, step: int, metrics: dict[str, float]) -> None:
        metrics.update(self.evaluate())
        say(evaluation_line(step, metrics, self.logger.path))

    def _save_on_interrupt(self) -> None:
        """No checkpoint of a step interrupted part-way through its update."""
        self.interrupt_checkpoint = None if self._updating else self.save()

    def plot(self) -> list[Path]:
        """PNG curves of this task's metrics (the trainer's plotting on this task's panels)."""
        panels = tuple(p for p in PLOT_PANELS if p[0].startswith(self.cfg.task + "_"))
        return plot_panels(self.logger.path, self.output / "plots", panels)

    def save(self) -> Path:
        state = {"step": self.step_count, "optimizer": self.optimizer.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "sampler": self.sampler.state_dict(),
                 "config": self.cfg.to_dict()}
        if self.replay_sampler is not None:
            state["replay_sampler"] = self.replay_sampler.state_dict()
        return ckpt.save_checkpoint(self.output / "checkpoints" / f"step-{self.step_count}",
                                    self.model, self.tokenizer, state)

    def save_final(self) -> Path:
        final = ckpt.save_final(self.output, self.model, self.tokenizer, self.cfg.lora)
        cfg = self.cfg
        sidecar: dict[str, Any] = {"kind": cfg.task, "chat_template": cfg.chat_template}
        if self.likelihood:  # the step separator names how implicit_reward splits steps
            sidecar.update(objective="likelihood", reward="implicit_reward",
                           separator=cfg.step_separator)
        if cfg.task == "rm":
            sidecar["plain_format"] = cfg.plain_format
        else:
            sidecar.update(layout=cfg.layout, separator=cfg.step_separator,
                           step_token=cfg.step_token)
        write_sidecar(final, sidecar)
        return final

    def _restore(self, checkpoint: Path) -> None:
        state = self.state
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.sampler.load_state_dict(state["sampler"])
        if self.replay_sampler is not None:
            self.replay_sampler.load_state_dict(state["replay_sampler"])
        self.step_count = int(state["step"])
        ckpt.set_rng_state(state["rng"])
        self.logger.truncate_after(self.step_count)


__all__ = ["RewardTrainer", "PairExample", "StepExample", "PLOT_PANELS"]
