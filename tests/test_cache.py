"""The results cache: reruns reuse results, and anything that decides them re-lints."""

from __future__ import annotations

from conftest import NET, write

PLUGIN = '''\
from modellint import hookimpl
from modellint.rule import Invalid, StaticRule


class Shout(StaticRule):
    """Calls to `shout`.

    ## What it does
    Finds `shout()`.

    ## Why is this bad?
    It is loud.

    ## Example
        shout()

    ## Use instead
        whisper()
    """

    code = "LOUD1"
    name = "shout"
    valid = ["whisper()\\n"]
    invalid = [Invalid("shout()\\n", line=1)]

    def visit_Call(self, node):
        if getattr(node.func, "value", None) == "shout":
            self.report(node, "MESSAGE")


@hookimpl
def modellint_add_rules():
    return [Shout]
'''


# in CI the cache inside the checkout is off (tests/test_trust.py); these tests are about it
NOT_CI = {"CI": "", "GITHUB_ACTIONS": ""}


def cache_env(tmp_path):
    return {"MODELLINT_CACHE_DIR": str(tmp_path / "cache")}


def entries(tmp_path):
    return sorted((tmp_path / "cache").glob("*/*.json"))


def test_rerun_uses_the_cache_and_gives_the_same_findings(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    first = cli("net.py", "--format", "json", env=env)
    assert len(entries(tmp_path)) == 1
    # beside: the file's project facts and the digests of the run's files
    assert len(list((tmp_path / "cache").glob("*/facts/*.json"))) == 2
    second = cli("net.py", "--format", "json", env=env)
    assert first.rc == second.rc == 1
    assert first.json() == second.json()
    text = cli("net.py", env=env)
    assert "11 |     def forward(x):" in text.out  # the excerpt survives the cache


def test_cache_folder_is_tagged_and_ignored_by_git(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    cli("net.py", env=NOT_CI)
    cache = tmp_path / ".modellint_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"


def test_no_cache_writes_nothing(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    result = cli("net.py", "--no-cache")
    assert result.rc == 1
    assert not (tmp_path / ".modellint_cache").exists()


def test_editing_a_file_relints_it(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    assert ("ML105", 11) in cli("net.py", "--format", "json", env=env).codes()
    path.write_text(NET.replace("def forward(x):", "def forward(self, x):"))
    assert ("ML105", 11) not in cli("net.py", "--format", "json", env=env).codes()


def test_changing_the_configuration_relints(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    assert ("ML105", 11) in cli("net.py", "--format", "json", env=env).codes()
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nignore = ["ML105"]\n')
    assert ("ML105", 11) not in cli("net.py", "--format", "json", env=env).codes()
    assert ("ML105", 11) not in cli(
        "net.py", "--format", "json", "--select", "ML103", env=env).codes()
    (tmp_path / "pyproject.toml").unlink()
    assert ("ML105", 11) in cli("net.py", "--format", "json", env=env).codes()


def test_changing_a_plugin_relints(modellint, tmp_path):
    write(tmp_path, "code.py", "shout()\n")
    plugin = write(tmp_path, "loud_rules.py", PLUGIN)
    env = cache_env(tmp_path)
    first = modellint("code.py", "-p", "loud_rules", "--format", "json", env=env)
    assert [f["message"] for f in first.json()] == ["MESSAGE"]
    plugin.write_text(PLUGIN.replace('"MESSAGE"', '"CHANGED"'))
    second = modellint("code.py", "-p", "loud_rules", "--format", "json", env=env)
    assert [f["message"] for f in second.json()] == ["CHANGED"]


def test_a_corrupt_cache_entry_is_ignored(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    expected = cli("net.py", "--format", "json", env=env).json()
    for entry in entries(tmp_path):
        entry.write_text('{"format": 1, "findings": [{"code": 3}]')
    assert cli("net.py", "--format", "json", env=env).json() == expected
    for entry in entries(tmp_path):
        entry.write_bytes(b"\x80\x00 not json")
    assert cli("net.py", "--format", "json", env=env).json() == expected
    for entry in entries(tmp_path):
        entry.write_text('{"format": 1, "findings": [{"code": "ML105"}]}')
    assert cli("net.py", "--format", "json", env=env).json() == expected


def test_fix_does_not_use_stale_results(cli, tmp_path):
    path = write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    cli("net.py", env=env)
    cli("net.py", "--fix", env=env)
    assert "def forward(self, x):" in path.read_text()
    assert ("ML105", 11) not in cli("net.py", "--format", "json", env=env).codes()


MODEL_LOGITS = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(784, 10))

    def forward(self, x):
        return self.head(x)
"""
TRAIN = """\
import torch.nn.functional as F
from models import Classifier


def step(x, y):
    model = Classifier()
    return F.cross_entropy(model(x), y)
"""


def test_editing_a_file_relints_the_files_that_import_it(cli, tmp_path):
    models = write(tmp_path, "models.py", MODEL_LOGITS)
    write(tmp_path, "train.py", TRAIN)
    write(tmp_path, "other.py", "x = 1\n")
    env = cache_env(tmp_path)
    assert cli(".", "--select", "ML308", "--format", "json", env=env).codes() == []
    before = set(entries(tmp_path))
    # the model now ends in a softmax: train.py's findings change though train.py did not
    models.write_text(MODEL_LOGITS.replace("nn.Linear(784, 10))", "nn.Linear(784, 10), "
                                           "nn.Softmax(dim=1))"))
    assert cli(".", "--select", "ML308", "--format", "json",
               env=env).codes() == [("ML308", 7)]
    # models.py and train.py were linted again; other.py was not
    assert len(set(entries(tmp_path)) - before) == 2


def test_a_rerun_reads_no_project_facts_unless_a_file_changed(tmp_path):
    from pathlib import Path

    from modellint.static.cache import Cache
    from modellint.static.index import index_files

    write(tmp_path, "models.py", MODEL_LOGITS)
    write(tmp_path, "train.py", TRAIN)
    cache = Cache(tmp_path / "cache", "0" * 32, key_directory=tmp_path / "key")
    assert cache.prepare()
    files = [(name, Path(tmp_path / name)) for name in ("models.py", "train.py")]
    first = index_files(files, cache)
    again = index_files(files, cache)
    assert again._loader is not None  # digests from the snapshot; facts not read
    assert again.digest("train.py") == first.digest("train.py")
    assert again.files == first.files and again._loader is None  # read when asked
    write(tmp_path, "models.py", MODEL_LOGITS.replace("784", "100"))
    changed = index_files(files, cache)
    assert changed._loader is None and changed.digest("train.py") != first.digest("train.py")
