"""The runtime workers isolate models from each other: a model that changes global state (grad
mode, default dtype, `sys.modules`, the working directory), leaves a thread, a child or an
orphan process behind, or prints gigabytes, does not change what the next model is reported
for; and a forward that returns None still gets its unused sub-modules reported (ML703)."""

from __future__ import annotations

import os
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from modellint.runtime.build import import_file  # noqa: E402
from modellint.runtime.engine import ModelCheck, runtime_codes  # noqa: E402
from modellint.runtime.pass_ import result_findings, run_jobs  # noqa: E402
from modellint.runtime.specs import ModelJob  # noqa: E402

CODES = sorted(runtime_codes())

# a correct model with one sub-module its forward never calls: exactly one ML703, at line 8
VICTIM = textwrap.dedent("""\
    import torch.nn as nn


    class Victim(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.aux = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x)
    """)


def write(folder: Path, name: str, source: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return str(path)


def poison(setup: str, name: str = "Poison") -> str:
    """A correct model whose first construction does `setup`, as importing it once did (the
    runtime pass does not run a file's top-level script code: the constructor is where a
    model's own code runs, and it runs more than once)."""
    body = textwrap.indent(textwrap.dedent(setup) or "pass\n", " " * 4)
    return f"_done = []\n\n\ndef _setup():\n{body}\n" + textwrap.dedent(f"""
        import torch.nn as nn


        class {name}(nn.Module):
            def __init__(self):
                if not _done:
                    _done.append(True)
                    _setup()
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)
        """)


def check(jobs: list[tuple[str, str]], timeout: float = 30.0) -> dict[str, list[dict]]:
    """Raw findings of each (file, class) checked in order by the runtime workers."""
    model_jobs = [ModelJob(label=f"{os.path.basename(f)}:{n}", file=f, name=n) for f, n in jobs]
    results = run_jobs(model_jobs, "cpu", timeout, CODES)
    return {job.label: result_findings(job, result) for job, result in results}


def assert_victim_reported_correctly(found: list[dict]) -> None:
    assert [(f.code, f.line) for f in found] == [("ML703", 8)], found
    assert "`aux`" in found[0].message


@pytest.mark.parametrize("setup", [
    "import torch\ntorch.set_grad_enabled(False)\n",
    "import torch\ntorch.set_default_dtype(torch.float64)\n",
], ids=["grad-disabled", "default-float64"])
def test_torch_global_modes_set_by_one_model_do_not_reach_the_next(tmp_path, setup):
    first = write(tmp_path, "poison.py", poison(setup))
    second = write(tmp_path, "victim.py", VICTIM)
    found = check([(first, "Poison"), (second, "Victim")])
    assert_victim_reported_correctly(found["victim.py:Victim"])


def test_two_projects_modules_of_one_name_do_not_shadow_each_other(tmp_path):
    write(tmp_path, "a/layers.py", "import torch.nn as nn\nBlock = nn.Linear\n")
    first = write(tmp_path, "a/model.py", """\
        import torch.nn as nn
        from layers import Block


        class ModelA(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block(4, 4)

            def forward(self, x):
                return self.block(x)
        """)
    write(tmp_path, "b/layers.py", "import torch.nn as nn\nHead = nn.Linear\n")
    second = write(tmp_path, "b/model.py", VICTIM.replace(
        "import torch.nn as nn\n", "import torch.nn as nn; from layers import Head\n"
    ).replace("nn.Linear(4, 4)\n        self.aux", "Head(4, 4)\n        self.aux"))
    found = check([(first, "ModelA"), (second, "Victim")])
    assert found["model.py:ModelA"] == []
    assert_victim_reported_correctly(found["model.py:Victim"])


def test_a_model_that_changes_directory_does_not_move_the_next(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "width.txt").write_text("4")
    first = write(tmp_path, "poison.py", poison("import os\nos.chdir('elsewhere')\n"))
    # the victim reads a file relative to the directory modellint runs in
    second = write(tmp_path, "victim.py", VICTIM.replace(
        "nn.Linear(4, 4)\n        self.aux",
        "nn.Linear(int(open('width.txt').read()), 4)\n        self.aux"))
    monkeypatch.chdir(tmp_path)
    found = check([(first, "Poison"), (second, "Victim")])
    assert found["poison.py:Poison"] == []
    assert_victim_reported_correctly(found["victim.py:Victim"])


def test_a_thread_left_running_does_not_end_the_next_models_check(tmp_path):
    # the thread ends the process 1.5 s after the first model was imported: well after its
    # check, while the second model (whose forwards take a second each) is being checked
    first = write(tmp_path, "poison.py", poison("""\
        import os, threading, time
        threading.Thread(target=lambda: (time.sleep(1.5), os._exit(3)), daemon=True).start()
        """))
    second = write(tmp_path, "victim.py", VICTIM.replace(
        "        return self.fc(x)", "        import time; time.sleep(1.0)\n"
        "        return self.fc(x)"))
    found = check([(first, "Poison"), (second, "Victim")])
    assert_victim_reported_correctly(found["victim.py:Victim"])


def test_a_child_holding_the_result_pipe_does_not_turn_a_crash_into_a_timeout(tmp_path):
    first = write(tmp_path, "poison.py", poison("""\
        import os, time
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        """))
    second = write(tmp_path, "quits.py", poison("", "Quits").replace(
        "        return self.fc(x)", "        import os; os._exit(7)"))
    start = time.monotonic()
    found = check([(first, "Poison"), (second, "Quits")], timeout=20.0)
    assert [f.code for f in found["quits.py:Quits"]] == ["ML701"]
    assert "exit status 7" in found["quits.py:Quits"][0].message
    assert time.monotonic() - start < 20.0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_processes_a_model_starts_are_ended_with_its_check(tmp_path):
    pids = tmp_path / "pids.txt"
    first = write(tmp_path, "spawns.py", poison(f"""\
        import os, subprocess, time
        sleeper = subprocess.Popen(["sleep", "300"])
        child = os.fork()
        if child == 0:
            os.setsid()  # out of the model's process group
            time.sleep(300)
            os._exit(0)
        with open({str(pids)!r}, "w") as handle:
            handle.write(f"{{sleeper.pid}} {{child}}")
        """, "Spawns"))
    second = write(tmp_path, "victim.py", VICTIM)
    found = check([(first, "Spawns"), (second, "Victim")])
    assert found["spawns.py:Spawns"] == []
    assert_victim_reported_correctly(found["victim.py:Victim"])
    started = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in started if _alive(pid)]


