"""LLM judges: an OpenAI-compatible chat endpoint (httpx) or a local Hugging Face causal LM;
prompts from templates, replies parsed to a score, a reply cache keyed by prompt, retries and a
concurrency limit."""
from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from rewardkit.extras import require
from rewardkit.runtime.decoding import plain_generation

DEFAULT_TEMPLATE = (
    "You are grading a response against one criterion.\n\n"
    "Question:\n{prompt}\n\nResponse:\n{completion}\n\n"
    "Reference answer (may be empty):\n{reference}\n\n"
    "Criterion: {criterion}\n\n"
    "Reply with one line 'Score: N', N an integer from 0 (not met) to 10 (fully met).")

IMPLICIT_TEMPLATE = (
    "You are grading a response against a rubric.\n\n"
    "Question:\n{prompt}\n\nResponse:\n{completion}\n\n"
    "Reference answer (may be empty):\n{reference}\n\n"
    "Rubric (criterion, weight):\n{criterion}\n\n"
    "Weigh every criterion and reply with one line 'Score: N', N an integer from 0 (fails the "
    "rubric) to 10 (meets all of it).")

_PLACEHOLDER = re.compile(r"\{(prompt|completion|reference|criterion)\}")
_SCORE = re.compile(r"score\s*(?:is|[:=])?\s*\**\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?",
                    re.IGNORECASE)
_BARE = re.compile(r"^\s*\**\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?\s*\**\s*\.?\s*$")
_YES_NO = re.compile(r"^\s*\**\s*(yes|no|pass|fail|true|false)\b", re.IGNORECASE)


class JudgeUnavailable(RuntimeError):
    """The judge gave no usable reply after every retry (network, HTTP error, timeout, a body
    that is not a chat completion). The sample gets an error Score, not a made-up value."""

    kind = "judge_unavailable"


def render(template: str, **fields: str) -> str:
    """Fill ``{prompt}``/``{completion}``/``{reference}``/``{criterion}`` in one pass, so braces
    inside a completion are never read as placeholders."""
    return _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), ""), template)


def parse_score(reply: str, scale: float = 10.0) -> float | None:
    """A judge reply as a value in [0, 1]: "Score: 7" (of ``scale``), "7/10", a bare number, or
    yes/no. None when the reply says none of these or is out of range."""
    reply = reply[-4000:]
    matches = _SCORE.findall(reply)
    found = matches[-1] if matches else None
    if found is None:
        m = _BARE.match(reply)
        found = m.groups() if m else None
    if found is not None:
        value, of = float(found[0]), float(found[1]) if found[1] else scale
        if of <= 0 or not 0 <= value <= of:
            return None
        return value / of
    m = _YES_NO.match(reply)
    if m:
        return 1.0 if m.group(1).lower() in ("yes", "pass", "true") else 0.0
    return None


