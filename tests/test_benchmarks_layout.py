"""benchmarks/ and docs/ stand on the package alone, and a benchmark's results never land in a tracked file.

- No file under benchmarks/ or docs/ imports `tests` or `seqphase.tests`, or builds a path into tests/ to load
  a module from it: what they need belongs to benchmarks/harness.py or to the package (`seqphase.testing`).
- No file under benchmarks/ edits sys.path or PYTHONPATH: a script run as `python benchmarks/NAME.py` has its
  folder on sys.path already (`import harness`). Under docs/ a path edit may not name tests/ or benchmarks/
  (Sphinx's own extension folder in conf.py and the tutorial's plug-in folder are what a reader does).
- A benchmark writes files only through the harness (`harness.writable` refuses benchmarks/data/ and any file
  git tracks), and every default output path it names (`harness.out_path(...)`) lies where git ignores files and
  tracks none; an `--out` option's default is such a path.

Each check asserts first that it found the files and the calls it checks, so that it cannot pass on nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
DOCS = ROOT / "docs"

#: scripts that must be there: the harness, the tools and a benchmark of each kind (a check that finds fewer
#: files than these has lost its subject)
EXPECTED = {"harness.py", "parallelism.py", "measure_costs.py", "compare_stores.py", "store_scaling.py",
            "smi_onset.py", "smi_se_speed.py", "onset_validation.py", "threshold_graphs.py", "rie.py"}

WRITE_MODE = re.compile(r"[wax+]")
WRITE_METHODS = {"write_text", "write_bytes", "to_csv", "to_json", "to_netcdf", "to_zarr", "dump"}
NUMPY_WRITES = {"save", "savez", "savez_compressed", "savetxt"}
PATH_EDITS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__", "__iadd__"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(\{code-cell\}\s*)?(\S*)")


# -- what is checked ------------------------------------------------------------------------------------------
def benchmark_sources():
    return {path: path.read_text(encoding="utf-8") for path in sorted(BENCHMARKS.rglob("*.py"))}


def markdown_python(text):
    """The Python code blocks of a Markdown page (```python, ```{code-cell} ipython3, ...), joined."""
    blocks, inside, language, lines = [], None, "", []
    for line in text.splitlines():
        match = FENCE.match(line)
        if inside is None and match:
            inside, language, lines = match.group(2), (match.group(4) or "").lower(), []
        elif inside is not None and line.strip().startswith(inside[0] * 3) and line.strip().strip(inside[0]) == "":
            if "python" in language or language in ("py", "ipython3", "pycon"):
                blocks.append("\n".join(lines))
            inside = None
        elif inside is not None:
            lines.append(line)
    return blocks


def docs_sources():
    sources = {path: path.read_text(encoding="utf-8") for path in sorted(DOCS.rglob("*.py"))
               if "_build" not in path.parts}
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts:
            continue
        for i, block in enumerate(markdown_python(page.read_text(encoding="utf-8"))):
            sources[Path(f"{page}#python-block-{i}")] = block
    return sources


def parse(source):
    """The module's tree; a block that is not Python as a whole (a doctest, an elided snippet) as the trees of its
    lines that are."""
    try:
        return [ast.parse(source)]
    except SyntaxError:
        trees = []
        for line in source.splitlines():
            try:
                trees.append(ast.parse(line.strip().removeprefix(">>> ")))
            except SyntaxError:
                continue
        return trees


# -- the checks -----------------------------------------------------------------------------------------------
def _dotted(node):
    """"a.b.c" of a Name/Attribute chain, else ""."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _is_tests_module(name):
    return name is not None and (name in ("tests", "seqphase.tests") or name.startswith(("tests.", "seqphase.tests.")))