def test_output_is_capped_in_memory_and_on_disk_keeping_head_and_tail(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("TMPDIR", str(temp))
    # 64 MB on stdout and stderr, then the process ends; the model raises instead if the
    # output reached the disk
    first = write(tmp_path, "chatty.py", poison("", "Chatty").replace(
        "        return self.fc(x)", """\
        import os, sys
        print("HEAD-MARK")
        for _ in range(32):
            print("x" * (1 << 20))
            sys.stderr.write("y" * (1 << 20) + "\\n")
        print("TAIL-MARK", flush=True)
        used = sum(os.path.getsize(os.path.join(folder, name))
                   for folder, _, names in os.walk(os.environ["TMPDIR"]) for name in names)
        if used > 8 << 20:
            raise RuntimeError(f"the output took {used} bytes on disk")
        os._exit(3)"""))
    second = write(tmp_path, "victim.py", VICTIM)
    model_jobs = [ModelJob(label="chatty.py:Chatty", file=first, name="Chatty"),
                  ModelJob(label="victim.py:Victim", file=second, name="Victim")]
    (chatty, result), (victim, after) = run_jobs(model_jobs, "cpu", 60.0, CODES)
    found = result_findings(chatty, result)
    assert [f.code for f in found] == ["ML701"] and "exit status 3" in found[0].message
    output = result["output"]
    assert len(output) < 200_000
    assert output.startswith("HEAD-MARK") and output.rstrip().endswith("TAIL-MARK")
    assert "MiB of output dropped" in output
    assert any("printed 64.0 MiB" in note for note in result["notes"]), result["notes"]
    assert_victim_reported_correctly(result_findings(victim, after))
    assert "output" not in after  # a model that was checked keeps nothing of its output


def _model(tmp_path, source: str, name: str):
    module = import_file(write(tmp_path, f"{name.lower()}.py", source))
    return ModelCheck(factory=getattr(module, name), label=name).run()


def test_forward_returning_none_still_reports_unused_submodules(tmp_path):
    outcome = _model(tmp_path, """\
        import torch.nn as nn


        class Stores(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.aux = nn.Linear(4, 4)

            def forward(self, x):
                self.result = self.fc(x)
        """, "Stores")
    found = [(f.code, f.line) for f in outcome.findings]
    assert found == [("ML703", 8)], outcome.findings
    assert "`aux`" in outcome.findings[0].message
    assert "never called" in outcome.findings[0].message
    assert any("returns no tensor" in note for note in outcome.notes)


def test_forward_returning_none_using_everything_is_clean(tmp_path):
    outcome = _model(tmp_path, """\
        import torch.nn as nn


        class StoresAll(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)

            def forward(self, x):
                self.result = self.head(self.fc(x).relu())
        """, "StoresAll")
    assert outcome.findings == []



# a model whose forward fails on a shape mismatch: exactly one ML701, at `self.b` (line 8)
BROKEN = textwrap.dedent("""\
    import torch.nn as nn


    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 8)
            self.b = nn.Linear(4, 2)

        def forward(self, x):
            return self.b(self.a(x))
    """)


def forger(tried: Path) -> str:
    """What code run by `--runtime` can do to modellint's own descriptors, done in a model's
    construction: two result frames forged into the fork server's result pipe (its number read
    from the server's command line) and a workflow command written to modellint's standard
    output and error, all through /proc/<pid>/fd/N, and printed on its own output too; each
    attempt is recorded in `tried`."""
    return f"""\
        import json, os
        server = os.getppid()
        with open(f"/proc/{{server}}/status") as handle:
            modellint = int(next(l for l in handle if l.startswith("PPid:")).split()[1])
        with open(f"/proc/{{server}}/cmdline", "rb") as handle:
            result_fd = int(handle.read().split(b"\\0")[-3])
        forged = json.dumps({{"findings": []}}) + "\\n"
        command = "::error file=b_broken.py,line=1::forged by the model\\n"
        for pid, fd, text in [(server, result_fd, forged * 2), (modellint, 1, command),
                              (modellint, 2, command)]:
            try:
                out = os.open(f"/proc/{{pid}}/fd/{{fd}}", os.O_WRONLY | os.O_NONBLOCK)
                os.write(out, text.encode())
                os.close(out)
                outcome = "written"
            except OSError as exc:
                outcome = type(exc).__name__
            with open({str(tried)!r}, "a") as handle:
                handle.write(f"{{pid}}/fd/{{fd}}: {{outcome}}\\n")
        print(command, end="", flush=True)
        os.write(2, command.encode())
        """


def _modellint(*args: str, cwd: Path):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "modellint", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the attack goes through /proc")
def test_a_model_cannot_forge_the_next_models_result_nor_write_into_the_report(tmp_path):
    tried = tmp_path / "tried.txt"
    write(tmp_path, "a_forger.py", poison(forger(tried), "Forger"))
    write(tmp_path, "b_broken.py", BROKEN)
    result = _modellint("check", "--runtime", "--format", "github", "--no-cache", ".",
                        cwd=tmp_path)
    assert len(tried.read_text().splitlines()) == 3  # the attack ran
    assert "forged by the model" not in result.stdout + result.stderr
    reported = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert len(reported) == 1, result.stdout
    assert "file=b_broken.py,line=8," in reported[0] and "ML701" in reported[0], reported
    assert result.returncode == 1, result.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="writes through /proc/self")
