"""`seqphase submit` on a real local SLURM (slurmctld + slurmd + munged from cluster/dev-slurm/start.sh):
the driver is a SLURM job, the Dask workers are SLURM jobs, and both are killed mid-sweep."""

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed.security import Security

from run_probe import (assert_no_pem, dashboard_on_loopback_only, refused, run_scheduler, running_seqphase,
                       wait_until)
from spec_files import write_spec
from seqphase.cluster.security import credentials_from_dir
from seqphase.results.store import DONE, FAILED, Store

WORKER = "seqphase-worker"
DEV_SLURM = Path(__file__).resolve().parents[2] / "cluster" / "dev-slurm"


def profile(folder, name="profile.toml", **overrides):
    values = {"partition": "debug", "cores": 1, "memory": "1GB", "walltime": "00:05:00", "lifetime": "240s",
              "lifetime_stagger": "5s", "jobs": 2, "interface": "lo", "log_directory": "logs"}
    values.update(overrides)
    lines = [f"{k} = {json.dumps(v)}" for k, v in values.items() if k != "driver"]
    lines += ["[driver]", 'memory = "1GB"'] + [f"{k} = {json.dumps(v)}" for k, v in values.get("driver", {}).items()]
    path = Path(folder) / name
    path.write_text("\n".join(lines) + "\n")
    return path


def seqphase(*args, cwd):
    return subprocess.run([sys.executable, "-m", "seqphase.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def submit(folder, spec, prof, *extra):
    out = seqphase("submit", spec, "--profile", prof, "--store", folder / "s.zarr", *extra, cwd=folder)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    assert job.isdigit(), out.stdout
    return job


def squeue(*args):
    out = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=30)
    return out.stdout.split()


def known_job_ids():
    """Ids of every job slurmctld still knows of. A refused submit adds none; a finished job of an earlier
    test may leave the list in between (MinJobAge), so tests compare with <=, not ==."""
    out = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True, timeout=30)
    return {field.split("=", 1)[1] for field in out.stdout.split() if field.startswith("JobId=")}


def worker_jobs():
    """Ids of the worker jobs SLURM knows of (pending, running or completing)."""
    return squeue("-n", WORKER, "-o", "%i")


def running_workers():
    return squeue("-n", WORKER, "-t", "RUNNING", "-o", "%i")


def job_state(job):
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=30)
    for field in out.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return "GONE"


def ledger(store, name="toy"):
    try:
        group = Store(store).open_sweep(name)
    except Exception:  # not created yet by the driver
        return None
    status, _ = group.ledger()
    return {"status": status, "attempts": group.group["attempts"][...], "jobs": group.group["slurm_job_id"][...],
            "runs": group.attrs.get("runs", [])}


def n_done(store):
    led = ledger(store)
    return 0 if led is None else int((led["status"] == DONE).sum())


def wait_job_finished(job, timeout=240):
    return wait_until(lambda: (s := job_state(job)) not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") and s,
                      timeout, f"job {job} to end")


def driver_log(folder, job):
    path = folder / "logs" / f"seqphase-driver-{job}.out"
    return path.read_text() if path.exists() else "(no driver log)"


def assert_complete_once(store, n):
    led = ledger(store)
    assert led is not None
    assert led["status"].size == n
    assert (led["status"] == DONE).all(), f"{int((led['status'] == FAILED).sum())} failed, rest pending"
    assert (led["attempts"] == 1).all(), "a point was stored twice"
    assert all(str(j) for j in led["jobs"].ravel()), "every point records its worker's SLURM job"
    return led


def no_workers_left():
    return not squeue("-n", WORKER)


