"""The habits a ruff user brings to the command line (issue 26): rule names as selectors,
`--output-format`, suggestions from the same subcommand, `--statistics` as JSON, `-` for
standard input, `--add-noqa` and `--exit-non-zero-on-fix` — each tried as that user would."""

from __future__ import annotations

import json

import nbformat
from conftest import NET, write

# the module class with ML101 (line 8), ML103 (line 9) and ML105 (line 11, safe fix)


def test_rule_names_select_and_ignore_as_codes_do(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    by_name = cli("check", "--no-cache", "--format", "json", "--select",
                  "module-in-plain-container,ML105", ".")
    assert sorted(f["code"] for f in by_name.json()) == ["ML101", "ML105"]
    ignored = cli("check", "--no-cache", "--format", "json", "--ignore",
                  "method-missing-self", ".")
    assert "ML105" not in {f["code"] for f in ignored.json()}
    assert "ML101" in {f["code"] for f in ignored.json()}


def test_rule_names_in_the_configuration_work_too(cli, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nignore = ["unregistered-tensor"]\n')
    write(tmp_path, "net.py", NET)
    codes = {f["code"] for f in cli("check", "--no-cache", "--format", "json", ".").json()}
    assert "ML103" not in codes and "ML101" in codes


def test_a_mistyped_rule_name_is_refused_with_the_name_meant(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("check", "--select", "module-in-plain-contaner", ".")
    assert result.rc == 2
    assert "did you mean `module-in-plain-container`?" in result.err


def test_output_format_is_the_same_option_as_format(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("check", "--no-cache", "--output-format", "json", ".")
    assert {f["code"] for f in result.json()} == {"ML101", "ML103", "ML105"}
    assert not (tmp_path / "json").exists()
    rules = cli("rules", "--output-format", "json")
    assert any(rule["code"] == "ML101" for rule in json.loads(rules.out))


def test_suggestions_come_from_the_same_subcommand_and_keep_the_meaning(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    # an option of another subcommand is named as such, not "corrected" into a neighbour
    plots = cli("check", "--plots", "out", ".")
    assert plots.rc == 2 and "`--plots` is an option of `modellint run`" in plots.err
    assert "did you mean" not in plots.err
    fix = cli("rules", "--fix")
    assert fix.rc == 2 and "`--fix` is an option of `modellint check`" in fix.err
    # a typo still gets its option
    typo = cli("check", "--fixx", ".")
    assert "did you mean `--fix`?" in typo.err
    # never an option of the opposite meaning
    negated = cli("check", "--no-exit-zero", ".")
    assert negated.rc == 2 and "--exit-zero" not in negated.err.split("arguments:", 1)[1].replace(
        "--no-exit-zero", "")


def test_statistics_honours_the_json_format(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("check", "--no-cache", "--statistics", "--format", "json", ".")
    rows = result.json()
    assert {row["code"]: (row["name"], row["count"], row["fixable"]) for row in rows} == {
        "ML101": ("module-in-plain-container", 1, 0),
        "ML103": ("unregistered-tensor", 1, 0),
        "ML105": ("method-missing-self", 1, 1),
    }
    assert result.rc == 1


def test_a_dash_reads_standard_input(modellint, tmp_path):
    result = modellint("check", "--no-cache", "--format", "concise", "-", stdin=NET)
    assert result.rc == 1, result
    assert "-:8:9: ML101" in result.out and "-:11:9: ML105" in result.out
    named = modellint("check", "--no-cache", "--format", "concise", "--stdin-filename",
                      "models/net.py", "-", stdin=NET)
    assert "models/net.py:8:9: ML101" in named.out


def test_add_noqa_silences_every_finding_where_it_stands(modellint, tmp_path):
    source = NET.replace("self.tens = torch.ones(3, 4)",
                         "self.tens = torch.ones(3, 4)  # noqa: E501")
    path = write(tmp_path, "net.py", source)
    result = modellint("check", "--no-cache", "--add-noqa", ".")
    assert result.rc == 0, result
    assert "Added 3 noqa directives." in result.err
    lines = path.read_text().splitlines()
    assert lines[7].endswith("self.layers = [nn.Linear(2, 2), nn.ReLU()]  # noqa: ML101")
    assert lines[8].endswith("torch.ones(3, 4)  # noqa: E501, ML103")
    assert lines[10] == "    def forward(x):  # noqa: ML105"
    assert modellint("check", "--no-cache", ".").rc == 0
    again = modellint("check", "--no-cache", "--add-noqa", ".")
    assert "Added 0 noqa directives." in again.err
    assert path.read_text().splitlines() == lines


def test_add_noqa_leaves_a_line_that_cannot_hold_a_comment(modellint, tmp_path):
    # the finding's line ends inside a string that goes on: a comment there would be text
    path = write(tmp_path, "doc.py", 'import torch\nx = [torch.load("a", weights_only=False), """\nb"""]\n')
    before = path.read_text()
    result = modellint("check", "--no-cache", "--add-noqa", "--select", "ML501", ".")
    assert result.rc == 0, result
    assert "doc.py:2: no noqa added" in result.err
    assert path.read_text() == before


def test_add_noqa_in_notebook_cells(modellint, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("A model."), nbformat.v4.new_code_cell(NET.strip())]
    path = tmp_path / "net.ipynb"
    path.write_text(nbformat.writes(nb))
    result = modellint("check", "--no-cache", "--add-noqa", ".")
    assert result.rc == 0 and "Added 3 noqa directives." in result.err, result
    cell = nbformat.reads(path.read_text(), as_version=4).cells[1].source.splitlines()
    assert cell[10] == "    def forward(x):  # noqa: ML105"
    assert modellint("check", "--no-cache", ".").rc == 0


def test_exit_non_zero_on_fix(modellint, tmp_path):
    only_ml105 = NET.replace("self.layers = [nn.Linear(2, 2), nn.ReLU()]",
                             "self.layers = nn.ModuleList()").replace(
        "self.tens = torch.ones(3, 4)", "self.register_buffer('tens', torch.ones(3, 4))")
    path = write(tmp_path, "net.py", only_ml105)
    plain = modellint("check", "--no-cache", "--fix", ".")
    assert plain.rc == 0, plain  # every finding fixed: clean
    path.write_text(only_ml105)
    strict = modellint("check", "--no-cache", "--fix", "--exit-non-zero-on-fix", ".")
    assert strict.rc == 1, strict
    assert "def forward(self, x):" in path.read_text()
    # nothing left to fix: clean again
    assert modellint("check", "--no-cache", "--fix", "--exit-non-zero-on-fix", ".").rc == 0