def test_frames_that_reach_the_result_pipe_count_for_no_other_model(tmp_path, monkeypatch):
    # the second line of defence, for a process that got to the pipe anyway (one with
    # CAP_SYS_PTRACE): the first model leaks the nonce of its own request from the stack,
    # and once it is done, frames forged with that nonce, with none, and garbage are
    # written into the result pipe before the next model is checked
    import json

    from modellint.runtime.isolate import Worker

    leaked = tmp_path / "nonce.txt"
    first = write(tmp_path, "leaker.py", poison(f"""\
        import sys
        frame = sys._getframe()
        while frame is not None and "request" not in frame.f_locals:
            frame = frame.f_back
        with open({str(leaked)!r}, "w") as handle:
            handle.write(str(frame.f_locals["request"].get("nonce")))
        """, "Leaker"))
    second = write(tmp_path, "victim.py", VICTIM)
    run = Worker.run

    def run_then_forge(self, request, timeout):
        result = run(self, request, timeout)
        if request["name"] == "Leaker":
            nonce = leaked.read_text()
            frames = [b"not a frame\n", b'{"findings": []}\n',
                      json.dumps({"nonce": nonce, "result": {"findings": []}}).encode() + b"\n",
                      json.dumps({"nonce": nonce, "findings": []}).encode() + b"\n"]
            pipe = os.open(f"/proc/self/fd/{self._result_r}", os.O_WRONLY)
            os.write(pipe, b"".join(frames))
            os.close(pipe)
        return result

    monkeypatch.setattr(Worker, "run", run_then_forge)
    found = check([(first, "Leaker"), (second, "Victim")])
    assert found["leaker.py:Leaker"] == []
    assert_victim_reported_correctly(found["victim.py:Victim"])


def test_a_model_that_writes_its_own_response_gets_a_finding_not_a_crash(tmp_path):
    # the model's code can lie about its own model through its own result pipe; what it
    # writes there that modellint cannot read is a failure of that model, reported
    write(tmp_path, "a_liar.py", poison("""\
        import os, stat
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b'{"oops": 1}\\n{"findings": [{}]}\\n')
            except OSError:
                pass
        os._exit(0)
        """, "Liar"))
    write(tmp_path, "b_broken.py", BROKEN)
    result = _modellint("check", "--runtime", "--format", "concise", "--no-cache", ".",
                        cwd=tmp_path)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert "a_liar.py" in result.stdout and "exit status 0" in result.stdout, result.stdout
    assert "b_broken.py:8:9: ML701" in result.stdout, result.stdout
