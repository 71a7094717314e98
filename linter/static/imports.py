"""One alias map per file: which local name stands for which dotted torch name."""

from __future__ import annotations

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None."""
    if type(node) is cst.Name:
        return node.value  # the common case, without building a list
    parts: list[str] = []
    # `type() is`: a failed `isinstance` against a LibCST class is ABCMeta's Python check
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_name(node) or "" if node is not None else ""


class ImportMap:
    """Local name -> fully qualified dotted name, filled in as the file's imports are visited.

    `import torch.nn as nn` maps `nn` to `torch.nn`; `from torch.nn import Linear as L` maps `L`
    to `torch.nn.Linear`; `import torch.nn` binds `torch`.
    """

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        # id of a node -> (the node, what `resolve` gave): every rule asks about the same call;
        # emptied when an import changes the aliases
        self._resolved: dict[int, tuple[cst.BaseExpression, str | None]] = {}

    def add_import(self, node: cst.Import) -> None:
        self._resolved.clear()
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".", 1)[0]
                self.aliases[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        self._resolved.clear()
        if isinstance(node.names, cst.ImportStar):
            return
        module = "." * len(node.relative) + _module_name(node.module)
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            name = alias.name.value
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}" if module else name

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of an expression such as `nn.Linear`, or None when its head was
        not imported (a local variable, `self.x`, a call result)."""
        known = self._resolved.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        qualified = self._resolve(node)
        self._resolved[id(node)] = (node, qualified)
        return qualified

    def _resolve(self, node: cst.BaseExpression) -> str | None:
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        return canonical(f"{target}.{rest}" if rest else target)


def canonical(qualified: str) -> str:
    """`torch.nn.modules.linear.Linear` -> `torch.nn.Linear` (the public spelling)."""
    if qualified.startswith("torch.nn.modules."):
        return "torch.nn." + qualified.rsplit(".", 1)[1]
    if qualified in _PARALLEL_WRAPPERS:
        return "torch.nn." + qualified.rsplit(".", 1)[1]
    return qualified


# `torch.nn.parallel.DistributedDataParallel` (the public spelling) and `DataParallel`'s other
# paths: the semantic model knows them under the `torch.nn.` name it keeps for every layer
_PARALLEL_WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
})
