"""The `iou` reward: box parsing as models write it, coordinate conventions, the reward modes,
bad input as error Scores."""
import pytest

pytest.importorskip("scipy")

import rewardkit  # noqa: E402
from rewardkit import Sample  # noqa: E402
from rewardkit.verifiers.iou import IoUReward, parse_boxes  # noqa: E402

TWO = {"boxes": [[0, 0, 10, 10], [20, 20, 30, 30]], "labels": ["cat", "dog"]}


def _score(reward, completion, reference=TWO, **metadata):
    return reward.score([Sample("where?", completion, reference, metadata or None)])[0]


@pytest.mark.parametrize("text, boxes, labels", [
    ('{"bbox_2d": [1, 2, 3, 4], "label": "cat"}', [(1, 2, 3, 4)], ["cat"]),
    ('```json\n[{"bbox_2d": [1, 2, 3, 4], "label": "cat"}, {"bbox_2d": [5, 6, 7, 8], '
     '"label": "dog"}]\n```', [(1, 2, 3, 4), (5, 6, 7, 8)], ["cat", "dog"]),
    ("The box is [1.5, 2, 3, 4].", [(1.5, 2, 3, 4)], [None]),
    ("[[1, 2, 3, 4], [5, 6, 7, 8]]", [(1, 2, 3, 4), (5, 6, 7, 8)], [None, None]),
    ("(1,2),(3,4)", [(1, 2, 3, 4)], [None]),
    ("<ref>cat</ref><box>(1,2),(3,4)</box>", [(1, 2, 3, 4)], ["cat"]),
    ("<|object_ref_start|>the dog<|object_ref_end|><|box_start|>(10,20),(30,40)<|box_end|>",
     [(10, 20, 30, 40)], ["the dog"]),
    ("cat: [1, 2, 3, 4], dog: [5, 6, 7, 8]", [(1, 2, 3, 4), (5, 6, 7, 8)], ["cat", "dog"]),
    ('{"cat": [1, 2, 3, 4]}', [(1, 2, 3, 4)], ["cat"]),
    ('{"x1": 1, "y1": 2, "x2": 3, "y2": 4, "score": 0.9}', [(1, 2, 3, 4)], [None]),
    # R1-style: only the answer block counts, not boxes considered while thinking
    ("<think>maybe [0, 0, 1, 1]</think><answer>[1, 2, 3, 4]</answer>", [(1, 2, 3, 4)], [None]),
])
def test_parses_the_forms_models_write(text, boxes, labels):
    parsed = parse_boxes(text)
    assert [p.box for p in parsed] == boxes
    assert [p.label for p in parsed] == labels


def test_parse_reads_confidence_and_ignores_non_boxes():
    parsed = parse_boxes('[{"bbox_2d": [1, 2, 3, 4], "confidence": 0.7}] and a point [3, 4]')
    assert parsed[0].confidence == 0.7 and len(parsed) == 1
    assert parse_boxes("no boxes at all, just [1, 2] and (3, 4)") == []
    assert len(parse_boxes("[1,2,3,4] " * 500, max_boxes=7)) == 7


def test_default_is_mean_matched_iou_over_max_count():
    r = rewardkit.load("iou")
    one = {"boxes": [[0, 0, 10, 10]]}
    assert _score(r, "[0, 0, 10, 5]", one).value == pytest.approx(0.5)      # one vs one: IoU
    assert _score(r, "[0, 0, 10, 10]", TWO).value == pytest.approx(0.5)     # a missing box
    assert _score(r, "[[0,0,10,10],[20,20,30,30],[50,50,60,60]]", TWO).value == pytest.approx(2 / 3)
    assert _score(r, "[[20,20,30,30],[0,0,10,10]]", TWO).value == 1.0       # order is free


def test_labels_match_per_label():
    r = IoUReward()
    assert _score(r, "cat: [20,20,30,30], dog: [0,0,10,10]").value == 0.0
    assert _score(r, "dog: [20,20,30,30], cat: [0,0,10,10]").value == 1.0
    assert _score(IoUReward(use_labels=False), "cat: [20,20,30,30], dog: [0,0,10,10]").value == 1.0


