"""Watching a running sweep from outside (the tests of the SLURM backend and of TLS): wait for a condition,
read the scheduler address the driver recorded, try to connect as another user would."""

import contextlib
import subprocess
import sys
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


@contextlib.contextmanager
def running_seqphase(args, cwd, log, timeout=120):
    """`python -m seqphase.cli ARGS` in the background (output into the file `log`: a full pipe would block
    the driver and its scheduler); on leaving, wait for it to end (killed if it is still running)."""
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "seqphase.cli", *map(str, args)], cwd=cwd, stdout=handle,
                                stderr=subprocess.STDOUT)
    try:
        yield proc
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def dashboard_on_loopback_only(log):
    """The dashboard port a run printed (`--dashboard`) to `log`, after checking that its HTTP server answers
    on 127.0.0.1 and that none of the machine's other addresses reaches it."""
    import socket
    import urllib.request

    line = wait_until(lambda: [ln for ln in log.read_text().splitlines() if "seqphase: dashboard" in ln], 60,
                      "the dashboard line")[0]
    port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
    assert f"ssh -N -L {port}:127.0.0.1:{port} " in line, line
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
        assert response.read() == b"ok"
    import psutil  # a dependency of distributed

    others = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs if a.family == socket.AF_INET}
    others = {host for host in others if not host.startswith("127.")}
    for host in others:
        try:
            socket.create_connection((host, port), timeout=5).close()
        except OSError:
            continue
        raise AssertionError(f"the dashboard answers on {host}:{port}")
    return port