class ReplyCache:
    """Replies by (judge, prompt), least recently used dropped past ``size``: scoring the same
    rollouts again (a resumed run, an ensemble) costs no judge call."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self._data: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: tuple[str, str], reply: str) -> None:
        with self._lock:
            self._data[key] = reply
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


class Judge:
    """Base: ``replies(prompts)`` with caching; backends implement ``_ask(prompt)``."""

    key = "judge"

    def __init__(self, cache_size: int = 100_000) -> None:
        self.cache = ReplyCache(cache_size)
        self.calls = 0

    def _ask(self, prompt: str) -> str:
        raise NotImplementedError

    def _ask_many(self, prompts: list[str]) -> list[str | BaseException]:
        out: list[str | BaseException] = []
        for p in prompts:
            try:
                out.append(self._ask(p))
            except Exception as exc:  # noqa: BLE001 - reported per prompt
                out.append(exc)
        return out

    def replies(self, prompts: Sequence[str]) -> dict[str, str | BaseException]:
        """A reply (or the exception that prevented one) for each distinct prompt."""
        out: dict[str, str | BaseException] = {}
        todo = []
        for p in dict.fromkeys(prompts):
            hit = self.cache.get((self.key, p))
            if hit is not None:
                out[p] = hit
            else:
                todo.append(p)
        for p, reply in zip(todo, self._ask_many(todo)):
            out[p] = reply
            if isinstance(reply, str):
                self.cache.put((self.key, p), reply)
        return out

    def close(self) -> None:
        pass


class OpenAIJudge(Judge):
    """Any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, SGLang, TGI, OpenAI).

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server expects.
        api_key: a key, or the name of an environment variable holding it (default
            ``OPENAI_API_KEY`` when set).
        timeout: seconds per request.
        retries: extra attempts after a failure (connection error, timeout, HTTP 429/5xx, a body
            that is not a chat completion); waits ``backoff · 2^attempt`` seconds between.
        max_concurrency: requests in flight at once.
        temperature, max_tokens: sampling of the judge.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 2, backoff: float = 0.5,
                 max_concurrency: int = 8, temperature: float = 0.0, max_tokens: int = 64,
                 system: str | None = None, cache_size: int = 100_000) -> None:
        super().__init__(cache_size)
        httpx = require("httpx", "rubric", "rubric")
        if max_concurrency < 1 or retries < 0 or timeout <= 0:
            raise ValueError("need max_concurrency >= 1, retries >= 0 and timeout > 0")
        key = os.environ.get(api_key, api_key) if api_key else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.system = model, system
        self.retries, self.backoff = retries, backoff
        self.max_concurrency = max_concurrency
        self.body = {"temperature": temperature, "max_tokens": max_tokens}
        self.client = httpx.Client(timeout=timeout, headers=headers,
                                   limits=httpx.Limits(max_connections=max_concurrency))
        self.httpx = httpx
        self.key = f"openai:{self.url}:{model}:{temperature}:{max_tokens}:{system}"

    def _ask(self, prompt: str) -> str:
        messages = ([{"role": "system", "content": self.system}] if self.system else [])
        messages.append({"role": "user", "content": prompt})
        last: str = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.calls += 1
            try:
                r = self.client.post(self.url, json={"model": self.model, "messages": messages,
                                                     **self.body})
            except self.httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if r.status_code != 200:
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                if r.status_code in (429,) or r.status_code >= 500:
                    continue
                raise JudgeUnavailable(f"judge at {self.url} answered {last}")
            try:
                content = r.json()["choices"][0]["message"]["content"]
                if not isinstance(content, str):
                    raise TypeError("content is not a string")
                return content
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                last = f"not a chat completion ({type(exc).__name__}): {r.text[:200]!r}"
        raise JudgeUnavailable(f"judge at {self.url} failed {self.retries + 1} time(s); "
                               f"last: {last}")

    def _ask_many(self, prompts: list[str]) -> list[str | BaseException]:
        if len(prompts) <= 1:
            return super()._ask_many(prompts)

        def one(p: str) -> str | BaseException:
            try:
                return self._ask(p)
            except Exception as exc:  # noqa: BLE001 - reported per prompt
                return exc

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(one, prompts))

    def close(self) -> None:
        self.client.close()


class LocalJudge(Judge):
    """A local Hugging Face causal LM as the judge (greedy decoding; the chat template when the
    tokenizer has one). Prompts are generated in batches of ``batch_size``."""

    def __init__(self, model: str, device: str = "cpu", max_new_tokens: int = 16,
                 batch_size: int = 8, cache_size: int = 100_000) -> None:
        super().__init__(cache_size)
        transformers = require("transformers", "train", "rubric")
        self.torch = require("torch", "train", "rubric")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model).to(device).eval()
        self.device, self.max_new_tokens, self.batch_size = device, max_new_tokens, batch_size
        self.key = f"local:{model}:{max_new_tokens}"

    def _text(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return prompt

    def _ask_many(self, prompts: list[str]) -> list[str | BaseException]:
        out: list[str | BaseException] = []
        for i in range(0, len(prompts), self.batch_size):
            chunk = prompts[i:i + self.batch_size]
            self.calls += len(chunk)
            enc = self.tokenizer([self._text(p) for p in chunk], return_tensors="pt",
                                 padding=True, add_special_tokens=False).to(self.device)
            enc.pop("token_type_ids", None)  # a causal LM takes none; older generate refuses them
            with self.torch.no_grad(), plain_generation(self.model):
                gen = self.model.generate(**enc, max_new_tokens=self.max_new_tokens,
                                          do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id)
            new = gen[:, enc["input_ids"].shape[1]:]
            out.extend(self.tokenizer.batch_decode(new, skip_special_tokens=True))
        return out


def make_judge(spec: Judge | Mapping[str, Any] | str | None) -> Judge | None:
    """A judge from options: ``{"base_url", "model", ...}`` (HTTP), ``{"local": PATH, ...}`` or a
    path string (local model), or a Judge."""
    if spec is None or isinstance(spec, Judge):
        return spec
    if isinstance(spec, str):
        return LocalJudge(spec)
    if not isinstance(spec, Mapping):
        raise ValueError(f"judge must be a dict or a model path, got {type(spec).__name__}")
    spec = dict(spec)
    if "local" in spec:
        return LocalJudge(spec.pop("local"), **spec)
    if "base_url" not in spec or "model" not in spec:
        raise ValueError("an HTTP judge needs `base_url` and `model` (or give `local: PATH` for "
                         "a local Hugging Face model)")
    return OpenAIJudge(**spec)
