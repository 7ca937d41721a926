"""Sandboxes never share uids, whatever their TMPDIR: the uid lock files live in one
machine-wide directory (uids and RLIMIT_NPROC are machine-wide, TMPDIR is not)."""
import os
import subprocess
import sys

import pytest

from rewardkit.sandboxes.uids import UidBlock, lock_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid blocks are used as root only")

CLAIM = ("from rewardkit.sandboxes.uids import UidBlock\n"
         "print(UidBlock(4).uids[0], flush=True)\n")


def test_sandboxes_with_different_tmpdirs_take_different_uids(tmp_path):
    held = UidBlock(4)
    try:
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        out = subprocess.run([sys.executable, "-c", CLAIM], env=env, capture_output=True,
                             text=True, timeout=60, check=True).stdout
        theirs = int(out.split()[0])
        assert theirs not in held.uids
    finally:
        held.release()


def test_the_lock_directory_is_not_under_tmpdir_and_is_owner_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    path = lock_dir()
    assert not path.startswith(str(tmp_path))
    info = os.stat(path)
    assert info.st_uid == os.geteuid() and info.st_mode & 0o077 == 0


def test_a_lock_directory_others_may_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv("REWARDKIT_SANDBOX_UID_DIR", str(shared))
    with pytest.raises(RuntimeError, match="writable by it alone"):
        UidBlock(1)
