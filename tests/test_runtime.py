"""The runtime pass: each planted mistake found at its line, clean models clean, isolation of
models that raise, hang, exit, crash or run out of memory, the CLI, trace, API and plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from modellint.runtime.build import import_file  # noqa: E402
from modellint.runtime.engine import ModelCheck  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "runtime"
MODELLINT = [sys.executable, "-m", "modellint"]

pytest_plugins = ["pytester"]


def run_check(file: str, name: str, **options):
    module = import_file(str(FIXTURES / file))
    return ModelCheck(factory=getattr(module, name), label=name, **options).run()


PLANTED = [
    ("channel_mismatch.py", "TwoStageNet", "ML701", 19, ["stage2.conv", "Conv2d(32, 32",
                                                         "[2, 16, 32, 32]", "input inferred"]),
    ("plain_list.py", "ListNet", "ML101", 7, ["self.layers", "nn.ModuleList"]),
    ("param_list.py", "Scales", "ML102", 9, ["self.scales", "nn.ParameterList"]),
    ("plain_tensor.py", "Masked", "ML103", 9, ["self.mask", "register_buffer"]),
    ("super_init_late.py", "Late", "ML104", 6, ["super().__init__()"]),
    ("undefined_attr.py", "Typo", "ML106", 10, ["self.fc2"]),
    ("module_in_forward.py", "Lazy", "ML107", 11, ["Linear", "__init__"]),
    ("repeated_block.py", "Repeated", "ML108", 8, ["`blocks`", "3 places"]),
    ("state_outside.py", "Temperature", "ML505", 9, ["self.temperature"]),
    ("dtype_mismatch.py", "HalfHead", "ML702", 8, ["`head`", "float32", "float64"]),
    ("unused_param.py", "Unused", "ML703", 8, ["`aux`", "never called"]),
    ("nan_output.py", "NanNet", "ML704", 14, ["`log`", "NaN"]),
    ("dropout_eval.py", "Noisy", "ML705", 13, ["input of `out`"]),
    ("zero_grad.py", "DeadStart", "ML706", 7, ["`fc1`", "exactly zero"]),
]


@pytest.mark.parametrize(("file", "name", "code", "line", "words"), PLANTED,
                         ids=[p[2] for p in PLANTED])
def test_planted_mistake_is_found_at_its_line(file, name, code, line, words):
    outcome = run_check(file, name)
    found = [f for f in outcome.findings if f.code == code]
    assert [f.line for f in found] == [line], outcome.findings
    assert found[0].file.endswith(file)
    for word in words:
        assert word in found[0].message
    # one mistake, one finding: nothing else is reported on these fixtures
    assert [f.code for f in outcome.findings] == [code]


CLASS_HEAD = """import torch.nn as nn


class Shared(nn.Module):
    head = nn.Linear(10, 3)  # a class attribute: built at import, never registered

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 10)

    def forward(self, x):
        return self.head(self.fc(x))
"""


@pytest.mark.parametrize("device", ["cpu", "meta", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_module_the_model_does_not_move_is_one_finding_where_it_is_built(device, tmp_path):
    # on another device than the cpu (meta here, cuda on a GPU) the forward fails in the
    # module that `.to(device)` never moved: that failure is the registration mistake,
    # reported once where the module is built (or called), not a second time as ML701
    built_in_forward = run_check("module_in_forward.py", "Lazy", device=device)
    assert [(f.code, f.line) for f in built_in_forward.findings] == [("ML107", 11)]
    (tmp_path / "shared.py").write_text(CLASS_HEAD)
    shared = import_file(str(tmp_path / "shared.py"))
    held_elsewhere = ModelCheck(factory=shared.Shared, label="Shared", device=device).run()
    assert [(f.code, f.line) for f in held_elsewhere.findings] == [("ML101", 12)]
    if device != "cpu":
        for outcome in (built_in_forward, held_elsewhere):
            assert "on cpu" in outcome.findings[0].message
            assert f"the forward on {device} failed" in outcome.findings[0].message


@pytest.mark.parametrize(("file", "name", "inputs"), [
    ("clean_lenet.py", "LeNet", "[2, 3, 32, 32]"),
    ("clean_digits.py", "DigitsNet", "[2, 1, 28, 28]"),
    ("clean_text.py", "TextClassifier", "[2, 16] int64 in [0, 1000)"),
    ("clean_text.py", "TinyEncoder", "[2, 16, 32]"),
])
def test_clean_models_have_no_findings_and_inferred_inputs_fit(file, name, inputs):
    outcome = run_check(file, name)
    assert outcome.findings == []
    assert outcome.inputs == inputs


DEEP_DOWNSAMPLING = """import torch.nn as nn


