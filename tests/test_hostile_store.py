"""A store given by someone else is data: hostile and damaged stores through every command.

One small store (the toy's seeded method: 4 points, 2 done and 2 failed, works kept per seed) is made once;
each case copies it and breaks it one way. Every case then goes through `run`, `retry-failed`, `status`,
`query`, `verify`, `plot` (and `reproduce` where the broken group stands for a paper's sweep), and for each:
- no code runs (a marker file that unpickling or importing would create stays absent);
- nothing is written outside the store or the named output (a digest of the case's whole folder);
- the read-only commands change no byte of the store (the same digest, before and after);
- bad input gets one line and exit 2.
The cases whose metadata declares sizes that would allocate gigabytes run in a subprocess under an address
space limit (`MEMORY_LIMIT`), so that an allocation before the limits are checked fails the test."""

import hashlib
import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spec_files import write_spec
from seqphase.cli import main
from seqphase.results.parts import FOLDER, Parts
from seqphase.results.store import DONE, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep

MEMORY_LIMIT = 1536 * 2 ** 20  # address space of the subprocess checks (imports take about 0.6 GiB of it)
SPEC = dict(alpha=[0.5, 1.0], extra_params='fail = ["never", "always"]')
SEEDED = dict(SPEC, name="toy-seeded", method="seeded", method_extra="n_seeds = 2")
READ_ONLY = ("status", "query", "query-o", "verify", "plot")


# -- the base store and its copies --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("hostile-base")
    spec = write_spec(folder, **SPEC)
    code = main(["run", str(spec), "--store", str(folder / "s.zarr"), "--cluster", client.scheduler.address,
                 "--retries", "0", "--no-progress"])
    assert code == 1  # two points fail (on purpose: retry-failed has something to do)
    return folder


@pytest.fixture
def case(base, tmp_path):
    shutil.copytree(base, tmp_path / "case", symlinks=True)
    return tmp_path / "case"


