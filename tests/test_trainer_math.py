"""The trainer's formulas on small tensors whose answers are worked out by hand."""
import math

import pytest
import torch

from rewardkit.trainer import advantages as adv
from rewardkit.trainer import filters, losses


def test_grpo_group_scaling_divides_by_each_groups_std():
    r = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 3.0])
    a = adv.grpo_advantages(r, group_size=4, scale="group", eps=0.0)
    # group 1: mean 0.5, unbiased std sqrt(1/3); group 2: mean 0.75, std 1.5
    s1 = math.sqrt(1 / 3)
    expected = [0.5 / s1, -0.5 / s1, 0.5 / s1, -0.5 / s1, -0.5, -0.5, -0.5, 1.5]
    assert torch.allclose(a, torch.tensor(expected), atol=1e-5)


def test_grpo_batch_scaling_uses_one_std_for_all_groups():
    r = torch.tensor([1.0, 0.0, 2.0, 2.0])
    a = adv.grpo_advantages(r, group_size=2, scale="batch", eps=0.0)
    std = torch.tensor([1.0, 0.0, 2.0, 2.0]).std()  # 0.9574
    assert torch.allclose(a, torch.tensor([0.5, -0.5, 0.0, 0.0]) / std)


def test_dr_grpo_only_subtracts_the_group_mean():
    r = torch.tensor([1.0, 0.0, 0.0, 5.0, 5.0, 5.0])
    a = adv.grpo_advantages(r, group_size=3, scale="none")
    assert torch.allclose(a, torch.tensor([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0, 0.0]))


def test_zero_variance_group_gets_zero_advantage_not_nan():
    a = adv.grpo_advantages(torch.ones(4), group_size=4, scale="group")
    assert torch.equal(a, torch.zeros(4))


def test_rloo_baseline_is_mean_of_the_other_completions():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    a = adv.rloo_advantages(r, group_size=4)
    # r0: 1 - mean(0,0,1)=2/3 ; r1: 0 - mean(1,0,1)=-2/3
    assert torch.allclose(a, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))


def test_reinforce_pp_normalises_over_the_batch():
    r = torch.tensor([3.0, 1.0, 1.0, 3.0])
    a = adv.reinforce_pp_advantages(r)
    std = torch.tensor([1.0, -1.0, -1.0, 1.0]).std()
    assert torch.allclose(a, torch.tensor([1.0, -1.0, -1.0, 1.0]) / std, atol=1e-5)
    # with a group baseline: groups [3,1] and [1,3] centre to [1,-1,-1,1] as well
    assert torch.allclose(adv.reinforce_pp_advantages(r, group_size=2), a, atol=1e-5)


def test_batch_that_is_not_whole_groups_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="divisible by group_size"):
        adv.grpo_advantages(torch.zeros(5), group_size=2)


def test_gae_matches_the_recursion_by_hand():
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.7]])
    mask = torch.ones(1, 3)
    a, ret = adv.gae(rewards, values, mask, gamma=0.9, lam=0.5)
    d2 = 1.0 - 0.7
    d1 = 0.0 + 0.9 * 0.7 - 0.6
    d0 = 0.0 + 0.9 * 0.6 - 0.5
    a2 = d2
    a1 = d1 + 0.45 * a2
    a0 = d0 + 0.45 * a1
    assert torch.allclose(a, torch.tensor([[a0, a1, a2]]))
    assert torch.allclose(ret, a + values)


