"""K reward heads on one trunk: the affordable reward ensemble.

An ensemble of K separate reward models costs K forward passes. K linear heads on a shared
trunk cost one: the trunk runs once and a ``[hidden, K]`` layer reads K rewards from the same
last-token state (the shared-trunk ensembles of Coste et al. 2023, "Reward Model Ensembles Help
Mitigate Overoptimization", and Zhang et al. 2024, "Improving Reinforcement Learning from Human
Feedback with Efficient Reward Model Ensemble").

**Format.** A K-head model is an ordinary Hugging Face sequence classifier with
``num_labels = K`` (head *i* = output *i*, i.e. row *i* of the classification layer's weight
and bias), so ``from_pretrained`` loads it anywhere, plus the ``rewardkit.json`` sidecar with
``{"kind": "rm_heads", "heads": K, "head_names": [...]}``. :func:`stack_heads` builds one from
K single-head reward models that share a trunk; :func:`split_heads` writes the K single-head
models back out (each loads with ``reward_model``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..types import Sample, Score
from . import encoding
from .loading import (SIDECAR, ModelLoadError, load_config, load_tokenizer, read_sidecar,
                      write_sidecar)
from .reward_model import RewardModelScorer

HEAD_MODULES = ("score", "classifier")
"""Names Hugging Face sequence classifiers give their last linear layer (``score``: Llama,
Qwen2, Mistral, Gemma; ``classifier``: BERT-style encoders)."""


def _head_prefix(state: dict[str, Any]) -> str:
    for name in HEAD_MODULES:
        if f"{name}.weight" in state:
            return name
    raise ModelLoadError("no classification layer named 'score' or 'classifier' in the model; "
                         "stacking heads reads a Hugging Face sequence classifier")


def stack_heads(members: Sequence[str | Path], out_dir: str | Path,
                head_names: Sequence[str] | None = None, atol: float = 0.0) -> Path:
    """One K-head model from K single-head reward models that share their trunk.

    Every parameter outside the classification layer must be equal (within ``atol``) across the
    members, else the stacked model would not compute what they compute: a
    :class:`ModelLoadError` names the first parameter that differs.
    """
    import torch
    from transformers import AutoModelForSequenceClassification

    if len(members) < 2:
        raise ModelLoadError("stack_heads needs at least two single-head models")
    models = [AutoModelForSequenceClassification.from_pretrained(str(m)) for m in members]
    states = [m.state_dict() for m in models]
    prefix = _head_prefix(states[0])
    for path, model in zip(members, models):
        if model.config.num_labels != 1:
            raise ModelLoadError(f"{str(path)!r} has {model.config.num_labels} outputs; "
                                 "stack_heads stacks single-head reward models")
    for key, value in states[0].items():
        if key.startswith(prefix + "."):
            continue
        for path, state in zip(members[1:], states[1:]):
            if key not in state or not torch.allclose(value, state[key], atol=atol, rtol=0):
                raise ModelLoadError(f"{str(path)!r} differs from {str(members[0])!r} in "
                                     f"{key!r}: the members do not share one trunk")
    stacked = models[0]
    k = len(models)
    new_head = {name: torch.cat([s[f"{prefix}.{name}"] for s in states], 0)
                for name in ("weight", "bias") if f"{prefix}.{name}" in states[0]}
    layer = torch.nn.Linear(new_head["weight"].shape[1], k, bias="bias" in new_head)
    layer.load_state_dict(new_head)
    setattr(stacked, prefix, layer)
    stacked.config.num_labels = k
    stacked.config.id2label = {i: f"LABEL_{i}" for i in range(k)}
    stacked.config.label2id = {v: i for i, v in stacked.config.id2label.items()}
    return _save(stacked, str(members[0]), out_dir, head_names, k)


def _save(model: Any, source: str, out_dir: str | Path, head_names: Sequence[str] | None,
          k: int) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    load_tokenizer(source).save_pretrained(out)
    names = list(head_names) if head_names is not None else [f"head_{i}" for i in range(k)]
    if len(names) != k:
        raise ModelLoadError(f"head_names has {len(names)} names for {k} heads")
    write_sidecar(out, {**read_sidecar(source), "kind": "rm_heads", "heads": k,
                        "head_names": names})
    return out


def split_heads(model_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """The K single-head reward models inside a K-head model: ``out_dir/head_0`` ... Each is
    the shared trunk plus one head, and scores with ``reward_model`` as head *i* scores."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir))
    state = model.state_dict()
    prefix = _head_prefix(state)
    sidecar = {k: v for k, v in read_sidecar(str(model_dir)).items()
               if k not in ("kind", "heads", "head_names")}
    paths = []
    for i in range(model.config.num_labels):
        config = load_config(str(model_dir))
        config.num_labels = 1
        config.id2label, config.label2id = {0: "LABEL_0"}, {"LABEL_0": 0}
        single = AutoModelForSequenceClassification.from_config(config)
        piece = {k: (v[i:i + 1] if k.startswith(prefix + ".") else v) for k, v in state.items()}
        with torch.no_grad():
            single.load_state_dict(piece)
        out = Path(out_dir) / f"head_{i}"
        single.save_pretrained(out)
        load_tokenizer(str(model_dir)).save_pretrained(out)
        if sidecar:
            write_sidecar(out, {**sidecar, "kind": "rm"})
        paths.append(out)
    return paths


