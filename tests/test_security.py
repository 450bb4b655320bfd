"""TLS for every scheduler seqphase starts (cluster/security.py), on the real distributed scheduler: a run's
scheduler refuses clients without its credentials, as tls:// and as tcp://; no key lands in the store or the
output; attaching takes credentials from --tls-dir or Dask's configuration; bad credentials are one line."""

import os
import stat

import dask
import pytest
from distributed.security import Security

from seqphase.cli import main
from seqphase.cluster.security import Access, check_parent, credentials_from_dir, run_credentials
from seqphase.core.errors import ClusterError
from seqphase.results.store import DONE, Store
from run_probe import assert_no_pem, dashboard_on_loopback_only, refused, run_scheduler, running_seqphase, wait_until
from spec_files import write_spec

def toy_run(tmp_path, *options, n=8):
    """A run of n toy points of 1 s each in the background (run_probe.running_seqphase): (context, store, log)."""
    spec = write_spec(tmp_path, alpha=f"0.5:2:{n}", extra_params="sleep = 1.0")
    store, log = tmp_path / "s.zarr", tmp_path / "driver.log"
    return running_seqphase(["run", spec, "--store", store, "--no-progress", *options], tmp_path, log), store, log


def test_local_run_listens_on_tls_only_and_refuses_clients_without_its_credentials(tmp_path, marker_dir):
    """The default `seqphase run` (embedded LocalCluster): the ledger records tls://127.0.0.1; a client with
    other credentials (tls://) and a plain client (tcp://, same port) are refused while the sweep runs on."""
    run, store, log = toy_run(tmp_path, "--workers", "2")
    with run as proc:
        address = wait_until(lambda: run_scheduler(store), 60, "the run's ledger entry")
        assert address.startswith("tls://127.0.0.1:"), address
        assert refused(address, Security.temporary())  # someone else's certificate: the handshake fails
        assert refused(address.replace("tls://", "tcp://"))  # plain tcp on the same port
        assert refused(address)  # no credentials at all
    output = log.read_text()
    assert proc.returncode == 0, output
    status, _ = Store(store).open_sweep("toy").ledger()
    assert (status == DONE).all() and status.size == 8
    assert "seqphase: warning" not in output and "UserWarning" not in output and "-----BEGIN" not in output
    assert_no_pem(store)


def test_insecure_opt_out_warns_and_dashboard_is_on_loopback_only(tmp_path, marker_dir):
    """`--insecure-no-tls` runs on tcp:// and says what it gives up; `--dashboard` serves it on 127.0.0.1
    only and prints the ssh tunnel command."""
    run, store, log = toy_run(tmp_path, "--workers", "1", "--insecure-no-tls", "--dashboard", n=4)
    with run as proc:
        dashboard_on_loopback_only(log)
        address = wait_until(lambda: run_scheduler(store), 60, "the run's ledger entry")
        assert address.startswith("tcp://127.0.0.1:")
    output = log.read_text()
    assert proc.returncode == 0, output
    assert "--insecure-no-tls: the scheduler listens on plain tcp://, without authentication" in output


def test_attach_with_tls_dir_and_with_dask_config(tmp_path, client):
    """`--cluster tls://...` attaches with the credentials of --tls-dir, or of Dask's configuration."""
    address = client.scheduler.address
    assert address.startswith("tls://")
    folder = os.path.dirname(dask.config.get("distributed.comm.tls.ca-file"))  # conftest's client credentials
    spec = write_spec(tmp_path, alpha=[0.5, 1.0])
    store = tmp_path / "s.zarr"
    with dask.config.set({"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None,
                          "distributed.comm.tls.client.key": None}):
        assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--tls-dir", folder,
                     "--no-progress"]) == 0
    assert run_scheduler(store) == address
    spec = write_spec(tmp_path, alpha=[0.5, 1.0, 1.5])
    assert main(["run", str(spec), "--store", str(store), "--cluster", address, "--no-progress"]) == 0
    status, _ = Store(store).open_sweep("toy").ledger()
    assert (status == DONE).all() and status.size == 3


