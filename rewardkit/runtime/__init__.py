"""What every long job shares: device and dtype choice (:mod:`.device`), checkpoints and exact
resume (:mod:`.checkpoint`), seeded resumable sampling (:mod:`.sampling`), metrics and plots
(:mod:`.metrics`), the learning-rate schedule (:mod:`.schedule`), health checks and a clean
Ctrl-C (:mod:`.health`), typed config fields (:mod:`.fields`), the step loop that
runs them together (:mod:`.steps`), an allocator setting that lets CPU batches reuse their
memory (:mod:`.allocator`), and text generation with only the options a caller passes
(:mod:`.decoding`: the trainer's rollouts, a learned reward's own solutions, a local judge).

The policy trainer (:mod:`rewardkit.trainer`) and reward-model training
(:mod:`rewardkit.models.reward_trainer`) are two recipes over this room; neither imports the other.
Importing this package is cheap: the modules that need torch import it themselves.
"""
