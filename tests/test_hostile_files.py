"""A store given by someone else is data, down to its files: special files, links, sizes, nesting, and names
that would be paths. Spec files and SLURM profiles too.

Each case is a copy of the small store of `test_hostile_store.py` broken one way. All cases run in one
subprocess (`RUNNER`), the way a user runs `seqphase`: its own script folder first on sys.path, the case's
folder as working folder, under an address-space limit of MEMORY_LIMIT (1.5 GiB: the commands on an
intact store need about 0.6 GiB; a read of an 8 GiB file, or of /dev/zero, cannot fit) and with a
10 s alarm around each command (a FIFO opened for reading would wait forever). For every command:
- it ends within 10 s, with the exit code the case expects: 2 and one line naming the problem;
- no code runs (a module `payload.py` in the working folder would create a marker file);
- no byte of the case's folder changes: store, lock, the data links point to, and a sibling folder."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_hostile_store import MEMORY_LIMIT, base, group_attrs  # noqa: F401  (base: the store, a fixture)
from seqphase.results.lock import LOCK_NAME

COMMAND_SECONDS = 10  # the most a command may take on a hostile store
GiB = 2 ** 30
ALL = ("run", "retry-failed", "status", "query", "verify", "plot", "reproduce")
READ_ONLY = ("status", "query", "verify", "plot")
RUNNER = textwrap.dedent("""\
    import contextlib, io, json, signal, sys, time, traceback
    from seqphase.cli import main

    def alarm(signum, frame):
        raise TimeoutError("took longer than the alarm")

    signal.signal(signal.SIGALRM, alarm)
    out = []
    for label, args in json.loads(sys.argv[1]):
        err, start = io.StringIO(), time.monotonic()
        signal.alarm(int(sys.argv[2]))
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(args)
        except BaseException as exc:  # a traceback where one line is promised
            code = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            signal.alarm(0)
        out.append([label, code, time.monotonic() - start, err.getvalue()])
    print(json.dumps(out))
    """)


def digest(folder):
    """SHA-256 of a folder's tree without opening anything but regular files: names, types, link targets,
    file bytes (files over 64 MiB by size and their first MiB: the sparse ones of the cases)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(dirs + files):
            path = Path(root) / name
            info = os.lstat(path)
            h.update(f"{path.relative_to(folder)}\0{stat.S_IFMT(info.st_mode)}\0".encode())
            if stat.S_ISLNK(info.st_mode):
                h.update(os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    h.update(str(info.st_size).encode() + handle.read(2 ** 20 if info.st_size > 64 * 2 ** 20 else -1))
    return h.hexdigest()


# -- the breakages: each takes (case folder, store, group name) --------------------------------------------
def a_chunk(store, group, array="status"):
    return sorted(p for p in (store / group / array / "c").rglob("*") if p.is_file())[0]


def fifo(path):
    path.unlink()
    os.mkfifo(path)


def dev_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")


def sparse(path, size=8 * GiB):
    with open(path, "r+b") as handle:
        handle.truncate(size)


def link_outside(case, path):
    """Move `path` out of the store and leave a link to it: the same bytes, read from outside."""
    outside = case / "outside" / "linked"
    outside.mkdir(parents=True, exist_ok=True)
    target = outside / path.name
    path.rename(target)
    path.symlink_to(target)


def deep_json(path, depth=200_000):
    path.write_text("[" * depth + "]" * depth)


def not_a_folder(path):
    shutil.rmtree(path)
    path.write_text("a file where a folder belongs\n")


def plot_names_a_spec(case, store, group, spec_path):
    """The store's `plot` attribute names a spec file whose model is `payload:M` (in the working folder)."""
    (store / "evil.toml").write_text('name = "evil"\nmodel = "payload:M"\n[params]\nalpha = 1.0\n'
                                     '[method]\nname = "se"\n')
    group_attrs_of(store, group, lambda attrs: attrs.update(plot=json.dumps({"se_sweep": spec_path})))


def group_attrs_of(store, group, change):
    """`group_attrs` of test_hostile_store for a group of any name in any store."""
    meta_file = store / group / "zarr.json"
    meta = json.loads(meta_file.read_text())
    change(meta["attributes"])
    meta.pop("consolidated_metadata", None)
    meta_file.write_text(json.dumps(meta))
    root = json.loads((store / "zarr.json").read_text())
    root.pop("consolidated_metadata", None)
    (store / "zarr.json").write_text(json.dumps(root))


LOCK_ONLY = {"status": 2, "run": 2, "retry-failed": 2, "reproduce": 2, "query": 0, "verify": 0, "plot": 0}
# case: (breakage, {command: exit code} (default: every command 2), words of the one line)
CASES = {
    "chunk-fifo": (lambda c, s, g: fifo(a_chunk(s, g)), None, ("FIFO",)),
    "chunk-dev-zero": (lambda c, s, g: dev_zero(a_chunk(s, g)), None, ("symbolic link",)),
    "chunk-sparse-8GiB": (lambda c, s, g: sparse(a_chunk(s, g)), None, ("8,192 MiB",)),
    "chunk-linked-outside": (lambda c, s, g: link_outside(c, a_chunk(s, g)), None, ("symbolic link",)),
    "chunk-folder-linked-outside": (lambda c, s, g: link_outside(c, s / g / "status" / "c"), None,
                                    ("symbolic link",)),
    "array-zarr-json-linked-outside": (lambda c, s, g: link_outside(c, s / g / "noise" / "zarr.json"), None,
                                       ("symbolic link",)),
    "array-zarr-json-sparse-8GiB": (lambda c, s, g: sparse(s / g / "noise" / "zarr.json"), None, ("8,192 MiB",)),
    "group-zarr-json-sparse-8GiB": (lambda c, s, g: sparse(s / g / "zarr.json"), None, ("8,192 MiB",)),
    "group-zarr-json-nested-200000-deep": (lambda c, s, g: deep_json(s / g / "zarr.json"), None, ("nested",)),
    "array-zarr-json-nested-200000-deep": (lambda c, s, g: deep_json(s / g / "noise" / "zarr.json"), None,
                                           ("nested",)),
    "root-zarr-json-nested-200000-deep": (lambda c, s, g: deep_json(s / "zarr.json"), None, ("nested",)),
    "manifest-dev-zero": (lambda c, s, g: dev_zero(s / ".seqphase" / "manifests" / f"{g}.json"), None,
                          ("symbolic link",)),
    "manifest-fifo": (lambda c, s, g: fifo(s / ".seqphase" / "manifests" / f"{g}.json"), None, ("FIFO",)),
    "manifest-sparse-8GiB": (lambda c, s, g: sparse(s / ".seqphase" / "manifests" / f"{g}.json"), None,
                             ("8,192 MiB",)),
    "manifest-nested-200000-deep": (lambda c, s, g: deep_json(s / ".seqphase" / "manifests" / f"{g}.json"),
                                    None, ("nested",)),
    "dot-seqphase-is-a-file": (lambda c, s, g: not_a_folder(s / ".seqphase"), None, (".seqphase",)),
    "lock-fifo": (lambda c, s, g: os.mkfifo(s / LOCK_NAME), LOCK_ONLY, ("FIFO",)),
    "lock-dev-zero": (lambda c, s, g: (s / LOCK_NAME).symlink_to("/dev/zero"), LOCK_ONLY, ("symbolic link",)),
    "lock-sparse-8GiB": (lambda c, s, g: (s / LOCK_NAME).write_bytes(b"") or sparse(s / LOCK_NAME), LOCK_ONLY,
                         ("8,192 MiB",)),
    "plot-names-a-spec-by-absolute-path": (lambda c, s, g: plot_names_a_spec(c, s, g, str(s / "evil.toml")), None,
                                           ("plot",)),
    "plot-names-a-spec-by-relative-path": (lambda c, s, g: plot_names_a_spec(c, s, g, "s.zarr/evil.toml"), None,
                                           ("plot",)),
}


def _prepare(base, tmp_path, label):
    """The case's folder: the store (group `toy`), a copy whose group has the name of the bsr paper's first
    sweep (what `reproduce` opens), both broken; a sibling folder; `payload.py` that creates a marker."""
    from seqphase.sweeps.papers import PAPERS

    case = tmp_path / label
    shutil.copytree(base, case, symlinks=True)
    paper_group = PAPERS["bsr"].runs[0].stored_name(True)
    shutil.copytree(case / "s.zarr", case / "paper" / "s.zarr", symlinks=True)
    (case / "paper" / "s.zarr" / "toy").rename(case / "paper" / "s.zarr" / paper_group)
    manifests = case / "paper" / "s.zarr" / ".seqphase" / "manifests"
    (manifests / "toy.json").rename(manifests / f"{paper_group}.json")
    (case / "sibling").mkdir()
    (case / "sibling" / "theirs.txt").write_text("not seqphase's\n")
    (case / "payload.py").write_text(f"open({str(case / 'ran')!r}, 'w').close()\nclass M: pass\n")
    breakage = CASES[label][0]
    breakage(case, case / "s.zarr", "toy")
    breakage(case / "paper", case / "paper" / "s.zarr", paper_group)
    return case


def _commands(case, which=ALL, sweep="toy"):
    store = ["--store", str(case / "s.zarr")]
    local = ["--cluster", "local", "--workers", "1", "--retries", "0", "--no-progress"]
    return {"run": ["run", str(case / "toy.toml"), *store, *local],
            "retry-failed": ["retry-failed", sweep, *store, *local],
            "status": ["status", sweep, *store],
            "query": ["query", sweep, *store, "-o", str(case / "table.csv")],
            "verify": ["verify", sweep, *store],
            "plot": ["plot", sweep, *store, "-o", str(case / "figure.png")],
            "reproduce": ["reproduce", "bsr", "--quick", "--store", str(case / "paper" / "s.zarr"),
                          "-o", str(case / "report"), *local]}


def run_commands(tmp_path, cwd, runs):
    """Run [(label, argv)] in one `seqphase` process (RUNNER) under MEMORY_LIMIT, each under a
    COMMAND_SECONDS alarm; [(label, exit code or the exception, seconds, stderr)]."""
    import resource

    runner = tmp_path / "runner" / "seqphase_runner.py"  # its own folder first on sys.path, as a console script's
    runner.parent.mkdir(exist_ok=True)
    runner.write_text(RUNNER)
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests] + [p for p in sys.path if "site-packages" in p])}
    out = subprocess.run([sys.executable, str(runner), json.dumps(runs), str(COMMAND_SECONDS)], cwd=cwd,
                         capture_output=True, text=True, env=env,
                         timeout=COMMAND_SECONDS * len(runs) + 60,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_results(results, expected, words, label=""):
    for which, code, seconds, err in results:
        assert seconds < COMMAND_SECONDS, (label, which, seconds)
        lines = err.strip().splitlines()
        assert code == expected[which], (label, which, code, err[-2000:])
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("seqphase: error: "), (label, which, err)
            assert all(w in lines[0] for w in words), (label, which, lines[0])


# -- the store cases -------------------------------------------------------------------------------------
def test_hostile_files_through_every_command(base, tmp_path):  # noqa: F811  (base: the fixture)
    """Every case of CASES through the seven commands, in one process."""
    cases = {label: _prepare(base, tmp_path, label) for label in CASES}
    before = {label: digest(case) for label, case in cases.items()}
    runs = [(f"{label}|{which}", args) for label, case in cases.items() for which, args in _commands(case).items()]
    results = run_commands(tmp_path, tmp_path, runs)
    by_case = {}
    for label_which, code, seconds, err in results:
        label, which = label_which.split("|")
        by_case.setdefault(label, []).append((which, code, seconds, err))
    for label, case in cases.items():
        _, expected, words = CASES[label]
        check_results(by_case[label], expected or dict.fromkeys(ALL, 2), words, label)
        for output in ("table.csv", "figure.png"):
            (case / output).unlink(missing_ok=True)  # (written by the commands a lock case leaves alone)
        assert not (case / "report").exists(), label
        assert not (case / "ran").exists(), f"{label}: code from the store ran"
        assert digest(case) == before[label], f"{label}: a command changed a byte"


def test_working_folder_modules_never_run_from_read_only_commands(base, tmp_path):  # noqa: F811
    """The store names the model `payload:M` and its plot companion `payload.toml`, both of which the working
    folder holds (a store handed over in a folder with a module of theirs, the user standing in it): no
    read-only command imports the module or reads the spec; they succeed (the companion is not a group here)."""
    case = tmp_path / "case"
    shutil.copytree(base, case, symlinks=True)
    (case / "payload.py").write_text(f"open({str(case / 'ran')!r}, 'w').close()\nclass M: pass\n")
    (case / "payload.toml").write_text('name = "payload"\nmodel = "payload:M"\n[params]\nalpha = 1.0\n'
                                       '[method]\nname = "se"\n')

    def names_payload(attrs):
        attrs.update(model="payload:M", plot=json.dumps({"se_sweep": "payload.toml"}))
    group_attrs_of(case / "s.zarr", "toy", names_payload)
    before = digest(case / "s.zarr")
    commands = _commands(case)
    results = run_commands(tmp_path, case, [(which, commands[which]) for which in READ_ONLY])
    check_results(results, dict.fromkeys(READ_ONLY, 0), ())
    assert not (case / "ran").exists()
    assert digest(case / "s.zarr") == before


def test_a_store_path_that_is_a_link_is_followed(base, tmp_path, capsys):  # noqa: F811
    """Links are refused below the store's folder; the --store path itself is yours and may be one."""
    from seqphase.cli import main

    shutil.copytree(base, tmp_path / "case", symlinks=True)
    (tmp_path / "link.zarr").symlink_to(tmp_path / "case" / "s.zarr")
    assert main(["status", "toy", "--store", str(tmp_path / "link.zarr")]) == 0


def test_an_infinite_number_is_refused(capsys):
    from seqphase.core.errors import SpecError
    from seqphase.sweeps.spec import load_sweep

    with pytest.raises(SpecError, match="infinite"):
        load_sweep("glm-perceptron-se", overrides=["method.max_iter=1e400"])


# -- specs and profiles ----------------------------------------------------------------------------------
SPEC_CASES = {
    "not-utf-8": (lambda path: path.write_bytes(path.read_bytes() + b"# \xff\xfe\n"), ("UTF-8",)),
    "toml-nested-200000-deep": (lambda path: path.write_text("a = " + "[" * 200_000 + "]" * 200_000 + "\n"),
                                ("nested",)),
    "sparse-8GiB": (lambda path: sparse(path), ("8,192 MiB",)),
    "fifo": (lambda path: fifo(path), ()),  # not a file: no spec by that name (the message says which)
}
PROFILE_CASES = {
    "walltime-with-an-option": ('walltime = "1:00:00 --uid=0"', ("walltime", "SLURM time")),
    "walltime-command": ('walltime = "$(touch ran)"', ("walltime", "command substitution")),
    "log-directory-command": ('log_directory = "logs$(touch ran)"', ("log_directory", "command substitution")),
    "log-directory-backticks": ('log_directory = "`touch ran`"', ("log_directory", "command substitution")),
    "memory-with-an-option": ('memory = "4GB --uid=0"', ("memory",)),
    "driver-walltime": ('[driver]\nwalltime = "2-00:00:00 -p other"', ("driver.walltime",)),
    "directive-not-an-option": ('job_extra_directives = ["touch ran"]', ("job_extra_directives",)),
    "sparse-8GiB": (None, ("8,192 MiB",)),
}


def test_hostile_specs_and_profiles(base, tmp_path):  # noqa: F811
    """A spec that is not UTF-8, nested too deeply, 8 GiB (sparse) or a FIFO, given to every command that
    takes a spec (run, and status, query, verify, plot, which accept a spec's path as the sweep); a SLURM
    profile whose values are outside SLURM's syntax or would run a command, given to run, retry-failed and
    reproduce: one line, exit 2, within 10 s, nothing written, nothing run."""
    case = tmp_path / "case"
    shutil.copytree(base, case, symlinks=True)
    runs = []
    for label, (breakage, _) in SPEC_CASES.items():
        spec = case / f"{label}.toml"
        shutil.copy(case / "toy.toml", spec)
        breakage(spec)
        commands = _commands(case, sweep=str(spec))
        commands["run"][1] = str(spec)
        runs += [(f"spec:{label}|{which}", commands[which]) for which in ("run",) + READ_ONLY]
    for label, (text, _) in PROFILE_CASES.items():
        profile = case / f"{label}.profile.toml"
        profile.write_text(f"{text}\n" if text else "cores = 1\n")
        if text is None:
            sparse(profile)
        slurm = ["--store", str(case / "s.zarr"), "--cluster", "slurm", "--profile", str(profile), "--no-progress"]
        runs += [(f"profile:{label}|run", ["run", str(case / "toy.toml"), *slurm]),
                 (f"profile:{label}|retry-failed", ["retry-failed", "toy", *slurm]),
                 (f"profile:{label}|reproduce", ["reproduce", "bsr", "--quick", "-o", str(case / "report"), *slurm])]
    before = digest(case)
    results = run_commands(tmp_path, case, runs)
    for label_which, code, seconds, err in results:
        label, which = label_which.split("|")
        kind, name = label.split(":")
        words = (SPEC_CASES if kind == "spec" else PROFILE_CASES)[name][1]
        check_results([(which, code, seconds, err)], {which: 2}, words, label)
    assert not (case / "ran").exists()
    assert digest(case) == before
