"""The page cache is shared by every run and the host: a run can neither drop another's (or the
host's) cached pages nor tell which pages of a shared file are cached, so two concurrent runs
cannot pass bits through the cached pages of a stdlib file; honest uses of the same calls work."""
from __future__ import annotations

import os
import sysconfig

import pytest

from rewardkit.sandboxes import Limits, Program, Sandbox
from rewardkit.testing.sandbox_attacks import (PAGE_CACHE_CALLS, PAGE_CACHE_HONEST, READ_PAGES,
                                               SEND_PAGES)

# A large stdlib file every run can read (700+ kB: room for 16 pages spaced apart).
SHARED = os.path.join(sysconfig.get_paths()["stdlib"], "pydoc_data", "topics.py")
SECRET = 0xA5C3
LIMITS = Limits(cpu_s=5, wall_s=10, memory_mb=512)


@pytest.fixture(scope="module", params=["allow-list", "deny-list"])
def pair(request):
    """A two-slot sandbox with libseccomp's allow-list, and one with the fallback deny-list."""
    from rewardkit.sandboxes import sandbox as sandbox_module

    patch = pytest.MonkeyPatch()
    if request.param == "deny-list":
        patch.setattr(sandbox_module, "compile_filter", lambda *_: None)
    with Sandbox(pool_size=2, limits=LIMITS) as sb:
        caps = sb.capabilities()
        patch.undo()
        if not caps["seccomp"]:
            pytest.skip("no seccomp filter on this machine")
        assert caps["seccomp_filter"] == request.param
        yield sb


def test_two_concurrent_runs_cannot_pass_a_secret_through_cached_pages(pair):
    with pair.start(Program(SEND_PAGES.format(path=SHARED, secret=SECRET))) as sender:
        reader = pair.run(Program(READ_PAGES.format(path=SHARED)))
        sent = sender.result(10)
    assert reader.stdout.strip() != hex(SECRET)
    assert sent.stdout.strip() == "errno 1"  # EPERM: no run drops cached pages of a shared file
    assert reader.stdout.strip() == "errno 95"  # EOPNOTSUPP: no non-blocking probe of the cache


def test_every_call_that_drops_or_reports_cached_pages_is_refused(pair):
    out = pair.run(Program(PAGE_CACHE_CALLS.format(path=SHARED))).stdout.split()
    assert dict(entry.split("=") for entry in out) == {
        "fadvise_dontneed": "1", "madvise_cold": "1", "madvise_pageout": "1",  # EPERM
        "preadv2_nowait": "95", "pwritev2_nowait": "95",  # EOPNOTSUPP
        "mincore": "38", "cachestat": "38"}  # ENOSYS


def test_honest_hints_and_reads_still_work(pair):
    out = pair.run(Program(PAGE_CACHE_HONEST.format(path=SHARED))).stdout.split()
    assert out and all(entry.endswith("=ok") for entry in out), out
