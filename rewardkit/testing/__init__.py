"""Public test fixtures (like ``torch.testing``): tiny models built offline (and random LoRA
adapters of them), the arithmetic demo task (:mod:`rewardkit.testing.arithmetic`) the README
trains on, and the hostile programs the code sandbox is tested against
(:mod:`rewardkit.testing.sandbox_attacks`).

Tests of the trainer adapters must run a real model and a real tokenizer, but nothing may be
downloaded at test time. :func:`make_tiny_causal_lm` trains a byte-level BPE tokenizer on a small
corpus with the ``tokenizers`` library, wraps it as a ``transformers`` fast
tokenizer with a chat template, builds a randomly initialised Qwen2 or Llama model of about a
hundred thousand parameters and saves both, so that ``AutoTokenizer.from_pretrained(path)`` and
``AutoModelForCausalLM.from_pretrained(path)`` load them without network access. The model
generates noise; it exists to exercise code paths, not to be good.

Needs the ``train`` extra (``torch``, ``transformers``, ``tokenizers``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ("<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Pad, end-of-text, and the two chat-turn delimiters, in that order (ids 0 to 3)."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A ChatML-style template: each turn is ``<|im_start|>role\\ncontent<|im_end|>``."""

ARCHITECTURES = ("qwen2", "llama")

_CORPUS = (
    "What is 2 + 3? The answer is 5.",
    "Compute 12 * 4. We multiply and get 48, so the answer is \\boxed{48}.",
    "If x + 7 = 10, then x = 3.",
    "Natalia sold clips to 48 of her friends in April, and then half as many in May.",
    "The sum of the angles of a triangle is 180 degrees.",
    "def add(a, b):\n    return a + b",
    "def is_even(n):\n    return n % 2 == 0",
    "for i in range(10):\n    print(i)",
    "The quick brown fox jumps over the lazy dog.",
    "Think step by step, then give the final answer after ####.",
    "#### 72",
    "Let f(x) = x^2 - 4x + 4. Then f(2) = 0.",
    "Solve for y: 3y = 21. So y = 7.",
    "The capital of France is Paris.",
    "Answer: yes. Answer: no. Final answer: 42.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 3.14 -1 1/2",
    "<think>Let me check the arithmetic.</think> The result is 9.",
)


def default_corpus() -> list[str]:
    """The built-in training text: short math, code and prose lines, plus every printable ASCII
    character so that any English text tokenises without unknown pieces."""
    ascii_line = "".join(chr(c) for c in range(32, 127))
    return [*_CORPUS, ascii_line]


