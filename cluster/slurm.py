"""The SLURM backend: Dask workers as SLURM jobs (dask-jobqueue), and the driver itself as a job.

A small TOML profile describes the worker jobs (every key optional):

    partition = "xeon"                 # sbatch -p
    account = "myproject"              # sbatch -A
    cores = 32                         # CPUs per worker job
    processes = 32                     # Dask worker processes per job, one thread each (default: cores)
    memory = "120GB"                   # per worker job
    walltime = "04:00:00"              # sbatch -t, any SLURM time format
    lifetime = "3h30m"                 # worker --lifetime (default: walltime - 10% - stagger)
    lifetime_stagger = "10m"           # worker --lifetime-stagger (default: 5% of walltime, <= 10m)
    jobs = 4                           # worker jobs kept alive (override: --jobs), or "auto":
    min_jobs = 1                       #   with jobs = "auto", adaptive between min_jobs
    max_jobs = 16                      #   and max_jobs worker jobs (growing while tasks queue)
    job_extra_directives = ["--qos=normal", "--constraint=xeon"]
    job_directives_skip = ["--mem"]    # generated #SBATCH lines containing these are dropped
    job_script_prologue = ["module load python/3.11"]
    interface = "ib0"                  # network interface of scheduler and workers
    local_directory = "$TMPDIR"        # worker scratch
    log_directory = "slurm-logs"       # job logs (relative to where you submit)
    credentials_directory = "~/.seqphase"  # where each run's TLS credentials directory is made
                                       # (default: log_directory; must be shared with the worker nodes)
    death_timeout = 60                 # a worker without scheduler exits after this many seconds
    allowed_failures = 5               # worker deaths a point may cause before it is `failed: killed`
    [driver]                           # the job `seqphase submit` creates for the driver
    partition = "xeon"                 # default: the workers' partition
    walltime = "2-00:00:00"            # default: the partition's default time limit
    cpus = 1
    memory = "4GB"
    job_extra_directives = []

The workers are kept at `jobs` by `adapt(minimum_jobs=jobs, maximum_jobs=jobs)`: a plain `scale()` never
replaces a job lost to `scancel`, walltime or a node failure, adapt does. With `jobs = "auto"` (or
`--jobs auto`) the same adaptive scaling runs between `min_jobs` and `max_jobs`: Dask's scheduler asks for
as many workers as finish the queued tasks within its target duration (5 s), so the allocation grows
while a sweep's seeds, blocks and probes queue and shrinks as they drain (an idle worker is retired after
ADAPT_WAIT_COUNT intervals), and the driver submits enough tasks ahead (`submit_ahead`) for the scheduler
to see the queue. Workers retire themselves at
`lifetime` (staggered, below the walltime), so their tasks move elsewhere before SLURM kills them, and
adapt submits a fresh job in their place.

The scheduler listens on tls:// only, with per-run credentials that the worker jobs name by path
(security.py); `--insecure-no-tls` turns that off. Its HTTP server (dashboard) is bound to 127.0.0.1.

Everything is checked before any job is submitted: the profile's keys and types, then both job scripts
with `sbatch --test-only` (an unknown partition, an unparsable walltime or a directive the site refuses
comes back as one line with SLURM's own message).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from seqphase.cluster.base import WORKER_ENVIRON, Backend, diagnostics_config
from seqphase.core.errors import ClusterError
from seqphase.results.safe_io import read_toml

WORKER_JOB_PREFIX = "seqphase-worker"
DRIVER_JOB_PREFIX = "seqphase-driver"
DEFAULT_JOBS = 2
AUTO = "auto"
DEFAULT_MAX_JOBS = 16
ADAPT_INTERVAL = "2s"
ADAPT_WAIT_COUNT = 3  # intervals a worker is idle (or above the target) before adapt retires it
# How long the cluster waits for a vanished worker to come back before it forgets its job, after
# which adapt submits a replacement (Dask's default, 15 s, made replacements take about 17 s).
LOST_WORKER_TIMEOUT = "4s"


@dataclasses.dataclass
class DriverJob:
    partition: str | None = None
    account: str | None = None
    walltime: str | None = None
    cpus: int = 1
    memory: str = "4GB"
    job_extra_directives: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Profile:
    partition: str | None = None
    account: str | None = None
    cores: int = 1
    processes: int | None = None
    memory: str = "2GB"
    walltime: str = "01:00:00"
    lifetime: str | None = None
    lifetime_stagger: str | None = None
    jobs: int | str = DEFAULT_JOBS    # or AUTO: adaptive between min_jobs and max_jobs
    min_jobs: int = 1
    max_jobs: int = DEFAULT_MAX_JOBS
    job_extra_directives: list = dataclasses.field(default_factory=list)
    job_directives_skip: list = dataclasses.field(default_factory=list)
    job_script_prologue: list = dataclasses.field(default_factory=list)
    interface: str | None = None
    local_directory: str | None = None
    log_directory: str = "slurm-logs"
    credentials_directory: str | None = None
    death_timeout: int = 60
    allowed_failures: int = 5
    python: str | None = None
    driver: DriverJob = dataclasses.field(default_factory=DriverJob)
    source: str = "<default profile>"

    # -- derived ------------------------------------------------------------------------------
    @property
    def n_processes(self):
        return self.processes or self.cores

    @property
    def adaptive(self):
        return self.jobs == AUTO

    def job_range(self):
        """(minimum, maximum) worker jobs: both `jobs` when fixed."""
        return (self.min_jobs, self.max_jobs) if self.adaptive else (self.jobs, self.jobs)

    def submit_ahead(self):
        """Tasks the driver should keep submitted: enough for every worker of the largest allocation
        (the scheduler sizes an adaptive allocation from the tasks it knows of)."""
        return 2 * self.job_range()[1] * self.n_processes

    def lifetimes(self, strict=True):
        """(lifetime, stagger) in seconds, or (None, None) for an unlimited walltime (or, unless
        `strict`, one this parser cannot read: sbatch then gets to say what is wrong with it)."""
        wall = parse_slurm_time(self.walltime)
        if wall is None and not strict:
            return None, None
        if wall is None:
            raise ClusterError(f"{self.source}: walltime", f"cannot read {self.walltime!r} as a SLURM time",
                               "write e.g. \"04:00:00\", \"90\" (minutes) or \"1-12:00:00\"")
        if wall == float("inf"):
            if self.lifetime is None:
                return None, None
            wall = None
        stagger = (_duration(self.lifetime_stagger, "lifetime_stagger", self.source)
                   if self.lifetime_stagger is not None else min(0.05 * (wall or 0), 600.0))
        if self.lifetime is not None:
            lifetime = _duration(self.lifetime, "lifetime", self.source)
        else:
            lifetime = wall - min(0.1 * wall, 900.0) - stagger
        if lifetime <= 0 or (wall is not None and lifetime + stagger >= wall):
            raise ClusterError(f"{self.source}: lifetime",
                               f"lifetime {lifetime:.0f}s + stagger {stagger:.0f}s must be positive and below "
                               f"the walltime {self.walltime} ({wall:.0f}s)" if wall else
                               f"lifetime {lifetime:.0f}s must be positive",
                               "shorten lifetime/lifetime_stagger or lengthen walltime")
        return lifetime, stagger

    def job_kwargs(self, log_directory, dashboard=False):
        """Keyword arguments of dask_jobqueue.SLURMCluster / SLURMJob for the worker jobs (`dashboard`: keep
        Dask's diagnostics on in the workers, `base.diagnostics_config`)."""
        lifetime, stagger = self.lifetimes(strict=False)
        extra_args = []
        if lifetime is not None:
            extra_args = ["--lifetime", f"{lifetime:.0f}s", "--lifetime-stagger", f"{stagger:.0f}s"]
        return dict(
            queue=self.partition, account=self.account, cores=self.cores, processes=self.n_processes,
            memory=self.memory, walltime=self.walltime, job_name=WORKER_JOB_PREFIX,
            # The log lines are written here, not by dask-jobqueue's `log_directory`, which would create
            # the folder as soon as a job script is rendered (a refused profile must leave no trace).
            job_extra_directives=[f"-e {sbatch_path(f'{log_directory}/{WORKER_JOB_PREFIX}-%J.err', 'log directory')}",
                                  f"-o {sbatch_path(f'{log_directory}/{WORKER_JOB_PREFIX}-%J.out', 'log directory')}"]
            + list(self.job_extra_directives),
            job_directives_skip=list(self.job_directives_skip),
            job_script_prologue=_worker_environ_prologue(dashboard) + list(self.job_script_prologue),
            # dask-jobqueue puts these two into the worker's command line as they are: quoted here (double
            # quotes keep the documented $TMPDIR of local_directory; check_sbatch_values refused $( and `)
            worker_extra_args=extra_args, interface=self.interface,
            local_directory=f'"{self.local_directory}"' if self.local_directory else None,
            death_timeout=self.death_timeout,
            python=shlex.quote(self.python or sys.executable),
        )

    def summary(self):
        lifetime, stagger = self.lifetimes()
        life = f", lifetime {lifetime:.0f}s±{stagger:.0f}s" if lifetime else ""
        jobs = f"{self.min_jobs}-{self.max_jobs} (adaptive)" if self.adaptive else f"{self.jobs}"
        return (f"{jobs} worker jobs x {self.n_processes} processes on partition "
                f"{self.partition or '(default)'}, {self.cores} cores, {self.memory}, walltime {self.walltime}{life}")


def _worker_environ_prologue(dashboard=False):
    """The worker environment of base.py (allocator, BLAS threads), the one local workers start with,
    passed to the nannies in the worker jobs through Dask's config variable; and the workers' diagnostics
    (`base.diagnostics_config`), as Dask's config variables."""
    config = {"distributed.nanny.pre-spawn-environ": json.dumps(dict(WORKER_ENVIRON)), **diagnostics_config(dashboard)}
    # Dask's variable for a key: DASK_ + the key upper-cased, "." -> "__", "-" -> "_"
    return [f"export DASK_{key.upper().replace('.', '__').replace('-', '_')}={shlex.quote(str(value))}"
            for key, value in config.items()]


# -- profile loading --------------------------------------------------------------------------------
_TYPES = {
    "partition": (str,), "account": (str,), "cores": (int,), "processes": (int,), "memory": (str,),
    "walltime": (str, int), "lifetime": (str, int), "lifetime_stagger": (str, int), "jobs": (int, str),
    "min_jobs": (int,), "max_jobs": (int,),
    "job_extra_directives": (list,), "job_directives_skip": (list,), "job_script_prologue": (list,),
    "interface": (str,), "local_directory": (str,), "log_directory": (str,), "credentials_directory": (str,),
    "death_timeout": (int,),
    "allowed_failures": (int,), "python": (str,),
}
_DRIVER_TYPES = {"partition": (str,), "account": (str,), "walltime": (str, int), "cpus": (int,),
                 "memory": (str,), "job_extra_directives": (list,)}
_POSITIVE = {"cores", "processes", "jobs", "min_jobs", "max_jobs", "death_timeout", "cpus"}


def load_profile(path=None, *, jobs=None, partition=None, walltime=None):
    """Read and check a profile file (None: the defaults), then apply the CLI overrides."""
    raw, source = {}, "<default profile>"
    if path is not None:
        source = str(path)
        try:
            _, raw = read_toml(path, ClusterError, "fix the syntax of the profile")
        except OSError as exc:
            raise ClusterError("--profile", f"cannot read {path} ({exc.strerror or exc})",
                               "give the path of a SLURM profile .toml (see docs/howto/slurm.md)")
    driver_raw = raw.pop("driver", {})
    if not isinstance(driver_raw, dict):
        raise ClusterError(f"{source}: driver", "must be a table", "write [driver] followed by its keys")
    values = _checked(raw, _TYPES, source, "")
    driver_values = _checked(driver_raw, _DRIVER_TYPES, source, "driver.")
    profile = Profile(**values, driver=DriverJob(**driver_values), source=source)
    if jobs is not None:
        profile.jobs = parse_jobs(jobs, "--jobs")
    profile.jobs = parse_jobs(profile.jobs, f"{source}: jobs")
    if profile.min_jobs > profile.max_jobs:
        raise ClusterError(f"{source}: min_jobs", f"min_jobs = {profile.min_jobs} exceeds max_jobs = {profile.max_jobs}",
                           "set min_jobs <= max_jobs")
    if partition is not None:
        profile.partition = partition
    if walltime is not None:
        profile.walltime = walltime
    if profile.processes is not None and profile.cores % profile.processes:
        raise ClusterError(f"{source}: processes", f"{profile.processes} processes do not divide {profile.cores} cores",
                           "give processes a divisor of cores (one thread per process: processes = cores)")
    if profile.driver.partition is None:
        profile.driver.partition = profile.partition
    if profile.driver.account is None:
        profile.driver.account = profile.account
    check_sbatch_values(profile)
    return profile


def parse_jobs(value, where):
    """A number of worker jobs (>= 1) or "auto" (adaptive between min_jobs and max_jobs)."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    try:
        jobs = int(value)
    except (TypeError, ValueError):
        jobs = None
    if jobs is None or isinstance(value, bool) or jobs < 1 or (isinstance(value, float) and value != jobs):
        raise ClusterError(where, f"{value!r} is not a positive number of worker jobs nor \"auto\"",
                           "use 1 or more, or auto (adaptive between min_jobs and max_jobs)")
    return jobs


def _checked(raw, types, source, prefix):
    out = {}
    for key, value in raw.items():
        where = f"{source}: {prefix}{key}"
        if key not in types:
            raise ClusterError(where, "unknown profile key", f"use only {', '.join(sorted(types))}")
        if isinstance(value, bool) or not isinstance(value, types[key]):
            kinds = " or ".join("a list of strings" if t is list else {str: "a string", int: "an integer"}[t]
                                for t in types[key])
            raise ClusterError(where, f"{value!r} is not {kinds}", "fix its type in the profile")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ClusterError(where, "must be a list of strings", 'write e.g. ["--qos=normal"]')
        if key in _POSITIVE and isinstance(value, int) and value < 1:
            raise ClusterError(where, f"{value} is not positive", "use 1 or more")
        if key in ("walltime", "lifetime", "lifetime_stagger") and isinstance(value, int):
            value = str(value) if key == "walltime" else f"{value}s"
        out[key] = value
    return out


_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_slurm_time(text):
    """Seconds of a SLURM time limit ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"),
    inf for UNLIMITED/INFINITE, None if unreadable."""
    text = str(text).strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return float("inf")
    m = _SLURM_TIME.fullmatch(text)
    if not m:
        return None
    days, a, b, c = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:  # HH:MM:SS
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:  # MM:SS
        return int(a) * 60 + int(b)
    return int(a) * 60  # MM


def _duration(text, key, source):
    """Seconds of a lifetime: a Dask duration ("20s", "3h", "90m") or a SLURM time ("03:40:00")."""
    text = str(text).strip()
    if ":" in text or "-" in text:
        seconds = parse_slurm_time(text)
    else:
        from dask.utils import parse_timedelta

        try:
            seconds = parse_timedelta(text.replace(" ", ""), default="s")
        except (ValueError, KeyError, TypeError, IndexError):  # (IndexError: dask's answer to "")
            seconds = None
        if seconds is None:  # "3h40m"
            parts = re.findall(r"(\d+(?:\.\d+)?)\s*([dhms])", text)
            if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
                seconds = sum(float(n) * {"d": 86400, "h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds is None or seconds == float("inf"):
        raise ClusterError(f"{source}: {key}", f"cannot read {text!r} as a duration",
                           'write e.g. "20s", "55m", "3h40m" or "03:40:00"')
    return float(seconds)


# -- sbatch ---------------------------------------------------------------------------------------
def _require_sbatch():
    if shutil.which("sbatch") is None:
        raise ClusterError("--cluster slurm", "sbatch is not on PATH (no SLURM client here)",
                           "run on a SLURM login node, or start the local one: cluster/dev-slurm/start.sh")


def _slurm_message(stderr, stdout=""):
    lines = [ln.strip() for ln in (stderr or stdout).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Try \"sbatch --help\"")]
    return "; ".join(lines) or "no message"


def sbatch_test_only(script, what, source):
    """Ask SLURM whether it would accept `script` (`sbatch --test-only`): nothing is submitted."""
    _require_sbatch()
    try:
        out = subprocess.run(["sbatch", "--test-only"], input=script, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise ClusterError("--cluster slurm", "sbatch --test-only did not answer within 60 s",
                           "check that slurmctld is up (sinfo)")
    if out.returncode != 0:
        raise ClusterError(f"{source}", f"SLURM refuses the {what} job: {_slurm_message(out.stderr, out.stdout)}",
                           "fix the profile (partition, walltime, job_extra_directives, job_directives_skip)")


def worker_job_script(profile, log_directory):
    from dask_jobqueue.slurm import SLURMJob

    try:
        job = SLURMJob(scheduler="tcp://127.0.0.1:8786", name="seqphase-check", **profile.job_kwargs(log_directory))
    except (ValueError, TypeError) as exc:
        raise ClusterError(profile.source, f"dask-jobqueue refuses the profile: {exc}", "fix the profile")
    return job.job_script()


# -- what goes into #SBATCH lines ------------------------------------------------------------------------
#: SLURM's partition and account names (a partition may be a comma-separated list).
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def sbatch_value(value, where, name=False):
    """`value` as it may go into a job script's #SBATCH line: no control character (a newline would start a
    line of shell), no double quote (paths are quoted), and for a partition or account SLURM's own name
    syntax. ClusterError naming `where` otherwise."""
    text = str(value)
    if _CONTROL.search(text) or '"' in text:
        raise ClusterError(where, f"{text!r} holds a control character (newline, tab, ...) or a double quote",
                           "remove it: a job script line must hold the value alone")
    if name and not _SLURM_NAME.fullmatch(text):
        raise ClusterError(where, f"{text!r} is not a SLURM name", "use letters, digits, '_', '.', '+', '-' "
                           "(several partitions separated by commas)")
    return text


def sbatch_path(path, where):
    """A path for an #SBATCH option, checked (`sbatch_value`) and double-quoted (spaces are allowed)."""
    return '"' + sbatch_value(path, where) + '"'