class Encoder(nn.Module):
    # five halvings, each normalised per instance: a 32x32 input reaches 1x1, which
    # InstanceNorm refuses in training mode; the model is made for 256x256
    def __init__(self):
        super().__init__()
        layers, channels = [], 3
        for width in (16, 32, 64, 128, 128, 128):
            layers += [nn.Conv2d(channels, width, 4, 2, 1), nn.InstanceNorm2d(width),
                       nn.LeakyReLU(0.2)]
            channels = width
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)
"""


def test_an_inferred_input_too_small_for_the_downsampling_tries_larger_sizes(tmp_path):
    # not an ML701 at the first size that reaches 1x1: a larger inferred size runs
    (tmp_path / "encoder.py").write_text(DEEP_DOWNSAMPLING)
    module = import_file(str(tmp_path / "encoder.py"))
    outcome = ModelCheck(factory=module.Encoder, label="Encoder").run()
    assert outcome.findings == []
    size = int(outcome.inputs.split(", ")[-1].rstrip("]"))
    assert size >= 128, outcome.inputs


ENDS_IN_NORMALISATION = """import torch
import torch.nn as nn


class Encoder(nn.Module):
    # what a ViT backbone returns: its last LayerNorm's output, whose features sum to a
    # constant (and a softmax's probabilities, which sum to one)
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.norm(self.fc(x)), torch.softmax(self.head(x), dim=-1)
"""


def test_the_train_pass_reaches_the_layers_before_a_last_layernorm_or_softmax(tmp_path):
    from modellint.rule import TRAIN, RuntimeCheck

    gradients = {}

    class GradientNorms(RuntimeCheck):
        code = "ML706"
        needs = frozenset({TRAIN})

        def check(self, run):
            gradients.update({name: p.grad.norm().item()
                              for name, p in run.model.named_parameters()})

    (tmp_path / "encoder.py").write_text(ENDS_IN_NORMALISATION)
    module = import_file(str(tmp_path / "encoder.py"))
    ModelCheck(factory=module.Encoder, label="Encoder", checks=[GradientNorms()]).run()
    # a plain sum of the outputs gave these layers a gradient of rounding noise (or exactly
    # zero: ML706 on DINO's ViT)
    assert gradients["fc.weight"] > 1e-2 and gradients["head.weight"] > 1e-2, gradients


def test_constructor_with_arguments_is_ml002_with_config_hint():
    outcome = run_check("needs_args.py", "Configurable", enabled=None)
    assert [f.code for f in outcome.findings] == ["ML002"]
    assert "`width`" in outcome.findings[0].message
    assert "[[tool.modellint.runtime.models]]" in outcome.findings[0].message


def test_configured_kwargs_and_inputs_build_the_model():
    outcome = run_check("needs_args.py", "Configurable", kwargs={"width": 5},
                        specs=[{"shape": [3, 5], "dtype": "float32", "low": 0, "high": 2,
                                "name": None}])
    assert outcome.findings == [] and outcome.inputs == "[3, 5]"


def test_meta_device_traces_70b_parameters_without_memory():
    outcome = run_check("big/llama70b.py", "Big70B", device="meta")
    assert outcome.findings == []
    assert 69e9 < outcome.parameters < 72e9
    assert any("meta" in note for note in outcome.notes)
    assert sum(1 for row in outcome.rows if row.type == "TransformerEncoderLayer") == 95


def test_isolation_each_failure_is_one_finding_and_the_run_goes_on():
    from modellint.runtime.pass_ import result_findings, run_jobs
    from modellint.runtime.specs import ModelJob

    cases = ["raises.py:Raises", "hangs.py:Hangs", "exits.py:Exits", "os_exits.py:Quits",
             "crashes.py:Crashes", "memory.py:Hungry", "chatty.py:Chatty", "fine.py:Fine"]
    jobs = []
    for case in cases:
        file, name = case.split(":")
        path = str(FIXTURES / "isolation" / file)
        jobs.append(ModelJob(label=case, file=path, name=name))
    results = run_jobs(jobs, "cpu", 8.0, ["ML002", "ML701", "ML703"])
    messages = {}
    for job, result in results:
        raws = result_findings(job, result)
        messages[job.label] = raws
    assert messages["fine.py:Fine"] == []
    # megabytes printed by a forward neither block the worker nor become a finding
    assert messages["chatty.py:Chatty"] == []
    for case in cases[:-2]:
        assert [r.code for r in messages[case]] == ["ML701"], (case, messages[case])
    text = {case: messages[case][0].message for case in cases[:-2]}
    assert "planted failure" in text["raises.py:Raises"]
    assert "timeout" in text["hangs.py:Hangs"] and "`spin`" in text["hangs.py:Hangs"]
    # the line the watchdog saw: the loop statement or its body
    assert messages["hangs.py:Hangs"][0].line in (6, 7)
    assert "sys.exit(3)" in text["exits.py:Exits"]
    assert "exit status 7" in text["os_exits.py:Quits"]
    assert "SIGSEGV" in text["crashes.py:Crashes"] and "`crash`" in text["crashes.py:Crashes"]
    assert messages["crashes.py:Crashes"][0].line == 8
    assert "out of memory" in text["memory.py:Hungry"]


def _cli(*args, cwd=ROOT):
    return subprocess.run([*MODELLINT, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_cli_runtime_reports_once_per_mistake_and_keeps_exit_codes(tmp_path):
    for name in ("plain_list.py", "unused_param.py", "needs_args.py"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    result = _cli("check", "--runtime", "--format", "json", "-q", str(tmp_path))
    assert result.returncode == 1, result.stderr
    found = sorted((Path(f["path"]).name, f["code"], f["line"], f["pass"])
                   for f in json.loads(result.stdout))
    assert ("plain_list.py", "ML101", 7, "static") in found
    assert [f for f in found if f[1] == "ML101"] == [("plain_list.py", "ML101", 7, "static")]
    assert ("unused_param.py", "ML703", 8, "runtime") in found, (found, result.stderr)
    assert ("needs_args.py", "ML002", 4, "runtime") in found
    # ML002 is info: alone it does not fail the run
    only = tmp_path / "only"
    only.mkdir()
    (only / "needs_args.py").write_text((FIXTURES / "needs_args.py").read_text())
    assert _cli("check", "--runtime", "-q", str(only)).returncode == 0


def test_cli_configured_target_with_kwargs_and_inputs(tmp_path):
    (tmp_path / "models.py").write_text((FIXTURES / "needs_args.py").read_text())
    (tmp_path / "pyproject.toml").write_text(
        "[tool.modellint.runtime]\ntimeout = 30\n"
        "[[tool.modellint.runtime.models]]\ntarget = \"models.py:Configurable\"\n"
        "kwargs = { width = 6 }\ninputs = [[2, 6]]\n"
        "[[tool.modellint.runtime.models]]\ntarget = \"models.py:Configurable\"\n"
        "kwargs = { width = 6 }\ninputs = [[2, 7]]\n"
    )
    result = _cli("check", "--runtime", "--format", "json", "-q", ".", cwd=tmp_path)
    found = json.loads(result.stdout)
    assert [(f["code"], f["line"]) for f in found] == [("ML701", 7)], result.stderr
    assert "[2, 7]" in found[0]["message"]


def test_static_pass_never_imports_torch():
    code = ("import sys, modellint.cli\n"
            "modellint.cli.main(['check', '-q', '--exit-zero', 'fixtures/runtime'])\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "import modellint; assert 'torch' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_trace_resnet34_has_36_conv_rows():
    result = _cli("trace", "torchvision.models:resnet34", "--input", "1,3,224,224",
                  "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert sum(1 for row in data["rows"] if row["type"] == "Conv2d") == 36
    assert data["rows"][0]["input_shapes"] == [[1, 3, 224, 224]]
    assert data["rows"][-1]["output_shapes"] == [[1, 1000]]
    assert data["total_params"] == 21797672


def test_trace_text_depth_and_errors():
    result = _cli("trace", "fixtures/runtime/clean_lenet.py:LeNet", "--depth", "1")
    assert result.returncode == 0, result.stderr
    assert "conv1" in result.stdout and "[2, 6, 28, 28]" in result.stdout
    assert "62,006 parameters" in result.stdout
    bad = _cli("trace", "fixtures/runtime/channel_mismatch.py:TwoStageNet", "--input", "1,3,8,8")
    assert bad.returncode == 1 and "Traceback" not in bad.stdout + bad.stderr
    assert "channel_mismatch.py:19:9: ML701" in bad.stdout and "[1, 16, 8, 8]" in bad.stdout
    missing = _cli("trace", "no_such_module:Net")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_trace_of_a_shape_bug_is_ml701_at_the_layer_with_the_layers_that_ran():
    """No --input: the inferred input meets a channel mismatch that no other size cures;
    `trace` says so as `check --runtime` does, after the table of the layers that ran."""
    target = "fixtures/runtime/channel_mismatch.py:TwoStageNet"
    traced = _cli("trace", target)
    assert traced.returncode == 1, traced.stderr
    assert "no inferred input fits" not in traced.stdout + traced.stderr
    table, _, report = traced.stdout.partition("until the forward failed")
    rows = {line.split()[0]: line for line in table.splitlines()[2:] if line.strip()}
    assert "[2, 16, 32, 32]" in rows["stem"] and "raised" not in rows["stage1.bn"]
    assert "raised" in rows["stage2.conv"] and "head" not in rows  # it never ran
    assert "channel_mismatch.py:19:9: ML701 error:" in report
    as_json = json.loads(_cli("trace", target, "--format", "json").stdout)
    checked = _cli("check", "--runtime", "--format", "json", "-q", "--select", "ML701",
                   "fixtures/runtime/channel_mismatch.py")
    expected = [(f["code"], f["line"], f["message"]) for f in json.loads(checked.stdout)]
    assert [(f["code"], f["line"], f["message"]) for f in as_json["findings"]] == expected
    assert as_json["inputs"] == "[2, 3, 32, 32]"
    assert [r["path"] for r in as_json["rows"] if r.get("raised")] == [
        "", "stage2", "stage2.conv"]


def test_python_api_check_model_and_check_optimizer():
    import modellint

    module = import_file(str(FIXTURES / "clean_lenet.py"))
    model = module.LeNet()
    report = modellint.check_model(model, torch.randn(2, 3, 32, 32))
    assert report.ok and report.findings == []
    assert sum(1 for row in report.trace if row["type"] == "Conv2d") == 2
    bad = modellint.check_model(import_file(str(FIXTURES / "plain_list.py")).ListNet)
    assert not bad.ok and bad.codes() == ["ML101"]
    assert "plain_list.py:7" in str(bad)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # torch refuses overlapping groups in add_param_group; code that edits groups does not
    optimizer.param_groups.append({**optimizer.defaults, "params": list(model.fc3.parameters())})
    result = modellint.check_optimizer(model, optimizer)
    assert result.codes() == ["ML305"] and "more than one" in result.findings[0].message
    model.conv1.requires_grad_(False)
    partial = torch.optim.SGD(model.fc1.parameters(), lr=0.1)
    messages = " ".join(f.message for f in modellint.check_optimizer(model, partial).findings)
    assert "no optimizer group" in messages and "conv1" not in messages


def test_pytest_plugin_fails_a_test_with_findings(pytester):
    pytester.makepyfile(
        f"""
        import sys
        sys.path.insert(0, {str(FIXTURES)!r})
        import torch
        from plain_list import ListNet
        from clean_lenet import LeNet

        def test_clean(modellint):
            assert modellint.check(LeNet(), torch.randn(2, 3, 32, 32)).ok

        def test_broken(modellint):
            modellint.check(ListNet, torch.randn(2, 8))
        """
    )
    result = pytester.runpytest_subprocess()  # the plugin comes from the pytest11 entry point
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ML101*self.layers*"])


# -- ML707 and `trace --memory` --------------------------------------------------------------
# memory_wide.Wide: Linear(1024, 4096) -> relu -> Linear(4096, 1024); in a train-mode forward
# autograd saves the input of fc1 (batch x 1024) and the relu output (batch x 4096, which is
# also fc2's input); the weights it saves are parameters, not activations
WIDE_PARAMS = 1024 * 4096 + 4096 + 4096 * 1024 + 1024


def wide_activations(batch: int, itemsize: int = 4) -> int:
    return batch * (1024 + 4096) * itemsize


def test_trace_memory_measures_activations_and_optimizer_state():
    from modellint.runtime.cli import trace
    from modellint.runtime.specs import parse_target

    request = parse_target("fixtures/runtime/memory_wide.py:Wide").to_request()
    spec = [{"shape": [2, 1024], "dtype": "float32", "low": 0, "high": 2, "name": None}]
    result = trace(request, {}, spec, "cpu", memory=True)
    memory = result["memory"]
    assert memory["parameters"] == memory["gradients"] == WIDE_PARAMS * 4
    assert memory["optimizer"] == 2 * WIDE_PARAMS * 4  # AdamW: exp_avg and exp_avg_sq
    assert memory["activations"] == wide_activations(2)
    assert dict(map(tuple, memory["activations_by_module"]))["fc1"] == 2 * 1024 * 4
    # on meta nothing is allocated and the same tensors are measured; batch, dtype and
    # optimizer change what they should
    meta = trace(request, {}, spec, "meta", memory=True, batch=64, dtype="bfloat16",
                 optimizer="sgd")["memory"]
    assert meta["activations"] == wide_activations(64, itemsize=2)
    assert meta["parameters"] == meta["optimizer"] == WIDE_PARAMS * 2
    assert meta["batch"] == 64 and meta["dtype"] == "bfloat16"


def test_trace_memory_text_and_target():
    result = _cli("trace", "fixtures/runtime/memory_wide.py:Wide", "--input", "2,1024",
                  "--memory", "--target-gpu-memory", "100MB", "--device", "meta")
    assert result.returncode == 0, result.stderr
    assert "training memory (batch 2, float32, AdamW)" in result.stdout
    assert "optimizer state" in result.stdout and "64.0 MiB" in result.stdout
    assert "exceeds the target 95.4 MiB" in result.stdout
    bad = _cli("trace", "fixtures/runtime/memory_wide.py:Wide", "--batch", "4")
    assert bad.returncode == 2 and "--memory" in bad.stderr


def test_ml707_memory_over_target_on_cpu_and_meta():
    import modellint

    wide = import_file(str(FIXTURES / "memory_wide.py")).Wide
    reports = [modellint.check_model(wide, inputs=[[2, 1024]], target_gpu_memory="100MB",
                                     device=device) for device in ("cpu", "meta")]
    for report in reports:
        assert report.codes() == ["ML707"]
        finding = report.findings[0]
        assert finding.line == 5 and finding.path.endswith("memory_wide.py")
        assert "at batch 2" in finding.message and "AdamW state 64.0 MiB" in finding.message
        assert "activations 40.0 KiB" in finding.message and "95.4 MiB" in finding.message
    # it fits in 1 GB; without a target ML707 is not checked
    assert modellint.check_model(wide, inputs=[[2, 1024]], target_gpu_memory="1GB").ok
    assert modellint.check_model(wide, inputs=[[2, 1024]]).codes() == []


def test_cli_runtime_reads_target_gpu_memory_from_config(tmp_path):
    (tmp_path / "wide.py").write_text((FIXTURES / "memory_wide.py").read_text())
    (tmp_path / "pyproject.toml").write_text(
        "[tool.modellint]\ntarget-gpu-memory = \"100MB\"\n"
        "[tool.modellint.runtime]\ndevice = \"meta\"\n"
        "[[tool.modellint.runtime.models]]\ntarget = \"wide.py:Wide\"\n"
        "inputs = [[8, 1024]]\n"
    )
    result = _cli("check", "--runtime", "--format", "json", "-q", ".", cwd=tmp_path)
    found = json.loads(result.stdout)
    assert [(f["code"], f["line"]) for f in found] == [("ML707", 5)], result.stderr
    assert "at batch 8" in found[0]["message"]
    assert result.returncode == 1


# -- trace --feature-maps ------------------------------------------------------------------
def test_trace_feature_maps_writes_one_grid_per_conv(tmp_path):
    from PIL import Image

    from modellint.runtime.featuremaps import grid_size

    out = tmp_path / "maps"
    result = _cli("trace", "fixtures/runtime/clean_lenet.py:LeNet", "--feature-maps", str(out))
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["000_conv1.png", "001_conv2.png"]
    # conv1: 6 maps of 28x28, 3 per row, enlarged 3x (84 px); conv2: 16 maps of 10x10, 4 per
    # row, enlarged 7x (70 px): each map at least 64 px; 2 px padding
    assert grid_size(6, 28, 28) == (2 * 86 + 2, 3 * 86 + 2)
    with Image.open(out / "000_conv1.png") as image:
        assert image.size == (260, 174)
    with Image.open(out / "001_conv2.png") as image:
        assert image.size == (290, 290)
        # enlarged without smoothing: each value of the 10x10 map is a 7x7 square of one grey
        pixels = image.convert("L").load()
        for row in range(10):
            for col in range(10):
                block = {pixels[2 + 7 * col + dx, 2 + 7 * row + dy]
                         for dx in range(7) for dy in range(7)}
                assert len(block) == 1, (row, col, block)
    # noise in, noise out; an untrained model shows untrained filters: both said
    assert "random noise" in result.stderr and "--image" in result.stderr, result.stderr
    assert "without `weights=`" in result.stderr, result.stderr


def test_trace_feature_maps_of_a_real_image_and_chosen_layers(tmp_path):
    from PIL import Image

    picture = tmp_path / "cat.png"
    Image.new("RGB", (40, 50), (200, 120, 40)).save(picture)
    out = tmp_path / "maps"
    result = _cli("trace", "fixtures/runtime/clean_lenet.py:LeNet", "--feature-maps", str(out),
                  "--layers", "conv2", "--image", str(picture), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["inputs"] == "[1, 3, 32, 32]"  # one picture, resized to the model's input
    assert [Path(f).name for f in data["feature_maps"]] == ["000_conv2.png"]
    with Image.open(out / "000_conv2.png") as image:
        assert image.size == (290, 290)
    assert "random noise" not in result.stderr  # a real picture was given
    # --layers given twice: both layers
    both = _cli("trace", "fixtures/runtime/clean_lenet.py:LeNet", "--feature-maps",
                str(tmp_path / "both"), "--layers", "conv2", "--layers", "conv1", "--format",
                "json")
    assert both.returncode == 0, both.stderr
    assert [Path(f).name for f in json.loads(both.stdout)["feature_maps"]] == [
        "000_conv1.png", "001_conv2.png"]
    none = _cli("trace", "fixtures/runtime/clean_lenet.py:LeNet", "--feature-maps", str(out),
                "--layers", "nothing*")
    assert none.returncode == 2 and "nothing*" in none.stderr


# -- pytest plugin under pytest-xdist ------------------------------------------------------
def test_pytest_plugin_under_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(
        f"""
        import sys
        sys.path.insert(0, {str(FIXTURES)!r})
        import pytest
        import torch
        from plain_list import ListNet
        from clean_lenet import LeNet
        from unused_param import Unused

        @pytest.mark.parametrize("seed", range(3))
        def test_clean(modellint, seed):
            torch.manual_seed(seed)
            assert modellint.check(LeNet(), torch.randn(2, 3, 32, 32)).ok

        def test_list(modellint):
            modellint.check(ListNet, torch.randn(2, 8))

        def test_unused(modellint):
            modellint.check(Unused)
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["*2 workers*"])
    result.stdout.fnmatch_lines(["*ML101*self.layers*"])
    result.stdout.fnmatch_lines(["*ML703*aux*"])


