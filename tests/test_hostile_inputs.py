"""Hostile files and folders in the linted tree (issue 16, items 7 and 11): folders that cannot
be searched, FIFOs and devices named *.py, files past the size limit, and .gitignore files that
are huge, hostile or not files at all. Every run ends, with a clear message."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import NET, write

from modellint.static.discover import MAX_FILE_BYTES, GitIgnore, discover

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def _paths(result) -> list[str]:
    return sorted({f["path"] for f in result.json()})


# --- item 7: folders that cannot be searched ----------------------------------------------------


def _run_unprivileged(root: Path, *args: str) -> subprocess.CompletedProcess:
    """modellint in `root` as a user that file permissions apply to: root ignores them, so a
    root test run drops to `nobody` for the command."""
    extra = {}
    if os.geteuid() == 0:
        extra = {"user": 65534, "group": 65534, "extra_groups": []}
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "PYTHONPATH")}
    env["MODELLINT_CACHE_DIR"] = str(root / ".cache-for-test")
    return subprocess.run(
        [sys.executable, "-m", "modellint", *args], cwd=root, env=env, capture_output=True,
        text=True, timeout=120, **extra,
    )


@pytest.fixture
def open_tree():
    """A scratch folder that an unprivileged user can enter (pytest's tmp_path is 0700)."""
    root = Path(tempfile.mkdtemp(prefix="modellint-hostile-"))
    root.chmod(0o755)
    yield root
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
    shutil.rmtree(root, ignore_errors=True)


def _unprivileged_works(root: Path) -> bool:
    if os.geteuid() != 0:
        return True
    try:  # `nobody` may not be able to reach the interpreter (a Python under /root)
        return _run_unprivileged(root, "--version").returncode == 0
    except OSError:
        return False


def test_a_folder_that_cannot_be_searched_is_reported_and_the_run_goes_on(open_tree):
    write(open_tree, "pkg/net.py", NET)
    write(open_tree, "locked/model.py", NET)
    write(open_tree, "locked/inner/deep.py", NET)
    if not _unprivileged_works(open_tree):
        pytest.skip("cannot run a command as an unprivileged user here")
    for path in open_tree.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (open_tree / "locked").chmod(0)

    result = _run_unprivileged(open_tree, ".", "--format", "json", "--no-cache")
    assert result.returncode == 1, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "locked: folder not searched: Permission denied" in result.stderr
    assert {f["path"] for f in json.loads(result.stdout)} == {"pkg/net.py"}


def test_a_searchable_but_unreadable_folder_is_reported(open_tree):
    # x without r: the folder's own name can be stat'ed, its entries cannot be listed
    write(open_tree, "listless/model.py", NET)
    write(open_tree, "ok.py", "x = 1\n")
    if not _unprivileged_works(open_tree):
        pytest.skip("cannot run a command as an unprivileged user here")
    for path in open_tree.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (open_tree / "listless").chmod(0o111)
    result = _run_unprivileged(open_tree, ".", "--no-cache")
    assert result.returncode == 0, result.stderr
    assert "listless: folder not searched" in result.stderr
    assert "1 file" in result.stdout


def test_a_locked_folder_as_the_kernel_refuses_it_to_a_user(tmp_path, monkeypatch, capsys):
    """The same run in this process, for when the tests run as root (whom permissions do not
    stop): os.stat, os.lstat, os.open and os.scandir refuse what is inside `locked/` the way
    the kernel does for a user without search permission on it."""
    from modellint.cli import main

    write(tmp_path, "pkg/net.py", NET)
    write(tmp_path, "locked/model.py", NET)
    write(tmp_path, "locked/pyvenv.cfg", "")
    locked = str(tmp_path / "locked")

    def refuse(name):
        real = getattr(os, name)

        def call(path, *args, **kwargs):
            text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
            if text.startswith(locked + os.sep) or (name == "scandir" and text == locked):
                raise PermissionError(13, "Permission denied", text)
            return real(path, *args, **kwargs)
        return call

    for name in ("stat", "lstat", "open", "scandir"):
        monkeypatch.setattr(os, name, refuse(name))
    monkeypatch.chdir(tmp_path)
    rc = main([".", "--format", "json", "--no-cache", "-j1"])
    out, err = capsys.readouterr()
    assert "internal error" not in err
    assert "locked: folder not searched: Permission denied" in err
    assert rc == 1
    assert {f["path"] for f in json.loads(out)} == {"pkg/net.py"}


def test_walk_warns_through_the_callback_for_each_folder_it_cannot_list(tmp_path, monkeypatch):
    write(tmp_path, "a/model.py", NET)
    write(tmp_path, "b/model.py", NET)
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "a":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    warnings: list[str] = []
    found = [display for display, _ in discover([str(tmp_path)], lambda *_: False,
                                                 warnings.append)]
    assert [Path(p).relative_to(tmp_path).as_posix() for p in found] == ["b/model.py"]
    assert warnings == [f"{tmp_path / 'a'}: folder not searched: Permission denied"]


# --- item 7: FIFOs, devices and huge files named *.py -------------------------------------------


@needs_fifo
def test_fifos_and_devices_found_by_walking_are_skipped(modellint, tmp_path):
    write(tmp_path, "net.py", NET)
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "random.py").symlink_to("/dev/urandom")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "model.pyi")
    start = time.monotonic()
    result = modellint(".", "--format", "json")
    assert time.monotonic() - start < 60
    assert result.rc == 1, result
    assert _paths(result) == ["net.py"]
    assert "Traceback" not in result.err


