"""Measure each rule's precision on real training code: lint a pinned corpus, compare with the triage.

    python bench/precision.py fetch [--mirror DIR]   # once, needs git (and the network without --mirror)
    python bench/precision.py [run]                  # offline: the per-rule table
    python bench/precision.py fixes                  # apply every safe fix to a copy; re-parse; idempotent

The corpus is the list of public code bases in bench/precision_corpus.toml, each pinned by
commit. `fetch` writes the Python files of each pinned tree (nothing else) into the cache folder
`$MODELLINT_CORPUS_DIR` (default `~/.cache/modellint-corpus`), one folder per repository and
commit, `<owner>+<name>@<commit>`; nothing there is ever run, only read. With `--mirror DIR` it
reads the commits from existing bare repositories `DIR/<owner>+<name>/repo` (or
`DIR/<owner>+<name>`) instead of cloning.

`run` lints every tree with every rule (`--select ALL`) and compares the findings with the triage
files `bench/triage/*.tsv` (columns: repo, commit, path, line, code, verdict `tp|fp|debatable`,
reason). It prints per rule: findings, TP, FP, debatable, precision (TP over all triaged
findings: a debatable finding does not count as right) and untriaged findings; then every
untriaged finding, and every triaged one that is no longer reported (a fixed false positive, or
a lost true positive). It exits 1 when a default-on rule has an untriaged finding or a precision
below 0.95, or when any finding is ML000/ML001. `--emit-untriaged` prints the untriaged findings
as triage rows (verdict left empty) to fill in.

`fixes` copies every tree to a temporary folder, runs `modellint check --fix` on it (safe fixes
only), requires every changed file to still parse, and runs `--fix` again to require that the
second run changes nothing (the fix is idempotent).
"""

from __future__ import annotations

import argparse
import ast
import collections
import csv
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
CORPUS_FILE = HERE / "precision_corpus.toml"
TRIAGE_DIR = HERE / "triage"
TRIAGE_COLUMNS = ("repo", "commit", "path", "line", "code", "verdict", "reason")
VERDICTS = ("tp", "fp", "debatable")
THRESHOLD = 0.95


@dataclasses.dataclass(frozen=True)
class Repo:
    name: str  # owner/name on GitHub
    commit: str
    paths: tuple[str, ...]

    @property
    def folder(self) -> str:
        return f"{self.name.replace('/', '+')}@{self.commit}"


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "modellint-corpus"
    return Path(os.environ.get("MODELLINT_CORPUS_DIR") or default)


def load_corpus(path: Path = CORPUS_FILE) -> list[Repo]:
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    return [Repo(r["name"], r["commit"], tuple(r["paths"])) for r in data["repo"]]


# ---------------------------------------------------------------------------------------- fetch

def _git(git_dir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, **kwargs)


def _git_dir(repo: Repo, mirror: Path | None, cache: Path) -> Path:
    slug = repo.name.replace("/", "+")
    if mirror is not None:
        for candidate in (mirror / slug / "repo", mirror / slug):
            if (candidate / "objects").is_dir():
                return candidate
        raise SystemExit(f"precision: no bare repository for {repo.name} under {mirror}")
    git_dir = cache / ".git" / slug
    if not git_dir.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", "--quiet",
                        f"https://github.com/{repo.name}.git", str(git_dir)], check=True)
    if subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", f"{repo.commit}^{{commit}}"],
                      capture_output=True).returncode != 0:
        _git(git_dir, "fetch", "--quiet", "origin", repo.commit)
    return git_dir


