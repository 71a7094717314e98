"""Suppression comments: `# noqa`, `# noqa: CODES`, `# modellint: noqa[: CODES]`."""

from __future__ import annotations

from conftest import NET, write

# every method lacks `self` (ML105 at the `def` line); the comment decides what is reported
LINE_NOQA = """\
import torch.nn as nn


class Net(nn.Module):
    def a(x):  # noqa: ML105
        return x

    def b(x):  # NOQA:E501,ml105
        return x

    def c(x):  # noqa: E501 ML105 W291
        return x

    def d(x):  # noqa
        return x

    def e(x):  # noqa: E501
        return x

    def f(x):  # noqa: ML101
        return x

    def g(x):  # type: ignore  # noqa: ML105
        return x

    def h(x):
        return x  # noqa: ML105
"""


def test_line_noqa(cli, tmp_path):
    write(tmp_path, "net.py", LINE_NOQA)
    result = cli("net.py", "--format", "json", "--select", "ML105")
    assert result.rc == 1
    names = [f["message"].split("`")[1] for f in result.json()]
    # only: another linter's code, another rule's code, and a noqa on a different line
    assert names == ["e", "f", "h"]


def test_noqa_only_hides_its_own_line(cli, tmp_path):
    text = NET.replace(
        "self.layers = [nn.Linear(2, 2), nn.ReLU()]",
        "self.layers = [nn.Linear(2, 2), nn.ReLU()]  # noqa: ML101, ML103",
    )
    write(tmp_path, "net.py", text)
    result = cli("net.py", "--format", "json")
    assert result.codes() == [("ML103", 9), ("ML105", 11)]


def test_file_level_noqa_for_one_code(cli, tmp_path):
    write(tmp_path, "net.py", "# modellint: noqa: ML105, ml103\n" + NET)
    result = cli("net.py", "--format", "json")
    assert result.codes() == [("ML101", 9)]


def test_file_level_noqa_for_everything(cli, tmp_path):
    write(tmp_path, "net.py", NET + "# modellint: noqa\n")
    result = cli("net.py", "--format", "json")
    assert result.rc == 0 and result.codes() == []


def test_file_level_noqa_must_stand_on_its_own_line(cli, tmp_path):
    # a trailing `# modellint: noqa` is not a whole-file exemption (and not a line noqa)
    text = NET.replace("import torch\n", "import torch  # modellint: noqa\n", 1)
    write(tmp_path, "net.py", text)
    result = cli("net.py", "--format", "json")
    assert result.codes() == [("ML101", 8), ("ML103", 9), ("ML105", 11)]


MULTI_LINE = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        y = (  # noqa: ML107
            nn.Linear(16, 4)(x)
        )
        return (
            nn.Linear(4, 4)(y)
        )
"""


def test_noqa_on_the_first_line_of_a_multi_line_statement(cli, tmp_path):
    write(tmp_path, "net.py", MULTI_LINE)
    result = cli("net.py", "--format", "json", "--select", "ML107")
    assert result.codes() == [("ML107", 11)]


def test_noqa_on_the_first_line_of_a_multi_line_statement_for_a_deferred_rule(
    cli, tmp_path
):
    write(tmp_path, "net.py", """\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Linear(10, 5)

            def forward(self, x):
                y = (  # noqa: ML106
                    self.linear(x)
                )
                return (
                    self.linaer(y)
                )
        """)
    result = cli("net.py", "--format", "json", "--select", "ML106")
    assert result.codes() == [("ML106", 14)]


def test_noqa_does_not_hide_syntax_errors_elsewhere(cli, tmp_path):
    write(tmp_path, "broken.py", "x = 1  # noqa\ndef f(:\n")
    result = cli("broken.py", "--format", "json")
    assert result.codes() == [("ML000", 2)]


# characters that str.splitlines takes for line ends but Python does not: in comments and
# strings they leave Python's line numbers alone, so noqa and excerpts must too
NOT_LINE_ENDS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
ODD_BREAKS = (
    "import torch.nn as nn\n"
    + "".join(f"# odd {ch!r}: a{ch}b\n" for ch in NOT_LINE_ENDS)
    + "TEXT = '" + "".join(NOT_LINE_ENDS) + "'\n"
    + "\x0c\n"
    + "class Net(nn.Module):\n"
    + "    def hidden(x):  # noqa: ML105\n"
    + "        return x\n"
    + "\n"
    + "    def shown(x):\n"
    + "        return x\n"
)


def test_noqa_and_excerpts_use_pythons_line_ends(cli, tmp_path):
    (tmp_path / "net.py").write_text(ODD_BREAKS, encoding="utf-8", newline="")
    lines = ODD_BREAKS.split("\n")
    shown = lines.index("    def shown(x):") + 1
    result = cli("net.py", "--format", "json", "--select", "ML105")
    assert [(f["code"], f["line"], f["message"].split("`")[1]) for f in result.json()] == [
        ("ML105", shown, "shown")]
    text = cli("net.py", "--select", "ML105", "--color", "never")
    assert f"{shown} |     def shown(x):" in text.out, text.out


def test_noqa_with_carriage_return_line_ends(cli, tmp_path):
    # a file saved with \r alone: the whole-file noqa on line 3 and a line noqa are found
    text = ODD_BREAKS.replace("\n", "\r")
    (tmp_path / "net.py").write_text(text, encoding="utf-8", newline="")
    result = cli("net.py", "--format", "json", "--select", "ML105")
    assert [(f["code"], f["message"].split("`")[1]) for f in result.json()] == [
        ("ML105", "shown")]
    exempt = text.replace("# odd '\\x0b'", "# modellint: noqa: ML105\r# odd '\\x0b'")
    (tmp_path / "net.py").write_text(exempt, encoding="utf-8", newline="")
    result = cli("net.py", "--format", "json", "--select", "ML105")
    assert result.rc == 0 and result.json() == []


def test_syntax_error_excerpt_uses_pythons_line_ends(cli, tmp_path):
    text = "x = 1  # a\x0cb\x1cc\u2028d\ndef f(:\n"
    (tmp_path / "broken.py").write_text(text, encoding="utf-8", newline="")
    result = cli("broken.py", "--color", "never")
    assert result.out.startswith("broken.py:2:"), result.out
    assert "2 | def f(:" in result.out, result.out
