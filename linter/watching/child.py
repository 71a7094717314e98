"""The process `modellint run` starts: `python -m modellint.watching.child RESULT OPTIONS -- TARGET
ARGS...` runs the user's script (a file, or `-m package.module`) as `__main__` with the
instrumentation installed, and writes what it saw to RESULT (JSON) when the script ends, fails,
or spends its budget (steps or seconds). The script's own output goes where it would."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modellint.watching.record import Recorder


class _Finish:
    def __init__(self, result_path: str, options: dict, followed: bool = False) -> None:
        self.result_path = result_path
        self.options = options
        self.followed = followed  # a process the script started
        self.recorder: Recorder | None = None
        self.lock = threading.Lock()
        self.done = False

    def __call__(self, reason: str, leave: bool = True) -> None:
        """Check what was seen, write the result and leave at once: nothing more of the
        script runs (no traceback, no `finally` of the user's), as if the run ended there.
        Not `leave`: the process goes on (a process the script started, ending as it would)."""
        with self.lock:
            if self.done:
                return
            self.done = True
            recorder = self.recorder
            if recorder is not None:
                recorder.stopped = recorder.stopped or reason
            self.write()
        if not leave:
            return
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(0)

    def write(self) -> None:
        from modellint.plugins import load_registry
        from modellint.watching.findings import run_checks

        recorder = self.recorder
        result: dict = {"findings": [], "notes": []}
        try:
            if recorder is not None:
                recorder.uninstall()
                registry = load_registry(self.options.get("plugins", []))
                run_checks(recorder, registry, set(self.options.get("codes", [])))
                recorder.cleanup()
                result = {"findings": [raw.to_json() for raw in recorder.findings],
                          "notes": recorder.notes,
                          "summary": recorder.summary(), "rank_prints": recorder.rank_prints,
                          "followed": self.followed}
                if recorder.observe:
                    from modellint.watching.baseline import observe

                    result["observation"] = observe(recorder)
        except BaseException as exc:  # noqa: BLE001 - the parent reports it as ML001
            result["internal"] = f"{type(exc).__name__}: {exc}"
        tmp = self.result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(result, handle, default=str)
        os.replace(tmp, self.result_path)


def _print_user_traceback(exc: BaseException) -> None:
    """The script's traceback as Python would print it, without modellint's frames (its
    wrappers of torch's functions, the child) or runpy's, wherever they are in the stack."""
    from modellint.watching.record import modellint_file

    def user_only(report: traceback.TracebackException) -> None:
        report.stack = traceback.StackSummary.from_list(
            [frame for frame in report.stack if not modellint_file(frame.filename)
             and not frame.filename.startswith("<frozen runpy")
             and os.path.basename(frame.filename) != "runpy.py"])
        for chained in (report.__cause__, report.__context__):
            if chained is not None:
                user_only(chained)

    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    user_only(report)
    sys.stderr.write("".join(report.format()))


def main(argv: list[str]) -> int:
    result_path, options_text, separator, *target = argv
    if os.environ.get("RANK") not in (None, "", "0"):  # under torchrun: one result per rank
        result_path = f"{result_path}.rank{os.environ['RANK']}"
    assert separator == "--"
    # before the script runs: run as root, it could otherwise open modellint's descriptors
    from modellint.runtime.worker import give_up_ptrace

    give_up_ptrace()
    options = json.loads(options_text)

    def run_script() -> None:
        import runpy

        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(target[0])
            sys.argv = [path, *target[1:]]
            sys.path.insert(0, os.path.dirname(path))
            runpy.run_path(path, run_name="__main__")

    watched(result_path, options, run_script)
    return 0


def watched(result_path: str, options: dict, run, followed: bool = False
            ) -> BaseException | None:
    """Run `run()` with the instrumentation installed, write what it saw to `result_path` and
    end the process; the processes it starts are followed. `followed` (a process the script
    started): the process goes on to end as it would, and the error that ended `run()`, if
    any, is returned."""
    from modellint.watching import processes
    from modellint.watching.record import BudgetSpent, Recorder, crash_record

    finish = _Finish(result_path, options, followed)
    recorder = Recorder(steps=options.get("steps"),
                        batches_per_epoch=options.get("batches_per_epoch"), on_budget=finish,
                        observe=bool(options.get("observe")) and not followed)
    finish.recorder = recorder
    timeout = options.get("timeout")
    if timeout:
        def time_out() -> None:
            # stop in the script's own thread at its next step or forward (a consistent
            # record); a script that reaches none in 3 s is stopped from here
            recorder.stop_requested = "timeout"
            time.sleep(3.0)
            finish("timeout")

        timer = threading.Timer(float(timeout), time_out)
        timer.daemon = True
        timer.start()
    recorder.install()
    processes.active.append(recorder)
    # by its module's name (run with `-m`, this module is `__main__`): what a process the
    # script starts imports to run its target watched
    from modellint.watching import child

    processes.follow(result_path, options, child.watched)
    failure: BaseException | None = None
    try:
        run()
    except BudgetSpent:
        pass
    except SystemExit as exc:
        code = exc.code
        failure = exc
        if code not in (None, 0):
            recorder.crash = crash_record(exc, recorder.user)
            recorder.crash["error"] = (f"exit status {code}" if isinstance(code, int)
                                       else f"exit: {code}")
    except KeyboardInterrupt as exc:
        failure = exc
        recorder.stopped = "interrupted"
    except BaseException as exc:  # noqa: BLE001 - the script's own error: one finding
        failure = exc
        recorder.crash = crash_record(exc, recorder.user)
        if not followed:
            _print_user_traceback(exc)
    finish("end", leave=not followed)
    return failure


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