def fetch(repo: Repo, cache: Path, mirror: Path | None) -> Path:
    """Write the Python files of `repo.paths` at the pinned commit into the cache; return the tree."""
    target = cache / repo.folder
    if target.is_dir():
        return target
    git_dir = _git_dir(repo, mirror, cache)
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--name-only", repo.commit, "--",
                   *repo.paths).stdout.decode()
    files = [name for name in listing.split("\0") if name.endswith(".py")]
    if not files:
        raise SystemExit(f"precision: no Python file under {repo.paths} in {repo.name}@{repo.commit}")
    archive = _git(git_dir, "archive", "--format=tar", repo.commit, "--", *files).stdout
    partial = cache / f".{repo.folder}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(partial, filter="data")  # plain files only, nothing outside `partial`
    partial.rename(target)
    return target


# ------------------------------------------------------------------------------------- triage

@dataclasses.dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    source: str  # file:line of the triage row


Key = tuple[str, str, str, int, str]  # repo, commit, path, line, code


def load_triage(folder: Path = TRIAGE_DIR) -> tuple[dict[Key, Verdict], list[str]]:
    """The triage rows by key, and a message per malformed or repeated row."""
    rows: dict[Key, Verdict] = {}
    problems: list[str] = []
    for tsv in sorted(folder.glob("*.tsv")):
        with open(tsv, newline="", encoding="utf-8") as handle:
            for number, row in enumerate(csv.reader(handle, delimiter="\t"), 1):
                where = f"{tsv.name}:{number}"
                if not row or row[0].startswith("#") or tuple(row) == TRIAGE_COLUMNS:
                    continue
                if len(row) != len(TRIAGE_COLUMNS):
                    problems.append(f"{where}: {len(row)} columns, expected {len(TRIAGE_COLUMNS)}")
                    continue
                repo, commit, path, line, code, verdict, reason = row
                if verdict not in VERDICTS or not line.isdigit() or not reason.strip():
                    problems.append(f"{where}: needs a line number, a verdict in "
                                    f"{'|'.join(VERDICTS)} and a reason")
                    continue
                key = (repo, commit, path, int(line), code)
                if key in rows:
                    problems.append(f"{where}: repeats {rows[key].source}")
                    continue
                rows[key] = Verdict(verdict, reason.strip(), where)
    return rows, problems


# ---------------------------------------------------------------------------------------- lint

def _modellint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    # an empty config file: nothing found upwards of the cache changes the result
    with tempfile.TemporaryDirectory() as empty:
        config = Path(empty) / "modellint.toml"
        config.write_text("")
        return subprocess.run([sys.executable, "-m", "modellint", *args, "--config", str(config)],
                              capture_output=True, text=True, cwd=cwd)


def rule_table() -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-m", "modellint", "rule", "--all", "--format", "json"],
                          capture_output=True, text=True, check=True)
    return {rule["code"]: rule for rule in json.loads(proc.stdout)}


def lint(repos: list[Repo], cache: Path, jobs: int) -> list[tuple[Repo, dict]]:
    """Every finding of every rule, each with its repository and its path relative to the tree."""
    found = []
    for repo in repos:
        tree = cache / repo.folder
        proc = _modellint("check", ".", "--select", "ALL", "--format", "json", "--no-cache",
                          "--exit-zero", "-q", "--jobs", str(jobs), cwd=tree)
        if proc.returncode != 0:
            raise SystemExit(f"precision: modellint failed on {tree}:\n{proc.stderr}")
        for finding in json.loads(proc.stdout):
            path = Path(finding["path"])
            finding["path"] = (path.resolve().relative_to(tree.resolve()) if path.is_absolute()
                               else path).as_posix()
            found.append((repo, finding))
    return found


@dataclasses.dataclass
class Tally:
    findings: int = 0
    tp: int = 0
    fp: int = 0
    debatable: int = 0
    untriaged: int = 0

    @property
    def precision(self) -> float | None:
        judged = self.tp + self.fp + self.debatable
        return self.tp / judged if judged else None


