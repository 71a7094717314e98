"""What `--help` tells a user: every subcommand listed, every format, every option explained;
and the sizes `trace --memory` prints, in one unit."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest
from conftest import write

from modellint.cli import build_parser
from modellint.runtime.cli import build_parser as trace_parser


def _parsers(parser: argparse.ArgumentParser, name: str):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_of_every_command_has_help():
    missing = []
    parsers = [*_parsers(build_parser(), "modellint"), ("modellint trace", trace_parser())]
    assert {name for name, _ in parsers} >= {"modellint check", "modellint rules",
                                             "modellint rule", "modellint trace",
                                             "modellint run", "modellint server"}
    for name, parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {choice.dest for choice in action._choices_actions}
                missing += [f"{name} {sub}" for sub in action.choices if sub not in listed]
                missing += [f"{name} {choice.dest}" for choice in action._choices_actions
                            if not choice.help]
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == [], f"options without help: {missing}"


def _help(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "modellint", *args, "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_top_level_help_lists_every_subcommand_with_trace():
    text = _help()
    for command in ("check", "rules", "rule", "trace", "run", "server"):
        assert re.search(rf"^\s+{command}\s+\S", text, re.M), (command, text)


def test_check_help_lists_every_report_format():
    from modellint.plugins import load_registry

    text = " ".join(_help("check").split())
    formats = sorted(load_registry().reporters)
    assert {"text", "json", "sarif", "github", "concise"} <= set(formats)
    match = re.search(r"--format FORMAT, --output-format FORMAT (.*?) \(default text\)", text)
    assert match, text
    assert sorted(f.strip() for f in match.group(1).split(",")) == formats


def test_run_help_needs_no_script_and_says_it_executes_it():
    text = _help("run")
    assert "--steps" in text and "EXECUTES" in text


def test_trace_help_is_the_trace_parsers():
    text = _help("trace")
    assert "--feature-maps" in text and "--layers" in text and "repeatable" in text


torch = pytest.importorskip("torch")

HUGE = """\
import torch.nn as nn


class Huge(nn.Module):
    # about 69 billion parameters: built on `meta`, it takes no memory
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(2**17, 2**17) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)
"""


def test_memory_summary_of_a_huge_model_on_meta_shows_one_unit(tmp_path):
    write(tmp_path, "huge.py", HUGE)
    proc = subprocess.run(
        [sys.executable, "-m", "modellint", "trace", "huge.py:Huge", "--device", "meta",
         "--input", f"2,{2**17}", "--memory", "--target-gpu-memory", "80GB"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = proc.stdout[proc.stdout.index("parameters ("):]
    # the table's totals line and every figure of the memory summary: one unit
    units = re.findall(r"[\d.,]+ ([KMGT]?i?B)\b", summary)
    assert len(units) >= 8 and set(units) == {"GiB"}, summary
    # 68.7 billion float32 parameters: 256 GiB, and twice that for AdamW's state
    assert re.search(r"parameters\s+256\.0 GiB", summary), summary
    assert re.search(r"optimizer state\s+512\.0 GiB", summary), summary
    assert re.search(r"total\s+1,02\d\.\d GiB", summary), summary
