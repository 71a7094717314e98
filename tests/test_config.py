"""`[tool.modellint]` in pyproject.toml: discovery, precedence, errors that name key and file."""

from __future__ import annotations

from conftest import NET, write


def _config(root, body: str):
    return write(root, "pyproject.toml", "[tool.modellint]\n" + body)


def test_the_nearest_pyproject_above_each_file_wins(cli, tmp_path):
    # the working directory has its own config; the one beside the linted code is used
    _config(tmp_path, 'select = ["ML101"]\n')
    _config(tmp_path / "project", 'select = ["ML105"]\n')
    write(tmp_path, "project/src/pkg/net.py", NET)
    # a pyproject.toml without [tool.modellint] in between is skipped
    write(tmp_path, "project/src/pyproject.toml", '[project]\nname = "x"\n')
    result = cli("project/src/pkg/net.py", "--format", "json")
    assert result.codes() == [("ML105", 11)]
    # with no path, the working directory's config applies to the files it governs
    write(tmp_path, "net.py", NET)
    found = cli("--format", "json").json()
    assert sorted((f["path"], f["code"]) for f in found) == [
        ("net.py", "ML101"), ("project/src/pkg/net.py", "ML105")]


def test_command_line_wins_over_config(cli, tmp_path):
    _config(tmp_path, 'select = ["ML105"]\nignore = ["ML103"]\n')
    write(tmp_path, "net.py", NET)
    assert cli("net.py", "--format", "json").codes() == [("ML105", 11)]
    assert cli("net.py", "--format", "json", "--select", "ML101").codes() == [("ML101", 8)]
    # --ignore adds to the config's ignore; --extend-select adds to its select
    assert cli("net.py", "--format", "json", "--extend-select", "ML101").codes() == [
        ("ML101", 8), ("ML105", 11),
    ]
    assert cli("net.py", "--format", "json", "--ignore", "ML105").rc == 0


def test_extend_select_and_ignore_in_config(cli, tmp_path):
    _config(tmp_path, 'ignore = ["ML10"]\nextend-select = ["ML105"]\n')
    write(tmp_path, "net.py", NET)
    # ignore beats extend-select
    result = cli("net.py", "--format", "json")
    assert result.rc == 0 and result.codes() == []


def test_per_file_ignores(cli, tmp_path):
    _config(tmp_path, '[tool.modellint.per-file-ignores]\n"legacy/*.py" = ["ML105", "ML103"]\n'
            '"gen_*.py" = ["ML1"]\n')
    write(tmp_path, "legacy/old.py", NET)
    write(tmp_path, "new/net.py", NET)
    write(tmp_path, "new/gen_model.py", NET)
    result = cli(".", "--format", "json")
    by_path = {}
    for f in result.json():
        by_path.setdefault(f["path"], []).append(f["code"])
    assert by_path == {"legacy/old.py": ["ML101"], "new/net.py": ["ML101", "ML103", "ML105"]}


def test_per_file_ignores_are_relative_to_the_config_not_the_working_directory(
    cli, tmp_path
):
    _config(tmp_path / "proj", '[tool.modellint.per-file-ignores]\n"models/*" = ["ML105"]\n')
    write(tmp_path, "proj/models/net.py", NET)
    result = cli("proj", "--format", "json", "--select", "ML105")
    assert result.rc == 0, result


def test_exclude_skips_walked_files_but_not_explicit_ones(cli, tmp_path):
    _config(tmp_path, 'exclude = ["generated", "*_pb2.py"]\n')
    write(tmp_path, "generated/net.py", NET)
    write(tmp_path, "src/model_pb2.py", NET)
    write(tmp_path, "src/net.py", NET)
    walked = cli(".", "--format", "json", "--select", "ML105")
    assert [f["path"] for f in walked.json()] == ["src/net.py"]
    explicit = cli("generated/net.py", "--format", "json", "--select", "ML105")
    assert explicit.codes() == [("ML105", 11)]


def test_config_option_names_a_file(cli, tmp_path):
    write(tmp_path, "custom.toml", '[tool.modellint]\nselect = ["ML103"]\n')
    write(tmp_path, "net.py", NET)
    assert cli("net.py", "--config", "custom.toml", "--format", "json").codes() == [
        ("ML103", 9)
    ]
    missing = cli("net.py", "--config", "nope.toml")
    assert missing.rc == 2 and "nope.toml" in missing.err


def test_unknown_key_names_the_key_and_the_file(cli, tmp_path):
    config = _config(tmp_path / "proj", 'selct = ["ML1"]\n')
    write(tmp_path, "proj/net.py", NET)
    result = cli("proj/net.py")
    assert result.rc == 2
    assert "selct" in result.err and str(config) in result.err
    assert result.out == ""
    assert "Traceback" not in result.err