def tally(found: list[tuple[Repo, dict]], triage: dict[Key, Verdict]):
    """Counts per code, the untriaged findings, and the triage rows no finding matches."""
    counts: dict[str, Tally] = collections.defaultdict(Tally)
    untriaged: list[tuple[Repo, dict]] = []
    matched: set[Key] = set()
    for repo, finding in found:
        key = (repo.name, repo.commit, finding["path"], finding["line"], finding["code"])
        row = counts[finding["code"]]
        row.findings += 1
        verdict = triage.get(key)
        if verdict is None:
            row.untriaged += 1
            untriaged.append((repo, finding))
        else:
            matched.add(key)
            setattr(row, verdict.verdict, getattr(row, verdict.verdict) + 1)
    gone = [(key, triage[key]) for key in triage if key not in matched]
    return counts, untriaged, gone


def failures(counts: dict[str, Tally], rules: dict[str, dict]) -> list[str]:
    problems = []
    for code, row in sorted(counts.items()):
        if code in ("ML000", "ML001"):
            problems.append(f"{code}: {row.findings} finding(s)")
            continue
        if not rules.get(code, {}).get("default_enabled", True):
            continue
        if row.untriaged:
            problems.append(f"{code}: {row.untriaged} untriaged finding(s) of a default-on rule")
        if row.precision is not None and row.precision < THRESHOLD:
            problems.append(f"{code}: precision {row.precision:.2f} < {THRESHOLD} (default on)")
    return problems


def print_table(counts: dict[str, Tally], rules: dict[str, dict], out=None) -> None:
    out = out or sys.stdout
    print(f"{'code':<6} {'name':<34} {'default':<7} {'findings':>8} {'TP':>4} {'FP':>4} "
          f"{'debatable':>9} {'precision':>9} {'untriaged':>9}", file=out)
    total = Tally()
    for code in sorted(counts):
        row = counts[code]
        rule = rules.get(code, {})
        default = "on" if rule.get("default_enabled", True) else "off"
        precision = "–" if row.precision is None else f"{row.precision:.2f}"
        print(f"{code:<6} {rule.get('name', '?'):<34} {default:<7} {row.findings:>8} {row.tp:>4} "
              f"{row.fp:>4} {row.debatable:>9} {precision:>9} {row.untriaged:>9}", file=out)
        for field in ("findings", "tp", "fp", "debatable", "untriaged"):
            setattr(total, field, getattr(total, field) + getattr(row, field))
    print(f"{'total':<6} {'':<34} {'':<7} {total.findings:>8} {total.tp:>4} {total.fp:>4} "
          f"{total.debatable:>9} {'':>9} {total.untriaged:>9}", file=out)


def run(repos: list[Repo], cache: Path, jobs: int, emit_untriaged: bool,
        triage_dir: Path = TRIAGE_DIR) -> int:
    missing = [repo.name for repo in repos if not (cache / repo.folder).is_dir()]
    if missing:
        print(f"precision: not in {cache}: {', '.join(missing)}; run "
              "`python bench/precision.py fetch` first", file=sys.stderr)
        return 2
    triage, problems = load_triage(triage_dir)
    for problem in problems:
        print(f"precision: triage: {problem}", file=sys.stderr)
    rules = rule_table()
    found = lint(repos, cache, jobs)
    counts, untriaged, gone = tally(found, triage)
    if emit_untriaged:
        writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
        for repo, f in untriaged:
            writer.writerow([repo.name, repo.commit, f["path"], f["line"], f["code"], "",
                             f["message"]])
        return 0
    print(f"corpus: {len(repos)} code bases in {cache}")
    for repo in repos:
        print(f"  {repo.name}@{repo.commit[:12]}  {' '.join(repo.paths)}")
    print_table(counts, rules)
    shown = [(r, f) for r, f in untriaged if rules.get(f["code"], {}).get("default_enabled", True)]
    if shown:
        print("\nuntriaged (default-on rules):")
        for repo, f in shown:
            print(f"  {f['code']} {repo.name} {f['path']}:{f['line']}: {f['message']}")
    if len(shown) < len(untriaged):
        print(f"\n{len(untriaged) - len(shown)} findings of off-by-default rules are not triaged "
              "(counted in the table; --emit-untriaged lists them)")
    if gone:
        print("\ntriaged but no longer reported:")
        for (name, _, path, line, code), verdict in sorted(gone):
            print(f"  {code} {verdict.verdict:<9} {name} {path}:{line}: {verdict.reason}")
    problems += failures(counts, rules)
    print("\n" + ("\n".join(f"FAIL {p}" for p in problems) if problems else
                  f"OK: every default-on rule triaged and at or above {THRESHOLD}"))
    return 1 if problems else 0


