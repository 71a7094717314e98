"""The static pass never imports or runs what it reads; names and cache entries cannot inject."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

# ML105 at line 5, column 9 (a safe fix: add `self`)
GOOD = """\
import torch.nn as nn


class Net(nn.Module):
    def forward(x):
        return x
"""


def run(command: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(extra)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def console_script() -> str:
    script = Path(sys.executable).with_name("modellint")
    if not script.exists():
        pytest.skip(f"no `modellint` command beside {sys.executable}")
    return str(script)


def hostile(marker: Path, what: str) -> str:
    """Python that, if it ever ran, would leave a trace in `marker`."""
    return (
        "import os\n"
        f"with open({str(marker)!r}, 'a') as trace:\n"
        f"    trace.write({what!r} + '\\n')\n"
        f"os.system('echo ran >> ' + {str(marker)!r})\n"
    )


# files that Python would run on import, or on `python -m`, `pytest` or `pip install`
PROJECT_FILES = ["evil.py", "pkg/__init__.py", "pkg/__main__.py", "conftest.py", "setup.py",
                 "sitecustomize.py", "usercustomize.py", "__main__.py"]
# names of modules that modellint itself imports: found on sys.path before the real ones only
# when the current folder is on it (`python -m` puts it there, the `modellint` command does not)
SHADOWING_FILES = ["pluggy.py", "libcst.py", "json.py", "multiprocessing.py", "difflib.py",
                   "tempfile.py", "tomllib.py", "hashlib.py", "fnmatch.py", "urllib/__init__.py"]


def _project(root: Path, marker: Path, names: list[str]) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hostile(marker, name) + "\n\n" + GOOD)


def _assert_linted_but_never_run(root: Path, marker: Path, command: list[str],
                                 names: list[str]) -> None:
    for extra in ([], ["--select", "ALL", "-j", "2"], ["--diff"], ["--fix", "--unsafe-fixes"]):
        proc = run([*command, "check", ".", "--no-cache", "--format", "json", *extra], root)
        assert proc.returncode in (0, 1), proc.stderr
        assert not marker.exists(), (extra, marker.read_text())
        if extra[:1] != ["--diff"]:
            assert "Traceback" not in proc.stderr, proc.stderr
    for name in names:  # the fix ran: each file was read, parsed and rewritten, never executed
        text = (root / name).read_text()
        assert "    def forward(self, x):" in text and text.startswith("import os\n"), name


def test_the_modellint_command_never_imports_what_it_lints(tmp_path):
    marker = tmp_path / "MARKER"
    root = tmp_path / "project"
    names = PROJECT_FILES + SHADOWING_FILES
    _project(root, marker, names)
    _assert_linted_but_never_run(root, marker, [console_script()], names)


def test_python_m_modellint_never_imports_what_it_lints(tmp_path):
    marker = tmp_path / "MARKER"
    root = tmp_path / "project"
    _project(root, marker, PROJECT_FILES)
    _assert_linted_but_never_run(root, marker, [sys.executable, "-m", "modellint"], PROJECT_FILES)


HOSTILE_NAMES = [
    "a%0A::error file=x::b.py",
    "line\n::error file=y,line=1::injected.py",
    "cr\r%0D%25.py",
    'quote"and\\backslash.py',
    "tab\tand space.py",
    "ünïcødé ✓.py",
    "{\"path\": 1}.py",
]


@pytest.mark.skipif(sys.platform == "win32", reason="file names with newlines")
def test_hostile_file_names_round_trip_through_json_and_sarif(tmp_path):
    for name in HOSTILE_NAMES:
        (tmp_path / name).write_text(GOOD)
    command = [sys.executable, "-m", "modellint", "check", ".", "--select", "ML105",
               "--no-cache"]
    proc = run([*command, "--format", "json"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout)
    assert sorted(f["path"] for f in findings) == sorted(HOSTILE_NAMES)
    assert {(f["code"], f["line"], f["column"]) for f in findings} == {("ML105", 5, 9)}

    proc = run([*command, "--format", "sarif"], tmp_path)
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    uris = [
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for result in document["runs"][0]["results"]
    ]
    assert all("\n" not in uri and "\r" not in uri and " " not in uri for uri in uris)
    assert sorted(urllib.parse.unquote(uri) for uri in uris) == sorted(HOSTILE_NAMES)


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo ran > {self.marker}",))


def test_a_poisoned_cache_is_ignored_and_never_runs(tmp_path):
    marker = tmp_path / "MARKER"
    (tmp_path / "net.py").write_text(GOOD)
    (tmp_path / "other.py").write_text(GOOD.replace("Net", "Other"))
    command = [sys.executable, "-m", "modellint", "check", ".", "--format", "json"]
    not_ci = {"CI": "", "GITHUB_ACTIONS": ""}  # in CI the checkout's cache is off
    first = run(command, tmp_path, **not_ci)
    assert first.returncode == 1, first.stderr
    entries = sorted(tmp_path.rglob(".modellint_cache/**/*.json"))
    # the summary and project facts of each file, the run's digests, the project's
    # summaries, its files' imports and their stats (facts/); the findings of the run's
    # files as one entry (runs/), none of a file alone
    assert len([e for e in entries if not {"facts", "runs"} & set(e.parts)]) == 0, sorted(
        tmp_path.rglob("*"))
    assert len([e for e in entries if "runs" in e.parts]) == 1
    assert len(entries) == 7, sorted(tmp_path.rglob("*"))
    # a pickle that would run a command, and JSON of the wrong shape, in every entry
    for number, entry in enumerate(entries):
        if number % 2:
            entry.write_text(json.dumps({"format": 1, "findings": [{"code": ["ML105"]}]}))
        else:
            entry.write_bytes(pickle.dumps(_Payload(str(marker))))
    second = run(command, tmp_path, **not_ci)
    assert second.returncode == 1, second.stderr
    assert "Traceback" not in second.stderr
    assert not marker.exists()
    assert json.loads(second.stdout) == json.loads(first.stdout)