def _names_tests(node):
    """A string constant of the expression that is a path into tests/ ("tests", "tests/...", ".../tests/...")."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            value = sub.value.strip().replace("\\", "/")
            if value == "tests" or value.startswith("tests/") or "/tests/" in value or value.endswith("/tests"):
                return True
    return False


def _names_folder(node, folders):
    return any(isinstance(sub, ast.Constant) and isinstance(sub.value, str)
               and any(f in sub.value for f in folders) for sub in ast.walk(node))


def imports_of_tests(source):
    """Lines that import tests/ code: `import tests...`, `from tests...`, `seqphase.tests`, importlib of such a
    name, or a path built into tests/ given to a loader or to sys.path."""
    found = []
    for tree in parse(source):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(_is_tests_module(a.name) for a in node.names):
                found.append(node.lineno)
            elif isinstance(node, ast.ImportFrom) and not node.level and _is_tests_module(node.module):
                found.append(node.lineno)
            elif isinstance(node, ast.Call):
                name = _dotted(node.func)
                if name.endswith(("import_module", "__import__")) and node.args and isinstance(node.args[0], ast.Constant) \
                        and _is_tests_module(str(node.args[0].value)):
                    found.append(node.lineno)
                elif name.endswith(("spec_from_file_location", "run_path", "SourceFileLoader", "load_source")) \
                        and any(_names_tests(arg) for arg in node.args):
                    found.append(node.lineno)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _names_tests(node):
                found.append(node.lineno)  # ROOT / "tests" / ...: a path into the tests
    return found


def path_edits(source, only_naming=None):
    """Lines that edit sys.path or PYTHONPATH (with `only_naming`, those whose expression names one of these
    folders)."""
    found = []
    for tree in parse(source):
        for node in ast.walk(tree):
            edit = None
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                if name.startswith("sys.path.") and name.rsplit(".", 1)[1] in PATH_EDITS or name.endswith("addsitedir"):
                    edit = node
                elif any(k.arg == "PYTHONPATH" for k in node.keywords):
                    edit = node
                elif name.endswith(("putenv", "environ.setdefault", "environ.update")) and _names_folder(node, ("PYTHONPATH",)):
                    edit = node
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    base = target.value if isinstance(target, ast.Subscript) else target
                    if _dotted(base) == "sys.path" or (isinstance(target, ast.Subscript)
                                                        and _names_folder(target.slice, ("PYTHONPATH",))):
                        edit = node
            elif isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "PYTHONPATH"
                                                    for k in node.keys):
                edit = node
            if edit is not None and (only_naming is None or _names_folder(edit, only_naming)):
                found.append(edit.lineno)
    return sorted(set(found))


def raw_writes(source):
    """Lines that write a file other than through the harness: open() in a writing mode on a path that is not
    `harness.writable(...)`, or a writing method (write_text, json.dump, np.save, to_csv, ...)."""
    found = []
    for tree in parse(source):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name in ("open", "io.open", "builtins.open"):
                mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
                if isinstance(mode, ast.Constant) and WRITE_MODE.search(str(mode.value)):
                    target = node.args[0] if node.args else None
                    if not (isinstance(target, ast.Call) and _dotted(target.func).endswith("writable")):
                        found.append(node.lineno)
            elif isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS \
                    and not name.startswith("harness."):
                if node.func.attr == "dump" and not name.endswith(("json.dump", "pickle.dump")):
                    continue
                found.append(node.lineno)
            elif name.startswith(("np.", "numpy.")) and name.rsplit(".", 1)[1] in NUMPY_WRITES:
                found.append(node.lineno)
    return found


def out_path_calls(source):
    """The constant argument tuples of every `harness.out_path(...)` / `out_path(...)` call."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _dotted(node.func) in ("harness.out_path", "out_path"):
            assert all(isinstance(a, ast.Constant) for a in node.args), ast.unparse(node)
            calls.append(tuple(a.value for a in node.args))
    return calls


