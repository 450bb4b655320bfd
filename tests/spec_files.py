"""Writing small toy-model spec files for the engine tests."""

import textwrap
from pathlib import Path


def write_spec(folder, name="toy", alpha="0.5:2:4", extra_params="", method_extra="", seed=7, method="se"):
    path = Path(folder) / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""\
        name = "{name}"
        model = "toymodel:ToyModel"
        seed = {seed}
        [params]
        alpha = {alpha!r}
        {extra_params}
        [method]
        name = "{method}"
        {method_extra}
        """).replace("'", '"'))
    return path
