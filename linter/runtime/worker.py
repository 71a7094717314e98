"""The worker subprocess: reads model requests (one JSON line each) from a pipe, checks each
model, writes one JSON line back. It tells the parent where it is (phase and module path)
through a small shared file, so a hang or crash can still be located."""

from __future__ import annotations

import faulthandler
import json
import mmap
import os
import sys
import traceback

WHERE_SIZE = 512


class Where:
    def __init__(self, path: str) -> None:
        self._file = open(path, "r+b")  # noqa: SIM115 - lives as long as the worker
        self._map = mmap.mmap(self._file.fileno(), WHERE_SIZE)
        self.label = ""

    def __call__(self, phase: str, module: str = "") -> None:
        data = f"{phase}\t{module}\t{self.label}".encode("utf-8", "replace")[: WHERE_SIZE - 1]
        self._map[: len(data) + 1] = data + b"\0"


def read_where(path: str) -> tuple[str, str]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(WHERE_SIZE).split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return "", ""
    phase, _, rest = data.partition("\t")
    module, _, _ = rest.partition("\t")
    return phase, module


def handle(request: dict, where: Where) -> dict:
    from modellint.runtime.build import resolve
    from modellint.runtime.engine import ModelCheck, first_line
    from modellint.runtime.sources import UserCode

    where.label = request["label"]
    where("import")
    try:
        factory, roots = resolve(request)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - importing user code may raise anything
        site = UserCode().innermost_traceback(exc.__traceback__)
        text = first_line(exc)
        if isinstance(exc, SystemExit):
            text = f"it called sys.exit({exc.code!r})"
        return {"error": f"`{request['label']}` could not be imported: {text}",
                "site": list(site[:2]) if site else None}
    if request.get("discovered") and not _is_module_class(factory):
        return {"skip": True}
    check = ModelCheck(
        factory=factory, kwargs=request.get("kwargs") or {}, specs=request.get("inputs"),
        device=request["device"], enabled=set(request["enabled"]), user_roots=roots,
        label=request["label"], where=where, train=True,
        memory_target=request.get("memory_target"),
    )
    outcome = check.run()
    where("done")
    return outcome.to_json()


def _is_module_class(factory) -> bool:
    import inspect

    from torch import nn

    return inspect.isclass(factory) and issubclass(factory, nn.Module) and not (
        inspect.isabstract(factory))


def main(request_fd: int, result_fd: int, where_path: str) -> None:
    # user code printing must not reach the protocol: stdout goes to stderr
    os.dup2(2, 1)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    where = Where(where_path)
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    results = os.fdopen(result_fd, "w", encoding="utf-8")
    import torch  # noqa: F401 - import once, before the first timeout starts

    results.write(json.dumps({"ready": True}) + "\n")
    results.flush()
    for line in requests:
        request = json.loads(line)
        timeout = request.get("timeout")
        if timeout:
            faulthandler.dump_traceback_later(timeout, exit=False, file=sys.stderr)
        try:
            response = handle(request, where)
        except KeyboardInterrupt:
            return
        except BaseException as exc:  # noqa: BLE001 - an engine failure is ML001, not a crash
            response = {"internal": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc()}
        finally:
            faulthandler.cancel_dump_traceback_later()
        sys.stderr.write("\n--modellint-request-done--\n")
        sys.stderr.flush()
        results.write(json.dumps(response) + "\n")
        results.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
