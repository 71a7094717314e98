"""Built-in rules: measuring GPU work with the host's clock (ML343).

CUDA calls return as soon as the kernel is queued, so a clock read on the host after GPU work
measures the launch, not the work, unless something waits for the device first. The rule pairs
the clock reads of one function (or a script's top-level code) the way the code subtracts them,
and fires only where the timed region provably does GPU work (a value placed on the device with
`.cuda()`, `.to(device)`, `device=`, and what is computed from it) and nothing in the region
waits for the device. A name whose origin is unknown is never assumed to be on the GPU.
"""

from __future__ import annotations

import re

import libcst as cst

from modellint.hookspecs import hookimpl
from modellint.rule import (
    TENSOR_FACTORIES,
    TENSOR_METHODS,
    VARIABLES,
    LazyPattern,
    Severity,
    argument,
    child_nodes,
    dotted_name,
    source_of,
)
from modellint.rules._loops import _NESTED, LOOPS, Scope, ScopeRule, invalid_at, last_segment

HEADER = "import time\nimport torch\nimport torch.nn as nn\n"

# host clocks that read wall time
_CLOCKS = frozenset({
    "time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns",
    "time.monotonic_ns", "timeit.default_timer",
})
_CUDA_EVENTS = frozenset({"torch.cuda.Event", "torch.cuda.streams.Event", "torch.Event"})
# calls that wait for the device (or may: a barrier of the process group)
_SYNC_FUNCTIONS = frozenset({
    "torch.cuda.synchronize", "torch.accelerator.synchronize", "torch.xpu.synchronize",
    "torch.mps.synchronize", "torch.distributed.barrier", "torch.cuda.empty_cache",
})
# torch functions that read tensor values on the host (to write them out, to trace)
_READING_FUNCTIONS = ("torch.save", "torch.onnx.", "torch.jit.", "torch.export.")
# tensor methods that copy a value to the host, which waits for the kernels that compute it
_SYNC_METHODS = frozenset({"synchronize", "item", "cpu", "tolist", "numpy"})
# builtins that read a tensor's value (and so wait for it) when given one
_READING_BUILTINS = frozenset({"print", "float", "int", "bool", "str", "repr", "format"})
# builtins that do no GPU work whatever they are given
_BUILTINS = frozenset({
    "len", "isinstance", "type", "id", "hasattr", "getattr", "range", "enumerate", "zip",
    "list", "tuple", "dict", "set", "sorted", "min", "max", "sum", "abs", "round", "iter",
    "next", "open", "super",
})
# what a tensor or module answers without running a kernel
_METADATA_METHODS = frozenset({
    "size", "dim", "numel", "nelement", "ndimension", "element_size", "get_device", "stride",
    "data_ptr", "is_contiguous", "train", "eval", "parameters", "named_parameters", "buffers",
    "modules", "children", "named_modules", "named_children", "state_dict", "register_buffer",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "requires_grad_", "record", "keys", "values", "items", "get",
})
# methods of a tensor (or module) on the GPU that queue kernels; any other method of a GPU
# value may be a routine of the project that synchronises inside (`algorithm.train_teacher()`)
_KERNEL_METHODS = TENSOR_METHODS | frozenset({
    "backward", "forward", "max", "min", "topk", "sort", "softmax", "log_softmax", "sigmoid",
    "relu", "matmul", "mm", "bmm", "zero_", "fill_", "copy_", "add_", "mul_", "div_", "sub_",
    "masked_fill_", "gather", "scatter", "scatter_", "chunk", "split", "std", "var", "any",
    "all", "eq", "ne", "gt", "lt", "ge", "le", "float", "half", "nonzero", "index_put_",
})
_METADATA_ATTRIBUTES = frozenset({
    "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "grad_fn", "training",
})
# torch functions that launch no kernel (`Variable(x)` is `x`)
_NO_KERNEL_FUNCTIONS = VARIABLES | frozenset({
    "torch.is_tensor", "torch.numel", "torch.is_floating_point", "torch.is_complex",
    "torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.set_grad_enabled",
})
_ACCELERATOR_STRING = LazyPattern(r"^(?:cuda(?::\d+)?)$")
_DEVICE_WORDS = LazyPattern(r"device|dev\b|gpu|cuda|rank", re.IGNORECASE)
_CPU_STRING = LazyPattern(r"^cpu$")


