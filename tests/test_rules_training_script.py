"""The training-script rules (ML309-ML315) on whole, realistic scripts.

The parity cases are fixtures of our own on which torch-preflight 0.5.0 reports the code
named in the test (TG004, TG007, TG008, TG011, TG012, TG013, TG014); modellint must report
the matching rule on the same line.
"""

from __future__ import annotations

import textwrap

from modellint.rules.training_script import (
    AccumulationWithoutLossScaling,
    DataLoaderStarvesDevice,
    DataParallelStateDictPrefix,
    DdpWithoutDistributedSampler,
    EvalNeverReset,
    SamplerEpochNeverSet,
    SyncInInnerLoop,
    TransferRepeatedEveryStep,
    UnseededTraining,
)
from modellint.testing import fix_text, lint_project, lint_text, registry

ALL = [
    DataLoaderStarvesDevice, UnseededTraining, SyncInInnerLoop, EvalNeverReset,
    DdpWithoutDistributedSampler, TransferRepeatedEveryStep, AccumulationWithoutLossScaling,
]


def found(source, rules=ALL, **kwargs):
    return sorted((f.code, f.line) for f in lint_text(source, rules, **kwargs))


def line_of(source, text):
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


# A single-GPU script with one mistake per rule (ML313 has its own script below).
BUGGY_SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


def main():
    torch.manual_seed(0)
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.2), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(train_set, batch_size=64, shuffle=True)  # starves
    class_weights = torch.tensor([1.0] * 9 + [4.0])
    accum_steps = 4
    model.train()
    for epoch in range(10):
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            x = x * np.random.uniform(0.9, 1.1)  # unseeded numpy
            weight = class_weights.to(device)  # repeated transfer
            logits = model(x)
            loss = criterion(logits, y) * 1.0 if weight is None else F.cross_entropy(logits, y)
            loss.backward()  # unscaled accumulation
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
            for j in range(len(y)):
                hits += int(logits[j].argmax().item() == y[j])  # sync per element
        model.eval()  # never reset
        with torch.no_grad():
            for x, y in val_loader:
                val_loss = criterion(model(x.to(device)), y.to(device))


if __name__ == "__main__":
    main()
"""


def test_buggy_script_reports_each_mistake_once():
    expected = [
        ("ML309", line_of(BUGGY_SCRIPT, "# starves")),
        ("ML310", line_of(BUGGY_SCRIPT, "# unseeded numpy")),
        ("ML311", line_of(BUGGY_SCRIPT, "# sync per element")),
        ("ML312", line_of(BUGGY_SCRIPT, "# never reset")),
        ("ML314", line_of(BUGGY_SCRIPT, "# repeated transfer")),
        ("ML315", line_of(BUGGY_SCRIPT, "# unscaled accumulation")),
    ]
    # the conditional expression hides whether the loss is scaled: ML315 stays silent there,
    # so the loss line is made plain for it
    source = BUGGY_SCRIPT.replace(
        "criterion(logits, y) * 1.0 if weight is None else F.cross_entropy(logits, y)",
        "criterion(logits, y)",
    )
    assert found(source) == sorted(expected)


FIXED_SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.2), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0] * 9 + [4.0]).to(device))
    loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8, pin_memory=True)
    accum_steps = 4
    for epoch in range(10):
        model.train()
        hits = 0
        for i, (x, y) in enumerate(loader):
            x = x.to(device, non_blocking=True) * np.random.uniform(0.9, 1.1)
            y = y.to(device, non_blocking=True)
            logits = model(x)
            loss = criterion(logits, y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
            hits += (logits.argmax(1) == y).sum().item()
        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                val_loss = criterion(model(x.to(device)), y.to(device))


if __name__ == "__main__":
    main()
"""


def test_fixed_script_is_clean():
    assert found(FIXED_SCRIPT) == []


def test_off_by_default_and_severities():
    rules = registry().rules
    assert {code for code in ("ML309", "ML310", "ML311") if rules[code].default_enabled} == set()
    assert all(rules[code].default_enabled for code in ("ML312", "ML313", "ML314", "ML315"))
    assert rules["ML309"].severity.name == "INFO"


# -- parity fixtures: torch-preflight reports the named code on the marked line -------------


