"""Score modellint and its peers on the real PyTorch mistakes of bench/bugs/cases; write docs/benchmark.md.

    python bench/bugs_cases.py fetch [--mirror DIR]   # once: the cases' code into the cache
    python bench/bugs.py [--peers-venv DIR] [--jobs N] [--only ID,...] [--tools NAME,...]
                         [--output docs/benchmark.md | --no-doc]

The cases' code is not in this repository (bench/bugs/README.md): `bench/bugs_cases.py fetch`
writes each case (its buggy files, its fixed twin where one exists) into the cache folder
`$MODELLINT_BUGS_DIR` (default `~/.cache/modellint-bugs`), `cases/<case-id>/`, and the scorer
reads them there (`--cases` reads another folder of the same layout). Each case is copied
afresh from there into `<case-id>/buggy` and `<case-id>/fixed` beside it for the tools: never
linted inside this checkout, where modellint's project index would read the whole repository.

The tools, all in one run:

- modellint, each case with the pass the case names: `modellint check` (static), `modellint
  check --runtime --device cpu` (runtime) or `modellint run -- <argv>` in a copy of the case
  (run; `python` in its argv is the interpreter running the scorer), with an empty config. It runs once with every off-by-default rule added
  (`--extend-select`); the column "modellint" keeps the findings of default-on rules, the column
  "modellint (all rules)" keeps them all.
- the peers, static only, each over every tree in one batch: TorchFix (`torchfix --select ALL`;
  its column keeps its default rules, everything but TOR3xx/TOR4xx/TOR9xx, and "TorchFix (all
  rules)" keeps all), torch-preflight (`torch-preflight check -f json`, every rule is on by
  default) and mldoctor (package mldoct: its CLI prints a table without lines, so the scorer
  calls the same `mldoctor.linter.lint_script` its `check` command calls, which returns each
  issue's type and line). A peer is found in `--peers-venv DIR` (its `bin/`) or on PATH; one that
  is not found is reported "not installed", never scored 0. torch-audit installs, but its CLI
  audits a model object named by an import string (`pkg.mod:Model`) without input, which gives
  only structural hints; its bug rules need its API inside a training loop and its findings
  name a submodule, not a line: it is listed, not scored. Installing them (torch comes from constraints.txt):

      python3 -m venv /work/peers-venv
      /work/peers-venv/bin/pip install -c constraints.txt torchfix==0.7.0 torch-preflight==0.5.0 \
          mldoct==1.0.0 torch-audit==0.3.0

A peer's codes map to the classes of bench/bugs/classes.toml by PEER_CLASSES below; modellint's
by the `code` of each class, and a case's own `expected` code counts for its class too (a
mistake another rule sees, as a run reports trainable parameters left out of every optimizer
group under ML305).

Scoring:

- a *hit* on a buggy case: a finding whose code maps to the case's class, in the mistake's file,
  at most WINDOW lines from the mistake's line (a peer finding without a line, mldoctor's
  whole-file checks, counts anywhere in that file). A case with several `[[mistake]]` entries is
  hit when one of them is. A run-pass finding of the class's code counts wherever it is
  located: the run sees the mistake's effect, and reports it where the effect is seen (another
  file, a library frame); the case table marks such hits "elsewhere". Anything else is a miss;
  a tool that failed on the case (exit status, timeout) is a miss too, and is named in the doc.
- a *false alarm on a fixed twin*: the same match, on the fixed files (the fix is local, so
  the window absorbs the few lines it adds or removes).
- on a known-good case (`kind = "good"`): every finding is listed as a false alarm to triage
  (for "modellint", the default-on rules; for "modellint (all rules)", every rule).

THE CASES' CODE IS UNTRUSTED DATA. The static tools only read it. The runtime pass builds the
cases' models and `modellint run` executes their training scripts, which is what those passes
are for: each runs in the case's copy in the cache, with a timeout (--timeout), so run this
where you would run the cases' code.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import bugs_cases  # noqa: E402  (bench/ is a folder of scripts, not a package)
from precision import rule_table  # noqa: E402

CASES_DIR = HERE / "bugs" / "cases"
CLASSES_FILE = HERE / "bugs" / "classes.toml"
DOC = ROOT / "docs" / "benchmark.md"
WINDOW = 5  # lines either side of the mistake's line within which a finding counts
PASSES = ("static", "runtime", "run")
KINDS = ("bug", "good")

# The peers' codes, and the classes of classes.toml each one detects. A code that detects no
# class of the table (a style or performance hint) maps to nothing: its findings still count on
# known-good cases.
PEER_CLASSES: dict[str, dict[str, tuple[str, ...]]] = {
    "torch-preflight": {
        "TG001": ("loss-kept-with-graph", "hook-keeps-graph"),
        "TG002": ("eval-without-no-grad",),
        "TG003": ("missing-zero-grad",),
        "TG004": ("dataloader-starves-device",),
        "TG005": ("softmax-before-cross-entropy",),
        "TG006": ("softmax-before-cross-entropy",),  # sigmoid before BCEWithLogitsLoss
        "TG007": ("sync-in-inner-loop",),
        "TG008": ("unseeded-training",),
        "TG010": ("memory-exceeds-target",),
        "TG011": ("eval-never-reset",),
        "TG012": ("ddp-without-distributed-sampler",),
        "TG013": ("transfer-repeated-every-step",),
        "TG014": ("accumulation-without-loss-scaling",),
    },
    "TorchFix": {
        "TOR001": ("deprecated-torch-api",),  # use of a removed function
        "TOR002": ("requires-grad-typo",),
        "TOR003": ("checkpoint-use-reentrant",),
        "TOR004": ("deprecated-torch-api",),  # import of a removed function
        "TOR101": ("deprecated-torch-api",),  # use of a deprecated function
        "TOR102": ("unsafe-torch-load",),
        "TOR103": ("deprecated-torch-api",),  # import of a deprecated function
        "TOR104": ("non-public-torch-api",),
        "TOR105": ("non-public-torch-api",),
        "TOR106": ("log-one-plus",),
        "TOR107": ("exp-minus-one",),
        "TOR201": ("torchvision-pretrained-argument",),
        "TOR202": ("deprecated-torch-api",),  # torchvision.transforms.v2.ToTensor
        "TOR203": (),  # `import torchvision.models as models` style
        "TOR401": ("dataloader-starves-device",),
        "TOR901": (),  # torch.library.Library in PyTorch's own tests
    },
    "mldoctor": {  # the `type` of an issue of mldoctor.linter.lint_script
        "cpu_bottleneck": ("dataloader-starves-device",),
        "missing_eval": ("eval-without-eval-mode",),
        "oom_leak": ("loss-kept-with-graph",),
        "missing_zero_grad": ("missing-zero-grad",),
        "double_softmax": ("softmax-before-cross-entropy",),
        "missing_clip": (),
        "syntax_error": (),
    },
}
TORCHFIX_OFF_BY_DEFAULT = ("TOR3", "TOR4", "TOR9")
PEER_INSTALL = ("python3 -m venv /work/peers-venv && /work/peers-venv/bin/pip install -c constraints.txt "
                "torchfix==0.7.0 torch-preflight==0.5.0 mldoct==1.0.0 torch-audit==0.3.0")

# mldoctor's CLI prints a table without lines; this asks its linter for the issues instead
MLDOCTOR_SCRIPT = """
import json, sys
from mldoctor.linter import lint_script
out = {}
for path in sys.argv[1:]:
    try:
        out[path] = [[i.get("type", ""), i.get("line"), i.get("message", "")]
                     for i in lint_script(path)[0]]
    except Exception as error:  # a file it cannot read: named, the others go on
        out[path] = [["error", None, repr(error)]]