def test_bad_values_name_the_key_and_the_file(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    for body, key in [
        ('select = "ML1"\n', "select"),
        ("target-torch-version = 2\n", "target-torch-version"),
        ('per-file-ignores = ["x"]\n', "per-file-ignores"),
        ("plugins = [1]\n", "plugins"),
    ]:
        config = _config(tmp_path, body)
        result = cli("net.py")
        assert result.rc == 2, (body, result)
        assert f"`{key}`" in result.err and str(config) in result.err, (body, result.err)


def test_invalid_toml_is_exit_2_naming_the_file(cli, tmp_path):
    write(tmp_path, "broken.toml", "[tool.modellint\nselect = [\n")
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--config", "broken.toml")
    assert result.rc == 2
    assert "broken.toml" in result.err


def test_a_broken_pyproject_found_upwards_is_exit_2_not_skipped(cli, tmp_path):
    # skipping it would drop its settings: here an `ignore` that the broken line follows,
    # and the nearer config would silently give way to the one above it
    _config(tmp_path, 'select = ["ML1"]\n')
    config = write(tmp_path / "proj", "pyproject.toml",
                   '[tool.modellint]\nignore = ["ML105"]\nselect = [\n')
    write(tmp_path, "proj/net.py", NET)
    for args in (["proj/net.py"], ["proj"]):
        result = cli(*args, "--format", "json")
        assert result.rc == 2, result
        assert str(config) in result.err and "not valid TOML" in result.err
        assert result.out == "" and "Traceback" not in result.err
    (tmp_path / "proj" / "pyproject.toml").write_bytes(b'[tool.modellint]\nignore = ["\xff"]\n')
    result = cli("proj/net.py")
    assert result.rc == 2 and str(config) in result.err and "UTF-8" in result.err


def test_tables_that_are_not_tables_are_errors_not_crashes(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    for body, key in [
        ("tool = 1\n", "`tool`"),
        ('tool = "modellint"\n', "`tool`"),
        ("[tool]\nmodellint = 1\n", "`tool.modellint`"),
        ('[tool]\nmodellint = ["ML1"]\n', "`tool.modellint`"),
        ("[tool.modellint]\nruntime = 3\n", "`runtime`"),
        ("[tool.modellint.runtime]\nmodels = 1\n", "`runtime.models`"),
        ("[[tool.modellint.runtime.models]]\ntarget = 1\n", "`runtime.models[0]`"),
    ]:
        config = write(tmp_path, "pyproject.toml", body)
        result = cli("net.py")
        assert result.rc == 2, (body, result)
        assert key in result.err and str(config) in result.err, (body, result.err)
        assert "internal error" not in result.err, (body, result.err)


def test_an_empty_rule_code_is_rejected(cli, tmp_path):
    # "" is a prefix of every code: `ignore = [""]` silenced every rule
    write(tmp_path, "net.py", NET)
    for body, key in [
        ('ignore = [""]\n', "ignore"),
        ('ignore = ["ML101", " "]\n', "ignore"),
        ('select = [""]\n', "select"),
        ('extend-select = [""]\n', "extend-select"),
        ('[tool.modellint.per-file-ignores]\n"*.py" = [""]\n', "per-file-ignores.*.py"),
    ]:
        config = _config(tmp_path, body)
        result = cli("net.py")
        assert result.rc == 2, (body, result)
        assert f"`{key}`" in result.err and "empty rule code" in result.err, (body, result.err)
        assert str(config) in result.err
    # the command line drops empty items of its comma lists, as before
    (tmp_path / "pyproject.toml").unlink()
    assert cli("net.py", "--ignore", ",", "--format", "json").rc == 1


def test_runtime_timeout_must_be_a_finite_number_in_range(cli, tmp_path):
    # inf, nan and 1e10 reached every worker's timer (OverflowError, or no timeout at all)
    write(tmp_path, "net.py", NET)
    for value in ("inf", "-inf", "nan", "1e10", "86401", "0", "-1", "true", '"10"'):
        config = _config(tmp_path, f"[tool.modellint.runtime]\ntimeout = {value}\n")
        result = cli("net.py")
        assert result.rc == 2, (value, result)
        assert "`runtime.timeout`" in result.err and str(config) in result.err, (value, result.err)
    for value in ("0.5", "30", "86400"):
        _config(tmp_path, f'select = ["ML105"]\n[tool.modellint.runtime]\ntimeout = {value}\n')
        assert cli("net.py", "--format", "json").codes() == [("ML105", 11)], value
    (tmp_path / "pyproject.toml").unlink()
    for value in ("inf", "nan", "1e10", "0", "-3", "soon"):
        result = cli("net.py", "--timeout", value)
        assert result.rc == 2, (value, result)
        assert "--timeout" in result.err and "Traceback" not in result.err, (value, result.err)


def test_unknown_rule_code_in_config_names_the_code_and_the_file(cli, tmp_path):
    config = _config(tmp_path, 'extend-select = ["ML105", "QQ12"]\n')
    write(tmp_path, "net.py", NET)
    result = cli("net.py")
    assert result.rc == 2
    assert "QQ12" in result.err and str(config) in result.err and "extend-select" in result.err


def test_unknown_rule_code_on_the_command_line_is_not_blamed_on_the_config(cli, tmp_path):
    config = _config(tmp_path, 'select = ["ML105"]\n')
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--ignore", "QQ12")
    assert result.rc == 2
    assert "QQ12" in result.err and "command line" in result.err
    assert str(config) not in result.err


def test_plugins_key_loads_a_local_module(modellint, tmp_path):
    write(tmp_path, "house_rules.py", '''\
        import libcst as cst

        from modellint import hookimpl
        from modellint.rule import StaticRule


        class NoLambda(StaticRule):
            """Flags every lambda."""

            code = "HSE001"
            name = "no-lambda"

            def visit_Lambda(self, node: cst.Lambda) -> None:
                self.report(node, "lambda found; define a function")


        @hookimpl
        def modellint_add_rules():
            return [NoLambda]
        ''')
    write(tmp_path, "code.py", "f = lambda x: x\n")
    _config(tmp_path, 'plugins = ["house_rules"]\n')
    # loading the repository's own code is the runner's opt-in (see tests/test_trust.py)
    trust = "--allow-config-plugins"
    result = modellint("code.py", "--format", "json", trust)
    assert result.rc == 1
    assert result.json()[0]["code"] == "HSE001" and result.json()[0]["column"] == 5
    assert modellint("code.py", "--ignore", "HSE", trust).rc == 0
    _config(tmp_path, 'plugins = ["house_rules"]\nselect = ["HSE001"]\n')
    assert modellint("code.py", "--format", "json", trust).codes() == [("HSE001", 1)]


def _findings(result) -> list[tuple[str, str, int]]:
    return sorted((f["path"], f["code"], f["line"]) for f in result.json())


def test_each_file_gets_the_settings_a_full_run_gives_it_whichever_file_comes_first(
        modellint, tmp_path):
    """A nested `aaa/pyproject.toml` governs the files under aaa/ and no other: a pre-commit
    run (which names the changed files, aaa's first) fails where the full run fails, and a
    run on one file agrees with the full run on that file (issue 23, item 8)."""
    _config(tmp_path, 'per-file-ignores = { "bbb/skip.py" = ["ML101"] }\n')
    _config(tmp_path / "aaa", 'ignore = ["ML"]\nexclude = ["gone.py"]\n')
    write(tmp_path, "aaa/net.py", NET)
    write(tmp_path, "aaa/gone.py", NET)
    write(tmp_path, "bbb/net.py", NET)
    write(tmp_path, "bbb/skip.py", NET)
    (tmp_path / ".git").mkdir()
    full = modellint(".", "--format", "json", "--no-cache")
    assert full.rc == 1, full
    expected = [(name, code, line) for name in ("bbb/net.py", "bbb/skip.py")
                for code, line in (("ML101", 8), ("ML103", 9), ("ML105", 11))
                if (name, code) != ("bbb/skip.py", "ML101")]
    assert _findings(full) == expected
    hook = modellint("aaa/net.py", "bbb/net.py", "bbb/skip.py", "--format", "json",
                     "--no-cache")
    assert hook.rc == 1 and _findings(hook) == expected, hook
    for name in ("aaa/net.py", "bbb/net.py", "bbb/skip.py"):
        alone = modellint(name, "--format", "json", "--no-cache")
        assert _findings(alone) == [f for f in expected if f[0] == name], (name, alone)
    # a folder named on the command line: its files keep their own settings too
    assert _findings(modellint("aaa", "bbb", "--format", "json", "--no-cache")) == expected
    # a pinned --config is the settings of every file
    pinned = modellint("aaa/net.py", "bbb/net.py", "--config", "pyproject.toml",
                       "--format", "json", "--no-cache")
    assert {path for path, _, _ in _findings(pinned)} == {"aaa/net.py", "bbb/net.py"}
