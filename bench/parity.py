"""Parity report: modellint, TorchFix 0.7.0 and torch-preflight 0.5.0 on fixtures/parity and on
the installed torchvision and timm sources, per peer code.

    python bench/parity.py [--peers-venv DIR] [--corpus torchvision,timm] [--skip-corpus]

The peers run from a virtual environment of their own (created on first use, as
bench/static_bench.py does; default ~/.cache/modellint-bench/peers). The mapping of peer codes
to modellint codes is read from docs/parity.md.

Fixtures: each fixtures/parity/<peer>_<code>.py is checked by modellint with the settings of
its first line (`# parity-config: ...`); the peers run on the whole folder (TorchFix with
`--select ALL`, torch-preflight with the `# peer-args:` its fixtures ask for). For each peer
code the report shows how often the peer reported that code on its fixture, and how often
modellint reported the covering code(s) there.

Sources: every tool runs once on the corpus with everything on (TorchFix `--select ALL`,
torch-preflight's defaults, modellint `--select ALL` with target-torch-version 2.4, so that
ML501 asks for `weights_only` as TorchFix does). modellint's findings are attributed to peer
codes through the table; where one modellint code covers several codes of a peer, the finding
is told apart by its source line (an import or a call) or its message.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from static_bench import ensure_peers, package_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "parity.md"
FIXTURES = ROOT / "fixtures" / "parity"
PEERS = ("torchfix", "torch-preflight")
NOT_COVERED = "not covered"


def read_table(path: Path = TABLE) -> list[dict[str, object]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in PEERS:
            modellint = [] if cells[3] == NOT_COVERED else [c.strip() for c in cells[3].split(",")]
            rows.append({"peer": cells[0], "code": cells[1], "modellint": modellint})
    return rows


def fixture_path(peer: str, code: str) -> Path:
    return FIXTURES / f"{peer.replace('-', '_')}_{code}.py"


def header(path: Path, key: str) -> str | None:
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        match = re.match(rf"#\s*{key}:\s*(.*)$", line)
        if match:
            return match.group(1).strip()
    return None


def parity_config(path: Path) -> dict[str, str]:
    settings: dict[str, str] = {}
    for item in (header(path, "parity-config") or "").split(";"):
        key, _, value = item.strip().partition("=")
        if key.strip():
            settings[key.strip()] = value.strip()
    return settings


# -- running the tools ---------------------------------------------------------------------

def run(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None):
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)
    return proc, time.perf_counter() - start


def torchfix(bin_dir: Path, target: Path) -> tuple[list[tuple[str, str]], float]:
    """[(file path, code)]. TorchFix prints `path:line:col: CODE message` with the path relative
    to its working directory, and a message ending in a URL is not always followed by a
    newline; run from `/`, every path starts with the target's own, which finds it."""
    target = target.resolve()
    proc, wall = run([str(bin_dir / "torchfix"), "--select", "ALL", str(target)], cwd=Path("/"))
    prefix = re.escape(str(target).lstrip("/"))
    pattern = re.compile(rf"({prefix}[^\s:]*):\d+:\d+: (TOR\d{{3}})\b")
    found = [("/" + path, code) for path, code in pattern.findall(proc.stdout + proc.stderr)]
    return found, wall


def torch_preflight(bin_dir: Path, target: Path, extra: list[str]):
    proc, wall = run([str(bin_dir / "torch-preflight"), "check", "--format", "json",
                      "--no-color", *extra, str(target.resolve())])
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit(f"torch-preflight gave no JSON report:\n{proc.stderr[-2000:]}")
    return [(d["path"], d["code"]) for d in data.get("diagnostics", [])], wall


def modellint(paths: list[Path], settings: dict[str, str], scratch: Path):
    """modellint's JSON findings on `paths` with the given parity settings."""
    config = scratch / f"pyproject-{time.time_ns()}.toml"
    lines = ["[tool.modellint]"]
    for key in ("target-torch-version", "target-gpu-memory"):
        if settings.get(key):
            lines.append(f'{key} = "{settings[key]}"')
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "modellint", "check", "--no-cache", "--exit-zero",
               "--format", "json", "--config", str(config)]
    if settings.get("select"):
        command += ["--select", settings["select"]]
    if settings.get("extend-select"):
        command += ["--extend-select", settings["extend-select"]]
    if "runtime" in settings:
        command += ["--runtime", "--device", settings.get("device") or "meta"]
    proc, wall = run([*command, *map(str, paths)], cwd=scratch)
    try:
        return json.loads(proc.stdout), wall
    except json.JSONDecodeError:
        sys.exit(f"modellint gave no JSON report:\n{proc.stderr[-2000:]}")


# -- attributing modellint findings to peer codes -------------------------------------------

_lines_cache: dict[str, list[str]] = {}


def source_line(path: str, line: int) -> str:
    if path not in _lines_cache:
        try:
            _lines_cache[path] = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            _lines_cache[path] = []
    lines = _lines_cache[path]
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _is_import(finding: dict) -> bool:
    text = source_line(finding["path"], finding["line"]).lstrip()
    return text.startswith(("from ", "import "))


def _pick(peer_code: str, finding: dict) -> bool:
    """Whether a finding of a modellint code shared by several codes of one peer is this one."""
    message = finding["message"]
    if peer_code == "TOR202":
        return "ToTensor" in message
    if peer_code in ("TOR001", "TOR004"):
        removed = "removed" in message and "ToTensor" not in message
        return removed and _is_import(finding) == (peer_code == "TOR004")
    if peer_code in ("TOR101", "TOR103"):
        deprecated = "removed" not in message and "ToTensor" not in message
        return deprecated and _is_import(finding) == (peer_code == "TOR103")
    if peer_code in ("TOR104", "TOR105"):
        return _is_import(finding) == (peer_code == "TOR105")
    if peer_code in ("TG005", "TG006"):
        binary = "sigmoid" in message or "BCE" in message
        return binary == (peer_code == "TG006")
    return True