def _string(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _ordered(root: cst.CSTNode
             ) -> tuple[list[cst.CSTNode], dict[int, tuple[int, tuple]], dict[int, int]]:
    """The code nodes of a function body (or module) in source order, without nested
    functions, classes and lambdas; for each, its position and the loops whose body it is in
    (outermost first); and the position of the last node under it (a call runs when what is
    under it has run)."""
    body = root.body if isinstance(root, cst.FunctionDef) else root
    nodes: list[cst.CSTNode] = []
    where: dict[int, tuple[int, tuple]] = {}
    parents: list[int] = []
    stack: list[tuple[cst.CSTNode, tuple, int]] = [(body, (), -1)]
    while stack:
        node, loops, parent = stack.pop()
        position = len(nodes)
        where[id(node)] = (position, loops)
        nodes.append(node)
        parents.append(parent)
        if isinstance(node, _NESTED) and node is not body:
            continue
        inner = loops + (node,) if isinstance(node, LOOPS) else loops
        children = []
        for child in child_nodes(node):
            in_body = isinstance(node, LOOPS) and child is node.body
            children.append((child, inner if in_body else loops, position))
        stack.extend(reversed(children))
    last = list(range(len(nodes)))
    for position in range(len(nodes) - 1, 0, -1):
        parent = parents[position]
        last[parent] = max(last[parent], last[position])
    return nodes, where, {id(node): last[i] for i, node in enumerate(nodes)}


class _Region:
    """The code that runs between two clock reads: the nodes at positions `start` to `end`
    (exclusive), or, for a clock carried from one iteration to the next, a whole loop."""

    def __init__(self, start: int, end: int, loop: cst.CSTNode | None = None) -> None:
        self.start, self.end, self.loop = start, end, loop


class CudaTimingWithoutSynchronize(ScopeRule):
    """The host's clock is read after GPU work without waiting for the GPU.

    ## What it does
    Pairs the clock reads that the code subtracts (`time.time()`, `time.perf_counter()`,
    `time.monotonic()`, `timeit.default_timer()`: `t1 = time.time()` ... `t2 - t1`, or
    `time.time() - start`) and finds a timed region that does GPU work — a call of a module or
    a tensor operation on a value placed on the device (`.cuda()`, `.to(device)`,
    `device=`), or the placement itself — where nothing waits for the device before the
    end time is read: no `torch.cuda.synchronize()`, no `.item()`, `.cpu()`, `.tolist()`,
    `.numpy()`, no `print` or `float` of a tensor, no call of a function of the project
    (which may synchronise inside). A clock carried across iterations (`end = time.time()` at
    the bottom of the loop) is fine when anything in the loop synchronises. It also finds
    `start.elapsed_time(end)` of CUDA events with no `torch.cuda.synchronize()` or
    `end.synchronize()` after `end.record()`. Work whose device the code does not show
    (`self.layer1(x)` with `x` a parameter) is not assumed to be on the GPU.

    ## Why is this bad?
    CUDA calls are asynchronous: they return as soon as the kernel is queued. A clock read
    right after them measures how long it took to launch the work, and the work's real cost
    turns up later, in whatever happens to wait for the GPU next (often the next `x.cuda()`
    or `loss.item()`, which then looks slow). Speed comparisons made this way are wrong, by
    orders of magnitude. `elapsed_time` on an event that has not completed raises.

    ## Example
        model = model.cuda()
        start = time.perf_counter()
        out = model(x.cuda())
        print(f"forward: {time.perf_counter() - start:.4f}s")

    ## Use instead
        model = model.cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model(x.cuda())
        torch.cuda.synchronize()
        print(f"forward: {time.perf_counter() - start:.4f}s")
    """

    code = "ML343"
    name = "cuda-timing-without-synchronize"
    needs = frozenset({"project", "scope"})
    severity = Severity.WARNING
    triggers = ("time", "timer", "elapsed_time")
    _FORWARD = (HEADER + "\n\ndef bench(x):\n"
                "    model = nn.Linear(8, 8).cuda()\n"
                "    x = x.cuda()\n"
                "    start = time.perf_counter()\n"
                "    out = model(x)\n"
                "{before_end}"
                "    print(f'forward: {{time.perf_counter() - start:.4f}}s')\n")
    _LOOP = (HEADER + "\n\ndef train(model, loader, optimizer, device):\n"
             "    model.to(device)\n"
             "    end = time.time()\n"
             "    for x, y in loader:\n"
             "        x = x.to(device, non_blocking=True)\n"
             "        y = y.to(device, non_blocking=True)\n"
             "        loss = nn.functional.cross_entropy(model(x), y)\n"
             "        optimizer.zero_grad()\n"
             "        loss.backward()\n"
             "        optimizer.step()\n"
             "{log}"
             "        batch_time = time.time() - end\n"
             "        end = time.time()\n")
    valid = [
        _FORWARD.format(before_end="    torch.cuda.synchronize()\n"),
        _FORWARD.format(before_end="    print(out.sum().item())\n"),
        _FORWARD.format(before_end="    out = out.cpu()\n"),
        # the clock carried across iterations: `loss.item()` waits once per step
        _LOOP.format(log="        losses.append(loss.item())\n"),
        # a blocking copy to the device waits for the previous step's work
        _LOOP.replace("x = x.to(device, non_blocking=True)", "x = x.to(device)").format(log=""),
        # a library's function given a GPU value may read it (and most do)
        HEADER + "from transformers import pipeline\n\n"
        "def bench(generator, prompt):\n    ids = prompt.cuda()\n    start = time.time()\n"
        "    out = generator.generate(ids, max_new_tokens=20)\n"
        "    print(time.time() - start)\n",
        # a blocking copy is timed whole, and nothing was queued before it
        HEADER + "def detect(model, img):\n    t0 = time.time()\n    img = img.cuda()\n"
        "    print('copy', time.time() - t0)\n",
        # exporting reads the weights on the host
        HEADER + "model = nn.Linear(2, 2).cuda()\nx = torch.zeros(1, 2, device='cuda')\n"
        "t = time.time()\ntorch.onnx.export(model, x, 'm.onnx')\nprint(time.time() - t)\n",
        # each reading waits (in the blocking copy) for the previous step: shifted, summed right
        HEADER + "def train(model, loader, optimizer, device):\n    for x, y in loader:\n"
        "        start = time.time()\n        x = x.to(device)\n"
        "        model(x).sum().backward()\n        optimizer.step()\n"
        "        step_time = time.time() - start\n",
        # a routine of the model may synchronise inside
        HEADER + "algorithm = nn.Linear(2, 2).cuda()\nstart = time.time()\n"
        "algorithm.fit(loader, steps=100)\nprint(time.time() - start)\n",
        # nothing shows that the work runs on the GPU
        HEADER + "def forward(self, x):\n    start = time.time()\n    y = self.layer1(x)\n"
        "    print(time.time() - start)\n",
        # a function of the project may synchronise inside
        HEADER + "def train_one_epoch(model, loader):\n    pass\n\n"
        "def main(loader):\n    model = nn.Linear(2, 2).cuda()\n    start = time.time()\n"
        "    train_one_epoch(model, loader)\n    print(time.time() - start)\n",
        # only the shape is printed... after a synchronisation
        HEADER + "conv = nn.Conv2d(3, 8, 3).cuda()\nx = torch.randn(1, 3, 8, 8).cuda()\n"
        "start = time.time()\nprint(conv(x).size())\ntorch.cuda.synchronize()\n"
        "print(time.time() - start)\n",
        # CUDA events read after synchronising
        HEADER + "def bench(model, x):\n"
        "    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
        "    start.record()\n    model(x)\n    end.record()\n    torch.cuda.synchronize()\n"
        "    print(start.elapsed_time(end))\n",
        # host work only
        HEADER + "start = time.time()\nx = torch.randn(100, 100)\ny = x @ x\n"
        "print(time.time() - start)\n",
    ]
    invalid = [
        invalid_at(_FORWARD.format(before_end=""), "print(f'forward"),
        invalid_at(_FORWARD.format(before_end="    torch.cuda.synchronize()\n"
                                   "    out = model(out)\n"), "print(f'forward"),
        # the clock carried across iterations, and nothing in the loop waits for the GPU
        invalid_at(_LOOP.format(log=""), "batch_time ="),
        # the step's work is waited for after the clock is read: it is never timed
        invalid_at(HEADER + "def train(model, loader, optimizer, device):\n    for x, y in loader:\n"
                   "        x = x.to(device)\n        t0 = time.time()\n"
                   "        loss = model(x).sum()\n        loss.backward()\n        optimizer.step()\n"
                   "        t1 = time.time()\n        total += loss.item()\n"
                   "        print(t1 - t0)\n", "t1 = time.time()"),
        # the shape of the result is not its value: `size()` does not wait
        invalid_at(HEADER + "conv = nn.Conv2d(3, 8, 3).cuda()\nx = torch.randn(1, 3, 8, 8).cuda()\n"
                   "start = time.time()\nprint(conv(x).size())\nprint(time.time() - start)\n",
                   "print(time.time() - start)"),
        # the copy waits for the previous iteration's forward, which is timed as the copy
        invalid_at(HEADER + "model = nn.Linear(8, 8).cuda()\nfor x, y in loader:\n"
                   "    st = time.time()\n    x, y = x.cuda(), y.cuda()\n"
                   "    print(time.time() - st)\n    pred = model(x)\n",
                   "print(time.time() - st)"),
        # both ends named
        invalid_at(HEADER + "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                   "for image in images:\n    image = image.to(device)\n    t1 = time.time()\n"
                   "    output = model(image)\n    t2 = time.time()\n    print(t2 - t1)\n",
                   "t2 = time.time()"),
        invalid_at(HEADER + "def bench(model, x):\n"
                   "    start = torch.cuda.Event(enable_timing=True)\n"
                   "    end = torch.cuda.Event(enable_timing=True)\n"
                   "    start.record()\n    model(x)\n    end.record()\n"
                   "    print(start.elapsed_time(end))\n", "elapsed_time"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._module_gpu: set[str] | None = None
        self._module_functions: set[str] | None = None
        self._last: dict[int, int] = {}

    # -- the check -----------------------------------------------------------------------------

    def check(self, scope: Scope) -> None:
        clocks = {id(site.node) for site in scope.calls
                  if self.context.call_name(site.node) in _CLOCKS}
        events = bool(scope.method_calls("elapsed_time"))
        if len(clocks) < 2 and not events:
            return
        nodes, where, self._last = _ordered(scope.root)
        gpu = self._gpu_names(scope)
        reported: set[int] = set()
        if clocks:
            bound = self._clock_bindings(nodes, where, clocks)
            for node in nodes:
                if not (isinstance(node, cst.BinaryOperation)
                        and isinstance(node.operator, cst.Subtract)):
                    continue
                pair = self._pair(node, where, bound, clocks)
                if pair is None:
                    continue
                end, region = pair
                if id(end) in reported:
                    continue
                found = self._unsynced_work(nodes, where, region, gpu)
                if found is None:
                    continue
                work, pending = found
                reported.add(id(end))
                site = scope.site(end)
                clock = source_of(end)
                if pending is None:
                    message = (
                        f"`{clock}` is read after GPU work (`{_short(work)}`) with nothing "
                        f"waiting for the GPU: CUDA calls return before the kernels finish, so "
                        f"this measures their launch; call `torch.cuda.synchronize()` before "
                        f"reading the clock (and before the start time)"
                    )
                else:
                    message = (
                        f"the time up to `{clock}` includes GPU work queued before the start "
                        f"(`{_short(pending)}`): `{_short(work)}` waits for it before copying; "
                        f"call `torch.cuda.synchronize()` before the start time and before "
                        f"reading the clock"
                    )
                if site is not None:
                    self.report_at(site, end, message)
        if events:
            self._check_events(scope, nodes, where, gpu)

    def _clock_bindings(self, nodes, where, clocks) -> dict[str, list[tuple[int, cst.Call]]]:
        """name -> (position, clock call) of each `name = time.time()`; other assignments
        to the name as (position, None)."""
        bound: dict[str, list[tuple[int, cst.Call | None]]] = {}
        for node in nodes:
            if not isinstance(node, cst.Assign):
                continue
            value = node.value
            clock = value if isinstance(value, cst.Call) and id(value) in clocks else None
            alias = dotted_name(value)
            if alias is not None and bound.get(alias):
                clock = bound[alias][-1][1]  # `self.iter_time = tnow`
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    bound.setdefault(name, []).append((where[id(node)][0], clock))
        return bound  # type: ignore[return-value]

    def _read(self, expr, position, where, bound, clocks):
        """The clock call an operand of a subtraction stands for, and the position of its
        binding: (call, None) for `time.time()` itself, (call, binding) for a name last
        bound to one before `position`; None otherwise."""
        if isinstance(expr, cst.Call) and id(expr) in clocks:
            return expr, None, []
        name = dotted_name(expr)
        if name is None or name not in bound:
            return None
        before = [b for b in bound[name] if b[0] < position]
        if not before or before[-1][1] is None:
            return None
        after = [b for b in bound[name] if b[0] > position]
        return before[-1][1], before[-1][0], after

    def _pair(self, binop: cst.BinaryOperation, where, bound, clocks):
        position, loops = where[id(binop)]
        end = self._read(binop.left, position, where, bound, clocks)
        start = self._read(binop.right, position, where, bound, clocks)
        if end is None or start is None or start[1] is None:
            return None
        end_call, end_binding, _ = end
        start_call, _, rebound = start
        end_position = where[id(end_call)][0]
        # a clock carried from one iteration to the next: what it times is the loop's body
        for _, call in rebound:
            if call is None:
                continue
            carried = [loop for loop in loops
                       if any(loop is other for other in where[id(call)][1])]
            if carried:
                loop = carried[-1]
                return end_call, _Region(where[id(loop)][0], end_position, loop)
        start_position = where[id(start_call)][0]
        if start_position >= end_position:
            return None
        return end_call, _Region(start_position, end_position)

    def _unsynced_work(self, nodes, where, region: _Region, gpu: set[str]
                       ) -> tuple[cst.Call, cst.Call | None] | None:
        """The first GPU work in the region that nothing waits for before its end. A blocking
        copy to the device (`x.cuda()`) waits for itself, but also for the work queued before
        it: it counts only when such work is pending at the start (a model call later in the
        loop, from the previous iteration)."""
        if region.loop is not None:
            inside = [node for node in nodes
                      if any(region.loop is loop for loop in where[id(node)][1])]
        else:
            inside = nodes[region.start + 1:region.end]
        syncs = self._syncs(inside, gpu)
        if syncs and region.loop is not None:
            return None
        uncovered = self._uncovered(inside, syncs, where, region.start, gpu)
        for call in reversed(uncovered):
            if not self._blocking_copy(call):
                if syncs and self._absorbed_next_iteration(nodes, where, region, gpu):
                    return None
                return call, None
        pending = self._pending_before(nodes, where, region, gpu) if uncovered else None
        return (uncovered[-1], pending) if pending is not None else None

    def _syncs(self, inside: list[cst.CSTNode], gpu: set[str]) -> list[cst.CSTNode]:
        syncs: list[cst.CSTNode] = [node for node in inside
                                    if isinstance(node, cst.Call) and self._waits(node, gpu)]
        syncs += [node for node in inside if isinstance(node, cst.FormattedStringExpression)
                  and self._on_gpu(node.expression, gpu)]
        return syncs

    def _uncovered(self, inside, syncs, where, start: int, gpu: set[str]) -> list[cst.Call]:
        """The GPU work among `inside` that no sync among `syncs` waits for."""
        found = []
        for call in inside:
            if not isinstance(call, cst.Call) or not self._gpu_work(call, gpu):
                continue
            position, loops = where[id(call)]
            done = self._last[id(call)]
            covered = False
            for sync in syncs:
                if sync is call:
                    continue
                sync_position, sync_loops = where[id(sync)]
                # the sync runs after the work: it follows it, or the work is inside it
                if sync_position > done or (
                        sync_position <= position and self._last[id(sync)] >= done):
                    covered = True
                    break
                # an earlier sync in a loop (of the region) around the work waits for it on
                # the next iteration
                if any(loop is other and where[id(loop)][0] > start
                       for loop in loops for other in sync_loops):
                    covered = True
                    break
            if not covered:
                found.append(call)
        return found

    def _absorbed_next_iteration(self, nodes, where, region: _Region, gpu: set[str]) -> bool:
        """Both clock reads are in one iteration of a loop, and what the region leaves
        queued is waited for inside the next iteration's region (the region synchronises,
        say with a blocking copy) and not in between: each reading is shifted by one
        iteration, and their sum is right."""
        start_loops = where[id(nodes[region.start])][1]
        end_loops = where[id(nodes[region.end])][1]
        if not start_loops or not end_loops or start_loops[-1] is not end_loops[-1]:
            return False
        loop = start_loops[-1]
        outside = [node for node in nodes
                   if any(loop is other for other in where[id(node)][1])
                   and not region.start <= where[id(node)][0] <= region.end]
        branches = [(where[id(node)][0], self._last[id(node)]) for node in outside
                    if isinstance(node, cst.If)]
        for sync in self._syncs(outside, gpu):
            # a sync between the end and the next start loses the work (a periodic one,
            # under an `if` of the loop, only now and then)
            position = where[id(sync)][0]
            if not any(first < position <= last for first, last in branches):
                return False
        return True

    def _pending_before(self, nodes, where, region: _Region, gpu: set[str]
                        ) -> cst.Call | None:
        """GPU work that nothing has waited for is queued when the region starts: earlier in
        the function, or later in a loop around the start (the previous iteration)."""
        start_loops = where[id(nodes[region.start])][1]
        if start_loops and region.loop is None:
            loop = start_loops[-1]
            later = [node for node in nodes[region.end + 1:]
                     if any(loop is other for other in where[id(node)][1])]
            found = self._uncovered(later, self._syncs(later, gpu), where, region.end, gpu)
            if found:
                return found[-1]
        earlier = nodes[:region.start]
        found = self._uncovered(earlier, self._syncs(earlier, gpu), where, 0, gpu)
        return found[-1] if found else None

    def _blocking_copy(self, call: cst.Call) -> bool:
        func = call.func
        return (isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to")
                and self.context.qualified_name(func) is None and not _non_blocking(call))

    def _check_events(self, scope: Scope, nodes, where, gpu: set[str]) -> None:
        events = set()
        for assignment in scope.assignments:
            value = assignment.element or assignment.value
            if value is not None and self.context.call_name(value) in _CUDA_EVENTS:
                events.add(assignment.target)
        if not events:
            return
        for node in nodes:
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value == "elapsed_time" and node.args):
                continue
            end = dotted_name(node.args[0].value)
            if end not in events or dotted_name(node.func.value) not in events:
                continue
            position = where[id(node)][0]
            records = [n for n in nodes[:position] if isinstance(n, cst.Call)
                       and isinstance(n.func, cst.Attribute) and n.func.attr.value == "record"
                       and dotted_name(n.func.value) == end]
            if not records:
                continue
            after = where[id(records[-1])][0]
            if any(isinstance(n, cst.Call) and self._waits(n, gpu)
                   for n in nodes[after + 1:position]):
                continue
            site = scope.site(node)
            if site is None:
                continue
            self.report_at(
                site, node,
                f"`{source_of(node)}` is read without waiting for `{end}` to complete: "
                f"`{end}.record()` only queues the event, and `elapsed_time` raises until it "
                f"has run; call `{end}.synchronize()` (or `torch.cuda.synchronize()`) first",
            )

    # -- what waits, what runs on the GPU -----------------------------------------------------

    def _waits(self, call: cst.Call, gpu: set[str]) -> bool:
        qualified = self.context.call_name(call)
        if qualified in _SYNC_FUNCTIONS or (qualified or "").startswith(_READING_FUNCTIONS):
            return True
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "synchronize":
                return True
            if method in _SYNC_METHODS and qualified is None:
                return True
            if method == "to" and call.args and (
                    _string(call.args[0].value) == "cpu"):
                return True
            if qualified is None and self._placement(call) and not _non_blocking(call):
                # a blocking copy to the device waits for the work queued before it
                return True
            if (qualified is None and method not in _KERNEL_METHODS
                    and method not in _METADATA_METHODS and not self._placement(call)
                    and self._on_gpu(func.value, gpu)):
                return True  # a routine of a GPU model (`algorithm.train_teacher(...)`)
        if self._opaque(func):
            return True
        if isinstance(func, cst.Name) and func.value in _READING_BUILTINS and qualified is None:
            return any(self._on_gpu(arg.value, gpu) for arg in call.args)
        if self._object_call(func) or isinstance(func, cst.Name) and func.value in _BUILTINS:
            return False
        if qualified is not None and qualified.split(".", 1)[0] == "torch":
            return False
        # a function of a library, or a method of an object of unknown kind, given a GPU
        # value: it may read it (`writer.add_scalar("loss", loss)` calls `.item()`)
        return any(self._on_gpu(arg.value, gpu) for arg in call.args)

    def _opaque(self, func: cst.BaseExpression) -> bool:
        """A function of the project (defined in this file, a method of this class, or
        imported from another file of the project): what it does inside is not seen here."""
        if isinstance(func, cst.Name):
            if func.value in self._functions():
                return True
        name = dotted_name(func)
        cls = self.context.current_class
        if name and cls is not None and name.startswith("self.") and name.count(".") == 1:
            return name[5:] in self.context.class_info(cls).methods
        qualified = self.context.qualified_name(func)
        index = self.context.index
        if qualified and index is not None and qualified.split(".", 1)[0] != "torch":
            found = index.resolve_qualified(qualified)
            return found is not None and found[0] == "function"
        return False

    def _functions(self) -> set[str]:
        if self._module_functions is None:
            module = self.context.module_node
            body = module.body if module is not None else ()
            self._module_functions = {s.name.value for s in body
                                      if isinstance(s, cst.FunctionDef)}
        return self._module_functions

    def _gpu_work(self, call: cst.Call, gpu: set[str]) -> bool:
        if self._placement(call):
            return True
        qualified = self.context.call_name(call)
        if qualified is not None and (
                qualified in _NO_KERNEL_FUNCTIONS or qualified.startswith(_READING_FUNCTIONS)
                or qualified.startswith(("torch.cuda.", "torch.device"))):
            return False  # launches nothing, or waits for what it runs
        return self._on_gpu(call, gpu)

    def _placement(self, call: cst.Call) -> bool:
        """`x.cuda()`, `x.to(device)`, `torch.zeros(..., device=device)`,
        `nn.Linear(..., device=device)`."""
        func = call.func
        context = self.context
        if isinstance(func, cst.Attribute) and context.qualified_name(func) is None:
            if func.attr.value == "cuda":
                return True
            if func.attr.value == "to":
                arg = argument(call, "device", 0)
                return arg is not None and self._device(arg.value)
        qualified = context.call_name(call) or ""
        if qualified.startswith("torch.") and (
            qualified[len("torch."):] in TENSOR_FACTORIES or context.builds_module(call)
        ):
            arg = argument(call, "device")
            return arg is not None and self._device(arg.value)
        return False

    def _device(self, expr: cst.BaseExpression) -> bool:
        """A value that names a GPU: `"cuda"`, `torch.device("cuda" if ... else "cpu")`, a
        variable named for a device or rank (`device`, `args.gpu`, `local_rank`)."""
        text = _string(expr)
        if text is not None:
            return bool(_ACCELERATOR_STRING.match(text))
        if isinstance(expr, cst.Call):
            if self.context.call_name(expr) != "torch.device" or not expr.args:
                return False
            first = _string(expr.args[0].value)
            return first is None or not _CPU_STRING.match(first)
        if isinstance(expr, cst.IfExp):
            return self._device(expr.body) or self._device(expr.orelse)
        if self.context.qualified_name(expr) is not None:
            return False  # torch.float16 and the like
        name = dotted_name(expr)
        return name is not None and bool(_DEVICE_WORDS.search(last_segment(name)))

    def _on_gpu(self, expr: cst.BaseExpression, gpu: set[str]) -> bool:
        """`expr` is (or computes) a tensor or module known to be on the GPU."""
        if isinstance(expr, cst.Name):
            return expr.value in gpu
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _METADATA_ATTRIBUTES:
                return False
            name = dotted_name(expr)
            if name is not None and name in gpu:
                return True
            return self._on_gpu(expr.value, gpu) and self.context.qualified_name(expr) is None
        if isinstance(expr, cst.Subscript):
            return self._on_gpu(expr.value, gpu)
        if isinstance(expr, cst.BinaryOperation):
            return self._on_gpu(expr.left, gpu) or self._on_gpu(expr.right, gpu)
        if isinstance(expr, cst.UnaryOperation):
            return self._on_gpu(expr.expression, gpu)
        if not isinstance(expr, cst.Call):
            return False
        if self._placement(expr):
            return True
        func = expr.func
        qualified = self.context.call_name(expr)
        if isinstance(func, cst.Attribute) and qualified is None:
            method = func.attr.value
            if method in _METADATA_METHODS or method in _SYNC_METHODS:
                return False
            if self._on_gpu(func.value, gpu):
                return method in _KERNEL_METHODS
        args = [arg.value for arg in expr.args]
        if qualified is not None:
            return qualified.split(".", 1)[0] == "torch" and any(
                self._on_gpu(a, gpu) for a in args)
        if not self._object_call(func):
            return False
        # a callable object (a module, a loss) called on GPU values, or itself on the GPU
        return self._on_gpu(func, gpu) or any(self._on_gpu(a, gpu) for a in args)

    def _object_call(self, func: cst.BaseExpression) -> bool:
        """`model(x)`, `self.encoder(x)`: a call of a variable or an attribute of `self`
        that is not a function or method of the project (a module, a loss), as far as the
        code shows."""
        if self.context.qualified_name(func) is not None or self._opaque(func):
            return False
        if isinstance(func, cst.Name):
            return func.value not in _BUILTINS and func.value not in _READING_BUILTINS
        name = dotted_name(func)
        return name is not None and name.startswith("self.") and name.count(".") == 1

    def _gpu_names(self, scope: Scope) -> set[str]:
        """Names (and `self.x` attributes) that hold a value placed on the GPU in this scope,
        the module's top level, or (for `self.x`) anywhere in the class."""
        gpu = set(self._module_names()) if scope.root is not self.context.module_node else set()
        cls = self.context.current_class
        if cls is not None:
            for attr, values in self.context.class_info(cls).assignments.items():
                if any(self._on_gpu(value, set()) for _, value in values):
                    gpu.add(f"self.{attr}")
        return self._flow(scope, gpu)

    def _module_names(self) -> set[str]:
        if self._module_gpu is None:
            from modellint.rules._loops import scope_of

            module = self.context.module_node
            self._module_gpu = set()
            if module is not None:
                self._module_gpu = self._flow(scope_of(self.context, module), set())
        return self._module_gpu

    def _flow(self, scope: Scope, gpu: set[str]) -> set[str]:
        gpu = set(gpu)
        for _ in range(3):
            before = len(gpu)
            for assignment in scope.assignments:
                value = assignment.element or assignment.value
                if value is not None and self._on_gpu(value, gpu):
                    gpu.add(assignment.target)
            for site in scope.calls:
                func = site.node.func
                # `model.cuda()`, `model.to(device)` move a module in place
                if isinstance(func, cst.Attribute) and self._placement(site.node):
                    name = dotted_name(func.value)
                    if name is not None:
                        gpu.add(name)
            if len(gpu) == before:
                break
        return gpu


def _non_blocking(call: cst.Call) -> bool:
    arg = argument(call, "non_blocking")
    return arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")


def _short(node: cst.CSTNode) -> str:
    text = source_of(node)
    return text if len(text) <= 40 and "\n" not in text else text.split("(", 1)[0] + "(...)"


@hookimpl
def modellint_add_rules():
    return [CudaTimingWithoutSynchronize]
