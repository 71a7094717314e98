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


def kept_outcomes(tmp_path):
    """Display path -> (the file's key, its outcome) in the one entry of a run's outcomes."""
    import json

    [run] = (tmp_path / "cache").glob("*/runs/*.json")
    lines = run.read_bytes().split(b"\n")[1:]  # (the first holds the signature)
    return {item[0]: (item[1], item[2]) for item in map(json.loads, lines)}


def test_rerun_uses_the_cache_and_gives_the_same_findings(cli, tmp_path):
    write(tmp_path, "net.py", NET)
    env = cache_env(tmp_path)
    first = cli("net.py", "--format", "json", env=env)
    assert len(entries(tmp_path)) == 1
    # beside: the file's summary and project facts (one entry), the digests of the run's
    # files, the summaries of the project's files as one entry, their imports as another, and
    # their stats beside their digests
    assert len(list((tmp_path / "cache").glob("*/facts/*.json"))) == 5
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
    before = kept_outcomes(tmp_path)
    # the model now ends in a softmax: train.py's findings change though train.py did not
    models.write_text(MODEL_LOGITS.replace("nn.Linear(784, 10))", "nn.Linear(784, 10), "
                                           "nn.Softmax(dim=1))"))
    assert cli(".", "--select", "ML308", "--format", "json",
               env=env).codes() == [("ML308", 7)]
    # models.py and train.py were linted again (their keys changed); other.py was not
    after = kept_outcomes(tmp_path)
    assert {display for display in after if after[display] != before[display]} == {
        "models.py", "train.py"}
    assert entries(tmp_path) == []  # a run of several files keeps them in one entry


def test_facts_read_from_the_cache_keep_the_order_of_the_source(tmp_path):
    # (an entry written with its keys sorted gave a rerun the functions and classes in
    # another order than a cold run: call sites and children in another order)
    from pathlib import Path

    from modellint.static.cache import Cache
    from modellint.static.facts_cache import facts_digest
    from modellint.static.index import index_files

    write(tmp_path, "models.py", "import torch.nn as nn\n\n\ndef zeta(x):\n    return x\n\n\n"
          "def alpha(x):\n    return zeta(x)\n\n\nclass Zed(nn.Module):\n"
          "    def __init__(self):\n        super().__init__()\n        self.z = nn.ReLU()\n"
          "        self.a = nn.Tanh()\n\n\nclass Able(Zed):\n    pass\n")
    cache = Cache(tmp_path / "cache", "0" * 32, key_directory=tmp_path / "key")
    assert cache.prepare()
    files = [("models.py", Path(tmp_path / "models.py"))]
    cold, warm = index_files(files, cache), index_files(files, cache)
    first, again = cold.files["models.py"], warm.files["models.py"]
    assert again == first
    # one digest of the facts, whether extracted, read back, or written with the entry
    assert facts_digest(first) == facts_digest(again) == warm._facts_digest("models.py")
    for facts in (first, again):
        assert list(facts["functions"]) == ["zeta", "alpha"]
        assert list(facts["classes"]) == ["Zed", "Able"]


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


SOFTMAX_MODEL = MODEL_LOGITS.replace("nn.Linear(784, 10))", "nn.Linear(784, 10), "
                                     "nn.Softmax(dim=1))") + """

class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.ones(3)
""".replace("import torch.nn as nn", "")
SOFTMAX_MODEL = "import torch\n" + SOFTMAX_MODEL


def _project(tmp_path, marker: str = "pyproject"):
    write(tmp_path, "models.py", SOFTMAX_MODEL)
    write(tmp_path, "train.py", TRAIN)
    write(tmp_path, "pkg/util.py", "import torch\n\nx = torch.ones(2)\n")
    if marker == "pyproject":
        write(tmp_path, "pyproject.toml", "[tool.modellint]\n")
    elif marker == "git":
        (tmp_path / ".git").mkdir()


