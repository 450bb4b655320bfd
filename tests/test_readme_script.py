"""The README's Python block, saved as a file and run with `python FILE.py` in a fresh folder (the store is
./seqphase.zarr there); and the same block without its `__main__` guard: one line that names the fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import seqphase
from test_readme_example import README

PYTHON_BLOCK = re.compile(r"^```python\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def readme_script():
    """The README's untitled Python block that calls seqphase.run."""
    blocks = [m["body"] for m in PYTHON_BLOCK.finditer(README.read_text(encoding="utf-8")) if "seqphase.run(" in m["body"]]
    assert len(blocks) == 1, blocks
    return blocks[0]


def python_file(folder, text):
    path = folder / "script.py"
    path.write_text(text, encoding="utf-8")
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, path.name], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_readme_block_runs_as_a_script(tmp_path):
    out = python_file(tmp_path, readme_script())
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "Nanny" not in out.stderr, out.stderr
    ds = seqphase.open_results("glm-perceptron-se", store=tmp_path / "seqphase.zarr")
    assert ds.sizes["alpha"] == 6 and (ds["status"].values == 2).all()


def test_without_the_guard_one_line_names_it(tmp_path):
    head, _, guarded = readme_script().partition('if __name__ == "__main__":')
    body = textwrap.dedent(guarded.partition("\n")[2])
    out = python_file(tmp_path, head + body)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("seqphase: error: script.py, line 3: ")
    assert 'put the call under `if __name__ == "__main__":`' in out.stderr
    assert not (tmp_path / "seqphase.zarr").exists()  # nothing was written