#: SLURM's memory sizes, in the units dask-jobqueue converts to --mem: "16GB", "4G", "1500MB", "2GiB"
_MEMORY = re.compile(r"[0-9]+(\.[0-9]+)?\s*([KMGTP]i?B?|B)?", re.IGNORECASE)
#: network interface names (--interface)
_INTERFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
#: what the shell would run inside a value: command substitution (`$(...)`, `$((...))`, backticks)
_SUBSTITUTION = re.compile(r"\$\(|`")


def _check_syntax(where, key, value):
    """ClusterError unless a value has SLURM's syntax for its key: a time limit, a memory size, an interface
    name; and no value (a path above all) holds a command substitution."""
    text = str(value)
    if _SUBSTITUTION.search(text):
        raise ClusterError(where, f"{text!r} holds a command substitution ($(...) or `...`)",
                           "write the value itself; a job script runs no command found in a profile value")
    if key == "walltime" and parse_slurm_time(text) is None:
        raise ClusterError(where, f"cannot read {text!r} as a SLURM time",
                           "write e.g. \"04:00:00\", \"90\" (minutes), \"1-12:00:00\" or \"UNLIMITED\"")
    if key == "memory" and not _MEMORY.fullmatch(text.strip()):
        raise ClusterError(where, f"cannot read {text!r} as a memory size", 'write e.g. "16GB", "4G" or "1500MB"')
    if key == "interface" and not _INTERFACE.fullmatch(text):
        raise ClusterError(where, f"{text!r} is not a network interface name", 'write e.g. "ib0" or "eth0"')


