"""Jupyter notebooks in the static pass: found in folders, read by content when named, linted
cell by cell as one program, reported by cell, fixed byte for byte.

The notebooks are real ones: written by `nbformat` (with outputs: streams, an embedded image)
from the tutorial fixtures, and one notebook of a public tutorial (Udacity's "Neural Networks
in PyTorch", MIT licence, tests/data/notebooks/LICENSE-udacity) as it is published."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import NET, write
from hypothesis import given, settings
from hypothesis import strategies as st

from modellint.static.notebook import NotebookError, mask, read_notebook

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TUTORIAL = ROOT / "tests" / "data" / "notebooks" / "udacity_part2_neural_networks.ipynb"
# a PNG-sized base64 payload: a plot in an output
IMAGE = base64.b64encode(hashlib.sha256(b"x").digest() * 2000).decode()


def code_cell(source: str, outputs: bool = True):
    cell = nbformat.v4.new_code_cell(source)
    if outputs:
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text="tensor([1., 2.])\n"),
            nbformat.v4.new_output("display_data", data={"image/png": IMAGE,
                                                         "text/plain": "<Figure>"}),
        ]
        cell.execution_count = 1
    return cell


def notebook(*cells) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11"}
    nb.cells = list(cells)
    return nbformat.writes(nb)


def as_cells(source: str) -> list[tuple[int, str]]:
    """`source` cut into cells, one per top-level statement (its comments above it with it):
    (first line in the file, cell text), the text without its last line break as Jupyter
    keeps it."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [1]
    for node in tree.body[1:]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        while first - 1 > starts[-1] and lines[first - 2].lstrip().startswith("#"):
            first -= 1
        starts.append(first)
    starts = sorted(set(starts))
    cells = []
    for start, end in zip(starts, [*starts[1:], len(lines) + 1], strict=True):
        text = "".join(lines[start - 1:end - 1])
        cells.append((start, text.rstrip("\n") if text.strip() else text))
    return cells


def lint_json(cli, *args) -> list[dict]:
    result = cli(*args, "--format", "json", "--no-cache")
    assert result.rc in (0, 1), result
    return result.json()


# --- the tutorial mistakes: the same findings as in the .py, at the right cell and line -------


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.py")))
def test_tutorial_mistakes_in_a_notebook_match_the_py_file(cli, tmp_path, fixture):
    source = (FIXTURES / fixture).read_text()
    expected = lint_json(cli, FIXTURES / fixture)
    if not expected:
        pytest.skip(f"{fixture}: its mistake is one the runtime pass finds")
    cells = as_cells(source)
    # a markdown cell before each code cell: code cell k is the notebook's cell 2k + 2
    nb_cells = []
    for _, text in cells:
        nb_cells += [nbformat.v4.new_markdown_cell("Some explanation."), code_cell(text)]
    path = tmp_path / (fixture.removesuffix(".py") + ".ipynb")
    path.write_text(notebook(*nb_cells))
    found = lint_json(cli, path)

    def where(line: int) -> tuple[int, int]:
        index = max(i for i, (start, _) in enumerate(cells) if start <= line)
        return 2 * index + 2, line - cells[index][0] + 1

    assert [(f["code"], f["message"], f["cell"], f["line"], f["column"]) for f in found] == [
        (f["code"], f["message"], *where(f["line"]), f["column"]) for f in expected]


def test_findings_name_the_cell_in_text_output_as_ruff_does(cli, tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(
        nbformat.v4.new_markdown_cell("# Title"),
        code_cell("import torch\nimport torch.nn as nn"),
        code_cell(NET.split("\n\n\n", 1)[1].rstrip("\n")),
    ))
    result = cli("nb.ipynb", "--format", "concise", "--no-cache")
    assert result.rc == 1
    lines = result.out.splitlines()
    # NET's lines 8, 9 and 11 are lines 4, 5 and 7 of the cell that starts at its line 5
    assert lines[0].startswith("nb.ipynb:cell 3:4:9: ML101 "), result
    assert lines[1].startswith("nb.ipynb:cell 3:5:9: ML103 "), result
    assert lines[2].startswith("nb.ipynb:cell 3:7:9: ML105 "), result
    assert "Found 3 findings in 1 notebook (1 fixable)." in lines
    # facts flow from cell to cell: `nn` imported in cell 2 is what makes cell 3 a module
    alone = tmp_path / "alone.ipynb"
    alone.write_text(notebook(code_cell(NET.split("\n\n\n", 1)[1])))
    assert lint_json(cli, alone) == []


