"""Every place rewardkit generates text samples or decodes with the options it passes, not with
the sampling settings a model's ``generation_config.json`` carries (a chat model's usually
has a repetition penalty, top-k/top-p and a temperature): the trainer's rollouts, its greedy
evaluation, a learned reward's own solutions and a local judge. Left in, a repetition penalty
or min-p would make the rollouts come from another distribution than the log-probabilities
the trainer computes. Checked by the logits processors ``generate`` builds for each call."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rewardkit.testing import make_tiny_causal_lm  # noqa: E402

SAMPLING_DEFAULTS = dict(do_sample=True, temperature=0.3, top_k=3, top_p=0.5, min_p=0.2,
                         typical_p=0.5, repetition_penalty=1.3, no_repeat_ngram_size=1)
"""What a model's generation config may hold; none of it is rewardkit's to apply."""


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_tiny_causal_lm(tmp_path_factory.mktemp("lm"), hidden_size=32, num_layers=1)


def with_sampling_defaults(model):
    """``model`` with a config full of sampling settings, and the processor classes each of
    its ``generate`` calls builds."""
    for key, value in SAMPLING_DEFAULTS.items():
        setattr(model.generation_config, key, value)
    built: list[list[str]] = []
    target = model.get_base_model() if hasattr(model, "get_base_model") else model
    original = target._get_logits_processor

    def spy(*args, **kwargs):
        processors = original(*args, **kwargs)
        built.append([type(p).__name__ for p in processors])
        return processors

    target._get_logits_processor = spy
    return model, built


def load(base):
    model = transformers.AutoModelForCausalLM.from_pretrained(base)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "left"
    return model, tokenizer


@pytest.mark.parametrize("lora", [False, True])
def test_rollouts_sample_the_plain_softmax_at_the_trainers_temperature(base, lora):
    from rewardkit.trainer.generation import GenerationOptions, generate

    model, tokenizer = load(base)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    model, built = with_sampling_defaults(model)
    ids = tokenizer("12+7=").input_ids
    generate(model, tokenizer, [ids], 2, GenerationOptions(max_new_tokens=3),
             torch.device("cpu"))
    assert built == [[]]
    generate(model, tokenizer, [ids], 2, GenerationOptions(max_new_tokens=3, temperature=0.5,
                                                           top_k=4), torch.device("cpu"))
    assert built[1] == ["TemperatureLogitsWarper", "TopKLogitsWarper"]
    config = model.get_base_model().generation_config if lora else model.generation_config
    assert config.repetition_penalty == 1.3  # the model's own config is given back


def test_greedy_evaluation_and_a_rewards_own_solutions_decode_plainly(base):
    from rewardkit.models.own_solutions import generate as own_solutions
    from rewardkit.trainer.data import Prompt
    from rewardkit.trainer.evaluation import greedy_texts
    from rewardkit.trainer.generation import GenerationOptions

    model, tokenizer = load(base)
    model, built = with_sampling_defaults(model)
    prompt = Prompt("12+7=", "19", tokenizer("12+7=").input_ids)
    greedy_texts(model, tokenizer, [prompt], GenerationOptions(max_new_tokens=3),
                 torch.device("cpu"))
    own_solutions(model, tokenizer, ["12+7="], True, 1, 3, 4096, None, "cpu")
    assert built == [[], []]


def test_a_local_judge_decodes_plainly(base):
    from rewardkit.verifiers.rubric.judge import LocalJudge

    judge = LocalJudge(str(base), max_new_tokens=3)
    judge.model, built = with_sampling_defaults(judge.model)
    judge._ask_many(["Is 12+7=19 right? Answer yes or no."])
    assert built == [[]]