def test_a_run_on_one_file_reads_the_rest_of_the_project_for_the_index(cli, tmp_path):
    """pre-commit passes only the changed files: `train.py` still sees `models.py`'s Net,
    and only `train.py` is reported on."""
    _project(tmp_path)
    env = cache_env(tmp_path)
    full = cli(".", "--format", "json", env=env).json()
    assert {f["path"] for f in full} >= {"models.py", "train.py"}  # ML103 in models.py
    on_train = [(f["code"], f["line"]) for f in full if f["path"] == "train.py"]
    assert ("ML308", 7) in on_train
    one = cli("train.py", "--format", "json", env=env)
    assert {f["path"] for f in one.json()} == {"train.py"}
    assert one.codes() == on_train
    assert "1 file" not in one.out  # json: no summary; the text report counts one file
    text = cli("train.py", env=env)
    assert "in 1 file" in text.out and "models.py" not in text.out
    # a second run is served from the cache: nothing new is written
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*.json")}
    again = cli("train.py", "--format", "json", env=env)
    assert again.codes() == on_train
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*.json")} == before


def test_a_run_on_one_file_of_a_git_repository_without_config(cli, tmp_path):
    _project(tmp_path, marker="git")
    env = cache_env(tmp_path)
    assert ("ML308", 7) in cli("train.py", "--format", "json", env=env).codes()
    # from a subfolder, naming the file by a relative path: the same project, the same finding
    assert ("ML308", 7) in cli("../train.py", "--format", "json", env=env,
                               cwd=tmp_path / "pkg").codes()


def test_a_run_on_one_file_without_cache_still_reads_the_project(cli, tmp_path):
    _project(tmp_path)
    env = cache_env(tmp_path)
    assert ("ML308", 7) in cli("train.py", "--no-cache", "--format", "json", env=env).codes()
    assert not (tmp_path / "cache").exists()


def test_the_project_files_read_for_the_index_follow_the_excludes(cli, tmp_path):
    """A file the config excludes is not in a full run's index, nor in a one-file run's."""
    _project(tmp_path)
    write(tmp_path, "pyproject.toml", '[tool.modellint]\nexclude = ["models.py"]\n')
    env = cache_env(tmp_path)
    assert "ML308" not in {code for code, _ in cli(".", "--format", "json", env=env).codes()}
    assert "ML308" not in {code for code, _ in cli("train.py", "--format", "json",
                                                   env=env).codes()}


def test_without_a_project_root_only_the_named_files_are_read(cli, tmp_path):
    """No config and no repository: the run's own files are the whole project (modellint does
    not guess a root, which could be a home folder)."""
    write(tmp_path, "models.py", SOFTMAX_MODEL)
    write(tmp_path, "train.py", TRAIN)
    env = cache_env(tmp_path)
    assert ("ML308", 7) in cli(".", "--format", "json", env=env).codes()
    assert ("ML308", 7) in cli("train.py", "models.py", "--format", "json", env=env).codes()
    assert "ML308" not in {c for c, _ in cli("train.py", "--format", "json", env=env).codes()}


def test_a_config_given_with_config_does_not_make_its_folder_the_project(cli, tmp_path):
    """`--config ~/lint.toml` on one file of ~/work/proj: the home folder is not walked for the
    index; the file's repository is its project."""
    home = tmp_path / "home"
    write(home, "lint.toml", "[tool.modellint]\n")
    project = home / "work" / "proj"
    write(project, "models.py", SOFTMAX_MODEL)
    write(project, "train.py", TRAIN)
    env = cache_env(tmp_path)
    config = str(home / "lint.toml")
    # no repository: only the named file, as without a config
    one = cli("train.py", "--config", config, "--format", "json", env=env, cwd=project)
    assert "ML308" not in {code for code, _ in one.codes()}
    # a repository around the files is their project
    (project / ".git").mkdir()
    assert ("ML308", 7) in cli("train.py", "--config", config, "--format", "json", env=env,
                               cwd=project).codes()


# runs `check` in a fresh interpreter and says, on its last line of stderr, which of the heavy
# modules it imported (the report goes to --output-file)
WARM_PROBE = """\
import json, sys
from modellint.cli import main
rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m == "libcst" or m.startswith(
    ("libcst.", "modellint.rules", "modellint_example")) or m in ("modellint.rule", "pluggy"))
print("IMPORTED " + json.dumps(heavy), file=sys.stderr)
raise SystemExit(rc)
"""


