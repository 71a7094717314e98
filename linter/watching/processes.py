"""Processes the watched script starts itself (`torch.multiprocessing.spawn`, a
`multiprocessing.Process` whose target is the user's function: Hogwild training): each runs its
target watched, as a torchrun rank runs the script, and writes its result beside the script's
(`RESULT.procPID`), which `modellint run` merges. DataLoader workers and other library
processes are left alone."""

from __future__ import annotations

import functools
import os
from typing import Any

# the recorder installed in this process: a forked child inherits its parent's, and drops it
active: list[Any] = []
_following: list[bool] = []  # process starts are followed (a forked child inherits it)


def follow(result_path: str, options: dict, watched) -> None:
    """Make every process started from now on whose target is the user's code run it
    watched: by `watched` (`modellint.watching.child.watched`, given by the child that
    imports this module, which thus imports nothing back)."""
    from multiprocessing import process

    if _following:
        return
    _following.append(True)
    original = process.BaseProcess.start

    def start(self) -> None:
        target = getattr(self, "_target", None)
        if target is not None and not isinstance(target, FollowedTarget) and _users(
                target, getattr(self, "_args", ())):
            self._target = FollowedTarget(target, result_path, options, watched)
        return original(self)

    process.BaseProcess.start = start  # type: ignore[method-assign]


def _users(target, args) -> bool:
    """Whether a process's target is the user's function (or torch.multiprocessing.spawn's
    wrapper of one)."""
    from modellint.runtime.sources import UserCode

    if getattr(target, "__module__", None) == "torch.multiprocessing.spawn" and args:
        target = args[0]
    while isinstance(target, functools.partial):
        target = target.func
    code = getattr(target, "__code__", None)
    return code is not None and UserCode()(code.co_filename)


class FollowedTarget:
    """A process's target, run watched in that process (picklable for the spawn start method:
    the user's target pickles as it would have, `watched` by its module and name)."""

    def __init__(self, target, result_path: str, options: dict, watched) -> None:
        self.target, self.result_path, self.options = target, result_path, options
        self.watched = watched

    def __call__(self, *args, **kwargs):
        watched = self.watched
        while active:  # forked: the parent's instrumentation came along
            active.pop().uninstall()
        failure = watched(f"{self.result_path}.proc{os.getpid()}", self.options,
                          lambda: self.target(*args, **kwargs), followed=True)
        if failure is not None:  # the process fails as it would have
            raise failure
