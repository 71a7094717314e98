"""Files the parsers cannot take: nesting that crashed LibCST's native parser, syntax newer than
the running Python, and a worker process that dies. Each is one finding and the run goes on.

Every run is a real `modellint` process with a timeout: a crash or a hang fails the test.
"""

from __future__ import annotations

import ast
import sys

import pytest
from conftest import write

# ML105 at line 5, column 9 (a safe fix: add `self`)
GOOD = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(x):
        return x
"""

# each crashed LibCST's parser (segfault with -j1, a hang with workers); CPython refuses each
TOO_DEEP = {
    "parens.py": "x = " + "(" * 2000 + "1" + ")" * 2000 + "\n",
    "brackets.py": "x = " + "[" * 3000 + "]" * 3000 + "\n",
    "sum.py": "x = " + " + ".join(["a"] * 8000) + "\n",
}


def _cpython_says(text: str) -> str:
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg}"
    except RecursionError as exc:
        return str(exc)
    raise AssertionError("CPython parsed it")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nesting_cpython_refuses_is_ml000_and_the_run_goes_on(modellint, tmp_path, jobs):
    for name, text in TOO_DEEP.items():
        write(tmp_path, name, text)
    write(tmp_path, "good.py", GOOD)
    write(tmp_path, "other.py", GOOD.replace("Net", "Other"))
    result = modellint(".", "--format", "json", "--no-cache", "-j", jobs)
    assert result.rc == 1, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err, result.err
    found = {}
    for finding in result.json():
        found.setdefault(finding["path"], []).append(finding)
    for name, text in TOO_DEEP.items():
        assert [f["code"] for f in found[name]] == ["ML000"], found[name]
        assert _cpython_says(text) in found[name][0]["message"]
    assert [(f["code"], f["line"], f["column"]) for f in found["good.py"]] == [("ML105", 5, 9)]
    assert [(f["code"], f["line"]) for f in found["other.py"]] == [("ML105", 5)]


def test_chains_cpython_keeps_flat_are_linted_or_reported_not_crashed(modellint, tmp_path):
    # `and` chains and dotted imports are flat for CPython but one level per link for LibCST
    chains = "import torch" + ".nn" * 8000 + "\nok = " + " and ".join(["x"] * 8000) + "\n"
    write(tmp_path, "chain.py", chains + GOOD)
    # (a `def` makes ML105 look at each file: one that no selected rule looks at is not
    # parsed by LibCST at all, as `unlooked.py`)
    looked_at = "\ndef f():\n    pass\n"
    write(tmp_path, "longest.py", "x = " + " or ".join(["x"] * 60_000) + looked_at)
    # LibCST refuses (as a syntax error) 4,000 implicitly concatenated strings; CPython does not
    write(tmp_path, "strings.py", "x = " + " ".join(['"a"'] * 5000) + looked_at)
    write(tmp_path, "unlooked.py", "x = " + " ".join(['"a"'] * 5000) + "\n")
    result = modellint(".", "--format", "json", "--no-cache", "--select", "ML105,ML000")
    assert result.rc == 1, result.err
    assert "Traceback" not in result.err, result.err
    codes = sorted((f["path"], f["code"], f["line"]) for f in result.json())
    # (strings.py: at the end of the file, where LibCST gave up)
    assert codes == [("chain.py", "ML105", 7), ("longest.py", "ML001", 1),
                     ("strings.py", "ML001", 3)]
    messages = {f["path"]: f["message"] for f in result.json()}
    assert "nested too deeply" in messages["longest.py"]
    assert "valid Python but beyond the limits of modellint's parser" in messages["strings.py"]
    assert messages["longest.py"].endswith("it was not linted")
    assert messages["strings.py"].endswith("it was not linted")


# syntax of Python 3.12 (PEP 695); on 3.12 and later the "unparsable" syntax is that of 3.14
NEWER = "type Alias = int\n" if sys.version_info < (3, 12) else None


@pytest.mark.skipif(NEWER is None, reason="needs syntax newer than this Python")
@pytest.mark.parametrize("select, others", [([], [("ML105", 5)]),
                                            (["--select", "ALL"], [("ML105", 5)]),
                                            (["--select", "ML105"], [("ML105", 5)]),
                                            (["--select", "ML000"], []),
                                            (["--select", "ML2"], [])])
def test_syntax_newer_than_this_python_is_ml000_whatever_is_selected(modellint, tmp_path,
                                                                     select, others):
    # the statement this Python cannot parse is one ML000; the rest is linted as usual
    write(tmp_path, "new.py", GOOD + "\n\n" + NEWER)
    result = modellint("new.py", "--format", "json", "--no-cache", *select)
    assert result.rc == 1, result.err
    assert result.codes() == [*others, ("ML000", 9)]
    assert result.json()[-1]["message"] == "SyntaxError: invalid syntax"


@pytest.mark.skipif(NEWER is None, reason="needs syntax newer than this Python")
@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_fix_says_the_file_does_not_parse_on_this_python(modellint, tmp_path, mode):
    text = GOOD + "\n\n" + NEWER
    path = write(tmp_path, "new.py", text)
    result = modellint("new.py", mode, "--format", "concise")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"new.py: not fixed: the file does not parse on Python {version}" in result.err
    assert "a fix produced invalid code" not in result.err and "Traceback" not in result.err
    if mode == "--fix":
        assert result.rc == 1, result.err
        # ML105's fix waits until the file parses: it would be made on the recovered text
        assert result.out.splitlines()[:2] == [
            "new.py:5:9: ML105 [*] method `forward` of module class `Net` has no `self`; "
            "Python passes the module as its first argument",
            "new.py:9:6: ML000 SyntaxError: invalid syntax"], result.out
    assert path.read_text() == text


CRASHING_RULE = '''\
import os
import signal

from modellint import hookimpl
from modellint.rule import Severity, StaticRule


class Crashes(StaticRule):
    """Kills its process, as a crash in native code does, in files that ask for it."""

    code = "XCR001"
    name = "crashes"
    severity = Severity.WARNING

    def visit_Module(self, node):
        if "CRASH HERE" in self.context.source:
            os.kill(os.getpid(), signal.SIGSEGV)


@hookimpl
def modellint_add_rules():
    return [Crashes]
'''


def test_a_worker_that_dies_is_replaced_and_its_file_reported(modellint, tmp_path):
    write(tmp_path, "crashing.py", CRASHING_RULE)
    src = tmp_path / "src"
    names = [f"m{i}.py" for i in range(8)]
    for i, name in enumerate(names):
        crash = "# CRASH HERE\n" if i in (1, 6) else ""
        write(src, name, crash + GOOD.replace("Net", f"Net{i}"))
    result = modellint("check", "src", "-p", "crashing", "--select", "ML105,XCR",
                       "--format", "json", "--no-cache", "-j", "2",
                       env={"PYTHONPATH": str(tmp_path)})
    assert result.rc == 1, result.err
    assert "Traceback" not in result.err, result.err
    found = {}
    for finding in result.json():
        found.setdefault(finding["path"], []).append(finding)
    assert sorted(found) == [f"src/{name}" for name in names]
    for i, name in enumerate(names):
        codes = [(f["code"], f["line"]) for f in found[f"src/{name}"]]
        if i in (1, 6):
            assert codes == [("ML001", 1)]
            message = found[f"src/{name}"][0]["message"]
            assert "worker process linting this file was killed by SIGSEGV" in message
            assert "not linted" in message
        else:
            assert codes == [("ML105", 5)]


def test_a_large_file_gets_positions_only_around_its_findings(monkeypatch):
    """Item 11: LibCST's positions for every node of a 100,000-line file were half the time and
    a fifth of the memory of linting it. One finding at the end of a file of 2,000 classes
    costs positions for its own class alone, and is reported where it is."""
    from libcst.metadata import MetadataWrapper

    from modellint.config import Config
    from modellint.static.engine import lint_source
    from modellint.testing import registry

    computed = []
    resolve = MetadataWrapper.resolve

    def counting(self, provider):
        found = resolve(self, provider)
        computed.append(len(found))
        return found

    monkeypatch.setattr(MetadataWrapper, "resolve", counting)
    blocks = "".join(
        f"# block {i}\nclass Block{i}(nn.Module):\n    def forward(self, x):\n"
        f"        return x + {i}\n\n\n" for i in range(2000))
    text = "import torch.nn as nn\n\n\n" + blocks + GOOD.replace("import torch.nn as nn\n", "")
    rules = [rule for rule in registry().rules.values() if rule.code == "ML105"]
    result = lint_source("big.py", text.encode(), rules, Config().rule_options())
    forward = text.split("\n").index("    def forward(x):") + 1
    assert [(f.code, f.line, f.column, f.source_line) for f in result.findings] == [
        ("ML105", forward, 9, "    def forward(x):")]
    # the class holds about 60 nodes; the file about 120,000
    assert len(computed) == 1 and computed[0] < 200, computed


# nested deeply (past MAIN_STACK_NESTING where CPython allows it) in each place `nesting` must
# not skip: a function's defaults, a `with` item, a decorator, an `and` chain under blocks, a
# long dotted import, an `except` body
DEEP_BUT_PYTHON = [
    "def f(x=" + " + ".join(["1"] * 1500) + "):\n    pass\n",
    "with open(" + " + ".join(["a"] * 1600) + ") as f:\n    pass\n",
    "@d(" + "-" * 1400 + "x)\nclass C:\n    pass\n",
    "if x:\n    for y in z:\n        r = " + " and ".join(["a"] * 3100) + "\n",
    "import " + ".".join(["a"] * 3100) + "\n",
    "try:\n    pass\nexcept E:\n    y = " + "not " * 1400 + "x\n",
]


@pytest.mark.parametrize("shallow", [3000, 40, 12, 5])
@pytest.mark.parametrize("source", [
    *DEEP_BUT_PYTHON, GOOD, "x = {'a': [1, (2, {3})], **y}\nprint(f'{x!r:>{w}}')\n",
    "match p:\n    case [1, {'k': (a, *b)}] if a and b:\n        pass\n",
])
def test_nesting_is_exact_past_the_shallow_limit(source, shallow):
    # what decides that a file is parsed in a thread with a large stack: never less than the
    # real depth when that is past the limit, whatever the statements it skips
    from modellint.static.outline import exact_nesting, nesting

    tree = ast.parse(source)
    exact = exact_nesting(tree)
    found = nesting(tree, source, shallow)
    if exact > shallow:
        assert found == exact
    else:
        assert found <= shallow


def test_nesting_of_the_fixtures_is_exact_past_small_limits():
    from conftest import TESTS

    from modellint.static.outline import exact_nesting, nesting

    for path in sorted((TESTS.parent / "fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        exact = exact_nesting(tree)
        for shallow in (30, 15, 8):
            found = nesting(tree, text, shallow)
            assert found == exact if exact > shallow else found <= shallow, (path, shallow)


def test_nodes_built_after_a_parse_are_still_checked():
    # the parse skips LibCST's node checks for speed; a node a fix builds afterwards is checked
    import libcst as cst

    from modellint.static.parse import parse_with_libcst

    module = parse_with_libcst("x = 1\n")
    assert module.code == "x = 1\n"
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")
