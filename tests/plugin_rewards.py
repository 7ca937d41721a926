"""Rewards importable by path, used by the registry and CLI tests."""
import time


def plugin_len(prompt, completion, reference):
    return float(len(completion))


def slow_len(prompt, completion, reference, delay=0.01):
    time.sleep(delay)
    return float(len(completion))
