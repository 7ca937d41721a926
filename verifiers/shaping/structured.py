"""Structured output validity: JSON against a JSON Schema, tool calls against tool definitions."""
from __future__ import annotations

import json
import re
from typing import Any, Mapping

from rewardkit.scorer import RewardInputError, Scorer
from rewardkit.types import Sample, Score

from ._common import require

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_MAX_CHARS = 200_000


def find_json(text: str) -> tuple[Any, str] | None:
    """The JSON value a completion gives: the whole text, else a fenced block, else the first
    object or array that parses. Returns (value, where) or None."""
    text = text[:_MAX_CHARS]
    candidates = [(text.strip(), "whole")] + [(m.strip(), "fenced") for m in _FENCE.findall(text)]
    for chunk, where in candidates:
        try:
            return json.loads(chunk), where
        except (ValueError, RecursionError):
            pass
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)][:64]
    for i in starts:
        try:
            return decoder.raw_decode(text, i)[0], "embedded"
        except (ValueError, RecursionError):
            continue
    return None


def _tool_calls(text: str) -> list[Any] | None:
    """Tool calls as Hermes/Qwen write them (``<tool_call>{...}</tool_call>``), or the JSON of
    the completion when it is a call or a list of calls."""
    tagged = _TOOL_CALL.findall(text[:_MAX_CHARS])
    if tagged:
        calls = []
        for body in tagged:
            try:
                calls.append(json.loads(body.strip()))
            except (ValueError, RecursionError):
                calls.append(None)
        return calls
    found = find_json(text)
    if found is None:
        return None
    value = found[0]
    return value if isinstance(value, list) else [value]


class JsonSchemaValid(Scorer):
    """1.0 when the completion holds JSON valid against a JSON Schema, or tool calls that name a
    known tool with arguments valid against its parameters; else 0.0 with the reason.

    Args:
        schema: the JSON Schema; None: each sample's reference is its schema (a dict or a JSON
            string), or ``{"tools": [...]}`` for tool calls.
        tools: OpenAI-style tool definitions (``{"type": "function", "function": {"name",
            "parameters"}}`` or just ``{"name", "parameters"}``): the completion must make tool
            calls, each valid.
        partial_credit: the fraction of valid tool calls instead of all-or-nothing.
    """

    name = "json_schema"

    def __init__(self, schema: Mapping[str, Any] | str | None = None,
                 tools: list[Mapping[str, Any]] | None = None, partial_credit: bool = False,
                 error_value: float = 0.0) -> None:
        self.jsonschema = require("jsonschema", "rubric", self.name)
        self.schema = self._load_schema(schema) if schema is not None else None
        self.tools = self._tools(tools) if tools is not None else None
        self.partial_credit = partial_credit
        self.error_value = error_value

    def _load_schema(self, schema: Any) -> Mapping[str, Any]:
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise RewardInputError(f"the schema is not valid JSON: {exc}") from None
        if not isinstance(schema, Mapping):
            raise RewardInputError(f"a JSON Schema must be an object, got {type(schema).__name__}")
        try:
            self.jsonschema.validators.validator_for(schema).check_schema(schema)
        except self.jsonschema.SchemaError as exc:
            raise RewardInputError(f"invalid JSON Schema: {exc.message}") from None
        return schema

    def _tools(self, tools: Any) -> dict[str, Mapping[str, Any]]:
        if not isinstance(tools, list) or not tools:
            raise RewardInputError("tools must be a non-empty list of tool definitions")
        out = {}
        for t in tools:
            fn = t.get("function", t) if isinstance(t, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise RewardInputError(f"a tool definition needs a name, got {str(t)[:80]}")
            out[fn["name"]] = self._load_schema(fn.get("parameters", {"type": "object"}))
        return out

    def _errors(self, value: Any, schema: Mapping[str, Any]) -> str | None:
        validator = self.jsonschema.validators.validator_for(schema)(schema)
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return None
        path = "/".join(map(str, error.absolute_path)) or "(root)"
        return f"at {path}: {error.message[:200]}"

    def score_one(self, sample: Sample) -> Score:
        schema, tools = self.schema, self.tools
        if schema is None and tools is None:
            ref = sample.reference
            if isinstance(ref, Mapping) and "tools" in ref:
                tools = self._tools(ref["tools"])
            elif ref is not None:
                schema = self._load_schema(ref)
            else:
                raise RewardInputError("json_schema needs a `schema` or `tools` option, or a "
                                       "schema / {'tools': [...]} as the reference")
        text = sample.completion_text
        if tools is not None:
            return self._score_tools(text, tools)
        found = find_json(text)
        if found is None:
            return Score(0.0, info={"reason": "no JSON found"})
        error = self._errors(found[0], schema)  # type: ignore[arg-type]
        if error:
            return Score(0.0, info={"reason": f"schema violation {error}", "json_from": found[1]})
        return Score(1.0, info={"json_from": found[1]})

    def _score_tools(self, text: str, tools: Mapping[str, Mapping[str, Any]]) -> Score:
        calls = _tool_calls(text)
        if not calls:
            return Score(0.0, info={"reason": "no tool call found"})
        problems = []
        for k, call in enumerate(calls):
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                problems.append(f"call {k}: not a {{'name', 'arguments'}} object")
                continue
            if call["name"] not in tools:
                problems.append(f"call {k}: unknown tool {call['name'][:60]!r}")
                continue
            args = call.get("arguments", call.get("parameters", {}))
            if isinstance(args, str):  # OpenAI sends arguments as a JSON string
                try:
                    args = json.loads(args)
                except ValueError:
                    problems.append(f"call {k}: arguments are not JSON")
                    continue
            error = self._errors(args, tools[call["name"]])
            if error:
                problems.append(f"call {k} ({call['name']}): {error}")
        valid = len(calls) - len(problems)
        value = valid / len(calls) if self.partial_credit else float(not problems)
        info: dict[str, Any] = {"calls": len(calls), "valid": valid}
        if problems:
            info["reason"] = "; ".join(problems[:5])
        return Score(value, info=info)
