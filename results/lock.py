"""One driver per store: a lock file created with O_EXCL, with a heartbeat; no flock needed.

`<store>/.seqphase-driver.lock` exists exactly while a driver (or `migrate`) holds the store. It is
created with O_CREAT | O_EXCL, which every POSIX file system does atomically (Lustre without
`-o flock`, NFS v3+ included), and holds JSON: host, pid, the process's start time (so a reused pid
is not mistaken for the holder), when the lock was taken, a heartbeat (seconds since the epoch) and
a random token. The holder rewrites the heartbeat every HEARTBEAT_S seconds (atomically: temporary
file and rename).

A lock is stale, and is taken over with a one-line notice, when
- its holder ran on this host (same host name and boot id) and that process is gone (or the pid now
  belongs to another process), or
- its heartbeat is older than STALE_S seconds (a holder on another host that died, or a hung one);
  a holder on another host can only be judged this way, so clocks are trusted to within STALE_S.
A live lock is refused naming its host and pid. A takeover renames the stale file aside first
(atomic: of two drivers taking over at once only one rename succeeds) and checks that what it moved
is the lock it judged stale. Lock files written by older seqphase versions (text "pid N on HOST",
left in place after the run, guarded by flock) count as stale unless their flock is held.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

from seqphase.core.errors import StoreError

LOCK_NAME = ".seqphase-driver.lock"
HEARTBEAT_S = 10.0   # the holder refreshes its heartbeat this often
STALE_S = 120.0      # a heartbeat older than this: the holder is taken to be dead


def process_start(pid):
    """The start time of a process on this host (clock ticks since boot, /proc), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(text.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def boot_id():
    """This kernel's boot id (Linux), so that two machines that share a host name are not taken for one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(path):
    """What the lock file says: a dict (JSON of a current lock, or {'legacy': True, ...} for an older
    seqphase's text), {} if it cannot be parsed (being written), None if there is no lock file. StoreError
    when it is no regular file or larger than a lock can be (a FIFO, /dev/zero behind a link): `safe_io`."""
    from seqphase.results.safe_io import loads_json, read_bytes

    path = Path(path)
    fix = f"if no seqphase driver is running on this store, delete {path}"
    try:
        text = read_bytes(path, "lock", below=path.parent, fix=fix).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        info = loads_json(text)
        return info if isinstance(info, dict) else {}
    except ValueError:
        pass
    words = text.split()
    if len(words) == 4 and words[0] == "pid" and words[2] == "on" and words[1].isdigit():
        return {"legacy": True, "pid": int(words[1]), "host": words[3]}
    return {"legacy": True} if not text.strip() else {}


def _legacy_flock_free(path):
    """An older seqphase held its lock with flock: free if we can take the flock (or flock is not
    supported here, in which case no older driver could have run on this file system)."""
    import fcntl

    try:
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return True
    except FileNotFoundError:
        return True


def judge(path, info, now=None):
    """'' if the lock described by `info` is live, else why it is stale."""
    now = time.time() if now is None else now
    host, pid = info.get("host"), info.get("pid")
    if info.get("legacy"):
        return "left by an older seqphase, whose flock is free" if _legacy_flock_free(path) else ""
    same_machine = info.get("boot_id") in (None, boot_id())
    if host == socket.gethostname() and same_machine and isinstance(pid, int):
        if not pid_alive(pid):
            return f"process {pid} on {host} is gone"
        start = info.get("proc_start")
        if start is not None and process_start(pid) not in (None, start):
            return f"pid {pid} on {host} is now another process"
    beat = info.get("heartbeat")
    if not isinstance(beat, (int, float)):  # being written, or garbage: judge by the file's age
        try:
            beat = os.stat(path).st_mtime
        except FileNotFoundError:
            return "gone"
    if now - beat > STALE_S:
        return f"no heartbeat for {now - beat:.0f} s (more than {STALE_S:.0f} s)"
    return ""


def describe(info):
    if not info or "pid" not in info:
        return "another process"
    text = f"pid {info['pid']} on {info.get('host', '?')}"
    if info.get("started_at"):
        text += f", since {info['started_at']}"
    return text


def refuse(store_path, info, fix="wait for it to finish (seqphase status), or use another --store"):
    return StoreError(str(store_path), f"another seqphase driver is writing this store ({describe(info)})", fix)


def check_unlocked(store_path):
    """Refuse (StoreError) while a live lock is held; takes nothing, writes nothing."""
    path = Path(store_path) / LOCK_NAME
    info = read_holder(path)
    if info is not None and not judge(path, info):
        raise refuse(store_path, info)


class StoreLock:
    """The lock of one store, held by this process (see the module docstring)."""

    def __init__(self, store_path, stream=None):
        self.store_path = Path(store_path)
        self.path = self.store_path / LOCK_NAME
        self.stream = stream or sys.stderr
        self.token = uuid.uuid4().hex
        self.info = None
        self.lost = False
        self._stop = threading.Event()
        self._thread = None

    def _content(self):
        return json.dumps(self.info).encode()

    def acquire(self):
        from seqphase.results.schema import now_iso

        self.info = {"host": socket.gethostname(), "boot_id": boot_id(), "pid": os.getpid(),
                     "proc_start": process_start(os.getpid()),
                     "started_at": now_iso(), "heartbeat": time.time(), "token": self.token}
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            try:
                os.write(fd, self._content())
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                self.path.unlink(missing_ok=True)
                raise
            os.close(fd)
            from seqphase.results.durable import fsync_dir

            fsync_dir(self.store_path)
            self._thread = threading.Thread(target=self._beat, name="seqphase-lock-heartbeat", daemon=True)
            self._thread.start()
            return self
        raise refuse(self.store_path, read_holder(self.path) or {})

    def _take_over_if_stale(self):
        info = read_holder(self.path)
        if info is None:
            return  # released meanwhile: try again
        reason = judge(self.path, info)
        if not reason:
            raise refuse(self.store_path, info, fix="wait for it to finish (seqphase status), or use another "
                         f"--store; if it is dead, its lock is taken over once its heartbeat is {STALE_S:.0f} s old")
        aside = self.path.with_name(f"{LOCK_NAME}.stale.{self.token}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # another driver moved it first
        if read_holder(aside) != info:  # moved a lock taken meanwhile by someone else: give it back
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            aside.unlink(missing_ok=True)
            return
        aside.unlink(missing_ok=True)
        self.stream.write(f"seqphase: note: took over the store lock of {describe(info)} ({reason})\n")

    def _beat(self):
        from seqphase.results.durable import write_file

        while not self._stop.wait(HEARTBEAT_S):
            current = read_holder(self.path)
            if not current or current.get("token") != self.token:
                if not self.lost:
                    self.lost = True
                    self.stream.write(f"seqphase: warning: the store lock at {self.path} was taken by "
                                      f"{describe(current)}; this driver's writes are no longer exclusive\n")
                continue
            self.info["heartbeat"] = time.time()
            try:
                write_file(self.path, self._content())
            except OSError:
                pass  # a full disk: the next beat tries again (the lock is stale only after STALE_S)

    def release(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        current = read_holder(self.path)
        if current and current.get("token") == self.token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


@contextlib.contextmanager
def hold(store_path, stream=None):
    lock = StoreLock(store_path, stream).acquire()
    try:
        yield lock
    finally:
        lock.release()

