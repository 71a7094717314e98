"""What a ruff user reads at the terminal: severities, the summary's exit-code reason,
--statistics, the --diff and --fix tallies of safe and unsafe fixes. Run in-process."""

from __future__ import annotations

from conftest import NET, write

# ML317 (info, off by default, unsafe fix) and nothing else
INFO_ONLY = "import torch\n\noptimizer.zero_grad(set_to_none=False)\n"


def test_text_names_each_findings_severity_and_concise_stays_ruffs_line(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    text = cli("net.py", "--no-cache")
    assert text.rc == 1
    assert "net.py:11:9: ML105 [*] error: method `forward`" in text.out
    assert "net.py:9:9: ML103 error: `self.tens`" in text.out
    concise = cli("net.py", "--no-cache", "--format", "concise")
    assert "net.py:11:9: ML105 [*] method `forward`" in concise.out


def test_only_info_findings_say_why_the_exit_code_is_0(cli, tmp_path):
    write(tmp_path, "train.py", INFO_ONLY)
    result = cli("train.py", "--no-cache", "--extend-select", "ML317")
    assert result.rc == 0
    assert "ML317 info: " in result.out
    assert "Found 1 finding in 1 file.\nOnly 1 info finding; exit 0.\n" in result.out


def test_info_beside_errors_is_counted_apart(cli, tmp_path):
    write(tmp_path, "net.py", NET + "\n\n" + INFO_ONLY.split("\n\n")[1])
    result = cli("net.py", "--no-cache", "--extend-select", "ML317")
    assert result.rc == 1
    assert "1 info finding of these does not change the exit code." in result.out


def test_diff_ends_with_what_it_would_fix(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)  # ML105 safe fix, ML101 unsafe fix
    before = path.read_bytes()
    result = cli("net.py", "--diff")
    assert result.rc == 1
    assert result.out.startswith("--- a/net.py")
    assert result.err.strip() == "Would fix 1 finding (1 more with --unsafe-fixes)."
    both = cli("net.py", "--diff", "--unsafe-fixes")
    assert both.err.strip() == "Would fix 2 findings."
    assert path.read_bytes() == before


def test_diff_with_nothing_to_fix(cli, tmp_path):
    write(tmp_path, "net.py", "import torch\n")
    result = cli("net.py", "--diff")
    assert (result.rc, result.out, result.err.strip()) == (0, "", "No fixes available.")


def test_fix_says_how_many_unsafe_fixes_it_left(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--fix", "--format", "concise")
    assert result.rc == 1
    assert "Fixed 1 finding." in result.out
    assert "1 more fixable with --unsafe-fixes." in result.out


def test_every_rules_metadata_and_docs_as_json(cli):
    import json

    from modellint.testing import registry

    result = cli("rule", "--all", "--format", "json")
    assert result.rc == 0
    documents = json.loads(result.out)
    assert [d["code"] for d in documents] == sorted(registry().rules)
    ml105 = next(d for d in documents if d["code"] == "ML105")
    assert ml105["name"] == "method-missing-self" and ml105["severity"] == "error"
    assert ml105["fix"] == "safe" and ml105["default_enabled"] is True
    assert ml105["plugin"] == "modellint.rules.registration"
    assert "## Why is this bad?" in ml105["documentation"]
    assert ml105["invalid"] and all(set(e) == {"code", "line"} for e in ml105["invalid"])
    one = cli("rule", "ml105", "--format", "json")
    assert json.loads(one.out) == ml105
    assert cli("rule").rc == 2 and cli("rule", "ML105", "--all").rc == 2


def test_mistyped_names_get_the_closest_valid_one(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    cases = [
        (["--selct", "ML1", "net.py"], "unrecognized arguments: --selct (did you mean `--select`?)"),
        (["net.py", "--color", "nevr"], "(did you mean `never`?)"),
        (["net.py", "--format", "jsn"], "unknown format `jsn` (did you mean `json`?)"),
        (["net.py", "--select", "ML1O5"], "unknown rule code `ML1O5` in `--select` "
                                          "(did you mean `ML105`?)"),
        (["rule", "ML1O5"], "unknown rule code `ML1O5` (did you mean `ML105`?)"),
        (["chek", "net.py"], "path does not exist: chek (did you mean `check`?)"),
    ]
    for args, expected in cases:
        result = cli(*args)
        assert result.rc == 2 and expected in result.err, (args, result)
    far = cli("net.py", "--format", "xml")
    assert far.rc == 2 and "did you mean" not in far.err


def test_mistyped_config_keys_get_the_closest_valid_one(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    config = write(tmp_path, "pyproject.toml", '[tool.modellint]\nselct = ["ML1"]\n')
    result = cli("net.py")
    assert result.rc == 2
    assert "unknown key `selct` in [tool.modellint] (did you mean `select`?)" in result.err
    config.write_text('[tool.modellint.runtime]\ndevise = "cpu"\n')
    assert "(did you mean `device`?)" in cli("net.py").err
    config.write_text('[tool.modellint]\nignore = ["ML1O3"]\n')
    assert "unknown rule code `ML1O3` in `ignore` (did you mean `ML103`?)" in cli("net.py").err


def test_show_settings_says_where_each_value_came_from(cli, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nignore = ["ML103"]\nexclude = ["gen/"]\n')
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--show-settings", "--ignore", "ML101")
    assert result.rc == 0
    settings = dict(line.split(" = ", 1) for line in result.out.splitlines())
    config = str(tmp_path / "pyproject.toml")
    assert settings["ignore"] == f'["ML103", "ML101"]  # {config} and the command line'
    assert settings["exclude"] == f'["gen/"]  # {config}'
    assert settings["select"] == '"default rules"  # default'
    assert '"ML105"' in settings["enabled-rules"] and '"ML103"' not in settings["enabled-rules"]
    assert not (tmp_path / ".modellint_cache").exists()  # nothing was linted


def test_show_files_lists_what_would_be_linted(cli, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nexclude = ["gen/"]\n')
    for name in ("a/net.py", "a/stub.pyi", "gen/out.py", "notes.txt"):
        write(tmp_path, name, NET)
    result = cli(".", "--show-files")
    assert (result.rc, result.out) == (0, "a/net.py\na/stub.pyi\n")


def test_stdin_is_linted_as_the_named_file(modellint, tmp_path):
    # per-file-ignores follow the name; a file of that name on disk is neither read nor written
    write(tmp_path, "pyproject.toml",
          '[tool.modellint]\nper-file-ignores = {"models/*" = ["ML103"]}\n')
    on_disk = write(tmp_path, "models/net.py", "import torch\n")
    result = modellint("--stdin-filename", "models/net.py", "--format", "concise", stdin=NET)
    assert result.rc == 1, result
    assert [line.split(" ")[:2] for line in result.out.splitlines()[:2]] == [
        ["models/net.py:8:9:", "ML101"], ["models/net.py:11:9:", "ML105"]]
    assert on_disk.read_text() == "import torch\n"


def test_stdin_fix_prints_the_fixed_source_and_reports_beside_it(modellint, tmp_path):
    result = modellint("--fix", "--stdin-filename", "net.py", "--format", "concise", stdin=NET)
    assert result.out == NET.replace("def forward(x):", "def forward(self, x):"), result
    assert "net.py:8:9: ML101" in result.err and "Fixed 1 finding." in result.err
    assert not (tmp_path / "net.py").exists()
    clean = modellint("--fix", "--stdin-filename", "net.py", "--select", "ML105",
                      stdin="import torch\n")
    assert (clean.rc, clean.out) == (0, "import torch\n")


def test_stdin_diff_and_what_cannot_go_with_it(modellint):
    diff = modellint("-", "--diff", "--stdin-filename", "net.py", stdin=NET)
    assert diff.out.startswith("--- a/net.py") and "+    def forward(self, x):" in diff.out
    both = modellint("other.py", "--stdin-filename", "net.py", stdin=NET)
    assert (both.rc, both.err.strip()) == (
        2, "modellint: error: --stdin-filename lints standard input: give no PATH (or `-`)")


def test_diff_counts_lines_as_python_does(cli, tmp_path):
    # a form feed in a comment is not a line break (str.splitlines would make it one)
    write(tmp_path, "net.py", "# page one\x0cpage two\n" + NET)
    result = cli("net.py", "--diff")
    assert "@@ -9,5 +9,5 @@" in result.out, result