def test_coordinate_conventions():
    gold = {"boxes": [[64, 48, 320, 240]], "image_size": [640, 480]}
    assert _score(IoUReward(pred_coords="qwen1000"), "[100, 100, 500, 500]", gold).value == pytest.approx(1.0)
    assert _score(IoUReward(pred_coords="normalized"), "[0.1, 0.1, 0.5, 0.5]", gold).value == pytest.approx(1.0)
    assert _score(IoUReward(pred_format="xywh"), "[64, 48, 256, 192]", gold).value == pytest.approx(1.0)
    assert _score(IoUReward(pred_format="cxcywh"), "[192, 144, 256, 192]", gold).value == pytest.approx(1.0)
    # gold given as COCO xywh, image size from metadata
    coco = {"boxes": [[64, 48, 256, 192]], "format": "xywh"}
    s = _score(IoUReward(pred_coords="qwen1000"), "[100, 100, 500, 500]", coco, image_size=[640, 480])
    assert s.value == pytest.approx(1.0)


def test_modes():
    pred = "[[0,0,10,9],[20,20,30,25],[70,70,80,80]]"   # IoU 0.9, 0.5, 0 (extra)
    assert _score(IoUReward(mode="hit_rate", threshold=0.75), pred).value == 0.5
    assert _score(IoUReward(mode="f1", threshold=0.75), pred).value == pytest.approx(2 * 1 / 5)
    assert _score(IoUReward(mode="f1", threshold=0.5), pred).value == pytest.approx(2 * 2 / 5)
    assert _score(IoUReward(mode="map"), "[[0,0,10,10],[20,20,30,30]]").value == 1.0
    assert _score(IoUReward(metric="giou"), "[20,0,30,10]", {"boxes": [[0, 0, 10, 10]]}).value == pytest.approx(-1 / 3)


def test_visual_rft_confidence_reward():
    r = IoUReward(mode="confidence")
    text = '[{"bbox_2d": [0,0,10,10], "confidence": 0.9}, {"bbox_2d": [50,50,60,60], "confidence": 0.2}]'
    assert _score(r, text).value == pytest.approx((0.9 + 0.8) / 2)
    no_conf = _score(r, "[0,0,10,10]")
    assert no_conf.value == 0.0 and "confidence" in no_conf.info["reason"]


def test_dynamic_threshold_follows_the_step_in_metadata():
    r = IoUReward(mode="hit_rate", threshold_schedule="vtriune", total_steps=100)
    one = {"boxes": [[0, 0, 10, 10]]}
    early, late = _score(r, "[0,0,10,9]", one, step=5), _score(r, "[0,0,10,9]", one, step=50)
    assert (early.value, early.info["threshold"]) == (1.0, 0.85)
    assert (late.value, late.info["threshold"]) == (0.0, 0.99)
    absolute = IoUReward(mode="hit_rate", threshold_schedule=[[0, 0.5], [200, 0.95]])
    assert _score(absolute, "[0,0,10,9]", one, step=199).value == 1.0
    assert _score(absolute, "[0,0,10,9]", one, step=200).value == 0.0
    missing = _score(r, "[0,0,10,9]", one)
    assert not missing.ok and "metadata['step']" in missing.error


def test_over_enumeration_penalty():
    r = IoUReward(mode="hit_rate", over_enumeration_penalty=0.5)
    one = {"boxes": [[0, 0, 10, 10]]}
    assert _score(r, "[0,0,10,10]", one).value == 1.0
    listed = _score(r, "[[0,0,10,10],[1,1,9,9],[2,2,8,8],[3,3,7,7]]", one)
    assert listed.value == pytest.approx(1.0 - 0.5 * 3 / 4)