@needs_fifo
def test_a_fifo_or_device_named_on_the_command_line_is_a_clear_finding(modellint, tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    write(tmp_path, "net.py", NET)
    result = modellint("pipe.py", "zero.py", "net.py", "--format", "json")
    assert result.rc == 1, result
    by_path = {f["path"]: f for f in result.json() if f["code"] == "ML000"}
    assert by_path["pipe.py"]["message"] == "cannot read file: not a regular file (a FIFO)"
    assert by_path["zero.py"]["message"] == (
        "cannot read file: not a regular file (a character device)"
    )
    assert "net.py" not in by_path


def test_the_runtime_pass_reads_no_fifo_either(modellint, tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    result = modellint("pipe.py", "--runtime", "--format", "json", "--no-cache")
    assert result.rc == 1, result
    assert [f["code"] for f in result.json()] == ["ML000"]


def test_a_file_past_the_size_limit_is_one_finding(modellint, tmp_path):
    line = b"x = 1\n"
    (tmp_path / "huge.py").write_bytes(line * (MAX_FILE_BYTES // len(line) + 1))
    (tmp_path / "limit.py").write_bytes(b"#" * (MAX_FILE_BYTES - 1) + b"\n")  # just fits
    # (the budget of code raised to the read limit: see test_code_budget.py for the budget)
    result = modellint(".", "--format", "json", "--no-cache", "--max-code-bytes",
                       str(MAX_FILE_BYTES))
    assert result.rc == 1, result
    assert [(f["path"], f["code"], f["message"]) for f in result.json()] == [
        ("huge.py", "ML000", "cannot read file: larger than modellint's limit of 10 MiB for one file"),
    ]  # and limit.py, exactly at the limit, is linted (a comment: no finding)


# --- item 7: .gitignore files that are not files -----------------------------------------------


@needs_fifo
def test_a_gitignore_that_is_a_fifo_is_not_read_and_the_walk_goes_on(modellint, tmp_path):
    write(tmp_path, "net.py", NET)
    write(tmp_path, "pkg/net.py", NET)
    os.mkfifo(tmp_path / "pkg" / ".gitignore")
    result = modellint(".", "--format", "json")
    assert result.rc == 1, result
    assert _paths(result) == ["net.py", "pkg/net.py"]
    assert "pkg/.gitignore: not used: not a regular file (a FIFO)" in result.err


def test_a_gitignore_past_the_size_limit_is_not_used(modellint, tmp_path):
    write(tmp_path, "net.py", NET)
    (tmp_path / ".gitignore").write_bytes(b"net.py\n" + b"#" * MAX_FILE_BYTES + b"\n")
    result = modellint(".", "--format", "json")
    assert _paths(result) == ["net.py"]
    assert ".gitignore: not used: larger than modellint's limit" in result.err


# --- item 11: a huge .gitignore ----------------------------------------------------------------


def _bench_tree(root: Path, lines: int, files: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import gitignore_bench
    finally:
        sys.path.pop(0)
    gitignore_bench.make_tree(root, files=files, lines=lines, seed=16)


def test_a_30k_line_gitignore_over_1000_files_takes_seconds_not_minutes(tmp_path):
    # was 225 s of CPU: every pattern was matched with fnmatch for every path
    _bench_tree(tmp_path, lines=30_000, files=1_000)
    start = time.process_time()
    found = list(discover([str(tmp_path)], lambda *_: False))
    cpu = time.process_time() - start
    assert cpu < 15, f"{cpu:.1f} s of CPU"
    assert len(found) == 891  # what `git ls-files --others --exclude-standard` keeps
    assert not any("/pkg_3/" in str(path) or path.name.endswith("_skip.py")
                   and path.name != "keep_skip.py" for _, path in found)


def test_patterns_that_backtrack_do_not_hang(tmp_path):
    # a regex translation of `*a*a*a...` tries exponentially many splits of a long name
    name = "a" * 60 + ".py"
    deep = "a/" * 30 + "x.py"
    write(tmp_path, name, "x = 1\n")
    write(tmp_path, deep, "x = 1\n")
    write(tmp_path, ".gitignore", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b\n"
          + "/**/a*/**/a*/**/a*/**/a*/**/a*/**/a*/**/a*/**/b\n"
          + "[a]*[a]*[a]*[a]*[a]*[a]*[a]*[a]*[a]*c\n")
    start = time.process_time()
    found = sorted(display for display, _ in discover([str(tmp_path)], lambda *_: False))
    assert time.process_time() - start < 5
    assert [Path(p).relative_to(tmp_path).as_posix() for p in found] == [deep, name]


# --- item 11: git's semantics are kept ---------------------------------------------------------


def _decide(gitignore: str, path: str, is_dir: bool = False, base: Path = Path("/r")):
    return GitIgnore(base, gitignore.split("\n")).ignored(base / path, is_dir)


@pytest.mark.parametrize(
    ("gitignore", "path", "is_dir", "expected"),
    [
        # the last matching pattern decides; `!` re-includes
        ("*.py\n!keep.py", "src/keep.py", False, False),
        ("!keep.py\n*.py", "src/keep.py", False, True),
        ("*.py", "src/a.txt", False, None),
        # a trailing `/` matches folders only
        ("build/", "build", True, True),
        ("build/", "build", False, None),
        # a slash at the start or in the middle anchors the pattern to the .gitignore's folder
        ("/top.py", "top.py", False, True),
        ("/top.py", "sub/top.py", False, None),
        ("src/gen", "src/gen", True, True),
        ("src/gen", "pkg/src/gen", True, None),
        ("gen", "pkg/src/gen", True, True),
        # `*` and `?` do not cross `/`; `**` does, as a whole segment
        ("src/*.py", "src/a/b.py", False, None),
        ("src/*.py", "src/b.py", False, True),
        ("src/?.py", "src/b.py", False, True),
        ("src/**/b.py", "src/b.py", False, True),
        ("src/**/b.py", "src/x/y/b.py", False, True),
        ("**/b.py", "x/y/b.py", False, True),
        ("src/**", "src/x/y/b.py", False, True),
        ("src/**", "src", True, None),
        ("a/**/b/**/c", "a/x/b/y/b/c", False, True),
        ("a**b", "axxb", False, True),
        # git compares the text before the first wildcard on its own
        ("a**/x", "ab/c/x", False, True),
        # bracket expressions, POSIX classes, negated classes; never `/`
        ("[ab].py", "b.py", False, True),
        ("[!ab].py", "b.py", False, None),
        ("[^ab].py", "c.py", False, True),
        ("x[[:digit:]].py", "x7.py", False, True),
        ("a[/]b", "a/b", False, None),
        ("[z-a].py", "b.py", False, None),
        ("[ab", "[ab", False, None),  # unclosed: matches nothing, as in git
        # escapes, comments, trailing spaces
        ("\\#notes.py", "#notes.py", False, True),
        ("# comment.py", "# comment.py", False, None),
        ("\\!bang.py", "!bang.py", False, True),
        ("a\\*.py", "a*.py", False, True),
        ("a\\*.py", "ab.py", False, None),
        ("name.py   ", "name.py", False, True),
        ("name.py\\ ", "name.py ", False, True),
        ("crlf.py\r", "crlf.py", False, True),
        # `*.log`-style suffixes and plain names are looked up, not matched one by one
        ("*.log\n!keep.log", "x/keep.log", False, False),
        ("*.log\n!keep.log\n*.log", "x/keep.log", False, True),
    ],
)
def test_gitignore_semantics(gitignore, path, is_dir, expected):
    assert _decide(gitignore, path, is_dir) is expected


ATOMS = ["a", "b", "ab", "*", "?", "**", "[ab]", "[!a]", "[a-b]", "a*", "*b", "*a*", "\\a", "x"]
NAMES = ["a", "b", "ab", "ba", "aa", "x", "bab"]


def _random_pattern(rng: random.Random) -> str:
    segments = ["".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 2)))
                for _ in range(rng.randint(1, 4))]
    pattern = "/".join(segments)
    if rng.random() < 0.2:
        pattern = "/" + pattern
    if rng.random() < 0.2:
        pattern += "/"
    if rng.random() < 0.25:
        pattern = "!" + pattern
    return pattern


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_walk_keeps_the_files_git_keeps(tmp_path):
    """Random trees and .gitignore files: modellint lints exactly the *.py files that
    `git ls-files --others --exclude-standard` lists."""
    rng = random.Random(16)
    for case in range(40):
        root = tmp_path / f"case{case}"
        for _ in range(20):
            parts = [rng.choice(NAMES) for _ in range(rng.randint(0, 3))]
            target = root.joinpath(*parts, rng.choice(NAMES) + ".py")
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("")
            except OSError:  # a name already taken by a file or a folder
                pass
        patterns = [_random_pattern(rng) for _ in range(rng.randint(1, 6))]
        (root / ".gitignore").write_text("\n".join(patterns) + "\n")
        folders = [p for p in root.rglob("*") if p.is_dir()]
        if folders and rng.random() < 0.5:
            nested = rng.choice(folders) / ".gitignore"
            nested.write_text("\n".join(_random_pattern(rng) for _ in range(3)) + "\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        listed = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard", "--", "*.py"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.split()
        ours = [path.relative_to(root).as_posix()
                for _, path in discover([str(root)], lambda *_: False)]
        assert sorted(ours) == sorted(listed), (case, patterns)


def test_the_python_3_10_form_of_the_atomic_groups_matches_the_same(monkeypatch):
    import modellint.static.discover as discover_module

    cases = [("a*/**/b*c*d/**/x", "ab/q/r/bxcyd/z/x"), ("*a*b*c", "zzazzbzzc"),
             ("a*/**/b*c*d/**/x", "ab/q/r/bxcyd/z/y"), ("*a*b*c", "zzazzbzz")]
    atomic = [_decide(pattern, path) for pattern, path in cases]
    monkeypatch.setattr(discover_module, "_ATOMIC_GROUPS", False)
    assert [_decide(pattern, path) for pattern, path in cases] == atomic == [True, True, None, None]


def test_read_file_bytes_names_what_it_refuses(tmp_path):
    from modellint.static.discover import read_file_bytes

    with pytest.raises(OSError) as info:
        read_file_bytes(tmp_path)
    assert info.value.strerror == "not a regular file (a folder)"
    (tmp_path / "small.py").write_bytes(b"abc")
    assert read_file_bytes(tmp_path / "small.py", limit=3) == b"abc"
    with pytest.raises(OSError, match="larger than"):
        read_file_bytes(tmp_path / "small.py", limit=2)