# --- the regression: a named notebook is never read as Python ---------------------------------


def test_named_notebook_full_of_mistakes_is_not_all_checks_passed(modellint, tmp_path):
    shutil.copy(TUTORIAL, tmp_path / "tutorial.ipynb")
    result = modellint("tutorial.ipynb", "--no-cache")
    assert result.rc == 1, result
    assert "All checks passed" not in result.out
    assert "tutorial.ipynb:cell 7:2:18: ML911" in result.out
    assert "Found 7 findings in 1 notebook" in result.out


def test_public_tutorial_findings_at_their_cells(cli, tmp_path):
    found = lint_json(cli, TUTORIAL)
    assert [(f["code"], f["cell"], f["line"], f["column"]) for f in found] == [
        ("ML911", 7, 2, 18),  # images, labels = dataiter.next()
        ("ML903", 20, 13, 13),  # F.sigmoid
        ("ML902", 27, 2, 1),  # model.fc1.bias.data.fill_(0)
        ("ML902", 28, 2, 1),  # model.fc1.weight.data.normal_(std=0.01)
        ("ML911", 30, 3, 18),
        ("ML202", 30, 11, 6),  # model.forward(...)
        ("ML202", 32, 18, 6),
    ]
    raw = json.loads(TUTORIAL.read_text())
    for f in found:
        line = "".join(raw["cells"][f["cell"] - 1]["source"]).split("\n")[f["line"] - 1]
        assert line[f["column"] - 1:].startswith(("dataiter", "F.sigmoid", "model"))


def test_folder_of_notebooks_only_is_linted(cli, tmp_path):
    (tmp_path / "nbs").mkdir()
    shutil.copy(TUTORIAL, tmp_path / "nbs" / "tutorial.ipynb")
    (tmp_path / "nbs" / "clean.ipynb").write_text(notebook(code_cell("import torch")))
    result = cli("nbs", "--format", "concise", "--no-cache")
    assert result.rc == 1
    assert "Found 7 findings in 1 notebook" in result.out
    shown = cli("nbs", "--show-files")
    assert shown.out.split() == ["nbs/clean.ipynb", "nbs/tutorial.ipynb"]
    clean = cli("nbs/clean.ipynb", "--no-cache")
    assert clean.rc == 0 and "All checks passed (1 notebook)." in clean.out


def test_summary_counts_notebooks_among_files(cli, tmp_path):
    write(tmp_path, "a.py", "import torch\n")
    (tmp_path / "b.ipynb").write_text(notebook(code_cell("import torch")))
    result = cli(".", "--no-cache")
    assert result.rc == 0
    assert "All checks passed (2 files, 1 of them a notebook)." in result.out


def test_notebooks_setting_turns_the_walk_off(cli, tmp_path):
    shutil.copy(TUTORIAL, tmp_path / "tutorial.ipynb")
    write(tmp_path, "pyproject.toml", "[tool.modellint]\nnotebooks = false\n")
    write(tmp_path, "a.py", "import torch\n")
    assert cli(".", "--show-files").out.split() == ["a.py"]
    # a notebook named explicitly is still linted
    assert cli("tutorial.ipynb", "--no-cache").rc == 1
    assert "notebooks = false  # " in cli("--show-settings").out
    write(tmp_path, "pyproject.toml", "[tool.modellint]\nnotebooks = \"no\"\n")
    bad = cli(".")
    assert bad.rc == 2 and "`notebooks` must be true or false" in bad.err


