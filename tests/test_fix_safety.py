"""`--fix` on a hostile or busy checkout: the file keeps its owner, group, mode, hard links and
line endings; no link leads a write out of the linted tree; an edit made while the fix runs is
never lost (compare-and-swap just before the rename)."""

from __future__ import annotations

import os
import stat
import sys

import pytest
from conftest import NET

from modellint import fix
from modellint.config import Config
from modellint.fix import WriteError, apply_fixes, write_atomically
from modellint.plugins import load_registry
from modellint.static import runner
from modellint.static.engine import lint_source
from modellint.static.runner import StaticOptions

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners and links")

# the one safe fix NET has: ML105 at line 11
BEFORE, AFTER = b"def forward(x):", b"def forward(self, x):"
FIXED = NET.replace("def forward(x):", "def forward(self, x):")


def _opts() -> StaticOptions:
    rules = [load_registry(entry_points=False).rules["ML105"]]
    return StaticOptions(rules=rules, options=Config().rule_options(), fix=True)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="chown needs root")
def test_owner_group_and_mode_are_kept(modellint, tmp_path):
    path = tmp_path / "net.py"
    path.write_text(NET)
    os.chown(path, 1234, 1234)
    os.chmod(path, 0o640)
    result = modellint("net.py", "--fix", "--format", "concise")
    assert "Fixed 1 finding" in result.out, result
    assert path.read_text() == FIXED
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1234, 1234, 0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.py"]


def test_a_hard_linked_file_is_not_split(modellint, tmp_path):
    (tmp_path / "repo").mkdir()
    path = tmp_path / "repo" / "net.py"
    path.write_text(NET)
    other = tmp_path / "elsewhere.py"
    os.link(path, other)
    result = modellint(".", "--fix", "--format", "concise", cwd=tmp_path / "repo")
    assert "has 2 hard links" in result.err and "not fixed" in result.err
    # both names still name one file, unchanged, and its finding is still reported
    assert os.path.samefile(path, other) and path.stat().st_nlink == 2
    assert path.read_text() == NET
    assert "net.py:11:9: ML105" in result.out and "Fixed" not in result.out
    assert result.rc == 1


def test_a_link_out_of_the_linted_tree_is_not_written_through(modellint, tmp_path):
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    (outside / "lib").mkdir(parents=True)
    (outside / "target.py").write_text(NET)
    (outside / "lib" / "model.py").write_text(NET)
    (repo / "escape.py").symlink_to("../outside/target.py")
    (repo / "vendored").symlink_to(outside / "lib")  # a folder link: not even walked into
    result = modellint(".", "--fix", "--format", "concise", cwd=repo)
    assert "a link out of the folder being linted; not followed" in result.err, result
    assert (outside / "target.py").read_text() == NET
    assert (outside / "lib" / "model.py").read_text() == NET
    assert (repo / "escape.py").is_symlink()
    assert "ML105" not in result.out

    # named one by one, as the pre-commit hook names files: refused too
    named = modellint("escape.py", "--fix", cwd=repo)
    assert "outside the folders being linted" in named.err
    assert (outside / "target.py").read_text() == NET