def _probe(tmp_path, *args, env=None):
    """(findings of a `check --format json` run in a new process, the heavy modules it
    imported)."""
    import json
    import subprocess
    import sys

    from conftest import _env

    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, "check", "--format", "json", "-o", str(report),
         *args], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=_env({**cache_env(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg"), **NOT_CI,
                  **(env or {})}))
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("IMPORTED "), proc.stderr
    found = [(f["code"], f["line"], f["message"]) for f in json.loads(report.read_text())]
    return found, json.loads(last[len("IMPORTED "):])


def test_a_warm_run_imports_neither_libcst_nor_the_rules(tmp_path):
    """A rerun whose findings all come from the cache reads the plugins' manifest instead of
    importing them (and LibCST); a file that misses the cache imports them."""
    _project(tmp_path)
    cold, imported = _probe(tmp_path, ".")
    assert "libcst" in imported and "modellint.rules.core" in imported
    assert ("ML308", 7) in [(code, line) for code, line, _ in cold]
    warm, imported = _probe(tmp_path, ".")
    assert warm == cold
    assert imported == []
    # the manifest knows each rule's default: --select and --ignore still decide the run
    assert _probe(tmp_path, ".", "--select", "ML308")[0] == [
        f for f in cold if f[0] == "ML308"]
    # a pre-commit run on one unchanged file: from the cache too
    one, imported = _probe(tmp_path, "train.py")
    assert one == [f for f in cold if f in one] and ("ML308", 7) in [f[:2] for f in one]
    assert imported == []
    # a rerun on the same files reads the run's one entry, not each file's
    for entry in entries(tmp_path):
        entry.unlink()
    assert _probe(tmp_path, ".") == (cold, [])
    write(tmp_path, "pkg/util.py", "import torch\n\ny = torch.zeros(2)\n")
    again, imported = _probe(tmp_path, ".")
    assert again == cold and "libcst" in imported