def test_named_file_is_linted_by_content(cli, tmp_path):
    # a notebook saved under another name is read as a notebook
    (tmp_path / "notes.json").write_text(notebook(code_cell(NET)))
    (tmp_path / "README.md").write_text("# Title\n\nSome text.\n")
    named = cli("notes.json", "--format", "concise", "--no-cache")
    assert "All checks passed" not in named.out
    assert "notes.json:cell 1:11:9: ML105" in named.out
    refused = cli("README.md", "--no-cache")
    assert refused.rc == 2
    assert "README.md: neither Python source nor a Jupyter notebook" in refused.err
    assert "All checks passed" not in refused.out
    # a .py file is Python, even one that holds a dict shaped like a notebook
    write(tmp_path, "template.py", 'NB = {"cells": [], "nbformat": 4, "x": None}\n')
    assert cli("template.py", "--no-cache").rc == 0
    # a script without a suffix is Python
    write(tmp_path, "train", NET)
    script = cli("train", "--format", "concise", "--no-cache")
    assert script.rc == 1 and "train:11:9: ML105" in script.out


@pytest.mark.parametrize("content, problem", [
    (b"import torch\n", "not a valid notebook: invalid JSON: the file does not hold a JSON "
                        "object (line 1, column 1)"),
    (b'{"cells": [], "nbformat": 4,}', "not a valid notebook: invalid JSON: Expecting property "
                                      "name enclosed in double quotes (line 1, column 29)"),
    (b'{"cells": [], "nbformat": 3, "metadata": {}}', "not nbformat 4 (the file says "
                                                    "nbformat 3)"),
    (b'{"metadata": {}, "nbformat": 4}', "the JSON has no `cells` key"),
    (b'{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4}',
     "the source of cell 1 is not text"),
    (b"", "the file is empty"),
    (b'{"cells": [], "nbformat": 4}\x00', "invalid JSON: Extra data (line 1, column 29)"),
    (b'\xff{"cells": []}', "not UTF-8 text"),
    (b'{"cells": [], "nbformat": 4, "m": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "invalid JSON: nested too deeply"),
])
def test_broken_notebook_is_one_ml000_naming_the_problem(cli, tmp_path, content, problem):
    (tmp_path / "bad.ipynb").write_bytes(content)
    found = lint_json(cli, "bad.ipynb")
    assert len(found) == 1, found
    assert found[0]["code"] == "ML000"
    assert problem in found[0]["message"]


# --- magics, cells that do not parse ----------------------------------------------------------


def test_magics_are_masked_without_moving_anything(cli, tmp_path):
    cells = [
        code_cell("%matplotlib inline\n%load_ext autoreload\nimport torch.nn.functional as F\n"
                  "!pip install x\n"
                  "files = !ls\nx = F.cross_entropy(out, target)"),
        code_cell("%%time\ny = x.data[0]\nx?\n?x\nx.sum??"),
        code_cell("%%bash\necho x.data[0]\n  for a in b"),
        code_cell("def f(:\n    pass"),
        code_cell("if True:\n    %time z = x.data[0]\n    w = x.data[0]"),
    ]
    path = tmp_path / "magic.ipynb"
    path.write_text(notebook(*cells))
    found = lint_json(cli, path)
    assert [(f["code"], f["cell"], f["line"], f["column"]) for f in found] == [
        ("ML910", 2, 2, 5),  # after the %%time line, x from cell 1
        ("ML000", 4, 1, 7),  # this cell only
        ("ML910", 5, 3, 9),
    ]
    assert found[1]["message"] == "SyntaxError: invalid syntax"


def test_mask_keeps_lines_and_leaves_valid_python_alone():
    masked, originals = mask("a = (1\n     % 2)\n")
    assert masked == "a = (1\n     % 2)\n" and originals == {}
    masked, originals = mask("%%writefile x.py\nimport os\n")
    assert masked.count("\n") == 2 and ast.parse(masked).body == []
    assert originals == {0: "%%writefile x.py", 1: "import os", 2: ""}


def test_noqa_in_a_cell_and_file_noqa_in_the_first_cell(cli, tmp_path):
    mistake = "import torch.nn.functional as F\nx = F.cross_entropy(out, target)\ny = x.data[0]"
    with_noqa = mistake + "  # noqa: ML910"
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(code_cell(with_noqa), code_cell("z = x.data[0]")))
    assert [(f["cell"], f["line"]) for f in lint_json(cli, path)] == [(2, 1)]
    path.write_text(notebook(code_cell("# modellint: noqa\n" + mistake),
                             code_cell("z = x.data[0]")))
    assert lint_json(cli, path) == []
    # only the first code cell's covers the notebook
    path.write_text(notebook(nbformat.v4.new_markdown_cell("# modellint: noqa"),
                             code_cell(mistake), code_cell("# modellint: noqa\nz = x.data[0]")))
    assert [(f["cell"], f["line"]) for f in lint_json(cli, path)] == [(2, 3), (3, 2)]