class _Exploding(torch.nn.Module):
    """A layer initialised a million times too small, then normalised: the normalisation
    divides its gradient by its tiny output scale."""

    def __init__(self):
        super().__init__()
        self.tiny = torch.nn.Linear(16, 16)
        with torch.no_grad():
            self.tiny.weight.mul_(1e-7)
            self.tiny.bias.zero_()
        self.norm = torch.nn.LayerNorm(16, eps=1e-12)
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                          torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.layers(self.norm(self.tiny(x)))


class _LayerScaled(torch.nn.Module):
    """Residual branches scaled by 1e-6 at initialisation (ConvNeXt's layer scale): their
    gradients are tiny, the stem's is not exploding."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Linear(16, 16)
        self.branches = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(6))
        self.gamma = torch.nn.Parameter(torch.full((16,), 1e-6))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = self.stem(x)
        for branch in self.branches:
            x = x + self.gamma * branch(x)
        return self.head(x)


def test_ml706_exploding_gradients_but_not_layer_scale():
    import modellint

    torch.manual_seed(0)
    report = modellint.check_model(_Exploding(), torch.randn(2, 16))
    assert report.codes() == ["ML706"]
    assert "`tiny`" in report.findings[0].message and "explodes" in report.findings[0].message
    assert modellint.check_model(_LayerScaled(), torch.randn(2, 16)).codes() == []


def test_device_check_script_refuses_what_it_cannot_run():
    """`scripts/device_check.sh` (its full run is the GPU check; `--device cpu` runs it here
    in minutes): a device that is not there or not a device is a usage error, before any run."""
    script = str(ROOT / "scripts" / "device_check.sh")
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           "PYTHON": sys.executable}
    wrong = subprocess.run(["bash", script, "--device", "tpu"], capture_output=True, text=True,
                           env=env)
    assert wrong.returncode == 2 and "cpu, cuda or cuda:N" in wrong.stderr
    if not torch.cuda.is_available():
        absent = subprocess.run(["bash", script, "--device", "cuda"], capture_output=True,
                                text=True, env=env)
        assert absent.returncode == 2 and "no CUDA device here" in absent.stderr, absent.stderr
    helped = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "--device" in helped.stdout
