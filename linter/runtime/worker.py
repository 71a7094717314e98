"""The worker: a server process that imports torch once, then forks a fresh child for each
model request (one JSON line each, from a pipe) and writes back JSON lines tagged with the
request's nonce: `{"nonce", "child": pid}` once the child runs, `{"nonce", "result": {...}}`
when it is done and every process it started has ended.

The model's code runs in the child by design and may lie about its own model; it must not
reach this server's pipes or modellint's own output, which would let it forge another model's
result or write into the report. The child holds no descriptor of theirs (only its own result,
output and trace pipes), and on Linux both processes are made non-dumpable and the child gives
up CAP_SYS_PTRACE, so it cannot open them through /proc/<pid>/fd/N, read their memory, or
ptrace them (see `keep_out_of_reach`). modellint chooses each request's nonce after the
previous model's processes have ended, and takes a model's result only from a frame with its
nonce, so no frame sent or forged while one model was checked can count for another.

Each child starts from the server's clean state, in a session (process group) of its own, so
nothing one model does to its interpreter (grad mode, default dtype, `sys.modules`, the
working directory, threads) reaches the next, and every process it started ends with it. The
child tells the server where it is (phase and module path) through a small shared file, so a
hang or crash can still be located; its printed output is kept bounded (head and tail)."""

from __future__ import annotations

import faulthandler
import gc
import json
import mmap
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

WHERE_SIZE = 512


class Where:
    def __init__(self, path: str) -> None:
        self.path = path
        self._file = open(path, "r+b")  # noqa: SIM115 - lives as long as the worker
        self._map = mmap.mmap(self._file.fileno(), WHERE_SIZE)
        self.label = ""

    def clear(self) -> None:
        self._map[:WHERE_SIZE] = b"\0" * WHERE_SIZE

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
        checks=[cls() for cls in load_checks(request.get("checks") or [],
                                             request.get("check_paths") or [])],
        label=request["label"], where=where, train=True,
        memory_target=request.get("memory_target"),
    )
    outcome = check.run()
    where("done")
    return outcome.to_json()


def check_reference(cls: type) -> tuple[str, str | None]:
    """`module:qualname` of a runtime check class, and the folder to import its module
    from when that is not where modellint is (a plugin's)."""
    module = sys.modules[cls.__module__]
    root = None
    file = getattr(module, "__file__", None)
    if file and not cls.__module__.startswith("modellint."):
        root = os.path.abspath(file)
        for _ in range(cls.__module__.count(".") + 1 + file.endswith("__init__.py")):
            root = os.path.dirname(root)
    return f"{cls.__module__}:{cls.__qualname__}", root


def load_checks(references: list[str], paths: list[str]) -> list[type]:
    """The runtime check classes named by `check_reference`, imported in the model's child
    (their folders appended to the path: they never shadow what is already importable)."""
    import importlib

    for path in paths:
        if path not in sys.path:
            sys.path.append(path)
    found = []
    for reference in references:
        module_name, _, qualname = reference.partition(":")
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
        found.append(target)
    return found


def _is_module_class(factory) -> bool:
    import inspect

    from torch import nn

    return inspect.isclass(factory) and issubclass(factory, nn.Module) and not (
        inspect.isabstract(factory))


# seconds a child gets after its timeout for faulthandler's stack dump, before it is killed
KILL_GRACE = 2.0
# bytes of a model's printed output kept from its beginning, and as many from its end
OUTPUT_KEEP = 64 * 1024
# bytes of the child's response read at most (a process it forked could write there too)
RESULT_LIMIT = 64 << 20
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_LOWER = 3
_CAP_SYS_PTRACE = 19
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class Capture:
    """The first and last `keep` bytes of a stream, and how many bytes it had in all."""

    def __init__(self, keep: int = OUTPUT_KEEP) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        middle = b""
        if self.dropped:
            from modellint.runtime.memory import size_text

            middle = f"\n[... {size_text(self.dropped)} of output dropped ...]\n".encode()
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


