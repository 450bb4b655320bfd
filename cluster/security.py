"""Who may connect to a scheduler: TLS for every scheduler seqphase starts, credentials for attaching
to one, and the dashboard bound to localhost.

A Dask client that reaches a scheduler can run any Python as the sweep's owner on every worker, so no
scheduler seqphase starts listens on plain tcp:// unless the user says `--insecure-no-tls`:

- the embedded LocalCluster gets a fresh self-signed certificate and key (`Security.temporary()`)
  that live in memory only: its worker processes receive them from their nanny, not through a file,
  an environment variable or a command line;
- a SLURM run (the foreground driver, or the driver job of `seqphase submit`) writes a fresh one as
  files `ca.pem`, `cert.pem`, `key.pem` (0600) into a new 0700 directory `seqphase-tls-XXXXXXXX` under
  the profile's `credentials_directory` (default: its `log_directory`), which the worker nodes must
  share; the worker job scripts name these files by path only (`--tls-ca-file`, `--tls-cert`,
  `--tls-key`), so replacement jobs join with them too, and the directory is removed when the run ends.

The certificate is its own CA: the scheduler, the workers and the driver's client present it and
accept only it, so a client without these files is refused (as `tls://` by the certificate check,
as `tcp://` because the port speaks TLS only). The root of trust is the file system's permissions.

Attaching (`--cluster tls://HOST:PORT`) takes the client's credentials from `--tls-dir DIR` (the same
three file names; a run's credentials directory works) or from Dask's configuration
(`distributed.comm.tls.ca-file`, `.client.cert`, `.client.key`). `--cluster tcp://` to an address that
is not loopback warns once that the connection is unauthenticated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import shutil
import socket
import stat
import sys
import tempfile
from pathlib import Path

from seqphase.core.errors import ClusterError

CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "cert.pem", "key.pem"
CREDENTIALS_PREFIX = "seqphase-tls-"
INSECURE_FLAG = "--insecure-no-tls"
TLS_DIR_FLAG = "--tls-dir"
DASHBOARD_FLAG = "--dashboard"
LOCALHOST = "127.0.0.1"
DASHBOARD_ADDRESS = f"{LOCALHOST}:0"  # a free port on loopback only
_CONFIG_KEYS = {"ca_file": "distributed.comm.tls.ca-file", "cert": "distributed.comm.tls.client.cert",
                "key": "distributed.comm.tls.client.key"}
_warned = set()  # addresses already warned about (once per process)


def _refuse(field, problem, fix):
    raise ClusterError(field, problem, fix)


# -- credentials as files ---------------------------------------------------------------------------
def files_security(folder, roles=("client", "scheduler", "worker")):
    """A Security that names the three files of `folder` by path, for the given roles, TLS required."""
    from distributed.security import Security

    folder = Path(folder)
    kwargs = {"tls_ca_file": str(folder / CA_FILE)}
    for role in roles:
        kwargs[f"tls_{role}_cert"] = str(folder / CERT_FILE)
        kwargs[f"tls_{role}_key"] = str(folder / KEY_FILE)
    return Security(require_encryption=True, **kwargs)


def temporary_security():
    """A fresh self-signed certificate and key in memory (`distributed.security.Security.temporary`)."""
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError:
        _refuse("TLS", "the `cryptography` package is missing (it makes the run's certificate)",
                f"pip install cryptography, or run without TLS: {INSECURE_FLAG}")


def write_credentials(security, folder):
    """Write the PEM texts of an in-memory `security` as ca.pem, cert.pem, key.pem (0600) into `folder`."""
    folder = Path(folder)
    for name, text in ((CA_FILE, security.tls_ca_file), (CERT_FILE, security.tls_client_cert),
                       (KEY_FILE, security.tls_client_key)):
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
    return folder


def credentials_config(folder):
    """Dask configuration naming the client's credentials in `folder`: `dask.config.set(...)` of it lets
    a client (or `--cluster tls://...` without --tls-dir) attach to the run they belong to."""
    folder = Path(folder)
    return {_CONFIG_KEYS["ca_file"]: str(folder / CA_FILE), _CONFIG_KEYS["cert"]: str(folder / CERT_FILE),
            _CONFIG_KEYS["key"]: str(folder / KEY_FILE)}


def check_parent(parent, field):
    """The directory a run's credentials directory is created in: it exists, is a directory we can
    write, and no other user may delete or replace what is in it (world-writable without sticky bit)."""
    parent = Path(parent)
    try:
        mode = parent.stat().st_mode
    except FileNotFoundError:
        _refuse(field, f"{parent} does not exist",
                "create it on a file system the worker nodes share, or leave credentials_directory out")
    except OSError as exc:
        _refuse(field, f"cannot read {parent} ({exc.strerror or exc})", "give a directory you own")
    if not stat.S_ISDIR(mode):
        _refuse(field, f"{parent} is not a directory", "give a directory on a file system the worker nodes share")
    if not os.access(parent, os.W_OK | os.X_OK):
        _refuse(field, f"cannot write in {parent}", "give a directory you can write (the run's credentials go there)")
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        _refuse(field, f"{parent} is writable by every user (mode {stat.S_IMODE(mode):04o}): another user could "
                "replace the run's credentials", f"chmod o-w {parent}, or give a directory of your own")
    return parent


@contextlib.contextmanager
def run_credentials(parent, field="credentials_directory"):
    """Per-run credentials on a shared file system: a new 0700 directory under `parent` holding a fresh
    certificate and key (0600); yields (directory, Security naming the files); removes it on exit."""
    check_parent(parent, field)
    security = temporary_security()
    folder = Path(tempfile.mkdtemp(prefix=CREDENTIALS_PREFIX, dir=parent))  # mode 0700
    try:
        write_credentials(security, folder)
        yield folder, files_security(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _readable(path, field, what):
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        _refuse(field, f"{what} {path} does not exist",
                f"give a directory holding {CA_FILE}, {CERT_FILE} and {KEY_FILE} (e.g. the run's credentials directory)")
    except OSError as exc:
        _refuse(field, f"cannot read {what} {path} ({exc.strerror or exc})", "make it a file readable by you")


def _owner_only(path, field, fix):
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        _refuse(field, f"{path} is open to other users (mode {mode:04o})", fix)


def credentials_from_dir(folder, field=TLS_DIR_FLAG):
    """The client's Security from a directory holding ca.pem, cert.pem, key.pem, readable by its owner only."""
    path = Path(os.path.expanduser(str(folder)))
    try:
        is_dir = path.is_dir()
        exists = is_dir or path.exists()
    except OSError as exc:
        _refuse(field, f"cannot read {path} ({exc.strerror or exc})", "give a directory readable by you")
    if not exists:
        _refuse(field, f"{path} does not exist",
                f"give the directory holding {CA_FILE}, {CERT_FILE} and {KEY_FILE} (a run prints its own)")
    if not is_dir:
        _refuse(field, f"{path} is not a directory", f"give the directory holding {CA_FILE}, {CERT_FILE}, {KEY_FILE}")
    _owner_only(path, field, f"chmod 700 {path}")
    for name in (CA_FILE, CERT_FILE, KEY_FILE):
        _readable(path / name, field, name)
    _owner_only(path / KEY_FILE, field, f"chmod 600 {path / KEY_FILE}")
    return files_security(path, roles=("client",))