def test_parity_tg004_dataloader_starvation():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        model = torch.nn.Linear(4, 1).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(ds, batch_size=16, num_workers=0)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
            opt.step()
    """
    findings = lint_text(source, [DataLoaderStarvesDevice])
    assert [(f.code, f.line) for f in findings] == [("ML309", 6)]
    assert "num_workers" in findings[0].message and "pin_memory=True" in findings[0].message


def test_parity_tg004_only_pin_memory_missing():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = "cuda"
        model = torch.nn.Linear(4, 1).to(device)
        loader = DataLoader(ds, batch_size=16, num_workers=4)
        for x, y in loader:
            model(x.to(device)).sum().backward()
    """
    [finding] = lint_text(source, [DataLoaderStarvesDevice])
    assert "pin_memory=True" in finding.message and "num_workers=`" not in finding.message


def test_parity_tg007_sync_per_element():
    source = """\
        import torch.nn.functional as F

        def train(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                out = model(x)
                F.cross_entropy(out, y).backward()
                opt.step()
                for k in range(out.size(0)):
                    hist[out[k].argmax().item()] += 1
    """
    assert found(source, [SyncInInnerLoop]) == [("ML311", 10)]


def test_sync_in_comprehension_counts_as_per_element():
    source = """\
        import torch.nn.functional as F

        def train(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                out = model(x)
                F.cross_entropy(out, y).backward()
                opt.step()
                scores = [s.item() for s in out.max(1).values]
    """
    assert found(source, [SyncInInnerLoop]) == [("ML311", 9)]


def test_parity_tg008_partial_seeding():
    source = """\
        import random
        import torch

        torch.manual_seed(1)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in data:
            if random.random() < 0.5:
                x = x.flip(0)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    """
    [finding] = lint_text(source, [UnseededTraining])
    assert finding.line == 8
    assert "random.seed(seed)" in finding.message and "independent" in finding.message


def test_parity_tg011_eval_in_epoch_loop():
    source = """\
        import torch

        def fit(net, train_dl, val_dl, opt, epochs):
            net.train()
            for epoch in range(epochs):
                for x, y in train_dl:
                    opt.zero_grad()
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                net.eval()
                with torch.no_grad():
                    for x, y in val_dl:
                        val_loss = torch.nn.functional.cross_entropy(net(x), y)
    """
    [finding] = lint_text(source, [EvalNeverReset])
    assert finding.line == 10 and "`net.train()`" in finding.message


def test_parity_tg012_ddp_loader_without_sampler():
    source = """\
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader

        def run(rank, dataset):
            dist.init_process_group("nccl")
            net = DistributedDataParallel(torch.nn.Linear(4, 1).to(rank), device_ids=[rank])
            loader = DataLoader(dataset, batch_size=32, shuffle=True)
            for x, y in loader:
                net(x.to(rank)).sum().backward()
    """
    [finding] = lint_text(source, [DdpWithoutDistributedSampler])
    assert finding.line == 9 and "DistributedSampler" in finding.message


def test_parity_tg013_invariant_transfer():
    source = """\
        import torch

        def train(model, loader, device):
            mask = torch.ones(16, 16).tril()
            for x in loader:
                m = mask.to(device)
                model(x.to(device), m).sum().backward()
    """
    assert found(source, [TransferRepeatedEveryStep]) == [("ML314", 6)]


