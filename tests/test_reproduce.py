"""`seqphase reproduce`: the papers table, one report end to end (bsr --quick, on the session's cluster),
bad input (one line, exit 2, nothing written), and the page in a real browser (headless Chromium)."""

import csv
import dataclasses
import math
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from seqphase.cli import main
from seqphase.sweeps.papers import PAPERS
from seqphase.sweeps.spec import shipped_specs

PAPER_IDS = ("glm", "multiindex", "smi", "aim", "quadratic", "erm", "bsr")


# The test's own --quick grids (smaller than the shipped ones, so that the module stays within ~30 s): every
# bsr sweep still runs, through the same code path as `seqphase reproduce bsr --quick`. bsr-se keeps the
# published beta = 1 grid (step 0.005) and its alpha_PR(0.5, 1) = 0.75, the documented special point.
TEST_QUICK = {
    "bsr-se": ("rho=0.5", "beta=1", "delta=0", "alpha=0,0.25,0.5,0.75,1"),
    "bsr-thresholds": ("rho=0.5", "beta=1"),
    "bsr-gamp": ("method.d=30", "method.n_seeds=3", "rho=0.5", "alpha=0.8", "method.max_iter=60"),
    "bsr-gd": ("method.d=12", "method.n_seeds=2", "method.n_students=4", "method.steps=200", "rho=0.5",
               "alpha=0.5"),  # rho = 0.5: the figures share one SE table (it dominates drawing the report)
    "bsr-baselines": ("method.d=8", "method.n_seeds=2", "rho=0.5", "alpha=0.6"),
}


@pytest.fixture(scope="module")
def bsr_report(tmp_path_factory, client):
    """One `reproduce bsr --quick` (on the test's grids) shared by every test of the module."""
    paper = PAPERS["bsr"]
    assert set(TEST_QUICK) == set(paper.sweeps)
    small = dataclasses.replace(paper, runs=tuple(dataclasses.replace(run, quick=TEST_QUICK[run.spec])
                                                  for run in paper.runs))
    folder = tmp_path_factory.mktemp("reproduce")
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        patch.setitem(PAPERS, "bsr", small)
        code = main(["reproduce", "bsr", "--quick", "--store", str(folder / "s.zarr"), "-o", str(folder / "report"),
                     "--cluster", client.scheduler.address, "--no-progress"])
    assert code == 0
    assert not [str(w.message) for w in caught if issubclass(w.category, UserWarning)]  # e.g. an empty legend's
    return folder / "report"


