"""The store lock without flock (issue 24): O_EXCL lock file, heartbeat, stale takeover, live refusal.

Every test here runs with flock unavailable, as on Lustre mounted without `-o flock`."""

import errno
import fcntl
import io
import json
import socket
import subprocess
import sys
import time

import pytest

from spec_files import write_spec
from seqphase.cli import main
from seqphase.core.errors import StoreError
from seqphase.results import lock as lock_module
from seqphase.results.lock import LOCK_NAME, StoreLock, hold, read_holder
from seqphase.results.store import Store


@pytest.fixture(autouse=True)
def no_flock(monkeypatch):
    def flock(*args, **kwargs):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", flock)


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "s.zarr").check(create=True)


def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def plant(store, **info):
    (store.path / LOCK_NAME).write_text(json.dumps(info))


def test_lock_held_refused_released(store):
    with store.lock():
        info = read_holder(store.path / LOCK_NAME)
        assert info["host"] == socket.gethostname() and info["pid"] > 0 and info["heartbeat"] <= time.time()
        with pytest.raises(StoreError, match=f"pid {info['pid']} on {info['host']}"):
            store.check_unlocked()
        with pytest.raises(StoreError, match="another seqphase driver is writing this store"):
            with store.lock():
                pass
    assert not (store.path / LOCK_NAME).exists()
    store.check_unlocked()


def test_live_lock_of_another_process_is_refused_naming_host_and_pid(store, tmp_path):
    spec = write_spec(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        plant(store, host=socket.gethostname(), pid=other.pid, proc_start=lock_module.process_start(other.pid),
              started_at="2026-01-01T00:00:00+00:00", heartbeat=time.time(), token="x")
        code = main(["run", str(spec), "--store", str(store.path), "--workers", "1"])
    finally:
        other.kill()
        other.wait()
    assert code == 2
    assert read_holder(store.path / LOCK_NAME)["pid"] == other.pid  # untouched
    # A holder on another host with a fresh heartbeat: refused too, and the line says when it is taken over.
    plant(store, host="node042", pid=4242, heartbeat=time.time() - 5, token="y")
    with pytest.raises(StoreError) as info:
        StoreLock(store.path).acquire()
    assert "pid 4242 on node042" in info.value.one_line() and "120 s" in info.value.one_line()
    # Another machine with the same host name (another boot id): its pid means nothing here; live.
    plant(store, host=socket.gethostname(), boot_id="another-machine", pid=dead_pid(), heartbeat=time.time(),
          token="z")
    with pytest.raises(StoreError, match="another seqphase driver"):
        store.check_unlocked()


@pytest.mark.parametrize("holder", ["dead pid on this host", "no heartbeat (other host)", "older seqphase",
                                    "pid reused"])
def test_stale_lock_is_taken_over_with_a_notice(store, holder):
    if holder == "dead pid on this host":
        plant(store, host=socket.gethostname(), pid=dead_pid(), heartbeat=time.time(), token="old")
    elif holder == "no heartbeat (other host)":
        plant(store, host="node042", pid=4242, heartbeat=time.time() - 1000, token="old")
    elif holder == "older seqphase":
        (store.path / LOCK_NAME).write_text(f"pid {dead_pid()} on elsewhere")
    else:  # a live pid on this host that is not the process that took the lock
        plant(store, host=socket.gethostname(), pid=1, proc_start=-1, heartbeat=time.time(), token="old")
    stream = io.StringIO()
    with hold(store.path, stream=stream) as lock:
        assert read_holder(store.path / LOCK_NAME)["token"] == lock.token
    notes = stream.getvalue().splitlines()
    assert len(notes) == 1 and notes[0].startswith("seqphase: note: took over the store lock of"), notes
    assert not (store.path / LOCK_NAME).exists()
    assert not list(store.path.glob(f"{LOCK_NAME}*"))  # nothing left beside it


def test_heartbeat_is_refreshed_and_a_lost_lock_is_said(store, monkeypatch):
    monkeypatch.setattr(lock_module, "HEARTBEAT_S", 0.05)
    stream = io.StringIO()
    with hold(store.path, stream=stream):
        first = read_holder(store.path / LOCK_NAME)["heartbeat"]
        deadline = time.time() + 5
        while read_holder(store.path / LOCK_NAME)["heartbeat"] == first and time.time() < deadline:
            time.sleep(0.02)
        assert read_holder(store.path / LOCK_NAME)["heartbeat"] > first
        plant(store, host="node042", pid=4242, heartbeat=time.time(), token="thief")
        deadline = time.time() + 5
        while "warning" not in stream.getvalue() and time.time() < deadline:
            time.sleep(0.02)
    assert "was taken by pid 4242 on node042" in stream.getvalue()
    assert read_holder(store.path / LOCK_NAME)["token"] == "thief"  # the other holder's lock is left alone


def test_run_without_flock_resumes_after_a_killed_driver(tmp_path, client, monkeypatch):
    """A driver killed without releasing (its lock file left, its pid dead): the next run takes over and
    completes the sweep."""
    from seqphase.cluster import run_sweep
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    store = Store(tmp_path / "s.zarr").check(create=True)
    plant(store, host=socket.gethostname(), pid=dead_pid(), heartbeat=time.time(), token="killed")
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path))))
    with store.lock():
        summary = run_sweep(plan, store.prepare(plan), client, progress=False)
    assert summary.done == len(plan.points) and not (store.path / LOCK_NAME).exists()