def test_parity_tg014_unscaled_accumulation_and_fix():
    source = """\
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            for step, (x, y) in enumerate(loader):
                loss = F.mse_loss(model(x), y)
                loss.backward()
                if step % 8 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert found(source, [AccumulationWithoutLossScaling]) == [("ML315", 6)]
    # the fix is unsafe (it changes the update size), so it is applied only on request
    fixed = fix_text(source, [AccumulationWithoutLossScaling])
    assert "(loss / 8).backward()" in fixed


# -- behaviour beyond the examples ---------------------------------------------------------


def test_ddp_shuffle_with_sampler_fix_removes_only_shuffle():
    source = """\
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, DistributedSampler

        model = DDP(net)
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, shuffle=True, sampler=sampler, batch_size=8)
    """
    assert found(source, [DdpWithoutDistributedSampler]) == [("ML313", 6)]
    assert "DataLoader(ds, sampler=sampler, batch_size=8)" in fix_text(
        source, [DdpWithoutDistributedSampler])


def test_ddp_rule_silent_under_accelerate():
    source = """\
        from accelerate import Accelerator
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader

        accelerator = Accelerator()
        model = DistributedDataParallel(net)
        loader = accelerator.prepare(DataLoader(ds, batch_size=8, shuffle=True))
    """
    assert found(source, [DdpWithoutDistributedSampler]) == []


def test_ddp_loader_with_a_bytes_split_is_checked_not_crashed_on():
    # `split=b"val"` names no split (the rule matched str patterns against it and failed)
    source = """\
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader

        model = DDP(net)
        loader = DataLoader(Places365(".", split=b"val"), batch_size=8)
    """
    assert found(source, [DdpWithoutDistributedSampler]) == [("ML313", 5)]


def test_sampler_reassigned_is_not_trusted_to_be_distributed():
    # `sampler` is sometimes a DistributedSampler and sometimes not: shuffle=True may be
    # legal, so only a missing sampler would be reported
    source = """\
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

        model = DDP(net)
        sampler = DistributedSampler(ds)
        if single:
            sampler = RandomSampler(ds)
        loader = DataLoader(ds, sampler=sampler, shuffle=True)
    """
    assert found(source, [DdpWithoutDistributedSampler]) == []


def test_noqa_on_the_statement_silences_scope_rules():
    source = BUGGY_SCRIPT.replace("# never reset", "# noqa: ML312")
    assert "ML312" not in {code for code, _ in found(source, [EvalNeverReset])}


def test_unseeded_library_module_is_not_an_entry_point():
    source = """\
        import torch

        def augment(x):
            return x + torch.randn_like(x)

        def step(model, x, y, opt):
            torch.nn.functional.mse_loss(model(augment(x)), y).backward()
            opt.step()
    """
    assert found(source, [UnseededTraining]) == []


def test_sync_in_periodic_block_and_outside_training_loop_not_reported():
    source = """\
        def train(model, loader, opt, writer):
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                if step % 50 == 0:
                    for name, p in model.named_parameters():
                        writer.add_scalar(name, p.norm().item(), step)
            for p in model.parameters():
                print(p.norm().item())
    """
    assert found(source, [SyncInInnerLoop]) == []


def test_eval_reset_by_wrapper_module_counts():
    source = """\
        def fit(model, loader, opt, epochs):
            for epoch in range(epochs):
                model.module.train()
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
                    opt.zero_grad()
                model.eval()
    """
    assert found(source, [EvalNeverReset]) == []


def test_accumulation_under_accelerate_is_not_checked():
    source = """\
        def train(model, loader, optimizer, accelerator, criterion):
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                accelerator.backward(loss)
                if i % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert found(source, [AccumulationWithoutLossScaling]) == []


def test_transfer_in_loop_over_settings_not_reported():
    source = """\
        import torch

        def sweep(model, device):
            base = torch.ones(4)
            for lr in (0.1, 0.01):
                w = base.to(device)
                model(w)
    """
    assert found(source, [TransferRepeatedEveryStep]) == []


# pytorch-YOLOv4's train.py (bench/bugs c-pytorch-yolov4-eval-model-loads-dataparallel-keys):
# __main__ wraps the model on several GPUs and passes it to train(), which copies its state
# dict into a bare evaluation model.
WRAPPED_IN_MAIN = """\
import torch


def train(model, device, config, epochs=5):
    for epoch in range(epochs):
        {copy}
        evaluate(eval_model)
    torch.save(model.state_dict(), "last.pth")


if __name__ == "__main__":
    model = Yolov4()
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    model.to(device="cuda")
    train(model=model, config=cfg, device="cuda")
"""


def test_state_dict_copied_in_the_function_the_wrapped_model_is_passed_to():
    source = WRAPPED_IN_MAIN.format(
        copy="eval_model = Yolov4()\n        eval_model.load_state_dict(model.state_dict())")
    assert found(source, [DataParallelStateDictPrefix]) == [
        ("ML349", line_of(source, "eval_model.load_state_dict"))]


def test_callee_that_unwraps_the_model_is_not_reported():
    source = WRAPPED_IN_MAIN.format(
        copy="eval_model = Yolov4()\n"
             "        if torch.cuda.device_count() > 1:\n"
             "            eval_model.load_state_dict(model.module.state_dict())\n"
             "        else:\n"
             "            eval_model.load_state_dict(model.state_dict())")
    assert found(source, [DataParallelStateDictPrefix]) == []


def test_another_models_load_state_dict_is_not_a_resume_of_the_wrapped_one():
    # `eval_model.load_state_dict(` once read as `model.load_state_dict(`, a resume that
    # would keep the keys of one configuration, and hid the save
    source = """\
import torch

model = Net()
if torch.cuda.device_count() > 1:
    model = torch.nn.DataParallel(model)
eval_model = Net()
eval_model.load_state_dict(torch.load("best.pth"))
torch.save(model.state_dict(), "model.pth")
"""
    assert found(source, [DataParallelStateDictPrefix]) == [
        ("ML349", line_of(source, "torch.save"))]