def test_submit_runs_the_sweep_and_survives_a_cancelled_worker(tmp_path, slurm, slurm_timings):
    """A small sweep via `seqphase submit`; one worker job is scancelled mid-sweep: it is replaced, every
    point is stored exactly once, nothing fails; `seqphase status` shows the SLURM jobs from the ledger."""
    spec = write_spec(tmp_path, alpha="0.1:2.0:20", extra_params="sleep = 1.5")
    store = tmp_path / "s.zarr"
    started = time.time()
    driver = submit(tmp_path, spec, profile(tmp_path))
    wait_until(lambda: n_done(store) >= 1, 120, "the first point")
    slurm_timings["submit -> first point stored"] = time.time() - started

    victims = wait_until(lambda: n_done(store) >= 3 and running_workers(), 120, "3 points and a running worker")
    victim = victims[0]
    subprocess.run(["scancel", victim], check=True, timeout=30)
    killed = time.time()
    replacement = wait_until(lambda: [j for j in running_workers() if int(j) > int(victim)
                                      and j not in victims], 120, "a replacement worker job")
    slurm_timings["scancel worker -> replacement job running"] = time.time() - killed
    # Informative only: the sweep may end before the new worker has computed anything.
    wait_until(lambda: replacement[0] in set(ledger(store)["jobs"].ravel()) or n_done(store) == 20, 120,
               "a point from the replacement or the end of the sweep")
    if replacement[0] in set(ledger(store)["jobs"].ravel()):
        slurm_timings["scancel worker -> first point from the replacement"] = time.time() - killed

    assert wait_job_finished(driver) == "COMPLETED", driver_log(tmp_path, driver)
    led = assert_complete_once(store, 20)
    jobs = set(led["jobs"].ravel())
    assert victim in jobs or replacement[0] in jobs
    assert driver not in jobs  # points ran on worker jobs, not in the driver job
    runs = led["runs"]
    assert len(runs) == 1 and runs[0]["slurm_job_id"] == driver and runs[0]["outcome"] == "finished"
    assert runs[0]["scheduler"].startswith("tls://")  # the driver job's scheduler speaks TLS only
    assert not list((tmp_path / "logs").glob("seqphase-tls-*"))  # its credentials went with it
    assert_no_pem(tmp_path / "logs")
    assert_no_pem(store)
    wait_until(no_workers_left, 60, "the worker jobs to be cancelled")

    status = seqphase("status", "toy", "--store", store, cwd=tmp_path)
    assert status.returncode == 0
    assert "20 done, 0 failed, 0 pending" in status.stdout
    assert f"slurm job {driver}" in status.stdout and "slurm worker jobs (points done):" in status.stdout
    # Resubmitting a finished sweep runs nothing.
    again = submit(tmp_path, spec, profile(tmp_path))
    assert wait_job_finished(again) == "COMPLETED"
    assert "0 computed, 0 failed, 20 already done" in driver_log(tmp_path, again)


def test_cancelled_driver_job_resumes_on_resubmission(tmp_path, slurm):
    """scancel the driver job mid-sweep: its worker jobs go with it, the points stored stay; a resubmission
    computes only the missing points."""
    spec = write_spec(tmp_path, alpha="0.1:2.0:20", extra_params="sleep = 1.5")
    store = tmp_path / "s.zarr"
    driver = submit(tmp_path, spec, profile(tmp_path))
    wait_until(lambda: n_done(store) >= 4, 180, "4 points")
    subprocess.run(["scancel", driver], check=True, timeout=30)
    wait_job_finished(driver)
    wait_until(no_workers_left, 60, "the killed driver's worker jobs to go")  # the driver cancelled them
    done_before = n_done(store)
    assert 4 <= done_before < 20
    first_run = ledger(store)["runs"][0]
    assert first_run["slurm_job_id"] == driver and first_run["outcome"].startswith("interrupted")

    second = submit(tmp_path, spec, profile(tmp_path))
    assert wait_job_finished(second) == "COMPLETED", driver_log(tmp_path, second)
    led = assert_complete_once(store, 20)
    assert led["runs"][-1]["submitted"] == 20 - done_before
    assert f"{20 - done_before} computed, 0 failed, {done_before} already done" in driver_log(tmp_path, second)