def make_tiny_causal_lm(
    out_dir: str | Path,
    texts: Iterable[str] | None = None,
    arch: str = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 512,
    seed: int = 0,
) -> Path:
    """Build and save a tiny random causal LM with its own tokenizer; return its directory.

    Args:
        out_dir: where to save; created if missing. Loadable afterwards with
            ``AutoModelForCausalLM.from_pretrained(out_dir)`` and
            ``AutoTokenizer.from_pretrained(out_dir)``, offline.
        texts: text to train the tokenizer on (default: :func:`default_corpus`).
        arch: ``"qwen2"`` or ``"llama"``.
        hidden_size: model width; must be divisible by 16 (4 attention heads of even size).
        num_layers: number of transformer blocks.
        vocab_size: upper bound on the tokenizer's vocabulary. A small corpus may yield fewer
            tokens; the model's embedding matches the tokenizer's actual size.
        seed: seeds the weight initialisation, so the same arguments give the same model.

    The tokenizer has ``<|pad|>`` as pad token, ``<|im_end|>`` as end-of-sequence token (a chat
    turn ends generation) and a ChatML-style chat template (:data:`CHAT_TEMPLATE`).
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")
    if hidden_size <= 0 or hidden_size % 16:
        raise ValueError(f"hidden_size must be a positive multiple of 16, got {hidden_size}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, got {num_layers}")
    if vocab_size < 300:
        raise ValueError(
            f"vocab_size must be at least 300 (256 byte tokens + specials + merges), got "
            f"{vocab_size}"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = list(texts) if texts is not None else default_corpus()
    if not corpus:
        raise ValueError("texts is empty; pass some lines of text or None for the built-in corpus")

    tokenizer = _train_tokenizer(corpus, vocab_size, arch)
    tokenizer.save_pretrained(out)
    model = _random_model(arch, len(tokenizer), hidden_size, num_layers, tokenizer, seed)
    model.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    return out


def _architecture_pipeline(arch: str):  # noqa: ANN202 - tokenizers types
    """The normaliser and pre-tokeniser that ``AutoTokenizer`` will impose for ``arch``, if any.

    Recent ``transformers`` releases load a Qwen2 checkpoint's tokenizer with ``Qwen2Tokenizer``,
    which rebuilds the tokenizer from the saved vocabulary and merges with its own pre-tokeniser,
    whatever ``tokenizer.json`` says. Training with that same pipeline makes the tokenizer saved
    here and the one loaded back split text identically.
    """
    if arch != "qwen2":
        return None
    try:
        from transformers import Qwen2Tokenizer

        backend = getattr(Qwen2Tokenizer(), "_tokenizer", None)
    except (ImportError, TypeError, ValueError):
        return None
    if backend is None or backend.pre_tokenizer is None:
        return None
    return backend.normalizer, backend.pre_tokenizer


def _train_tokenizer(corpus: list[str], vocab_size: int, arch: str):  # noqa: ANN202
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    pipeline = _architecture_pipeline(arch)
    if pipeline is not None:
        core.normalizer, core.pre_tokenizer = pipeline
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    pad, eos, _, im_end = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=pad,
        eos_token=im_end,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[eos, SPECIAL_TOKENS[2]],
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
        model_max_length=2048,
    )


def _random_model(arch: str, vocab: int, hidden: int, layers: int, tokenizer, seed: int):  # noqa: ANN001, ANN202
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[arch]
    config = config_cls(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


HEADS = ("sequence", "token")


def make_tiny_reward_model(
    out_dir: str | Path,
    head: str = "sequence",
    num_labels: int | None = None,
    arch: str = "qwen2",
    step_token: str | None = None,
    pad_token: bool = True,
    hidden_size: int = 32,
    num_layers: int = 1,
    texts: Iterable[str] | None = None,
    seed: int = 0,
) -> Path:
    """Build and save a tiny random reward model with its own tokenizer; return its directory.

    Args:
        head: ``"sequence"`` (``AutoModelForSequenceClassification``, an outcome reward model)
            or ``"token"`` (``AutoModelForTokenClassification``, a process reward model).
        num_labels: outputs of the head (default 1 for ``sequence``, 2 for ``token``).
        step_token: a special token added to the tokenizer (e.g. ``"<extra_0>"``, the step
            mark of Qwen2.5-Math-PRM); the embedding grows to fit it.
        pad_token: False saves a tokenizer without a pad token (and a config without
            ``pad_token_id``), to test the load-time error.
        hidden_size, num_layers, texts, arch, seed: as for :func:`make_tiny_causal_lm`.

    The tokenizer has the ChatML template of :data:`CHAT_TEMPLATE`; loadable offline with
    ``AutoModelFor{Sequence,Token}Classification.from_pretrained(out_dir)``.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch must be one of {ARCHITECTURES}, got {arch!r}")
    if hidden_size <= 0 or hidden_size % 16:
        raise ValueError(f"hidden_size must be a positive multiple of 16, got {hidden_size}")
    labels = num_labels if num_labels is not None else (1 if head == "sequence" else 2)
    if labels < 1:
        raise ValueError(f"num_labels must be at least 1, got {labels}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = list(texts) if texts is not None else default_corpus()
    tokenizer = _train_tokenizer(corpus, 512, arch)
    if step_token:
        tokenizer.add_tokens([step_token], special_tokens=True)
    pad_id = tokenizer.pad_token_id
    if not pad_token:
        tokenizer.pad_token = None
        pad_id = None
    tokenizer.save_pretrained(out)
    model = _random_classifier(arch, head, labels, len(tokenizer), hidden_size, num_layers,
                               pad_id, tokenizer.eos_token_id, seed)
    model.save_pretrained(out)
    return out


def make_random_lora_adapter(base: str | Path, out_dir: str | Path, seed: int,
                             noise_seed: int, rank: int = 4,
                             target_modules: Iterable[str] = ("q_proj", "v_proj", "up_proj"),
                             scale: float = 0.5) -> Path:
    """Save a LoRA adapter (peft, ``SEQ_CLS``, ``lora_alpha = 2 * rank``) of the reward model
    ``base`` whose new head is initialised under ``seed`` and whose LoRA matrices and head are
    then perturbed by ``scale`` × N(0, 1) noise drawn with ``noise_seed``: a freshly initialised
    LoRA is the identity, so adapters that should differ (ensemble members) must be perturbed.
    Returns ``out_dir``. Needs the ``train`` extra (``peft``)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=1)
    peft_model = get_peft_model(model, LoraConfig(
        r=rank, lora_alpha=2 * rank, task_type="SEQ_CLS", target_modules=list(target_modules)))
    gen = torch.Generator().manual_seed(noise_seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name or "modules_to_save" in name:
                p.add_(torch.randn(p.shape, generator=gen) * scale)
    peft_model.save_pretrained(str(out_dir))
    return Path(out_dir)


def _random_classifier(arch: str, head: str, labels: int, vocab: int, hidden: int, layers: int,
                       pad_id: int | None, eos_id: int, seed: int):  # noqa: ANN202
    import torch
    from transformers import (LlamaConfig, LlamaForSequenceClassification,
                              LlamaForTokenClassification, Qwen2Config,
                              Qwen2ForSequenceClassification, Qwen2ForTokenClassification)

    config_cls, classes = {
        "qwen2": (Qwen2Config, (Qwen2ForSequenceClassification, Qwen2ForTokenClassification)),
        "llama": (LlamaConfig, (LlamaForSequenceClassification, LlamaForTokenClassification)),
    }[arch]
    config = config_cls(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, num_labels=labels, pad_token_id=pad_id,
        eos_token_id=eos_id, bos_token_id=eos_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return classes[0 if head == "sequence" else 1](config)
