"""What `pip install modellint` (not editable) ships: every package of the source tree."""

from __future__ import annotations

from pathlib import Path

from modellint.config import tomllib  # the standard library's, or tomli before 3.11

ROOT = Path(__file__).resolve().parent.parent


def test_every_source_package_is_listed_for_the_wheel():
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = set()
    for name, folder in settings["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join((name, *relative.parts)))
    # `modellint.rules` lives in its own folder, not under linter/
    assert on_disk == set(settings["packages"])
