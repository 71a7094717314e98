"""ML343 (a host clock read after GPU work nothing waits for) and ML913 (`torch.load` without
`map_location` in code that chooses its device): the shapes of real code beyond the rules'
own examples, and both rules together with ML501 on one call."""

from __future__ import annotations

from modellint.rules.serialization import LoadWithoutMapLocation, UnsafeTorchLoad
from modellint.rules.timing import CudaTimingWithoutSynchronize
from modellint.testing import fix_text, lint_text

HEADER = "import time\nimport torch\nimport torch.nn as nn\n\n"


def lines(source, rule, options=None):
    return [f.line for f in lint_text(source, [rule], options) if f.code == rule.code]


# -- ML343 --------------------------------------------------------------------------------------


def test_every_clock_and_import_form():
    for imports, clock in (
        ("from time import perf_counter\n", "perf_counter()"),
        ("import timeit\n", "timeit.default_timer()"),
        ("", "time.monotonic()"),
        ("", "time.perf_counter_ns()"),
    ):
        source = (HEADER + imports + "model = nn.Linear(4, 4).cuda()\nx = torch.randn(2, 4).cuda()\n"
                  f"t0 = {clock}\ny = model(x)\nprint({clock} - t0)\n")
        end = len(source.splitlines())
        assert lines(source, CudaTimingWithoutSynchronize) == [end], imports + clock


def test_module_placed_in_init_is_on_the_gpu_in_another_method():
    source = HEADER + (
        "class Bench:\n"
        "    def __init__(self, device):\n"
        "        self.model = nn.Linear(4, 4).to(device)\n\n"
        "    def run(self, x):\n"
        "        start = time.time()\n"
        "        y = self.model(x)\n"
        "        return time.time() - start\n"
    )
    assert lines(source, CudaTimingWithoutSynchronize) == [12]


def test_a_method_of_the_class_may_synchronise():
    source = HEADER + (
        "class Bench:\n"
        "    def __init__(self):\n"
        "        self.model = nn.Linear(4, 4).cuda()\n\n"
        "    def step(self, x):\n"
        "        return self.model(x).sum().item()\n\n"
        "    def run(self, x):\n"
        "        start = time.time()\n"
        "        y = self.model(x.cuda())\n"
        "        self.step(x)\n"
        "        return time.time() - start\n"
    )
    assert lines(source, CudaTimingWithoutSynchronize) == []


def test_clock_carried_through_an_alias():
    # minGPT's trainer: `tnow = time.time(); dt = tnow - self.iter_time; self.iter_time = tnow`
    loop = HEADER + (
        "def train(model, loader, optimizer, device):\n"
        "    last = time.time()\n"
        "    for x, y in loader:\n"
        "        x = x.to(device, non_blocking=True)\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "{sync}"
        "        now = time.time()\n"
        "        dt = now - last\n"
        "        last = now\n"
    )
    assert lines(loop.format(sync=""), CudaTimingWithoutSynchronize) == [12]
    assert lines(loop.format(sync="        print(loss.item())\n"),
                 CudaTimingWithoutSynchronize) == []


def test_a_synchronisation_before_the_work_does_not_cover_it():
    source = HEADER + (
        "model = nn.Linear(4, 4).cuda()\nx = torch.randn(2, 4, device='cuda')\n"
        "start = time.time()\ntorch.cuda.synchronize()\ny = model(x)\n"
        "elapsed = time.time() - start\n"
    )
    assert lines(source, CudaTimingWithoutSynchronize) == [10]


def test_a_sync_inside_the_timed_loop_waits_for_the_work_of_each_iteration():
    source = HEADER + (
        "model = nn.Linear(4, 4).cuda()\n"
        "start = time.time()\n"
        "for x in batches:\n"
        "    total = model(x.cuda(non_blocking=True)).sum().item()\n"
        "    y = model(x.cuda(non_blocking=True))\n"
        "print(time.time() - start)\n"
    )
    assert lines(source, CudaTimingWithoutSynchronize) == []


def test_cpu_device_and_dtype_conversions_are_not_gpu_work():
    for move in ("x.to('cpu')", "x.to(torch.float16)", "x.to(torch.device('cpu'))"):
        source = HEADER + (f"model = nn.Linear(4, 4)\nstart = time.time()\nx = {move}\n"
                           "y = model(x)\nprint(time.time() - start)\n")
        assert lines(source, CudaTimingWithoutSynchronize) == [], move


def test_noqa_hides_the_finding():
    source = HEADER + (
        "model = nn.Linear(4, 4).cuda()\nx = torch.randn(2, 4).cuda()\n"
        "start = time.time()\ny = model(x)\n"
        "print(time.time() - start)  # noqa: ML343\n"
    )
    assert lines(source, CudaTimingWithoutSynchronize) == []


# -- ML913 --------------------------------------------------------------------------------------


def test_fix_passes_the_map_location_the_function_has():
    source = HEADER + (
        "def load(path, map_location='cpu'):\n"
        "    return torch.load(\n"
        "        path,\n"
        "        weights_only=True,\n"
        "    )\n"
    )
    fixed = fix_text(source, [LoadWithoutMapLocation], unsafe=True)
    assert "weights_only=True,\n        map_location=map_location,\n    )" in fixed
    # no fix where the device's name is only a guess at what to pass
    device = HEADER + "def load(path, device):\n    return torch.load(path + '/model.pt')\n"
    assert fix_text(device, [LoadWithoutMapLocation], unsafe=True) == device


def test_ddp_rank_and_args_gpu_are_devices():
    for signature, body in (
        ("def main(local_rank):\n", "    ckpt = torch.load(args.resume)\n"),
        ("def main(args):\n", "    args.gpu = 0\n    ckpt = torch.load(args.resume)\n"),
    ):
        source = HEADER + signature + body
        assert lines(source, LoadWithoutMapLocation) == [len(source.splitlines())], signature


def test_ml501_and_ml913_report_the_same_call_independently():
    source = HEADER + "def load(model, path, device):\n    model.load_state_dict(torch.load(path))\n"
    found = lint_text(source, [UnsafeTorchLoad, LoadWithoutMapLocation],
                      {"target_torch_version": (2, 4)})
    assert sorted(f.code for f in found) == ["ML501", "ML913"]
    both = fix_text(source, [UnsafeTorchLoad, LoadWithoutMapLocation],
                    {"target_torch_version": (2, 4)})
    assert "torch.load(path, weights_only=True)" in both  # ML913 offers no fix here