def credentials_from_config(address):
    """The client's Security from Dask's configuration (distributed.comm.tls.*), or a one-line error."""
    import dask
    from distributed.security import Security

    values = {k: dask.config.get(key, default=None) for k, key in _CONFIG_KEYS.items()}
    if not values["ca_file"] or not values["cert"]:
        _refuse("--cluster", f"{address} needs TLS credentials and none were given",
                f"give {TLS_DIR_FLAG} DIR ({CA_FILE}, {CERT_FILE}, {KEY_FILE}) or set " + ", ".join(_CONFIG_KEYS.values())
                + " in Dask's configuration")
    for k, value in values.items():
        if value and "\n" not in value:  # a path (in-memory PEM text holds newlines)
            _readable(Path(os.path.expanduser(value)), _CONFIG_KEYS[k], k)
    return Security(require_encryption=True)


# -- addresses ----------------------------------------------------------------------------------------
def _split(address):
    scheme, _, rest = address.rpartition("://")
    host = rest.rsplit(":", 1)[0] if ":" in rest else rest
    return (scheme or "tcp"), host.strip("[]")


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
    except (OSError, ValueError):
        return False


def warn_unauthenticated(address, stream=None):
    """Warn (once per address and process) that a tcp:// connection off this machine is unauthenticated."""
    if address in _warned:
        return False
    _warned.add(address)
    print(f"seqphase: warning: {address} is plain tcp://, unauthenticated and unencrypted: anyone who can reach "
          f"it can run code on its workers and read the results; prefer a tls:// scheduler ({TLS_DIR_FLAG} DIR)",
          file=stream or sys.stderr)
    return True


