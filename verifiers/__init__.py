"""Rule-based rewards (installed as ``rewardkit.verifiers``): math, code, and more."""