def test_an_installed_plugin_edited_in_place_is_imported_again(tmp_path, example_plugin):
    """The manifest lists the plugins' files: editing an installed plugin's rule (as an
    editable install does) makes the next run import it, and its findings change."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(example_plugin, site)
    write(tmp_path, "net.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
                              "    def forward(self, x):\n        print(x)\n        return x\n")
    env = {"PYTHONPATH": str(site)}
    first, imported = _probe(tmp_path, "net.py", env=env)
    assert [f[0] for f in first] == ["XMP101"] and "modellint_example.rules" in imported
    warm, imported = _probe(tmp_path, "net.py", env=env)
    assert warm == first and imported == []
    # a file edited: with an installed plugin's rule in the run, the plugins load as usual
    write(tmp_path, "net.py", (tmp_path / "net.py").read_text() + "\n")
    edited, imported = _probe(tmp_path, "net.py", env=env)
    assert edited == first and "modellint_example.rules" in imported
    rules = site / "modellint_example" / "rules.py"
    rules.write_text(rules.read_text().replace("default_enabled = True",
                                               "default_enabled = False"))
    edited, imported = _probe(tmp_path, "net.py", env=env)
    assert edited == [] and "modellint_example.rules" in imported
    # and without the plugin on the path, its rule is gone (another environment)
    assert _probe(tmp_path, "net.py")[0] == []


def test_a_planted_plugin_manifest_is_not_believed(tmp_path):
    """A manifest not signed with this user's key (planted, or edited to hide a rule) is
    ignored: the plugins are imported and every rule runs."""
    import json

    _project(tmp_path)
    cold, _ = _probe(tmp_path, ".")
    manifests = list((tmp_path / "xdg" / "modellint" / "registry").glob("*.json"))
    assert len(manifests) == 1
    header, _, payload = manifests[0].read_bytes().partition(b"\n")
    manifest = json.loads(payload)
    del manifest["rules"]["ML308"]
    manifests[0].write_bytes(header + b"\n" + json.dumps(manifest).encode())
    found, imported = _probe(tmp_path, ".", "--no-cache")
    assert found == cold
    found, imported = _probe(tmp_path, ".")
    assert found == cold and "modellint.rules.core" in imported


def _three_files(tmp_path, other: str):
    """(a cache, the project's files): models.py, train.py that imports it, and `other`."""
    from pathlib import Path

    from modellint.static.cache import Cache

    write(tmp_path, "models.py", MODEL_LOGITS)
    write(tmp_path, "train.py", TRAIN)
    write(tmp_path, "other.py", other)
    cache = Cache(tmp_path / "cache", "0" * 32, key_directory=tmp_path / "key")
    assert cache.prepare()
    return cache, [(name, Path(tmp_path / name)) for name in ("models.py", "other.py", "train.py")]


# `check` in a fresh interpreter, whose choice of rules reads the file as it was before the
# edit (`runner._texts`): the file changed between the two reads
STALE_CHOICE_PROBE = """\
import sys
from modellint.cli import main
from modellint.static import runner
runner._texts = lambda paths: iter(["x = 1\\n"])
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_file_edited_after_the_run_chose_its_rules_is_linted_with_every_rule(tmp_path):
    """The run reads the files it lints to leave out the rule modules that cannot run on them;
    a file saved again before its lint reads it holds words of a rule left out: it is linted
    with every rule, and what is cached for it is what a run without the cache finds."""
    import json
    import subprocess
    import sys

    from conftest import _env

    write(tmp_path, "m.py", "import torch\nimport torch.nn.functional as F\n\n"
                            "y = F.sigmoid(torch.ones(3))\n")
    env = _env({**cache_env(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg"), **NOT_CI})
    check = ["check", "--format", "json", "-o", str(tmp_path / "report.json"), "m.py"]

    def codes(*command: str) -> list:
        proc = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        return sorted(f["code"] for f in json.loads((tmp_path / "report.json").read_text()))

    plain = codes("-m", "modellint", *check, "--no-cache")
    assert "ML903" in plain  # a rule of a module that "x = 1" leaves out
    write(tmp_path, "seed.py", "import torch\n")
    # the same interpreter's command line: the manifest is kept per Python path
    fresh = "import sys\nfrom modellint.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    codes("-c", fresh, *check[:-1], "seed.py")  # writes the plugins' manifest
    assert codes("-c", STALE_CHOICE_PROBE, *check) == plain
    assert codes("-c", fresh, *check) == plain  # from the cache


def test_a_changed_file_parses_only_the_facts_that_are_looked_up(tmp_path):
    """After an edit the snapshot misses: the other files come from their cached summaries
    (imports, digests), and a file's facts are parsed when a rule looks them up; the digests
    are those an index without cache computes."""
    from modellint.static.index import index_files

    cache, files = _three_files(tmp_path, "import torch\n\nx = torch.ones(2)\n")
    index_files(files, cache)
    write(tmp_path, "train.py", TRAIN + "\n\nLATER = 1\n")
    changed = index_files(files, cache)
    fresh = index_files(files, None)
    assert changed._loader is None and set(changed._pending) == {"models.py", "other.py"}
    assert all(changed.digest(path) == fresh.digest(path) for path, _ in files)
    assert changed.files["models.py"] == fresh.files["models.py"]
    assert set(changed._pending) == {"other.py"}
    assert dict(changed.files) == dict(fresh.files) and not changed._pending


def test_with_a_file_added_each_summary_is_read_alone_and_an_altered_entry_is_not_believed(
        tmp_path):
    """A file added, the project's entries miss: every other file's summary comes from its own
    entry (the first of its two parts), and its facts are decoded only when asked. One signature
    covers both parts: an entry whose facts were altered is not believed, and the file's facts
    are extracted again."""
    from modellint.static.index import index_files

    cache, files = _three_files(tmp_path, "import torch\n\nx = torch.ones(2)\n")
    index_files(files, cache)
    write(tmp_path, "extra.py", "import torch\n")
    more = [*files, ("extra.py", tmp_path / "extra.py")]
    fresh = index_files(more, None)
    added = index_files(more, cache)
    assert set(added._pending) == {"models.py", "other.py", "train.py"}
    assert dict(added.files) == dict(fresh.files) and not added._pending

    altered = 0
    for entry in (tmp_path / "cache").glob("*/facts/*.json"):
        header, _, payload = entry.read_bytes().partition(b"\n")
        summary, _, facts = payload.partition(b"\n")
        if b"other.py" not in summary and facts and b"torch.ones" in facts:
            entry.write_bytes(header + b"\n" + summary + b"\n"
                              + facts.replace(b"torch.ones", b"torch.zeros"))
            altered += 1
    assert altered == 1  # other.py's (the summaries hold no file names)
    # the same files: its summary from the project's entry, its facts extracted again
    assert dict(index_files(more, cache).files) == dict(fresh.files)
    write(tmp_path, "extra.py", "import torch\n")  # (rewritten by the extraction above)
    for entry in (tmp_path / "cache").glob("*/facts/*.json"):
        header, _, payload = entry.read_bytes().partition(b"\n")
        if b"torch.ones" in payload and b"other.py" not in payload:
            entry.write_bytes(header + b"\n" + payload.replace(b"torch.ones", b"torch.zeros"))
    # another set of files: its summary from its own entry, not believed either
    write(tmp_path, "second.py", "x = 1\n")
    most = [*more, ("second.py", tmp_path / "second.py")]
    other = index_files(most, cache)
    assert "other.py" not in other._pending and "models.py" in other._pending
    assert dict(other.files) == dict(index_files(most, None).files)


def test_the_project_entry_keeps_the_imports_apart_and_a_run_reads_them_when_asked(tmp_path):
    """The summaries of the project's files, one entry, come without their imports (most of
    it): a run on an edited file keeps which files each file imports and reads no imports;
    asked for an unchanged file's imports, the index reads them from the project's imports
    entry, without parsing that file's facts."""
    from modellint.static.facts_cache import _imports_key, _summaries_key
    from modellint.static.index import index_files

    cache, files = _three_files(tmp_path, "import torch\nfrom models import Net\n\nx = 1\n")
    index_files(files, cache, linted=["train.py"])  # which files each one imports, found
    summaries = cache.get_facts(_summaries_key(files), required=("files",))
    imports = cache.get_facts(_imports_key(files), required=("files",))
    assert summaries is not None and imports is not None
    assert not any("imports" in summary for _, summary in summaries["files"].values())
    assert set(imports["files"]) == {"models.py", "other.py", "train.py"}
    write(tmp_path, "train.py", TRAIN + "\n\nLATER = 1\n")
    changed = index_files(files, cache, linted=["train.py"])
    fresh = index_files(files, None)
    assert all(changed.digest(path) == fresh.digest(path) for path, _ in files)
    assert changed.importers("models.py") == fresh.importers("models.py")
    assert changed._unchanged_imports is None  # the entry of the imports was not read
    assert changed.imports_of("other.py") == fresh.files["other.py"]["imports"]
    assert changed._unchanged_imports is not None and "other.py" in changed._pending