def test_run_from_a_parent_folder_the_linted_tree_is_the_folder_named(modellint, tmp_path):
    """No [tool.modellint] anywhere: the current folder (a parent of the checkout, holding
    other projects) is no part of the linted tree, so a link out of `repo` is not followed."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (outside / "target.py").write_text(NET)
    (repo / "escape.py").symlink_to("../outside/target.py")
    (repo / "net.py").write_text(NET)
    result = modellint("repo", "--fix", "--format", "concise", cwd=tmp_path)
    # the walk does not follow the link, and the file of the tree is fixed
    assert "repo/escape.py: a link out of the folder being linted" in result.err, result
    assert (outside / "target.py").read_text() == NET
    assert (repo / "net.py").read_text() == FIXED
    # a file named in the checkout: its folder is the tree, not the current folder
    named = modellint("repo/escape.py", "--fix", cwd=tmp_path)
    assert "outside the folders being linted" in named.err
    assert (outside / "target.py").read_text() == NET


def test_a_link_within_the_tree_is_fixed_and_stays_a_link(modellint, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(NET)
    (tmp_path / "alias.py").symlink_to("models/net.py")
    result = modellint("alias.py", "--fix", "--format", "concise")
    assert "Fixed 1 finding" in result.out, result
    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "models" / "net.py").read_text() == FIXED


@pytest.mark.parametrize(
    "original",
    [
        NET.replace("\n", "\r").encode(),  # CR only, ending in a lone `\r`
        NET.replace("\n", "\r").encode() + b"\r",  # and an empty last line
        NET.replace("\n", "\r\n").encode(),
        NET.replace("\n", "\r\n", 3).replace("return x\n", "return x\r").encode(),  # mixed
        NET.encode()[:-1],  # no final line break at all
        b"\xef\xbb\xbf" + NET.encode(),  # a byte-order mark
        NET.encode() + b"\\\r\n",  # a last line of only a continuation (LibCST refuses it)
    ],
    ids=["cr", "cr-empty-last-line", "crlf", "mixed", "no-final-newline", "bom",
         "trailing-continuation"],
)
def test_line_endings_are_kept_byte_for_byte(modellint, tmp_path, original):
    path = tmp_path / "net.py"
    path.write_bytes(original)
    result = modellint("net.py", "--fix", "--format", "concise")
    assert "Fixed 1 finding" in result.out, result
    assert path.read_bytes() == original.replace(BEFORE, AFTER)


def test_apply_fixes_keeps_what_libcst_drops():
    source = NET.replace("\n", "\r")
    result = lint_source("net.py", source.encode(), _opts().rules, Config().rule_options(),
                         frozenset())
    assert result.module.code != source  # LibCST alone loses the final `\r`
    new, fixed = apply_fixes(result.module, result.findings, False, source)
    assert fixed == 1 and new == source.replace("def forward(x):", "def forward(self, x):")


def test_an_edit_made_while_the_fix_runs_is_kept(tmp_path, monkeypatch):
    path = tmp_path / "net.py"
    path.write_text(NET)
    edited = NET + "# saved by the editor meanwhile\n"
    check_parses = fix.check_parses

    def edit_then_check(source):  # runs after the file was read, before it is written
        path.write_text(edited)
        return check_parses(source)

    monkeypatch.setattr(fix, "check_parses", edit_then_check)
    outcome = runner.lint_file("net.py", path, frozenset(), _opts())
    assert outcome.messages == [f"{path} changed while it was being linted; not fixed"]
    assert outcome.fixed == 0
    assert path.read_text() == edited
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.py"]


def test_compare_and_swap_right_before_the_rename(tmp_path, monkeypatch):
    """An edit made after the new text is already on disk beside the file, in the last moment
    before the rename, is still seen: the compare comes after everything else."""
    path = tmp_path / "net.py"
    path.write_bytes(NET.encode())
    edited = NET.encode() + b"# saved at the last moment\n"
    fsync = os.fsync

    def fsync_then_edit(fd):
        fsync(fd)
        path.write_bytes(edited)

    monkeypatch.setattr(os, "fsync", fsync_then_edit)
    with pytest.raises(WriteError, match="changed while it was being linted; not fixed"):
        write_atomically(path, NET.replace("x):", "self, x):").encode(), NET.encode())
    monkeypatch.undo()
    assert path.read_bytes() == edited
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.py"]

    # unchanged, the same call replaces it
    write_atomically(path, b"x = 1\n", edited)
    assert path.read_bytes() == b"x = 1\n"


def test_a_file_replaced_by_another_with_the_same_bytes_is_not_overwritten(tmp_path, monkeypatch):
    path = tmp_path / "net.py"
    path.write_bytes(b"x = 1\n")
    fsync = os.fsync

    def fsync_then_swap(fd):
        fsync(fd)
        os.replace(tmp_path / "new.py", path)  # another tool's atomic save, same bytes

    (tmp_path / "new.py").write_bytes(b"x = 1\n")
    monkeypatch.setattr(os, "fsync", fsync_then_swap)
    with pytest.raises(WriteError, match="changed while"):
        write_atomically(path, b"x = 2\n", b"x = 1\n")
    monkeypatch.undo()
    assert path.read_bytes() == b"x = 1\n"
