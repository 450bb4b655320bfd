"""Watching a running sweep from outside (the tests of the SLURM backend and of TLS): wait for a condition,
read the scheduler address the driver recorded, try to connect as another user would."""

import time

PEM_MARKERS = (b"-----BEGIN", b"PRIVATE KEY")


def wait_until(predicate, timeout, what, poll=0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def run_scheduler(store, name="toy"):
    """The scheduler address the running driver recorded in the store's ledger (None until it has)."""
    from seqphase.results.store import Store

    try:
        runs = Store(store).open_sweep(name).attrs.get("runs", [])
    except Exception:  # not created yet
        return None
    return runs[-1].get("scheduler") if runs else None


def refused(address, security=None):
    """Whether a client is refused by the scheduler at `address` (within a few seconds)."""
    from distributed import Client

    try:
        client = Client(address, security=security, timeout="5s")
    except Exception:  # noqa: BLE001 - FatalCommClosedError, CommClosedError, OSError, TimeoutError
        return True
    client.close()
    return False


def assert_no_pem(folder):
    """No certificate or key text in any file under `folder` (a store, a log directory)."""
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(marker in data for marker in PEM_MARKERS), path