def test_manifests_of_other_environments_unused_for_a_week_are_removed(tmp_path):
    import os
    import time

    from modellint.static.cache import MAX_AGE_SECONDS, manifest_store

    store = manifest_store({"XDG_CACHE_HOME": str(tmp_path)})
    assert store is not None
    store.put_manifest("a" * 64, {"rules": {}})
    store.put_manifest("b" * 64, {"rules": {}})
    mine = store.directory / ("c" * 64 + ".txt")  # not a name modellint writes: kept
    mine.write_text("x")
    old = time.time() - MAX_AGE_SECONDS - 60
    for path in (store.directory / ("a" * 64 + ".json"), store.directory / ("b" * 64 + ".json"),
                 mine):
        os.utime(path, (old, old))
    assert store.get_manifest("b" * 64) == {"rules": {}}  # read: used
    store.put_manifest("d" * 64, {"rules": {}})
    assert sorted(p.name[:1] for p in store.directory.iterdir()) == ["b", "c", "d"]


def test_standard_input_is_linted_with_the_project_index(cli, tmp_path, monkeypatch):
    """An editor pipes its unsaved buffer (`--stdin-filename train.py`): the buffer sees the
    project's `models.py` from disk, and the buffer's text, not the file's, is what is linted
    and indexed."""
    import io

    _project(tmp_path)
    write(tmp_path, "train.py", "x = 1\n")  # what is on disk is not what the editor holds
    env = cache_env(tmp_path)
    for _ in range(2):  # the second from the cache
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(TRAIN.encode())))
        result = cli("--stdin-filename", "train.py", "--format", "json", env=env)
        assert ("ML308", 7) in result.codes(), result
    # the project's file changes on disk: the buffer's finding follows it
    write(tmp_path, "models.py", SOFTMAX_MODEL.replace(", nn.Softmax(dim=1))", ")"))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(TRAIN.encode())))
    assert ("ML308", 7) not in cli("--stdin-filename", "train.py", "--format", "json",
                                   env=env).codes()