def test_per_file_ignores_cover_notebooks(cli, tmp_path):
    write(tmp_path, "pyproject.toml",
          '[tool.modellint]\nper-file-ignores = {"*.ipynb" = ["ML911"]}\n')
    shutil.copy(TUTORIAL, tmp_path / "t.ipynb")
    codes = {f["code"] for f in lint_json(cli, "t.ipynb")}
    assert codes == {"ML903", "ML902", "ML202"}


def test_cache_and_jobs_give_the_same_notebook_findings(modellint, tmp_path):
    for n in range(5):
        shutil.copy(TUTORIAL, tmp_path / f"t{n}.ipynb")
    env = {"MODELLINT_CACHE_DIR": str(tmp_path / "cache")}
    expected = modellint(".", "--format", "json", "--jobs", "1", "--no-cache").json()
    assert len(expected) == 35
    first = modellint(".", "--format", "json", "--jobs", "3", env=env)
    assert first.json() == expected
    # one line per notebook in the run's entry, and a rerun answered from it gives the same
    # findings
    [run] = (tmp_path / "cache").glob("*/runs/*.json")
    assert len(run.read_bytes().split(b"\n")) == 1 + 5  # (the signature, then the files)
    assert modellint(".", "--format", "json", "--jobs", "1", env=env).json() == expected
    text = modellint(".", "--format", "concise", env=env)
    assert "t0.ipynb:cell 7:2:18: ML911" in text.out
    # an edited notebook is linted again
    edited = TUTORIAL.read_text().replace("dataiter.next()", "next(dataiter)")
    (tmp_path / "t0.ipynb").write_text(edited)
    again = modellint(".", "--format", "json", env=env).json()
    assert len(again) == 33 and not any(f["path"] == "t0.ipynb" and f["code"] == "ML911"
                                        for f in again)


def test_fix_refuses_a_hard_linked_notebook(cli, tmp_path):
    path = tmp_path / "t.ipynb"
    shutil.copy(TUTORIAL, path)
    (tmp_path / "other.ipynb").hardlink_to(path)
    result = cli("t.ipynb", "--fix", "--no-cache")
    assert "has 2 hard links" in result.err
    assert path.read_bytes() == TUTORIAL.read_bytes()


# --- SARIF and GitHub: a location the user can open -------------------------------------------


def test_sarif_points_at_the_notebook_files_line(cli, tmp_path):
    shutil.copy(TUTORIAL, tmp_path / "t.ipynb")
    result = cli("t.ipynb", "--format", "sarif", "--no-cache")
    results = json.loads(result.out)["runs"][0]["results"]
    first = results[0]
    region = first["locations"][0]["physicalLocation"]["region"]
    file_lines = TUTORIAL.read_text().split("\n")
    # the JSON line of the notebook file that holds cell 7's line 2
    assert '"images, labels = dataiter.next()\\n"' in file_lines[region["startLine"] - 1]
    assert first["properties"]["cell"] == 7
    assert (first["properties"]["cellLine"], first["properties"]["cellColumn"]) == (2, 18)
    assert first["message"]["text"].startswith("cell 7, line 2: ")
    # the Action reads its SARIF back: the cell and its line survive
    from modellint.report.sarif import findings_from_sarif

    back = findings_from_sarif(json.loads(result.out))[0]
    assert (back.cell, back.line, back.column) == (7, 2, 18)
    assert not back.message.startswith("cell")


