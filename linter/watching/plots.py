"""`modellint run --plots DIR`: loss, learning rate per param group and gradient norm per step
as PNGs (matplotlib, optional: without it the run says so and writes nothing)."""

from __future__ import annotations

import math
import os


def write_plots(summary: dict, folder: str, tree) -> str:
    """Each plot as `folder`/NAME.png, the folder and the files made as
    `modellint.safe_write` makes them (no link in `tree` followed); what was written, or why
    nothing was."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "--plots needs matplotlib (pip install matplotlib); no plots were written"
    from modellint.safe_write import UnsafePath, enter_folder, replacing

    try:
        enter_folder(folder, tree, create=True)
    except (UnsafePath, OSError) as exc:
        return f"--plots: {_reason(exc)}; no plots were written"
    written = []
    refused: list[str] = []

    def save(name: str, title: str, series: list[tuple[str, list[float]]], log: bool) -> None:
        series = [(label, values) for label, values in series if values]
        if not series:
            return
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for label, values in series:
            ax.plot(range(1, len(values) + 1), values, label=label)
        ax.set_title(title)
        ax.set_xlabel("step")
        finite = [v for _, vs in series for v in vs if math.isfinite(v)]
        if log and finite and min(finite) > 0:
            ax.set_yscale("log")
        if len(series) > 1:
            ax.legend(fontsize="small")
        fig.tight_layout()
        path = os.path.join(folder, name)
        try:
            with replacing(path, tree, binary=True) as handle:
                fig.savefig(handle, format="png", dpi=100)
            written.append(path)
        except UnsafePath as exc:
            refused.append(str(exc))
        except OSError as exc:
            refused.append(f"{path}: {_reason(exc)}")
        finally:
            plt.close(fig)

    save("loss.png", "loss (per backward)", [("loss", summary.get("losses") or [])], False)
    lrs = []
    for index, per_step in enumerate(summary.get("lrs") or []):
        groups = max((len(row) for row in per_step), default=0)
        for group in range(groups):
            lrs.append((f"optimizer {index} group {group}",
                        [row[group] for row in per_step if group < len(row)]))
    save("lr.png", "learning rate per param group", lrs, True)
    save("grad_norm.png", "gradient norm (before each step)",
         [(f"optimizer {i}", norms) for i, norms in enumerate(summary.get("grad_norms") or [])],
         True)
    not_written = f"; not written: {'; '.join(refused)}" if refused else ""
    return f"{len(written)} plot(s) written to {folder}{not_written}"


def _reason(exc: Exception) -> str:
    return str(exc) if not isinstance(exc, OSError) else exc.strerror or str(exc)
