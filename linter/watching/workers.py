"""What DataLoader worker processes do with their random generators: a `worker_init_fn` and a
`collate_fn` wrapper (picklable, so they reach the workers) write, for each worker, a
fingerprint of every generator it can see (the global ones of Python, NumPy and torch, and
those the dataset holds as attributes) when the worker starts and after its first batch.
Workers whose generator was used and ended in the same state drew the same random numbers."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import types


def _digest(value) -> str:
    try:
        data = pickle.dumps(value)
    except Exception:  # noqa: BLE001
        data = repr(value).encode()
    return hashlib.sha1(data).hexdigest()[:16]


def fingerprints(dataset) -> dict[str, str]:
    import random

    out = {"Python's global `random`": _digest(random.getstate())}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        out["NumPy's global RNG"] = _digest(numpy.random.get_state()[1].tobytes())
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch's default generator"] = _digest(torch.get_rng_state().numpy().tobytes())
    for label, value in _held(dataset, f"{type(dataset).__name__}"):
        label = f"`{label}`"
        if isinstance(value, random.Random):
            out[label] = _digest(value.getstate())
        elif numpy is not None and isinstance(value, numpy.random.Generator):
            out[label] = _digest(value.bit_generator.state)
        elif numpy is not None and isinstance(value, numpy.random.RandomState):
            out[label] = _digest(value.get_state()[1].tobytes())
        elif torch is not None and isinstance(value, torch.Generator):
            out[label] = _digest(value.get_state().numpy().tobytes())
    return out


# values that hold no generator worth a look: plain values, code, and data (arrays, tensors)
_SKIPPED = (str, bytes, int, float, complex, bool, type(None), type, types.FunctionType,
            types.BuiltinFunctionType, types.MethodType, types.ModuleType)


def _held(owner, label: str, depth: int = 5, budget: list[int] | None = None):
    """(path, value) of what `owner` holds, through attributes, lists, tuples and dicts, a few
    levels down and a bounded number of values: the generators a dataset's transforms hold
    (`Noisy.transform.transforms[0].rng`, `Noisy.target_transform.rng`)."""
    budget = [256] if budget is None else budget
    if isinstance(owner, dict):
        items = [(f"{label}[{key!r}]", value) for key, value in list(owner.items())[:16]
                 if isinstance(key, str)]
    elif isinstance(owner, (list, tuple)):
        items = [(f"{label}[{index}]", value) for index, value in enumerate(owner[:16])]
    else:
        try:
            attributes = vars(owner)
        except TypeError:
            return
        items = []
        for name, value in list(attributes.items()):
            if name == "_modules" and isinstance(value, dict):
                # an nn.Module's sub-modules (torchvision's v2 transforms) by their own names
                items += [(f"{label}.{sub}", module) for sub, module in value.items()]
            elif not (name.startswith("_") and isinstance(value, dict)
                      or name.startswith("_modellint")):  # nn.Module's own tables, the probe's
                items.append((f"{label}.{name}", value))
    for path, value in items:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        if isinstance(value, _SKIPPED) or type(value).__name__ == "ndarray":
            continue
        yield path, value
        if depth > 1:
            yield from _held(value, path, depth - 1, budget)


class InitProbe:
    def __init__(self, inner, folder: str, key: str) -> None:
        self.inner, self.folder, self.key = inner, folder, key

    def __call__(self, worker_id: int) -> None:
        if self.inner is not None:
            self.inner(worker_id)
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is not None:
            info.dataset.__dict__.setdefault("_modellint_rng_init", fingerprints(info.dataset))


class CollateProbe:
    def __init__(self, inner, folder: str, key: str) -> None:
        self.inner, self.folder, self.key = inner, folder, key
        self.done = False

    def __call__(self, batch):
        result = self.inner(batch)
        if not self.done:
            self.done = True
            try:
                self._write()
            except Exception:  # noqa: BLE001 - never break the user's data loading
                pass
        return result

    def _write(self) -> None:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is None:
            return
        dataset = info.dataset
        before = dataset.__dict__.get("_modellint_rng_init")
        if before is None:
            return
        record = {"key": self.key, "generation": info.seed - info.id, "worker": info.id,
                  "init": before, "after": fingerprints(dataset)}
        path = os.path.join(self.folder, f"{self.key}-{record['generation']}-{info.id}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(path + ".tmp", path)


def read(folder: str) -> list[dict]:
    out: list[dict] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for name in names:
        if name.endswith(".json"):
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    out.append(json.load(handle))
            except (OSError, ValueError):
                continue
    return out


def identical(records: list[dict]) -> dict[tuple[str, int], list[str]]:
    """(loader key, generation) -> the generators that every worker used and left in one
    same state."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for rec in records:
        groups.setdefault((rec["key"], rec["generation"]), []).append(rec)
    found = {}
    for group, workers in groups.items():
        if len(workers) < 2:
            continue
        names = set.intersection(*(set(w["after"]) for w in workers))
        same = [name for name in sorted(names)
                if all(w["init"].get(name) != w["after"][name] for w in workers)
                and len({w["after"][name] for w in workers}) == 1]
        if same:
            found[group] = same
    return found
