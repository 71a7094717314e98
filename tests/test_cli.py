"""The command line, run for real: commands, exit codes, formats, selection, errors."""

from __future__ import annotations

import re

from conftest import CLEAN, NET, write

JSON_KEYS = {
    "code", "name", "message", "severity", "path", "line", "column", "end_line", "end_column",
    "cell", "fixable", "fix", "pass",
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_bare_paths_mean_check(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    bare = cli("net.py")
    check = cli("check", "net.py")
    assert bare.rc == check.rc == 1, bare
    assert bare.out == check.out
    assert "net.py:11:9: ML105" in bare.out


def test_no_findings_is_exit_0(cli, tmp_path):
    write(tmp_path, "clean.py", CLEAN)
    result = cli("clean.py")
    assert result.rc == 0, result
    assert "All checks passed" in result.out


def test_no_path_lints_the_working_directory(cli, tmp_path):
    write(tmp_path, "pkg/net.py", NET)
    result = cli("--format", "concise", "--select", "ML105", "-q")
    assert result.rc == 1
    assert result.out.splitlines() == [
        "pkg/net.py:11:9: ML105 [*] method `forward` of module class `Net` has no `self`; "
        "Python passes the module as its first argument"
    ]


def test_nonexistent_path_is_exit_2(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "missing.py")
    assert result.rc == 2
    assert "missing.py" in result.err and "does not exist" in result.err
    assert result.out == ""


def test_version(modellint):
    import modellint as package

    result = modellint("--version")
    assert result.rc == 0
    assert result.out.strip() == f"modellint {package.__version__}"


def test_console_script_matches_python_m(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("modellint")
    write(tmp_path, "net.py", NET)
    proc = subprocess.run([str(script), "net.py", "--format", "concise"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "net.py:11:9: ML105" in proc.stdout


def test_unknown_option_is_exit_2(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--no-such-option")
    assert result.rc == 2
    assert "--no-such-option" in result.err
    assert "Traceback" not in result.err


def test_text_format_shows_the_source_line_with_carets_and_a_summary(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--color", "never")
    assert result.rc == 1
    lines = result.out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("net.py:11:9: ML105")))
    assert lines[head + 2] == "11 |     def forward(x):"
    assert lines[head + 3] == "   |         ^^^^^^^"  # under `forward`
    assert "Found 3 findings in 1 file" in result.out
    assert not ANSI.search(result.out)


def test_concise_format_is_one_line_per_finding(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--format", "concise", "--quiet")
    assert result.rc == 1
    lines = result.out.splitlines()
    assert [line.split(" ")[:2] for line in lines] == [
        ["net.py:8:9:", "ML101"], ["net.py:9:9:", "ML103"], ["net.py:11:9:", "ML105"],
    ]


def test_json_format(cli, tmp_path):
    write(tmp_path, "b.py", NET)
    write(tmp_path, "a/z.py", NET)
    write(tmp_path, "a/y.py", "x = (\n")
    result = cli("b.py", "a", "--format", "json")
    assert result.rc == 1
    findings = result.json()
    assert all(set(f) == JSON_KEYS for f in findings)
    # sorted by path, line, column, code whatever order the paths were given in
    keys = [(f["path"], f["line"], f["column"], f["code"]) for f in findings]
    assert keys == sorted(keys)
    assert [f["path"] for f in findings] == ["a/y.py"] + ["a/z.py"] * 3 + ["b.py"] * 3
    ml105 = next(f for f in findings if f["code"] == "ML105" and f["path"] == "b.py")
    assert ml105 == {
        "code": "ML105", "name": "method-missing-self", "message": ml105["message"],
        "severity": "error", "path": "b.py", "line": 11, "column": 9, "end_line": 11,
        "end_column": 16, "cell": None, "fixable": True, "pass": "static",
        "fix": {"applicability": "safe", "message": ml105["fix"]["message"]},
    }
    # ruff's JSON shape: an unsafe fix says so, a finding without a fix has `"fix": null`
    ml101 = next(f for f in findings if f["code"] == "ML101" and f["path"] == "b.py")
    assert ml101["fix"]["applicability"] == "unsafe" and ml101["fix"]["message"]
    assert "`forward`" in ml105["message"]
    ml103 = next(f for f in findings if f["code"] == "ML103")
    assert ml103["fixable"] is False and ml103["fix"] is None
    # JSON has no summary line, even without --quiet
    assert result.out.lstrip().startswith("[") and result.out.rstrip().endswith("]")


def test_json_format_with_nothing_found_is_an_empty_array(cli, tmp_path):
    write(tmp_path, "clean.py", CLEAN)
    result = cli("clean.py", "--format", "json")
    assert result.rc == 0
    assert result.json() == []


def test_unknown_format_is_exit_2(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--format", "xml")
    assert result.rc == 2
    assert "xml" in result.err


def test_output_file(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--format", "json", "--output-file", "out.json")
    assert result.rc == 1
    assert result.out == ""
    import json

    data = json.loads((tmp_path / "out.json").read_text())
    assert [(f["code"], f["line"]) for f in data] == [("ML101", 8), ("ML103", 9), ("ML105", 11)]


def test_exit_zero(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--exit-zero", "--format", "concise")
    assert result.rc == 0
    assert "ML105" in result.out


def test_statistics(cli, tmp_path):
    write(tmp_path, "one.py", NET)
    write(tmp_path, "two.py", NET.replace("self.tens = torch.ones(3, 4)", "pass"))
    result = cli("one.py", "two.py", "--statistics", "--format", "concise", "-q")
    assert result.rc == 1
    stats = [line.split("\t") for line in result.out.splitlines()]
    counts = {row[1]: int(row[0]) for row in stats}
    assert counts == {"ML101": 2, "ML105": 2, "ML103": 1}
    # most frequent first, the table alone (as ruff prints it), with the fixable counts
    assert [row[1] for row in stats][-1] == "ML103"
    assert {row[1]: row[2] for row in stats}["ML105"] == "[*] method-missing-self (2 fixable)"
    assert cli("one.py", "two.py", "--statistics").out == result.out


def test_quiet_drops_the_summary(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    write(tmp_path, "clean.py", CLEAN)
    loud = cli("net.py", "--format", "concise")
    quiet = cli("net.py", "--format", "concise", "--quiet")
    assert "Found 3 findings" in loud.out
    assert "Found" not in quiet.out
    assert quiet.out.splitlines() == loud.out.splitlines()[:3]
    assert cli("clean.py", "-q").out == ""


def test_color(modellint, tmp_path):
    write(tmp_path, "net.py", NET)
    always = modellint("net.py", "--color", "always")
    never = modellint("net.py", "--color", "never", env={"FORCE_COLOR": "1"})
    auto = modellint("net.py")  # stdout is a pipe: no colour
    assert ANSI.search(always.out)
    assert not ANSI.search(never.out)
    assert not ANSI.search(auto.out)
    assert ANSI.sub("", always.out) == never.out == auto.out


def test_select_prefix_all_extend_select_and_ignore(cli, tmp_path):
    write(tmp_path, "net.py", NET)

    def codes(*args):
        result = cli("net.py", "--format", "json", *args)
        return sorted({f["code"] for f in result.json()}), result.rc

    assert codes() == (["ML101", "ML103", "ML105"], 1)
    assert codes("--select", "ML105") == (["ML105"], 1)
    assert codes("--select", "ML10") == (["ML101", "ML103", "ML105"], 1)
    assert codes("--select", "ml101,ML103") == (["ML101", "ML103"], 1)
    assert codes("--select", "ALL", "--ignore", "ML1") == ([], 0)
    assert codes("--ignore", "ML101,ML105") == (["ML103"], 1)
    assert codes("--select", "ML105", "--extend-select", "ML103") == (["ML103", "ML105"], 1)
    assert codes("--select", "ML000") == ([], 0)


def test_select_all_enables_rules_that_are_off_by_default(cli, tmp_path):
    from modellint.rule import StaticRule
    from modellint.testing import registry

    rule = next(
        r for _, r in sorted(registry().rules.items())
        if not r.default_enabled and issubclass(r, StaticRule) and r.invalid
    )
    example = rule.invalid[0]
    (tmp_path / "example.py").write_text(example.code)
    default = cli("example.py", "--format", "json")
    everything = cli("example.py", "--format", "json", "--select", "ALL")
    assert (rule.code, example.line) not in default.codes()
    assert (rule.code, example.line) in everything.codes()
    row = next(line for line in cli("rules").out.splitlines() if line.startswith(rule.code))
    assert row.split()[3] == "off"


def test_unknown_rule_code_on_the_command_line_is_exit_2(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    for option in ("--select", "--extend-select", "--ignore"):
        result = cli("net.py", option, "XY9")
        assert result.rc == 2, (option, result)
        assert "XY9" in result.err and "command line" in result.err
        assert result.out == ""


def test_syntax_error_is_ml000_and_other_files_are_still_linted(cli, tmp_path):
    write(tmp_path, "a_broken.py", "import torch\n\ndef f(:\n    pass\n")
    write(tmp_path, "b_net.py", NET)
    result = cli(".", "--format", "json")
    assert result.rc == 1
    findings = result.json()
    broken = [f for f in findings if f["path"] == "a_broken.py"]
    assert [(f["code"], f["line"], f["column"]) for f in broken] == [("ML000", 3, 7)]
    assert "SyntaxError" in broken[0]["message"]
    assert [(f["code"], f["line"]) for f in findings if f["path"] == "b_net.py"] == [
        ("ML101", 8), ("ML103", 9), ("ML105", 11),
    ]


def test_syntax_error_alone_is_exit_1(cli, tmp_path):
    write(tmp_path, "broken.py", "x = (\n")
    result = cli("broken.py", "--format", "concise", "-q")
    assert result.rc == 1
    assert result.out.startswith("broken.py:1:5: ML000 ")


RAISING_PLUGIN = '''\
import libcst as cst

from modellint import hookimpl
from modellint.rule import StaticRule


class Explodes(StaticRule):
    """Always fails.

    ## What it does
    Nothing.

    ## Why is this bad?
    It is not.

    ## Example
        x = 1

    ## Use instead
        x = 1
    """

    code = "XBM001"
    name = "explodes"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        raise ValueError("kaboom in " + node.name.value)


@hookimpl
def modellint_add_rules():
    return [Explodes]
'''


def test_a_failing_rule_is_ml001_naming_the_rule(modellint, tmp_path):
    write(tmp_path, "explode.py", RAISING_PLUGIN)
    write(tmp_path, "net.py", NET)
    result = modellint("-p", "explode", "net.py", "--format", "json")
    assert result.rc == 1
    findings = result.json()
    internal = [f for f in findings if f["code"] == "ML001"]
    assert len(internal) == 1
    assert "XBM001" in internal[0]["message"] and "kaboom in Net" in internal[0]["message"]
    # the other rules still ran on the file
    assert {f["code"] for f in findings} >= {"ML101", "ML103", "ML105"}
    assert "Traceback" not in result.err

    debug = modellint("-p", "explode", "net.py", "--format", "json", "--debug")
    assert "Traceback (most recent call last)" in debug.err
    assert "kaboom in Net" in debug.err


def test_rules_lists_every_code(cli):
    from modellint.testing import registry

    result = cli("rules")
    assert result.rc == 0
    lines = result.out.splitlines()
    assert lines[0].split() == ["code", "name", "pass", "default", "fix"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    rules = registry().rules
    assert set(rows) == set(rules)
    for code, rule in rules.items():
        # `unsafe (sometimes)`: not every finding gets the fix
        fix = rule.fix_label().split()
        expected = [code, rule.name, "+".join(rule.passes),
                    "on" if rule.default_enabled else "off", *fix]
        assert rows[code] == expected
    assert rows["ML105"][1:] == ["method-missing-self", "static", "on", "safe"]
    assert rows["ML101"][-2:] == ["unsafe", "(sometimes)"]
    assert rows["ML103"][3] == "on" and len(rows["ML103"]) == 4  # not fixable


def test_rule_shows_documentation_and_examples(cli):
    result = cli("rule", "ml105")  # codes are case-insensitive
    assert result.rc == 0
    out = result.out
    assert out.startswith("# ML105 method-missing-self")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in out
    assert "Fix: safe" in out
    assert "class Net(nn.Module):\n    def forward(x):" in out  # an invalid example
    assert "@staticmethod" in out  # a valid example


def test_rule_with_unknown_code_is_exit_2(cli):
    result = cli("rule", "ML999")
    assert result.rc == 2
    assert "ML999" in result.err
    assert result.out == ""