def test_github_annotation_points_at_the_notebook_files_line(cli, tmp_path):
    shutil.copy(TUTORIAL, tmp_path / "t.ipynb")
    result = cli("t.ipynb", "--format", "github", "--no-cache")
    first = result.out.splitlines()[0]
    assert first.startswith("::error file=t.ipynb,line=")
    line = int(first.split("line=")[1].split(",")[0])
    assert "dataiter.next()" in TUTORIAL.read_text().split("\n")[line - 1]
    assert "::t.ipynb:cell 7:2:18: ML911 " in first


# --- --fix and --diff: only the cell sources change -------------------------------------------


def _without_sources(text: str) -> dict:
    data = json.loads(text)
    for cell in data["cells"]:
        cell["source"] = None
    return data


def test_fix_changes_only_cell_sources_byte_for_byte(cli, tmp_path):
    path = tmp_path / "t.ipynb"
    shutil.copy(TUTORIAL, path)
    before = path.read_bytes()
    result = cli("t.ipynb", "--fix", "--no-cache", "--format", "concise")
    # the safe fixes: ML911 twice, ML903, ML202 twice (ML902 has none)
    assert "Fixed 5 findings." in result.out, result
    after = path.read_bytes()
    # the written file is valid nbformat, and nothing but cell sources changed
    nbformat.validate(nbformat.reads(after.decode(), as_version=4))
    assert _without_sources(after.decode()) == _without_sources(before.decode())
    old_cells = json.loads(before)["cells"]
    new_cells = json.loads(after)["cells"]
    changed = [n + 1 for n, (a, b) in enumerate(zip(old_cells, new_cells, strict=True))
               if a["source"] != b["source"]]
    assert changed == [7, 20, 30, 32]
    assert "".join(new_cells[6]["source"]).split("\n")[1] == "images, labels = next(dataiter)"
    # byte for byte: the old text with the changed source items replaced is the new text
    expected = before.decode()
    for a, b in zip(old_cells, new_cells, strict=True):
        for old_item, new_item in zip(a["source"], b["source"], strict=True):
            if old_item != new_item:
                expected = expected.replace(json.dumps(old_item, ensure_ascii=False),
                                            json.dumps(new_item, ensure_ascii=False), 1)
    assert after.decode() == expected
    assert after.endswith(b"}\n")
    # a second --fix changes nothing
    second = cli("t.ipynb", "--fix", "--no-cache", "--format", "concise")
    assert "Fixed" not in second.out
    assert path.read_bytes() == after


def test_fix_keeps_indentation_key_order_and_a_string_source(cli, tmp_path):
    # written by another tool: two-space indent, keys out of order, a string source, no
    # trailing newline, non-ASCII text in an output
    data = {
        "nbformat_minor": 5, "nbformat": 4,
        "cells": [
            {"source": "import torch\nnet = torch.nn.Linear(2, 2)\nout = net.forward(x)",
             "outputs": [], "metadata": {}, "cell_type": "code"},
            {"source": ["z = net.forward(x)\n", "# caf\u00e9 \u2713"],
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["été ✓\n"]}],
             "metadata": {"z": 1, "a": 2}, "execution_count": 3, "id": "c1",
             "cell_type": "code"},
        ],
        "metadata": {"language_info": {"name": "python"}},
    }
    text = json.dumps(data, indent=2, ensure_ascii=False)
    # the unchanged line of the changed list keeps its escapes (another writer's choice)
    text = text.replace('"# café ✓"', '"# caf\\u00e9 \\u2713"')
    path = tmp_path / "other.ipynb"
    path.write_text(text)
    result = cli("other.ipynb", "--fix", "--no-cache", "--format", "concise")
    assert "Fixed 2 findings." in result.out, result
    expected = text.replace('net.forward(x)"', 'net(x)"').replace(
        '"z = net.forward(x)\\n"', '"z = net(x)\\n"')
    assert expected != text and '"# caf\\u00e9 \\u2713"' in expected
    assert path.read_text() == expected


