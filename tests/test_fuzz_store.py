"""Property-based tests (Hypothesis): generated store metadata, names, chunk files, specs, --set values and
SLURM profiles, with the assertions of test_hostile_store.py and test_hostile_files.py.

What a store holds is generated as edits of the small store of test_hostile_store.py (its group's
attributes, an array's zarr.json, the manifest, names, shapes, chunk keys and bytes), and what `status`,
`query`, `verify` and `open_results` run on it is called in this process: each returns, or raises the
project's one-line error (SeqphaseError); any other exception fails. No byte of the store changes and
nothing runs (a module the edits may name would create a marker). Specs, --set values and profiles go
through what `run` checks before starting anything, with the same rule, and an accepted profile's job
scripts must hold its values only where SLURM reads them.

The default suite runs a bounded number of examples (`EXAMPLES`, about 30 s in all, the same ones every run); `-m fuzz` runs
LONG_EXAMPLES of each. A failure found is kept below as an explicit @example."""

import io
import json
import os
import re
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from test_hostile_files import digest
from test_hostile_store import base  # noqa: F401  (the store: a fixture)
from seqphase.core.errors import SeqphaseError

pytestmark = pytest.mark.fuzz

EXAMPLES = 60        # per test in the default suite: the same examples every run (derandomized)
LONG_EXAMPLES = int(os.environ.get("SEQPHASE_FUZZ_EXAMPLES", 1000))  # per test under -m fuzz, new ones each run


@pytest.fixture
def fuzz_settings(request):
    """The Hypothesis settings: bounded and repeatable in the default suite, long and random when the run
    selects `-m fuzz`. No example database: what a long run finds is kept below as an @example."""
    expr = request.config.getoption("markexpr", "") or ""
    long = "fuzz" in expr and "not fuzz" not in expr
    return settings(max_examples=LONG_EXAMPLES if long else EXAMPLES, derandomize=not long, deadline=None,
                    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- what a store may hold ---------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=16)
# JSON text as an attribute holds it (the resolved spec, the plot table, ...), and text that is not JSON
json_texts = json_values.map(lambda v: json.dumps(v)) | st.text(max_size=40) | st.sampled_from(
    ["[" * 5000 + "]" * 5000, '{"se_sweep": "/etc/passwd.toml"}', '{"se_sweep": "../toy"}'])
names = st.text(max_size=30) | st.sampled_from(["..", ".", "../../outside", "/etc", "toy/../toy", "a" * 200,
                                                "toy.toml", "c/0", "zarr.json", ".seqphase", ""])
shapes = st.lists(st.integers(-3, 10 ** 13), max_size=7)
ATTRIBUTES = ["seqphase_sweep", "model", "method", "seed", "settings", "identity", "identity_hash",
              "point_dims", "variables", "status_codes", "plot", "runs", "spec", "spec_resolved", "store_layout",
              "created_at", "provenance", "plugins"]
ARRAYS = ["status", "point_hash", "error", "noise", "alpha", "fail", "seed", "row"]
FIELDS = ["shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs", "dimension_names",
          "attributes", "node_type", "zarr_format", "storage_transformers"]


def readers_return_or_refuse(store, sweep="toy"):
    """status, query, verify and open_results on `store`: each returns or raises one line (SeqphaseError)."""
    from seqphase import api
    from seqphase.results.query import open_results, write_table
    from seqphase.results.store import Store
    from seqphase.results.verify import find_damage, never_written

    def verify():
        group = Store(store).open_sweep(sweep)
        find_damage(group, thorough=True)
        never_written(group)

    for call in (lambda: api.status(sweep, store), lambda: write_table(sweep, store, io.StringIO()), verify,
                 lambda: open_results(sweep, store)):
        try:
            call()
        except SeqphaseError as exc:
            assert "\n" not in exc.one_line()


