"""A hostile repository cannot make modellint import its code, delete outside the cache, or hide
findings with a planted cache (issue 16 items 1-3): the `modellint` command, the GitHub Action
and the pre-commit hook, each driven for real."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_action import annotations, github_env
from test_precommit import GIT_ENV, REGISTRY_DOWN, ROOT, _git, _has_module, _log

# ML105 at line 5, column 9
BAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def forward(x):\n        return x\n"
WEEKS_AGO = time.time() - 30 * 24 * 3600
# what a repository can set that would change the outcome if a test inherited it
RUNNER_ENV = ("PYTHONPATH", "PYTHONSAFEPATH", "CI", "GITHUB_ACTIONS", "MODELLINT_CACHE_DIR",
              "MODELLINT_ALLOW_CONFIG_PLUGINS", "XDG_CACHE_HOME")


def evil(marker: Path) -> str:
    """A module that leaves `marker` behind if it is ever imported."""
    return f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('evil.py ran')\n"


def console_script() -> str:
    script = Path(sys.executable).with_name("modellint")
    if not script.exists():
        pytest.skip(f"no `modellint` command beside {sys.executable}")
    return str(script)


def modellint(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
    """The `modellint` command as a user runs it (not `python -m`, which puts the current folder
    on the path), outside CI, with its key kept under `home` unless `env` says otherwise."""
    environment = {k: v for k, v in os.environ.items() if k not in RUNNER_ENV}
    environment.update(XDG_CACHE_HOME=str(home), **env)
    return subprocess.run([console_script(), *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)


def findings(proc: subprocess.CompletedProcess) -> list[tuple[str, str, int]]:
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["code"], f["path"], f["line"]) for f in json.loads(proc.stdout))


def snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    """Every path under `folder` (links not followed) with its size and modification time."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(folder))] = (info.st_size, info.st_mtime)
    return found


def age(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (WEEKS_AGO, WEEKS_AGO), follow_symlinks=False)