def test_diff_shows_cells_and_writes_nothing(cli, tmp_path):
    path = tmp_path / "t.ipynb"
    shutil.copy(TUTORIAL, path)
    result = cli("t.ipynb", "--diff", "--no-cache")
    assert result.rc == 1
    assert "--- a/t.ipynb:cell 7\n+++ b/t.ipynb:cell 7\n" in result.out
    assert "-images, labels = dataiter.next()\n+images, labels = next(dataiter)\n" in result.out
    assert path.read_bytes() == TUTORIAL.read_bytes()


def test_fix_leaves_magics_and_broken_cells_as_they_were(cli, tmp_path):
    path = tmp_path / "m.ipynb"
    path.write_text(notebook(
        code_cell("%matplotlib inline\nimport torch\n!pip install torch"),
        code_cell("def f(:\n    pass"),
        code_cell("net = torch.nn.Linear(2, 2)\n%time out = net.forward(x)\nout = net.forward(x)"),
    ))
    cli("m.ipynb", "--fix", "--no-cache")
    cells = json.loads(path.read_text())["cells"]
    assert ["".join(c["source"]) for c in cells] == [
        "%matplotlib inline\nimport torch\n!pip install torch",
        "def f(:\n    pass",
        "net = torch.nn.Linear(2, 2)\n%time out = net.forward(x)\nout = net(x)",
    ]


def test_reader_rejects_what_it_cannot_round_trip():
    with pytest.raises(NotebookError):
        read_notebook(b'{"cells": [], "nbformat": 4} {}')
    book = read_notebook(TUTORIAL.read_bytes())
    assert book.with_sources({c.number: c.source for c in book.cells}) == TUTORIAL.read_text()
    assert book.cell_sources(book.source) == {c.number: c.source for c in book.cells
                                              if c.first_line}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), min_size=1,
                max_size=4),
       st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), min_size=4,
                max_size=4),
       st.booleans())
def test_splicing_sources_changes_exactly_those_sources(old, new, ascii_only):
    nb = nbformat.v4.new_notebook()
    nb.cells = [code_cell(text, outputs=n % 2 == 0) for n, text in enumerate(old)]
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("between"))
    text = nbformat.writes(nb)
    if ascii_only:
        text = json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=True) + "\n"
    book = read_notebook(text.encode())
    assert book.with_sources({c.number: c.source for c in book.cells}) == text
    wanted = {c.number: replacement for c, replacement in zip(book.cells, new, strict=False)}
    spliced = book.with_sources(wanted)
    assert spliced.isascii() or not ascii_only
    before, after = json.loads(text), json.loads(spliced)
    for n, (a, b) in enumerate(zip(before["cells"], after["cells"], strict=True)):
        source = b.pop("source")
        expected = wanted.get(n + 1, "".join(a["source"]) if a["cell_type"] == "code" else None)
        if expected is not None:
            assert "".join(source) == expected
        a.pop("source")
    assert before == after
    nbformat.validate(nbformat.reads(spliced, as_version=4))


def test_github_action_annotates_notebooks_the_same_from_its_sarif(tmp_path):
    from test_action import run_action

    space = tmp_path / "workspace"
    (space / "nbs").mkdir(parents=True)
    shutil.copy(TUTORIAL, space / "nbs" / "t.ipynb")
    plain = run_action(space, src="nbs", args="check --select ML911 --no-cache")
    via_sarif = run_action(space, src="nbs", args="check --select ML911 --no-cache",
                           sarif_file="results.sarif")
    assert plain.returncode == via_sarif.returncode == 1, plain.stderr
    assert via_sarif.stdout == plain.stdout
    assert plain.stdout.count("::error file=nbs/t.ipynb,line=") == 2
    assert "nbs/t.ipynb:cell 7:2:18: ML911" in plain.stdout
    summary = (tmp_path / "step_summary.md").read_text()
    assert "blob/0123abc/nbs/t.ipynb#L" in summary and "t.ipynb:cell 7:2" in summary