def test_quick_grids_draw_every_panel_and_a_noiseless_sweep_has_no_noise_panel(bsr_report):
    """The shipped bsr-se --quick grid has a noisy delta for the label-noise panel; a sweep with none (the test's
    grid) is drawn without that panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seqphase.core.bsr.figures import plot_se
    from seqphase.core.figures import REFERENCE
    from seqphase.results.query import open_results
    from seqphase.sweeps.families import reference

    assert any(s.startswith("delta=") and any(float(v) > 0 for v in s[6:].split(","))
               for s in PAPERS["bsr"].run("bsr-se").quick)
    ds = open_results("bsr-se.quick", bsr_report.parent / "s.zarr")
    assert list(ds["delta"].values) == [0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_se(plt, ds, {REFERENCE: reference("bsr")})
    assert len(fig.axes) == 3 and all(ax.get_legend() is not None for ax in fig.axes)
    plt.close(fig)


def test_papers_table_covers_every_paper_and_only_shipped_sweeps(capsys):
    assert set(PAPER_IDS) <= set(PAPERS)
    for paper in PAPERS.values():
        assert re.fullmatch(r"\d{4}\.\d{4,5}", paper.arxiv) and (Path(__file__).parents[1] / paper.docs).is_file()
        assert set(paper.sweeps) <= set(shipped_specs())
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for paper in PAPERS.values():
        assert re.search(rf"^{paper.id} +{re.escape(paper.arxiv)} +{len(set(paper.sweeps))} ", out, re.M), paper.id


def test_report_is_static_and_its_table_is_computed(bsr_report):
    page = (bsr_report / "index.html").read_text()
    assert "<script" not in page.lower() and not re.search(r"(src|href)=\"(https?:)?//", page)
    images = re.findall(r"<img src=\"([^\"]+)\"", page)
    assert len(images) == 5 and all((bsr_report / src).is_file() for src in images)
    rows = list(csv.DictReader((bsr_report / "agreement.csv").open()))
    assert page.count("<tr class=") == len(rows) > 0
    fig1 = [r for r in rows if r["figure"] == "Fig. 1" and "mse" in r["quantity"] and "ridge" not in r["curve"]]
    # rho = 0.5 against the published beta = 1 curve: the regular points, and alpha_PR = 0.75, where the file's
    # fixed-point iteration stops at 1.1e-4 and ours is 0 (docs/validation/bsr.md explains it)
    assert [r["curve"].split(",")[-1].strip() for r in fig1] == ["noiseless: worst of 4 common points (alpha = 0.25)",
                                                                 "alpha = 0.75"]
    for row in rows:
        assert abs(float(row["ours"]) - float(row["published"]) - float(row["deviation"])) <= \
            1e-6 * max(1.0, abs(float(row["ours"])))
        assert row["verdict"] == ("agrees" if abs(float(row["deviation"])) <= float(row["tolerance"])
                                  else row["verdict"])
    assert fig1[0]["verdict"] == "agrees" and all(float(r["tolerance"]) == 1e-5 for r in fig1)
    assert fig1[1]["verdict"] == "differs (explained)" and fig1[1]["explanation"].startswith("docs/validation/bsr.md, section")
    assert float(fig1[1]["ours"]) == 0 and 'href="#explain-docs-validation-bsr-md' in page and "Explained differences" in page
    assert "bsr-se.quick" in page and "git revision" in page and "CPU s" in page


def test_quick_figure_titles_state_the_size_they_ran_at(bsr_report):
    """A spec title names the full size (bsr-gamp: "d = L = 100 (16 seeds ..."): the title of a run with
    --set overrides says what it ran at."""
    from seqphase.results.plot import run_size_note
    from seqphase.results.query import open_results

    gamp = open_results("bsr-gamp.quick", bsr_report.parent / "s.zarr")
    assert "d = L = 100" in gamp.attrs["title"]
    assert run_size_note(gamp) == (" [as run: method.d = 30; method.n_seeds = 3; rho = 0.5; alpha = 0.8; "
                                   "method.max_iter = 60]")


@pytest.mark.parametrize("args, words", [
    (["reproduce", "no-such-paper"], "PAPER: no paper with id 'no-such-paper'"),
    (["reproduce", "bsr", "--quick", "-o", "{tmp}/taken"], "exists and is not a seqphase report folder"),
    (["reproduce", "bsr", "--quick", "--store", "{tmp}/foreign"], "written by something else"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, args, words):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(args + (["-o", str(tmp_path / "out")] if "-o" not in args else [])) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


CHECK = """<script>window.addEventListener('load', function () {
  var imgs = document.images, bad = 0;
  for (var i = 0; i < imgs.length; i++) { if (!(imgs[i].complete && imgs[i].naturalWidth > 0)) bad++; }
  var rows = document.querySelectorAll('#agreement-table tbody tr').length;
  document.body.setAttribute('data-check', 'images=' + imgs.length + ' broken=' + bad + ' rows=' + rows);
});</script>"""


def test_page_renders_in_headless_chromium(bsr_report, tmp_path):
    """The page itself has no script: the check is injected into a copy beside it (test only). Skipped
    without Chromium, except in CI (SEQPHASE_REQUIRE_CHROMIUM=1, set by .ci/run, which installs it)."""
    if _chromium() is None:
        if os.environ.get("SEQPHASE_REQUIRE_CHROMIUM"):
            pytest.fail("SEQPHASE_REQUIRE_CHROMIUM is set but no chromium is on PATH")
        pytest.skip("no headless Chromium here (Debian package `chromium`; .ci/run installs it)")
    probe = bsr_report / "probe.html"
    probe.write_text((bsr_report / "index.html").read_text().replace("</body>", CHECK + "</body>"))
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--allow-file-access-from-files", "--virtual-time-budget=5000",
             f"--user-data-dir={tmp_path / 'chromium-profile'}"]  # its own profile: runs side by side
    try:
        dom = subprocess.run(flags + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=60)
        shot = tmp_path / "page.png"
        subprocess.run(flags + ["--window-size=1200,2400", f"--screenshot={shot}", (bsr_report / "index.html").as_uri()],
                       capture_output=True, text=True, timeout=60)
    finally:
        probe.unlink()
    check = re.search(r'data-check="images=(\d+) broken=(\d+) rows=(\d+)"', dom.stdout)
    assert check, dom.stderr[-2000:]
    images, broken, rows = map(int, check.groups())
    n_rows = sum(1 for _ in csv.DictReader((bsr_report / "agreement.csv").open()))
    assert images == 5 and broken == 0 and rows == n_rows > 0
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_explanation_names_a_docs_section_that_exists():
    """A `differs (explained)` row quotes a docs section: each (page, title) the families' checks name must
    exist."""
    import ast
    import importlib

    from seqphase.core.family import families
    from seqphase.results import report

    named = set()
    for family in families().values():
        module = importlib.import_module(family.checks.partition(":")[0])
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if isinstance(node, ast.Tuple) and len(node.elts) == 2:
                try:
                    page, title = (ast.literal_eval(e) for e in node.elts)
                except ValueError:
                    continue
                if isinstance(page, str) and page.startswith("docs/") and page.endswith(".md"):
                    named.add((page, title))
    assert len(named) >= 7
    for page, title in named:
        assert report.docs_section(page, title), (page, title)


def test_cut_offset_of_a_bisection_on_a_squared_distance():
    """value = c (t - alpha)^2 below t (side -1) or c (alpha - t)^2 above it (side +1): a bisection on the cut
    stops sqrt(cut / c) from t, which quadratic_cut_offset recovers with no linearisation error; a value
    that is not a square of the distance (a cube here) gets a non-zero one."""
    from seqphase.core.agreement import quadratic_cut_offset

    t, c, cut = 0.42, 20.0, 1e-6
    for side in (-1, 1):
        alpha_b = t + side * math.sqrt(cut / c)
        offset, error = quadratic_cut_offset(lambda a: c * (a - t) ** 2, alpha_b, cut, side)
        assert offset == pytest.approx(math.sqrt(cut / c), rel=1e-9) and error < 1e-12
    alpha_b = t - (cut / c) ** (1 / 3)
    offset, error = quadratic_cut_offset(lambda a: c * abs(t - a) ** 3, alpha_b, cut, -1)
    assert error > 0.01 * offset


def test_counting_cut_offset_is_where_the_aim_bisection_stops():
    """The AIM counting bisection (mse < mse_cut) stops alpha_c * counting_cut_offset below the closed form,
    to its rtol: the tolerance of the counting-threshold rows (and of the quadratic network's perfect-recovery
    rows, the same parametric curve) is that offset, derived, not fitted."""
    from seqphase.core.agreement import parametric_cut_offset
    from seqphase.core.aim import thresholds
    from seqphase.core.aim.checks import counting_cut_offset
    from seqphase.core.quadratic.se import small_noise_slope
    from seqphase.core.rie import mmse_table
    from seqphase.core.models import drive

    for rho in (0.5, 1.0):
        closed = thresholds.counting_threshold(rho, 2, "softmax")
        found = drive(thresholds.counting_bisection_route(rho, 2, "softmax", mse_cut=1e-4, rtol=1e-9))[0]
        offset = counting_cut_offset(rho, 1e-4)
        assert 1e-5 < offset < 1e-2
        assert found == pytest.approx(closed * (1 - offset), rel=1e-8)
        # the quadratic network's perfect-recovery rows: the same curve at rho = kappa, from the shared RIE's table
        assert parametric_cut_offset(mmse_table(rho).mmse, small_noise_slope(rho), 1e-4) == offset


def test_noiseless_smi_rows_compare_the_eps_limit_with_perfect_recovery():
    """The rows of `smi-2layer-se-noiseless`: above alpha = 1, Q11 with 1 - Q11 = 100 eps (a power law to 1)
    agrees with the closed form 1 within 1 - Q11 at the smallest eps; a plateau (Q11 = 0.8 + eps) has the
    linear limit 0.8 and differs; alpha <= 1 gives no row; the eps = 1e-3 column is compared with the
    reference code's curve."""
    import numpy as np
    import xarray as xr

    from seqphase.core.agreement import AGREES, DIFFERS
    from seqphase.core.smi.checks import smi_rows
    from seqphase.sweeps.families import reference

    alphas, eps = np.array([0.9, 1.2, 1.5]), np.array([1e-3, 1e-4, 1e-5, 1e-6])
    q11 = np.empty((3, 4))
    q11[0] = 0.4 + 0.1 * np.log10(1e-3 / eps)  # creeping: no row at alpha <= 1 whatever it does
    q11[1] = 0.8 + eps
    q11[2] = 1.0 - 100.0 * eps
    overlap = np.zeros((3, 4, 2, 2))
    overlap[..., 0, 0], overlap[..., 1, 1] = q11, 0.999
    ds = xr.Dataset({"overlap": (("alpha", "eps", "row", "col"), overlap)},
                    coords={"alpha": alphas, "eps": eps, "row": [1, 2], "col": [1, 2]},
                    attrs={"settings": '{"n_mc": 2048}'})
    rows = [r for r in smi_rows({"smi-2layer-se-noiseless": ds}, reference("smi")) if "noiseless model" in r.figure]
    assert [r.curve for r in rows] == ["c = 1, alpha = 1.2", "c = 1, alpha = 1.5"]
    plateau, power = rows
    assert power.ours == 1.0 and power.verdict == AGREES and power.tolerance == pytest.approx(1e-4)
    assert "eps^1.00" in power.quantity
    assert plateau.ours == pytest.approx(0.8, abs=1e-6) and plateau.verdict == DIFFERS
    compared = [r for r in smi_rows({"smi-2layer-se-noiseless": ds}, reference("smi")) if "eps = 1e-3" in r.figure]
    assert {r.quantity for r in compared} == {"Q11", "Q22"}


