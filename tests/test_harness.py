"""The test suite's own machinery (tests/conftest.py), where a mistake in it fails other tests."""

import multiprocessing

from conftest import _mapped_files, _own_semaphores


def test_a_live_semaphore_is_seen_in_use_by_its_inode():
    """The session's clean-up removes semaphores no process maps. Judged by name, a live one
    looked unused (its creator maps it under glibc's temporary name), and removing it made a
    worker process fail to start ("Nanny failed to start", SemLock FileNotFoundError) in CI.
    By (device, inode), the semaphore this process has just created is in use."""
    lock = multiprocessing.get_context("spawn").Lock()
    name = "sem." + lock._semlock.name.lstrip("/")
    own = _own_semaphores()
    assert name in own, sorted(own)
    assert own[name] in _mapped_files()
    del lock  # (its finalizer unlinks it)