def test_only_the_latest_runs_are_kept_as_one_entry(cli, tmp_path):
    from modellint.static.cache import KEPT_RUNS

    write(tmp_path, "a.py", "import torch\n")
    env = cache_env(tmp_path)
    for number in range(KEPT_RUNS + 3):
        write(tmp_path, f"b{number}.py", f"x = {number}\n")  # another project each time
        cli(".", env=env)
    runs = list((tmp_path / "cache").glob("*/runs/*.json"))
    assert len(runs) == KEPT_RUNS
    # the latest is among them: a rerun is answered from it alone, writing nothing
    written = {path: path.stat().st_mtime_ns for path in runs}
    assert cli(".", env=env).rc == 0
    assert {path: path.stat().st_mtime_ns
            for path in (tmp_path / "cache").glob("*/runs/*.json")} == written
    # the same project after an edit: its entry again, not a new one
    write(tmp_path, "a.py", "import torch\n\n\nx = torch.ones(2)\n")
    assert cli(".", env=env).rc == 0
    assert len(list((tmp_path / "cache").glob("*/runs/*.json"))) == KEPT_RUNS


def test_an_interrupted_run_keeps_the_outcomes_of_the_files_it_finished(cli, tmp_path,
                                                                         monkeypatch):
    from modellint.static import runner

    for name in ("a.py", "b.py", "c.py"):
        write(tmp_path, name, NET)
    lint_file = runner.lint_file

    def interrupted(display, *args, **kwargs):
        if display == "c.py":
            raise KeyboardInterrupt
        return lint_file(display, *args, **kwargs)

    monkeypatch.setattr(runner, "lint_file", interrupted)
    env = cache_env(tmp_path)
    assert cli(".", "--jobs", "1", env=env).rc == 130
    assert set(kept_outcomes(tmp_path)) == {"a.py", "b.py"}
    monkeypatch.setattr(runner, "lint_file", lint_file)
    expected = cli(".", "--format", "json", "--no-cache").json()
    assert {f["path"] for f in expected} == {"a.py", "b.py", "c.py"}
    assert cli(".", "--format", "json", env=env).json() == expected
    assert set(kept_outcomes(tmp_path)) == {"a.py", "b.py", "c.py"}


def test_a_run_on_some_of_the_project_files_shares_the_entry_of_a_run_on_all(cli, tmp_path):
    """The entry of a run's outcomes is named by the project's files: a run on a folder of
    the project after a run on all of it is answered from that entry, and what it lints again
    is kept beside the others' outcomes."""
    _project(tmp_path)
    env = cache_env(tmp_path)
    whole = cli(".", "--format", "json", env=env).json()
    first = kept_outcomes(tmp_path)
    assert set(first) == {"models.py", "train.py", "pkg/util.py"}
    some = [f for f in whole if f["path"] in ("models.py", "pkg/util.py")]
    assert some and cli("pkg", "models.py", "--format", "json", env=env).json() == some
    assert kept_outcomes(tmp_path) == first  # nothing linted, nothing written
    write(tmp_path, "pkg/util.py", "import torch\n\ny = torch.zeros(2)\n")
    cli("pkg", "models.py", "--format", "json", env=env)
    again = kept_outcomes(tmp_path)
    assert again["models.py"] == first["models.py"] and again["train.py"] == first["train.py"]
    assert again["pkg/util.py"] != first["pkg/util.py"]


