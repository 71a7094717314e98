"""The runtime worker, seen from modellint: a server process (see `worker.py`) that checks each
model in a fresh child process with a per-model timeout. A model that raises, hangs, exits,
crashes or runs out of memory becomes one result describing what happened, and the next model
starts from a clean interpreter."""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from modellint.runtime.worker import KILL_GRACE, WHERE_SIZE, keep_out_of_reach

START_TIMEOUT = 120.0
# seconds the server may take beyond a model's own timeout (forking, ending leftovers) before
# it is taken for stuck
SERVER_MARGIN = 30.0
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


class Worker:
    """The server process that checks each model in a child of its own. `hide_gpus`: the
    models see no CUDA device (a `--device cpu` or `meta` run), so code that picks its own
    device with `torch.cuda.is_available()` picks the cpu the models are built on."""

    def __init__(self, *, hide_gpus: bool = False) -> None:
        self.hide_gpus = hide_gpus
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="modellint-")
        self.where_path = os.path.join(self._tmp.name, "where")
        # the server's own output (its start-up); the models' output comes back capped
        self.stderr_path = os.path.join(self._tmp.name, "stderr")
        self._buffer = b""
        self._child: int | None = None  # the process group of the model being checked
        # the pipes to and from the server: open from start() until stop() or close()
        self._request_w: int | None = None
        self._result_r: int | None = None

    def start(self) -> None:
        with open(self.where_path, "wb") as handle:
            handle.write(b"\0" * WHERE_SIZE)
        request_r, self._request_w = os.pipe()
        self._result_r, result_w = os.pipe()
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115
        # for the rest of this process's life: a process a model left behind must not reach
        # modellint's output, even after the runtime pass (see worker.py's docstring)
        keep_out_of_reach()
        env = dict(os.environ)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        if self.hide_gpus:
            env["CUDA_VISIBLE_DEVICES"] = ""
        # the working directory goes on sys.path in each model's child, not here: the
        # server imports only torch and modellint
        code = ("import sys; sys.path = [p for p in sys.path if p]; "
                "from modellint.runtime.worker import main; "
                "main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(request_r), str(result_w), self.where_path],
            pass_fds=(request_r, result_w), stdin=subprocess.DEVNULL,
            stdout=self._stderr, stderr=self._stderr, env=env, cwd=os.getcwd(),
            start_new_session=True,  # Ctrl-C is modellint's to handle; it ends the server
        )
        os.close(request_r)
        os.close(result_w)
        self._buffer = b""
        ready = self._read(time.monotonic() + START_TIMEOUT)
        if not isinstance(ready, dict) or not ready.get("ready"):
            tail = self._stderr_tail()
            self.stop()
            raise RuntimeError(f"the runtime worker did not start: {tail or ready}")

    def _read(self, deadline: float) -> dict[str, Any] | str:
        """The next line that is a JSON object, or "timeout"/"eof"; other lines are skipped."""
        assert self._result_r is not None, "read after start()"
        while True:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout"
                ready, _, _ = select.select([self._result_r], [], [], min(left, 1.0))
                if not ready:
                    continue
                chunk = os.read(self._result_r, 1 << 16)
                if not chunk:
                    return "eof"
                self._buffer += chunk
            line, _, self._buffer = self._buffer.partition(b"\n")
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if isinstance(frame, dict):
                return frame

    def _send(self, data: bytes) -> None:
        assert self._request_w is not None, "send after start()"
        os.write(self._request_w, data)

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None
        # chosen now, after the previous model's processes have ended: only a frame with it
        # is this model's (see worker.py's docstring)
        nonce = secrets.token_hex(16)
        payload = json.dumps({**request, "timeout": timeout, "nonce": nonce}) + "\n"
        try:
            self._send(payload.encode())
        except BrokenPipeError:
            self.stop()
            self.start()
            self._send(payload.encode())
        self._child = None
        deadline = time.monotonic() + timeout + KILL_GRACE + SERVER_MARGIN
        while True:
            frame = self._read(deadline)
            if not isinstance(frame, dict):
                break
            if frame.get("nonce") != nonce:
                continue
            if isinstance(frame.get("child"), int):
                self._child = frame["child"]
            elif isinstance(frame.get("result"), dict):
                self._child = None
                result = frame["result"]
                if "failure" in result:
                    result["site"] = _site(result.pop("trace", ""))
                return result
        # the server itself stopped answering or ended: not the model's doing
        tail = self._stderr_tail()[-500:]
        self.stop()
        what = "stopped answering" if frame == "timeout" else "ended"
        return {"internal": f"the runtime worker {what}" + (f": {tail}" if tail else "")}

    def _stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as handle:
                return handle.read()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def stop(self) -> None:
        # the model's process group first: it is in a session of its own, which ending the
        # server's does not reach
        for group in (self._child, self.proc.pid if self.proc is not None else None):
            if group is not None:
                try:
                    os.killpg(group, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self._child = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None
        for fd in ("_request_w", "_result_r"):
            value = getattr(self, fd, None)
            if value is not None:
                try:
                    os.close(value)
                except OSError:
                    pass
                setattr(self, fd, None)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None and self._child is None:
            try:
                if self._request_w is not None:  # None: a close() before this one timed out
                    os.close(self._request_w)  # EOF: the worker ends its loop
                    self._request_w = None
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()
        try:
            self._stderr.close()
        except AttributeError:
            pass
        self._tmp.cleanup()


def _site(trace: str) -> list | None:
    """The innermost user frame of faulthandler's dump (most recent call first)."""
    from modellint.runtime.sources import UserCode

    user = UserCode()
    for line in trace.splitlines():
        match = _FRAME.match(line)
        if match and user(match.group("file")):
            return [match.group("file"), int(match.group("line")), match.group("func")]
    return None


def describe_failure(result: dict[str, Any]) -> str:
    """What happened to a worker that did not answer, in words."""
    if result["failure"] == "timeout":
        what = f"did not finish within {result['timeout']:g} s (timeout)"
    else:
        code = result.get("returncode")
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if name == "SIGKILL":
                what = "was killed (SIGKILL), most likely for running out of memory"
            elif name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT"):
                what = f"crashed the Python process ({name})"
            else:
                what = f"was ended by {name}"
        else:
            what = f"ended the process with exit status {code} (os._exit or a C library)"
    return what
