import pytest

import rewardkit
from rewardkit import Sample


def test_exact_match_normalises_case_space_and_final_punctuation():
    em = rewardkit.load("exact_match")
    got = em.score([Sample("q", "  The   Answer. ", "the answer"), Sample("q", "answers", "answer")])
    assert [s.value for s in got] == [1.0, 0.0]


def test_exact_match_accepts_a_list_of_references():
    em = rewardkit.load("exact_match")
    assert em.score([Sample("q", "Paris", ["London", "paris"])])[0].value == 1.0


def test_exact_match_case_sensitive_option():
    em = rewardkit.load("exact_match", case_sensitive=True)
    assert em.score([Sample("q", "Paris", "paris")])[0].value == 0.0


def test_exact_match_without_reference_is_a_clear_error():
    s = rewardkit.load("exact_match").score([Sample("q", "x")])[0]
    assert s.info["error_kind"] == "bad_input" and "--reference-field" in s.info["error"]


def test_regex_modes_and_flags():
    assert rewardkit.load("regex", pattern="ANSWER", flags="i").score(
        [Sample("q", "my answer")])[0].value == 1.0
    full = rewardkit.load("regex", pattern=r"<think>.*</think>\s*<answer>.*</answer>",
                          mode="fullmatch", flags=["s"])
    ok, bad = full.score([Sample("q", "<think>a\nb</think> <answer>4</answer>"),
                          Sample("q", "<think>a</think> <answer>4</answer> extra")])
    assert (ok.value, bad.value) == (1.0, 0.0)


def test_regex_uses_reference_as_pattern_when_none_given():
    assert rewardkit.load("regex").score([Sample("q", "id-123", r"id-\d+")])[0].value == 1.0


@pytest.mark.parametrize("opts, match", [({"pattern": "("}, "invalid regex"),
                                         ({"mode": "all"}, "mode must be"),
                                         ({"flags": "z"}, "unknown regex flag")])
def test_regex_bad_options_fail_at_load_with_a_reason(opts, match):
    with pytest.raises(ValueError, match=match):
        rewardkit.load("regex", **opts)