# Python lines weigh three times the rest, so that most cells parse and have findings
LINES = 3 * ["import torch.nn.functional as F", "loss = F.cross_entropy(x, y)",
             "print(loss.data[0])", "loss.data[0]  # noqa", ""] + [
    "%matplotlib inline", "!pip install torch", "files = !ls", "x?", "?x", "%%time", "%%bash",
    "if x:", "    y = loss.data[0]", "    %time z = 1", "def f(:", "s = '''", "'''",
    "# modellint: noqa: ML910", "(a", "  % b)"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from(LINES), max_size=6).map("\n".join), min_size=1,
                max_size=5))
def test_any_mix_of_cells_is_linted_in_place_and_round_trips(cells):
    from modellint.config import Config
    from modellint.plugins import load_registry
    from modellint.static.linter import Linter

    registry = load_registry(entry_points=False)
    rules = [rule for rule in registry.rules.values()
             if "static" in rule.passes and hasattr(rule, "report")]
    cells = ["import torch.nn.functional as F\nloss = F.cross_entropy(x, y)", *cells]
    text = notebook(*(code_cell(source, outputs=False) for source in cells))
    book = read_notebook(text.encode())
    # joining, masking and splitting back gives every linted cell as it was
    assert book.cell_sources(book.source) == {
        c.number: c.source for c in book.cells if c.first_line}
    found = Linter(rules, Config().rule_options()).lint_notebook("nb.ipynb", book).findings
    assert not [f for f in found if f.code == "ML001"], found
    for f in found:
        lines = cells[f.cell - 1].split("\n")
        assert 1 <= f.line <= len(lines), (f, cells)
        if f.code != "ML000":
            # the finding points into the cell's own text, not at a masked placeholder
            assert "modellint-masked" not in f.source_line and f.source_line == lines[f.line - 1]


def test_a_notebook_in_another_language_is_skipped_with_a_message(cli, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "R"}
    nb.cells = [code_cell("library(torch)\nx <- torch_randn(2)")]
    (tmp_path / "r.ipynb").write_text(nbformat.writes(nb))
    result = cli("r.ipynb", "--no-cache")
    assert result.rc == 0 and "r.ipynb: not linted: the notebook's language is R, not Python" in result.err


