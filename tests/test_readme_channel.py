"""The README's "Adding a channel" example, run exactly as the section says: its files (the titled blocks
under mychannels/) written to a folder, `seqphase check`, `seqphase run` and `seqphase plot` run from
that folder (the plug-in is found there, on the driver and on the local workers, without PYTHONPATH; the
run on the grid's end points only), and the stored overlaps compared with the SE of the same channel
computed here."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from test_readme_example import CHANNEL_EXAMPLE, README, readme_files, run

LIMIT_LINES = 40  # the section promises a channel in at most 40 lines


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme-channel")
    files = {path: text for path, text in readme_files().items() if path.startswith(CHANNEL_EXAMPLE)}
    assert set(files) == {"mychannels/probit.py", "mychannels/probit-se.toml"}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root / "mychannels"


def test_the_channel_is_one_short_file(folder):
    assert len((folder / "probit.py").read_text().splitlines()) <= LIMIT_LINES


def test_the_section_says_the_commands_run_here():
    """The commands below are the section's own (its bash block), so what the test runs is what it says."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Adding a channel"):]
    section = section[:section.index("\n## ", 1)]
    block = section[section.index("```bash"):]
    for command in ("cd mychannels", "seqphase check probit:Probit --set delta=0.05", "seqphase run probit-se.toml",
                    "seqphase plot probit-se -o probit-se.png"):
        assert command in block[:block.index("\n```\n")], command


def test_check_run_plot_from_the_folder(folder, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    store = tmp_path / "store.zarr"
    code, out = run(["-m", "seqphase.cli", "check", "probit:Probit", "--set", "delta=0.05"], env, folder)
    assert code == 0 and "FAILS" not in out, out
    # the section's command, on the grid's end points only (4 of its 16 points: the suite's time budget)
    code, out = run(["-m", "seqphase.cli", "run", "probit-se.toml", "--set", "alpha=0.5,4.0", "--workers", "2",
                     "--store", store, "--no-progress"], env, folder)
    assert code == 0 and "4 computed, 0 failed" in out, out
    code, out = run(["-m", "seqphase.cli", "plot", "probit-se", "-o", tmp_path / "probit-se.png", "--store", store],
                    env, folder)
    assert code == 0 and (tmp_path / "probit-se.png").stat().st_size > 10_000, out

    import seqphase
    from seqphase.core.glm import se
    from seqphase.core.glm.model import build

    sys.path.insert(0, str(folder))
    try:
        ds = seqphase.open_results("probit-se", store=store)
        for delta in (0.05, 0.2):
            for alpha in (0.5, 4.0):
                prior, channel = build({"prior": "gaussian", "channel": "probit:Probit", "delta": delta,
                                        "rho": 1.0})
                expected = se.glm_se_branches(prior, channel, alpha)["bayes"].overlap
                stored = float(ds["overlap"].sel(delta=delta, alpha=alpha).squeeze())
                assert abs(stored - expected) < 1e-12
        assert np.isfinite(ds["overlap"].values).all()
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("probit", None)


def test_the_section_python_battery_runs(folder):
    """The section's Python block (`seqphase.testing.check_likelihood` on the channel) runs from the folder."""
    import subprocess

    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Adding a channel"):]
    section = section[:section.index("\n## ", 1)]
    block = section[section.index("```python\n") + len("```python\n"):]
    block = block[:block.index("```")]
    assert "check_likelihood(Probit" in block
    done = subprocess.run([sys.executable, "-c", block], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
