"""The GPU generation path: a vLLM engine colocated with the trainer on the same device
(``generation_backend: vllm``).

vLLM (Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving with
PagedAttention") samples the G completions of a prompt with paged attention and shares the
prompt's KV blocks between them (prefix caching), where HF ``generate`` pads every row to the
longest and recomputes each prompt G times. After every optimizer update the policy's weights
are copied into the engine (:meth:`VLLMGenerator.sync_weights`), so each step samples from the
current policy, as the on-policy loss assumes.

vLLM is imported only when this backend is chosen: it needs CUDA and a torch build matching
it, so it is not a dependency of the CPU install.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Sequence

import torch

from ..compose import ConfigError
from .config import TrainConfig
from .generation import GenerationOptions, Rollout, _eos_ids, finish_rollout, left_pad
from .policy import Policy, unwrap


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ConfigError(
            "generation_backend 'vllm' needs vLLM, which is not installed: pip install vllm (a "
            "CUDA machine; it pins its own torch build), or use generation_backend: hf"
        ) from exc
    return vllm


def _default_engine(cfg: TrainConfig, policy: Policy) -> Any:
    """A vLLM ``LLM`` on the policy's own device and weights."""
    vllm = _import_vllm()
    if policy.device.type != "cuda":
        raise ConfigError("generation_backend 'vllm' runs on CUDA only; on CPU use "
                          "generation_backend: hf")
    dtype = str(policy.compute_dtype).removeprefix("torch.")
    extra = {}
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # one engine per training process
        extra["distributed_executor_backend"] = "external_launcher"
    return vllm.LLM(model=cfg.model, tokenizer=cfg.model, dtype=dtype, seed=cfg.seed,
                    gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                    enable_prefix_caching=True, **extra)


class VLLMGenerator:
    """Samples rollouts with a colocated vLLM engine and keeps its weights equal to the
    policy's.

    ``engine`` builds the engine (default: :func:`_default_engine`); any object with vLLM's
    ``generate(prompts, sampling_params)`` and the ``load_weights`` / ``reset_prefix_cache``
    hooks works, which is how the CPU tests drive it."""

    def __init__(self, cfg: TrainConfig, policy: Policy,
                 engine: Callable[[TrainConfig, Policy], Any] = _default_engine) -> None:
        self.cfg = cfg
        self.policy = policy
        self.llm = engine(cfg, policy)

    def sampling_params(self, group_size: int, options: GenerationOptions) -> Any:
        vllm = _import_vllm()
        return vllm.SamplingParams(
            n=group_size, temperature=options.temperature, top_p=options.top_p,
            top_k=options.top_k or -1, max_tokens=options.max_new_tokens,
            stop=list(options.stop) or None, include_stop_str_in_output=True,
            stop_token_ids=_eos_ids(unwrap(self.policy.model), self.policy.tokenizer))

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], group_size: int,
                 options: GenerationOptions, sampling_params: Any = None) -> Rollout:
        """``group_size`` completions per prompt, grouped as HF ``generate`` groups them."""
        tokenizer = self.policy.tokenizer
        device = self.policy.device
        params = sampling_params or self.sampling_params(group_size, options)
        outputs = self.llm.generate([{"prompt_token_ids": list(ids)} for ids in prompt_ids],
                                    sampling_params=params, use_tqdm=False)
        completions = [list(sample.token_ids) for out in outputs for sample in out.outputs]
        if len(completions) != len(prompt_ids) * group_size:
            raise RuntimeError(f"vLLM returned {len(completions)} completions for "
                               f"{len(prompt_ids)} prompts × {group_size}")
        ids, mask = left_pad(prompt_ids, tokenizer.pad_token_id, device)
        ids = ids.repeat_interleave(group_size, dim=0)
        mask = mask.repeat_interleave(group_size, dim=0)
        width = max(1, max(len(c) for c in completions))
        completion = torch.full((len(completions), width), tokenizer.pad_token_id,
                                dtype=torch.long)
        for i, tokens in enumerate(completions):
            completion[i, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        eos = _eos_ids(unwrap(self.policy.model), tokenizer)
        return finish_rollout(ids, mask, completion.to(device), tokenizer, eos, options)

    def sync_weights(self, model: Any) -> None:
        """Copy the policy's current weights into the engine, then drop its prefix cache (the
        cached KV blocks were computed with the old weights)."""
        loader = self._weight_loader()
        for name, tensor in named_full_weights(model, self.policy.uses_lora):
            loader([(name, tensor)])
        self.llm.reset_prefix_cache()

    def _weight_loader(self) -> Callable[[list[tuple[str, torch.Tensor]]], Any]:
        """The engine model's ``load_weights`` (vLLM's in-process engine layout)."""
        if hasattr(self.llm, "load_weights"):
            return self.llm.load_weights
        executor = self.llm.llm_engine.model_executor
        return executor.driver_worker.model_runner.model.load_weights


def named_full_weights(model: Any, uses_lora: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every weight under the names of the base checkpoint: FSDP shards
    gathered to full tensors, a LoRA adapter merged into the base weights for the copy (and
    unmerged after), peft's name prefixes removed."""
    if uses_lora:
        model.merge_adapter()
    try:
        for name, param in model.state_dict().items():
            if uses_lora:
                if "lora_" in name or "modules_to_save" in name:
                    continue
                name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            if hasattr(param, "full_tensor"):  # an FSDP2 DTensor shard
                param = param.full_tensor()
            yield name, param.detach()
    finally:
        if uses_lora:
            model.unmerge_adapter()