def digest(folder, skip=()):
    """SHA-256 of a folder's tree: names, file bytes, link targets (entries named in `skip` left out)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(root) / name
            if path.name in skip:
                continue
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            if path.is_symlink():
                h.update(b"->" + os.readlink(path).encode())
            elif path.is_file():
                h.update(path.read_bytes())
    return h.hexdigest()


def edit_json(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    meta.pop("consolidated_metadata", None)  # (the root's and the group's: stale once anything is edited)
    path.write_text(json.dumps(meta))


def group_attrs(case, change):
    edit_json(case / "s.zarr" / "toy" / "zarr.json", lambda meta: change(meta["attributes"]))
    edit_json(case / "s.zarr" / "zarr.json", lambda meta: None)


def array_meta(case, array, change):
    edit_json(case / "s.zarr" / "toy" / array / "zarr.json", change)
    group_attrs(case, lambda attrs: None)


# -- running the commands ----------------------------------------------------------------------------------
def command(case, which, address, sweep="toy"):
    store = ["--store", str(case / "s.zarr")]
    cluster = ["--cluster", address, "--retries", "0", "--no-progress"]
    return {"status": ["status", sweep, *store], "query": ["query", sweep, *store],
            "query-o": ["query", sweep, *store, "-o", str(case / "table.csv")], "verify": ["verify", sweep, *store],
            "plot": ["plot", sweep, *store, "-o", str(case / "figure.png")],
            "run": ["run", str(case / "toy.toml"), *store, *cluster],
            "retry-failed": ["retry-failed", sweep, *store, *cluster]}[which]


def invoke(capsys, args):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.err


def assert_one_line(code, err, *words):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("seqphase: error: "), (code, err)
    assert all(w in lines[0] for w in words), lines[0]


def through_every_command(case, capsys, address, expect, words=(), marker=None):
    """Each command on the case: `expect` {command: exit code}; read-only commands change no byte of the
    case folder (store included) but their named output; write commands write nothing outside the store."""
    outside = lambda: digest(case, skip=("s.zarr", "table.csv", "figure.png"))  # noqa: E731
    for which, wanted in expect.items():
        before, before_out = digest(case, skip=("table.csv", "figure.png")), outside()
        code, err = invoke(capsys, command(case, which, address))
        if wanted == 2:
            assert_one_line(code, err, *words)
        else:
            assert code == wanted, (which, code, err)
        if which in READ_ONLY or wanted == 2:
            assert digest(case, skip=("table.csv", "figure.png")) == before, f"{which} changed the store"
        assert outside() == before_out, f"{which} wrote outside the store"
        if marker is not None:
            assert not marker.exists(), f"{which} ran code from the store"
        for output in ("table.csv", "figure.png"):
            if wanted == 2:
                assert not (case / output).exists(), f"{which} wrote {output} though it refused"
            (case / output).unlink(missing_ok=True)


ALL_REFUSED = {c: 2 for c in READ_ONLY + ("run", "retry-failed")}


# -- the cases ---------------------------------------------------------------------------------------------
def test_base_store_passes_every_read_only_command_unchanged(case, capsys, client):
    through_every_command(case, capsys, client.scheduler.address,
                          {"status": 0, "query": 0, "query-o": 0, "verify": 0, "plot": 0})


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):  # unpickling creates the marker file
        return (open, (self.path, "w"))


def test_pickled_kept_work_is_never_unpickled(case, capsys, client):
    """A crafted work file at a point's predictable hash, in the earlier pickle format: never opened by any
    command; a run removes it unread (one notice line) and computes the work."""
    marker = case / "unpickled"
    store, address = str(case / "s.zarr"), client.scheduler.address
    run = ["--store", store, "--cluster", address, "--retries", "0", "--no-progress"]
    assert main(["run", str(write_spec(case, **SEEDED)), *run]) == 1
    spec3 = write_spec(case, **{**SEEDED, "alpha": [0.5, 1.0, 1.5]})
    new = [p for p in plan_sweep(load_sweep(str(spec3))).points if p.params["alpha"] == 1.5]
    for point in new:
        folder = case / "s.zarr" / FOLDER / "toy-seeded" / point.hash
        folder.mkdir(parents=True)
        (folder / "seed-0.pkl").write_bytes(pickle.dumps(_Marker(str(marker))))
    capsys.readouterr()
    before = digest(case)
    for which in ("status", "query", "verify"):
        assert invoke(capsys, command(case, which, address, sweep="toy-seeded"))[0] == 0
    assert digest(case) == before and not marker.exists()
    code, err = invoke(capsys, ["run", str(spec3), *run])
    assert code == 1 and not marker.exists()  # the failing points fail again; nothing was unpickled
    assert "2 kept works in the earlier pickle format were removed unread" in err
    assert not list((case / "s.zarr").rglob("*.pkl"))
    status = Store(store).open_sweep("toy-seeded").ledger()[0]
    assert (status[:, 0] == DONE).all()  # the points whose seed 0 was "kept" are computed


def test_kept_work_files_that_are_not_data_are_dropped(tmp_path):
    parts = Parts(tmp_path, "toy")
    assert parts.save("ab12", "seed-0", {"x": [1.5, (2, None)], "y": __import__("numpy").arange(3)}, {"runtime_s": 1.0})
    path = tmp_path / FOLDER / "toy" / "ab12" / "seed-0.npz"
    good = path.read_bytes()
    kept = parts.load_kept("ab12")["seed-0"]
    assert kept.result["x"] == [1.5, (2, None)] and kept.result["y"].tolist() == [0, 1, 2]
    # a flipped byte (checksum), an object array (allow_pickle=False), a file of another kind: dropped, recomputed
    import numpy as np

    flipped = bytearray(good)
    flipped[-200] ^= 1
    objects = tmp_path / "objects.npz"
    np.savez(objects, tree=np.frombuffer(b"{}", np.uint8), sha256=np.frombuffer(b"0" * 64, np.uint8),
             a0=np.array([_Marker(str(tmp_path / "ran"))], dtype=object))
    for bad in (bytes(flipped), objects.read_bytes(), b"\x80\x04K\x01."):
        path.write_bytes(bad)
        assert parts.load_kept("ab12") == {} and not path.exists()
    assert not (tmp_path / "ran").exists()
    assert not parts.save("ab12", "seed-1", _Marker("x"))  # an object the format cannot hold is not kept


def test_array_name_that_climbs_out_of_the_store(case, capsys, client):
    def climb(attrs):
        attrs["variables"] = attrs["variables"] + ["../../outside_rel"]
    group_attrs(case, climb)
    manifest = case / "s.zarr" / ".seqphase" / "manifests" / "toy.json"
    meta = json.loads(manifest.read_text())
    meta["metadata"]["../../outside_rel"] = meta["metadata"]["noise"]  # what `restore_lost_arrays` would write
    manifest.write_text(json.dumps(meta))
    through_every_command(case, capsys, client.scheduler.address, ALL_REFUSED, words=("variables",))
    assert not (case / "outside_rel").exists()


def test_stored_sweep_name_that_is_a_path(case, capsys, client):
    def absolute(attrs):
        resolved = json.loads(attrs["spec_resolved"])
        resolved["name"] = str(case / "elsewhere")
        attrs["spec_resolved"] = json.dumps(resolved)
    group_attrs(case, absolute)
    through_every_command(case, capsys, client.scheduler.address,
                          {"status": 0, "query": 0, "verify": 0, "retry-failed": 2}, words=("name",))
    assert not (case / "elsewhere").exists()


def test_symlinked_array_folder(case, capsys, client):
    (case / "s.zarr" / "toy" / "noise").rename(case / "outside_noise")
    (case / "s.zarr" / "toy" / "noise").symlink_to(case / "outside_noise")
    through_every_command(case, capsys, client.scheduler.address, ALL_REFUSED, words=("symbolic link",))


@pytest.mark.parametrize("linked", ["toy/gen_error/c", ".seqphase/manifests", ".seqphase-parts"])
def test_symlinked_folder_a_run_would_write_under(case, capsys, client, linked):
    inside = case / "s.zarr" / linked
    inside.parent.mkdir(parents=True, exist_ok=True)
    if inside.exists():
        inside.rename(case / "outside_folder")
    else:
        (case / "outside_folder").mkdir()
    inside.symlink_to(case / "outside_folder")
    through_every_command(case, capsys, client.scheduler.address, {"run": 2, "retry-failed": 2},
                          words=("symbolic link",))


@pytest.mark.parametrize("broken, words", [
    (lambda case: edit_json(case / "s.zarr" / "zarr.json",
                            lambda m: m["attributes"].update(seqphase_store_format="1")), ("store format",)),
    (lambda case: group_attrs(case, lambda a: a.update(variables="noise")), ("variables",)),
    (lambda case: group_attrs(case, lambda a: a.update(runs="all of them")), ("runs",)),
    (lambda case: group_attrs(case, lambda a: a.update(runs=[{"work_s": "x"}])), ("runs",)),
    (lambda case: edit_json(case / "s.zarr" / ".seqphase" / "manifests" / "toy.json",
                            lambda m: m["chunks"].update({"noise/c/../../../../victim": [1, 2]})), ("manifest",)),
    (lambda case: group_attrs(case, lambda a: a.update(spec_resolved="{not json")), ("spec_resolved",)),
    (lambda case: group_attrs(case, lambda a: a.update(plot="[1, 2]")), ("plot",)),
    (lambda case: array_meta(case, "noise", lambda m: m["chunk_grid"]["configuration"].update(
        chunk_shape=[0] + m["chunk_grid"]["configuration"]["chunk_shape"][1:])), ("noise",)),
    (lambda case: array_meta(case, "status", lambda m: m.update(shape=[3] + m["shape"][1:])), ("being extended",)),
    (lambda case: array_meta(case, "noise", lambda m: (m.update(shape=m["shape"][:-1] + [20_000_000]), m[
        "chunk_grid"]["configuration"].update(chunk_shape=m["shape"]))), ("a chunk may hold",)),  # 160 MB a point
    (lambda case: group_attrs(case, lambda a: a.update(plot=json.dumps({"se_sweep": "/elsewhere/evil.toml"}))),
     ("plot", "not a sweep name")),
    (lambda case: group_attrs(case, lambda a: a.pop("model")), ("model",)),
], ids=["format-not-a-number", "variables-not-a-list", "runs-not-a-list", "runs-widths-not-numbers",
        "manifest-chunk-path", "spec-not-json", "plot-not-an-object", "zero-chunk-size", "grid-mid-extension",
        "chunks-larger-than-a-point-may-be", "plot-companion-a-path", "no-model"])
def test_damaged_metadata_gets_one_line(case, capsys, client, broken, words):
    broken(case)
    expect = {c: 2 for c in READ_ONLY + ("retry-failed",)}
    if "being extended" not in words:
        expect["run"] = 2  # (a run rolls an interrupted extension back: it is the writer)
    through_every_command(case, capsys, client.scheduler.address, expect, words=words)


def test_group_without_its_resolved_spec(case, capsys, client):
    """What the readers need is there; `retry-failed` has no spec to rerun: one line."""
    group_attrs(case, lambda attrs: attrs.pop("spec_resolved"))
    through_every_command(case, capsys, client.scheduler.address,
                          {"status": 0, "query": 0, "verify": 0, "retry-failed": 2}, words=("spec_resolved",))


def test_plot_imports_no_module_a_store_names(case, capsys, client, monkeypatch):
    marker = case / "imported"
    plugins = case / "plugins"
    plugins.mkdir()
    (plugins / "hostile_plugin.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass X: pass\n")
    monkeypatch.syspath_prepend(str(plugins))
    group_attrs(case, lambda attrs: attrs.update(model="hostile_plugin:X"))
    through_every_command(case, capsys, client.scheduler.address,
                          {"status": 0, "query": 0, "verify": 0, "plot": 0}, marker=marker)
    assert "hostile_plugin" not in sys.modules
    # only when asked (your own model, to draw its own figure) is the module imported
    assert main(command(case, "plot", "") + ["--import-model"]) == 0 and marker.exists()


@pytest.mark.parametrize("name", ["../toy", "toy\n", "/etc", "..", ".seqphase"])
def test_sweep_names_that_are_paths_are_bad_input_not_damage(case, capsys, name):
    before = digest(case)
    for which in ("status", "query", "verify", "plot"):
        args = command(case, which, "", sweep=name)
        code, err = invoke(capsys, args)
        assert_one_line(code, err, "not a valid sweep name")
        assert "corrupted" not in err
    assert digest(case) == before


def test_outputs_and_store_paths_that_cannot_be(case, capsys, tmp_path, client):
    store = str(case / "s.zarr")
    (case / "folder").mkdir()
    for args, words in ((["query", "toy", "--store", store, "-o", str(case / "folder")], ("is a folder",)),
                        (["query", "toy", "--store", store, "-o", str(case / "no" / "t.csv")], ("does not exist",)),
                        (["plot", "toy", "--store", store, "-o", str(case / "no" / "f.png")], ("does not exist",)),
                        (["status", "toy", "--store", str(case / "toy.toml" / "s.zarr")], ("is a file",)),
                        (["run", str(case / "toy.toml"), "--store", str(case / "toy.toml" / "s.zarr"),
                          "--cluster", client.scheduler.address], ("is a file",)),
                        (["run", str(case / "toy.toml"), "--store", str(tmp_path / "n.zarr"), "--cluster",
                          "file:///tmp/x"], ("--cluster",)),
                        (["run", str(case / "toy.toml"), "--store", str(tmp_path / "n.zarr"), "--cluster",
                          "inproc://nowhere"], ("--cluster",))):
        before = digest(case)
        assert_one_line(*invoke(capsys, args), *words)
        assert digest(case) == before
    assert not (tmp_path / "n.zarr").exists()


@pytest.mark.parametrize("model", [".foo:X", ":X", "toymodel:", "a..b:X"])
def test_user_model_names_that_cannot_be_imported(tmp_path, capsys, model):
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace('"toymodel:ToyModel"', json.dumps(model)))
    assert_one_line(*invoke(capsys, ["run", str(spec), "--store", str(tmp_path / "s.zarr")]), "model")
    assert not (tmp_path / "s.zarr").exists()


def test_reproduce_refuses_a_hostile_group_and_removes_no_folder_of_others(case, capsys, client):
    from seqphase.sweeps.papers import PAPERS

    first = PAPERS["bsr"].runs[0].stored_name(True)
    group_attrs(case, lambda attrs: attrs.update(variables=["../../outside_rel"]))
    (case / "s.zarr" / "toy").rename(case / "s.zarr" / first)
    for kept in ("report.partial", "report.old"):
        (case / kept).mkdir()
        (case / kept / "theirs.txt").write_text("not seqphase's")
    before = digest(case)
    assert_one_line(*invoke(capsys, ["reproduce", "bsr", "--quick", "--store", str(case / "s.zarr"), "-o",
                                     str(case / "report"), "--cluster", client.scheduler.address]), "variables")
    assert digest(case) == before


def test_report_swap_leaves_folders_it_did_not_make(tmp_path, monkeypatch):
    from seqphase.results import reproduce

    def fake(paper, quick, store, out, plans, timings, tmp):
        (tmp / "index.html").write_text("new")
        return ["rows"]
    monkeypatch.setattr(reproduce, "_write", fake)
    out = tmp_path / "report"
    out.mkdir()
    (out / "index.html").write_text("old")
    for kept in ("report.partial", "report.old"):
        (tmp_path / kept).mkdir()
        (tmp_path / kept / "theirs.txt").write_text("not seqphase's")
    assert reproduce.write(None, True, None, out, [], {}) == ["rows"]
    assert (out / "index.html").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "report.old", "report.partial"]
    assert all((tmp_path / kept / "theirs.txt").is_file() for kept in ("report.partial", "report.old"))


# -- limits before allocation: a subprocess under an address-space limit -----------------------------------
def test_declared_sizes_and_asked_sizes_are_refused_before_allocation(case):
    """A coordinate of 2e9 values (15 GiB), 1e8 values in chunks of 1, a range of 1e8 values, a GAMP instance
    of d = 100000: each refused in one line within MEMORY_LIMIT of address space, the store unchanged."""
    huge = case / "huge"
    shutil.copytree(case, huge, symlinks=True)
    many = case / "many"
    shutil.copytree(case, many, symlinks=True)
    array_meta(huge, "alpha", lambda m: m.update(shape=[2_000_000_000]))

    def chunks_of_one(meta):
        meta["shape"] = [100_000_000]
        meta["chunk_grid"]["configuration"]["chunk_shape"] = [1]
    array_meta(many, "alpha", chunks_of_one)
    # an array folder that is none of the group's arrays, and consolidated metadata that declares other sizes
    extra = case / "extra"
    shutil.copytree(case, extra, symlinks=True)
    evil = json.loads((extra / "s.zarr" / "toy" / "alpha" / "zarr.json").read_text())
    evil.update(shape=[2_000_000_000], dimension_names=["evil"])
    (extra / "s.zarr" / "toy" / "evil").mkdir()
    (extra / "s.zarr" / "toy" / "evil" / "zarr.json").write_text(json.dumps(evil))
    group_meta = extra / "s.zarr" / "toy" / "zarr.json"
    meta = json.loads(group_meta.read_text())
    meta["consolidated_metadata"]["metadata"]["status"]["shape"] = [2_000_000_000] + \
        meta["consolidated_metadata"]["metadata"]["status"]["shape"][1:]
    meta["consolidated_metadata"]["metadata"]["evil"] = evil
    group_meta.write_text(json.dumps(meta))
    script = textwrap.dedent("""\
        import json, sys
        from seqphase.cli import main
        out = []
        for args in json.loads(sys.argv[1]):
            code = main(args)
            out.append(code)
        print(json.dumps(out))
        """)
    runs = []
    for folder in (huge, many):
        for which in ("status", "query", "verify", "plot"):
            runs.append(command(folder, which, "", "toy"))
    runs.append(["run", "glm-perceptron-se", "--set", "alpha=0:1:100000000", "--store", str(case / "new.zarr")])
    runs.append(["run", "glm-perceptron-gamp", "--set", "method.d=100000", "--store", str(case / "new.zarr"),
                 "--workers", "1"])
    refused = len(runs)
    runs += [command(extra, which, "", "toy") for which in ("status", "query", "verify", "plot")]
    before = {f: digest(f, skip=("figure.png",)) for f in (huge, many, extra)}
    out = subprocess.run([sys.executable, "-c", script, json.dumps(runs)], cwd=case, capture_output=True, text=True,
                         timeout=300, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                                            (MEMORY_LIMIT, MEMORY_LIMIT)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [2] * refused + [0] * (len(runs) - refused)
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.startswith("seqphase: error: ")]
    assert len(lines) == refused, out.stderr
    assert sum("a sweep may hold" in ln for ln in lines) == 9
    assert "GiB" in lines[-1] and "method.d" in lines[-1]
    assert (extra / "figure.png").is_file()  # the extra folder and the consolidated copy were not read
    assert {f: digest(f, skip=("figure.png",)) for f in (huge, many, extra)} == before
    assert not (case / "new.zarr").exists()


def test_memory_of_one_instance_is_checked_against_one_worker():
    """GLM GAMP at d = 20000, alpha = 5: 3 copies of a 1e5 x 2e4 matrix of doubles = 44.7 GiB, refused for a
    worker of 8 GB (a 16GB job of 2 processes) naming the profile's setting, accepted for 60 GB per worker;
    the estimate follows the arrays the family draws."""
    from seqphase.cluster.slurm import Profile
    from seqphase.core.errors import ParameterError
    from seqphase.sweeps.limits import check_plan_memory, instance_bytes

    plan = plan_sweep(load_sweep("glm-perceptron-gamp", overrides=["method.d=20000", "alpha=5"]))
    assert instance_bytes("glm", {"alpha": 5.0}, {"d": 20000}) == 3 * 100_000 * 20_000 * 8
    small = Profile(cores=2, processes=2, memory="16GB", source="p.toml")
    with pytest.raises(ParameterError) as info:
        check_plan_memory(plan, "slurm", slurm_profile=small)
    line = info.value.one_line()
    assert line.startswith("method.d: ") and "44.7 GiB" in line and "p.toml: memory = 16GB per job over 2 processes" \
        in line and "raise memory" in line
    check_plan_memory(plan, "slurm", slurm_profile=Profile(cores=1, memory="60GB"))  # fits: nothing raised
    assert instance_bytes("bsr", {"alpha": 1.0, "beta": 1.0}, {"d": 100, "precision": "float32"}) == 3 * 100 ** 4 * 4
    assert instance_bytes("glm", {"alpha": 5.0}, {"max_iter": 10}) == 0  # SE: no instance