def test_workers_retire_before_walltime_and_are_replaced(tmp_path, slurm, slurm_timings):
    """Worker jobs with a 1-minute walltime and a 20 s lifetime, a sweep longer than the walltime: the
    workers retire (staggered) before SLURM would kill them, adapt submits new jobs, the sweep completes."""
    spec = write_spec(tmp_path, alpha="0.1:4.0:40", extra_params="sleep = 2.5")
    store = tmp_path / "s.zarr"
    prof = profile(tmp_path, walltime="00:01:00", lifetime="20s", lifetime_stagger="4s")
    started = time.time()
    driver = submit(tmp_path, spec, prof)
    assert wait_job_finished(driver, timeout=300) == "COMPLETED", driver_log(tmp_path, driver)
    elapsed = time.time() - started
    slurm_timings["40 x 2.5 s points on 2 jobs with 20 s lifetime (sweep wall time)"] = elapsed
    assert elapsed > 60  # longer than one walltime
    led = assert_complete_once(store, 40)
    worker_jobs = set(led["jobs"].ravel())
    assert len(worker_jobs) >= 4, worker_jobs  # the first two retired and were replaced
    timeouts = [line for line in slurm.jobcomp().splitlines()
                if "JobState=TIMEOUT" in line and any(f"JobId={j} " in line for j in worker_jobs)]
    assert not timeouts, timeouts  # retired by lifetime, never killed by the walltime