# --------------------------------------------------------------------------------------- fixes

def check_fixes(repos: list[Repo], cache: Path, jobs: int) -> int:
    """Apply every safe fix to a copy of the corpus; each changed file must parse, and a second
    `--fix` must change nothing."""
    problems: list[str] = []
    fixed_files = 0
    with tempfile.TemporaryDirectory() as tmp:
        for repo in repos:
            copy = Path(tmp) / repo.folder
            shutil.copytree(cache / repo.folder, copy, symlinks=True)
            before = {p: p.read_bytes() for p in copy.rglob("*.py")}
            first = _modellint("check", ".", "--select", "ALL", "--fix", "--no-cache",
                               "--exit-zero", "-q", "--format", "concise", "--jobs", str(jobs),
                               cwd=copy)
            if first.returncode != 0:
                problems.append(f"{repo.name}: --fix exited {first.returncode}: {first.stderr}")
                continue
            after = {p: p.read_bytes() for p in copy.rglob("*.py")}
            for path, text in after.items():
                if text == before.get(path):
                    continue
                fixed_files += 1
                try:
                    ast.parse(text, filename=str(path))
                except SyntaxError as error:
                    problems.append(f"{repo.name} {path.relative_to(copy)}: fixed file does not "
                                    f"parse: {error}")
            second = _modellint("check", ".", "--select", "ALL", "--fix", "--no-cache",
                                "--exit-zero", "-q", "--format", "concise", "--jobs", str(jobs),
                                cwd=copy)
            again = {p: p.read_bytes() for p in copy.rglob("*.py")}
            changed = [str(p.relative_to(copy)) for p in again if again[p] != after.get(p)]
            if changed:
                problems.append(f"{repo.name}: a second --fix changed {', '.join(changed)}")
            if second.returncode != 0:
                problems.append(f"{repo.name}: second --fix exited {second.returncode}: "
                                f"{second.stderr}")
    print(f"safe fixes applied to {fixed_files} file(s) in {len(repos)} code bases")
    for problem in problems:
        print(f"FAIL {problem}")
    if not problems:
        print("OK: every fixed file parses and a second --fix changes nothing")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=("run", "fetch", "fixes"), default="run")
    parser.add_argument("--mirror", type=Path, help="bare repositories to read instead of cloning")
    parser.add_argument("--only", action="append", default=[], metavar="OWNER/NAME",
                        help="only this code base (repeatable)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--corpus", type=Path, default=CORPUS_FILE, help=argparse.SUPPRESS)
    parser.add_argument("--triage", type=Path, default=TRIAGE_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--emit-untriaged", action="store_true",
                        help="print the untriaged findings as triage rows and stop")
    args = parser.parse_args(argv)
    repos = load_corpus(args.corpus)
    if args.only:
        repos = [repo for repo in repos if repo.name in args.only]
    cache = cache_dir()
    if args.command == "fetch":
        cache.mkdir(parents=True, exist_ok=True)
        for repo in repos:
            print(f"{repo.name}@{repo.commit[:12]} -> {fetch(repo, cache, args.mirror)}")
        return 0
    if args.command == "fixes":
        return check_fixes(repos, cache, args.jobs)
    return run(repos, cache, args.jobs, args.emit_untriaged, args.triage)


if __name__ == "__main__":
    sys.exit(main())
