"""Code that does not parse is still linted: each statement that fails is one ML000 at CPython's
position, blanked with text of the same line count, and every other statement is linted at its
unchanged position (issue 25, part 3). `async=` of the old torch methods has a safe fix."""

from __future__ import annotations

import ast
import json
import time

import nbformat
import pytest
from conftest import write
from hypothesis import given, settings
from hypothesis import strategies as st

from modellint.static.noqa import python_lines
from modellint.static.recover import MAX_ERRORS, recover

# a training script as written for PyTorch 0.3 (2018): `async` has been a keyword since
# Python 3.7, the loop never clears the gradients (ML303) and wraps tensors in Variable (ML901)
SCRIPT_2018 = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


def train(model, loader, optimizer):
    model.train()
    for data, target in loader:
        data, target = data.cuda(async=True), target.cuda(async=True)
        output = model(Variable(data))
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
"""


def findings(cli, *args):
    result = cli(*args, "--format", "json", "--no-cache")
    assert result.rc in (0, 1), result
    assert "Traceback" not in result.err, result.err
    return [(f["code"], f["line"], f["column"]) for f in result.json()], result.json()


def test_a_2018_script_gets_ml000_with_a_fix_and_its_other_findings_in_place(cli, tmp_path):
    write(tmp_path, "train.py", SCRIPT_2018)
    codes, found = findings(cli, "train.py")
    assert codes == [
        ("ML000", 10, 34),  # CPython's own position: the first `async`
        ("ML901", 11, 24),
        ("ML303", 14, 9),
    ]
    assert found[0]["message"] == "SyntaxError: invalid syntax"
    assert found[0]["fix"] == {
        "applicability": "safe",
        "message": "rename `async=` to `non_blocking=` (its name since PyTorch 0.4)"}
    # the other findings are exactly those of the script that parses
    write(tmp_path, "modern.py", SCRIPT_2018.replace("async=", "non_blocking="))
    _, modern = findings(cli, "modern.py")
    assert [{**f, "path": "train.py"} for f in modern] == found[1:]


def test_fix_renames_async_and_the_file_then_parses(modellint, tmp_path):
    path = write(tmp_path, "train.py", SCRIPT_2018)
    result = modellint("train.py", "--fix", "--format", "json", "--no-cache")
    assert result.rc == 1, result
    fixed = path.read_text()
    ast.parse(fixed)
    assert fixed == SCRIPT_2018.replace("async=", "non_blocking=")
    # what is left is reported where it was
    assert result.codes() == [("ML901", 11), ("ML303", 14)]
    assert "not fixed" not in result.err and "partly fixed" not in result.err


def test_fix_then_makes_the_other_fixes_once_the_file_parses(modellint, tmp_path):
    script = SCRIPT_2018 + (
        "\n\nclass Net(nn.Module):\n"
        "    def forward(x):\n"  # ML105: safe fix
        "        return x.to('cuda', async=True)\n")
    path = write(tmp_path, "train.py", script)
    result = modellint("train.py", "--fix", "--format", "json", "--no-cache")
    assert result.rc == 1, result
    assert path.read_text() == (script.replace("async=", "non_blocking=")
                                .replace("forward(x)", "forward(self, x)"))


def test_a_file_that_still_does_not_parse_keeps_its_other_fixes_for_later(modellint, tmp_path):
    script = SCRIPT_2018 + (
        "        print 'loss', loss.item()\n"
        "\n\nclass Net(nn.Module):\n"
        "    def forward(x):\n"
        "        return x\n")
    path = write(tmp_path, "train.py", script)
    result = modellint("train.py", "--fix", "--format", "json", "--no-cache")
    assert result.rc == 1, result
    # the rename is made; ML105's fix waits: the print statement is no mechanical fix
    assert path.read_text() == script.replace("async=", "non_blocking=")
    assert result.codes() == [("ML901", 11), ("ML303", 14), ("ML000", 15), ("ML105", 19)]
    assert "train.py: partly fixed: the file does not parse" in result.err
    assert "Missing parentheses in call to 'print'" in result.err


def test_diff_shows_the_rename_and_writes_nothing(modellint, tmp_path):
    path = write(tmp_path, "train.py", SCRIPT_2018)
    result = modellint("train.py", "--diff", "--no-cache")
    assert "-        data, target = data.cuda(async=True), target.cuda(async=True)" in result.out
    assert ("+        data, target = data.cuda(non_blocking=True), "
            "target.cuda(non_blocking=True)") in result.out
    assert path.read_text() == SCRIPT_2018


def test_a_syntax_error_in_one_method_leaves_the_class_linted(cli, tmp_path):
    write(tmp_path, "net.py", """\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(2, 2), nn.ReLU()]

            def log(self, x):
                print "shape", x.shape

            def forward(x):
                return x
        """)
    codes, found = findings(cli, "net.py")
    assert codes == [("ML101", 7, 9), ("ML000", 10, 9), ("ML105", 12, 9)]
    assert found[1]["message"] == (
        "SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?")
    # a Python 2 print is not renamed: its other Python 2 meanings would stay hidden
    assert found[1]["fix"] is None


@pytest.mark.parametrize("source, expected", [
    # a block whose header fails goes with its body and its clauses
    ("def f(x:\n    return x\n\ndef g(self):\n    pass\n", [("ML000", 1, 6)]),
    ("if a:\n    x = 1\nelse x:\n    y = 2\nz = 1\n", [("ML000", 3, 6)]),
    # a bracket never closed ends at the next statement at its indentation
    ("x = foo(1, 2\n\nclass N(nn.Module):\n    def forward(x):\n        return x\n",
     [("ML000", 1, 8), ("ML105", 4, 9)]),
    # a decorator goes with what it decorates
    ("class N(nn.Module):\n    @torch.jit.ignore(async=1)\n    def g(x):\n        pass\n"
     "    def forward(x):\n        return x\n", [("ML000", 2, 23), ("ML105", 5, 9)]),
    # indentation
    ("if x:\ny = 1\nclass N(nn.Module):\n    def forward(x):\n        return x\n",
     [("ML000", 2, 1), ("ML105", 4, 9)]),
    ("x = 1\n    y = 2\nclass N(nn.Module):\n    def forward(x):\n        return x\n",
     [("ML000", 2, 4), ("ML105", 4, 9)]),
])
def test_the_statement_blanked_is_the_smallest_that_fails(cli, tmp_path, source, expected):
    write(tmp_path, "m.py", "import torch\nimport torch.nn as nn\n" + source)
    codes, _ = findings(cli, "m.py", "--select", "ML105")
    assert codes == [(code, line + 2, column) for code, line, column in expected]


def test_async_of_another_function_has_no_fix(cli, tmp_path):
    # only the torch methods that took `async` (.cuda, .to, .copy_, .type) are renamed
    write(tmp_path, "m.py", "result = send(message, async=True)\nx = y.cuda(0, async=True)\n")
    _, found = findings(cli, "m.py")
    assert [(f["line"], f["fix"] is not None) for f in found] == [(1, False), (2, True)]


def test_the_project_index_reads_what_parses(cli, tmp_path):
    # a model class in a file with a Python 2 print is still known to the file that imports it
    write(tmp_path, "models.py", """\
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Sequential(nn.Linear(128, 10), nn.Softmax(dim=1))

            def forward(self, x):
                print "shape", x.shape
                return self.head(x)
        """)
    write(tmp_path, "train.py", """\
        import torch.nn as nn
        from models import Classifier

        criterion = nn.CrossEntropyLoss()


        def train(loader):
            model = Classifier()
            for x, y in loader:
                loss = criterion(model(x), y)
        """)
    result = cli(".", "--format", "json", "--no-cache", "--select", "ML308")
    assert [(f["path"], f["code"], f["line"]) for f in result.json()] == [
        ("models.py", "ML000", 10), ("train.py", "ML308", 10)]


def test_a_notebook_cell_with_the_error(cli, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%matplotlib inline\nimport torch\nimport torch.nn as nn"),
        nbformat.v4.new_markdown_cell("## training"),
        nbformat.v4.new_code_cell(
            "for x, y in loader:\n    x = x.cuda(async=True)\n    loss = model(x).sum()\n"
            "    loss.backward()\n    optimizer.step()"),
        nbformat.v4.new_code_cell("class Net(nn.Module):\n    def forward(x):\n        return x"),
    ]
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(nb))
    result = cli("nb.ipynb", "--format", "json", "--no-cache")
    assert [(f["code"], f["cell"], f["line"], f["column"], f["fixable"])
            for f in result.json()] == [
        ("ML000", 3, 2, 16, True), ("ML303", 3, 5, 5, False), ("ML105", 4, 2, 9, True)]
    result = cli("nb.ipynb", "--fix", "--format", "json", "--no-cache")
    assert [(f["code"], f["cell"], f["line"]) for f in result.json()] == [("ML303", 3, 5)]
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert cells[2] == ("for x, y in loader:\n    x = x.cuda(non_blocking=True)\n"
                        "    loss = model(x).sum()\n    loss.backward()\n    optimizer.step()")
    assert cells[3] == "class Net(nn.Module):\n    def forward(self, x):\n        return x"


def test_a_notebook_fix_keeps_a_cell_that_still_does_not_parse(cli, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python"}
    broken = "import torch\nimport torch.nn as nn\nprint 'start'\n!nvidia-smi\nnet = nn.Linear(2, 2)\n" \
             "out = net.forward(x)"
    nb.cells = [nbformat.v4.new_code_cell(broken)]
    path = tmp_path / "nb.ipynb"
    path.write_text(nbformat.writes(nb))
    result = cli("nb.ipynb", "--fix", "--format", "json", "--no-cache")
    # the `net.forward(x)` fix is made around the blanked print, which is written back as it was
    assert [(f["code"], f["line"]) for f in result.json()] == [("ML000", 3)]
    assert "".join(json.loads(path.read_text())["cells"][0]["source"]) == broken.replace(
        "net.forward(x)", "net(x)")


def test_many_errors_stop_at_the_bound_with_one_last_finding(cli, tmp_path):
    garbage = "x = = 1\n" * 5000 + "class N(nn.Module):\n    def forward(x):\n        pass\n"
    write(tmp_path, "garbage.py", garbage)
    started = time.monotonic()
    codes, found = findings(cli, "garbage.py")
    assert time.monotonic() - started < 60
    assert codes == [("ML000", n, 5) for n in range(1, MAX_ERRORS + 2)]
    assert found[-1]["message"] == (
        f"SyntaxError: invalid syntax (modellint stops after {MAX_ERRORS} syntax errors in one "
        f"file: the rest of the file, from line {MAX_ERRORS + 1}, was not linted)")


def test_the_code_budget_still_applies(cli, tmp_path):
    write(tmp_path, "big.py", "x.cuda(async=True)\n" + "y = 1\n" * 200)
    codes, found = findings(cli, "big.py", "--max-code-bytes", "1000")
    assert codes == [("ML001", 1, 1)]
    assert "more than the limit of 1,000 bytes" in found[0]["message"]


# --- the recovery itself ----------------------------------------------------------------------

CASES = [
    SCRIPT_2018,
    "def f():\n    print 'x'\n    return 1\n",
    "x = foo(1, 2\ny = 3\ndef g():\n    pass\n",
    "if x:\n        a = 1\n\tb = 2\n",
    "try:\n    x\nexcept Exception, e:\n    pass\n",
    "x = (1,\n 2]\ny=1\n",
    "s = '''abc\ny = 2\n",
    "def f():\n",
    "}{][)(\n@@@\n",
    "x = 1\r\ny = a.to(d, async=True)\r\nz\r\n",
    "x = a.cuda(async=True)",
    "(\r(\n",  # a line end `\r`, then a line emptied: they must not join into one `\r\n`
    "\n".join("    " * (n % 7) + f"if x{n} oops:" for n in range(40)),
]


@pytest.mark.parametrize("text", CASES)
def test_recovery_keeps_every_line_it_does_not_blank(text):
    recovery = recover(text)
    assert recovery.tree is not None and recovery.problems
    before, after = python_lines(text), python_lines(recovery.text)
    assert len(before) == len(after)
    blanked = {n for p in recovery.problems for n in range(p.first_line, p.last_line + 1)}
    for number, (old, new) in enumerate(zip(before, after, strict=True), 1):
        if number not in blanked:
            assert old == new, (number, old, new)
        else:
            assert new.strip() in ("", "pass")
    ast.parse(recovery.text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "x = 1", "def f(x):", "    return x", "class A:", "    def g(self):", "        pass",
    "print 'a'", "y = z.cuda(async=True)", "    async = 3", "(", ")", "]", "'''", "'", "\\",
    "@deco", "else:", "    ", "\t", "if x", "# c", "for a in b:", "x = [", "1,", "  1,",
]), max_size=30))
def test_recovery_of_any_mix_of_lines_is_bounded_and_keeps_lines(lines):
    text = "\n".join(lines) + "\n"
    recovery = recover(text)
    assert len(python_lines(recovery.text)) == len(python_lines(text))
    assert len(recovery.problems) <= MAX_ERRORS + 1
    assert recovery.tree is not None
    for problem in recovery.problems:
        assert 1 <= problem.first_line <= problem.last_line
        for edit in problem.edits:
            assert python_lines(text)[edit.line - 1][edit.start:edit.end] == "async"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    *"()[]{}'\"\\#:=@ \t\n\rabxy.,\f", "async", "def ", "class ", "if ", "else:", "'''",
    "    ", "print "]), max_size=120).map("".join))
def test_recovery_of_any_text_keeps_its_lines(text):
    recovery = recover(text)
    assert len(python_lines(recovery.text)) == len(python_lines(text))
    assert len(recovery.problems) <= MAX_ERRORS + 1
    assert recovery.tree is not None or not recovery.problems