class MultiHeadRewardScorer(RewardModelScorer):
    """A sequence classifier with K outputs read as K rewards from one forward pass.

    ``value`` is the mean of the heads (the ``ensemble`` reward combines them properly);
    ``components`` holds each head's logit under its name. Inputs are encoded exactly as
    ``reward_model`` encodes them (same chat template, plain format, truncation, token-budget
    batches), so head *i* scores what a single-head model with that head scores.
    """

    name = "multihead_reward_model"

    def __init__(self, model: str, heads: int | None = None, tokenizer: str | None = None,
                 max_length: int | None = None, batch_tokens: int = 16384,
                 max_batch_size: int | None = None, device: str = "auto", dtype: str = "auto",
                 chat_template: bool = True, plain_format: str | None = None,
                 pad_token: str | None = None, trust_remote_code: bool = False,
                 error_value: float = 0.0) -> None:
        # Not RewardModelScorer.__init__: that refuses a head with more than one output, which
        # is right for `reward_model` and exactly what this class reads.
        outputs = self._load(model, tokenizer, max_length, batch_tokens, max_batch_size, device,
                             dtype, chat_template, plain_format, pad_token, trust_remote_code,
                             error_value)
        if heads is not None and heads != outputs:
            raise ModelLoadError(f"{model!r} has {outputs} heads, not heads={heads}; leave "
                                 "`heads` out to read every head")
        self.heads = outputs
        names = self.sidecar.get("head_names") or [f"head_{i}" for i in range(outputs)]
        if len(names) != outputs:
            raise ModelLoadError(f"{model!r}: {SIDECAR} names {len(names)} heads, the model "
                                 f"has {outputs}")
        self.head_names = [str(n) for n in names]
        self.output = "logit"
        self.center = None

    def head_logits(self, encoded: Sequence[encoding.Encoded]) -> list[list[float]]:
        """K logits per encoded sample, from one forward pass of the trunk per token batch."""
        out: list[list[float]] = [[]] * len(encoded)
        first, owner = encoding.unique_rows([e.ids for e in encoded])  # identical rows once
        lengths = [len(encoded[i].ids) for i in first]
        for idx in self.passes(lengths):
            rows = self.forward_logits([encoded[first[i]].ids for i in idx]).tolist()
            for i, row in zip(idx, rows):
                out[first[i]] = row
        return [out[first[owner[i]]] for i in range(len(encoded))]

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        import math

        scores, encoded, where = self.encode_batch(samples)
        for i, e, row in zip(where, encoded, self.head_logits(encoded) if encoded else []):
            components = dict(zip(self.head_names, row))
            if not all(math.isfinite(v) for v in row):
                scores[i] = Score.from_error(f"the model returned {row}", self.error_value,
                                             kind="nan")
                scores[i].components = components
                continue
            scores[i] = Score(sum(row) / len(row), components, info={**e.info()})
        return [s for s in scores if s is not None]

