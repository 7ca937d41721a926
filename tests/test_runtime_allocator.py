"""retain_freed_memory: repeated CPU batches reuse their pages instead of faulting them back in."""
import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the allocator setting is glibc's mallopt")

# In a thread other than the main one (as a server's scoring thread), 20 rounds of what a forward
# pass does: allocate and touch 12 blocks of 4 MiB (activations), then free them all; prints the
# minor page faults the rounds after the first took.
PROGRAM = """
import json, resource, sys, threading, ctypes
if sys.argv[1] == "retain":
    from rewardkit.runtime.allocator import retain_freed_memory
    outcome = retain_freed_memory()
else:
    outcome = "left"
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 4 << 20
def churn():
    for _ in range(20):
        blocks = [libc.malloc(size) for _ in range(12)]
        for p in blocks:
            ctypes.memset(p, 1, size)
        for p in blocks:
            libc.free(p)
churn_thread = threading.Thread(target=churn); churn_thread.start(); churn_thread.join()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn_thread = threading.Thread(target=churn); churn_thread.start(); churn_thread.join()
print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before,
                  "outcome": outcome}))
"""


def _faults(mode: str, env: dict | None = None) -> dict:
    import os
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True,
                         check=True, env={**os.environ, **(env or {})})
    return json.loads(out.stdout)


def test_retained_memory_is_reused_without_page_faults():
    left, retained = _faults("left"), _faults("retain")
    assert retained["outcome"] == "applied"
    pages = 20 * 12 * (4 << 20) // 4096
    assert left["faults"] > pages // 2          # glibc as shipped: every block faults back in
    # retained: the pages are reused. The measured thread may be given an arena of its own, whose
    # first round then faults its 12 blocks in once (pages // 20); every later round reuses them.
    assert retained["faults"] < pages // 10


def test_the_environment_switch_leaves_the_allocator_alone():
    off = _faults("retain", {"REWARDKIT_RETAIN_FREED_MEMORY": "0"})
    assert off["outcome"].startswith("disabled")
    assert off["faults"] > 20 * 12 * (4 << 20) // 4096 // 2