print(json.dumps(out))
"""


# ------------------------------------------------------------------------------------- cases

@dataclasses.dataclass(frozen=True)
class Mistake:
    file: str
    line: int


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    folder: Path
    title: str
    cls: str
    expected: str
    pass_: str
    kind: str
    repo: str
    source_kind: str
    found_by: str
    mistakes: tuple[Mistake, ...]
    argv: tuple[str, ...]
    note: str = ""

    @property
    def has_fixed(self) -> bool:
        return (self.folder / "fixed").is_dir()


def load_classes(path: Path = CLASSES_FILE) -> dict[str, dict]:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def load_cases(folder: Path, classes: dict[str, dict]) -> tuple[list[Case], list[str]]:
    """The cases under `folder`, and a message for each case.toml that cannot be used."""
    cases: list[Case] = []
    problems: list[str] = []
    for toml in sorted(folder.glob("*/case.toml")):
        where = toml.parent.name
        try:
            with open(toml, "rb") as handle:
                data = tomllib.load(handle)
            source = data.get("source", {})
            mistakes = tuple(Mistake(str(m["file"]), int(m["line"])) for m in data.get("mistake", []))
            case = Case(
                id=str(data["id"]), folder=toml.parent, title=str(data.get("title", "")),
                cls=str(data.get("class", "")), expected=str(data.get("expected", "")),
                pass_=str(data.get("pass", "static")), kind=str(data.get("kind", "bug")),
                repo=str(source.get("repo", "")), source_kind=str(source.get("kind", "")),
                found_by=str(source.get("found_by", "")), mistakes=mistakes,
                argv=tuple(str(a) for a in data.get("run", {}).get("argv", [])),
                note=str(data.get("note", "")))
        except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as error:
            problems.append(f"{where}: unreadable case.toml ({type(error).__name__}: {error})")
            continue
        wrong = []
        if case.id != where:
            wrong.append(f"id {case.id!r} is not the folder's name")
        if case.kind == "bug" and case.cls not in classes:
            wrong.append(f"class {case.cls!r} is not in classes.toml")
        if case.pass_ not in PASSES:
            wrong.append(f"pass {case.pass_!r} is not one of {', '.join(PASSES)}")
        if case.kind not in KINDS:
            wrong.append(f"kind {case.kind!r} is not one of {', '.join(KINDS)}")
        if case.kind == "bug" and not case.mistakes:
            wrong.append("a bug case needs a [[mistake]]")
        if case.pass_ == "run" and not case.argv:
            wrong.append("a run case needs [run] argv")
        if not (case.folder / "buggy").is_dir():
            wrong.append("no buggy/ folder")
        for mistake in case.mistakes:
            if not (case.folder / "buggy" / mistake.file).is_file():
                wrong.append(f"mistake file {mistake.file} is not in buggy/")
        if wrong:
            problems.append(f"{where}: {'; '.join(wrong)}")
            continue
        cases.append(case)
    return cases, problems


cache_dir = bugs_cases.cache_dir


def stale_cases(cases_dir: Path) -> list[str]:
    """The committed cases whose code is not in `cases_dir` as their case.toml says today."""
    stale = []
    for toml in sorted(CASES_DIR.glob("*/case.toml")):
        cached = cases_dir / toml.parent.name / "case.toml"
        if not cached.is_file() or cached.read_bytes() != toml.read_bytes():
            stale.append(toml.parent.name)
    return stale


def stage(cases: list[Case], cache: Path) -> None:
    """A fresh copy of every case's trees in the cache (a run case writes into its copy)."""
    if cache.resolve().is_relative_to(ROOT):
        raise SystemExit(f"bugs: the cache {cache} is inside the repository; modellint's project "
                         "index would read the repository too (set MODELLINT_BUGS_DIR elsewhere)")
    for case in cases:
        target = cache / case.id
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for variant in ("buggy", "fixed"):
            if (case.folder / variant).is_dir():
                shutil.copytree(case.folder / variant, target / variant, symlinks=True)


