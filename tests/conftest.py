"""Shared fixtures: the toy user model on the workers' path and a real LocalCluster."""

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Workers are separate processes: they find the toy model through PYTHONPATH, set before any cluster.
os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def marker_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("toymarkers")
    os.environ["TOYMODEL_MARKERS"] = str(path)
    return path


@pytest.fixture(scope="session")
def client(marker_dir, tmp_path_factory):
    """A real distributed LocalCluster with 2 worker processes, shared by the integration tests. Like every
    cluster seqphase starts it speaks TLS only; its credentials are written to a 0700 folder named in Dask's
    configuration, so tests attach to it by address (`--cluster tls://...`) as a user with them would."""
    import dask

    from seqphase.cluster import connect
    from seqphase.cluster.security import credentials_config, write_credentials

    with connect("local", workers=2) as client:
        folder = tmp_path_factory.mktemp("tls")
        os.chmod(folder, 0o700)
        write_credentials(client.security, folder)
        with dask.config.set(credentials_config(folder)):
            yield client