def edited_store(pristine, edit):
    """A copy of the store with `edit(store)` applied, checked by `readers_return_or_refuse`, unchanged by it."""
    folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        store = folder / "s.zarr"
        shutil.copytree(pristine, store, symlinks=True)
        edit(store)
        before = digest(folder)
        readers_return_or_refuse(store)
        assert digest(folder) == before, "a read-only command changed the store"
        assert not (folder / "ran").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def edit_json_file(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def pristine(base):  # noqa: F811
    return base / "s.zarr"


# -- the store tests ---------------------------------------------------------------------------------------
def test_fuzz_group_attributes(pristine, fuzz_settings):
    @fuzz_settings
    @given(key=st.sampled_from(ATTRIBUTES), value=json_values | json_texts, drop=st.booleans())
    @example(key="plot", value='{"se_sweep": "/x/evil.toml"}', drop=False)
    @example(key="model", value="", drop=True)  # found: status read attrs["model"] (KeyError)
    @example(key="point_dims", value=[], drop=False)  # found: query split the grid on no dim (IndexError)
    @example(key="spec_resolved", value="[" * 100_000 + "]" * 100_000, drop=False)
    @example(key="runs", value=[{"work_s": 1e308, "works": 2 ** 70, "chain_s": -1, "longest_work_s": 0.0}],
             drop=False)
    def check(key, value, drop):
        def edit(store):
            def change(meta):
                meta.pop("consolidated_metadata", None)
                if drop:
                    meta["attributes"].pop(key, None)
                else:
                    meta["attributes"][key] = value
            edit_json_file(store / "toy" / "zarr.json", change)
        edited_store(pristine, edit)
    check()


def test_fuzz_array_metadata(pristine, fuzz_settings):
    @fuzz_settings
    @given(array=st.sampled_from(ARRAYS), field=st.sampled_from(FIELDS), value=json_values, shape=shapes,
           chunks=shapes, which=st.integers(0, 2))
    @example(array="alpha", field="shape", value=None, shape=[2_000_000_000], chunks=[1], which=1)
    # found: xarray's KeyError and "axes don't match array" (dimension_names), TypeError (attributes)
    @example(array="alpha", field="dimension_names", value=None, shape=[], chunks=[], which=0)
    @example(array="status", field="dimension_names", value=None, shape=[], chunks=[], which=0)
    @example(array="status", field="attributes", value=[None], shape=[], chunks=[], which=0)
    @example(array="status", field="attributes", value=False, shape=[], chunks=[], which=0)
    @example(array="noise", field="shape", value=None, shape=[2, 2, 1, 1, 10 ** 9], chunks=[2, 2, 1, 1, 10 ** 9],
             which=1)
    def check(array, field, value, shape, chunks, which):
        def change(meta):
            if which == 0:
                meta[field] = value
            elif which == 1:
                meta["shape"] = shape
                meta["chunk_grid"]["configuration"]["chunk_shape"] = chunks
            else:
                meta.pop(field, None)
        edited_store(pristine, lambda store: edit_json_file(store / "toy" / array / "zarr.json", change))
    check()


def test_fuzz_manifest(pristine, fuzz_settings):
    chunk_keys = st.text(max_size=30) | st.builds(
        lambda a, parts: f"{a}/c/" + "/".join(parts), st.sampled_from(ARRAYS + [".."]),
        st.lists(st.sampled_from(["0", "1", "99999", "-1", "..", "x", "0" * 12]), max_size=6))

    @fuzz_settings
    @given(chunks=st.dictionaries(chunk_keys, json_values, max_size=4), metadata=st.dictionaries(
        st.sampled_from(ARRAYS) | names, json_values, max_size=3), whole=st.none() | json_values)
    @example(chunks={"noise/c/../../../../victim": [1, 2]}, metadata={}, whole=None)
    def check(chunks, metadata, whole):
        def change(meta):
            if whole is not None:
                meta.clear()
                meta["whole"] = whole
            meta.setdefault("chunks", {}).update(chunks)
            if isinstance(meta["chunks"], dict):
                meta.setdefault("metadata", {}).update(metadata)
        edited_store(pristine, lambda store: edit_json_file(store / ".seqphase" / "manifests" / "toy.json", change))
    check()


def test_fuzz_chunk_files_and_raw_metadata(pristine, fuzz_settings):
    @fuzz_settings
    @given(array=st.sampled_from(ARRAYS), key=st.lists(st.sampled_from(["0", "1", "7", "x", "0.partial", "c"]),
                                                       min_size=1, max_size=6),
           data=st.binary(max_size=200), target=st.sampled_from(["chunk", "array-meta", "group-meta", "root-meta",
                                                                 "manifest"]))
    @example(array="status", key=["0", "0", "0", "0"], data=b"\x00" * 3, target="chunk")
    @example(array="seed", key=["0"], data=b"", target="chunk")  # found: a damaged seed coordinate (ValueError)
    @example(array="status", key=["0"], data=b"\xff\xfe{", target="group-meta")
    def check(array, key, data, target):
        def edit(store):
            path = {"chunk": store / "toy" / array / "c" / Path(*key), "array-meta": store / "toy" / array / "zarr.json",
                    "group-meta": store / "toy" / "zarr.json", "root-meta": store / "zarr.json",
                    "manifest": store / ".seqphase" / "manifests" / "toy.json"}[target]
            if any(parent.is_file() for parent in path.parents):
                return  # (a chunk key under a chunk file: nothing can be written there)
            if path.is_dir():
                shutil.rmtree(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        edited_store(pristine, edit)
    check()


def test_fuzz_sweep_names(pristine, fuzz_settings, tmp_path):
    """A sweep name typed by the user or found in a store: a group of the store or one line, never a path."""
    before = digest(pristine)

    @fuzz_settings
    @given(name=names)
    @example(name="../toy")
    @example(name="toy\n")
    def check(name):
        readers_return_or_refuse(pristine, name)
        assert digest(pristine) == before
    check()


# -- specs, --set values, SLURM profiles -------------------------------------------------------------------
def toml_value(value):
    """A TOML literal of a JSON-like value (JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


# No ':' in generated text: a "module:Class" value would import a module of that name (a spec is the user's
# own code to run; the fuzzer must not import, say, `antigravity`).
plain_text = st.text(alphabet=st.characters(blacklist_characters=":", blacklist_categories=("Cs",)), max_size=20)
toml_leaves = st.none().map(lambda _: "x") | st.booleans() | st.integers(-2 ** 63, 2 ** 63 - 1) | \
    st.floats(allow_nan=False, allow_infinity=False) | plain_text
toml_values = st.recursive(toml_leaves, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(plain_text, inner, max_size=3), max_leaves=12)


def load_or_refuse(spec, overrides=()):
    """What `run` does with a spec before any cluster: load, plan, check sizes and memory (SeqphaseError only)."""
    from seqphase.sweeps.limits import check_plan_memory
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    try:
        plan = plan_sweep(load_sweep(str(spec), overrides=overrides))
        check_plan_memory(plan, "local", workers=1)
    except SeqphaseError as exc:
        assert "\n" not in exc.one_line()


def test_fuzz_spec_toml(tmp_path, fuzz_settings):
    spec = tmp_path / "fuzz.toml"

    @fuzz_settings
    @given(model=st.sampled_from(["glm", "toymodel:ToyModel", "multiindex", "nosuch"]) | plain_text,
           method=st.sampled_from(["se", "gamp", "threshold"]) | plain_text,
           params=st.dictionaries(st.sampled_from(["alpha", "delta", "prior", "channel", "d"]) | plain_text,
                                  toml_values, max_size=4),
           extra=st.dictionaries(plain_text, toml_values, max_size=2), raw=st.none() | st.binary(max_size=300))
    @example(model="glm", method="se", params={"alpha": {"start": 0, "stop": 1, "num": 10 ** 9}}, extra={}, raw=None)
    @example(model="glm", method="se", params={}, extra={}, raw=b"a = " + b"[" * 100_000 + b"]" * 100_000)
    @example(model="glm", method="se", params={}, extra={}, raw=b'name = "x"\n# \xff\n')
    def check(model, method, params, extra, raw):
        if raw is not None:
            spec.write_bytes(raw)
        else:
            lines = ['name = "fuzz"', f"model = {json.dumps(model)}", "seed = 1"]
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in extra.items()]
            lines += ["[params]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in params.items()]
            lines += ["[method]", f"name = {json.dumps(method)}"]
            spec.write_text("\n".join(lines) + "\n")
        load_or_refuse(spec)
    check()


def test_fuzz_set_values(fuzz_settings):
    from seqphase.sweeps.spec import shipped_specs

    spec = shipped_specs()["glm-perceptron-se"]

    @fuzz_settings
    @given(key=st.sampled_from(["alpha", "delta", "prior", "channel", "method.max_iter", "method.tol", "nosuch",
                                "method.nosuch", ""]) | plain_text,
           value=st.text(alphabet="0123456789.,:-+eEinfNa xyz", max_size=10))
    @example(key="alpha", value="0:1:1e99")
    @example(key="alpha", value="0:1:-1")
    @example(key="method.max_iter", value="1e400")  # found: OverflowError comparing an integer setting with inf
    def check(key, value):
        load_or_refuse(spec, overrides=[f"{key}={value}"])
    check()


PROFILE_KEYS = ["partition", "account", "memory", "walltime", "lifetime", "lifetime_stagger", "interface",
                "local_directory", "log_directory", "credentials_directory", "python", "job_extra_directives",
                "cores", "processes", "jobs"]
shell_text = st.text(alphabet=st.sampled_from(list("0123456789:-$()`;|&<> \"'\\\n\tabcGBMKTi/.=%{}*~")), max_size=16) | \
    st.sampled_from(["04:00:00", "90", "1-12:00:00", "UNLIMITED", "16GB", "4G", "ib0", "$TMPDIR", "slurm logs",
                     "/opt/py 3/bin/python", "--qos=normal", "3h30m", "10m", "xeon"])


def test_fuzz_slurm_profile(tmp_path, fuzz_settings):
    """A profile is refused in one line, or its job scripts hold each value only where SLURM reads it: one
    #SBATCH option per line, a time limit in SLURM's syntax, no command substitution of the profile's."""
    from seqphase.cluster.slurm import driver_job_script, load_profile, parse_slurm_time, worker_job_script

    profile_file = tmp_path / "profile.toml"

    @fuzz_settings
    @given(values=st.dictionaries(st.sampled_from(PROFILE_KEYS), shell_text | st.integers(-5, 100) |
                                  st.lists(shell_text, max_size=3), max_size=4),
           driver=st.dictionaries(st.sampled_from(["walltime", "memory", "partition"]), shell_text, max_size=2))
    @example(values={"walltime": "1:00:00 --uid=0"}, driver={})
    @example(values={"log_directory": "$(touch ran)"}, driver={})
    @example(values={"python": "/opt/my python/bin/python"}, driver={})
    @example(values={"walltime": "1:00\n"}, driver={})
    @example(values={"lifetime": ""}, driver={})  # found: dask's IndexError on an empty duration
    @example(values={"walltime": "04:00:00", "memory": "16GB", "interface": "ib0", "local_directory": "$TMPDIR",
                     "python": "/opt/py 3/bin/python", "log_directory": "slurm logs"}, driver={"walltime": "90"})
    def check(values, driver):
        lines = [f"{k} = {toml_value(v)}" for k, v in values.items()]
        lines += ["[driver]"] + [f"{k} = {toml_value(v)}" for k, v in driver.items()]
        profile_file.write_text("\n".join(lines) + "\n")
        try:
            profile = load_profile(profile_file)
            scripts = [worker_job_script(profile, tmp_path / "logs"),
                       driver_job_script(profile, ["true"], "seqphase-driver-fuzz", tmp_path / "logs", tmp_path)]
        except SeqphaseError as exc:
            assert "\n" not in exc.one_line()
            return
        for script in scripts:
            for line in script.splitlines():
                if line.startswith("#SBATCH"):
                    words = shlex.split(line)
                    assert len(words) in (2, 3) or any(line == f"#SBATCH {x}" for x in
                                                       profile.job_extra_directives + profile.driver.job_extra_directives), line
                    if words[1] == "-t":
                        assert parse_slurm_time(words[2]) is not None, line
                elif "$(" in line or "`" in line:
                    assert line.startswith("echo \"seqphase driver job"), line  # the driver's own log line
        worker = next(line for line in scripts[0].splitlines() if "distributed.cli.dask_worker" in line)
        assert shlex.split(worker)[0] == (profile.python or shlex.split(worker)[0])
        assert not re.search(r"\$\(|`", worker)
    check()