def check_sbatch_values(profile):
    """Every value of the profile that reaches a job script, checked before any script is written: no control
    character or double quote, SLURM's own syntax (partition and account names, time limits, memory sizes),
    no command substitution; each directive an sbatch option."""
    source = profile.source
    for key in ("partition", "account"):
        for prefix, owner in (("", profile), ("driver.", profile.driver)):
            if getattr(owner, key) is not None:
                sbatch_value(getattr(owner, key), f"{source}: {prefix}{key}", name=True)
    for key in ("memory", "walltime", "lifetime", "lifetime_stagger", "interface", "local_directory",
                "log_directory", "credentials_directory", "python"):
        if getattr(profile, key) is not None:
            _check_syntax(f"{source}: {key}", key, sbatch_value(getattr(profile, key), f"{source}: {key}"))
    for key in ("memory", "walltime"):
        if getattr(profile.driver, key) is not None:
            where = f"{source}: driver.{key}"
            _check_syntax(where, key, sbatch_value(getattr(profile.driver, key), where))
    for key, items in (("job_extra_directives", profile.job_extra_directives),
                       ("job_directives_skip", profile.job_directives_skip),
                       ("job_script_prologue", profile.job_script_prologue),
                       ("driver.job_extra_directives", profile.driver.job_extra_directives)):
        for item in items:
            if not isinstance(item, str):
                raise ClusterError(f"{source}: {key}", f"{item!r} is not a string", "write each entry as a string")
            if _CONTROL.search(item):
                raise ClusterError(f"{source}: {key}", f"{item!r} holds a control character (newline, tab, ...)",
                                   "one directive per entry, on one line")
            if key.endswith("job_extra_directives") and not item.startswith("-"):
                raise ClusterError(f"{source}: {key}", f"{item!r} is not an sbatch option",
                                   'write each as sbatch takes it, e.g. "--qos=normal"')