@pytest.fixture
def repo(tmp_path):
    """A repository whose config names its own `evil` module as a plugin."""
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    (root / "models" / "bad.py").write_text(BAD)
    (root / "evil.py").write_text(evil(tmp_path / "MARKER"))
    (root / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["evil"]\n')
    return root


# 1. config-named plugins

def test_config_plugins_are_not_imported_without_opt_in(repo, tmp_path):
    home = tmp_path / "home"
    for args in (["check", ".", "--format", "json"], ["rules"], ["rule", "ML105"]):
        proc = modellint(*args, cwd=repo, home=home)
        assert not (tmp_path / "MARKER").exists(), args
        assert "Traceback" not in proc.stderr
        assert "not loading plugin 'evil'" in proc.stderr, proc.stderr
        assert "--allow-config-plugins" in proc.stderr
        assert "MODELLINT_ALLOW_CONFIG_PLUGINS=1" in proc.stderr
    checked = modellint("check", ".", "--format", "json", cwd=repo, home=home)
    assert checked.returncode == 1
    assert findings(checked) == [("ML105", "models/bad.py", 5)]
    # `python -I`, as the Action runs it, changes nothing
    proc = subprocess.run([sys.executable, "-I", "-m", "modellint", "check", "."], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and not (tmp_path / "MARKER").exists(), proc.stderr


LOCAL_RULES = '''\
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


def test_opting_in_loads_the_config_plugins_from_beside_the_config(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "localrules.py").write_text(LOCAL_RULES)
    (root / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["localrules"]\n')
    (root / "src" / "code.py").write_text("def f():\n    global x\n    x = 1\n")
    home = tmp_path / "home"
    for cwd in (root, root / "src"):  # the config's folder, not the current one
        flag = modellint("check", ".", "--format", "json", "--allow-config-plugins",
                         cwd=cwd, home=home)
        assert flag.returncode == 1, flag.stderr
        assert [f["code"] for f in json.loads(flag.stdout)] == ["LOC001"]
        assert "not loading" not in flag.stderr
    by_env = modellint("check", ".", "--format", "json", cwd=root, home=home,
                       MODELLINT_ALLOW_CONFIG_PLUGINS="1")
    assert [f["code"] for f in json.loads(by_env.stdout)] == ["LOC001"]
    listed = modellint("rules", "--allow-config-plugins", cwd=root, home=home)
    assert any(line.startswith("LOC001") for line in listed.stdout.splitlines())
    for refused in ("0", ""):
        off = modellint("check", ".", cwd=root, home=home,
                        MODELLINT_ALLOW_CONFIG_PLUGINS=refused)
        assert off.returncode == 0 and "not loading plugin 'localrules'" in off.stderr


def test_dash_p_imports_from_the_python_path_never_the_current_folder(repo, tmp_path):
    (repo / "pyproject.toml").unlink()
    home = tmp_path / "home"
    proc = modellint("check", ".", "-p", "evil", cwd=repo, home=home)
    assert proc.returncode == 2
    assert "plugin 'evil' failed to load" in proc.stderr and "PYTHONPATH=." in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "MARKER").exists()
    # the user's own explicit choice
    chosen = modellint("check", ".", "-p", "evil", cwd=repo, home=home, PYTHONPATH=".")
    assert chosen.returncode == 1, chosen.stderr
    assert (tmp_path / "MARKER").read_text() == "evil.py ran"


def test_neither_the_action_nor_the_hook_opts_in():
    import yaml

    from modellint.action import check_command

    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    action = (ROOT / "action.yml").read_text()
    for text in (hook["entry"], " ".join(hook.get("args", [])), action,
                 " ".join(check_command({}, "python"))):
        assert "--allow-config-plugins" not in text
        assert "MODELLINT_ALLOW_CONFIG_PLUGINS" not in text


def test_the_action_does_not_load_config_plugins(repo, tmp_path):
    """action.yml's run step (`python -I -m modellint.action run`) with the default args."""
    env = github_env(repo, args="check --select ML105,ML000", src=".")
    proc = subprocess.run([sys.executable, "-I", "-m", "modellint.action", "run"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert annotations(proc.stdout) == [("error", "models/bad.py")]
    assert not (tmp_path / "MARKER").exists()
    assert "not loading plugin 'evil'" in proc.stderr


# 2. the cache folder and pruning

def test_a_cache_folder_linked_out_of_the_repository_is_refused(tmp_path):
    """`.modellint_cache -> ..`: nothing outside the repository is written or deleted."""
    parent = tmp_path / "parent"
    repo = parent / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "bad.py").write_text(BAD)
    (repo / ".modellint_cache").symlink_to("..")
    for name in ("sibling-project", "0123456789abcdef0123456789abcdef"):
        (parent / name).mkdir()
        (parent / name / "keep.txt").write_text("not modellint's")
        age(parent / name / "keep.txt", parent / name)
    before = snapshot(parent)
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home")
    assert findings(proc) == [("ML105", "models/bad.py", 5)]
    assert snapshot(parent) == before
    assert not (parent / "CACHEDIR.TAG").exists() and not (parent / ".gitignore").exists()
    assert "not using the cache folder" in proc.stderr and "link" in proc.stderr


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_a_cache_dir_reached_through_a_linked_parent_is_refused(tmp_path, absolute):
    """`MODELLINT_CACHE_DIR=.cache/modellint` (as a workflow sets it) with a committed
    `.cache -> ../outside`: every name on the way is checked, not only the last."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "bad.py").write_text(BAD)
    outside.mkdir()
    (repo / ".cache").symlink_to("../outside")
    cache_dir = str(repo / ".cache" / "modellint") if absolute else ".cache/modellint"
    for _ in range(2):  # the second run would read what the first left
        proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home",
                         MODELLINT_CACHE_DIR=cache_dir)
        assert findings(proc) == [("ML105", "models/bad.py", 5)]
        assert "not using the cache folder" in proc.stderr and ".cache is a link" in proc.stderr
    assert list(outside.iterdir()) == []

    # a real folder on the way is used as before
    (repo / ".cache").unlink()
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home",
                     MODELLINT_CACHE_DIR=cache_dir)
    assert findings(proc) == [("ML105", "models/bad.py", 5)] and proc.stderr == ""
    assert (repo / ".cache" / "modellint" / "CACHEDIR.TAG").is_file()


def test_a_shared_cache_dir_that_is_not_modellints_loses_nothing(tmp_path):
    shared = tmp_path / "shared"
    for name in ("othertool", "fedcba9876543210fedcba9876543210"):
        (shared / name).mkdir(parents=True)
        (shared / name / "data.bin").write_bytes(b"other tool's")
        age(shared / name / "data.bin", shared / name)
    (tmp_path / "net.py").write_text(BAD)
    before = snapshot(shared)
    proc = modellint("check", "net.py", "--format", "json", cwd=tmp_path,
                     home=tmp_path / "home", MODELLINT_CACHE_DIR=str(shared))
    assert findings(proc) == [("ML105", "net.py", 5)]
    assert snapshot(shared) == before
    assert f"not using the cache folder {shared}" in proc.stderr
    assert "CACHEDIR.TAG" in proc.stderr


def test_pruning_removes_only_modellints_own_old_entries(tmp_path):
    shared = tmp_path / "shared"
    (tmp_path / "net.py").write_text(BAD)
    env = {"MODELLINT_CACHE_DIR": str(shared)}
    home = tmp_path / "home"
    modellint("check", "net.py", cwd=tmp_path, home=home, **env)
    assert (shared / "CACHEDIR.TAG").is_file()
    [current] = [p for p in shared.iterdir() if p.is_dir()]
    entry = findings_entry(current)
    # an old settings folder of modellint's, one holding something else too, a link to a
    # folder outside, and other tools' folders
    stale, mixed = shared / ("a" * 32), shared / ("b" * 32)
    outside = tmp_path / "outside"
    for folder in (stale, mixed, outside):
        folder.mkdir()
        shutil.copy(entry, folder / entry.name)
        (folder / ".tmp-abc_123").write_bytes(b"half an entry")
    (mixed / "notes.txt").write_text("someone's")
    (shared / ("c" * 32)).symlink_to(outside)
    (shared / "othertool").mkdir()
    (shared / "othertool" / entry.name).write_bytes(b"named like an entry, not in ours")
    for path in (stale, mixed, outside, shared / ("c" * 32), shared / "othertool",
                 *stale.iterdir(), *mixed.iterdir(), *outside.iterdir()):
        age(path)
    outside_before = snapshot(outside)
    proc = modellint("check", "net.py", cwd=tmp_path, home=home, **env)
    assert proc.returncode == 1, proc.stderr
    assert not stale.exists()
    assert sorted(p.name for p in mixed.iterdir()) == ["notes.txt"]
    assert snapshot(outside) == outside_before
    assert (shared / "othertool" / entry.name).exists()
    assert entry.exists()


def test_a_linked_settings_folder_is_refused(tmp_path):
    (tmp_path / "net.py").write_text(BAD)
    home = tmp_path / "home"
    modellint("check", "net.py", cwd=tmp_path, home=home)
    cache = tmp_path / ".modellint_cache"
    [settings] = [p for p in cache.iterdir() if p.is_dir()]
    shutil.rmtree(settings)
    outside = tmp_path / "outside"
    outside.mkdir()
    settings.symlink_to(outside)
    proc = modellint("check", "net.py", "--format", "json", cwd=tmp_path, home=home)
    assert findings(proc) == [("ML105", "net.py", 5)]
    assert "link" in proc.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_planted_fifo_entry_does_not_hang_the_run(tmp_path):
    (tmp_path / "net.py").write_text(BAD)
    home = tmp_path / "home"
    modellint("check", "net.py", cwd=tmp_path, home=home)
    for entry in (tmp_path / ".modellint_cache").glob("*/*.json"):
        entry.unlink()
        os.mkfifo(entry)
    proc = modellint("check", "net.py", "--format", "json", cwd=tmp_path, home=home)
    assert findings(proc) == [("ML105", "net.py", 5)]


# a pyproject.toml linked out of the tree (issue 23 item 16)

def test_a_pyproject_linked_out_of_its_folder_is_not_read(tmp_path):
    """Neither read (no TOML error quoting the file it leads to) nor applied; named with
    --config by the person running modellint, it is."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "bad.py").write_text(BAD)
    outside.mkdir()
    (outside / "credentials").write_text("GITHUB_TOKEN = ghp_secret0123456789\n")
    (repo / "pyproject.toml").symlink_to("../outside/credentials")
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home")
    assert findings(proc) == [("ML105", "models/bad.py", 5)]
    assert "not valid TOML" not in proc.stderr and "ghp_secret" not in proc.stderr
    assert "line 1" not in proc.stderr
    assert "not reading" in proc.stderr and "link to a file outside its folder" in proc.stderr

    # a valid config outside is not applied either
    (outside / "credentials").write_text('[tool.modellint]\nignore = ["ML"]\n')
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home")
    assert findings(proc) == [("ML105", "models/bad.py", 5)]
    named = modellint("check", ".", "--format", "json", "--config", "pyproject.toml", cwd=repo,
                      home=tmp_path / "home")
    assert findings(named) == [] and named.returncode == 0, named.stderr


def test_a_pyproject_linked_within_its_folder_is_read(tmp_path):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "bad.py").write_text(BAD)
    (repo / "config").mkdir()
    (repo / "config" / "modellint.toml").write_text('[tool.modellint]\nignore = ["ML105"]\n')
    (repo / "pyproject.toml").symlink_to("config/modellint.toml")
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "home")
    assert findings(proc) == [] and proc.stderr == ""


# 3. planted cache entries

def findings_entry(folder: Path) -> Path:
    """The one cache entry under `folder` that holds a file's findings (those in the folders
    below hold the project facts of files, and the outcomes of runs of several)."""
    [entry] = [path for path in folder.rglob("*.json") if path.parent.name not in (
        "facts", "runs") and "findings" in json.loads(path.read_bytes().partition(b"\n")[2])]
    return entry


def forge_no_findings(entry: Path, key_home: Path) -> None:
    """What an attacker commits: the entry their own modellint wrote for the bad file, its
    findings emptied and signed again with their own key."""
    header = entry.read_bytes().partition(b"\n")[0]
    payload = json.dumps({"findings": [], "classes": []})
    key = (key_home / "modellint" / "key").read_bytes()
    message = f"{entry.parent.name}/{entry.stem}\0{payload}".encode()
    mac = hmac.new(key, message, hashlib.sha256).hexdigest()
    entry.write_bytes(header.rsplit(b" ", 1)[0] + f" {mac}\n{payload}".encode())


def planted_repo(tmp_path: Path, *args: str) -> Path:
    """A repository that commits a `.modellint_cache` claiming its bad file is clean when
    checked with `args`."""
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "bad.py").write_text(BAD)
    attacker = tmp_path / "attacker-home"
    made = modellint("check", ".", *args, cwd=repo, home=attacker)
    assert made.returncode == 1, made.stderr
    forge_no_findings(findings_entry(repo / ".modellint_cache"), attacker)
    # the forgery works for whoever holds the key it was signed with
    fooled = modellint("check", ".", *args, cwd=repo, home=attacker)
    assert fooled.returncode == 0, fooled.stdout
    return repo


def test_a_planted_cache_entry_does_not_hide_findings(tmp_path):
    repo = planted_repo(tmp_path)
    proc = modellint("check", ".", "--format", "json", cwd=repo, home=tmp_path / "victim-home")
    assert findings(proc) == [("ML105", "models/bad.py", 5)]
    assert proc.returncode == 1


def test_in_ci_a_cache_inside_the_checkout_is_not_used(tmp_path):
    repo = planted_repo(tmp_path)
    listing = snapshot(repo / ".modellint_cache")
    # even a cache signed with the runner's own key: CI does not read the checkout's cache
    for ci in ({"CI": "true"}, {"GITHUB_ACTIONS": "true"}):
        proc = modellint("check", ".", "--format", "json", cwd=repo,
                         home=tmp_path / "attacker-home", **ci)
        assert findings(proc) == [("ML105", "models/bad.py", 5)], ci
    assert snapshot(repo / ".modellint_cache") == listing  # nor write it


def test_the_action_reports_a_file_its_planted_cache_calls_clean(tmp_path):
    repo = planted_repo(tmp_path, "--select", "ML105,ML000")
    env = github_env(repo, args="check --select ML105,ML000", src=".")
    proc = subprocess.run([sys.executable, "-I", "-m", "modellint.action", "run"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert annotations(proc.stdout) == [("error", "models/bad.py")]


def test_the_key_is_private_and_outside_the_repository(tmp_path):
    (tmp_path / "net.py").write_text(BAD)
    home = tmp_path / "home"
    assert modellint("check", "net.py", cwd=tmp_path, home=home).returncode == 1
    key = home / "modellint" / "key"
    assert len(key.read_bytes()) == 32
    if os.name == "posix":
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        # a key others can read is not trusted: the run goes on without the cache
        key.chmod(0o644)
        proc = modellint("check", "net.py", "--format", "json", cwd=tmp_path, home=home)
        assert findings(proc) == [("ML105", "net.py", 5)]
        assert "not private" in proc.stderr
    assert not list((tmp_path / ".modellint_cache").rglob("key"))


# the pre-commit hook, on a repository holding all three

@pytest.fixture
def hostile_hook_run(tmp_path):
    if shutil.which("pre-commit") is None and not _has_module("pre_commit"):
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    hooks = tmp_path / "modellint"
    shutil.copytree(ROOT, hooks, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "__pycache__", ".modellint_cache", "build", "dist", ".venv"))
    _git(hooks, "init", "-q")
    _git(hooks, "add", "-A")
    _git(hooks, "commit", "-q", "-m", "checkout under test")
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text(BAD)
    (project / "evil.py").write_text(evil(tmp_path / "MARKER"))
    (project / "pyproject.toml").write_text('[tool.modellint]\nplugins = ["evil"]\n')
    (project / ".modellint_cache").symlink_to("..")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "keep.txt").write_text("a sibling project")
    age(tmp_path / "sibling" / "keep.txt", tmp_path / "sibling")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    env = {k: v for k, v in os.environ.items() if k not in RUNNER_ENV}
    # a developer's machine (not CI), where the cache is on
    env.update(GIT_ENV, PRE_COMMIT_HOME=str(tmp_path / "cache"), NO_COLOR="1",
               XDG_CACHE_HOME=str(tmp_path / "home"))
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hooks), "modellint",
         "--files", "bad.py", "evil.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 and "An unexpected error has occurred" in output and any(
        s in output + _log(tmp_path) for s in REGISTRY_DOWN
    ):
        pytest.skip("pre-commit cannot install modellint: the package registry is unreachable")
    return proc


@pytest.mark.slow
def test_the_pre_commit_hook_on_a_hostile_repository(hostile_hook_run, tmp_path):
    proc = hostile_hook_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "bad.py:5:9: ML105" in proc.stdout
    assert not (tmp_path / "MARKER").exists()
    assert "not loading plugin 'evil'" in proc.stdout
    assert "not using the cache folder" in proc.stdout
    assert (tmp_path / "sibling" / "keep.txt").read_text() == "a sibling project"
    assert not (tmp_path / "CACHEDIR.TAG").exists() and not (tmp_path / ".gitignore").exists()
