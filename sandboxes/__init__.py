"""Running untrusted programs (installed as ``rewardkit.sandboxes``)."""