def _prctl(option: int, value: int) -> None:
    """Linux's prctl, best effort: elsewhere (or without libc) nothing happens."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def keep_out_of_reach() -> None:
    """Close this process's descriptors and memory to the other processes of its user, which
    is what model code run by modellint is (Linux: not dumpable, so /proc/<pid>/fd/N,
    /proc/<pid>/mem, pidfd_getfd and ptrace need CAP_SYS_PTRACE). A forked child inherits it;
    an exec ends it."""
    _prctl(_PR_SET_DUMPABLE, 0)


def give_up_ptrace() -> None:
    """Drop CAP_SYS_PTRACE, which reaches into non-dumpable processes, from this process and
    what it starts, where it has it (modellint run as root): from the bounding set first (an
    exec as root would grant it again), then from the permitted, effective, inheritable and
    ambient sets. Best effort, Linux only."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        libc.prctl(_PR_CAPBSET_DROP, _CAP_SYS_PTRACE, 0, 0, 0)
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_LOWER, _CAP_SYS_PTRACE, 0, 0)
        header, data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
        if libc.capget(ctypes.byref(header), data) == 0:
            keep = ~(1 << _CAP_SYS_PTRACE) & 0xFFFFFFFF
            data[0].effective &= keep
            data[0].permitted &= keep
            data[0].inheritable &= keep
            libc.capset(ctypes.byref(header), data)
    except (OSError, AttributeError):
        pass


def _child_main(request: dict, where: Where, result_w: int, trace_w: int) -> None:
    """In the forked child: check the model, write the response to `result_w`."""
    trace = os.fdopen(trace_w, "w", encoding="utf-8")
    # faulthandler's stack dumps (timeout, crash) go to their own pipe: the model's printing
    # can neither push them out of the kept output nor forge them
    faulthandler.enable(file=trace, all_threads=False)
    timeout = request.get("timeout")
    if timeout:
        faulthandler.dump_traceback_later(timeout, exit=False, file=trace)
    try:
        response = handle(request, where)
    except BaseException as exc:  # noqa: BLE001 - an engine failure is ML001, not a crash
        response = {"internal": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()}
    faulthandler.cancel_dump_traceback_later()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    data = (json.dumps(response) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(result_w, view):]


def _fork_child(request: dict, where: Where, server_fds: tuple[int, ...]):
    """Fork the child for one request: (pid, result, output and trace read ends)."""
    pipes = [os.pipe() for _ in range(3)]  # result, output (stdout+stderr), trace
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()  # its own session and process group: ended as one when done
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # and with the server
            # the model's code runs here: the server's and modellint's descriptors and
            # memory stay out of its reach (it inherits the server's non-dumpable state)
            give_up_ptrace()
            keep_out_of_reach()
            for fd in (*server_fds, *(r for r, _ in pipes)):
                os.close(fd)
            (_, result_w), (_, output_w), (_, trace_w) = pipes
            os.dup2(output_w, 1)
            os.dup2(output_w, 2)
            os.close(output_w)
            sys.path.insert(0, "")  # configured `package.module:name` targets
            _child_main(request, where, result_w, trace_w)
        except BaseException:  # noqa: BLE001 - the child must never return into the server
            code = 70
        finally:
            os._exit(code)
    for _, write_end in pipes:
        os.close(write_end)
    return pid, [r for r, _ in pipes]


