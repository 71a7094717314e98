"""Issue 23, the low-severity items: text from a hostile repository that must neither reach
the terminal raw (--diff), nor hide findings (noqa in strings, duplicate notebook keys), nor
crash modellint (a deeply nested configuration)."""

from __future__ import annotations

import json

import pytest
from conftest import NET, write

# ML105 (safe fix) on the `def` line; the comment holds ESC sequences, a backspace and a C1 CSI
ESCAPES = (
    "import torch.nn as nn\n\n\n"
    "class Net(nn.Module):\n"
    "    def forward(x):\n"
    "        return x  # \x1b[2J\x1b[31mred\x08\x9bover\n"
)


def test_diff_escapes_control_characters_of_the_source(cli, tmp_path):
    write(tmp_path, "net.py", ESCAPES.replace("return x", "print('\x1b]0;title\x07')\n        return x"))
    result = cli("net.py", "--diff")
    assert result.rc == 1
    assert "+    def forward(self, x):" in result.out
    assert not any(char in result.out for char in "\x1b\x07\x08\x9b")
    assert "\\x1b[2J\\x1b[31mred\\x08\\x9bover" in result.out
    # the escaped lines are context lines of the hunk, one line each
    assert "         return x  # \\x1b[2J\\x1b[31mred\\x08\\x9bover\n" in result.out


def test_diff_of_a_notebook_cell_escapes_control_characters(cli, tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ESCAPES.splitlines(keepends=True)}
    notebook = {"cells": [cell], "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "book.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    result = cli("book.ipynb", "--diff")
    assert result.rc == 1
    assert "+    def forward(self, x):" in result.out
    assert not any(char in result.out for char in "\x1b\x08\x9b")
    assert "\\x1b[2J" in result.out


def test_diff_keeps_a_missing_last_line_end_apart_from_the_next_line(cli, tmp_path):
    write(tmp_path, "net.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
                              "    def forward(x): return x")
    result = cli("net.py", "--diff")
    assert "-    def forward(x): return x\n\\ No newline at end of file\n" in result.out
    assert result.out.endswith("+    def forward(self, x): return x\n"
                               "\\ No newline at end of file\n")


def _noqa_cases() -> dict[str, str]:
    return {
        # the noqa is inside a string on the finding's line
        "in_string.py": NET.replace(
            "self.layers = [nn.Linear(2, 2), nn.ReLU()]",
            "self.layers = [nn.Linear(2, 2), nn.ReLU()]; s = '# noqa'"),
        # a docstring line that reads like a file-level exemption
        "in_docstring.py": '"""Notes.\n# modellint: noqa\n"""\n' + NET,
        # an f-string and a bytes literal with the codes
        "in_fstring.py": NET.replace(
            "self.tens = torch.ones(3, 4)",
            "self.tens = torch.ones(3, 4); t = f'# noqa: ML103 {1}'"),
    }


def test_noqa_in_a_string_hides_nothing(cli, tmp_path):
    for name, text in _noqa_cases().items():
        write(tmp_path, name, text)
    result = cli(*_noqa_cases(), "--format", "json")
    found = {(f["path"], f["code"]) for f in result.json()}
    assert ("in_string.py", "ML101") in found
    assert {("in_docstring.py", code) for code in ("ML101", "ML103", "ML105")} <= found
    assert ("in_fstring.py", "ML103") in found


def test_real_noqa_comments_still_hide(cli, tmp_path):
    write(tmp_path, "a.py", NET.replace(
        "self.layers = [nn.Linear(2, 2), nn.ReLU()]",
        "self.layers = [nn.Linear(2, 2), '#', nn.ReLU()]  # noqa: ML101"))
    write(tmp_path, "b.py", '"""Notes."""\n# modellint: noqa\n' + NET)
    # a comment after a string that holds a `#`
    write(tmp_path, "c.py", NET.replace("def forward(x):", "def forward(x):  # '#' # noqa"))
    result = cli("a.py", "b.py", "c.py", "--format", "json")
    found = {(f["path"], f["code"]) for f in result.json()}
    assert ("a.py", "ML101") not in found and ("a.py", "ML103") in found
    assert not any(name == "b.py" for name, _ in found)
    assert ("c.py", "ML105") not in found and ("c.py", "ML101") in found


def test_noqa_in_a_string_of_a_file_that_does_not_parse_hides_nothing(cli, tmp_path):
    write(tmp_path, "broken.py", 'text = """\n# modellint: noqa\n"""\ndef f(:\n')
    result = cli("broken.py", "--format", "json")
    assert result.codes() == [("ML000", 4)]


def test_notebook_with_a_duplicate_cells_key_is_read_as_json_reads_it(cli, tmp_path):
    def cell(source: str) -> dict:
        return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                "source": source.splitlines(keepends=True)}

    rest = {"metadata": {"language_info": {"name": "python"}}, "nbformat": 4,
            "nbformat_minor": 5}
    clean = json.dumps([cell("import torch\n"), cell("a = 1\n"), cell("b = 2\n")], indent=1)
    buggy = json.dumps([cell(NET)], indent=1)
    body = json.dumps(rest, indent=1)[1:-2]
    # the last `cells` wins, as in json.loads: the buggy cells, then the clean ones
    (tmp_path / "last_buggy.ipynb").write_text(
        '{\n "cells": ' + clean + "," + body + ',\n "cells": ' + buggy + "\n}\n")
    (tmp_path / "last_clean.ipynb").write_text(
        '{\n "cells": ' + buggy + "," + body + ',\n "cells": ' + clean + "\n}\n")
    assert json.loads((tmp_path / "last_buggy.ipynb").read_text())["cells"][0]["source"]
    for output in ("json", "github", "sarif"):
        result = cli("last_buggy.ipynb", "last_clean.ipynb", "--format", output)
        assert result.rc == 1, (output, result)
        assert "ML001" not in result.out and "ML000" not in result.out
    found = cli("last_buggy.ipynb", "last_clean.ipynb", "--format", "json").json()
    assert {f["path"] for f in found} == {"last_buggy.ipynb"}
    assert {f["code"] for f in found} >= {"ML101", "ML103", "ML105"}
    # the fix lands in the cells json.loads reads
    assert cli("last_buggy.ipynb", "--fix", "--format", "json").rc == 1
    fixed = json.loads((tmp_path / "last_buggy.ipynb").read_text())
    assert "def forward(self, x):\n" in "".join(fixed["cells"][0]["source"])


def test_deeply_nested_configuration_is_a_configuration_error(cli, modellint, tmp_path):
    write(tmp_path, "net.py", NET)
    for nested in ("[" * 3000 + "]" * 3000, "{a=" * 3000 + "1" + "}" * 3000,
                   "[" * 400 + "]" * 400):
        (tmp_path / "pyproject.toml").write_text(f"[tool.modellint]\nselect = {nested}\n")
        result = cli("net.py")
        assert result.rc == 2, result
        assert "pyproject.toml" in result.err
        assert "internal error" not in result.err and "Traceback" not in result.err
    # a real process too: no traceback, one line naming the file
    result = modellint("net.py")
    assert result.rc == 2 and "Traceback" not in result.err
    assert "pyproject.toml" in result.err and len(result.err.strip().splitlines()) == 1


def test_deeply_nested_configuration_found_by_the_editor_is_a_configuration_error(tmp_path):
    # the language server looks the configuration up with find_pyproject, and reports a
    # ConfigError as a message on the folder
    from modellint.config import ConfigError, find_pyproject

    (tmp_path / "pyproject.toml").write_text("[tool.modellint]\nselect = " + "[" * 3000
                                             + "]" * 3000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        find_pyproject(tmp_path)