def driver_job_script(profile, command, job_name, log_directory, cwd):
    d = profile.driver
    logs = sbatch_path(f"{log_directory}/{DRIVER_JOB_PREFIX}-%j.out", "log directory")
    lines = ["#!/usr/bin/env bash", f"#SBATCH -J {job_name}", f"#SBATCH -o {logs}",
             f"#SBATCH -e {logs}", f"#SBATCH -D {sbatch_path(cwd, 'working directory')}", "#SBATCH -n 1",
             f"#SBATCH --cpus-per-task={d.cpus}", f"#SBATCH --mem={_slurm_memory(d.memory, profile.source)}"]
    if d.walltime:
        lines.append(f"#SBATCH -t {d.walltime}")
    if d.partition:
        lines.append(f"#SBATCH -p {d.partition}")
    if d.account:
        lines.append(f"#SBATCH -A {d.account}")
    lines += [f"#SBATCH {x}" for x in d.job_extra_directives]
    lines += ["# the seqphase driver: Dask scheduler + client; it submits the worker jobs itself",
              "echo \"seqphase driver job $SLURM_JOB_ID on $(hostname) at $(date -Is)\"",
              "exec " + " ".join(shlex.quote(c) for c in command), ""]
    return "\n".join(lines)


def _slurm_memory(text, source):
    from dask.utils import parse_bytes
    from dask_jobqueue.slurm import slurm_format_bytes_ceil

    try:
        return slurm_format_bytes_ceil(parse_bytes(text))
    except (ValueError, TypeError):
        raise ClusterError(f"{source}: driver.memory", f"cannot read {text!r} as a size", 'write e.g. "4GB"')


