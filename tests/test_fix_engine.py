"""`--fix`, `--unsafe-fixes` and `--diff` on real files: what is written, and what is not."""

from __future__ import annotations

import os
import stat

from conftest import NET, write

SAFE_FIXED = NET.replace("def forward(x):", "def forward(self, x):")
ALL_FIXED = SAFE_FIXED.replace(
    "self.layers = [nn.Linear(2, 2), nn.ReLU()]",
    "self.layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])",
)


def test_fix_applies_safe_fixes_only_and_keeps_the_mode(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    os.chmod(path, 0o754)
    result = cli("net.py", "--fix", "--format", "concise")
    assert path.read_text() == SAFE_FIXED
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    # what is left is reported, and decides the exit code
    assert result.rc == 1
    assert "Fixed 1 finding" in result.out
    assert "ML105" not in result.out
    assert "net.py:8:9: ML101" in result.out and "net.py:9:9: ML103" in result.out
    # no temporary file is left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.py"]

    again = cli("net.py", "--fix", "--format", "concise")
    assert path.read_text() == SAFE_FIXED
    assert "Fixed" not in again.out


def test_unsafe_fixes(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    result = cli("net.py", "--fix", "--unsafe-fixes", "--format", "json")
    assert path.read_text() == ALL_FIXED
    # only the unfixable ML103 is left
    assert result.codes() == [("ML103", 9)]
    assert result.rc == 1
    assert cli("net.py", "--fix", "--unsafe-fixes", "--select", "ML101,ML105").rc == 0
    assert path.read_text() == ALL_FIXED


def test_fix_of_a_clean_file_is_exit_0_and_writes_nothing(cli, tmp_path):
    path = write(tmp_path, "net.py", ALL_FIXED)
    before = path.stat().st_mtime_ns
    result = cli("net.py", "--fix", "--unsafe-fixes", "--select", "ML105,ML101")
    assert result.rc == 0
    assert path.stat().st_mtime_ns == before


def test_diff_prints_the_change_and_writes_nothing(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    result = cli("net.py", "--diff")
    assert result.rc == 1
    assert path.read_text() == NET
    assert "--- a/net.py\n+++ b/net.py\n" in result.out
    assert "-    def forward(x):\n+    def forward(self, x):\n" in result.out
    assert "ModuleList" not in result.out  # unsafe, not asked for

    unsafe = cli("net.py", "--diff", "--unsafe-fixes")
    assert unsafe.rc == 1
    assert "+        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])\n" in unsafe.out
    assert path.read_text() == NET

    # nothing to change: exit 0, empty diff
    clean = write(tmp_path, "clean.py", ALL_FIXED)
    nothing = cli("clean.py", "--diff", "--unsafe-fixes")
    assert nothing.rc == 0 and nothing.out == ""
    assert clean.read_text() == ALL_FIXED


def test_fix_of_a_read_only_file_leaves_it_intact_with_a_message(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    os.chmod(path, 0o444)
    try:
        result = cli("net.py", "--fix", "--format", "concise")
        assert path.read_text() == NET
        assert stat.S_IMODE(path.stat().st_mode) == 0o444
        assert "net.py" in result.err and "not writable" in result.err
        # the unfixed finding is still reported
        assert "net.py:11:9: ML105" in result.out
        assert result.rc == 1
    finally:
        os.chmod(path, 0o644)


def test_fix_with_a_syntax_error_elsewhere(cli, tmp_path):
    write(tmp_path, "broken.py", "def f(:\n")
    good = write(tmp_path, "net.py", NET)
    result = cli(".", "--fix", "--format", "json")
    assert good.read_text() == SAFE_FIXED
    assert ("ML000", 1) in result.codes()
    assert (tmp_path / "broken.py").read_text() == "def f(:\n"