# ---------------------------------------------------------------------------------- findings

@dataclasses.dataclass(frozen=True)
class Finding:
    tool: str
    case: str
    variant: str  # buggy | fixed
    path: str  # relative to the tree, or as the tool gave it when outside
    line: int | None  # None: the tool names the file only
    code: str
    message: str
    classes: tuple[str, ...]


@dataclasses.dataclass
class Outcome:
    """What one tool gave on one tree."""
    findings: list[Finding] = dataclasses.field(default_factory=list)
    error: str = ""  # why the tool gave no usable result
    seconds: float = 0.0  # wall time of modellint on this tree


TreeKey = tuple[str, str]  # case id, variant


def _relative(path: str, tree: Path) -> str:
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = tree / candidate
    try:
        return candidate.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        return path


def _tail(text: str, lines: int = 3) -> str:
    return " / ".join(text.strip().splitlines()[-lines:])[:300]


def _modellint_options(off_codes: str, config: Path) -> list[str]:
    return ["--format", "json", "--exit-zero", "-q", "--config", str(config),
            "--extend-select", off_codes]


def modellint_tree(case: Case, variant: str, tree: Path, off_codes: str, code_classes: dict,
                   timeout: float, run_steps: int) -> Outcome:
    """modellint with the case's pass (runtime or run: they execute the case's code) on one
    tree, in a process of its own, every off-by-default rule added."""
    with tempfile.TemporaryDirectory() as empty:
        config = Path(empty) / "modellint.toml"
        config.write_text("")
        common = _modellint_options(off_codes, config)
        if case.pass_ == "run":
            # `python` in a case's argv is this interpreter, the one modellint is installed in
            argv = [sys.executable if case.argv[0] in ("python", "python3") else case.argv[0],
                    *case.argv[1:]]
            command = [sys.executable, "-m", "modellint", "run", *common, "--steps", str(run_steps),
                       "--timeout", str(int(timeout)), "--", *argv]
        else:
            command = [sys.executable, "-m", "modellint", "check", *common, "--no-cache",
                       "--jobs", "1", "--runtime", "--device", "cpu", "--timeout",
                       str(int(timeout)), "--", "."]
        env = {**os.environ, "PYTHONPATH": str(tree), "CUDA_VISIBLE_DEVICES": ""}
        started = time.monotonic()
        try:
            proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env,
                                  timeout=timeout * 2 + 30)
        except subprocess.TimeoutExpired:
            return Outcome(error=f"timed out after {timeout * 2 + 30:.0f}s",
                           seconds=time.monotonic() - started)
    return _modellint_outcome(case, variant, tree, proc.returncode, proc.stdout, proc.stderr,
                              code_classes, time.monotonic() - started)


# One process checks many trees statically, one after the other, each in its own folder with
# its own project: it saves the start-up (importing libcst and the rules, about 0.6 s of CPU)
# that a process per tree pays. Static checking only reads the trees.
STATIC_WORKER = """
import contextlib, io, json, os, sys, time
from modellint.cli import main
for line in sys.stdin:
    task = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            os.chdir(task["cwd"])
            code = main(task["argv"])
        except SystemExit as stop:
            code = stop.code
        except BaseException as error:
            code = 2
            print(f"bugs worker: {type(error).__name__}: {error}", file=sys.stderr)
    print(json.dumps({"rc": code, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:],
                      "seconds": time.monotonic() - started}), flush=True)
"""


def modellint_static(tasks: list[tuple[Case, str, Path]], off_codes: str, code_classes: dict,
                     timeout: float) -> dict[TreeKey, Outcome]:
    """`modellint check` on each static tree, in one worker process."""
    outcomes: dict[TreeKey, Outcome] = {}
    with tempfile.TemporaryDirectory() as empty:
        config = Path(empty) / "modellint.toml"
        config.write_text("")
        argv = ["check", *_modellint_options(off_codes, config), "--no-cache", "--jobs", "1",
                "--", "."]
        lines = "".join(json.dumps({"cwd": str(tree), "argv": argv}) + "\n"
                        for _, _, tree in tasks)
        try:
            proc = subprocess.run([sys.executable, "-c", STATIC_WORKER], input=lines,
                                  capture_output=True, text=True,
                                  timeout=timeout + 30 * len(tasks))
            answers = proc.stdout.splitlines()
            failure = f"the worker stopped: {_tail(proc.stderr)}"
        except subprocess.TimeoutExpired as stop:
            answers = (stop.stdout or b"").decode(errors="replace").splitlines()
            failure = "the worker timed out"
    for index, (case, variant, tree) in enumerate(tasks):
        if index >= len(answers):
            outcomes[(case.id, variant)] = Outcome(error=failure)
            continue
        answer = json.loads(answers[index])
        outcomes[(case.id, variant)] = _modellint_outcome(
            case, variant, tree, answer["rc"], answer["stdout"], answer["stderr"], code_classes,
            answer["seconds"])
    return outcomes


