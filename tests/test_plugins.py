"""Plugins: the example package installed by pip (entry point), `-p MODULE`, and load errors."""

from __future__ import annotations

import pytest
from conftest import write

PRINTS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        print(x.shape)
        return self.fc(x)
"""


def test_example_plugin_rule_runs_from_its_entry_point(modellint, tmp_path, example_plugin):
    write(tmp_path, "net.py", PRINTS)
    env = {"PYTHONPATH": str(example_plugin)}
    result = modellint("net.py", "--format", "json", env=env)
    assert result.rc == 1, result
    [finding] = result.json()
    assert finding["code"] == "XMP101"
    assert finding["name"] == "print-in-forward"
    assert finding["severity"] == "warning"
    assert (finding["line"], finding["column"]) == (10, 9)
    assert "Net.forward" in finding["message"]
    # selected, by code or prefix, and ignored like a built-in rule
    assert modellint("net.py", "--select", "XMP", "--format", "json", env=env).codes() == [
        ("XMP101", 10)
    ]
    ignored = modellint("net.py", "--ignore", "XMP101", env=env)
    assert ignored.rc == 0, ignored
    assert modellint("net.py", "--select", "ML1", env=env).rc == 0
    # noqa works for plugin codes too
    (tmp_path / "net.py").write_text(PRINTS.replace("print(x.shape)", "print(x.shape)  # noqa: XMP101"))
    assert modellint("net.py", env=env).rc == 0
    # without the plugin on the path the code is unknown
    unknown = modellint("net.py", "--select", "XMP101")
    assert unknown.rc == 2 and "XMP101" in unknown.err


def test_example_plugin_is_listed_and_documented(modellint, example_plugin):
    env = {"PYTHONPATH": str(example_plugin)}
    listed = modellint("rules", env=env)
    assert listed.rc == 0
    row = next(line for line in listed.out.splitlines() if line.startswith("XMP101"))
    assert row.split() == ["XMP101", "print-in-forward", "static", "on"]
    doc = modellint("rule", "XMP101", env=env)
    assert doc.rc == 0, doc
    assert doc.out.startswith("# XMP101 print-in-forward")
    assert "## Why is this bad?" in doc.out
    assert "print(x.shape)" in doc.out  # a flagged example
    assert "from rich import print" in doc.out  # a valid example


def test_example_plugin_passes_its_own_examples(example_plugin, monkeypatch):
    # the same checks tests/test_rule_examples.py runs on every registered rule
    import sys
    import textwrap

    from modellint.testing import check_examples, lint_text

    monkeypatch.syspath_prepend(str(example_plugin))
    monkeypatch.delitem(sys.modules, "modellint_example", raising=False)
    monkeypatch.delitem(sys.modules, "modellint_example.rules", raising=False)
    from modellint_example.rules import PrintInForward

    check_examples(PrintInForward)
    for example in PrintInForward.invalid:
        lines = [f.line for f in lint_text(textwrap.dedent(example.code), [PrintInForward])]
        assert lines == [example.line], example.code


LOCAL_PLUGIN = '''\
import libcst as cst

from modellint import hookimpl
from modellint.rule import StaticRule


class NoGlobal(StaticRule):
    """Flags `global`."""

    code = "LOC001"
    name = "no-global"

    def visit_Global(self, node: cst.Global) -> None:
        self.report(node, "`global` statement; pass the value instead")


@hookimpl
def modellint_add_rules():
    return [NoGlobal]
'''


def test_dash_p_loads_a_local_module(modellint, tmp_path):
    # `python -m modellint` (this fixture) has the current folder on the path by Python's own
    # rule; the `modellint` command does not (tests/test_trust.py)
    write(tmp_path, "localrules.py", LOCAL_PLUGIN)
    write(tmp_path, "code.py", "def f():\n    global x\n    x = 1\n")
    result = modellint("-p", "localrules", "code.py", "--format", "json")
    assert result.rc == 1
    assert result.codes() == [("LOC001", 2)]
    listed = modellint("rules", "-p", "localrules")
    assert any(line.startswith("LOC001") for line in listed.out.splitlines())
    assert modellint("rule", "LOC001", "-p", "localrules").rc == 0
    assert modellint("code.py").rc == 0  # not loaded unless asked for


def test_a_plugin_that_fails_to_import_is_exit_2_naming_it(modellint, tmp_path):
    write(tmp_path, "brokenplugin.py", "import a_module_that_does_not_exist\n")
    write(tmp_path, "code.py", "x = 1\n")
    for args in (["-p", "brokenplugin", "code.py"], ["-p", "no_such_plugin", "code.py"]):
        result = modellint(*args)
        assert result.rc == 2, result
        assert repr(args[1]) in result.err and "failed to load" in result.err
        assert "Traceback" not in result.err
    # a plugin named by the config is imported (and can fail) only when the user opts in
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nplugins = ["brokenplugin"]\n')
    skipped = modellint("code.py")
    assert skipped.rc == 0 and "not loading plugin 'brokenplugin'" in skipped.err, skipped
    result = modellint("code.py", "--allow-config-plugins")
    assert result.rc == 2 and "'brokenplugin'" in result.err and "failed to load" in result.err


def test_a_hook_marked_with_an_unknown_option_is_exit_2_naming_the_plugin(modellint, tmp_path):
    """`@hookimpl` marks for pluggy when the plugin is registered: an option pluggy does not
    know is the plugin's load error, as it was when the mark was made on import."""
    write(tmp_path, "typoplugin.py",
          "from modellint import hookimpl\n\n\n@hookimpl(tryFirst=True)\n"
          "def modellint_add_rules():\n    return []\n")
    write(tmp_path, "code.py", "x = 1\n")
    result = modellint("-p", "typoplugin", "code.py")
    assert result.rc == 2 and "'typoplugin' failed to load" in result.err, result
    assert "tryFirst" in result.err and "Traceback" not in result.err


