"""Per-GPU health findings as people read them: one line per finding of a node, naming every GPU it was found on
(eight GPUs in HW slowdown are one finding of the node, not eight rows that differ only in a bus address). Pure.
``aksgpu audit`` and ``aksgpu validate`` both print them so."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from aks_gpu.gpu.health import Finding


@dataclass(frozen=True)
class NodeFinding:
    """One health finding of a node and the GPUs it was found on, in the order the input named them."""

    id: str
    severity: str
    message: str
    gpus: tuple[str, ...]  # empty: the input named no GPU (a kernel log line about the node)

    def text(self, name: Callable[[str], str] = lambda gpu: gpu) -> str:
        """``GPU 3: message``, ``8 GPUs (0000:19:00.0, ...): message`` or ``message``; ``name`` shows one GPU."""
        return f"{gpus_named(self.gpus, name)}{self.message}"


def by_node(findings: Iterable[Finding]) -> list[NodeFinding]:
    """``findings`` of one node's SMI output, those with the same id, severity and message merged, first seen first."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    for finding in findings:
        gpus = merged.setdefault((finding.id, finding.severity, finding.message), [])
        if finding.gpu and finding.gpu not in gpus:
            gpus.append(finding.gpu)
    return [NodeFinding(id_, severity, message, tuple(gpus)) for (id_, severity, message), gpus in merged.items()]


def gpus_named(gpus: Sequence[str], name: Callable[[str], str] = lambda gpu: gpu) -> str:
    """``GPU x: `` for one GPU, ``N GPUs (x, y, ...): `` for several, every one named; empty for none."""
    if not gpus:
        return ""
    if len(gpus) == 1:
        return f"GPU {name(gpus[0])}: "
    return f"{len(gpus)} GPUs ({', '.join(name(gpu) for gpu in gpus)}): "
