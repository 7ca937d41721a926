"""``implicit_reward``: a causal language model's own judgement of a completion, as a Scorer.

A language model that assigns a completion high probability "rewards" it. With a reference
model this is the reward DPO optimises implicitly (Rafailov et al. 2023), read the way
RewardBench scores DPO-trained models (Lambert et al. 2024)::

    value = beta * (log pi(y | x) - log pi_ref(y | x))      # reference given
    value = beta * log pi(y | x)                             # reference-free

summed over the completion's tokens (``reduction="sum"``) or averaged per token (``"mean"``,
SimPO's length-normalised form, Meng et al. 2024). The prompt's tokens are context, never
scored. ``info`` carries both log-likelihoods, the token count and the least likely token.

**Per-step scores.** The completion is split into steps (``metadata["steps"]`` or
``step_sep``) and every step gets a score from the same forward pass, as the implicit process
reward of Yuan et al. (2024) does:

* ``sigmoid`` (the default with a reference): σ(β · Σ log-ratio over the step's tokens), above
  ½ when the model likes the step better than its reference does;
* ``relative`` (the default without one): exp of the step's worst token measured against the
  model's own best guess at that place, exp(min_t [log π(y_t) − max_v log π(v)]): 1 when every
  token of the step is the one the model would have written, small when one token falls far
  below it (a slipped digit). Uncertainty spread over many good continuations does not count
  against a step, only a token the model clearly did not expect;
* ``probability``: exp(Σ log π) over the step, the probability that the model writes exactly
  this step after what came before (long or open-ended steps score low however right they are).

A step's tokens are those inside its text; the separators between steps and the end of the text
(EOS, a template's end of turn) count towards ``value`` but belong to no step.
``rewardkit eval prm`` reads these like a process reward model's step probabilities (pick its
``--threshold`` on training rows: a ``relative`` step below e^-3 ≈ 0.05 is one whose worst token
is 20 times less likely than the model's best guess).

**Bare answers** (``verify="generate"``): a completion that is only a final answer is checked
against the model's own worked solutions, generated from the prompt (:mod:`.own_solutions`);
worked completions keep the reading above.

Why a Scorer of its own: ``reward_model`` reads one logit from a classification head; here the
reward is the model's log-likelihood of the tokens themselves, so every completion token is
read (a vocabulary-sized row of logits each), and a model that predicts the right answer well
is already a verifier: a slip in one digit is a token it did not expect.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..scorer import Scorer
from ..types import Sample, Score
from . import encoding, own_solutions
from .loading import (ModelLoadError, load_causal_lm, load_config, load_tokenizer, read_sidecar,
                      resolve_device_dtype)
from .pass_plan import check_max_padding, forward_passes, padding_policy
from .process_reward import split_steps

REDUCTIONS = ("sum", "mean")
STEP_SCORES = ("auto", "relative", "probability", "sigmoid")


@dataclass
class LikelihoodEncoding:
    """Token ids, the first completion token's position, and the step each completion token
    belongs to (``step_of[k]`` for token ``start + k``)."""

    ids: list[int]
    start: int
    step_of: list[int]
    num_steps: int

    def info(self) -> dict[str, Any]:
        return {"tokens": len(self.ids), "completion_tokens": len(self.ids) - self.start}


class ImplicitRewardScorer(Scorer):
    """Score completions by how likely a causal LM finds them (against a reference model, or
    reference-free).

    Args:
        model: a causal LM (``AutoModelForCausalLM``): local folder or hub id. A DPO-trained
            policy, or a model trained as a language model on right answers.
        reference: the reference model of the implicit reward (the model DPO started from);
            None (default) reads the reward reference-free. It must share ``model``'s
            tokenizer.
        beta: scale of the reward (DPO's β; default 1.0).
        reduction: ``sum`` (default: the log-likelihood of the whole completion) or ``mean``
            (per completion token).
        step_sep: how a completion's text is split into steps when its sample has no
            ``metadata["steps"]`` (default: what training recorded in ``rewardkit.json``, else
            blank lines). Given steps are joined with it into the text the model reads.
        step_scores: ``auto`` (``sigmoid`` with a reference, ``relative`` without),
            ``relative``, ``probability`` or ``sigmoid`` (see the module's docstring).
        max_length: token budget per sample (default: the tokenizer's ``model_max_length``,
            capped at 4096). A longer sample is an error in its own Score, not cut: a cut
            completion would be a different likelihood.
        batch_tokens: padded tokens per forward pass (default 4096: every token produces a
            vocabulary-sized row of logits, so this bounds memory, e.g. 4096 × 152k bf16 logits
            is 1.2 GB).
        max_batch_size, max_padding, device, dtype, chat_template, plain_format, pad_token,
        trust_remote_code, error_value: as for ``reward_model``.
        verify: ``likelihood`` (default: every completion read as above) or ``generate``: a
            bare final answer (a completion that is one match of ``answer_pattern``) is scored
            by the model's own worked solutions, ``beta`` · log Σ π(own steps, answer)
            (:mod:`.own_solutions`); worked completions are read as with ``likelihood``.
        num_solutions: own solutions per prompt for ``generate`` (default 1: greedy decoding;
            more: beam search, the probabilities summed).
        max_new_tokens: the longest own solution; one that does not end within it is left out.
        answer_pattern: a regular expression for a final answer (default: a number).
    """

    name = "implicit_reward"

    def __init__(self, model: str, reference: str | None = None, beta: float = 1.0,
                 reduction: str = "sum", step_sep: str | None = None,
                 step_scores: str = "auto", tokenizer: str | None = None,
                 max_length: int | None = None, batch_tokens: int = 4096,
                 max_batch_size: int | None = None, max_padding: float | str | None = "auto",
                 device: str = "auto", dtype: str = "auto", chat_template: bool = True,
                 plain_format: str | None = None, pad_token: str | None = None,
                 trust_remote_code: bool = False, error_value: float = 0.0,
                 name: str | None = None, verify: str = "likelihood", num_solutions: int = 1,
                 max_new_tokens: int = 256,
                 answer_pattern: str = own_solutions.ANSWER_PATTERN) -> None:
        if reduction not in REDUCTIONS:
            raise ModelLoadError(f"reduction must be one of {', '.join(REDUCTIONS)}, got "
                                 f"{reduction!r}")
        if step_scores not in STEP_SCORES:
            raise ModelLoadError(f"step_scores must be one of {', '.join(STEP_SCORES)}, got "
                                 f"{step_scores!r}")
        if not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta <= 0:
            raise ModelLoadError(f"beta must be a positive number, got {beta!r}")
        if batch_tokens < 1 or (max_length is not None and max_length < 2):
            raise ModelLoadError("batch_tokens must be >= 1 and max_length >= 2")
        check_max_padding(max_padding)
        self.answer_re = _check_verify(verify, num_solutions, max_new_tokens, answer_pattern,
                                       reference, reduction)
        self.verify, self.num_solutions = verify, num_solutions
        self.max_new_tokens = max_new_tokens
        if not isinstance(model, str) or not model:
            raise ModelLoadError("model must be a local folder or a hub id (model=PATH_OR_ID)")
        self.name = name or self.name
        self.model_name, self.reference_name = model, reference
        self.beta, self.reduction, self.error_value = float(beta), reduction, error_value
        self.sidecar = read_sidecar(model)
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        self.tokenizer = load_tokenizer(model, tokenizer, pad_token, trust_remote_code)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ModelLoadError(f"the tokenizer of {model!r} is not a fast tokenizer; "
                                 "`implicit_reward` needs its character offsets to tell prompt, "
                                 "completion and step tokens apart (load one with a "
                                 "tokenizer.json)")
        self.model = load_causal_lm(model, self.device, self.dtype, trust_remote_code,
                                    load_config(model, trust_remote_code))
        self.reference = None
        if reference is not None:
            self.reference = load_causal_lm(reference, self.device, self.dtype,
                                            trust_remote_code,
                                            load_config(reference, trust_remote_code))
            if self.reference.get_output_embeddings().weight.shape[0] < len(self.tokenizer):
                raise ModelLoadError(f"reference {reference!r} has a smaller vocabulary than "
                                     f"the tokenizer of {model!r}; the reference must share "
                                     "the model's tokenizer")
        self.max_length = max_length or min(int(self.tokenizer.model_max_length or 4096), 4096)
        self.batch_tokens, self.max_batch_size = batch_tokens, max_batch_size
        self.max_padding, self.pass_cost = padding_policy(max_padding, self.device)
        self.use_chat_template = chat_template
        self.plain_format = plain_format or self.sidecar.get("plain_format",
                                                             encoding.PLAIN_FORMAT)
        self.step_sep = step_sep or self.sidecar.get("separator") or "\n\n"
        self.step_scores = step_scores if step_scores != "auto" else (
            "sigmoid" if reference is not None else "relative")
        if verify == "generate":
            try:
                own_solutions.end_ids(self.model, self.tokenizer)
            except ValueError as exc:
                raise ModelLoadError(f"verify: generate: {exc}") from exc

    # -- encoding ---------------------------------------------------------------------------------
    def steps_of(self, sample: Sample) -> list[str] | None:
        """The sample's given steps (``metadata["steps"]``), or None."""
        given = (sample.metadata or {}).get("steps")
        if given is None:
            return None
        if not isinstance(given, (list, tuple)) or not all(isinstance(s, str) for s in given):
            raise ValueError("metadata['steps'] must be a list of strings")
        steps = [s for s in given if s.strip()]
        if not steps:
            raise ValueError("metadata['steps'] holds no step to score (empty or blank)")
        return steps

    def encode(self, sample: Sample) -> LikelihoodEncoding:
        """Token ids of prompt + completion; which tokens are the completion's and which step
        each belongs to, from the fast tokenizer's character offsets."""
        steps = self.steps_of(sample)
        completion: Any = self.step_sep.join(steps) if steps is not None else sample.completion
        prefix, full = encoding.render(self.tokenizer, sample.prompt, completion,
                                       self.use_chat_template, self.plain_format)
        plain = not (self.use_chat_template and getattr(self.tokenizer, "chat_template", None))
        ids, offsets, first = encoding.encode_with_completion_start(self.tokenizer, prefix, full,
                                                                    plain)
        if len(ids) > self.max_length:
            raise ValueError(f"the sample is {len(ids)} tokens, over max_length="
                             f"{self.max_length}; a cut completion would be another "
                             "likelihood, so raise max_length")
        body = encoding.as_text(completion)
        # Character spans of the steps inside `full`: a token belongs to the step whose text it
        # starts in; separators and the end of the text belong to none.
        pieces = steps if steps is not None else (split_steps(body, self.step_sep) or [body])
        begin = len(prefix)
        spans, cursor = [], 0
        for piece in pieces:
            at = body.find(piece, cursor)
            at = cursor if at < 0 else at
            spans.append((begin + at, begin + at + len(piece)))
            cursor = at + len(piece)
        if first >= len(ids):
            raise ValueError("the completion has no tokens to score (empty, or the whole text "
                             "is one token)")
        step_of = [next((j for j, (a, b) in enumerate(spans) if a <= offsets[k][0] < b), -1)
                   for k in range(first, len(ids))]
        return LikelihoodEncoding(ids, first, step_of, len(pieces))

    # -- the forward pass -------------------------------------------------------------------------
    def token_logprobs(self, net: Any, rows: Sequence[Sequence[int]]
                       ) -> list[tuple[list[float], list[float]]]:
        """Per row, the log-probability of every token after the first given those before it,
        and the largest log-probability any token had at that place (float32, computed one row
        at a time so the softmax over the vocabulary stays one row's size)."""
        import torch

        batch = encoding.pad(rows, self.tokenizer.pad_token_id, self.device)
        with torch.inference_mode():
            logits = net(**batch, use_cache=False).logits
            out = []
            for i, row in enumerate(rows):
                n = len(row)
                lp = torch.log_softmax(logits[i, :n - 1].float(), dim=-1)
                out.append((lp.gather(-1, batch["input_ids"][i, 1:n, None])[:, 0].cpu().tolist(),
                            lp.max(dim=-1).values.cpu().tolist()))
        return out

    def logprobs(self, encoded: Sequence[LikelihoodEncoding]
                 ) -> tuple[list[tuple[list[float], list[float]]], list[list[float]] | None]:
        """Completion-token log-probabilities under the model (with the best log-probability
        at each place) and under the reference, in token-budget batches; identical rows are
        run once."""
        first, owner = encoding.unique_rows([e.ids for e in encoded])
        lengths = [len(encoded[i].ids) for i in first]
        nets = [self.model] + ([self.reference] if self.reference is not None else [])
        got: list[list[Any]] = [[None for _ in first] for _ in nets]
        for idx in forward_passes(lengths, self.batch_tokens, self.max_batch_size,
                                  self.max_padding, self.pass_cost):
            rows = [encoded[first[i]].ids for i in idx]
            for which, net in enumerate(nets):
                for i, (lp, best) in zip(idx, self.token_logprobs(net, rows)):
                    start = encoded[first[i]].start
                    got[which][i] = (lp[start - 1:], best[start - 1:])
        model_lp = [got[0][owner[i]] for i in range(len(encoded))]
        ref_lp = [got[1][owner[i]][0] for i in range(len(encoded))] if len(nets) > 1 else None
        return model_lp, ref_lp

    # -- Scorer -----------------------------------------------------------------------------------
    def score_batch(self, samples: list[Sample]) -> list[Score]:
        start = time.perf_counter()
        scores: list[Score | None] = [None] * len(samples)
        encoded: list[LikelihoodEncoding] = []
        where: list[int] = []
        bare = [i for i, s in enumerate(samples) if self.is_bare(s)]
        bare_set = set(bare)
        for i, s in enumerate(samples):
            if i in bare_set:
                continue
            try:
                encoded.append(self.encode(s))
                where.append(i)
            except Exception as exc:  # noqa: BLE001 - a bad sample gets its own error Score
                scores[i] = Score.from_error(exc, self.error_value, kind="encode")
        candidates = self.encode_bare(samples, bare, scores, encoded, where)
        model_lp, ref_lp = self.logprobs(encoded) if encoded else ([], None)
        elapsed = (time.perf_counter() - start) / max(1, len(samples))
        totals: dict[int, list[float]] = {i: [] for i in candidates}
        for j, (i, e) in enumerate(zip(where, encoded)):
            if i in candidates:
                totals[i].append(math.fsum(model_lp[j][0]))
            else:
                scores[i] = self.score_one(e, model_lp[j], ref_lp[j] if ref_lp else None,
                                           elapsed)
        for i, (got, texts) in candidates.items():
            scores[i] = self.score_bare(samples[i], got, texts, totals[i], elapsed)
        return [s for s in scores if s is not None]

    # -- bare answers (verify="generate") ---------------------------------------------------------
    def encode_bare(self, samples: list[Sample], bare: list[int], scores: list[Score | None],
                    encoded: list[LikelihoodEncoding], where: list[int]
                    ) -> dict[int, tuple[own_solutions.OwnSolutions, list[str]]]:
        """Generate the own solutions of the bare samples and append one row per solution with
        the sample's answer put in to ``encoded`` (its sample's index to ``where``); a sample
        whose solutions fail gets its error Score. Per scored sample: its own solutions and the
        texts read."""
        candidates: dict[int, tuple[own_solutions.OwnSolutions, list[str]]] = {}
        try:
            owned = self.solutions_for([samples[i] for i in bare])
        except Exception as exc:  # noqa: BLE001 - generation failed: those samples say so
            owned = []
            for i in bare:
                scores[i] = Score.from_error(f"the model's own solutions could not be generated: "
                                             f"{exc}", self.error_value, kind="generate")
        for i, got in zip(bare, owned):
            try:
                texts = self.with_answer(samples[i], got)
                rows = [self.encode(Sample(samples[i].prompt, t)) for t in texts]
            except Exception as exc:  # noqa: BLE001 - a bad sample gets its own error Score
                scores[i] = Score.from_error(exc, self.error_value, kind="generate")
                continue
            candidates[i] = (got, texts)
            encoded += rows
            where += [i] * len(rows)
        return candidates

    def is_bare(self, sample: Sample) -> bool:
        """A completion that is only a final answer, read by the model's own solutions."""
        return (self.verify == "generate" and not (sample.metadata or {}).get("steps")
                and own_solutions.is_bare_answer(sample.completion, self.answer_re))

    def solutions_for(self, samples: Sequence[Sample]) -> list[own_solutions.OwnSolutions]:
        """The model's own solutions of each sample's prompt, every distinct prompt generated
        once."""
        if not samples:
            return []
        plain = not (self.use_chat_template and getattr(self.tokenizer, "chat_template", None))
        prefixes = [encoding.render(self.tokenizer, s.prompt, "", self.use_chat_template,
                                    self.plain_format)[0] for s in samples]
        distinct = list(dict.fromkeys(prefixes))
        got = own_solutions.generate(self.model, self.tokenizer, distinct, plain,
                                     self.num_solutions, self.max_new_tokens, self.batch_tokens,
                                     self.max_batch_size, self.device)
        by_prefix = dict(zip(distinct, got))
        return [by_prefix[p] for p in prefixes]

    def with_answer(self, sample: Sample, got: own_solutions.OwnSolutions) -> list[str]:
        """The own solutions with the sample's answer in place of theirs; raises, saying why,
        when there is none to use."""
        if not got.texts:
            raise ValueError(f"none of the model's {self.num_solutions} own solutions ended "
                             f"within max_new_tokens={self.max_new_tokens}; raise "
                             "max_new_tokens")
        answer = sample.completion.strip()
        texts = [t for t in (own_solutions.with_answer(s, answer, self.answer_re)
                             for s in got.texts) if t is not None]
        if not texts:
            raise ValueError(f"the model's own solutions hold no final answer matching "
                             f"answer_pattern {self.answer_re.pattern!r} (best: "
                             f"{got.texts[0][:200]!r})")
        return texts

    def score_bare(self, sample: Sample, got: own_solutions.OwnSolutions, texts: list[str],
                   totals: list[float], seconds: float) -> Score:
        """``beta`` · log Σ over the own solutions of π(their steps, the sample's answer)."""
        if not all(math.isfinite(t) for t in totals):
            return Score.from_error("the model returned a non-finite log-probability",
                                    self.error_value, kind="nan")
        top = max(totals)
        marginal = top + math.log(math.fsum(math.exp(t - top) for t in totals))
        answer = sample.completion.strip()
        own = [a for a in (_final(t, self.answer_re) for t in got.texts) if a is not None]
        info: dict[str, Any] = {
            "verify": "generate", "logprob": marginal, "generated": got.texts[0],
            "own_answers": own, "agrees": bool(own) and own[0] == answer,
            "solutions_used": len(texts), "solutions_unfinished": got.unfinished,
            "seconds": seconds, "num_steps": 1}
        return Score(self.beta * marginal, steps=[math.exp(marginal)], info=info)

    def score_one(self, e: LikelihoodEncoding, got: tuple[list[float], list[float]],
                  ref: list[float] | None, seconds: float) -> Score:
        lp, best = got
        total = math.fsum(lp)
        ref_total = math.fsum(ref) if ref is not None else 0.0
        if not (math.isfinite(total) and math.isfinite(ref_total)):
            return Score.from_error("the model returned a non-finite log-probability",
                                    self.error_value, kind="nan")
        ratio = total - ref_total
        value = self.beta * (ratio / len(lp) if self.reduction == "mean" else ratio)
        per_step = [0.0] * e.num_steps
        worst = [0.0] * e.num_steps
        for k, step in enumerate(e.step_of):
            if step >= 0:
                per_step[step] += lp[k] - (ref[k] if ref is not None else 0.0)
                worst[step] = min(worst[step], lp[k] - best[k])
        if self.step_scores == "sigmoid":
            steps = [_sigmoid(self.beta * v) for v in per_step]
        elif self.step_scores == "relative":
            steps = [math.exp(v) for v in worst]
        else:
            steps = [math.exp(min(0.0, self.beta * v if ref is not None else v))
                     for v in per_step]
        info: dict[str, Any] = {"logprob": total, **e.info(), "seconds": seconds,
                                "min_token_logprob": min(lp), "num_steps": e.num_steps}
        if ref is not None:
            info["ref_logprob"] = ref_total
        return Score(value, steps=steps, info=info)

    def close(self) -> None:
        self.model = self.reference = None


def _final(text: str, pattern: re.Pattern[str]) -> str | None:
    """The last match of ``pattern`` in ``text`` (a solution's final answer), or None."""
    found = [m.group(0) for m in pattern.finditer(text)]
    return found[-1] if found else None


def _check_verify(verify: str, num_solutions: int, max_new_tokens: int, answer_pattern: str,
                  reference: str | None, reduction: str) -> re.Pattern[str]:
    """Validate the bare-answer options; the compiled ``answer_pattern``."""
    if verify not in own_solutions.VERIFY_MODES:
        raise ModelLoadError(f"verify must be one of {', '.join(own_solutions.VERIFY_MODES)}, "
                             f"got {verify!r}")
    if not isinstance(num_solutions, int) or num_solutions < 1:
        raise ModelLoadError(f"num_solutions must be a whole number >= 1, got {num_solutions!r}")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ModelLoadError(f"max_new_tokens must be a whole number >= 1, got "
                             f"{max_new_tokens!r}")
    try:
        pattern = re.compile(answer_pattern)
    except (re.error, TypeError) as exc:
        raise ModelLoadError(f"answer_pattern is not a regular expression: {exc}") from exc
    if pattern.fullmatch(""):
        raise ModelLoadError("answer_pattern matches the empty text, so every blank completion "
                             "would count as a bare answer; make it match an answer only")
    if verify == "generate" and reference is not None:
        raise ModelLoadError("verify: generate reads bare answers by the model's own solutions, "
                             "reference-free; drop reference= or use verify: likelihood")
    if verify == "generate" and reduction != "sum":
        raise ModelLoadError("verify: generate sums the probability of the model's solutions "
                             "that reach the answer (reduction: sum); a per-token mean of that "
                             "sum has no meaning: drop reduction=mean")
    return pattern


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