def test_a_plugin_registering_an_existing_code_is_exit_2_naming_it(modellint, tmp_path):
    write(tmp_path, "dupplugin.py", """\
        from modellint import hookimpl
        from modellint.rules.registration import MethodMissingSelf


        @hookimpl
        def modellint_add_rules():
            return [MethodMissingSelf]
        """)
    write(tmp_path, "code.py", "x = 1\n")
    result = modellint("-p", "dupplugin", "code.py")
    assert result.rc == 2
    assert "'dupplugin'" in result.err and "ML105" in result.err
    assert "already" in result.err


def test_a_broken_installed_plugin_is_exit_2_naming_it(modellint, tmp_path):
    # an installed distribution whose entry point cannot be imported
    site = tmp_path / "site"
    dist = site / "badplugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: badplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[modellint]\nbad = badplugin_mod.rules\n")
    write(tmp_path, "code.py", "x = 1\n")
    result = modellint("code.py", env={"PYTHONPATH": str(site)})
    assert result.rc == 2
    assert "'bad'" in result.err and "badplugin_mod" in result.err


DOUBLE = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2).double()

    def forward(self, x):
        return self.head(self.body(x).double())
"""


def test_example_plugin_runtime_rule_runs_in_the_runtime_pass(modellint, tmp_path, example_plugin):
    # a plugin's runtime rule: registered by the same hook, run by the worker, selected and
    # ignored like a built-in one
    pytest.importorskip("torch")
    write(tmp_path, "net.py", DOUBLE)
    env = {"PYTHONPATH": str(example_plugin)}
    result = modellint("check", "net.py", "--runtime", "--select", "XMP7", "--format", "json",
                       env=env)
    assert result.rc == 1, result
    [finding] = result.json()
    assert (finding["code"], finding["line"], finding["pass"]) == ("XMP701", 8, "runtime")
    assert finding["name"] == "double-precision-module"
    assert "`head`" in finding["message"] and "float64" in finding["message"]
    ignored = modellint("check", "net.py", "--runtime", "--select", "XMP", "--ignore", "XMP701",
                        env=env)
    assert ignored.rc == 0, ignored
    # without --runtime it does not run
    assert modellint("check", "net.py", "--select", "XMP701", env=env).rc == 0


def test_example_plugin_runtime_rule_is_listed_documented_and_passes_its_examples(
        modellint, example_plugin, monkeypatch):
    pytest.importorskip("torch")
    env = {"PYTHONPATH": str(example_plugin)}
    listed = modellint("rules", env=env)
    row = next(line for line in listed.out.splitlines() if line.startswith("XMP701"))
    assert row.split() == ["XMP701", "double-precision-module", "runtime", "on"]
    doc = modellint("rule", "XMP701", env=env)
    assert doc.rc == 0 and doc.out.startswith("# XMP701 double-precision-module"), doc
    assert ".double()" in doc.out
    # the harness tests/test_runtime_examples.py runs on every registered runtime check
    import sys

    from modellint.runtime.examples import check_example

    monkeypatch.syspath_prepend(str(example_plugin))
    monkeypatch.delitem(sys.modules, "modellint_example", raising=False)
    monkeypatch.delitem(sys.modules, "modellint_example.rules", raising=False)
    from modellint_example.rules import DoublePrecisionModule

    for example in DoublePrecisionModule.valid:
        assert check_example(example, DoublePrecisionModule) == [], example
    for example in DoublePrecisionModule.invalid:
        lines = [f.line for f in check_example(example.code, DoublePrecisionModule)]
        assert lines == [example.line], example.code


def _built_in_manifest(tmp_path):
    """(the registry of the built-in plugins, the registry its saved manifest gives)."""
    from modellint.plugins import light_registry, load_registry, save_manifest
    from modellint.static.cache import Cache

    registry = load_registry(entry_points=False)
    store = Cache(tmp_path / "cache", "settings", key_directory=tmp_path / "key")
    assert store.prepare()
    save_manifest(store, registry)
    light = light_registry(store)
    assert light is not None
    return registry, light


def test_a_run_from_the_manifest_imports_the_same_built_in_rule_classes(tmp_path):
    """A file that misses the cache of a run whose plugins came from the manifest imports the
    built-in rules where the manifest says they live: the very classes the plugins register.
    A rule of another plugin in the run makes it load the plugins as usual."""
    from modellint.plugins import RuleInfo, builtin_rule_classes

    registry, light = _built_in_manifest(tmp_path)
    infos = list(light.rules.values())
    assert builtin_rule_classes(infos) == [registry.rules[info.code] for info in infos]
    other = RuleInfo("XMP101", "no-print", True, ("static",), True, "modellint_example.rules", "NoPrint")
    assert builtin_rule_classes([*infos, other]) is None


def test_a_run_imports_only_the_rule_modules_that_can_run_on_its_files(tmp_path):
    """Given the texts a run lints, the manifest's rules whose `triggers` occur in none of
    them are left out, module by module (the engine would skip them), and those modules are
    not imported; a module with a rule that runs on every file always is."""
    import json
    import subprocess
    import sys

    from modellint.plugins import builtin_rule_classes

    registry, light = _built_in_manifest(tmp_path)
    infos = [info for info in light.rules.values() if info.static]
    by_module: dict[str, list] = {}
    for info in infos:
        by_module.setdefault(info.module, []).append(info)

    def runnable(text: str) -> set[str]:
        return {info.code for module in by_module.values()
                if any(not i.triggers or any(word in text for word in i.triggers) for i in module)
                for info in module}

    text = "import torch\n\nx = torch.ones(3)\n"
    kept = builtin_rule_classes(infos, [text])
    assert kept is not None and {rule.code for rule in kept} == runnable(text)
    # what was found of a word in one text is not taken for another's
    wider = text + "import torch.nn as nn\nlayer = nn.Dropout(0.5)\nscheduler.step()\n"
    assert runnable(wider) > runnable(text)
    assert {rule.code for rule in builtin_rule_classes(infos, [wider]) or []} == runnable(wider)
    assert builtin_rule_classes(infos, [text]) == kept
    left_out = {module for module, rules in by_module.items()
                if all(i.triggers and not any(w in text for w in i.triggers) for i in rules)}
    assert left_out and not left_out & {rule.__module__ for rule in kept}
    assert builtin_rule_classes(infos, [text, "import numpy"]) == kept
    assert [r.code for r in builtin_rule_classes(infos, [])] == [  # type: ignore[union-attr]
        i.code for i in infos if any(not j.triggers for j in by_module[i.module])]
    assert builtin_rule_classes(infos) == [registry.rules[info.code] for info in infos]
    # a left-out module is not imported by the run (a fresh process)
    rows = json.dumps([[i.code, i.name, i.default_enabled, list(i.passes), i.static, i.module,
                        i.qualname, sorted(i.needs or ()), list(i.triggers)] for i in infos])
    probe = ("import json, sys\nfrom modellint.plugins import RuleInfo, builtin_rule_classes\n"
             f"infos = [RuleInfo(*row[:7], frozenset(row[7]), tuple(row[8])) "
             f"for row in json.loads({rows!r})]\n"
             f"builtin_rule_classes(infos, [{text!r}])\n"
             f"print(sorted(m for m in {sorted(left_out)!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
