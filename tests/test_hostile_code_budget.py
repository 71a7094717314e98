"""A file holding more code than one CI runner can lint (issue 23, item 9): LibCST's tree takes
0.4-2.7 GB per MiB of code, so a file past `max-code-bytes` (a .py file, or a notebook's code
cells together) is one ML001 naming the limit, and raising the limit lints it.

Every run is a real `modellint` process; what is tested is the budget's behaviour, not speed.
"""

from __future__ import annotations

import json

import pytest
from conftest import write

from modellint.config import DEFAULT_MAX_CODE_BYTES

# ML105 at line 5, column 9 (of this text alone)
GOOD = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(x):
        return x
"""

# comments are cheap to parse, and count as code for the budget as every other byte does
PADDING_LINE = "# " + "padding " * 9 + "\n"


def padding(size: int) -> str:
    return PADDING_LINE * (size // len(PADDING_LINE) + 1)


def _by_path(result) -> dict[str, list[tuple[str, int]]]:
    found: dict[str, list[tuple[str, int]]] = {}
    for finding in result.json():
        found.setdefault(finding["path"], []).append((finding["code"], finding["line"]))
    return found


def test_a_file_over_the_budget_is_one_ml001_and_the_run_goes_on(modellint, tmp_path):
    filler = padding(DEFAULT_MAX_CODE_BYTES)
    write(tmp_path, "big.py", filler + GOOD)
    write(tmp_path, "small.py", GOOD)
    result = modellint(".", "--format", "json", "--no-cache")
    assert result.rc == 1, result.err
    assert "Traceback" not in result.err, result.err
    assert _by_path(result) == {"big.py": [("ML001", 1)], "small.py": [("ML105", 5)]}
    message = next(f["message"] for f in result.json() if f["path"] == "big.py")
    size = len((filler + GOOD).encode())
    assert message == (
        f"the file holds {size:,} bytes of code, more than the limit of "
        f"{DEFAULT_MAX_CODE_BYTES:,} bytes for one file (`max-code-bytes` in [tool.modellint], "
        "or --max-code-bytes, raises it); it was not linted")


def test_a_file_at_the_budget_is_linted(modellint, tmp_path):
    # a comment cut short, then the code
    text = padding(DEFAULT_MAX_CODE_BYTES)[: DEFAULT_MAX_CODE_BYTES - len(GOOD) - 1] + "\n" + GOOD
    assert len(text.encode()) == DEFAULT_MAX_CODE_BYTES
    write(tmp_path, "limit.py", text)
    result = modellint("limit.py", "--format", "json", "--no-cache")
    assert [code for code, _ in _by_path(result)["limit.py"]] == ["ML105"], result.out


@pytest.mark.parametrize("how", ["--max-code-bytes", "pyproject.toml"])
def test_raising_the_limit_lints_the_file(modellint, tmp_path, how):
    filler = padding(DEFAULT_MAX_CODE_BYTES)
    write(tmp_path, "big.py", filler + GOOD)
    line = filler.count("\n") + 5
    # a cached ML001 from a run under the default limit must not answer the run that raised it
    first = modellint("big.py", "--format", "json")
    assert _by_path(first) == {"big.py": [("ML001", 1)]}, first.out
    raised = str(2 * DEFAULT_MAX_CODE_BYTES)
    if how == "pyproject.toml":
        write(tmp_path, "pyproject.toml", f"[tool.modellint]\nmax-code-bytes = {raised}\n")
        result = modellint("big.py", "--format", "json")
    else:
        result = modellint("big.py", "--format", "json", "--max-code-bytes", raised)
    assert result.rc == 1, result.err
    assert _by_path(result) == {"big.py": [("ML105", line)]}
    settings = modellint("big.py", "--show-settings", *(
        ["--max-code-bytes", raised] if how == "--max-code-bytes" else []))
    origin = "the command line" if how == "--max-code-bytes" else str(tmp_path / "pyproject.toml")
    assert f"max-code-bytes = {raised}  # {origin}" in settings.out.splitlines(), settings.out


def _notebook(sources: list[str], output: str = "ok\n") -> str:
    cells = [{"cell_type": "code", "execution_count": n + 1, "id": f"c{n}", "metadata": {},
              "outputs": [{"name": "stdout", "output_type": "stream", "text": [output]}],
              "source": source.splitlines(keepends=True)} for n, source in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_a_notebook_counts_the_code_of_its_cells_together(modellint, tmp_path):
    # no cell is over the limit alone; together they are
    third = padding(DEFAULT_MAX_CODE_BYTES // 3)
    write(tmp_path, "big.ipynb", _notebook([third, third, third, GOOD]))
    # a notebook of little code and large outputs is linted as usual
    write(tmp_path, "outputs.ipynb", _notebook([GOOD], output="x" * (2 * DEFAULT_MAX_CODE_BYTES)))
    result = modellint(".", "--format", "json", "--no-cache")
    assert result.rc == 1, result.err
    assert _by_path(result) == {"big.ipynb": [("ML001", 1)], "outputs.ipynb": [("ML105", 5)]}
    message = next(f["message"] for f in result.json() if f["path"] == "big.ipynb")
    assert "more than the limit of" in message and "--max-code-bytes" in message
    raised = modellint("big.ipynb", "--format", "json", "--no-cache", "--max-code-bytes",
                       str(2 * DEFAULT_MAX_CODE_BYTES))
    assert [(f["code"], f["cell"], f["line"]) for f in raised.json()] == [("ML105", 4, 5)]


@pytest.mark.parametrize("value", ["0", "-1", "true", '"1MiB"', "1.5", "104857601"])
def test_a_bad_limit_in_the_config_is_a_configuration_error(modellint, tmp_path, value):
    write(tmp_path, "pyproject.toml", f"[tool.modellint]\nmax-code-bytes = {value}\n")
    write(tmp_path, "net.py", GOOD)
    result = modellint("net.py")
    assert result.rc == 2, result.out
    assert "`max-code-bytes` must be a whole number of bytes from 1 to 104857600" in result.err
    assert str(tmp_path / "pyproject.toml") in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("value", ["0", "lots", "104857601"])
def test_a_bad_limit_on_the_command_line_is_a_usage_error(modellint, tmp_path, value):
    write(tmp_path, "net.py", GOOD)
    result = modellint("net.py", "--max-code-bytes", value)
    assert result.rc == 2, result.out
    assert "--max-code-bytes" in result.err and "Traceback" not in result.err


PEAK_MEMORY = """\
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps([peak, done.returncode, done.stdout]))
"""


@pytest.mark.parametrize("name", ["calls.py", "calls.ipynb"])
def test_a_file_over_the_budget_is_not_parsed_at_all(tmp_path, name):
    # 2 MiB of the code that costs most per byte: LibCST took 5 GB for it and CPython's parse
    # (the project index's, a notebook's cells) 1.5 GB; read and hashed, it takes a few MiB
    import subprocess
    import sys

    code = "f()\n" * (512 * 1024)
    write(tmp_path, name, _notebook([code]) if name.endswith(".ipynb") else code)
    write(tmp_path, "net.py", GOOD)
    # (a fresh process measures: RUSAGE_CHILDREN is then the run's own peak)
    out = subprocess.run(
        [sys.executable, "-c", PEAK_MEMORY, sys.executable, "-m", "modellint", "check", ".",
         "--format", "json", "--no-cache", "-j", "1"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=300).stdout
    peak, rc, report = json.loads(out)
    assert rc == 1
    assert sorted((f["path"], f["code"]) for f in json.loads(report)) == [
        (name, "ML001"), ("net.py", "ML105")]
    assert peak < 400, f"peak memory {peak:.0f} MiB"