def test_gae_treats_padding_as_end_of_episode():
    rewards = torch.tensor([[0.0, 2.0, 9.0]])
    values = torch.tensor([[1.0, 1.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    a, ret = adv.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    # last valid token: delta = 2 - 1 (next value is padding => 0); first: 0 + 1 - 1 + 1
    assert torch.allclose(a, torch.tensor([[1.0, 1.0, 0.0]]))
    assert torch.allclose(ret, torch.tensor([[2.0, 2.0, 0.0]]))


def test_k1_and_k3_estimators():
    logp = torch.tensor([math.log(0.5)])
    ref = torch.tensor([math.log(0.25)])
    assert torch.allclose(losses.kl_penalty(logp, ref, "k1"), torch.tensor([math.log(2.0)]))
    # k3: r = ref/pi = 0.5 -> 0.5 - log 0.5 - 1
    assert torch.allclose(losses.kl_penalty(logp, ref, "k3"),
                          torch.tensor([0.5 - math.log(0.5) - 1.0]))
    assert torch.all(losses.kl_penalty(ref, logp, "k3") >= 0)


def test_clip_higher_uses_separate_bounds():
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[1.5, 0.5]]))  # ratios 1.5 and 0.5
    pos = losses.clipped_policy_loss(logp, old, torch.tensor([1.0]), eps_low=0.2, eps_high=0.28)
    # positive advantage: min(1.5, 1.28) = 1.28 ; min(0.5, 0.8) = 0.5
    assert torch.allclose(pos.per_token, torch.tensor([[-1.28, -0.5]]))
    assert pos.clipped.tolist() == [[True, False]]
    neg = losses.clipped_policy_loss(logp, old, torch.tensor([-1.0]), eps_low=0.2, eps_high=0.28)
    # negative advantage: min(-1.5, -1.28) = -1.5 ; min(-0.5, -0.8) = -0.8 (clipped at 1-eps_low)
    assert torch.allclose(neg.per_token, torch.tensor([[1.5, 0.8]]))
    assert neg.clipped.tolist() == [[False, True]]


def test_clipped_loss_gradient_is_zero_where_clipped():
    logp = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    out = losses.clipped_policy_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]))
    out.per_token.sum().backward()
    assert logp.grad[0, 0] == 0 and logp.grad[0, 1] == pytest.approx(-1.1)


def test_aggregations():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert losses.aggregate(per_token, mask, "seq_mean").item() == pytest.approx((1 + 4) / 2)
    assert losses.aggregate(per_token, mask, "token_mean").item() == pytest.approx(8 / 5)
    assert losses.aggregate(per_token, mask, "constant", max_tokens=8).item() == \
        pytest.approx(8 / (2 * 8))


def test_aggregation_over_micro_batches_equals_one_batch():
    per_token = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    for mode in ("seq_mean", "token_mean"):
        whole = losses.aggregate(per_token, mask, mode)
        parts = sum(losses.aggregate(per_token[i:i + 1], mask[i:i + 1], mode, num_tokens=6,
                                     num_seqs=3) for i in range(3))
        assert parts.item() == pytest.approx(whole.item())


def test_top_entropy_mask_keeps_the_highest_entropy_fraction_of_valid_tokens():
    entropy = torch.tensor([[0.1, 0.9, 0.5, 5.0], [0.8, 0.2, 0.3, 0.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    out = losses.top_entropy_mask(entropy, mask, 2 / 7)  # 7 valid tokens -> keep 2
    assert out.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]  # 5.0 is padding, never kept
    assert torch.equal(losses.top_entropy_mask(entropy, mask, 1.0), mask)


def test_token_logprobs_and_entropy_match_softmax():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])
    assert losses.token_logprobs(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert losses.entropy_from_logits(logits).item() == pytest.approx(h)


def test_value_loss_clips_the_update():
    v = torch.tensor([2.0])
    loss = losses.value_loss(v, old_values=torch.tensor([1.0]), returns=torch.tensor([3.0]), clip=0.5)
    # unclipped (2-3)^2 = 1 ; clipped value 1.5 -> (1.5-3)^2 = 2.25 ; max -> 2.25
    assert loss.item() == pytest.approx(0.5 * 2.25)


def test_zero_variance_and_reinforce_rej_filters():
    r = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5])
    assert filters.zero_variance_groups(r, 2).tolist() == [True, False, True, True]
    assert filters.keep_nonzero_variance(r, 2).tolist() == [False, False, True, True,
                                                           False, False, False, False]
    # Reinforce-Rej keeps the [0.5, 0.5] group (neither all correct nor all wrong)
    assert filters.reinforce_rej(r, 2).tolist() == [False, False, True, True,
                                                   False, False, True, True]
    graded = torch.tensor([0.5, 0.5, 1.0, 1.0])
    assert filters.reinforce_rej(graded, 2).tolist() == [True, True, False, False]


def test_truncation_mask_and_penalty():
    r = torch.tensor([1.0, 0.0, 1.0])
    truncated = torch.tensor([False, True, True])
    assert filters.penalize_truncated(r, truncated, -1.0).tolist() == [1.0, -1.0, -1.0]
    assert filters.keep_untruncated(truncated).tolist() == [True, False, False]