def _modellint_outcome(case: Case, variant: str, tree: Path, returncode, stdout: str,
                       stderr: str, code_classes: dict, seconds: float) -> Outcome:
    try:
        found = json.loads(stdout or "null")
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, list):
        return Outcome(error=f"exit {returncode}: {_tail(stderr or stdout)}", seconds=seconds)
    outcome = Outcome(seconds=seconds)
    stopped = [item for item in found if item.get("code") == "ML003"]
    if case.pass_ == "run" and stopped:  # the script crashed: what it did not reach is unseen
        outcome.error = f"the script stopped: {_tail(str(stopped[0].get('message', '')), 1)}"
    for item in found:
        line = item.get("line")
        outcome.findings.append(Finding(
            "modellint", case.id, variant, _relative(str(item.get("path", "")), tree),
            line if isinstance(line, int) else None, str(item.get("code", "")),
            str(item.get("message", "")), code_classes.get(item.get("code"), ())
            + ((case.cls,) if case.expected and item.get("code") == case.expected else ())))
    return outcome


def _split_batch_path(path: str, cache: Path) -> tuple[TreeKey, str] | None:
    """(case id, variant) and the path inside the tree, for a path a batched peer printed."""
    absolute = Path(path) if Path(path).is_absolute() else cache / path
    try:
        parts = absolute.resolve().relative_to(cache.resolve()).parts
    except ValueError:
        return None
    if len(parts) < 3:
        return None
    return (parts[0], parts[1]), "/".join(parts[2:])


def _batch_result(tool: str, rows, trees: list[TreeKey], cache: Path,
                  error: str = "") -> dict[TreeKey, Outcome]:
    """Outcomes per tree from (path, line, code, message) rows of a batched peer run."""
    outcomes = {key: Outcome(error=error) for key in trees}
    if error:
        return outcomes
    table = PEER_CLASSES[tool]
    for path, line, code, message in rows:
        split = _split_batch_path(path, cache)
        if split is None or split[0] not in outcomes:
            continue
        (case_id, variant), inner = split
        outcomes[(case_id, variant)].findings.append(Finding(
            tool, case_id, variant, inner, line, code, message, table.get(code, ())))
    return outcomes


TORCHFIX_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>TOR\d+) (?P<msg>.*)$")


def run_torchfix(exe: str, trees: list[TreeKey], cache: Path) -> dict[TreeKey, Outcome]:
    paths = [f"{case_id}/{variant}" for case_id, variant in trees]
    proc = subprocess.run([exe, "--select", "ALL", "-j", "1", "--", *paths], cwd=cache,
                          capture_output=True, text=True)
    rows = []
    for text in proc.stdout.splitlines():
        match = TORCHFIX_LINE.match(text)
        if match:  # --fix diffs and summaries are printed too
            rows.append((match["path"], int(match["line"]), match["code"], match["msg"]))
    error = "" if proc.returncode in (0, 1) else f"exit {proc.returncode}: {_tail(proc.stderr)}"
    return _batch_result("TorchFix", rows, trees, cache, error)


