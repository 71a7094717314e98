"""The longer fuzz run of tests/test_fuzz.py: random (not derandomized) and many more examples.

    python bench/fuzz.py [--scale 20] [--seed N]

Runs each property (mutated fixtures, hypothesmith programs alone and inside the fixtures,
hypothesmith syntax trees) with `scale` times the CI test's examples, prints the shrunk
reproducer of any failure, and exits 1 if one failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

from hypothesis import given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import hypothesmith  # noqa: E402
import test_fuzz  # noqa: E402
from test_fuzz import FUZZ, TEXTS, check, mutated_fixture  # noqa: E402


def _inside(name: str, program: str, before: bool) -> None:
    fixture = TEXTS[name]
    check(program + "\n" + fixture if before else fixture + "\n" + program)


PROPERTIES = [
    # name, strategies, property, examples in CI
    ("mutated fixtures", (mutated_fixture(),), check, 500),
    ("generated programs", (hypothesmith.from_grammar(),), check, 60),
    ("generated programs inside the fixtures",
     (st.sampled_from(sorted(TEXTS)), hypothesmith.from_grammar(), st.booleans()), _inside, 100),
    ("generated syntax trees", (hypothesmith.from_node(),), check, 20),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    run_seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed: {run_seed}  rules: {len(test_fuzz.RULES)}  fixtures: {len(TEXTS)}")
    failed = 0
    for name, strategies, prop, examples in PROPERTIES:
        count = max(1, int(examples * args.scale))
        test = seed(run_seed)(
            settings(FUZZ, max_examples=count, derandomize=False, database=None)(
                given(*strategies)(prop)
            )
        )
        start = time.perf_counter()
        try:
            test()
        except Exception as exc:  # noqa: BLE001 - report and go on with the next property
            failed += 1
            print(f"FAIL {name} ({count} examples, {time.perf_counter() - start:.0f} s)")
            print("".join(traceback.format_exception(exc))[-6000:])
        else:
            print(f"ok   {name} ({count} examples, {time.perf_counter() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
