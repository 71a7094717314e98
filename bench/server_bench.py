"""CPU time the language server spends answering one change to a 1,000-line file.

    python bench/server_bench.py [--lines 1000] [--changes 20] [--file PATH]

Starts the real server (`python -m modellint server`) with pygls's client (the one
tests/test_server.py uses), opens a file of about `--lines` lines made of the fixtures (model
code with findings in it), then sends `--changes` edits one at a time (a character typed in the
middle of the file, a comment at the end of another line each time) and waits for the new diagnostics. The server's
own CPU time (user + system, from /proc) for each change, from the edit to the diagnostics,
is reported; the debounce pause costs no CPU. Target: under 300 ms (issue 13). Linux only.
On a shared machine the CPU time of the same work varies with the load (caches, clock): the
minimum is the closest to an idle machine's figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_server import Session  # noqa: E402


def source(lines: int) -> str:
    files = sorted((ROOT / "fixtures").glob("*.py"))
    parts: list[str] = []
    count = 0
    round_ = 0
    while count < lines:
        for path in files:
            text = path.read_text(encoding="utf-8")
            # the same code again under other names, as a long file would have
            text = text.replace("class ", f"class V{round_}")
            parts.append(text.rstrip("\n") + "\n\n\n")
            count += text.count("\n") + 2
            if count >= lines:
                break
        round_ += 1
    return "".join(parts)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--file", type=Path,
                        help="edit this file instead (timm's coat.py is a real 990-line model)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        session = Session(Path(folder))
        try:
            pid = session.client._server.pid
            text = (args.file.read_text(encoding="utf-8") if args.file
                    else source(args.lines))
            path = Path(folder) / "long.py"
            uri = path.as_uri()
            started = cpu_seconds(pid)
            first = session.open(path, text)
            opened = cpu_seconds(pid) - started
            lines = text.count("\n")
            costs, walls = [], []
            for version in range(2, args.changes + 2):
                # a comment typed at the end of a line: the file stays valid Python
                line = lines // 4 + version * 7
                end = len(text.split("\n")[line])
                before = session.count(uri)
                cpu = cpu_seconds(pid)
                wall = time.perf_counter()
                session.client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(line=line, character=end),
                                          end=types.Position(line=line, character=end)),
                        text="  # edited")]))
                diagnostics = session.wait(uri, before)
                costs.append(cpu_seconds(pid) - cpu)
                walls.append(time.perf_counter() - wall)
            print(f"file: {lines} lines, {len(first)} diagnostics on open "
                  f"({len(diagnostics)} after the last change)")
            print(f"open: {opened * 1000:.0f} ms CPU (settings and plugins loaded, first lint)")
            print(f"change: median {statistics.median(costs) * 1000:.0f} ms CPU, "
                  f"min {min(costs) * 1000:.0f}, max {max(costs) * 1000:.0f} ms over "
                  f"{len(costs)} changes "
                  f"(wall, with the {0.2 * 1000:.0f} ms debounce: median "
                  f"{statistics.median(walls) * 1000:.0f} ms)")
        finally:
            session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