def test_fabric_backward_of_an_unscaled_loss_is_accumulation_without_scaling():
    # lit-llama's LoRA script (bench/bugs c-lit-llama-lora-accumulation-loss-not-scaled):
    # Fabric accumulates "the same way as in PyTorch", its backward divides nothing
    source = """\
import torch
import torch.nn.functional as F


def train(fabric, model, optimizer, train_data, max_iters, gradient_accumulation_iters):
    for iter_num in range(max_iters):
        input_ids, targets = get_batch(fabric, train_data)
        logits = model(input_ids)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        fabric.backward(loss)
        if (iter_num + 1) % gradient_accumulation_iters == 0:
            optimizer.step()
            optimizer.zero_grad()
"""
    assert found(source, [AccumulationWithoutLossScaling]) == [
        ("ML315", line_of(source, "fabric.backward"))]
    scaled = source.replace("fabric.backward(loss)",
                            "fabric.backward(loss / gradient_accumulation_iters)")
    assert found(scaled, [AccumulationWithoutLossScaling]) == []


def test_eval_mode_left_by_a_helper_of_another_file():
    # milesial's U-Net (bench/bugs c-unet-eval-net-leaves-eval-mode): eval_net() of eval.py
    # calls net.eval(), and the epoch loop of train.py never calls net.train()
    files = {
        "eval.py": """\
            def eval_net(net, dataset):
                net.eval()
                return sum(float(net(x).mean()) for x in dataset)
            """,
        "train.py": """\
            from eval import eval_net


            def train_net(net, loader, val, optimizer, criterion, epochs):
                for epoch in range(epochs):
                    {top}for x, y in loader:
                        optimizer.zero_grad()
                        criterion(net(x), y).backward()
                        optimizer.step()
                    score = eval_net(net, val)
            """,
    }
    buggy = dict(files, **{"train.py": files["train.py"].replace("{top}", "")})
    found = lint_project(buggy, [EvalNeverReset])
    assert [(f.code, f.line) for f in found["train.py"]] == [("ML312", 10)]
    assert "which calls `net.eval()`" in found["train.py"][0].message
    fixed = dict(files, **{"train.py": files["train.py"].replace(
        "{top}", "net.train()\n                    ")})
    assert lint_project(fixed, [EvalNeverReset])["train.py"] == []


# -- ML321 --------------------------------------------------------------------------------------

_SAMPLER_SCRIPT = """\
    import torch.utils.data as tud
    from torch.utils.data import DataLoader


    def train(loader, model, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()


    def main(dataset, model, optimizer, epochs):
        train_sampler = tud.distributed.DistributedSampler(dataset{shuffle})
        train_loader = DataLoader(dataset, batch_size=8, sampler=train_sampler)
        for epoch in range(epochs):
            {top}train(train_loader, model, optimizer)
"""


def test_sampler_epoch_never_set_through_a_function_of_the_file():
    # SimCLR's shape (bench/bugs r-simclr-sampler-set-epoch-missing): the epoch loop gives the
    # loader to the file's own train(); the finding is where the epoch starts
    source = _SAMPLER_SCRIPT.format(shuffle="", top="")
    findings = lint_text(source, [SamplerEpochNeverSet])
    assert [(f.code, f.line) for f in findings] == [("ML321", line_of(source, "train(train_"))]
    assert "train_sampler.set_epoch(epoch)" in findings[0].message


def test_sampler_epoch_set_or_not_shuffling_is_silent():
    for shuffle, top in [("", "train_sampler.set_epoch(epoch)\n            "),
                         ("", "train_loader.sampler.set_epoch(epoch)\n            "),
                         (", shuffle=False", ""), (", 1, 0, False", "")]:
        source = _SAMPLER_SCRIPT.format(shuffle=shuffle, top=top)
        assert found(source, [SamplerEpochNeverSet]) == [], (shuffle, top)


def test_sampler_given_to_another_module_is_silent():
    # an engine of another module may set the epoch itself
    source = _SAMPLER_SCRIPT.format(
        shuffle="", top="engine.before_epoch(train_loader, epoch)\n            ")
    source = "    import engine\n" + source
    assert found(source, [SamplerEpochNeverSet]) == []


def test_sampler_loader_iterated_once_is_silent():
    # no epoch loop around the iteration: one pass, the epoch number does not matter
    source = _SAMPLER_SCRIPT.format(shuffle="", top="").replace(
        "        for epoch in range(epochs):\n            train(", "        train(")
    assert found(source, [SamplerEpochNeverSet]) == []
