"""The manual's "Add a model family" example (docs/howto/add-a-model.md), run exactly as the page says.

Every fenced block of that page whose info string carries `title="PATH"` (```python title="probit/se.py")
is a file of the example; they are written under a temporary folder, which then plays the user's
`my-models/`: the family's own checks (`probit/test_probit.py`: the identity battery of
seqphase.testing.check_channel_protocol on the channel, SE against the shipped sign perceptron as delta -> 0,
GAMP against SE) run with pytest, the sweep runs through the real `seqphase run` on a local cluster whose
worker imports the family from PYTHONPATH, its stored overlaps are checked against the SE computed here,
and `seqphase plot` draws it.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HOWTO = ROOT / "docs" / "howto" / "add-a-model.md"
FILES = {"probit/__init__.py", "probit/channels.py", "probit/se.py", "probit/gamp.py", "probit/figures.py",
         "probit/model.py", "probit/test_probit.py", "probit-se.toml"}
CHANNEL_EXAMPLE = "mychannels/"  # the README's "Adding a channel" files (tests/test_readme_channel.py)
BLOCK = re.compile(r'^```\w+ title="(?P<path>[^"]+)"\n(?P<body>.*?)^```$', re.MULTILINE | re.DOTALL)


def titled_files(page):
    """{path: text} of the titled fenced blocks of a Markdown page."""
    found = [(m["path"], m["body"]) for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]
    paths = [path for path, _ in found]
    assert len(paths) == len(set(paths)), f"a title appears twice in {page.name}: {paths}"
    return dict(found)


def readme_files():
    """{path: text} of the titled fenced blocks of README.md (the "Adding a channel" files)."""
    return titled_files(README)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The example's folder (the user's my-models/) and the environment that has it on PYTHONPATH."""
    folder = tmp_path_factory.mktemp("my-models")
    for path, text in titled_files(HOWTO).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder)] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return folder, env


@contextlib.contextmanager
def imported_family(folder):
    """The example's `probit` package imported in this process, and forgotten afterwards."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == "probit" or n.startswith("probit.")]:
            del sys.modules[name]


def run(args, env, cwd):
    out = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd,
                         timeout=300)
    return out.returncode, out.stdout + out.stderr


def test_the_page_holds_every_file_of_the_example():
    assert set(titled_files(HOWTO)) == FILES


def test_the_family_checks_pass(example):
    """`PYTHONPATH=$PWD python -m pytest -q probit/test_probit.py`: every check runs and passes."""
    folder, env = example
    code, out = run(["-m", "pytest", "-v", "-p", "no:cacheprovider", "probit/test_probit.py"], env, folder)
    assert code == 0, out
    passed = re.findall(r"::(\S+) PASSED", out)
    assert "SKIPPED" not in out and "FAILED" not in out, out
    for factory in ("noisy", "noiseless"):  # seqphase.testing's protocol battery, on both channels
        assert f"test_identity_battery[{factory}]" in passed, out
    for name in ("test_kernel_identities",
                 "test_se_is_the_sign_perceptron_at_vanishing_noise", "test_gen_error_closed_form",
                 "test_gamp_lands_on_se"):
        assert name in passed, out


def test_sweep_runs_on_workers_and_plots(example, tmp_path):
    """`seqphase run probit-se.toml` (one worker process importing the family from PYTHONPATH) stores the SE
    computed here, point by point; `seqphase plot` draws it."""
    import seqphase
    from seqphase.results.store import DONE

    folder, env = example
    store = tmp_path / "s.zarr"
    code, out = run(["-m", "seqphase.cli", "run", folder / "probit-se.toml", "--store", store, "--workers", "1",
                     "--no-progress"], env, tmp_path)
    assert code == 0, out
    ds = seqphase.open_results("probit-se", store=store)
    assert ds.sizes["alpha"] == 6 and list(ds["delta"].values) == [0.0, 0.25]
    assert (ds["status"].values == DONE).all()
    with imported_family(folder):
        from probit import se
        from probit.channels import ProbitChannel

        for alpha in ds["alpha"].values:
            for delta in ds["delta"].values:
                point = ds.sel(alpha=alpha, delta=delta)
                channel = ProbitChannel(delta)
                m = float(se.state_evolution(channel, float(alpha)).x)
                assert abs(float(point["overlap"].sel(row=1, col=1)) - m) <= 1e-12
                assert abs(float(point["gen_error"]) - se.gen_error(channel, m)) <= 1e-12
    # what the section says of the result: at delta = 0 the sign perceptron's m(1) and m(2)
    sign = ds["overlap"].sel(delta=0.0, row=1, col=1)
    assert abs(float(sign.sel(alpha=1.0)) - 0.48626) < 5e-6
    assert abs(float(sign.sel(alpha=2.0)) - 0.72830) < 5e-6
    assert np.all(ds["overlap"].sel(delta=0.25).values < ds["overlap"].sel(delta=0.0).values)

    png = tmp_path / "probit-se.png"
    code, out = run(["-m", "seqphase.cli", "plot", "probit-se", "--store", store, "-o", png], env, tmp_path)
    assert code == 0, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
