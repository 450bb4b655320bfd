"""Fixtures of the SLURM tests: a real single-node SLURM started by cluster/dev-slurm/start.sh.

The cluster is private to the test session (its own directory, ports and munged) and stopped by
stop.sh at the end. Where SLURM cannot be installed or started (not root, no apt-get, ...) the tests
that need it are skipped with the script's reason, unless SEQPHASE_REQUIRE_SLURM=1 (CI), where that
is an error.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEV_SLURM = REPO / "cluster" / "dev-slurm"


class LocalSlurm:
    def __init__(self, root):
        self.root = Path(root)
        self.conf = self.root / "etc" / "slurm.conf"

    def env(self):
        return {**os.environ, "SLURM_CONF": str(self.conf), "SLURM_ROOT": str(self.root)}

    def jobcomp(self):
        path = self.root / "log" / "jobcomp.txt"
        return path.read_text() if path.exists() else ""


@pytest.fixture(scope="session")
def slurm(request):
    root = tempfile.mkdtemp(prefix="seqphase-slurm-")  # not under pytest's 0700 tmp: munged must reach it
    os.chmod(root, 0o755)
    env = {**os.environ, "SLURM_ROOT": root, "SLURM_CPUS": "8"}
    try:
        out = subprocess.run([str(DEV_SLURM / "start.sh")], env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        out = subprocess.CompletedProcess([], 3, "", "start.sh did not finish within 600 s")
    if out.returncode != 0:
        subprocess.run([str(DEV_SLURM / "stop.sh"), "--purge"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        reason = f"no local SLURM: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}"
        if os.environ.get("SEQPHASE_REQUIRE_SLURM") == "1" or out.returncode != 3:
            pytest.fail(reason + f"\n{out.stderr}")
        request.config._seqphase_slurm_skipped = reason
        pytest.skip(reason)
    cluster = LocalSlurm(root)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        subprocess.run([str(DEV_SLURM / "stop.sh"), "--purge"], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def slurm_timings(request):
    """Measurements the tests report (printed in the terminal summary)."""
    timings = {}
    request.config._seqphase_slurm_timings = timings
    return timings

