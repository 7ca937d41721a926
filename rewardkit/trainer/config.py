"""Every option of the trainer, in one dataclass, validated with messages that say what to do.

A config file (YAML/TOML/JSON) holds the options under ``train:``; the reward is either
``train.reward`` (a name or a composition mapping) or the file's own top-level ``reward:``
section, so one file drives ``rewardkit score``, ``serve`` and ``train``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import registry
from ..compose import ConfigError
from ..runtime.fields import SCHEDULES, JobConfig, check_types, choice
from ..scorer import Scorer

ALGORITHMS = ("grpo", "ppo")
ADVANTAGES = ("grpo", "rloo", "reinforce_pp", "gae")
STD_SCALES = ("group", "batch", "none")
AGGREGATIONS = ("seq_mean", "token_mean", "constant")
KL_ESTIMATORS = ("k1", "k3")
KL_PLACES = ("loss", "reward")
TRUNCATION = ("none", "mask", "penalty")
REWARD_ERRORS = ("skip", "value")
GROUP_FILTERS = ("none", "zero_variance", "reinforce_rej")
DISTRIBUTED = ("ddp", "fsdp")
GENERATION_BACKENDS = ("hf", "vllm")


@dataclass
class TrainConfig(JobConfig):
    """Options of ``rewardkit train grpo|ppo``; each field documents the method it comes from."""

    DOCS = "docs/trainer.md"

    # -- what to train, on what, against which reward --------------------------------------------
    algorithm: str = "grpo"
    """``grpo`` (critic-free, group-relative advantages; Shao et al. 2024) or ``ppo`` (value head
    and GAE; Schulman et al. 2017, Ouyang et al. 2022)."""
    model: str = ""
    """Hugging Face causal LM: a local directory or a hub id."""
    data: str = ""
    """Training prompts: JSONL, JSON, CSV, Parquet, a ``datasets`` folder, or ``hf:NAME``."""
    eval_data: str | None = None
    """Held-out prompts for periodic evaluation (same format as ``data``); None skips it."""
    prompt_field: str = "prompt"
    """Column with the prompt: a string, or chat messages (the tokenizer's chat template is
    applied). Dotted paths reach into nested fields."""
    reference_field: str | None = None
    """Column with what the reward needs (gold answer, tests), passed as ``Sample.reference``.
    None: ``reference`` if the rows have it, else ``answer``, else no reference. Naming a column
    makes a row without it an error."""
    reward: Any = None
    """A reward name (``"math"``), a composition mapping, or a config file path."""
    reward_options: dict[str, Any] = field(default_factory=dict)
    """Options passed to ``rewardkit.load(reward, **reward_options)``."""
    gold_reward: Any = None
    """Optional second reward evaluated beside the training reward at evaluation time, to show
    over-optimisation (Gao et al. 2023, "Scaling Laws for Reward Model Overoptimization")."""
    reward_refresh_every: int = 0
    """Every N steps, fine-tune the training reward model (``reward: reward_model``) on the
    policy's own samples labelled by ``gold_reward`` — iterated RLHF against over-optimisation
    (see :mod:`rewardkit.trainer.reward_refresh`). 0 never refreshes."""
    monitor_reward: Any = None
    """Optional reward ensemble (any reward reporting ``Score.uncertainty``) scored on the
    held-out evaluation samples beside the training reward; its mean uncertainty is logged as
    ``eval/disagreement`` (see :mod:`rewardkit.trainer.early_stop`). Never trained on."""
    stop_on_disagreement: int = 0
    """Stop (after saving a checkpoint) once the training reward and ``monitor_reward``'s
    disagreement both rose for this many evaluations in a row, the disagreement more than
    ``disagreement_margin`` above its first value: over-optimisation seen without the gold
    reward. 0 never stops."""
    disagreement_margin: float = 0.0
    """``stop_on_disagreement`` counts an evaluation only when the disagreement exceeds
    ``(1 + margin)`` × its value at the first evaluation."""
    keep_before_stop: bool = False
    """With ``stop_on_disagreement``: also save the policy of the last evaluation before the
    one that stopped the run, in ``output_dir/before_stop/final`` (loadable with
    ``from_pretrained``). The rule fires once the policy has moved where the ensemble
    disagrees; the evaluation before is the last policy seen where it still agreed. Costs one
    copy of the policy's weights in CPU memory between evaluations."""
    reward_refresh: dict[str, Any] = field(default_factory=dict)
    """Options of the refresh: ``steps`` (50), ``learning_rate`` (3e-4), ``batch_size`` (16),
    ``max_pairs`` (2000, newest kept), ``pairs_per_group`` (4), ``data`` (a preference file
    mixed in every time), ``gold_threshold`` (1.0: gold at least this is "right")."""
    uncertainty_penalty: float = 0.0
    """λ in ``r - λ·uncertainty`` for rewards reporting ``Score.uncertainty`` (ensembles;
    Coste et al. 2024, "Reward Model Ensembles Help Mitigate Overoptimization")."""
    output_dir: str = "runs/train"
    """Where checkpoints, metrics.jsonl, plots and the final model go."""

    # -- batch shape ------------------------------------------------------------------------------
    steps: int = 100
    """Number of RL steps (one generate → score → update cycle each)."""
    batch_size: int = 64
    """Completions per step (prompts per step × ``group_size``)."""
    group_size: int = 8
    """Completions sampled per prompt, G in GRPO (Shao et al. 2024)."""
    mini_batch_size: int | None = None
    """Completions per optimiser step; None = the whole batch (one update per epoch). Several
    mini-batches per batch make the later ones off-policy, which the clipped ratio handles."""
    micro_batch_size: int | None = None
    """Completions per forward/backward pass (gradient accumulation); None = the mini-batch.
    The no-gradient passes (old-policy, reference and value log-probs) use it too."""
    max_tokens_per_forward: int | None = None
    """Token budget of one forward pass: rows × (prompt + completion width) stays under it
    (at least one row), splitting micro-batches further; None = no budget. Bounds activation
    memory when completion lengths vary from step to step."""
    logprob_chunk_tokens: int | None = 1024
    """Positions whose full-vocabulary logits are upcast to fp32 at a time when computing
    chosen-token log-probs and entropy (no full ``[B, T, V]`` fp32 copy); None = all at once."""
    generation_batch_size: int | None = None
    """Completions per ``generate`` call (whole groups; KV-cache memory); None = the batch."""
    max_prompt_tokens: int | None = None
    """Prompts longer than this many tokens keep their last ``max_prompt_tokens`` tokens (the
    end holds the question and the generation prompt); None = no cap. The number cut is
    printed."""
    epochs: int = 1
    """Passes over each batch (PPO's K epochs; μ in GRPO)."""

    # -- generation -------------------------------------------------------------------------------
    max_new_tokens: int = 256
    """Completion length budget; longer completions are truncated."""
    temperature: float = 1.0
    """Sampling temperature; log-probabilities in the loss use the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling threshold (Holtzman et al. 2020); 1.0 disables it."""
    top_k: int = 0
    """Top-k sampling; 0 disables it."""
    stop: list[str] = field(default_factory=list)
    """Extra stop strings beside the tokenizer's end-of-sequence token."""
    chat_template: bool = True
    """Wrap plain-string prompts as one user message and apply the tokenizer's chat template
    when it has one (chat models expect it); false tokenises strings as written. Chat-message
    prompts always go through the template."""
    generation_backend: str = "hf"
    """``hf`` (``model.generate``; CPU and GPU) or ``vllm`` (colocated vLLM engine on the same
    GPU, paged attention and prefix sharing across the G samples of a prompt; the policy's
    weights are copied into it after every update; needs ``pip install vllm`` and CUDA)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory the colocated vLLM engine may take (weights + KV cache)."""

    # -- advantages and loss ----------------------------------------------------------------------
    advantage: str | None = None
    """``grpo``, ``rloo`` (Ahmadian et al. 2024), ``reinforce_pp`` (Hu et al. 2025) or ``gae``;
    None picks ``grpo`` for the grpo algorithm and ``gae`` for ppo."""
    std_scale: str = "group"
    """GRPO advantage denominator: ``group`` std (GRPO), ``batch`` std, or ``none`` (Dr. GRPO,
    Liu et al. 2025)."""
    clip_eps_low: float = 0.2
    """Lower clip range of the importance ratio, 1 - ε_low (PPO, Schulman et al. 2017)."""
    clip_eps_high: float = 0.2
    """Upper clip range, 1 + ε_high; DAPO's clip-higher uses 0.28 (Yu et al. 2025)."""
    loss_aggregation: str = "token_mean"
    """``seq_mean`` (GRPO), ``token_mean`` (DAPO) or ``constant`` (Dr. GRPO, normaliser
    ``max_new_tokens``)."""
    kl_coef: float = 0.0
    """β, weight of the KL to the reference policy; 0 skips the reference model entirely
    (as DAPO and Dr. GRPO do)."""
    measure_kl: bool = False
    """Measure (and log as ``kl``) the KL to the reference policy even with ``kl_coef`` 0, so
    the run's drift from its start is drawn in ``kl_entropy.png``. Full fine-tuning then keeps
    a frozen copy of the starting weights (LoRA needs none: the base is the reference)."""
    kl_target: float | None = None
    """Adaptive KL (Ziegler et al. 2019): after every step, scale β by
    ``1 + kl_adapt_rate · clip(KL / kl_target − 1, ±0.2)`` so the KL on the training batch
    stays near this; ``kl_coef`` is the starting β and its floor (see
    :mod:`rewardkit.trainer.kl_control`).
    None keeps β fixed."""
    kl_adapt_rate: float = 0.1
    """K_β of the adaptive KL controller: at most ``0.2 · kl_adapt_rate`` relative change of
    β per step (0.1 as in Ziegler et al. 2019)."""
    kl_estimator: str = "k3"
    """``k1`` (log ratio) or ``k3`` (Schulman 2020; used by GRPO) per-token KL estimate."""
    kl_in: str = "loss"
    """``loss`` (GRPO: β·KL added to the loss) or ``reward`` (PPO-RLHF, Ouyang et al. 2022:
    -β·KL subtracted from per-token rewards)."""
    entropy_coef: float = 0.0
    """Weight of an entropy bonus (Williams & Peng 1991; Mnih et al. 2016)."""
    top_entropy_ratio: float = 1.0
    """Train only the top-ρ fraction of tokens by entropy (Wang et al. 2025, "Beyond the 80/20
    Rule", ρ = 0.2); 1.0 trains on every token."""

    # -- PPO value head ---------------------------------------------------------------------------
    gamma: float = 1.0
    """GAE discount γ (Schulman et al. 2016)."""
    lam: float = 0.95
    """GAE λ."""
    vf_coef: float = 0.5
    """Weight of the value loss (PPO)."""
    value_clip: float | None = 0.2
    """Clip range of the value update; None disables value clipping."""

    # -- filters ----------------------------------------------------------------------------------
    group_filter: str = "none"
    """``zero_variance`` (drop groups with identical rewards; DAPO dynamic sampling, Yu et al.
    2025), ``reinforce_rej`` (drop all-correct and all-wrong groups; Xiong et al. 2025), or
    ``none``."""
    resample_rounds: int = 0
    """With a group filter, sample up to this many extra rounds of prompts to refill the batch
    (DAPO dynamic sampling); 0 trains on the kept groups only."""
    truncation: str = "none"
    """Truncated completions: ``mask`` (excluded from the loss; DAPO overlong filtering),
    ``penalty`` (reward set to ``truncation_penalty``), or ``none``."""
    truncation_penalty: float = -1.0
    """Reward given to truncated completions with ``truncation: penalty``."""
    reward_errors: str = "skip"
    """Completions the reward could not score (an error Score): ``skip`` (left out of the loss;
    for the advantages of the rest of its group it counts as the mean reward of the group's
    scored completions, so it moves no baseline) or ``value`` (trained with the reward's
    ``error_value``, usually 0: a reward that was never computed)."""

    # -- optimiser --------------------------------------------------------------------------------
    learning_rate: float = 1e-6
    """AdamW learning rate (Loshchilov & Hutter 2019)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """AdamW (β1, β2)."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm; None disables clipping."""
    warmup_steps: int = 0
    """Linear learning-rate warmup steps."""
    lr_schedule: str = "constant"
    """After warmup: ``constant``, ``linear`` decay to 0, or ``cosine`` decay to 0."""

    # -- model options ----------------------------------------------------------------------------
    lora: bool = False
    """Train a LoRA adapter (Hu et al. 2022) via peft; the reference policy is the base with
    the adapter disabled (no second copy in memory)."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling α."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target_modules: list[str] | str = "all-linear"
    """Modules that get adapters (peft's ``target_modules``)."""
    disable_dropout: bool = True
    """Set every dropout probability to 0, so the training forward scores tokens with the same
    distribution they were sampled from (the importance ratio starts at exactly 1)."""
    mixed_precision: bool = True
    """With ``dtype`` bfloat16/float16: keep fp32 master weights and optimizer state and run
    forwards under autocast in ``dtype`` (Micikevicius et al. 2018, as TRL/accelerate and verl
    do). False stores the weights in ``dtype`` itself: half the memory, but small updates
    round away (bf16 keeps 8 significant bits), so full fine-tuning barely moves."""
    distributed: str = "ddp"
    """With several processes: ``ddp`` (each holds the whole policy and optimizer) or ``fsdp``
    (torch FSDP2 ``fully_shard``: parameters, gradients and optimizer state sharded across
    processes, for policies that do not fit on one device)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (Chen et al. 2016) to save memory."""
    device: str = "auto"
    """``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda``, ``cuda:1``, ..."""
    dtype: str = "auto"
    """``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16``, ``float16``."""
    seed: int = 0
    """Seeds Python, NumPy and torch; the same seed and config give the same run."""

    # -- logging, evaluation, checkpoints ---------------------------------------------------------
    eval_every: int = 0
    """Evaluate on ``eval_data`` every N steps (and at the start and end); 0 only at the end."""
    eval_samples: int = 4
    """Completions per held-out prompt at evaluation (the n of pass@k, mean@k)."""
    eval_k: list[int] = field(default_factory=lambda: [1])
    """k values for pass@k (Chen et al. 2021, unbiased estimator); each must be <= eval_samples."""
    eval_max_prompts: int | None = None
    """Evaluate on at most this many held-out prompts (None: all)."""
    gold_eval_prompts: int | None = None
    """Measure ``gold_reward`` on its own ``eval_samples`` completions of the first N held-out
    prompts, sampled on a random stream of their own (seeded by ``seed`` and the step), so the
    gold measurement can be as large as its standard error needs without changing anything the
    policy or a stop rule sees. None: gold scores the evaluation's own completions (those of
    ``eval_max_prompts``), whose sampling shares the training's random stream, so its size
    changes the run."""
    eval_threshold: float = 1.0
    """A sample counts as correct for pass@k, mean@n and greedy accuracy when its reward is at
    least this."""
    eval_temperature: float | None = None
    """Sampling temperature at evaluation; None uses ``temperature``."""
    save_every: int = 0
    """Save a resumable checkpoint every N steps; 0 only at the end (and on Ctrl-C)."""
    log_every: int = 1
    """Write metrics every N steps."""
    tensorboard: bool = True
    """Also log to TensorBoard when it is installed."""
    plots: bool = True
    """Write PNG plots of the main curves at the end (matplotlib)."""
    progress: bool = True
    """Show a progress bar."""
    stop_without_signal: int = 10
    """Stop (after saving a checkpoint) once this many consecutive steps had no learning
    signal: every group's rewards equal (zero variance; with ``group_size`` 1, the whole
    batch's) or every reward an error, as when the reward cannot read the reference column.
    Each such step warns; 0 only warns."""
    stop_on_overoptimisation: int = 0
    """Stop (after saving a checkpoint) once the gold reward (``gold_reward``) fell for this
    many evaluations in a row while the training reward rose on the same held-out prompts:
    reward over-optimisation (Gao et al. 2023). 0 never stops; the gap and the KL are logged
    either way (``eval/proxy_gold_gap``, ``eval/kl``) and drawn in ``overoptimisation.png``."""

    def __post_init__(self) -> None:
        if isinstance(self.adam_betas, list):
            self.adam_betas = tuple(self.adam_betas)  # type: ignore[assignment]
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if isinstance(self.eval_k, int):
            self.eval_k = [self.eval_k]
        if self.advantage is None:
            self.advantage = "gae" if self.algorithm == "ppo" else "grpo"

    # -- validation -------------------------------------------------------------------------------
    def validate(self) -> "TrainConfig":
        """Check the options together; raise :class:`ConfigError` saying what to change."""
        self._check_types()
        choice("algorithm", self.algorithm, ALGORITHMS)
        choice("advantage", self.advantage, ADVANTAGES)
        choice("std_scale", self.std_scale, STD_SCALES)
        choice("loss_aggregation", self.loss_aggregation, AGGREGATIONS)
        choice("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        choice("kl_in", self.kl_in, KL_PLACES)
        choice("truncation", self.truncation, TRUNCATION)
        choice("reward_errors", self.reward_errors, REWARD_ERRORS)
        choice("group_filter", self.group_filter, GROUP_FILTERS)
        choice("lr_schedule", self.lr_schedule, SCHEDULES)
        choice("distributed", self.distributed, DISTRIBUTED)
        choice("generation_backend", self.generation_backend, GENERATION_BACKENDS)
        if not self.model:
            raise ConfigError("no model: pass --model PATH_OR_ID or set train.model")
        if not self.data:
            raise ConfigError("no training data: pass --data FILE or set train.data")
        if self.reward is None:
            raise ConfigError("no reward: pass --reward NAME or --reward-config FILE, or set "
                              "train.reward / a top-level reward: section")
        for name in ("steps", "batch_size", "group_size", "epochs", "max_new_tokens",
                     "eval_samples", "log_every", "mini_batch_size", "micro_batch_size",
                     "eval_max_prompts", "gold_eval_prompts", "lora_r", "lora_alpha",
                     "max_tokens_per_forward", "logprob_chunk_tokens", "generation_batch_size",
                     "max_prompt_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("top_k", "resample_rounds", "warmup_steps", "save_every", "eval_every",
                     "weight_decay", "vf_coef", "stop_without_signal",
                     "stop_on_overoptimisation", "reward_refresh_every",
                     "stop_on_disagreement", "disagreement_margin"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0 disables it), got "
                                  f"{getattr(self, name)}")
        for name, null in (("max_grad_norm", "to disable clipping"),
                           ("value_clip", "to disable clipping"),
                           ("eval_temperature", "for the training temperature (greedy "
                                                "accuracy is logged as eval/greedy)")):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, or null {null}; got "
                                  f"{getattr(self, name)}")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.batch_size % self.group_size:
            raise ConfigError(
                f"batch_size ({self.batch_size}) is not divisible by group_size "
                f"({self.group_size}): each prompt's {self.group_size} completions must fit in "
                f"one batch; use batch_size {self._nearest_multiple()} for example"
            )
        if self.algorithm == "ppo" and self.advantage != "gae":
            raise ConfigError(f"ppo uses a value head and advantage 'gae', got {self.advantage!r}"
                              "; for critic-free estimators use algorithm grpo")
        if self.algorithm == "grpo" and self.advantage == "gae":
            raise ConfigError("advantage 'gae' needs a value head: use algorithm ppo")
        if self.advantage == "grpo" and self.group_size < 2:
            raise ConfigError("advantage 'grpo' with group_size 1 gives every completion a zero "
                              "advantage (its baseline is the group mean): use group_size >= 2, "
                              "or advantage reinforce_pp (batch baseline) for one sample per "
                              "prompt")
        if self.distributed == "fsdp" and (self.lora or self.algorithm == "ppo"):
            raise ConfigError("distributed 'fsdp' shards a full-weight GRPO policy; with lora "
                              "or ppo use distributed 'ddp' (a LoRA adapter is small enough to "
                              "replicate)")
        if self.generation_batch_size is not None and self.generation_batch_size % \
                self.group_size:
            raise ConfigError(f"generation_batch_size ({self.generation_batch_size}) must be a "
                              f"multiple of group_size ({self.group_size}): groups are generated "
                              "whole")
        if not 0 < self.vllm_gpu_memory_utilization < 1:
            raise ConfigError("vllm_gpu_memory_utilization must be in (0, 1), got "
                              f"{self.vllm_gpu_memory_utilization}")
        if self.advantage == "rloo" and self.group_size < 2:
            raise ConfigError("rloo needs group_size >= 2 (its baseline is the other samples)")
        mini = self.mini_batch_size or self.batch_size
        if mini > self.batch_size or self.batch_size % mini:
            raise ConfigError(f"mini_batch_size ({mini}) must divide batch_size "
                              f"({self.batch_size})")
        micro = self.micro_batch_size or mini
        if micro > mini or mini % micro:
            raise ConfigError(f"micro_batch_size ({micro}) must divide mini_batch_size ({mini})")
        if not 0 <= self.clip_eps_low < 1 or self.clip_eps_high < 0:
            raise ConfigError("clip_eps_low must be in [0, 1) and clip_eps_high >= 0, got "
                              f"{self.clip_eps_low}, {self.clip_eps_high}")
        if not 0 < self.top_entropy_ratio <= 1:
            raise ConfigError(f"top_entropy_ratio must be in (0, 1], got {self.top_entropy_ratio}")
        if self.temperature <= 0:
            raise ConfigError("temperature must be > 0 (the loss divides logits by it)")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.kl_coef < 0 or self.entropy_coef < 0 or self.uncertainty_penalty < 0:
            raise ConfigError("kl_coef, entropy_coef and uncertainty_penalty must be >= 0")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        bad_k = [k for k in self.eval_k if not 1 <= k <= self.eval_samples]
        if bad_k:
            raise ConfigError(f"eval_k {bad_k} must be between 1 and eval_samples "
                              f"({self.eval_samples}); raise eval_samples or lower k")
        if not 0 <= self.gamma <= 1 or not 0 <= self.lam <= 1:
            raise ConfigError("gamma and lam must be in [0, 1]")
        if self.kl_target is not None and (self.kl_target <= 0 or self.kl_coef <= 0
                                           or self.kl_adapt_rate <= 0):
            raise ConfigError(f"kl_target ({self.kl_target}) needs kl_coef > 0 (the starting "
                              f"β, got {self.kl_coef}), kl_target > 0 and kl_adapt_rate > 0")
        if self.gold_eval_prompts and not self.eval_data:
            raise ConfigError("gold_eval_prompts sizes the gold measurement on held-out prompts; "
                              "set eval_data (and gold_reward), or drop it")
        if self.keep_before_stop and not self.stop_on_disagreement:
            raise ConfigError("keep_before_stop keeps the policy before a stop_on_disagreement "
                              "stop; set stop_on_disagreement (and monitor_reward), or drop it")
        if self.stop_on_disagreement and not (self.monitor_reward and self.eval_data
                                              and self.eval_every):
            raise ConfigError("stop_on_disagreement needs monitor_reward (a reward ensemble) and "
                              "periodic evaluation (eval_data, eval_every > 0): the rule reads "
                              "the ensemble's disagreement on the held-out samples")
        return self

    def _check_types(self) -> None:
        """Each option has its annotated type, so a wrong one is named here instead of failing
        later inside a comparison or deep in torch. Numbers written as strings are converted:
        YAML 1.1 (PyYAML) reads ``1e-6`` without a decimal point as the string ``"1e-6"``."""
        check_types(self)

    def _nearest_multiple(self) -> int:
        return max(self.group_size, round(self.batch_size / self.group_size) * self.group_size)

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def file_values(cls, data: dict[str, Any], section: dict[str, Any],
                    path: str | Path) -> dict[str, Any]:
        """The file's ``train:`` section; its top-level ``reward:`` section is the reward
        unless ``train.reward`` is set."""
        if section.get("reward") is None and "reward" in data:
            section["reward"] = _reward_section(data, path)
        return section


def _reward_section(data: Mapping[str, Any], path: str | Path) -> Any:
    reward = data["reward"]
    if isinstance(reward, Mapping) or isinstance(reward, str):
        return reward
    raise ConfigError(f"{path}: `reward:` must be a reward name or a composition mapping")


def load_reward(spec: Any, options: dict[str, Any], what: str) -> Scorer:
    """``rewardkit.load`` with its errors (unknown name, bad option, missing extra) turned into
    a ConfigError naming the option."""
    try:
        return registry.load(spec, **options)
    except (KeyError, TypeError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise ConfigError(f"{what}: {message}") from exc
