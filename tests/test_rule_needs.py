"""What a static rule declares it reads (`StaticRule.needs`: "scope", "semantic", "project"),
and what a run builds for it: the project index only when an enabled rule reads the project's
other files. A rule that reads what it did not declare fails, and its examples say so."""

from __future__ import annotations

import libcst as cst
import pytest
from conftest import write
from test_cache import NOT_CI, cache_env

from modellint.rule import Invalid, StaticRule
from modellint.static.needs import NEEDS, needs_of
from modellint.testing import check_examples, lint_project, lint_text, registry

MODELS = """\
import torch.nn as nn


class Block(nn.Module):
    def forward(self, x):
        return x
"""
# ML105 knows `Net` is a module class only from models.py; ML901 reads this file alone
TRAIN = """\
import torch
from torch.autograd import Variable

from models import Block


class Net(Block):
    def forward(x):
        return x


x = Variable(torch.ones(3))
"""


def _facts(tmp_path):
    """The project facts a run kept in the cache: what building the project index writes."""
    return list((tmp_path / "cache").glob("*/facts/*.json"))


def _project(tmp_path):
    write(tmp_path, "models.py", MODELS)
    write(tmp_path, "train.py", TRAIN)
    return {**cache_env(tmp_path), **NOT_CI}


def test_a_selection_that_reads_no_other_file_builds_no_index(cli, tmp_path):
    env = _project(tmp_path)
    alone = cli("--select", "ML901", "--format", "json", ".", env=env)
    assert alone.codes() == [("ML901", 12)], alone
    assert _facts(tmp_path) == []
    # served from the cache (the plugins' manifest, no rule imported): still no index
    assert cli("--select", "ML901", "--format", "json", ".", env=env).json() == alone.json()
    assert _facts(tmp_path) == []
    # beside a rule that reads the project: the index is built, and ML901 finds the same
    both = cli("--select", "ML901,ML105", "--format", "json", ".", env=env)
    assert both.codes() == [("ML105", 8), ("ML901", 12)], both
    assert [f for f in both.json() if f["code"] == "ML901"] == alone.json()
    assert _facts(tmp_path) != []


def test_per_file_ignores_that_turn_off_every_project_rule_build_no_index(cli, tmp_path):
    env = _project(tmp_path)
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nselect = ["ML105", "ML901"]\n'
                                      '[tool.modellint.per-file-ignores]\n"*.py" = ["ML105"]\n')
    assert cli("--format", "json", ".", env=env).codes() == [("ML901", 12)]
    assert _facts(tmp_path) == []


def test_a_rule_that_declares_project_sees_another_files_class():
    rule = registry().rules["ML105"]
    assert "project" in rule.needs
    found = lint_project({"models.py": MODELS, "train.py": TRAIN}, [rule])
    assert [(f.code, f.line) for f in found["train.py"]] == [("ML105", 8)]
    # the file alone: `Block` is unknown, and so is whether `Net` is a module
    assert lint_text(TRAIN, [rule], path="train.py") == []


class _Undeclared(StaticRule):
    """Test rule: reports every class a module class, declaring nothing.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML993"
    name = "undeclared"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.context.is_module_class(node):
            self.report(node.name, "a module class")


def test_a_rule_that_declares_nothing_gets_everything():
    assert needs_of(_Undeclared) == NEEDS
    found = lint_project({"models.py": MODELS, "train.py": TRAIN}, [_Undeclared])
    assert [(f.code, f.line) for f in found["train.py"]] == [("ML993", 7)]


class _ReadsModulesUndeclared(_Undeclared):
    """Test rule: reports every module class, declaring only the scopes.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML994"
    name = "reads-modules-undeclared"
    needs = frozenset({"scope"})
    valid = ["class Plain:\n    pass\n"]
    invalid = [Invalid("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n", line=3)]


class _ReadsSemanticUndeclared(StaticRule):
    """Test rule: asks the semantic model what a call returns, declaring only the project.

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    """

    code = "ML995"
    name = "reads-semantic-undeclared"
    needs = frozenset({"project"})
    valid = ["print(1)\n"]
    invalid = [Invalid("import torch\n\nx = torch.ones(3)\n", line=3)]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.semantic.kind(node) is not None:
            self.report(node, "a known value")


@pytest.mark.parametrize(("rule", "need"), [(_ReadsModulesUndeclared, "project"),
                                            (_ReadsSemanticUndeclared, "semantic")])
def test_the_example_harness_catches_a_wrong_declaration(rule, need):
    with pytest.raises(AssertionError, match=f"does not declare it: add '{need}'"):
        check_examples(rule)
    # declared, the same rule passes its examples
    check_examples(type(rule.__name__, (rule,), {"needs": rule.needs | {need},
                                                 "__doc__": rule.__doc__}))


def test_a_wrong_declaration_fails_in_a_run_too_rather_than_depend_on_other_rules():
    # beside a rule that reads the project, it would see the index; it fails the same way
    found = lint_project({"models.py": MODELS, "train.py": TRAIN},
                         [_ReadsModulesUndeclared, registry().rules["ML105"]])
    failures = [f.message for f in found["train.py"] if f.code == "ML001"]
    assert len(failures) == 1 and "ML994 reads `context.is_module_class`" in failures[0]


def test_needs_are_known_words_in_a_frozenset():
    for needs in (frozenset({"projects"}), {"scope"}, "scope"):
        with pytest.raises(TypeError, match="needs must be a frozenset of"):
            type("Bad", (StaticRule,), {"needs": needs})


def test_every_built_in_static_rule_declares_its_needs():
    for code, rule in registry().rules.items():
        if not (isinstance(rule, type) and issubclass(rule, StaticRule)):
            continue
        declared = next((klass for klass in rule.__mro__ if "needs" in vars(klass)), None)
        assert declared is not None and declared is not StaticRule, (
            f"{code} declares no `needs`: it would get (and build) everything")


def test_the_plugins_manifest_keeps_what_each_rule_needs(tmp_path):
    """A warm run reads the manifest, not the rules: it decides from it whether to build the
    index."""
    from modellint.plugins import light_registry, save_manifest
    from modellint.static.cache import manifest_store
    from modellint.static.needs import project_codes

    rules = registry().rules
    store = manifest_store({"XDG_CACHE_HOME": str(tmp_path)})
    save_manifest(store, registry())
    light = light_registry(store)
    assert light is not None
    assert light.rules["ML105"].needs == needs_of(rules["ML105"]) == {"project"}
    assert light.rules["ML901"].needs == frozenset()
    static = [rule for rule in rules.values()
              if isinstance(rule, type) and issubclass(rule, StaticRule)]
    assert project_codes(light.rules[rule.code] for rule in static) == project_codes(static)
