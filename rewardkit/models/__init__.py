"""Learned rewards: outcome reward models (``reward_model``) and process reward models
(``process_reward``) — scoring, training (``rewardkit train rm|prm``) and evaluation
(``rewardkit eval rm|prm``).

Modules:
    loading           from_pretrained with load-time checks (head, pad token), device and dtype
    encoding          prompt + completion → token ids (chat template or plain format), truncation
                      that keeps the end of the completion, token-budget batching
    pass_plan         how a batch is cut into forward passes, by each pass's measured cost
    reward_model      the ``reward_model`` Scorer (sequence classifier, one output)
    process_reward    the ``process_reward`` Scorer (token classifier read at step marks)
    implicit_reward   the ``implicit_reward`` Scorer (a causal LM's log-likelihood, reference-free
                      or against a reference; per-step scores from the same pass)
    ensemble          the ``ensemble`` Scorer (mean/min/uwo/mean_minus_std/std, members
                      standardised)
    multihead         K reward heads on one trunk: its Scorer, stack_heads / split_heads
    lora_members      K LoRA adapters on one base as ensemble members
    learned_shaping   PAR, centring and clipping against a reference completion (``shaped``)
    data              preference and stepwise data sets (TRL, ProcessBench formats)
    train_config      the typed options of ``train rm|prm``
    reward_trainer    Bradley–Terry and per-step training on the runtime room's machinery
    train             ``train_reward_model``: one model or an ensemble, as the config says
    train_ensemble    ``train rm --ensemble K``: members that differ, one held-out split
    cli               ``train rm|prm`` and ``eval rm|prm``
    evaluation        RewardBench-style pairwise accuracy, ProcessBench-style first-error F1
    heuristics        trivial baselines on the same pairs (shorter, longer, smaller, larger, overlap)
    benchmark_metrics the bootstrap interval and ProcessBench block both of the above report
    arithmetic        checkable preference pairs and stepwise solutions from the arithmetic task

Importing this package is cheap; torch and transformers load when a model does.
"""
