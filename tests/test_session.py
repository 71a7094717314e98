"""The application layer (`modellint.session`): settings resolved once, from the configuration
as loaded and the caller's overrides, into a frozen object; use cases that return results."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import NET, write

from modellint.config import ConfigError, load_config, select_codes
from modellint.session import CheckOptions, Overrides, Session, Settings, UsageError
from modellint.testing import registry


def test_one_selection_default_select_extend_ignore():
    rules = registry().rules
    default = select_codes(rules, None)
    assert "ML101" in default and all(rules[code].default_enabled for code in default)
    assert select_codes(rules, ["ML10"]) == {code for code in rules if code.startswith("ML10")}
    assert select_codes(rules, ["ML101"], ["ML105"], ["ML101"]) == {"ML105"}
    assert select_codes(rules, ["ALL"], (), ["ML"]) == set()


def test_the_loaded_configuration_is_not_changed(tmp_path):
    path = write(tmp_path, "pyproject.toml", '[tool.modellint]\nselect = ["ML101"]\n'
                 'ignore = ["ML103"]\n[tool.modellint.per-file-ignores]\n'
                 '"a.py" = ["module-in-plain-container"]\n')
    loaded = load_config(path)
    before = dataclasses.replace(loaded, per_file_ignores=dict(loaded.per_file_ignores))
    settings = Settings.resolve(loaded, registry(), Overrides(
        extend_select=("method-missing-self", "ML102"), ignore=("ML102",),
        max_code_bytes=1000))
    assert loaded == before
    assert loaded.per_file_ignores == {"a.py": ["module-in-plain-container"]}
    # the resolved copy: names as codes, the overrides merged in
    assert settings.config.per_file_ignores == {"a.py": ["ML101"]}
    assert settings.config.extend_select == ["ML105", "ML102"]
    assert settings.config.ignore == ["ML103", "ML102"]
    assert settings.config.max_code_bytes == 1000
    assert settings.enabled == {"ML101", "ML105"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.enabled = frozenset()  # type: ignore[misc]


def test_an_unknown_selector_is_blamed_on_whoever_gave_it(tmp_path):
    loaded = load_config(write(tmp_path, "pyproject.toml", '[tool.modellint]\n'
                               'select = ["ML9999"]\n'))
    with pytest.raises(ConfigError, match="pyproject.toml: unknown rule code `ML9999`"):
        Settings.resolve(loaded, registry())
    with pytest.raises(ConfigError, match="the command line: unknown rule code `ML8888`"):
        Settings.resolve(load_config(None), registry(), Overrides(ignore=("ML8888",)))


def test_check_returns_the_findings_and_prints_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "net.py", NET)
    session = Session.open(Overrides(select=("ML101", "ML105")), "net.py")
    result = session.check(["net.py"], CheckOptions(cache=False))
    assert [(f.code, f.line) for f in result.findings] == [("ML101", 8), ("ML105", 11)]
    assert capsys.readouterr() == ("", "")


def test_rule_docs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session = Session.open(select=False)
    assert [rule.code for rule in session.rule_docs("ml101")] == ["ML101"]
    assert len(session.rule_docs()) == len(registry().rules)
    with pytest.raises(UsageError, match="did you mean `ML101`"):
        session.rule_docs("ML1O1x")
