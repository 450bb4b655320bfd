"""A model family of your own (examples/toy-family/), found the way `pip install` would make it found: a folder
on PYTHONPATH holding the package and a hand-made `toy_family-0.1.dist-info/` (its METADATA and the
entry_points.txt of its pyproject.toml), which is what importlib.metadata reads. The real `seqphase` command
lists its sweep and paper, runs the sweep and reproduces the paper in a subprocess; a broken family is one line
of `seqphase list` and leaves the command working; two families of one name, or one model name in two families,
is an error naming both. The family's state evolution itself is checked against its closed form here."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "toy-family"


def dist_info(site, distribution, version, entry_points):
    """A distribution's metadata as an installer writes it: NAME-VERSION.dist-info/ with METADATA and
    entry_points.txt ({group: {name: "module:attr"}})."""
    folder = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (folder / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in entry_points.items()))


def toy_site(root):
    """A folder that holds the toy family installed: its package and its dist-info, with the entry points its
    pyproject.toml declares."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    site = root / "site"
    shutil.copytree(EXAMPLE / "toy_family", site / "toy_family")
    dist_info(site, project["name"], project["version"], project["entry-points"])
    return site


def seqphase(args, sites, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(s) for s in sites] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    out = subprocess.run([sys.executable, "-m", "seqphase.cli", *map(str, args)], capture_output=True, text=True,
                         env=env, cwd=cwd, timeout=300)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return toy_site(tmp_path_factory.mktemp("toy"))