def run_preflight(exe: str, trees: list[TreeKey], cache: Path, jobs: int) -> dict[TreeKey, Outcome]:
    paths = [f"{case_id}/{variant}" for case_id, variant in trees]
    proc = subprocess.run([exe, "check", "-f", "json", "--no-color", "-j", str(jobs), "--", *paths],
                          cwd=cache, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
        rows = [(d["path"], d.get("line"), d["code"], d.get("message", ""))
                for d in report.get("diagnostics", [])]
        error = ""
    except (json.JSONDecodeError, KeyError, AttributeError):
        rows, error = [], f"exit {proc.returncode}: {_tail(proc.stderr or proc.stdout)}"
    return _batch_result("torch-preflight", rows, trees, cache, error)


def run_mldoctor(python: str, trees: list[TreeKey], cache: Path) -> dict[TreeKey, Outcome]:
    files = [path.relative_to(cache).as_posix() for case_id, variant in trees
             for path in sorted((cache / case_id / variant).rglob("*.py")) if path.is_file()]
    proc = subprocess.run([python, "-c", MLDOCTOR_SCRIPT, *files], cwd=cache,
                          capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
        rows = [(path, line if isinstance(line, int) else None, kind, message)
                for path, issues in report.items() for kind, line, message in issues]
        error = ""
    except (json.JSONDecodeError, ValueError, TypeError):
        rows, error = [], f"exit {proc.returncode}: {_tail(proc.stderr or proc.stdout)}"
    return _batch_result("mldoctor", rows, trees, cache, error)


# ------------------------------------------------------------------------------------- peers

@dataclasses.dataclass(frozen=True)
class Peer:
    name: str
    package: str
    command: str  # the console script that tells the peer is installed
    executable: str | None  # its path, or None when not installed
    version: str
    note: str = ""


def find_peers(venv: Path | None) -> list[Peer]:
    """Each peer's console script, from `venv/bin` or else PATH, and its installed version."""
    peers = []
    for name, package, command in (("torch-preflight", "torch-preflight", "torch-preflight"),
                                   ("TorchFix", "torchfix", "torchfix"),
                                   ("mldoctor", "mldoct", "mldoctor"),
                                   ("torch-audit", "torch-audit", "torch-audit")):
        executable = None
        if venv is not None and (venv / "bin" / command).is_file():
            executable = str(venv / "bin" / command)
        elif venv is None:
            executable = shutil.which(command)
        version = ""
        if executable:
            proc = subprocess.run([_python_of(executable), "-c",
                                   "import importlib.metadata as m, sys; "
                                   "print(m.version(sys.argv[1]))", package],
                                  capture_output=True, text=True)
            version = proc.stdout.strip() or "?"
        note = ("its CLI audits a model object named by an import string (`pkg.mod:Model`) "
                "without input, which gives structural hints (TA200, TA203, TA4xx); its bug rules "
                "(TA100, TA104, TA500, TA501) need its API inside a training loop, and a finding "
                "names a submodule, not a line: not scored") if name == "torch-audit" else ""
        peers.append(Peer(name, package, command, executable, version, note))
    return peers


def _python_of(executable: str) -> str:
    """The interpreter of a console script (its shebang), to ask for versions and run mldoctor."""
    sibling = Path(executable).parent / "python"
    if sibling.is_file():
        return str(sibling)
    try:
        first = Path(executable).read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return sys.executable
    return first[2:].strip() if first.startswith("#!") and "python" in first else sys.executable


# ------------------------------------------------------------------------------------ scoring

def matches(finding: Finding, case: Case, mistake: Mistake) -> str:
    """"here" when `finding` is of the case's class at the mistake, "elsewhere" when a run-pass
    finding of the class is located elsewhere, "" otherwise."""
    if case.cls not in finding.classes:
        return ""
    if finding.path == mistake.file and (finding.line is None
                                         or abs(finding.line - mistake.line) <= WINDOW):
        return "here"
    if finding.tool == "modellint" and case.pass_ == "run":
        return "elsewhere"
    return ""


@dataclasses.dataclass
class Column:
    """One column of the doc: a tool, with the findings it keeps."""
    name: str
    tool: str  # the tool whose outcomes it reads
    keep: Callable[[Finding], bool]
    available: bool
    status: str


def verdict(column: Column, outcome: Outcome | None, case: Case) -> str:
    """hit | elsewhere | miss | error, for a buggy tree or a fixed twin (a hit there is a
    false alarm)."""
    if outcome is None:
        return "n/a"
    best = ""
    for finding in outcome.findings:
        if not column.keep(finding):
            continue
        for mistake in case.mistakes:
            where = matches(finding, case, mistake)
            if where == "here":
                return "hit"
            best = best or where
    if best:
        return "hit-elsewhere"
    return "error" if outcome.error else "miss"


# ---------------------------------------------------------------------------------------- run

def score(cases: list[Case], cache: Path, peers: list[Peer], jobs: int, timeout: float,
          run_steps: int, tools: set[str] | None):
    rules = rule_table()
    off = sorted(code for code, rule in rules.items() if not rule.get("default_enabled", True))
    default_on = {code for code, rule in rules.items() if rule.get("default_enabled", True)}
    classes = load_classes()
    code_classes: dict[str, tuple[str, ...]] = collections.defaultdict(tuple)
    for name, data in classes.items():
        if data.get("code"):
            code_classes[data["code"]] += (name,)
    trees: list[TreeKey] = [(c.id, v) for c in cases for v in ("buggy", "fixed")
                            if (cache / c.id / v).is_dir()]
    by_id = {c.id: c for c in cases}
    outcomes: dict[str, dict[TreeKey, Outcome]] = collections.defaultdict(dict)

    def wanted(name: str) -> bool:
        return tools is None or name.lower() in tools

    static_trees = trees  # the peers read every tree, whatever its pass
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {}
        if wanted("modellint"):
            # the slow runs first, so that the static batches fill in around them
            executed = sorted((key for key in trees if by_id[key[0]].pass_ != "static"),
                              key=lambda key: PASSES.index(by_id[key[0]].pass_), reverse=True)
            for key in executed:
                futures[pool.submit(modellint_tree, by_id[key[0]], key[1], cache / key[0] / key[1],
                                    ",".join(off), code_classes, timeout, run_steps)] = \
                    ("modellint", key)
            static = [(by_id[i], v, cache / i / v) for i, v in trees
                      if by_id[i].pass_ == "static"]
            for start in range(max(1, jobs)):
                if static[start::max(1, jobs)]:
                    futures[pool.submit(modellint_static, static[start::max(1, jobs)],
                                        ",".join(off), code_classes, timeout)] = ("modellint", None)
        for peer in peers:
            if peer.executable is None or peer.note or not wanted(peer.name):
                continue
            if peer.name == "TorchFix":
                future = pool.submit(run_torchfix, peer.executable, static_trees, cache)
            elif peer.name == "torch-preflight":
                future = pool.submit(run_preflight, peer.executable, static_trees, cache, 1)
            else:
                future = pool.submit(run_mldoctor, _python_of(peer.executable), static_trees, cache)
            futures[future] = (peer.name, None)
        for future in concurrent.futures.as_completed(futures):
            tool, key = futures[future]
            if key is None:
                outcomes[tool].update(future.result())
            else:
                outcomes[tool][key] = future.result()
    columns = [
        Column("modellint", "modellint", lambda f: f.code in default_on, wanted("modellint"),
               "this checkout, default rules"),
        Column("modellint (all rules)", "modellint", lambda f: True, wanted("modellint"),
               f"this checkout, with --extend-select {','.join(off)}"),
    ]
    for peer in peers:
        installed = peer.executable is not None
        status = (f"{peer.package} {peer.version}" if installed else "not installed")
        if peer.note and installed:
            status += f": {peer.note}"
        available = installed and not peer.note and wanted(peer.name)
        if peer.name == "TorchFix":
            columns.append(Column("TorchFix", "TorchFix",
                                  lambda f: not f.code.startswith(TORCHFIX_OFF_BY_DEFAULT),
                                  available, status + " (default rules)" if installed else status))
            columns.append(Column("TorchFix (all rules)", "TorchFix", lambda f: True, available,
                                  status + " (--select ALL)" if installed else status))
        else:
            columns.append(Column(peer.name, peer.name, lambda f: True, available, status))
    return columns, outcomes, classes


def render(cases: list[Case], columns: list[Column], outcomes, classes: dict, problems: list[str],
           seconds: float, command: str) -> tuple[str, str]:
    """The doc (Markdown) and the summary printed at the end of a run."""
    live = [c for c in columns if c.available]
    bugs = [c for c in cases if c.kind == "bug"]
    twins = [c for c in bugs if c.has_fixed]
    goods = [c for c in cases if c.kind == "good"]

    def cell(column: Column, case: Case, variant: str) -> str:
        return verdict(column, outcomes[column.tool].get((case.id, variant)), case)

    results = {(col.name, case.id): cell(col, case, "buggy") for col in live for case in bugs}
    alarms = {(col.name, case.id): cell(col, case, "fixed") for col in live for case in twins}

    def hit(value: str) -> bool:
        return value.startswith("hit")

    def ratio(num: int, den: int) -> str:
        return f"{num}/{den} ({num / den:.2f})" if den else "–"

    out: list[str] = []
    summary: list[str] = []
    sources = {c.repo for c in cases if c.repo}
    out += ["# Benchmark of real PyTorch bugs", "",
            "Generated by `bench/bugs.py` (do not edit by hand). Every case is a real mistake in "
            "public PyTorch user code, or a known-good pipeline, kept with its provenance in "
            "`bench/bugs/cases/<id>/case.toml` (format: bench/bugs/README.md). Command:", "",
            f"    {command}", "",
            f"This run: {datetime.date.today().isoformat()}, {seconds:.0f} s on "
            f"{os.cpu_count()} CPU(s); {len(cases)} cases from {len(sources)} sources: "
            f"{len(bugs)} buggy ({sum(c.pass_ == 'static' for c in bugs)} static, "
            f"{sum(c.pass_ == 'runtime' for c in bugs)} runtime, "
            f"{sum(c.pass_ == 'run' for c in bugs)} run), {len(twins)} with a fixed twin, "
            f"{len(goods)} known-good.", ""]
    if problems:
        out += ["Cases left out (their case.toml cannot be used):", ""]
        out += [f"- {p}" for p in problems] + [""]
    out += ["## How it is scored", "",
            f"- **hit**: a finding whose code maps to the case's class, in the mistake's file, "
            f"at most {WINDOW} lines from the mistake's line (a peer finding without a line counts "
            "anywhere in that file). For a `run` case a modellint finding of the class counts "
            "wherever the run located it (marked *elsewhere* in the case table).",
            "- **recall**: hits over buggy cases. A tool that failed on a case (exit status, "
            "timeout) scores a miss there; the failures are listed below.",
            "- **false alarm on a fixed twin**: the same match on the fixed files.",
            "- **known-good cases**: every finding is listed (for *modellint*, those of default-on "
            "rules), to be triaged.",
            "- modellint runs each case with the pass the case names (static `check`, `check "
            "--runtime --device cpu`, `run -- argv`); the peers are static linters and read every "
            "case's files.", "",
            "## Tools", "", "| tool | version, status |", "|---|---|"]
    out += [f"| {c.name} | {c.status} |" for c in columns]
    out += ["", f"The peers were installed with `{PEER_INSTALL}`; trainlint, also named by "
            "issue 25, is not on the package registry (pip: no matching distribution).",
            "", "Peer codes mapped to classes (`bench/bugs.py`, PEER_CLASSES; modellint's codes "
            "map through classes.toml):", "", "| peer | code | classes |", "|---|---|---|"]
    for tool, table in PEER_CLASSES.items():
        for code, mapped in table.items():
            out.append(f"| {tool} | {code} | {', '.join(mapped) or '(none)'} |")
    out += ["", "## Recall on the buggy cases", "",
            "| cases | " + " | ".join(c.name for c in live) + " |",
            "|---|" + "---|" * len(live)]
    overall = {col.name: sum(hit(results[(col.name, c.id)]) for c in bugs) for col in live}
    out.append("| all buggy cases | " + " | ".join(ratio(overall[c.name], len(bugs))
                                                    for c in live) + " |")
    for pass_ in PASSES:
        subset = [c for c in bugs if c.pass_ == pass_]
        if subset:
            out.append(f"| pass = {pass_} | " + " | ".join(
                ratio(sum(hit(results[(col.name, c.id)]) for c in subset), len(subset))
                for col in live) + " |")
    summary.append(f"recall on {len(bugs)} buggy cases: " + ", ".join(
        f"{c.name} {ratio(overall[c.name], len(bugs))}" for c in live))

    out += ["", "### Per class", "",
            "| class | code | cases | " + " | ".join(c.name for c in live) + " |",
            "|---|---|---|" + "---|" * len(live)]
    per_class: dict[str, list[Case]] = collections.defaultdict(list)
    for case in bugs:
        per_class[case.cls].append(case)
    uncovered = []
    for name in classes:
        subset = per_class.get(name, [])
        if not subset:
            continue
        hits = {col.name: sum(hit(results[(col.name, c.id)]) for c in subset) for col in live}
        if not any(hits.values()):
            uncovered.append(name)
        out.append(f"| {name} | {classes[name].get('code') or '–'} | {len(subset)} | " + " | ".join(
            f"{hits[col.name]}/{len(subset)}" for col in live) + " |")
    out += ["", "## Classes no tool covers", "",
            "Classes with buggy cases that no tool found in any of them:", ""]
    out += [f"- `{name}` ({len(per_class[name])} case(s)): {classes[name].get('title', '')}"
            for name in uncovered] or ["- none"]
    without_rule = [n for n in per_class if not classes[n].get("code")]
    out += ["", "Classes with cases and no modellint rule yet: "
            + (", ".join(f"`{n}`" for n in without_rule) or "none") + "."]
    summary.append(f"classes with cases: {len(per_class)}; found by no tool: {len(uncovered)}")

    out += ["", "## False alarms", "", f"### On the {len(twins)} fixed twins", "",
            "The class's finding still reported after the fix:", "",
            "| tool | false alarms |", "|---|---|"]
    for col in live:
        flagged = [c.id for c in twins if hit(alarms[(col.name, c.id)])]
        out.append(f"| {col.name} | {ratio(len(flagged), len(twins))}"
                   + (f": {', '.join(flagged)}" if flagged else "") + " |")
        summary.append(f"false alarms on fixed twins, {col.name}: {ratio(len(flagged), len(twins))}")
    out += ["", f"### On the {len(goods)} known-good cases", "",
            "| tool | cases with a finding | findings |", "|---|---|---|"]
    listing: list[str] = []
    for col in live:
        found = [f for c in goods for f in outcomes[col.tool].get((c.id, "buggy"), Outcome()).findings
                 if col.keep(f)]
        cases_flagged = len({f.case for f in found})
        out.append(f"| {col.name} | {ratio(cases_flagged, len(goods))} | {len(found)} |")
        summary.append(f"known-good cases, {col.name}: {cases_flagged}/{len(goods)} flagged, "
                       f"{len(found)} findings")
        if col.name != "modellint" and col.name != "TorchFix":
            continue  # the "all rules" columns repeat these; listed once below
        for f in found:
            listing.append(f"| {col.name} | {f.case} | {f.path}:{f.line or ''} | {f.code} | "
                           f"{_cell_text(f.message)} |")
    extra = [f for c in goods for col in live if col.tool not in ("modellint", "TorchFix")
             for f in outcomes[col.tool].get((c.id, "buggy"), Outcome()).findings]
    listing += [f"| {f.tool} | {f.case} | {f.path}:{f.line or ''} | {f.code} | "
                f"{_cell_text(f.message)} |" for f in extra]
    if listing:
        out += ["", "Each finding on a known-good case, to triage (modellint's default rules, "
                "TorchFix's default rules, and every other peer's):", "",
                "| tool | case | where | code | message |", "|---|---|---|---|---|", *listing]

    out += ["", "## Where modellint loses", ""]
    losses = []
    mine = "modellint"
    if any(c.name == mine for c in live):
        for col in live:
            if col.tool == "modellint":
                continue
            for case in bugs:
                if hit(results[(col.name, case.id)]) and not hit(results[(mine, case.id)]):
                    losses.append(f"- `{case.id}` ({case.cls}): found by {col.name}, missed by "
                                  "modellint's default rules")
        for name, subset in per_class.items():
            mine_hits = sum(hit(results[(mine, c.id)]) for c in subset)
            for col in live:
                if col.tool == "modellint":
                    continue
                theirs = sum(hit(results[(col.name, c.id)]) for c in subset)
                if theirs > mine_hits:
                    losses.append(f"- class `{name}`: {col.name} {theirs}/{len(subset)}, modellint "
                                  f"{mine_hits}/{len(subset)}")
        mine_alarms = [c.id for c in twins if hit(alarms[(mine, c.id)])]
        fewer = [f"{col.name} {sum(hit(alarms[(col.name, c.id)]) for c in twins)}" for col in live
                 if col.tool != "modellint"
                 and sum(hit(alarms[(col.name, c.id)]) for c in twins) < len(mine_alarms)]
        if fewer:
            losses.append(f"- false alarms on fixed twins: modellint {len(mine_alarms)} ("
                          + ", ".join(f"`{i}`" for i in mine_alarms) + "), " + ", ".join(fewer))
        missed = [c for c in bugs if c.expected and not hit(results[(mine, c.id)])]
        if missed:
            losses.append(f"- {len(missed)} case(s) of classes modellint has a rule for, missed "
                          "by its default rules: " + ", ".join(f"`{c.id}`" for c in missed))
    out += list(dict.fromkeys(losses)) or ["- nowhere in this run"]

    failures = [f"- {col.name} on `{c.id}` ({v}): {outcomes[col.tool][(c.id, v)].error}"
                for col in live if col.name in ("modellint", "TorchFix", "torch-preflight",
                                                "mldoctor")
                for c in cases for v in ("buggy", "fixed")
                if (c.id, v) in outcomes[col.tool] and outcomes[col.tool][(c.id, v)].error]
    if failures:
        out += ["", "## Tool failures", "", *failures]
        summary.append(f"tool failures: {len(failures)} (listed in the doc)")

    timed = sorted(((o.seconds, key) for key, o in outcomes.get("modellint", {}).items()),
                   reverse=True)
    if timed:
        by_pass: dict[str, float] = collections.defaultdict(float)
        kinds = {c.id: c.pass_ for c in cases}
        for spent, (case_id, _) in timed:
            by_pass[kinds[case_id]] += spent
        out += ["", "## Time", "",
                f"modellint's wall time summed over the {len(timed)} trees (buggy and fixed), per "
                "pass: " + ", ".join(f"{p} {by_pass[p]:.0f} s" for p in PASSES if p in by_pass)
                + "; the slowest trees: " + ", ".join(f"`{i}/{v}` {t:.0f} s"
                                                     for t, (i, v) in timed[:5]) + "."]
        summary.append("modellint time per pass: " + ", ".join(
            f"{p} {by_pass[p]:.0f} s" for p in PASSES if p in by_pass))
    out += ["", "## Every buggy case", "",
            "hit, *elsewhere* (a run finding of the class located away from the mistake), "
            "miss, error; after the slash, the fixed twin (FA: a false alarm).", "",
            "| case | class | pass | " + " | ".join(c.name for c in live) + " |",
            "|---|---|---|" + "---|" * len(live)]
    for case in bugs:
        row = []
        for col in live:
            value = results[(col.name, case.id)]
            text = {"hit": "hit", "hit-elsewhere": "*elsewhere*"}.get(value, value)
            if case.has_fixed:
                twin = alarms[(col.name, case.id)]
                text += " / " + ("FA" if hit(twin) else "error" if twin == "error" else "ok")
            row.append(text)
        out.append(f"| `{case.id}` | {case.cls} | {case.pass_} | " + " | ".join(row) + " |")
    notes = [f"- `{c.id}`: {c.note}" for c in cases if c.note]
    if notes:
        out += ["", "Notes of the cases (their `note`):", "", *notes]
    return "\n".join(out) + "\n", "\n".join(summary)


def _cell_text(text: str) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path,
                        help="a folder of cases with their code (default: the cache's cases/, "
                        "written by bench/bugs_cases.py fetch)")
    parser.add_argument("--peers-venv", type=Path,
                        help="a virtual environment holding the peers (its bin/); default: PATH")
    parser.add_argument("--tools", help="only these tools (comma-separated: modellint, "
                        "torch-preflight, torchfix, mldoctor)")
    parser.add_argument("--only", help="only these case ids (comma-separated)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds per model (--runtime) or per run (run cases); default 60")
    parser.add_argument("--run-steps", type=int, default=10,
                        help="optimizer steps of a run case (default 10)")
    parser.add_argument("--output", type=Path, default=DOC, help="the doc to write")
    parser.add_argument("--no-doc", action="store_true", help="print the summary only")
    parser.add_argument("--json", type=Path, help="also write every verdict as JSON here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    classes = load_classes()
    if args.cases is None:
        args.cases = cache_dir() / "cases"
        stale = stale_cases(args.cases)
        if stale:
            print(f"bugs: {len(stale)} cases are not in {args.cases} as committed (the first: "
                  f"{stale[0]}); run python bench/bugs_cases.py fetch [--mirror DIR]",
                  file=sys.stderr)
            return 2
    if not args.cases.is_dir():
        print(f"bugs: no folder {args.cases}", file=sys.stderr)
        return 2
    cases, problems = load_cases(args.cases, classes)
    if args.cases == cache_dir() / "cases":
        # the cache may still hold cases since removed from the repository
        committed = {toml.parent.name for toml in CASES_DIR.glob("*/case.toml")}
        cases = [case for case in cases if case.id in committed]
        problems = [problem for problem in problems if problem.split(":", 1)[0] in committed]
    for problem in problems:
        print(f"bugs: case left out: {problem}", file=sys.stderr)
    if args.only:
        wanted_ids = set(args.only.split(","))
        cases = [c for c in cases if c.id in wanted_ids]
    if not cases:
        print("bugs: no case to score", file=sys.stderr)
        return 2
    cache = cache_dir()
    stage(cases, cache)
    tools = {t.strip().lower() for t in args.tools.split(",")} if args.tools else None
    peers = find_peers(args.peers_venv)
    for peer in peers:
        print(f"{peer.name}: " + (f"{peer.package} {peer.version} ({peer.executable})"
                                  if peer.executable else "not installed")
              + (f"; not scored: {peer.note}" if peer.executable and peer.note else ""))
    columns, outcomes, classes = score(cases, cache, peers, args.jobs, args.timeout,
                                       args.run_steps, tools)
    seconds = time.monotonic() - started
    shown = ["python bench/bugs.py"]
    if args.peers_venv:
        shown += ["--peers-venv", str(args.peers_venv)]
    doc, summary = render(cases, columns, outcomes, classes, problems, seconds, " ".join(shown))
    print(summary)
    print(f"{len(cases)} cases in {seconds:.0f} s (cache {cache})")
    if args.json:
        live = [c for c in columns if c.available]
        verdicts = {case.id: {col.name: {variant: verdict(col, outcomes[col.tool].get(
            (case.id, variant)), case) for variant in ("buggy", "fixed")
            if (case.id, variant) in outcomes[col.tool]} for col in live}
            for case in cases if case.kind == "bug"}
        args.json.write_text(json.dumps(verdicts, indent=1, sort_keys=True) + "\n")
    if not args.no_doc:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        partial = args.output.with_name(f".{args.output.name}.partial")
        partial.write_text(doc, encoding="utf-8")
        os.replace(partial, args.output)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
