"""The GitHub Action's logic (action.yml calls it; tests run it with the environment GitHub sets).

Two steps, both driven by the action's inputs (`INPUT_ARGS`, `INPUT_SRC`, `INPUT_VERSION`,
`INPUT_RUNTIME`, `INPUT_SARIF_FILE`, `INPUT_SUMMARY`, `INPUT_BASELINE`, `INPUT_BASELINE_MODE`):

    python "$GITHUB_ACTION_PATH/linter/action.py" install   # standard library only
    "$MODELLINT_PYTHON" -m modellint.action                    # run: annotate, summarise

`install` makes a virtual environment under `$RUNNER_TEMP` (with the job's site-packages
visible, so that `runtime: true` can import the project's own dependencies) and installs
modellint there: from the action's checkout, or `modellint==VERSION` from the registry.
`run` checks `src` (after `--`, so that no file name is an option) with `args`, reports with
`--format github`, writes SARIF to `sarif-file` when asked (what was at that path is removed
first, and the annotations are read back from the file only when modellint wrote it, so the
checks run once), and exits with modellint's exit code. The checked repository is untrusted: the action adds no opt-in of
its own (no `--allow-config-plugins`; `--runtime` only for `runtime: true`), and in CI
modellint does not use a cache inside the checkout.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import venv
from collections.abc import Mapping, Sequence
from pathlib import Path

TRUE = ("true", "1", "yes", "on")


def get_input(name: str, environ: Mapping[str, str], default: str = "") -> str:
    """An action input as GitHub's toolkit reads it: `INPUT_<NAME>`, spaces as `_`, upper case;
    a `-` in the name may also be given as `_`."""
    key = "INPUT_" + name.replace(" ", "_").upper()
    for candidate in (key, key.replace("-", "_")):
        if candidate in environ:
            return environ[candidate].strip()
    return default


def flag(name: str, environ: Mapping[str, str], default: bool) -> bool:
    value = get_input(name, environ)
    if not value:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in ("false", "0", "no", "off"):
        return False
    raise SystemExit(f"modellint action: input `{name}` must be true or false, not {value!r}")


def requirement(environ: Mapping[str, str]) -> str:
    """What pip installs: the action's checkout or a released version, with the runtime extra
    when the runtime pass is asked for."""
    extra = "[runtime]" if flag("runtime", environ, False) else ""
    version = get_input("version", environ)
    if version:
        if version[0].isdigit():
            version = "==" + version
        return f"modellint{extra}{version}"
    action_path = environ.get("GITHUB_ACTION_PATH")
    if not action_path:
        raise SystemExit("modellint action: GITHUB_ACTION_PATH is not set")
    return f"{Path(action_path).resolve()}{extra}"


def venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install(environ: Mapping[str, str]) -> int:
    folder = Path(environ.get("RUNNER_TEMP") or Path.cwd()) / "modellint-venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=True, clear=True).create(folder)
    python = venv_python(folder)
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
               requirement(environ)]
    print("modellint action: " + shlex.join(command), flush=True)
    code = subprocess.call(command)
    if code == 0 and environ.get("GITHUB_OUTPUT"):
        with open(environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
            out.write(f"python={python}\n")
    return code


def check_command(environ: Mapping[str, str], python: str = sys.executable,
                  output: Sequence[str] = ()) -> list[str]:
    """The modellint command line for the inputs, with the `output` options. `src` comes last,
    after `--`: it may list the pull request's own file names, and one named `--exit-zero` is
    a file to check."""
    args = shlex.split(get_input("args", environ, "check") or "check")
    if "--" in args:
        raise SystemExit("modellint action: input `args` takes options only, without `--`: "
                         "the files to check go in `src`")
    if flag("runtime", environ, False) and "--runtime" not in args:
        args.append("--runtime")
    args += baseline_options(environ, args)
    src = shlex.split(get_input("src", environ, ".") or ".")
    # the console script, not `python -m`: -m would put the checked-out repository first on
    # sys.path, where a file named like one of modellint's imports (pluggy.py) would shadow it
    script = Path(python).with_name("modellint")
    prefix = [str(script)] if script.is_file() else [python, "-m", "modellint"]
    return [*prefix, *args, *output, "--", *src]


BASELINE_MODES = {"compare": ["--compare"], "record": ["--record"],
                  "update": ["--compare", "--update"]}


def baseline_options(environ: Mapping[str, str], args: Sequence[str]) -> list[str]:
    """`baseline` and `baseline-mode`: the options of `modellint run` that record or compare
    the baseline (the path in `--option=PATH`, so that no file name is taken for an option)."""
    path = get_input("baseline", environ)
    mode = get_input("baseline-mode", environ, "compare") or "compare"
    if mode not in BASELINE_MODES:
        raise SystemExit(f"modellint action: input `baseline-mode` must be compare, record or "
                         f"update, not {mode!r}")
    if not path:
        return []
    if not args or args[0] != "run":
        raise SystemExit("modellint action: input `baseline` needs `args: run ...` (and the "
                         "training command in `src`)")
    first, *rest = BASELINE_MODES[mode]
    return [f"{first}={path}", *rest]


def remove_stale_output(path: str, workspace: str) -> str | None:
    """Remove what is at `path` before modellint writes its own there (a SARIF file committed
    by the pull request would otherwise be annotated and uploaded as this run's); the reason
    when it cannot be, and nothing was removed. A path inside the workspace must stay inside
    it: a committed link among its folders would make the removal, and the write, land
    elsewhere."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    workspace = os.path.abspath(workspace)
    if os.path.commonpath([folder, workspace]) == workspace:
        real = os.path.realpath(workspace)
        if os.path.commonpath([os.path.realpath(folder), real]) != real:
            return f"the folder of {path} is a link that leads out of the workspace"
    if os.path.isdir(target) and not os.path.islink(target):
        return f"{path} is a folder"
    try:
        if os.path.lexists(target):
            os.unlink(target)  # a link itself, never what it points to
    except OSError as exc:
        return f"cannot remove {path}: {exc.strerror}"
    return None


def run(environ: Mapping[str, str]) -> int:
    sarif_file = get_input("sarif-file", environ)
    env = dict(environ)
    if not flag("summary", environ, True):
        env.pop("GITHUB_STEP_SUMMARY", None)
    if not sarif_file:
        return subprocess.call(check_command(environ, output=("--format", "github")), env=env)
    problem = remove_stale_output(sarif_file, environ.get("GITHUB_WORKSPACE") or os.getcwd())
    if problem:
        print(f"modellint action: input `sarif-file`: {problem}; nothing was checked",
              file=sys.stderr)
        return 2
    code = subprocess.call(
        check_command(environ, output=("--format", "sarif", "--output-file", sarif_file)),
        env=env)
    if code not in (0, 1):
        # modellint stopped before its report (its message is on stderr): whatever is at the
        # path now is not this run's, and is neither annotated nor left for the upload
        remove_stale_output(sarif_file, environ.get("GITHUB_WORKSPACE") or os.getcwd())
        return code
    try:
        with open(sarif_file, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"modellint action: cannot read back {sarif_file}: {exc}", file=sys.stderr)
        return 2
    annotate(document, env)
    return code


def annotate(document: dict, environ: Mapping[str, str]) -> None:
    from modellint.report import Summary
    from modellint.report.github import GithubReporter
    from modellint.report.sarif import files_checked, findings_from_sarif, notebooks_checked

    summary = Summary(files_checked=files_checked(document),
                      notebooks_checked=notebooks_checked(document))
    GithubReporter(sys.stdout, environ=environ).report(findings_from_sarif(document), summary)
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    step = argv[0] if argv else "run"
    if step == "install":
        return install(os.environ)
    if step == "run":
        return run(os.environ)
    print(f"modellint action: unknown step {step!r} (install or run)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
