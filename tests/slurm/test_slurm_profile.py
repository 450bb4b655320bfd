"""The SLURM profile and job scripts, without a SLURM: parsing, checks, the generated #SBATCH lines."""

import pytest

from seqphase.cli import main
from seqphase.cluster.slurm import (Profile, driver_job_script, load_profile, parse_slurm_time,
                                    worker_job_script)
from seqphase.core.errors import ClusterError


@pytest.mark.parametrize("text, seconds", [
    ("90", 5400), ("05:30", 330), ("04:00:00", 14400), ("2-12", 216000), ("1-00:30", 88200),
    ("1-00:00:10", 86410), ("UNLIMITED", float("inf")), ("banana", None), ("1:2:3:4", None),
])
def test_slurm_time_formats(text, seconds):
    assert parse_slurm_time(text) == seconds


def write(tmp_path, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_profile_keys_and_defaults(tmp_path):
    p = load_profile(write(tmp_path, 'partition = "xeon"\ncores = 8\nmemory = "16GB"\nwalltime = "04:00:00"\n'
                                     '[driver]\nwalltime = "2-00:00:00"\n'))
    assert (p.partition, p.cores, p.n_processes, p.jobs) == ("xeon", 8, 8, 2)
    assert p.driver.partition == "xeon" and p.driver.walltime == "2-00:00:00"
    lifetime, stagger = p.lifetimes()
    assert stagger == 600 and lifetime == 14400 - 900 - 600  # retire well before the walltime
    p = load_profile(None, jobs=5, partition="short", walltime="10")
    assert (p.jobs, p.partition, p.walltime, p.driver.walltime) == (5, "short", "10", None)
    assert p.lifetimes() == (600 - 60 - 30, 30)


@pytest.mark.parametrize("text, field", [
    ('partitoin = "x"', "partitoin"),
    ("cores = 0", "cores"),
    ('cores = "8"', "cores"),
    ("job_extra_directives = '--qos=x'", "job_extra_directives"),
    ("cores = 6\nprocesses = 4", "processes"),
    ('walltime = "00:01:00"\nlifetime = "70s"', "lifetime"),
    ('lifetime = "soon"', "lifetime"),
    ("[driver]\nnodes = 2", "driver.nodes"),
    ("cores = [", "malformed TOML"),
])
def test_bad_profiles_name_the_key(tmp_path, text, field):
    with pytest.raises(ClusterError) as err:
        load_profile(write(tmp_path, text)).lifetimes()
    assert field in err.value.one_line()


def test_worker_job_script(tmp_path):
    p = load_profile(write(tmp_path, 'partition = "xeon"\naccount = "proj"\ncores = 4\nmemory = "8GB"\n'
                                     'walltime = "01:00:00"\nlifetime = "50m"\nlifetime_stagger = "2m"\n'
                                     'job_extra_directives = ["--qos=normal", "--mem-per-cpu=2G"]\n'
                                     'job_directives_skip = ["--mem="]\n'))
    script = worker_job_script(p, tmp_path / "logs")
    assert "#SBATCH -p xeon" in script and "#SBATCH -A proj" in script and "#SBATCH -t 01:00:00" in script
    assert "#SBATCH --cpus-per-task=4" in script and "#SBATCH -J seqphase-worker" in script
    assert "#SBATCH --mem=" not in script and "#SBATCH --mem-per-cpu=2G" in script  # skipped, then added
    assert "#SBATCH --qos=normal" in script
    assert "--lifetime 3000s --lifetime-stagger 120s" in script
    assert "--nthreads 1" in script and f"-o \"{tmp_path}/logs/seqphase-worker-%J.out\"" in script
    # the workers' Dask diagnostics are quiet (cluster/base.py QUIET_DIAGNOSTICS) unless the dashboard is served
    assert "export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False" in script
    assert "export DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s" in script
    assert "PROFILE__ENABLED" not in "\n".join(p.job_kwargs(tmp_path / "logs", dashboard=True)["job_script_prologue"])


def test_driver_job_script(tmp_path):
    p = load_profile(write(tmp_path, 'partition = "xeon"\n[driver]\nmemory = "3GB"\nwalltime = "1-00:00:00"\n'
                                     'job_extra_directives = ["--qos=long"]\n'))
    script = driver_job_script(p, ["python", "-m", "seqphase.cli", "run", "my sweep.toml"], "seqphase-driver-x",
                               tmp_path, tmp_path)
    assert "#SBATCH -J seqphase-driver-x" in script and "#SBATCH -p xeon" in script
    assert "#SBATCH --mem=3G" in script and "#SBATCH -t 1-00:00:00" in script and "#SBATCH --qos=long" in script
    assert f'#SBATCH -D "{tmp_path}"' in script and f'#SBATCH -o "{tmp_path}/seqphase-driver-%j.out"' in script
    assert script.rstrip().endswith("exec python -m seqphase.cli run 'my sweep.toml'")


@pytest.mark.parametrize("argv, option", [
    (["run", "glm-perceptron-se", "--profile", "p.toml"], "--profile"),
    (["run", "glm-perceptron-se", "--jobs", "3"], "--jobs"),
    (["run", "glm-perceptron-se", "--cluster", "slurm", "--workers", "2"], "--workers"),
    (["run", "glm-perceptron-se", "--cluster", "slurm", "--jobs", "0"], "--jobs"),
    (["submit", "glm-perceptron-se", "--profile", "/nonexistent.toml"], "--profile"),
    (["submit", "no-such-sweep"], "SWEEP"),
])
def test_cli_slurm_options_are_checked(tmp_path, monkeypatch, capsys, argv, option):
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--store", str(tmp_path / "s.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"seqphase: error: {option}")
    assert not (tmp_path / "s.zarr").exists() and not (tmp_path / "slurm-logs").exists()


def test_profile_defaults_are_a_profile():
    assert isinstance(load_profile(None), Profile)


def test_submit_refuses_a_store_another_driver_writes(tmp_path, monkeypatch, capsys):
    from seqphase.results.store import Store

    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "s.zarr").check(create=True)
    with store.lock():
        assert main(["submit", "glm-perceptron-se", "--store", str(store.path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another seqphase driver is writing this store" in err[0]


@pytest.mark.parametrize("text, key", [('partition = "a\\nb"', "partition"), ('account = "x y"', "account"),
                                       ('log_directory = "logs\\n#SBATCH --wrap=id"', "log_directory"),
                                       ('job_extra_directives = ["--qos=a\\n#SBATCH -p other"]', "job_extra_directives"),
                                       ('[driver]\nwalltime = "1:00\\nid"', "driver.walltime")])
def test_values_that_would_break_an_sbatch_line_are_refused(tmp_path, text, key):
    with pytest.raises(ClusterError) as info:
        load_profile(write(tmp_path, text + "\n"))
    assert key in info.value.field and "\n" not in info.value.one_line()


def test_a_working_directory_with_a_quote_is_refused(tmp_path):
    with pytest.raises(ClusterError, match="working directory"):
        driver_job_script(load_profile(), ["true"], "seqphase-driver-x", tmp_path, tmp_path / 'a"b')