@pytest.mark.parametrize("overrides, slurm_says", [
    ({"partition": "nosuch"}, "invalid partition"),
    ({"walltime": "banana"}, "cannot read 'banana' as a SLURM time"),  # refused before SLURM is asked
    ({"job_extra_directives": ["--frobnicate=1"]}, "unrecognized option '--frobnicate=1'"),
    ({"driver": {"partition": "nosuch"}}, "SLURM refuses the driver job"),
    ({"credentials_directory": "/nonexistent/seqphase"}, "credentials_directory: /nonexistent/seqphase does not exist"),
])
def test_bad_profile_submits_nothing(tmp_path, slurm, overrides, slurm_says):
    spec = write_spec(tmp_path)
    store = tmp_path / "s.zarr"
    jobs_before = known_job_ids()
    out = seqphase("submit", spec, "--profile", profile(tmp_path, **overrides), "--store", store, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seqphase: error: ") and slurm_says in lines[0], out.stderr
    assert out.stdout == ""
    assert not store.exists() and not (tmp_path / "logs").exists()
    assert known_job_ids() <= jobs_before  # nothing submitted
    if "driver" not in overrides:  # the foreground driver refuses the same profile before starting anything
        out = seqphase("run", spec, "--cluster", "slurm", "--profile", profile(tmp_path, **overrides),
                       "--store", store, cwd=tmp_path)
        assert out.returncode == 2 and slurm_says in out.stderr and len(out.stderr.strip().splitlines()) == 1
        assert not store.exists()


def test_submit_refuses_a_store_that_holds_other_settings(tmp_path, slurm):
    spec = write_spec(tmp_path, alpha=[0.5, 1.0])
    store = tmp_path / "s.zarr"
    out = seqphase("run", spec, "--store", store, "--workers", "1", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    before = sorted((p.relative_to(store), p.stat().st_mtime_ns) for p in store.rglob("*"))
    other = write_spec(tmp_path, alpha=[0.5, 1.0], method_extra="scale = 2.0")
    jobs_before = known_job_ids()
    out = seqphase("submit", other, "--profile", profile(tmp_path), "--store", store, cwd=tmp_path)
    assert out.returncode == 2 and "method.scale" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert known_job_ids() <= jobs_before  # nothing submitted
    assert sorted((p.relative_to(store), p.stat().st_mtime_ns) for p in store.rglob("*")) == before


def test_foreground_driver_with_slurm_workers_over_tls(tmp_path, slurm, slurm_timings):
    """`seqphase run --cluster slurm`: the driver in the foreground, the workers as SLURM jobs, all over TLS with
    per-run credentials. The ledger records tls://; a client with other credentials (tls://) or none (tcp://,
    same port) is refused, one with the run's own (its credentials directory) gets in; the worker job script
    names the files by path; the dashboard answers on 127.0.0.1 only. The only worker job is killed mid-sweep: the sweep can only finish if its
    replacement joins with the same credentials. At the end the directory is gone and no certificate or key is
    in the store, the logs or the driver's output."""
    spec = write_spec(tmp_path, alpha="0.5:2:10", extra_params="sleep = 1.0")
    store = tmp_path / "s.zarr"
    log = tmp_path / "driver.log"
    with running_seqphase(["run", spec, "--cluster", "slurm", "--profile", profile(tmp_path), "--jobs", "1",
                           "--store", store, "--no-progress", "--dashboard"], tmp_path, log) as proc:
        address = wait_until(lambda: run_scheduler(store), 120, "the run's ledger entry")
        assert address.startswith("tls://127.0.0.1:"), address
        folders = list((tmp_path / "logs").glob("seqphase-tls-*"))
        assert len(folders) == 1 and stat.S_IMODE(folders[0].stat().st_mode) == 0o700
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in folders[0].iterdir())
        assert str(folders[0]) in log.read_text()  # the driver says where they are (a path, nothing else)
        assert refused(address, Security.temporary())
        assert refused(address.replace("tls://", "tcp://"))
        assert not refused(address, credentials_from_dir(folders[0]))  # the run's credentials do get in
        dashboard_on_loopback_only(log)  # not on every interface
        victim = wait_until(worker_jobs, 60, "the worker job")[0]
        script = subprocess.run(["scontrol", "write", "batch_script", victim, "-"], capture_output=True, text=True,
                                timeout=30).stdout
        assert f"--tls-key {folders[0]}/key.pem" in script and "--protocol tls://" in script, script
        assert "-----BEGIN" not in script
        wait_until(lambda: n_done(store) >= 1 and running_workers(), 120, "a first point and a running worker")
        subprocess.run(["scancel", victim], check=True, timeout=30)
        killed = time.time()
        wait_until(lambda: n_done(store) > 1 and any(int(j) > int(victim) for j in ledger(store)["jobs"].ravel() if j),
                   120, "a point stored by the replacement job")
        slurm_timings["TLS: scancel the only worker -> first point from its replacement"] = time.time() - killed
    output = log.read_text()
    assert proc.returncode == 0, output
    led = assert_complete_once(store, 10)
    assert victim in set(led["jobs"].ravel()) or n_done(store) == 10
    assert not folders[0].exists()  # removed when the run ended
    assert_no_pem(store)
    assert_no_pem(tmp_path / "logs")
    assert "-----BEGIN" not in output
    wait_until(no_workers_left, 30, "the worker jobs to be cancelled")


def test_stop_script_stops_only_its_own_daemons(slurm):
    """A second local SLURM (other directory, other ports) started and stopped beside the session's one:
    stop.sh ends exactly its three daemons and leaves the session's cluster running."""
    import os
    import tempfile

    def pids(root):
        files = [root / "run" / "slurmctld.pid", root / "run" / "slurmd.pid", root / "munge" / "munged.pid"]
        return [int(f.read_text()) for f in files]

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return not Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"

    other = Path(tempfile.mkdtemp(prefix="seqphase-slurm-other-"))
    os.chmod(other, 0o755)
    env = {**os.environ, "SLURM_ROOT": str(other)}
    env.pop("SLURM_CONF")
    try:
        out = subprocess.run([str(DEV_SLURM / "start.sh")], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == f"export SLURM_CONF={other}/etc/slurm.conf"
        theirs, ours = pids(other), pids(slurm.root)
        assert not set(theirs) & set(ours) and all(map(alive, theirs))
    finally:
        subprocess.run([str(DEV_SLURM / "stop.sh"), "--purge"], env=env, capture_output=True, timeout=120)
    assert not any(map(alive, theirs)) and not other.exists()
    assert all(map(alive, ours))
    assert squeue("-o", "%i") == [] and "idle" in subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True,
                                                                 text=True, timeout=30).stdout


def test_adaptive_jobs_grow_while_tasks_queue_and_shrink_when_idle(tmp_path, slurm, slurm_timings):
    """`--jobs auto`: one point whose 10 seeds queue on the first worker job makes the allocation grow to
    max_jobs; once only seed 0 (30 s longer) still runs, the idle jobs are released while the driver
    waits for it, and the point is stored whole."""
    spec = write_spec(tmp_path, method="seeded", alpha=[0.5], extra_params="sleep = 2.0",
                      method_extra="n_seeds = 10\ntail = 30.0")
    store = tmp_path / "s.zarr"
    prof = profile(tmp_path, jobs="auto", min_jobs=1, max_jobs=3)
    started = time.time()
    log = tmp_path / "driver.log"
    with running_seqphase(["run", spec, "--cluster", "slurm", "--profile", prof, "--store", store, "--no-progress"],
                          tmp_path, log) as proc:
        wait_until(lambda: len(worker_jobs()) >= 3, 90, "the allocation to grow to max_jobs = 3")
        slurm_timings["adaptive: grown to 3 worker jobs after"] = time.time() - started
        history = []

        def one_job_left():
            history.append((round(time.time() - started, 1), worker_jobs()))
            return len(history[-1][1]) == 1

        try:
            wait_until(one_job_left, 60, "idle worker jobs to be released")
        except AssertionError:
            raise AssertionError(f"{history} {log.read_text()[-3000:]}")
        assert proc.poll() is None, "released while the driver still waits for seed 0"
        slurm_timings["adaptive: back to 1 worker job after"] = time.time() - started
    output = log.read_text()
    assert proc.returncode == 0, output
    assert "1-3 (adaptive) worker jobs" in output
    led = assert_complete_once(store, 1)
    assert len(set(str(j).split(" ")[0] for j in led["jobs"].ravel())) == 1  # the ledger names the first job
    wait_until(no_workers_left, 30, "the worker jobs to be cancelled")


def test_submit_from_a_folder_with_a_space(tmp_path, slurm):
    """The working directory, the log folder and the store have a space in their paths: the driver job's
    -D/-o/-e and the worker jobs' -o/-e are quoted, and the sweep runs to the end."""
    folder = tmp_path / "my runs"
    folder.mkdir()
    spec = write_spec(folder, alpha=[0.5, 1.0])
    prof = profile(folder, jobs=1, log_directory="slurm logs")
    out = seqphase("submit", spec, "--profile", prof, "--store", folder / "s.zarr", cwd=folder)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    assert wait_job_finished(job) == "COMPLETED", (folder / "slurm logs").glob("*")
    assert_complete_once(folder / "s.zarr", 2)
    assert (folder / "slurm logs" / f"seqphase-driver-{job}.out").is_file()
    assert list((folder / "slurm logs").glob("seqphase-worker-*.out"))
    wait_until(no_workers_left, 60, "the worker job to end")


@pytest.mark.parametrize("option", [["--partition", "debug\n#SBATCH --wrap=touch /tmp/x"],
                                    ["--partition", "debug x"], ["--walltime", "00:05:00\nhostname"]])
def test_sbatch_values_with_a_newline_or_outside_slurm_syntax_are_refused(tmp_path, slurm, option):
    spec = write_spec(tmp_path)
    jobs_before = known_job_ids()
    out = seqphase("submit", spec, "--profile", profile(tmp_path), *option, "--store", tmp_path / "s.zarr",
                   cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("seqphase: error: ") and option[0][2:] in lines[0], out.stderr
    assert known_job_ids() <= jobs_before  # nothing submitted
    assert not (tmp_path / "s.zarr").exists() and not (tmp_path / "logs").exists()