def test_noiseless_smi_rows_at_three_layers_start_above_three_halves():
    """The rows of `smi-3layer-se-noiseless`: alpha_PR = p/T = 3/2, so alpha = 1.25 gives no row and alpha = 2
    one row per layer below the last (Q11, Q22), each a power law to 1 that agrees."""
    import numpy as np
    import xarray as xr

    from seqphase.core.agreement import AGREES
    from seqphase.core.smi.checks import smi_rows
    from seqphase.sweeps.families import reference

    alphas, eps = np.array([1.25, 2.0]), np.array([1e-3, 1e-4, 1e-5, 1e-6])
    overlap = np.zeros((2, 1, 4, 3, 3))
    overlap[:, 0, :, 0, 0] = 1.0 - 40.0 * eps
    overlap[:, 0, :, 1, 1] = 1.0 - 60.0 * eps
    overlap[:, 0, :, 2, 2] = 1.0 - eps
    ds = xr.Dataset({"overlap": (("alpha", "depth", "eps", "row", "col"), overlap)},
                    coords={"alpha": alphas, "depth": [3.0], "eps": eps, "row": [1, 2, 3], "col": [1, 2, 3]})
    rows = [r for r in smi_rows({"smi-3layer-se-noiseless": ds}, reference("smi")) if "Fig. 3 left" in r.figure]
    assert [(r.curve, r.quantity.split()[0]) for r in rows] == [("c = 1, alpha = 2", "Q11"), ("c = 1, alpha = 2", "Q22")]
    assert all(r.verdict == AGREES and r.ours == 1.0 for r in rows)
    assert rows[1].tolerance == pytest.approx(6e-5)
