"""The `seqphase` command: the contract other checks rely on, and bad input -> one line, exit 2."""

import csv
import io
import json

import pytest

from spec_files import write_spec
from seqphase.cli import main
from test_store import tree_digest
from cli_run import cli, cli_here, on_cluster


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("cli")
    spec = write_spec(folder, alpha=[0.5, 1.0, 2.0])
    code, _, err = cli_here("run", spec, "--store", folder / "s.zarr", *on_cluster(client), "--no-progress")
    assert code == 0, err
    return folder, spec, folder / "s.zarr"


def test_query_csv_contract(toy_store):
    _, _, store = toy_store
    code, out, _ = cli_here("query", "toy", "--store", store)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3 * 3  # 3 points x 3 seeds of the toy's `noise`
    assert {"alpha", "seed", "overlap_1_1", "gen_error", "status", "runtime_s"} <= set(rows[0])
    assert {float(r["alpha"]) for r in rows} == {0.5, 1.0, 2.0}
    assert all(r["status"] == "done" for r in rows)
    code, out, _ = cli_here("query", "toy", "--store", store, "--format", "json")
    data = json.loads(out)
    assert data["sweep"] == "toy" and len(data["rows"]) == 9


def test_status_and_plot(toy_store, tmp_path):
    folder, spec, store = toy_store
    code, out, _ = cli_here("status", spec, "--store", store)
    assert code == 0 and "3 done, 0 failed, 0 pending (of 3 requested)" in out
    png = tmp_path / "toy.png"
    assert main(["plot", "toy", "--store", str(store), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_first_run_is_a_run_and_a_rerun_resumes(tmp_path, client):
    """The first line and the store's run record say `run` for a run that finds nothing of its grid stored,
    `resume` for one that finds points done."""
    spec = write_spec(tmp_path, alpha=[0.5, 1.0])
    store = tmp_path / "s.zarr"
    words = []
    for _ in range(2):
        code, _, err = cli_here("run", spec, "--store", store, *on_cluster(client), "--no-progress")
        assert code == 0, err
        words.append(err.splitlines()[0].split()[1])
    assert words == ["run", "resume"]
    code, out, _ = cli_here("status", "toy", "--store", store)
    assert [line.split()[2] for line in out.splitlines() if line.startswith("  run ")] == ["run", "resume"]


def test_a_failed_point_is_one_line_and_its_traceback_is_kept(tmp_path, marker_dir):
    """The real command on its own local cluster (whose workers write to its stderr): one line per failed point,
    its parameters and the exception, after its retries; no Dask log; `status --traceback` shows the traceback."""
    spec = write_spec(tmp_path, alpha=[0.5, 1.0, 2.0], extra_params='fail = ["never", "always"]')
    store = tmp_path / "s.zarr"
    code, _, err = cli("run", spec, "--store", store, "--workers", "1", "--no-progress")
    assert code == 1
    failed = [line for line in err.splitlines() if line.startswith("seqphase: failed ")]
    assert len(failed) == 3, err
    for alpha in (0.5, 1.0, 2.0):
        assert f"seqphase: failed {{'alpha': {alpha}, 'fail': 'always', 'sleep': 0.0, 'copies': 1}}: RuntimeError: " \
               f"injected failure at alpha={alpha}" in failed, err
    assert "Compute Failed" not in err and "Traceback" not in err and "distributed" not in err, err
    assert err.splitlines()[-1].endswith("; why they failed: seqphase status toy --traceback")
    code, out, _ = cli_here("status", "toy", "--store", store)
    assert "Traceback" not in out and "  tracebacks of the failed points: seqphase status toy --traceback" in out
    code, out, _ = cli_here("status", "toy", "--store", store, "--traceback")
    assert code == 0 and out.count("Traceback (most recent call last):") == 3
    assert "toymodel.py" in out and "tasks.py" not in out  # from the work's own function down


def test_open_results_python_api(toy_store):
    import seqphase

    _, _, store = toy_store
    ds = seqphase.open_results("toy", store=store)
    assert list(ds["alpha"].values) == [0.5, 1.0, 2.0]
    assert ds["overlap"].sel(alpha=1.0).item() == pytest.approx(0.5)


@pytest.mark.parametrize("args, words", [
    (["run", "no-such-sweep"], "SWEEP: no shipped sweep"),
    (["run", "glm-perceptron-se", "--set", "alpha=-1,1"], "params.alpha: value -1.0 is out of range"),
    (["run", "glm-perceptron-se", "--set", "colour=red"], "--set colour"),
    (["run", "glm-cs-thresholds", "--set", "rho=1.5"], "params.rho"),
    (["run", "glm-perceptron-se", "--workers", "0"], "--workers"),
    (["run", "glm-perceptron-se", "--cluster", "nowhere"], "--cluster: unknown cluster"),
    (["status", "never-ran"], "no results for this sweep"),
    (["query", "never-ran"], "no results for this sweep"),
    (["plot", "never-ran", "-o", "x.png"], "no results for this sweep"),
    (["retry-failed", "never-ran"], "no results for this sweep"),
    (["query", "toy", "--store", "{foreign}"], "written by something else"),
    (["plot", "toy", "-o", "figure.pdf"], "-o: 'figure.pdf' is not a .png"),
])
def test_bad_input_one_line_exit_2_store_untouched(toy_store, tmp_path, args, words):
    _, _, store = toy_store
    import zarr

    foreign = tmp_path / "foreign.zarr"
    zarr.open_group(str(foreign), mode="w", zarr_format=3).attrs["owner"] = "someone else"
    args = [a.replace("{foreign}", str(foreign)) for a in args]
    if "--store" not in args:
        args += ["--store", str(store)]
    before = tree_digest(store)
    code, out, err = cli_here(*args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert tree_digest(store) == before


def test_bad_spec_file_exit_2(tmp_path, toy_store):
    """The real process: its exit status and its stderr (the other bad-input tests call the CLI here)."""
    _, _, store = toy_store
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nmodel = "glm"\n[params]\nalpha = 1.0\nprior = "laplace"\n[method]\nname = "se"\n')
    before = tree_digest(store)
    code, _, err = cli("run", bad, "--store", store)
    assert code == 2 and "params.prior: 'laplace' is not valid" in err
    assert tree_digest(store) == before


def test_version_is_the_package_version():
    """`seqphase --version` prints the one version (version.py), which is also the installed distribution's."""
    from importlib.metadata import version

    import seqphase

    code, out, _ = cli_here("--version")
    assert code == 0 and out == f"seqphase {seqphase.__version__}\n"
    assert version("seqphase") == seqphase.__version__ == "1.0.0"


def column_starts(header, names):
    return [header.index(name) for name in names]


def assert_aligned(lines, header_names, right=()):
    """Every line's cells start where the header's names start (the right-aligned ones end where theirs end)."""
    header, rows = lines[0], lines[1:]
    starts = column_starts(header, header_names)
    assert rows
    for row in rows:
        for name, start in zip(header_names, starts):
            if name in right:
                end = start + len(name)
                assert row[end - 1] != " " and row[end:end + 2] == "  ", (name, row)
            elif start:
                assert row[start - 2:start] == "  " and row[start] != " ", (name, row)


def test_list_columns_are_aligned():
    from seqphase.api import list_sweeps

    code, out, _ = cli_here("list")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + len(list_sweeps())
    assert_aligned(lines, ["sweep", "model/method", "points", "CPU-s", "title"], right={"points", "CPU-s"})


def test_reproduce_list_columns_are_aligned_and_costs_have_one_format():
    import re

    from seqphase.sweeps.papers import PAPERS

    code, out, _ = cli_here("reproduce", "--list")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + 2 * len(PAPERS)
    names = ["id", "arXiv", "sweeps", "cost --quick", "cost full size", "title"]
    assert_aligned(lines[:1] + lines[1::2], names, right={"sweeps"})
    arxiv = lines[0].index("arXiv")
    assert all(line.startswith(" " * arxiv + "sweeps: ") for line in lines[2::2])
    cost = re.compile(r"wall ~?\d+ s on \d+ workers, \d+ CPU-s( \([^)]*\))?")
    for paper in PAPERS.values():
        assert cost.fullmatch(paper.cost_quick) and cost.fullmatch(paper.cost_full), paper.id
    assert "not measured" not in out
    assert "load" not in out


def test_list_shows_shipped_sweeps():
    """The real console entry point, `python -m seqphase.cli`, lists the shipped sweeps and exits 0."""
    code, out, _ = cli("list")
    assert code == 0
    for name in ("glm-perceptron-se", "glm-perceptron-gamp", "glm-binary-perceptron-thresholds",
                 "glm-phase-retrieval-thresholds", "glm-cs-thresholds"):
        assert name in out