def check_profile(profile, log_directory, driver_script=None):
    """Everything SLURM can tell before submitting: the worker job (and the driver job) would be accepted."""
    sbatch_test_only(worker_job_script(profile, log_directory), "worker", profile.source)
    if driver_script is not None:
        sbatch_test_only(driver_script, "driver", profile.source)
    profile.lifetimes()  # after SLURM has read the walltime: its message is the clearer one


def submit_driver(script):
    """sbatch the driver script; return the job id."""
    _require_sbatch()
    out = subprocess.run(["sbatch", "--parsable"], input=script, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ClusterError("sbatch", f"SLURM refused the driver job: {_slurm_message(out.stderr, out.stdout)}",
                           "fix the profile")
    return out.stdout.strip().split(";")[0]


def _shared_path(text, base=None):
    path = Path(os.path.expanduser(os.path.expandvars(text)))
    return (Path(base or os.getcwd()) / path).resolve() if not path.is_absolute() else path


def log_directory_of(profile, base=None):
    return _shared_path(profile.log_directory, base)


def credentials_parent(profile, base=None):
    """Where a run makes its credentials directory: the profile's `credentials_directory` (checked now:
    it must exist, be writable, not world-writable) or, by default, the log directory (made by the run)."""
    if profile.credentials_directory is None:
        return log_directory_of(profile, base)
    from seqphase.cluster.security import check_parent

    return check_parent(_shared_path(profile.credentials_directory, base), f"{profile.source}: credentials_directory")


# -- the cluster ----------------------------------------------------------------------------------
class Terminated(KeyboardInterrupt):
    """SIGTERM (scancel, the driver job's walltime): unwind like Ctrl-C so the workers are cancelled."""


def _in_store_write(frame):
    """Whether the interrupted code is inside results/store.py (a point's data, ledger or done flag)."""
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "store.py" and \
                os.path.basename(os.path.dirname(frame.f_code.co_filename)) == "results":
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def _sigterm_unwinds():
    """On SIGTERM raise Terminated in the main thread, but never in the middle of a store write: a
    point stored without its done flag would be computed (and counted) again on resume. The signal is
    then re-checked every 50 ms (SIGALRM) until the write is over; SLURM waits KillWait (30 s by
    default) before its SIGKILL."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if _in_store_write(frame):
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            return
        raise Terminated("SIGTERM")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGALRM)}
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, old in previous.items():
            signal.signal(sig, old)


def _worker_job_class():
    """dask-jobqueue's SLURMJob with the worker command's TLS paths quoted. dask-jobqueue joins the
    command's arguments with spaces, so a credentials folder under a path with a space (a log folder
    "slurm logs/") would split into several words and the worker jobs would never join."""
    import shlex

    from dask_jobqueue.slurm import SLURMJob

    class QuotedPathsJob(SLURMJob):
        def __init__(self, *args, security=None, **kwargs):
            super().__init__(*args, security=security, **kwargs)
            if security:
                for key, path in security.get_tls_config_for_role("worker").items():
                    if isinstance(path, str) and path and shlex.quote(path) != path:
                        flag = "--tls-" + key.replace("_", "-")
                        self._command_template = self._command_template.replace(
                            f"{flag} {path}", f"{flag} {shlex.quote(path)}")

    return QuotedPathsJob


@contextlib.contextmanager
def connect_slurm(profile, stream=None, access=None):
    """Yield a Client of a SLURMCluster kept at `profile.jobs` worker jobs; cancel them on exit. The
    scheduler and workers use TLS with per-run credentials (security.py) unless `access.insecure`."""
    import dask
    from distributed import Client

    from seqphase.cluster.security import DASHBOARD_ADDRESS, Access

    access = access or Access()
    stream = stream or sys.stderr
    log_directory = log_directory_of(profile)
    credentials = credentials_parent(profile)
    check_profile(profile, log_directory)
    from dask_jobqueue import SLURMCluster

    log_directory.mkdir(parents=True, exist_ok=True)
    config = {"distributed.scheduler.allowed-failures": profile.allowed_failures,
              "distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT}
    config.update(diagnostics_config(access.dashboard))
    with dask.config.set(config), _sigterm_unwinds(), \
            access.run_security(credentials, f"{profile.source}: credentials_directory") as (folder, security):
        tls = {"security": security, "protocol": "tls://"} if security is not None else {}
        cluster = SLURMCluster(scheduler_options={"dashboard_address": DASHBOARD_ADDRESS}, silence_logs=logging.ERROR,
                               job_cls=_worker_job_class(), **tls,
                               **profile.job_kwargs(log_directory, access.dashboard))
        try:
            minimum, maximum = profile.job_range()
            cluster.adapt(minimum_jobs=minimum, maximum_jobs=maximum, interval=ADAPT_INTERVAL,
                          wait_count=ADAPT_WAIT_COUNT)
            where = f"; TLS credentials in {folder} (yours only, removed at the end)" if folder else ""
            print(f"seqphase: slurm: {profile.summary()}; scheduler {cluster.scheduler_address}; "
                  f"job logs in {log_directory}{where}", file=stream)
            access.announce_dashboard(cluster.dashboard_link, stream)
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()


class SlurmBackend(Backend):
    """`--cluster slurm`: worker jobs described by `slurm_profile` (default: the default profile)."""

    name = "slurm"
    usage = "`slurm`"

    @contextlib.contextmanager
    def client(self):
        with connect_slurm(self.slurm_profile or load_profile(), access=self.access) as client:
            yield client
