"""Every shipped sweep of the AIM, quadratic-network and BSR families through the real CLI at a small size: `run`
finishes with every point done, `query` returns the sweep's variables, and `plot` writes the figure.

Slow (one embedded cluster per sweep, ~5-40 s each, ~5 min in all). The default suite runs the SE sweeps of
these families through the CLI in their own test files, and the algorithms (GAMP, GD, baselines, thresholds) on
the core; this suite is what shows that each shipped spec also runs and plots end to end."""

import pytest

from cli_run import cli

#: sweep -> (overrides that make it small, variables its table must hold)
SMALL = {
    "aim-softmax-se": (["rho=0.5", "T=2", "alpha=0.05,0.1"], {"mse"}),
    "aim-hardmax-se": (["rho=0.5", "alpha=0.5,1"], {"mse"}),
    "aim-small-width": (["alpha_bar=0.5,1"], {"mse"}),
    "aim-thresholds": (["rho=0.5", "T=2"], {"alpha_closed_form", "alpha_bisection", "relative_gap"}),
    "aim-gamp": (["alpha=0.1", "d=30", "n_seeds=2"], {"mse", "seed", "iteration"}),
    "aim-gamp-tokens": (["alpha=0.012", "T=4", "d=30", "n_seeds=2"], {"mse", "seed", "iteration"}),
    "aim-gamp-hardmax": (["alpha=0.5", "d=30", "n_seeds=2"], {"mse", "seed", "iteration"}),
    "aim-gd": (["alpha=0.125", "d=12", "n_seeds=2", "n_students=2", "steps=20", "log_every=10"],
               {"mse_gd", "mse_agd", "seed", "epoch"}),
    "quadratic-thresholds": (["kappa=0.5"], {"alpha_closed_form", "alpha_bisection", "relative_gap"}),
    "quadratic-gamp": (["delta=0", "alpha=0.2", "d=30", "n_seeds=2"], {"mse", "seed", "iteration"}),
    "quadratic-gd": (["alpha=0.2", "d=12", "n_seeds=2", "n_students=2", "steps=20", "log_every=10"],
                     {"mse_gd", "mse_agd", "seed", "step"}),
    "quadratic-erm-thresholds": (["kappa_star=2", "rtol=1e-3"], {"alpha_interp_equation", "alpha_sr_equation"}),
    "bsr-thresholds": (["rho=0.5", "beta=1"], {"alpha_closed_form", "alpha_bisection", "alpha_mnne"}),
    "bsr-gamp": (["rho=0.5", "alpha=0.4", "d=30", "n_seeds=2", "max_iter=30"], {"mse", "seed", "iteration"}),
    "bsr-baselines": (["rho=0.5", "alpha=0.5", "d=10", "n_seeds=2"], {"seed"}),
    "bsr-gd": (["alpha=0.3", "d=12", "n_seeds=2", "n_students=2", "steps=30", "log_every=10"],
               {"mse_gd", "mse_agd", "seed", "epoch"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("sweep", sorted(SMALL))
def test_shipped_sweep_runs_queries_and_plots(sweep, tmp_path):
    overrides, variables = SMALL[sweep]
    store = tmp_path / "s.zarr"
    sets = [arg for value in overrides for arg in ("--set", value)]
    code, _, err = cli("run", sweep, *sets, "--store", store, "--workers", "1", "--no-progress")
    assert code == 0, err
    code, out, err = cli("query", sweep, "--store", store)
    assert code == 0, err
    header = out.splitlines()[0].split(",")
    assert len(out.strip().splitlines()) > 1 and variables <= set(header), header
    statuses = {row.split(",")[header.index("status")] for row in out.strip().splitlines()[1:]}
    assert statuses == {"done"}, statuses
    png = tmp_path / "fig.png"
    code, _, err = cli("plot", sweep, "-o", png, "--store", store)
    assert code == 0 and png.stat().st_size > 10_000, err
