"""rewardkit rewards as OpenRLHF's custom reward function, in process or forwarded to a server.

OpenRLHF (0.10 and later) takes a reward endpoint with ``--reward.remote_url``: an HTTP URL
(it posts ``{"query", "prompts", "labels"}`` and reads ``{"rewards", "scores", "extra_logs"}``;
``rewardkit serve`` answers that at ``/get_reward``) or the path of a ``.py`` file, which it
imports by path and whose ``reward_func(queries, prompts, labels)`` it calls, one sample at a
time, from a thread. This file is such a module::

    --reward.remote_url $(python -c "import rewardkit.integrations.openrlhf as m; print(m.__file__)")
    --data.label_key answer          # the dataset column that becomes `labels` (the reference)

(older releases spelled these ``--remote_rm_url`` and ``--label_key``). OpenRLHF passes no
arguments to the module, so it is configured by environment variables, read once per process:

- ``REWARDKIT_OPENRLHF_URL``: a ``rewardkit serve`` URL; samples are forwarded to it (its
  dynamic batching coalesces the one-sample calls of every rollout worker). Optional
  ``REWARDKIT_TOKEN`` for a server that requires one. An unreachable server is retried with
  backoff for ``REWARDKIT_OPENRLHF_RETRY_FOR`` seconds (default 120), then
  :class:`~rewardkit.integrations.remote.RemoteRewardError` is raised: the run stops rather
  than train on rewards that were never computed.
- ``REWARDKIT_OPENRLHF_REWARD``: the reward name (on the server: a served name; in process: a
  registered name; default ``math``), or ``REWARDKIT_OPENRLHF_CONFIG``: a reward config file
  scored in process.

OpenRLHF's query is the decoded prompt + response *with special tokens kept*
(``skip_special_tokens=False``): ``"<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n
Paris<|im_end|>"``. :func:`response_from_query` removes the prompt and the chat template's
end-of-turn and padding tokens before scoring; without it ``Paris<|im_end|>`` would not equal
``Paris``. It reads each query in time linear in its length (a degenerate rollout cut at
``max_new_tokens`` may be a megabyte of whitespace). A label holding a JSON object (tests for
``code``) is decoded to a dict; one that cannot be decoded as one (nested too deep for the
parser) is that sample's error Score.

Imports are absolute on purpose: OpenRLHF loads this file by its path as a stand-alone module.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Sequence

from rewardkit.registry import load
from rewardkit.scorer import Scorer
from rewardkit.text import strip_end_tokens
from rewardkit.types import Sample, Score

URL_ENV = "REWARDKIT_OPENRLHF_URL"
REWARD_ENV = "REWARDKIT_OPENRLHF_REWARD"
CONFIG_ENV = "REWARDKIT_OPENRLHF_CONFIG"
RETRY_ENV = "REWARDKIT_OPENRLHF_RETRY_FOR"
TOKEN_ENV = "REWARDKIT_TOKEN"
ERROR_LOG_KEY = "reward_error"
"""``extra_logs`` key whose per-sample value is 1.0 for a sample that could not be scored; its
mean in OpenRLHF's logs is the error rate."""

ASSISTANT_HEADERS = (
    "<|im_start|>assistant\n",                                  # ChatML (Qwen, many others)
    "<|start_header_id|>assistant<|end_header_id|>\n\n",        # Llama 3
    "<|start_header_id|>assistant<|end_header_id|>",
    "<|assistant|>\n",                                          # Phi-3, Zephyr
    "<start_of_turn>model\n",                                   # Gemma
    "<｜Assistant｜>",                                          # DeepSeek-R1
    "[/INST]",                                                  # Llama 2, Mistral
)
"""Where the response starts, for a query whose decoded prompt differs from ``prompt``."""

def response_from_query(query: str, prompt: str | None = None) -> str:
    """The model's response inside an OpenRLHF query (prompt + response, special tokens kept).

    The prompt is cut off when the query starts with it (the usual case), else at the last
    assistant header of a known chat template; then trailing special tokens are dropped
    (:func:`rewardkit.text.strip_end_tokens`, which walks back from the end: linear time).
    """
    text = query
    if prompt and text.startswith(prompt):
        text = text[len(prompt):]
    else:
        cut = max(((text.rfind(h), h) for h in ASSISTANT_HEADERS), key=lambda t: t[0])
        if cut[0] >= 0:
            text = text[cut[0] + len(cut[1]):]
        elif prompt and prompt.strip() and prompt.strip() in text:
            text = text[text.index(prompt.strip()) + len(prompt.strip()):]
    return strip_end_tokens(text)