def attribute(findings: list[dict], rows: list[dict]) -> tuple[Counter, Counter]:
    """(count per (peer, code), count per modellint code that no peer code covers)."""
    by_ml: dict[str, list[dict]] = {}
    for row in rows:
        for code in row["modellint"]:
            by_ml.setdefault(code, []).append(row)
    per_peer_code: Counter = Counter()
    past: Counter = Counter()
    for finding in findings:
        candidates = by_ml.get(finding["code"])
        if not candidates:
            past[finding["code"]] += 1
            continue
        for peer in PEERS:
            mine = [row for row in candidates if row["peer"] == peer]
            if len(mine) == 1:
                per_peer_code[(peer, mine[0]["code"])] += 1
            elif mine:
                for row in mine:
                    if _pick(row["code"], finding):
                        per_peer_code[(peer, row["code"])] += 1
                        break
    return per_peer_code, past


# -- report ---------------------------------------------------------------------------------

def fixtures_report(rows: list[dict], bin_dir: Path, scratch: Path) -> None:
    peer_args: list[str] = []
    for path in sorted(FIXTURES.glob("*.py")):
        for arg in (header(path, "peer-args") or "").split():
            if arg not in peer_args:
                peer_args.append(arg)
    tf, _ = torchfix(bin_dir, FIXTURES)
    tp, _ = torch_preflight(bin_dir, FIXTURES, peer_args)
    peer_found = Counter((Path(path).name, code) for path, code in [*tf, *tp])

    print(f"== fixtures/parity (TorchFix --select ALL; torch-preflight {' '.join(peer_args)}; "
          "modellint with each fixture's parity-config)")
    print(f"{'peer':<16} {'code':<7} {'peer':>5} {'modellint':>10}  covering  config")
    missing = 0
    for row in rows:
        path = fixture_path(row["peer"], row["code"])
        if not row["modellint"]:
            print(f"{row['peer']:<16} {row['code']:<7} {'-':>5} {'-':>10}  not covered (see docs)")
            continue
        if not path.exists():
            print(f"{row['peer']:<16} {row['code']:<7} fixture {path.name} is missing")
            missing += 1
            continue
        settings = parity_config(path)
        findings, _ = modellint([path], settings, scratch)
        ours = sum(1 for f in findings if f["code"] in row["modellint"])
        theirs = peer_found[(path.name, row["code"])]
        config = header(path, "parity-config") or "default"
        flag = "" if ours else "   <-- modellint reported nothing"
        flag += "" if theirs else "   <-- the peer reported nothing"
        missing += 0 if ours and theirs else 1
        print(f"{row['peer']:<16} {row['code']:<7} {theirs:>5} {ours:>10}  "
              f"{','.join(row['modellint']):<8}  {config}{flag}")
    print(f"\n{missing} fixture(s) where a tool reported nothing.\n")


def corpus_report(rows: list[dict], bin_dir: Path, names: list[str], scratch: Path) -> None:
    roots = [package_dir(name) for name in names]
    files = sum(1 for root in roots for _ in root.rglob("*.py"))
    print(f"== sources: {', '.join(names)} ({files} files)")
    tf_found: list[tuple[str, str]] = []
    tp_found: list[tuple[str, str]] = []
    walls: Counter = Counter()
    for root in roots:
        found, wall = torchfix(bin_dir, root)
        tf_found += found
        walls["TorchFix"] += wall
        found, wall = torch_preflight(bin_dir, root, [])
        tp_found += found
        walls["torch-preflight"] += wall
    settings = {"select": "ALL", "target-torch-version": "2.4"}
    ml_findings, walls["modellint"] = modellint(roots, settings, scratch)
    peer_counts = Counter(code for _, code in [*tf_found, *tp_found])
    ours, past = attribute(ml_findings, rows)

    print(f"{'peer':<16} {'code':<7} {'peer':>6} {'modellint':>10}  covering")
    for row in rows:
        covering = ",".join(row["modellint"]) or "not covered"
        mine = ours[(row["peer"], row["code"])] if row["modellint"] else "-"
        print(f"{row['peer']:<16} {row['code']:<7} {peer_counts[row['code']]:>6} {mine!s:>10}  "
              f"{covering}")
    unknown = sorted(set(peer_counts) - {row["code"] for row in rows})
    if unknown:
        print(f"peer codes missing from docs/parity.md: {', '.join(unknown)}")
    total = sum(past.values())
    detail = ", ".join(f"{code} {count}" for code, count in sorted(past.items()))
    print(f"\nmodellint findings no peer code covers: {total} ({detail or 'none'})")
    print("wall s: " + ", ".join(f"{tool} {wall:.1f}" for tool, wall in walls.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peers-venv", type=Path, default=Path.home() / ".cache" / "modellint-bench" / "peers",
        help="virtual environment holding torchfix and torch-preflight (created if missing)",
    )
    parser.add_argument("--corpus", default="torchvision,timm")
    parser.add_argument("--skip-corpus", action="store_true")
    args = parser.parse_args()

    rows = read_table()
    bin_dir = ensure_peers(args.peers_venv)
    with tempfile.TemporaryDirectory(prefix="modellint-parity-") as scratch:
        os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        fixtures_report(rows, bin_dir, Path(scratch))
        if not args.skip_corpus:
            corpus_report(rows, bin_dir, args.corpus.split(","), Path(scratch))


if __name__ == "__main__":
    main()
