"""Load learned reward models with ``from_pretrained`` and check them at load time.

A reward model that cannot work (no such folder or hub id, a causal LM where a classifier is
needed, a head with the wrong number of outputs, a tokenizer that cannot pad a batch) is a
:class:`ModelLoadError` when the reward is built, with what to do, never an error per sample.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..compose import ConfigError
from ..inputs import check_model_source

SIDECAR = "rewardkit.json"
"""File a model trained by ``rewardkit train rm|prm`` carries: how its inputs were formatted
(``kind``, ``layout``, ``separator``, ``step_token``, ``plain_format``), so scoring formats them
the same way."""


class ModelLoadError(ConfigError):
    """A learned reward's model or tokenizer cannot be used; the message says why and what to
    do."""

    kind = "model_load"


def read_sidecar(model: str) -> dict[str, Any]:
    """The ``rewardkit.json`` saved beside a trained model, or ``{}``."""
    path = Path(model) / SIDECAR
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_sidecar(directory: str | Path, values: dict[str, Any]) -> None:
    with open(Path(directory) / SIDECAR, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=1)


def load_config(model: str, trust_remote_code: bool = False) -> Any:
    from transformers import AutoConfig

    try:
        check_model_source(model)
    except ConfigError as exc:
        raise ModelLoadError(str(exc)) from None
    try:
        return AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        hint = ("no such folder; " if not Path(model).exists() and "/" in model
                and model.startswith((".", "/")) else "")
        raise ModelLoadError(
            f"could not load a model from {model!r}: {hint}give a local folder with config.json "
            f"and weights, or a hub id reachable from this machine ({exc})") from exc


def load_tokenizer(model: str, tokenizer: str | None = None, pad_token: str | None = None,
                   trust_remote_code: bool = False) -> Any:
    """The tokenizer, right-padded, with a pad token (or a clear error when it has none)."""
    from transformers import AutoTokenizer

    source = tokenizer or model
    try:
        tok = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as exc:
        raise ModelLoadError(f"could not load a tokenizer from {source!r} ({exc}); pass "
                             "tokenizer=PATH when it is stored elsewhere") from exc
    if pad_token is not None:
        if pad_token not in tok.get_vocab():
            raise ModelLoadError(f"pad_token {pad_token!r} is not in the tokenizer's vocabulary "
                                 f"of {source!r}; name a token it has (e.g. its EOS token "
                                 f"{tok.eos_token!r})")
        tok.pad_token = pad_token
    if tok.pad_token is None:
        raise ModelLoadError(
            f"the tokenizer of {source!r} has no pad token, so batches cannot be padded; pass "
            f"pad_token=TOKEN (the token the model was trained to pad with, often its EOS "
            f"token {tok.eos_token!r})")
    tok.padding_side = "right"
    return tok


def classifier_kind(config: Any) -> str:
    """``sequence``, ``token``, ``prm`` (a remote-code process reward model such as
    Qwen2.5-Math-PRM) or ``other``, from the config's architectures."""
    names = list(getattr(config, "architectures", None) or [])
    if any(n.endswith("ForSequenceClassification") or n.endswith("ForRewardModel")
           for n in names):
        return "sequence"
    if any(n.endswith("ForTokenClassification") for n in names):
        return "token"
    if any("ProcessRewardModel" in n for n in names):
        return "prm"
    return "other"


def load_classifier(model: str, head: str, device: Any, dtype: Any,
                    trust_remote_code: bool = False, config: Any = None) -> Any:
    """``AutoModelForSequenceClassification`` (``head="sequence"``) or a token-level model
    (``head="token"``: ``AutoModelForTokenClassification``, or ``AutoModel`` with remote code
    for models such as Qwen2.5-Math-PRM), in eval mode on ``device``."""
    from transformers import AutoModel, AutoModelForSequenceClassification, \
        AutoModelForTokenClassification

    config = config or load_config(model, trust_remote_code)
    kind = classifier_kind(config)
    arch = ", ".join(getattr(config, "architectures", None) or ["unknown"])
    if head == "sequence" and kind != "sequence":
        raise ModelLoadError(
            f"{model!r} is a {arch} model, not a sequence classifier: `reward_model` needs an "
            "AutoModelForSequenceClassification checkpoint with one output (a trained reward "
            f"model). Train one with `rewardkit train rm --model {model}`; for a process "
            "reward model use `process_reward`; a causal LM's own likelihood is read by "
            "`implicit_reward`.")
    if head == "token" and kind not in ("token", "prm"):
        raise ModelLoadError(
            f"{model!r} is a {arch} model, not a token classifier: `process_reward` needs an "
            "AutoModelForTokenClassification checkpoint (TRL PRMTrainer layout) or a process "
            "reward model such as Qwen2.5-Math-PRM. Train one with `rewardkit train prm`.")
    if kind == "prm" and not trust_remote_code:
        raise ModelLoadError(f"{model!r} ({arch}) ships its own modelling code; pass "
                             "trust_remote_code=True if you trust it")
    cls = {"sequence": AutoModelForSequenceClassification,
           "token": AutoModelForTokenClassification, "prm": AutoModel}[kind]
    from ..runtime.device import dtype_kwarg  # deferred: imports torch

    try:
        net = cls.from_pretrained(model, **dtype_kwarg(dtype), trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load the weights of {model!r}: {exc}") from exc
    return net.to(device).eval()


def load_causal_lm(model: str, device: Any, dtype: Any, trust_remote_code: bool = False,
                   config: Any = None) -> Any:
    """``AutoModelForCausalLM`` in eval mode on ``device``; a classifier checkpoint (a trained
    reward model has no language-model head) is refused with what to load instead."""
    from transformers import AutoModelForCausalLM

    config = config or load_config(model, trust_remote_code)
    names = list(getattr(config, "architectures", None) or [])
    if classifier_kind(config) != "other" or (names and not any(
            n.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration"))
            for n in names)):
        raise ModelLoadError(
            f"{model!r} is a {', '.join(names) or 'unknown'} model, not a causal language "
            "model: `implicit_reward` reads a language model's own token probabilities. A "
            "classifier reward model is read by `reward_model` (or `process_reward`).")
    from ..runtime.device import dtype_kwarg  # deferred: imports torch

    try:
        net = AutoModelForCausalLM.from_pretrained(model, **dtype_kwarg(dtype),
                                                   trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load the weights of {model!r}: {exc}") from exc
    return net.to(device).eval()


def num_outputs(net: Any) -> int:
    """Outputs of the classification head."""
    return int(getattr(net.config, "num_labels", 1))


def resolve_device_dtype(device: str, dtype: str) -> tuple[Any, Any]:
    """``auto`` device: CUDA when available, else CPU; ``auto`` dtype: bf16 on CUDA, fp32 on CPU
    (the trainer's rules)."""
    from ..runtime.device import resolve_device, resolve_dtype  # deferred: imports torch

    dev = resolve_device(device)
    return dev, resolve_dtype(dtype, dev)