class LabelError(ValueError):
    """A label that looks like a JSON object but cannot be decoded as one."""


def label_reference(label: Any) -> Any:
    """A label as the reference: a string holding a JSON object (``{"test": ...}``) is decoded,
    anything else is kept as is. JSON nested past the parser's recursion limit raises
    :class:`LabelError` (the sample's error, not the batch's)."""
    if isinstance(label, str) and label.startswith("{") and label.endswith("}"):
        try:
            decoded = json.loads(label)
        except RecursionError:
            raise LabelError("the label holds JSON nested too deep to decode; flatten the "
                             "label (tests, boxes, gold answer) of this row") from None
        except ValueError:
            return label
        if isinstance(decoded, dict):
            return decoded
    return label


def samples_from_openrlhf(queries: Sequence[str], prompts: Sequence[str] | None,
                          labels: Sequence[Any] | None,
                          error_value: float = 0.0) -> list[Sample | Score]:
    """Samples from OpenRLHF's three aligned lists; a row whose label cannot be read is its
    error Score (``error_kind="bad_reference"``, value ``error_value``) in its place."""
    n = len(queries)
    if prompts is not None and len(prompts) != n or labels is not None and len(labels) != n:
        raise ValueError(f"OpenRLHF passed {n} queries, {len(prompts or [])} prompts and "
                         f"{len(labels or [])} labels; they must align")
    out: list[Sample | Score] = []
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts is not None else None
        try:
            reference = label_reference(labels[i]) if labels is not None else None
        except LabelError as exc:
            out.append(Score.from_error(exc, error_value, kind="bad_reference"))
            continue
        out.append(Sample(prompt=prompt or "", completion=response_from_query(query, prompt),
                          reference=reference))
    return out


def score_entries(scorer: Scorer, entries: Sequence[Sample | Score]) -> list[Score]:
    """Scores of :func:`samples_from_openrlhf`'s entries: the Samples scored in one call, the
    error Scores kept in their places."""
    scored = iter(scorer.score([e for e in entries if isinstance(e, Sample)]))
    return [e if isinstance(e, Score) else next(scored) for e in entries]


def openrlhf_result(scores: Sequence[Score]) -> dict[str, Any]:
    """OpenRLHF's reward result as plain lists: ``rewards`` (advantages), ``scores`` (dynamic
    filtering), ``extra_logs`` (each component, and ``reward_error`` 1.0/0.0 per sample)."""
    rewards = [float(s.value) for s in scores]
    logs: dict[str, list[float]] = {}
    names = list(dict.fromkeys(k for s in scores for k in s.components))
    for name in names:
        logs[name] = [float(s.components.get(name, s.value)) for s in scores]
    logs[ERROR_LOG_KEY] = [0.0 if s.ok else 1.0 for s in scores]
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}


_scorer: Scorer | None = None
_lock = threading.Lock()


def scorer_from_env() -> Scorer:
    """The Scorer the environment variables choose (see the module docstring), built once."""
    global _scorer
    with _lock:
        if _scorer is None:
            url = os.environ.get(URL_ENV)
            if url:
                _scorer = load("remote", url=url, reward=os.environ.get(REWARD_ENV) or None,
                               token=os.environ.get(TOKEN_ENV) or None,
                               retry_for=float(os.environ.get(RETRY_ENV) or 120.0))
            elif os.environ.get(CONFIG_ENV):
                _scorer = load(os.environ[CONFIG_ENV])
            else:
                _scorer = load(os.environ.get(REWARD_ENV) or "math")
        return _scorer


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any],
                **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's custom reward function: score each query's response against its label.

    Returns ``{"rewards", "scores", "extra_logs"}`` as float tensors (lists if torch is
    missing), one value per query; a sample that could not be scored gets the reward's error
    value and counts in ``extra_logs["reward_error"]``. A server that stays unreachable raises
    :class:`~rewardkit.integrations.remote.RemoteRewardError`.
    """
    scorer = scorer_from_env()
    result = openrlhf_result(score_entries(scorer, samples_from_openrlhf(
        list(queries), list(prompts), list(labels), scorer.error_value)))
    try:
        import torch
    except ImportError:
        return result
    return {"rewards": torch.tensor(result["rewards"], dtype=torch.float32),
            "scores": torch.tensor(result["scores"], dtype=torch.float32),
            "extra_logs": {k: torch.tensor(v, dtype=torch.float32)
                           for k, v in result["extra_logs"].items()}}
