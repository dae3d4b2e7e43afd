"""One farm run per workspace: a second is refused naming the holder; a crashed holder's lock is taken over."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from datafarm.workspace.lock import (LOCK_FILE, WorkspaceLocked, acquire, check_unlocked, farm_lock, read_holder,
                                     release, renew)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_second_run_is_refused_naming_the_holder(tmp_path):
    with farm_lock(tmp_path, "flow run 'first' (123)") as holder:
        assert read_holder(tmp_path).token == holder.token
        with pytest.raises(WorkspaceLocked, match=r"flow run 'first' \(123\).*pid %d" % os.getpid()):
            acquire(tmp_path, "second")
        with pytest.raises(WorkspaceLocked):
            check_unlocked(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()
    check_unlocked(tmp_path)  # negative control: free again


def test_a_lock_held_by_another_live_process_is_refused_and_taken_over_once_it_dies(tmp_path):
    script = ("import sys, time; from datafarm.workspace.lock import acquire; "
              f"acquire({str(tmp_path)!r}, 'holder-process'); print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(WorkspaceLocked, match="holder-process"):
            acquire(tmp_path, "second")
    finally:
        child.kill()
        child.wait()
    taken = acquire(tmp_path, "after the crash")  # its pid is dead on this host: stale
    assert read_holder(tmp_path).run == "after the crash" and taken.pid == os.getpid()


def test_a_lock_past_its_lease_is_stale_even_on_another_host(tmp_path):
    now = time.time()
    record = {"run": "elsewhere", "pid": 1, "host": "another-host", "taken": now - 100, "renewed": now - 100,
              "lease_s": 30.0, "token": "t"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(record))
    acquire(tmp_path, "mine")
    assert read_holder(tmp_path).run == "mine"
    # Negative control: a recent renewal on another host binds (its pid cannot be checked from here).
    (tmp_path / LOCK_FILE).write_text(json.dumps({**record, "renewed": time.time()}))
    with pytest.raises(WorkspaceLocked, match="elsewhere"):
        acquire(tmp_path, "mine")


def test_a_dead_pid_on_this_host_is_stale(tmp_path):
    now = time.time()
    (tmp_path / LOCK_FILE).write_text(json.dumps({
        "run": "crashed", "pid": _dead_pid(), "host": socket.gethostname(), "taken": now, "renewed": now,
        "lease_s": 3600.0, "token": "t"}))
    holder = acquire(tmp_path, "next")
    assert read_holder(tmp_path).token == holder.token


def test_a_run_that_lost_its_lock_neither_renews_nor_removes_its_successors(tmp_path):
    first = acquire(tmp_path, "first", lease_s=0.01)
    time.sleep(0.05)
    second = acquire(tmp_path, "second")  # the first looked dead (lease passed)
    assert renew(tmp_path, first) is None
    release(tmp_path, first)
    assert read_holder(tmp_path).token == second.token


def test_the_lock_is_renewed_while_held_and_reentered_by_nested_runs(tmp_path):
    with farm_lock(tmp_path, "outer", lease_s=0.4) as outer:
        time.sleep(0.5)  # past one lease: only the renewals keep it
        assert read_holder(tmp_path).renewed > outer.renewed
        with farm_lock(tmp_path, "inner") as inner:
            assert inner.token == outer.token
        assert read_holder(tmp_path).token == outer.token  # the nested exit did not release it
    assert read_holder(tmp_path) is None