def out_option_defaults(source):
    """(option, default expression) of every add_argument of an output option (--out, --logs written to)."""
    tree = ast.parse(source)
    module_names = {}  # NAME = <expr> at module level
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            module_names[node.targets[0].id] = node.value
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func).endswith("add_argument") and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("--out", "--keep"):
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(default, ast.Name) and default.id in module_names:
                default = module_names[default.id]
            found.append((node.args[0].value, default))
    return found


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def load_harness():
    spec = importlib.util.spec_from_file_location("benchmarks_harness", BENCHMARKS / "harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the tests ------------------------------------------------------------------------------------------------
def test_the_checks_find_their_files():
    names = {path.name for path in benchmark_sources()}
    assert EXPECTED <= names, f"missing from benchmarks/: {sorted(EXPECTED - names)}"
    docs = docs_sources()
    assert (DOCS / "conf.py") in docs
    assert sum("#python-block-" in str(path) for path in docs) >= 5, "no Python blocks found in docs/*.md"


@pytest.mark.parametrize("source", [
    "import tests.smi_checks",
    "from tests import userplugins",
    "from seqphase.tests.x import y",
    "import importlib\nimportlib.import_module('tests.toymodel')",
    "spec = importlib.util.spec_from_file_location('m', ROOT / 'tests' / 'smi' / 'test_smi_channel.py')",
    "load(Path(__file__).parents[1] / 'tests' / 'userplugins.py')",
])
def test_imports_of_tests_are_found(source):
    assert imports_of_tests(source)


@pytest.mark.parametrize("source", [
    "import sys\nsys.path.insert(0, str(HERE.parent / 'tests'))",
    "sys.path.append('/somewhere')",
    "sys.path = ['x'] + sys.path",
    "sys.path[:0] = ['x']",
    "env = dict(os.environ, PYTHONPATH=str(TESTS))",
    "os.environ['PYTHONPATH'] = 'x'",
    "site.addsitedir('benchmarks')",
])
def test_path_edits_are_found(source):
    assert path_edits(source)


@pytest.mark.parametrize("source", [
    "open(path, 'w').write('x')",
    "with open(out, 'a') as fh:\n    fh.write('x')",
    "Path(out).write_text('x')",
    "json.dump(rows, fh)",
    "np.save('x.npy', a)",
])
def test_raw_writes_are_found(source):
    assert raw_writes(source)


def test_allowed_code_is_not_flagged():
    source = ("import harness\nfrom harness import best_time\nimport seqphase.testing\n"
              "with open(harness.writable(path), 'a') as fh:\n    pass\n"
              "harness.write_json(path, {})\nrows = open(path).read()\nsys.path[0]\n")
    assert not imports_of_tests(source) and not path_edits(source) and not raw_writes(source)


def test_nothing_in_benchmarks_or_docs_imports_the_tests():
    offenders = {str(path.relative_to(ROOT)): lines
                 for path, source in {**benchmark_sources(), **docs_sources()}.items()
                 if (lines := imports_of_tests(source))}
    assert not offenders, f"imports of tests/ (lines): {offenders}"


def test_benchmarks_do_not_edit_the_import_path():
    offenders = {path.name: lines for path, source in benchmark_sources().items() if (lines := path_edits(source))}
    assert not offenders, f"sys.path / PYTHONPATH edits (lines): {offenders}"


def test_docs_edit_the_import_path_only_for_their_own_folders():
    docs = docs_sources()
    assert path_edits(docs[DOCS / "conf.py"]), "conf.py's extension folder: the check sees no edit at all"
    offenders = {str(path.relative_to(ROOT)) if path.exists() else str(path): lines for path, source in docs.items()
                 if (lines := path_edits(source, only_naming=("tests", "benchmarks")))}
    assert not offenders, f"path edits into tests/ or benchmarks/ (lines): {offenders}"


def test_benchmarks_write_files_through_the_harness():
    sources = benchmark_sources()
    writers = [path.name for path, source in sources.items() if "harness.write" in source or "writable(" in source]
    assert len(writers) >= 5, f"only {writers} write through the harness: the check has lost its subject"
    offenders = {path.name: lines for path, source in sources.items()
                 if path.name != "harness.py" and (lines := raw_writes(source))}
    assert not offenders, f"files written around harness.writable (lines): {offenders}"


@pytest.mark.skipif(shutil.which("git") is None or git("rev-parse").returncode != 0, reason="needs a git checkout")
def test_default_outputs_are_ignored_by_git_and_hold_no_tracked_file():
    harness = load_harness()
    calls = {(path.name, args) for path, source in benchmark_sources().items() for args in out_path_calls(source)}
    assert len({name for name, _ in calls}) >= 5, f"out_path used by too few scripts: {sorted(calls)}"
    for name, args in sorted(calls) + [("harness.py", ())]:
        path = harness.out_path(*args)
        relative = path.relative_to(ROOT)
        assert git("check-ignore", "-q", str(relative / "any-result.json")).returncode == 0, \
            f"{name}: {relative} is not ignored by git"
        assert not git("ls-files", "--", str(relative)).stdout.strip(), f"{name}: git tracks files in {relative}"
    options = [(path.name, option, default) for path, source in benchmark_sources().items()
               for option, default in out_option_defaults(source)]
    assert len(options) >= 5, f"too few --out options found: {options}"
    for name, option, default in options:
        assert default is None or (isinstance(default, ast.Constant) and default.value is None) \
            or any(_dotted(sub.func).endswith("out_path") for sub in ast.walk(default) if isinstance(sub, ast.Call)), \
            f"{name} {option}: default {ast.unparse(default)} is not under harness.out_path"


@pytest.mark.skipif(shutil.which("git") is None or git("rev-parse").returncode != 0, reason="needs a git checkout")
def test_the_harness_refuses_the_data_folder_and_tracked_files(tmp_path):
    harness = load_harness()
    assert git("ls-files", "--", "benchmarks/data").stdout.strip(), "benchmarks/data holds no tracked file"
    for refused in (harness.DATA / "README.md", harness.DATA / "parallelism" / "new.jsonl", ROOT / "README.md"):
        with pytest.raises(SystemExit):
            harness.writable(refused)
    assert harness.writable(tmp_path / "a" / "b.json").parent.is_dir()