@pytest.fixture()
def toy_model(monkeypatch):
    """The example's model module, imported in this process from the example's folder."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import toy_family.model

    yield toy_family.model
    for name in [n for n in sys.modules if n == "toy_family" or n.startswith("toy_family.")]:
        del sys.modules[name]


def test_state_evolution_reaches_the_closed_form(toy_model):
    """The SE's fixed point is the positive root of V^2 + (delta + alpha - 1) V - delta = 0, damped or not; the
    root tends to 1 - alpha (alpha < 1) and to 0 (alpha > 1) as delta -> 0."""
    for alpha in (0.1, 0.7, 1.0, 1.6, 3.0):
        for delta in (0.05, 0.1, 0.5, 2.0):
            for damping in (0.0, 0.5):
                V, _, converged = toy_model.state_evolution(alpha, delta, damping=damping)
                exact = toy_model.closed_form_mse(alpha, delta)
                assert converged and abs(V - exact) < 1e-10, (alpha, delta, damping)
                assert abs(exact * exact + (delta + alpha - 1) * exact - delta) < 1e-14
    assert toy_model.closed_form_mse(0.4, 1e-12) == pytest.approx(0.6, abs=1e-11)
    assert toy_model.closed_form_mse(2.5, 1e-12) == pytest.approx(0.0, abs=1e-11)


def test_its_published_table_is_the_closed_form(toy_model):
    with open(EXAMPLE / "toy_family" / "reference" / "linear-closed-form.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 60
    for row in rows:
        exact = toy_model.closed_form_mse(float(row["alpha"]), float(row["delta"]))
        assert float(row["mse"]) == pytest.approx(exact, rel=1e-11)


def test_listed_run_and_reproduced_from_its_package(site, tmp_path):
    code, out, err = seqphase(["list"], [site], tmp_path)
    assert code == 0 and not err, err
    (line,) = [line for line in out.splitlines() if line.startswith("toy-linear-se ")]
    assert "toy-linear/se" in line and " 60 " in line
    assert "glm-perceptron-se" in out  # seqphase's own families are listed beside it
    code, out, err = seqphase(["reproduce", "--list"], [site], tmp_path)
    assert code == 0 and any(line.startswith("toy ") for line in out.splitlines()), out + err

    store = tmp_path / "s.zarr"
    code, out, err = seqphase(["run", "toy-linear-se", "--store", store, "--workers", "1", "--no-progress"],
                              [site], tmp_path)
    assert code == 0, err
    sys.path.insert(0, str(site))
    try:
        import seqphase as api
        from toy_family.model import closed_form_mse

        ds = api.open_results("toy-linear-se", store=store)
        for delta in (0.1, 0.5):
            for alpha in ds["alpha"].values:
                stored = float(ds["mse"].sel(alpha=alpha, delta=delta))
                assert abs(stored - closed_form_mse(float(alpha), delta)) < 1e-10
                assert float(ds["overlap"].sel(alpha=alpha, delta=delta, row=1, col=1)) == 1.0 - stored
    finally:
        sys.path.remove(str(site))
        for name in [n for n in sys.modules if n == "toy_family" or n.startswith("toy_family.")]:
            del sys.modules[name]

    report = tmp_path / "report"
    code, out, err = seqphase(["reproduce", "toy", "--quick", "--store", store, "--workers", "1", "--no-progress",
                               "-o", report], [site], tmp_path)
    assert code == 0, err
    rows = list(csv.DictReader((report / "agreement.csv").open()))
    assert [row["curve"].split(":")[0] for row in rows] == ["delta = 0.1", "delta = 0.5"]
    assert all(row["verdict"] == "agrees" for row in rows)
    assert (report / "figures" / "toy-linear-se.quick.png").is_file()


def test_a_broken_family_is_one_line_and_the_rest_works(site, tmp_path):
    """A family whose package cannot be imported, and one whose package loads but whose model and papers
    modules fail (a missing dependency): each failure is one line of `seqphase list` or `reproduce --list`,
    and everything else is listed and runs."""
    broken = tmp_path / "broken"
    dist_info(broken, "broken-family", "0.1", {"seqphase.models": {"broken": "no_such_module_here:FAMILY"}})
    code, out, err = seqphase(["list"], [site, broken], tmp_path)
    assert code == 0 and "toy-linear-se" in out and "glm-perceptron-se" in out
    (line,) = err.strip().splitlines()
    assert "model family 'broken'" in line and "no_such_module_here" in line and "broken-family" in line
    code, out, _ = seqphase(["--help"], [site, broken], tmp_path)
    assert code == 0 and "reproduce" in out

    half = tmp_path / "half"
    (half / "half_family" / "sweeps").mkdir(parents=True)
    (half / "half_family" / "__init__.py").write_text(
        "from seqphase.core.family import Family\n"
        "FAMILY = Family(models={'half': 'half_family.model:HalfModel'}, package='half_family',\n"
        "                papers='half_family.papers:PAPERS', checks='half_family.papers:CHECKS')\n")
    for module in ("model", "papers"):
        (half / "half_family" / f"{module}.py").write_text("raise ImportError('needs a package not installed')\n")
    (half / "half_family" / "sweeps" / "half-se.toml").write_text(
        'name = "half-se"\nmodel = "half"\n[params]\nalpha = 1.0\n[method]\nname = "se"\n')
    dist_info(half, "half-family", "0.1", {"seqphase.models": {"half": "half_family:FAMILY"}})
    code, out, err = seqphase(["list"], [site, half], tmp_path)
    assert code == 0 and "toy-linear-se" in out and "half-se" not in out
    (line,) = err.strip().splitlines()
    assert "sweep 'half-se' cannot be loaded" in line and "needs a package not installed" in line
    code, out, err = seqphase(["reproduce", "--list"], [site, half], tmp_path)
    assert code == 0 and any(line.startswith("toy ") for line in out.splitlines())
    (line,) = err.strip().splitlines()
    assert "the papers of model family 'half'" in line and "needs a package not installed" in line
    code, _, err = seqphase(["run", "half-se"], [site, half], tmp_path)
    assert code == 2 and "needs a package not installed" in err and len(err.strip().splitlines()) == 1


def test_a_name_registered_twice_is_an_error_naming_both(site, tmp_path):
    """A second distribution registering the family name `glm`, or a family whose model is named like the toy
    family's: one line naming both, exit 2."""
    twin = tmp_path / "twin"
    dist_info(twin, "twin-family", "0.1", {"seqphase.models": {"glm": "toy_family:FAMILY"}})
    code, _, err = seqphase(["list"], [site, twin], tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "'glm'" in err and "(from seqphase)" in err and "toy_family:FAMILY (from twin-family)" in err

    clash = tmp_path / "clash"
    dist_info(clash, "clash-family", "0.1", {"seqphase.models": {"toy2": "toy_family:FAMILY"}})
    code, _, err = seqphase(["run", "toy-linear-se"], [site, clash], tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "model 'toy-linear' is registered by two families: 'toy'" in err and "'toy2'" in err


def test_shipped_families_declare_what_they_carry():
    """Every family seqphase ships names importable models, papers and checks, has the same modules, and its
    files are where it says (one sweep name, one paper id and one model name each across families)."""
    import importlib
    from importlib import resources

    from seqphase.core import registry
    from seqphase.core.family import families
    from seqphase.core.models import Model
    from seqphase.sweeps.families import reference, sweep_files
    from seqphase.sweeps.papers import PAPERS

    shipped = {name: family for name, family in families().items() if family.package.startswith("seqphase.")}
    assert set(shipped) == {"glm", "multiindex", "smi", "aim", "quadratic", "bsr"}
    count = 0
    for name, family in shipped.items():
        assert family.package == f"seqphase.core.{name}"
        for model, target in family.models.items():
            assert issubclass(registry.resolve(target, "model"), Model)
        papers = registry.resolve(family.papers, "papers")
        assert registry.resolve(family.checks, "checks").keys() == {paper.id for paper in papers}
        assert all(PAPERS[paper.id].family == name for paper in papers)
        for module in ("channels", "se", "gamp", "thresholds", "model", "figures", "papers", "checks"):
            importlib.import_module(f"{family.package}.{module}")  # one house: the same files in every family
        for file in reference(name):
            assert np.isfinite(reference(name)[file][next(iter(reference(name)[file]))]).any()
        specs = [e.name for e in resources.files(family.package).joinpath(family.sweeps).iterdir()
                 if e.name.endswith(".toml")]
        assert specs and all(spec.startswith(f"{name}-") for spec in specs)
        count += len(specs)
    assert count == 42 and count <= len(sweep_files())  # README.md: 42 sweeps ship with seqphase