class _FactsStore:
    """The facts half of the cache: each entry's JSON in memory, an empty file beside it for
    when it was written."""

    def __init__(self, folder):
        self.folder = folder
        self.entries = {}

    def get_facts_written(self, key, required=()):
        found = self.entries.get(key)
        if found is None or not set(required) <= found.keys():
            return None
        return dict(found), (self.folder / key).stat()

    def put_facts(self, key, facts):
        self.entries[key] = facts
        (self.folder / key).write_bytes(b"")


def test_a_file_whose_stat_is_unchanged_is_not_read_again_and_any_write_is_seen(
        tmp_path, monkeypatch):
    import hashlib
    import os
    import time

    import modellint.static.discover as discover
    from modellint.static import facts_cache

    monkeypatch.setattr(facts_cache, "_STAT_MARGIN_NS", 0)  # no file counts as just changed
    reads = []
    real_read = discover.read_file_bytes
    monkeypatch.setattr(discover, "read_file_bytes",
                        lambda path, limit: reads.append(path) or real_read(path, limit))
    files = [(name, tmp_path / name) for name in ("a.py", "b.py")]
    for name, path in files:
        path.write_text(f"NAME = {name!r}\n")
    time.sleep(0.05)  # past the tick of the file system's clock they were written in
    store = _FactsStore(tmp_path)
    first = facts_cache.content_digests(files, store)
    assert first == {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files}
    assert len(reads) == 2
    reads.clear()
    assert facts_cache.content_digests(files, store) == first
    assert reads == []
    # the same size, the modification time put back: its change time still moved
    path = files[0][1]
    stat = path.stat()
    path.write_text("NAME = 'A.py'\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = facts_cache.content_digests(files, store)
    assert reads == [path]
    assert third["a.py"] == hashlib.sha256(b"NAME = 'A.py'\n").hexdigest() != first["a.py"]
    assert third["b.py"] == first["b.py"]


def test_a_file_changed_just_before_its_stat_was_recorded_is_read_again(tmp_path, monkeypatch):
    import modellint.static.discover as discover
    from modellint.static import facts_cache

    reads = []
    real_read = discover.read_file_bytes
    monkeypatch.setattr(discover, "read_file_bytes",
                        lambda path, limit: reads.append(path) or real_read(path, limit))
    files = [("a.py", tmp_path / "a.py")]
    files[0][1].write_text("x = 1\n")
    store = _FactsStore(tmp_path)
    facts_cache.content_digests(files, store)
    facts_cache.content_digests(files, store)
    # written within the margin of the record: a write in the same tick of the file system's
    # clock could leave its stat as it was
    assert len(reads) == 2


def test_a_file_the_index_cannot_read_for_a_while_is_not_taken_as_imported(cli, tmp_path):
    """The project's summaries entry keeps which files each file imports; while `models.py`
    cannot be decoded the index holds no such file, and what `train.py` imports is resolved
    again, not taken from the entry (a reused target once ended the run with a KeyError)."""
    _project(tmp_path)
    env = cache_env(tmp_path)
    first = cli("train.py", "--format", "json", env=env)
    assert ("ML308", 7) in first.codes()
    good = (tmp_path / "models.py").read_bytes()
    (tmp_path / "models.py").write_bytes(b"\xff\xfe not utf-8 \x80\n")
    broken = cli("train.py", "--format", "json", env=env)
    assert "internal error" not in broken.err and broken.rc in (0, 1), broken
    (tmp_path / "models.py").write_bytes(good)
    again = cli("train.py", "--format", "json", env=env)
    assert again.codes() == first.codes()
    assert again.codes() == cli("train.py", "--format", "json", "--no-cache", env=env).codes()