SOFTMAX_NET = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(x)
"""
NOTEBOOK_TRAINING = ("from models import Net\nimport torch.nn as nn",
                     "model = Net()\ncriterion = nn.CrossEntropyLoss()",
                     "%matplotlib inline\nloss = criterion(model(x), y)")


def test_a_notebook_sees_the_projects_own_classes(cli, tmp_path):
    """`from models import Net` in a cell is the project's Net, as in a .py file: ML308 when
    Net ends in Softmax, also for a run on the notebook alone and from the cache; and editing
    models.py re-lints the notebook."""
    models = write(tmp_path, "models.py", SOFTMAX_NET)
    write(tmp_path, "pyproject.toml", "[tool.modellint]\n")
    (tmp_path / "train.ipynb").write_text(notebook(*map(code_cell, NOTEBOOK_TRAINING)))
    env = {"MODELLINT_CACHE_DIR": str(tmp_path / "cache")}

    def ml308(*args):
        found = cli(*args, "--select", "ML308", "--format", "json", env=env).json()
        return [(f["path"], f["cell"], f["line"]) for f in found]

    assert ml308(".") == [("train.ipynb", 3, 2)]
    assert ml308("train.ipynb") == [("train.ipynb", 3, 2)]
    assert ml308("train.ipynb") == [("train.ipynb", 3, 2)]  # from the cache
    assert ml308("train.ipynb", "--no-cache") == [("train.ipynb", 3, 2)]
    models.write_text(SOFTMAX_NET.replace(", nn.Softmax(dim=1)", ""))
    assert ml308("train.ipynb") == []
    assert ml308(".") == []


def test_nothing_imports_a_notebooks_definitions(cli, tmp_path):
    """A notebook is no module: `from nets import Net` beside nets.ipynb is not its Net."""
    (tmp_path / "nets.ipynb").write_text(notebook(code_cell(SOFTMAX_NET)))
    step = "\n\ndef step(x, y):\n    model = {}()\n    return F.cross_entropy(model(x), y)\n"
    write(tmp_path, "use.py", "import torch.nn.functional as F\nfrom nets import Net\n"
          + step.format("Net"))
    write(tmp_path, "same.py", "import torch.nn.functional as F\n"
          + SOFTMAX_NET.replace("class Net", "class Local") + step.format("Local"))
    found = cli(".", "--select", "ML308", "--format", "json",
                env={"MODELLINT_CACHE_DIR": str(tmp_path / "cache")}).json()
    assert [f["path"] for f in found] == ["same.py"]


# -- the runtime pass ----------------------------------------------------------------------
NOTEBOOK_MODELS = [
    "%matplotlib inline\nimport torch\nimport torch.nn as nn",
    "class Block(nn.Module):\n    def __init__(self, channels):\n        super().__init__()\n"
    "        self.conv = nn.Conv2d(channels, channels, 3, padding=1)\n\n"
    "    def forward(self, x):\n        return self.conv(x).relu()",
    "class TwoStageNet(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.stem = nn.Conv2d(3, 16, 3, padding=1)\n        self.stage1 = Block(16)\n"
    "        self.stage2 = Block(32)  # gets 16 channels\n        self.head = nn.Linear(32, 10)\n\n"
    "    def forward(self, x):\n        x = self.stage2(self.stage1(self.stem(x)))\n"
    "        return self.head(x.mean((2, 3)))",
    "!pip install nothing\nopen('ran.txt', 'w').write('the script body ran')\n"
    "model = TwoStageNet()\nmodel(torch.randn(2, 3, 32, 32))",
]


def test_runtime_pass_builds_a_notebooks_models_and_reports_at_cells(modellint, tmp_path):
    """A notebook's code cells' definitions are built (magics masked, the script cell left
    out: it never runs); the channel mismatch is ML701 at the cell and line that built the
    layer, the lines the message names are cell lines too; a noqa in a cell hides a finding."""
    book = tmp_path / "models.ipynb"
    book.write_text(notebook(nbformat.v4.new_markdown_cell("# Models"),
                             *(code_cell(source) for source in NOTEBOOK_MODELS)),
                    encoding="utf-8")
    result = modellint("check", "--runtime", "--format", "json", "--select", "ML701,ML002",
                       "models.ipynb")
    found = result.json()
    assert [(f["code"], f["cell"], f["line"]) for f in found] == [("ML701", 4, 6)], result
    assert "models.ipynb:cell 3:4" in found[0]["message"], found[0]["message"]
    assert found[0]["pass"] == "runtime"
    assert not (tmp_path / "ran.txt").exists()
    text = modellint("check", "--runtime", "--select", "ML701", "models.ipynb")
    assert "models.ipynb:cell 4:6:9: ML701" in text.out and "1 notebook" in text.out, text
    quiet = NOTEBOOK_MODELS[:2] + [NOTEBOOK_MODELS[2].replace(
        "# gets 16 channels", "# noqa: ML701")]
    book.write_text(notebook(*(code_cell(source) for source in quiet)), encoding="utf-8")
    hidden = modellint("check", "--runtime", "--select", "ML701,ML002", "models.ipynb")
    assert hidden.rc == 0 and "All checks passed" in hidden.out, hidden
    assert "not checked" not in hidden.out
