"""A synthetic arithmetic task and a tiny policy for it, built offline.

Used to show, on a CPU in minutes, that the trainer learns: prompts ``"37+45="`` with the sum as
reference, a character-level tokenizer trained with ``tokenizers``, and a small Qwen2 model
warm-started by supervised fine-tuning on *noisy* answers. The noisy warm start mimics a base
model that knows how to add but usually slips (a wrong carry, an off-by-one): sampled at
temperature 1 it is right about one time in five or less, and its most likely answer is a carry slip,
so greedy decoding is mostly wrong too. Reinforcement learning with a correctness reward must
move probability onto the right answer, on prompts it never trained on.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ..trainer.config import TrainConfig

PAD, EOS = "<pad>", "<eos>"
ALPHABET = "0123456789+-="
SLIPS: tuple[tuple[int, float], ...] = ((0, 0.15), (10, 0.5), (-1, 0.1), (1, 0.1), (-10, 0.05),
                                         (11, 0.05), (9, 0.05))
"""Warm-start answer distribution: (offset from the true sum, probability). The right answer
(offset 0) has probability 0.15; the carry slip (+10) is the most likely answer, so greedy
decoding mostly returns it."""


def make_problems(n: int, seed: int, max_operand: int = 99,
                  exclude: set[str] | None = None) -> list[dict[str, Any]]:
    """``n`` distinct addition problems ``{"prompt": "a+b=", "answer": "a+b"}``, none of whose
    prompts is in ``exclude`` (to keep held-out prompts out of training)."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    rows: list[dict[str, Any]] = []
    space = (max_operand + 1) ** 2
    if n > space - len(seen):
        raise ValueError(f"only {space - len(seen)} distinct problems exist; asked for {n}")
    while len(rows) < n:
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        prompt = f"{a}+{b}="
        if prompt in seen:
            continue
        seen.add(prompt)
        rows.append({"prompt": prompt, "answer": str(a + b)})
    return rows


def noisy_answer(answer: str, rng: random.Random) -> str:
    """The warm start's target: the true answer shifted by an offset drawn from :data:`SLIPS`
    (clamped at 0)."""
    offsets, weights = zip(*SLIPS)
    return str(max(0, int(answer) + rng.choices(offsets, weights)[0]))


def build_tokenizer():  # noqa: ANN201 - transformers type
    """A character-level tokenizer for :data:`ALPHABET`, trained with ``tokenizers`` (a BPE
    whose vocabulary is exactly the characters, so no merges), wrapped for ``transformers``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(vocab_size=len(ALPHABET) + 2, special_tokens=[PAD, EOS],
                                  initial_alphabet=list(ALPHABET), show_progress=False)
    core.train_from_iterator([ALPHABET], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS,
                                   padding_side="left", model_max_length=64)


def build_model(tokenizer: Any, hidden_size: int = 128, num_layers: int = 3, seed: int = 0) -> Any:
    """A randomly initialised small Qwen2 causal LM sized for the tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=64, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def sft_batch(tokenizer: Any, prompts: list[str], answers: list[str]) -> tuple[Any, Any]:
    """The padded encoding of ``prompt + answer + EOS`` for each row and its labels: the
    answer's and EOS's tokens, -100 on the prompt and the padding. The prompt is measured in
    tokens as the whole text is tokenised (a prompt of words is fewer tokens than characters)."""
    texts = [p + a + tokenizer.eos_token for p, a in zip(prompts, answers)]
    prompt_lens = [len(ids) for ids in tokenizer(prompts).input_ids]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right")
    labels = enc.input_ids.clone()
    labels[enc.attention_mask == 0] = -100
    for i, n in enumerate(prompt_lens):
        labels[i, :n] = -100
    return enc, labels


def warm_start(model: Any, tokenizer: Any, problems: list[dict[str, Any]], steps: int,
               batch_size: int = 128, lr: float = 3e-3, seed: int = 0,
               noisy: bool = True, progress: bool = False) -> list[float]:
    """Supervised fine-tuning on ``prompt + answer + EOS`` (loss on the answer only); with
    ``noisy`` each answer is drawn from :data:`SLIPS` anew every time it is seen (``noisy=False``
    trains on the answers as given, which may be any text, e.g. worked solutions). Returns the
    loss per step."""
    import torch

    rng = random.Random(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    model.train()
    losses: list[float] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="warm start", unit="step")
    for _ in range(steps):
        batch = rng.sample(problems, batch_size)
        answers = [noisy_answer(row["answer"], rng) if noisy else row["answer"] for row in batch]
        enc, labels = sft_batch(tokenizer, [row["prompt"] for row in batch], answers)
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if bar is not None:
            bar.update()
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    if bar is not None:
        bar.close()
    model.eval()
    return losses


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "arithmetic"
"""Where the shipped task lives (a source checkout): ``train.jsonl``, ``test.jsonl``, ``policy/``."""


def task_config(output_dir: str | Path, data_dir: str | Path = DATA_DIR, **changes: Any
                ) -> TrainConfig:
    """A small CPU :class:`~rewardkit.trainer.config.TrainConfig` for the shipped arithmetic
    task (exact-match reward, 16 completions per step, no plots/TensorBoard/progress bar);
    ``changes`` override any field. Tests and quick experiments start from it."""
    data_dir = Path(data_dir)
    if not (data_dir / "policy").is_dir():
        raise FileNotFoundError(f"{data_dir}/policy not found; build it with "
                                "`python data/arithmetic/build.py`")
    values: dict[str, Any] = dict(
        model=str(data_dir / "policy"), data=str(data_dir / "train.jsonl"), reward="exact_match",
        batch_size=16, group_size=4, max_new_tokens=6, learning_rate=3e-4, steps=2,
        output_dir=str(output_dir), progress=False, tensorboard=False, plots=False, device="cpu")
    values.update(changes)
    return TrainConfig(**values)