# -- what the user asked for ----------------------------------------------------------------------------
@dataclasses.dataclass
class Access:
    """How a run's scheduler is protected and reached: `insecure` (plain tcp://, for schedulers seqphase
    starts), `tls_dir` (client credentials for attaching to a tls:// one), `dashboard` (serve it on
    127.0.0.1 of the driver's node and print the ssh tunnel to it)."""

    insecure: bool = False
    tls_dir: str | None = None
    dashboard: bool = False

    def check(self, cluster, starts_scheduler):
        """Refuse options that do not apply to `cluster`; for an address, return its client Security
        (None for tcp://). Raises ClusterError before anything starts."""
        if starts_scheduler:
            if self.tls_dir is not None:
                _refuse(TLS_DIR_FLAG, "names credentials for attaching to a running tls:// scheduler; seqphase makes "
                        "fresh ones for the schedulers it starts", "leave it out, or give --cluster tls://HOST:PORT")
            return None
        for flag, given in ((INSECURE_FLAG, self.insecure), (DASHBOARD_FLAG, self.dashboard)):
            if given:
                _refuse(flag, f"applies to the schedulers seqphase starts, not to {cluster}",
                        "leave it out (the running scheduler has its own settings)")
        scheme, host = _split(cluster)
        if scheme == "tls":
            return credentials_from_dir(self.tls_dir) if self.tls_dir is not None else credentials_from_config(cluster)
        if self.tls_dir is not None:
            _refuse(TLS_DIR_FLAG, f"applies to tls:// addresses, not to {cluster}", "give --cluster tls://HOST:PORT")
        if scheme == "tcp" and not is_loopback(host):
            warn_unauthenticated(cluster)
        return None

    def warn_if_insecure(self, stream=None):
        if self.insecure:
            print(f"seqphase: warning: {INSECURE_FLAG}: the scheduler listens on plain tcp://, without authentication "
                  "or encryption: any user who can reach its port (on a shared node every local user) can run code as "
                  "you on its workers and read or change the results", file=stream or sys.stderr)

    def local_kwargs(self):
        """Keyword arguments of LocalCluster: TLS with in-memory credentials, or plain tcp://."""
        self.warn_if_insecure()
        # The scheduler's HTTP server (health, metrics; the dashboard's pages only with --dashboard) on a free
        # loopback port: never on another interface, never in a fight over 8787 with other users.
        http = {"dashboard_address": DASHBOARD_ADDRESS, "scheduler_kwargs": {"dashboard": self.dashboard}}
        if self.insecure:
            return {"protocol": "tcp://", **http}
        return {"protocol": "tls://", "security": temporary_security(), **http}

    @contextlib.contextmanager
    def run_security(self, parent, field="credentials_directory"):
        """For a SLURM run: yields (credentials directory, Security), or (None, None) with --insecure-no-tls."""
        self.warn_if_insecure()
        if self.insecure:
            yield None, None
            return
        with run_credentials(parent, field) as pair:
            yield pair

    def announce_dashboard(self, link, stream=None):
        """Print where the dashboard is and the ssh tunnel that reaches it (when --dashboard)."""
        if not self.dashboard or not link:
            return
        from urllib.parse import urlparse

        url = urlparse(link)  # Dask's link names the scheduler's interface; the server listens on loopback only
        port, path, host = url.port, url.path or "/", socket.gethostname()
        print(f"seqphase: dashboard http://{LOCALHOST}:{port}{path} on {host}, bound to {LOCALHOST} (this node only); "
              f"from your machine: ssh -N -L {port}:{LOCALHOST}:{port} {host} (add -J LOGIN_NODE if {host} is a "
              f"compute node), then open http://localhost:{port}{path}", file=stream or sys.stderr)