def test_empty_and_unparsable():
    r = IoUReward()
    assert _score(r, "no object here", {"boxes": []}).value == 1.0
    assert _score(r, "[0,0,1,1]", {"boxes": []}).value == 0.0
    s = _score(r, "I cannot see it", TWO)
    assert s.value == 0.0 and s.ok and "no boxes" in s.info["reason"]
    nan = _score(r, '[NaN, 0, 5, 5]', {"boxes": [[0, 0, 5, 5]]})
    assert nan.ok and nan.value == 0.0


def test_bad_samples_become_error_scores_in_a_batch():
    r = IoUReward(pred_coords="qwen1000")
    samples = [Sample("p", "[0,0,10,10]", None), Sample("p", "[0,0,10,10]", {"nope": 1}),
               Sample("p", "[0,0,10,10]", {"boxes": [[1, 2, 3]]}),
               Sample("p", "[0,0,10,10]", {"boxes": [[0, 0, 1, 1]]}),  # no image size
               Sample("p", "[0,0,1000,1000]", {"boxes": [[0, 0, 8, 8]], "image_size": [8, 8]})]
    scores = r.score(samples)
    assert [s.ok for s in scores] == [False, False, False, False, True]
    assert "image_size" in scores[3].error
    assert scores[4].value == 1.0


@pytest.mark.parametrize("box, says", [
    ([0, 0, float("nan"), 5], "not a finite number"),
    ([0, 0, float("inf"), 5], "not a finite number"),
    ([0, 0, 0, 0], "no area"),
    ([10, 10, 5, 20], "no area"),   # x2 < x1: an xywh box read as xyxy
    ([0, 0, 1e200, 1e200], "too large for float64"),
])
def test_a_gold_box_no_prediction_can_match_is_an_error_not_a_zero(box, says):
    for metric in ("iou", "giou"):
        s = _score(IoUReward(metric=metric), "[0, 0, 5, 5]", {"boxes": [[0, 0, 5, 5], box]})
        assert not s.ok and says in s.error and "reference box 1" in s.error, s


def test_bad_options_fail_at_build_time_with_the_choices():
    with pytest.raises(ValueError, match="mode must be one of"):
        IoUReward(mode="best")
    with pytest.raises(ValueError, match="pred_coords"):
        IoUReward(pred_coords="percent")
    with pytest.raises(ValueError, match="threshold_schedule"):
        IoUReward(threshold_schedule=[1, 2])


def test_through_trl_and_offline_scoring(tmp_path):
    import json

    from rewardkit.cli import main

    trl_reward = rewardkit.to_trl("iou", reference_column="solution", pred_coords="qwen1000")
    values = trl_reward(prompts=["where?", "where?"],
                        completions=["[100, 100, 500, 500]", "no idea"],
                        solution=[{"boxes": [[64, 48, 320, 240]]}] * 2,
                        image_size=[[640, 480], [640, 480]])  # a dataset column -> metadata
    assert values == [pytest.approx(1.0), 0.0]
    rows = tmp_path / "rollouts.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "p", "completion": "<box>(0,0),(10,10)</box>", "gold": {"boxes": [[0, 0, 10, 10]]}},
        {"prompt": "p", "completion": "[0, 0, 10, 5]", "gold": {"boxes": [[0, 0, 10, 10]]}},
        {"prompt": "p", "completion": "[0, 0, 10, 5]", "gold": "not boxes"}]) + "\n")
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(rows), "--reward", "iou", "--reference-field", "gold",
                 "-o", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in scored] == [1.0, 0.5, 0.0]
    assert "error" in scored[2]["reward_info"]


@pytest.mark.parametrize("text", ["(" + "1" * 19_999, "[" * 20_000, "{" * 20_000, "a" * 20_000 + "[",
                                  "[1,2,3," * 3_000, "[" * 5_000 + "]" * 5_000, "<box>" * 4_000,
                                  '{"bbox_2d": ' * 3_000])
def test_hostile_text_parses_to_nothing_without_error(text):
    assert parse_boxes(text) == []
    # hostile text before real boxes does not hide them, and the box cap holds
    found = parse_boxes(text + " [1, 2, 3, 4]" * 200, max_chars=10**6, max_boxes=150)
    assert len(found) == 150 and found[-1].box == (1, 2, 3, 4)