def _exit_status(pid: int, block: bool) -> int | None:
    """The child's exit status once it has exited, leaving it a zombie (so its process group
    id cannot be reused) where the platform allows; None while it runs."""
    if hasattr(os, "waitid"):
        flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
        found = os.waitid(os.P_PID, pid, flags)
        if found is None:
            return None
        return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status
    done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _children() -> list[int]:
    """This process's live children (Linux); orphans of a model come here (subreaper)."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                found.extend(int(pid) for pid in handle.read().split())
        except (OSError, ValueError):
            pass
    return found


def _end_leftovers(pgid: int, patience: float = 2.0) -> None:
    """End what the model's child left: its process group, and processes that left the group
    (`setsid`) and were orphaned to this server; reap them all."""
    deadline = time.monotonic() + patience
    while True:
        _kill_group(pgid)
        while True:
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                done = 0
            if not done:
                break
        left = _children()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(pgid, 0)
            group_alive = True
        except (ProcessLookupError, PermissionError):
            group_alive = False
        if (not left and not group_alive) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _read_ready(ready: list[int], sinks: dict) -> None:
    """Read what is there on each ready pipe into its sink; a pipe at its end is closed."""
    for fd in ready:
        if fd not in sinks:
            continue  # the pidfd
        chunk = os.read(fd, 1 << 16)
        if chunk:
            sinks[fd](chunk)
        else:
            del sinks[fd]
            os.close(fd)


def _well_formed(response: Any) -> bool:
    """Whether a child's response has the shape modellint reads: the model's code runs in
    the child and could have written anything on its result pipe."""

    def optional(value: Any, kind: type) -> bool:
        return value is None or isinstance(value, kind)

    if not isinstance(response, dict):
        return False
    notes = response.get("notes", [])
    if not (isinstance(notes, list) and all(isinstance(note, str) for note in notes)):
        return False
    if "findings" in response:
        findings = response["findings"]
        return isinstance(findings, list) and all(
            isinstance(raw, dict) and isinstance(raw.get("code"), str)
            and isinstance(raw.get("message"), str) and optional(raw.get("file"), str)
            and optional(raw.get("line"), int) for raw in findings)
    if "error" in response:
        site = response.get("site")
        return isinstance(response["error"], str) and (site is None or (
            isinstance(site, list) and len(site) == 2 and isinstance(site[0], str)
            and isinstance(site[1], int)))
    return response.get("skip") is True or isinstance(response.get("internal"), str)


def serve(request: dict, where: Where, server_fds: tuple[int, ...], announce=None) -> dict:
    """Check one model in a fresh child; its response, or what happened to it. `announce`
    is told the child's process id (its process group) as soon as it runs."""
    where.clear()
    pid, (result_r, output_r, trace_r) = _fork_child(request, where, server_fds)
    if announce is not None:
        announce(pid)
    timeout = request.get("timeout")
    deadline = time.monotonic() + timeout + KILL_GRACE if timeout else None
    result, output, trace = bytearray(), Capture(), Capture()

    def keep_result(chunk: bytes) -> None:
        if len(result) < RESULT_LIMIT:
            result.extend(chunk)

    sinks = {result_r: keep_result, output_r: output.add, trace_r: trace.add}
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    status = None
    timed_out = False
    while status is None:
        status = _exit_status(pid, block=False)
        if status is not None:
            break
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            timed_out = True
            _kill_group(pid)
            status = _exit_status(pid, block=True)
            break
        wait = 1.0 if pidfd is not None else 0.05
        if deadline is not None:
            wait = min(wait, deadline - now)
        watched = [*sinks, pidfd] if pidfd is not None else list(sinks)
        ready, _, _ = select.select(watched, [], [], wait)
        _read_ready(ready, sinks)
    if pidfd is not None:
        os.close(pidfd)
    # the exited child still holds its process group id as a zombie: end the group before
    # reaping it, then whatever left the group; the pipes they held then close
    _kill_group(pid)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # reaped already where the platform has no waitid
    _end_leftovers(pid)
    drain_until = time.monotonic() + 1.0
    while sinks and time.monotonic() < drain_until:
        ready, _, _ = select.select(list(sinks), [], [], 0.1)
        _read_ready(ready, sinks)
    for fd in sinks:
        os.close(fd)
    response: dict[str, Any] | None = None
    if not timed_out and status == 0 and result.endswith(b"\n"):
        try:
            response = json.loads(bytes(result).splitlines()[-1])
        except ValueError:
            response = None
        if not _well_formed(response):  # the model's code may have written it
            response = None
    if response is None:
        phase, module = read_where(where.path)
        response = {"failure": "timeout" if timed_out else "died", "phase": phase,
                    "module": module, "trace": trace.text(), "timeout": timeout,
                    "returncode": status}
    if "findings" not in response:
        # what it printed last may tell why it failed (kept for a failure only, so that a
        # run over many models holds little)
        response["output"] = output.text()
    if output.dropped:
        from modellint.runtime.memory import size_text

        response.setdefault("notes", []).append(
            f"`{request['label']}` printed {size_text(output.total)} of output while it was "
            f"checked; all but its first and last {size_text(output.keep)} was dropped")
    return response


def main(request_fd: int, result_fd: int, where_path: str) -> None:
    # before any model's code runs: see the module's docstring
    keep_out_of_reach()
    # nothing this process prints may reach the protocol: stdout goes to stderr
    os.dup2(2, 1)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    where = Where(where_path)
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    results = os.fdopen(result_fd, "w", encoding="utf-8")
    # imported once, before any model's code: each child starts with them loaded
    import torch  # noqa: F401

    import modellint.rules.runtime.checks  # noqa: F401
    import modellint.runtime.engine  # noqa: F401
    import modellint.runtime.memory  # noqa: F401

    # the imported objects never change: keeping them out of the collector's sight spares
    # each forked child from copying their pages when it collects
    gc.freeze()
    # processes a model starts and orphans (even in a session of their own) come to this
    # server, which ends them when the model is done
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def send(message: dict) -> None:
        results.write(json.dumps(message) + "\n")
        results.flush()

    send({"ready": True})
    for line in requests:
        request = json.loads(line)
        nonce = request.get("nonce")
        result = serve(request, where, (request_fd, result_fd),
                       announce=lambda pid, nonce=nonce: send({"nonce": nonce, "child": pid}))
        send({"nonce": nonce, "result": result})


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
