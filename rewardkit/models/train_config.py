"""Options of ``rewardkit train rm|prm``, one dataclass validated like the policy trainer's
(typed fields, numbers written as strings converted, ranges checked, unknown keys named)."""
from __future__ import annotations

from dataclasses import dataclass

from ..compose import ConfigError
from ..runtime.fields import SCHEDULES, JobConfig, check_types, choice

TASKS = ("rm", "prm")
OBJECTIVES = ("bradley_terry", "likelihood")
ENSEMBLE_FORMS = ("models", "heads")
PRM_LAYOUTS = ("separator", "step_token")


@dataclass
class RewardTrainConfig(JobConfig):
    """Options of reward-model training; each field cites the method it comes from."""

    DOCS = "docs/learned.md"

    task: str = "rm"
    """``rm``: outcome reward model from preference pairs, Bradley–Terry loss (Bradley & Terry
    1952; Ouyang et al. 2022). ``prm``: process reward model from stepwise labels, per-step
    cross-entropy (Lightman et al. 2023; TRL's PRMTrainer)."""
    objective: str = "bradley_terry"
    """rm: ``bradley_terry`` (a classification head, the pairwise loss; TRL's RewardTrainer)
    or ``likelihood``: the model stays a causal LM and learns to write the *chosen*
    completions (cross-entropy on the completion's tokens and EOS, never the prompt); the saved
    model is read by ``implicit_reward``, which ranks a completion by how likely the model
    finds it. On checkable tasks a model of right answers checks every token, where a
    classifier learns from one bit per pair (docs/learned.md). The rejected side is used only
    for held-out accuracy."""
    model: str = ""
    """Base model (local folder or hub id); a fresh classification head is added unless it
    already has one of the right size (``objective: likelihood``: loaded as a causal LM)."""
    data: str = ""
    """``rm``: TRL preference rows (``prompt``, ``chosen``, ``rejected``; strings or chat
    messages; implicit prompt allowed; optional ``margin``). ``prm``: TRL stepwise rows
    (``prompt``, ``completions``: list of steps, ``labels``: list of bools)."""
    eval_data: str | None = None
    """Held-out rows in the same format; None holds out ``eval_fraction`` of ``data``."""
    eval_fraction: float = 0.05
    """Share of ``data`` held out for evaluation when ``eval_data`` is not given (0: none)."""
    replay_data: str | None = None
    """rm with ``objective: likelihood``: text the base already learned from, mixed into every
    batch so that training on narrow reward data does not overwrite what the base knew beyond
    it (rehearsal, Robins 1995; the pretraining mix of InstructGPT's PPO-ptx, Ouyang et al.
    2022). Rows with ``prompt`` and ``completion`` (TRL's prompt-completion format), or
    preference rows, whose ``chosen`` side is used. Learned like the chosen completions (loss on
    the completion only); never evaluated on."""
    replay_fraction: float = 0.5
    """With ``replay_data``: the share of each batch's rows drawn from it (rounded to whole
    rows; the rest are reward data)."""
    output_dir: str = "runs/rm"
    """Checkpoints, metrics.jsonl, plots and ``final/`` (loadable by ``reward_model`` /
    ``process_reward`` and ``from_pretrained``)."""

    steps: int = 200
    """Optimizer steps."""
    batch_size: int = 16
    """Pairs (rm) or solutions (prm) per optimizer step."""
    micro_batch_size: int | None = None
    """Pairs/solutions per forward pass (gradient accumulation); None = the whole batch."""
    max_length: int = 1024
    """Tokens per sequence; longer ones keep the end of the completion (rm) or their start
    (prm, TRL's rule)."""

    learning_rate: float = 1e-5
    """AdamW learning rate (Loshchilov & Hutter 2019)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm; None disables clipping."""
    warmup_steps: int = 0
    """Linear learning-rate warmup steps."""
    lr_schedule: str = "linear"
    """After warmup: ``constant``, ``linear`` decay to 0, or ``cosine``."""

    center_rewards_coefficient: float | None = None
    """rm: weight of ``mean((r_chosen + r_rejected)²)``, which pulls rewards towards mean zero
    (Eisenstein et al. 2023, "Helping or Herding?"; TRL's name). None disables it."""
    margin_field: str = "margin"
    """rm: column with a per-pair margin m in ``−log σ(r_c − r_r − m)`` (Llama 2, Touvron et
    al. 2023); rows without it use 0."""
    chat_template: bool = True
    """Format through the tokenizer's chat template when it has one (as ``reward_model``
    scores)."""
    plain_format: str = "{prompt}{completion}"
    """rm: the text without a chat template (then EOS), as TRL's RewardTrainer builds it."""

    layout: str = "separator"
    """prm: ``separator`` (TRL PRMTrainer: a label on the last token of ``step_separator``
    after each step) or ``step_token`` (Qwen2.5-Math-PRM: a label at ``step_token``)."""
    step_separator: str = "\n"
    """prm, ``separator`` layout: text appended after each step (TRL's default ``"\\n"``).
    rm with ``objective: likelihood``: recorded with the model as the separator
    ``implicit_reward`` splits a completion's steps at."""
    step_token: str = "<extra_0>"
    """prm, ``step_token`` layout: the token after each step; added to the tokenizer (and the
    embedding resized) when missing."""
    train_on_last_step_only: bool = False
    """prm: only the last step's label trains (TRL's option of the same name)."""
    threshold: float = 0.5
    """prm evaluation: a step scoring below it is predicted wrong (ProcessBench)."""

    lora: bool = False
    """Train a LoRA adapter (Hu et al. 2022) plus the new head, instead of every weight."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling α."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target_modules: list[str] | str = "all-linear"
    """Modules that get adapters (peft's ``target_modules``)."""
    device: str = "auto"
    """``auto`` (CUDA if available), ``cpu``, ``cuda``, ``cuda:1``."""
    dtype: str = "auto"
    """``auto`` (bf16 on CUDA, fp32 on CPU), ``float32``, ``bfloat16``, ``float16``."""
    seed: int = 0
    """Seeds the head's initialisation, the data order and the held-out split."""

    ensemble: int = 1
    """rm: train K reward models that differ, for the ``ensemble`` reward (deep ensembles,
    Lakshminarayanan et al. 2017; reward-model ensembles against over-optimisation, Coste et al.
    2023, "Reward Model Ensembles Help Mitigate Overoptimization"). 1 = one ordinary model.
    Member *i* uses seed ``seed + i`` (head/adapter initialisation, data order); the held-out
    split is drawn once with ``seed`` and is the same for every member."""
    ensemble_form: str = "models"
    """With ``ensemble`` ≥ 2: ``models`` — K separate trainings in ``output_dir/member_i``
    (with ``lora``, K LoRA adapters on one frozen base); ``heads`` — one trunk with K linear
    heads trained jointly, one forward pass per pair for all K (the shared-trunk ensemble of
    Zhang et al. 2024, "Improving Reinforcement Learning from Human Feedback with Efficient
    Reward Model Ensemble")."""
    bootstrap: bool = True
    """With ``ensemble`` ≥ 2: member (or head) *i* trains on its own bootstrap resample of the
    training pairs — n pairs drawn with replacement, seeded from ``seed + i`` (bagging, as
    Lakshminarayanan et al. 2017 and Coste et al. 2023 discuss); with ``heads`` each head
    weights each pair by its draw count. False: the same pairs, different seeds only."""
    members_by_subset: bool = False
    """With ``ensemble`` ≥ 2: member (or head) *i* trains only on the pairs whose ``subset``
    is dealt to it — the distinct ``subset`` values of the training pairs, sorted, dealt
    round-robin (value *j* to member *j* mod K) — instead of a bootstrap resample. Label each
    pair with the kind of wrong answer its rejected side is (the model that wrote it, the
    error type): members taught different wrong answers err in different places, so they
    disagree where a policy exploits one of them, which members trained on resamples of the
    same pairs do not (docs/overoptimisation.md). Needs at least K distinct subsets."""

    eval_every: int = 50
    """Evaluate on the held-out rows every N steps (and at the end); 0 only at the end."""
    eval_batch_tokens: int = 16384
    """Token budget per forward pass at evaluation."""
    save_every: int = 0
    """Save a resumable checkpoint every N steps; 0 only at the end (and on Ctrl-C)."""
    log_every: int = 1
    """Write metrics every N steps."""
    tensorboard: bool = True
    """Also log to TensorBoard when it is installed."""
    plots: bool = True
    """Write PNG curves (loss, held-out accuracy) at the end."""
    progress: bool = True
    """Show a progress bar."""

    def validate(self) -> "RewardTrainConfig":
        """Check every option; raise :class:`ConfigError` saying what to change."""
        check_types(self)
        choice("task", self.task, TASKS)
        choice("objective", self.objective, OBJECTIVES)
        if self.objective == "likelihood" and self.task != "rm":
            raise ConfigError("objective: likelihood trains a causal LM on the chosen side of "
                              "preference pairs (task rm); `implicit_reward` reads per-step "
                              "scores from that same model, so there is no separate prm "
                              "training for it")
        if self.objective == "likelihood" and self.ensemble > 1:
            raise ConfigError("objective: likelihood trains one language model; for several, "
                              "train runs with different seeds and list them as members of "
                              "the `ensemble` reward (reward: implicit_reward)")
        if self.objective == "likelihood" and self.center_rewards_coefficient:
            raise ConfigError("center_rewards_coefficient belongs to the bradley_terry "
                              "objective; drop it with objective: likelihood")
        if self.replay_data:
            if self.objective != "likelihood":
                raise ConfigError("replay_data is learned as language-model text, which only "
                                  "objective: likelihood trains on; drop it, or set objective: "
                                  "likelihood")
            replayed = self.replay_rows()
            if not 0 < replayed < self.batch_size:
                raise ConfigError(f"replay_fraction {self.replay_fraction} of batch_size "
                                  f"{self.batch_size} gives {replayed} replayed rows a batch; "
                                  "pick a share that leaves at least one row of each kind")
        choice("layout", self.layout, PRM_LAYOUTS)
        choice("lr_schedule", self.lr_schedule, SCHEDULES)
        choice("ensemble_form", self.ensemble_form, ENSEMBLE_FORMS)
        if self.ensemble < 1:
            raise ConfigError(f"ensemble must be at least 1 (1 = one model, K >= 2 = K "
                              f"members), got {self.ensemble}")
        if self.members_by_subset and self.ensemble < 2:
            raise ConfigError("members_by_subset deals the pairs' subsets out to ensemble "
                              "members; set ensemble to 2 or more, or drop members_by_subset")
        if self.ensemble > 1 and self.task != "rm":
            raise ConfigError(f"ensemble={self.ensemble} trains reward-model (task rm) "
                              f"ensembles; task {self.task} has none: set ensemble: 1, or "
                              "train K process reward models with different seeds")
        if not self.model:
            raise ConfigError("no model: pass --model PATH_OR_ID (a base model or a classifier)")
        if not self.data:
            raise ConfigError("no training data: pass --data FILE")
        for name in ("steps", "batch_size", "max_length", "log_every", "lora_r", "lora_alpha",
                     "eval_batch_tokens", "micro_batch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        for name in ("eval_every", "save_every", "warmup_steps", "weight_decay"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0 disables it), got "
                                  f"{getattr(self, name)}")
        micro = self.micro_batch_size or self.batch_size
        if micro > self.batch_size or self.batch_size % micro:
            raise ConfigError(f"micro_batch_size ({micro}) must divide batch_size "
                              f"({self.batch_size})")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.eval_fraction < 1:
            raise ConfigError(f"eval_fraction must be in [0, 1), got {self.eval_fraction}")
        if not 0 < self.threshold < 1:
            raise ConfigError(f"threshold must be in (0, 1), got {self.threshold}")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ConfigError("max_grad_norm must be > 0, or null to disable clipping")
        if self.center_rewards_coefficient is not None and self.center_rewards_coefficient < 0:
            raise ConfigError("center_rewards_coefficient must be >= 0 (or null)")
        if "{completion}" not in self.plain_format:
            raise ConfigError("plain_format must contain {completion} (and usually {prompt})")
        return self

    def replay_rows(self) -> int:
        """Rows of each batch drawn from ``replay_data`` (0 without it)."""
        return round(self.batch_size * self.replay_fraction) if self.replay_data else 0