def credentials(tmp_path, folder_mode=0o700, key_mode=0o600, skip=(), ca_as_dir=False):
    folder = tmp_path / "creds"
    folder.mkdir()
    for name in ("ca.pem", "cert.pem", "key.pem"):
        if name in skip:
            continue
        if name == "ca.pem" and ca_as_dir:
            (folder / name).mkdir()
            continue
        (folder / name).write_text("x")
        os.chmod(folder / name, key_mode if name == "key.pem" else 0o644)
    os.chmod(folder, folder_mode)
    return folder


NO_CONFIG = {"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None,
             "distributed.comm.tls.client.key": None}


@pytest.mark.parametrize("cluster, make, says", [
    ("tls://127.0.0.1:9", lambda p: p / "nowhere", "nowhere does not exist"),
    ("tls://127.0.0.1:9", lambda p: (p / "f").write_text("") or p / "f", "is not a directory"),
    ("tls://127.0.0.1:9", lambda p: credentials(p, folder_mode=0o755), "is open to other users (mode 0755)"),
    ("tls://127.0.0.1:9", lambda p: credentials(p, key_mode=0o640), "key.pem is open to other users (mode 0640)"),
    ("tls://127.0.0.1:9", lambda p: credentials(p, skip=("key.pem",)), "key.pem"),
    ("tls://127.0.0.1:9", lambda p: credentials(p, ca_as_dir=True), "cannot read ca.pem"),
    ("tls://127.0.0.1:9", None, "needs TLS credentials and none were given"),
    ("local", lambda p: credentials(p), "--tls-dir: names credentials for attaching"),
    ("tcp://127.0.0.1:9", lambda p: credentials(p), "--tls-dir: applies to tls:// addresses"),
    ("tcp://127.0.0.1:9", "--insecure-no-tls", "--insecure-no-tls: applies to the schedulers seqphase starts"),
    ("tcp://127.0.0.1:9", "--dashboard", "--dashboard: applies to the schedulers seqphase starts"),
])
def test_bad_credentials_and_options_are_one_line(tmp_path, capsys, cluster, make, says):
    spec = write_spec(tmp_path)
    store = tmp_path / "s.zarr"
    extra = [make] if isinstance(make, str) else [] if make is None else ["--tls-dir", str(make(tmp_path))]
    with dask.config.set(NO_CONFIG):
        code = main(["run", str(spec), "--store", str(store), "--cluster", cluster, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("seqphase: error: ") and says in err[0], err
    assert not store.exists()


def test_tcp_off_this_machine_warns_once(capsys):
    access = Access()
    for address in ("tcp://127.0.0.1:8786", "localhost:8786", "tcp://[::1]:8786"):
        assert access.check(address, starts_scheduler=False) is None
    assert capsys.readouterr().err == ""
    for _ in range(2):
        access.check("tcp://192.0.2.1:8786", starts_scheduler=False)  # TEST-NET-1: not this machine
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tcp://192.0.2.1:8786 is plain tcp://, unauthenticated" in err[0]


def test_run_credentials_are_owner_only_files_removed_at_the_end(tmp_path):
    with run_credentials(tmp_path) as (folder, security):
        assert folder.parent == tmp_path and stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert sorted(p.name for p in folder.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.iterdir())
        assert security.tls_worker_key == str(folder / "key.pem")  # workers get paths, never PEM text
        assert credentials_from_dir(folder).tls_client_cert == str(folder / "cert.pem")
    assert not folder.exists()
    with pytest.raises(ClusterError, match="does not exist"):
        check_parent(tmp_path / "nowhere", "credentials_directory")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(ClusterError, match="writable by every user"):
        check_parent(shared, "credentials_directory")
    os.chmod(shared, 0o1777)  # like /tmp: others cannot remove or replace what is ours
    assert check_parent(shared, "credentials_directory") == shared
