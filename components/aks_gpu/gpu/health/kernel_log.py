"""GPU health from the NVIDIA kernel module's log lines (dmesg, journalctl -k) and nvidia-smi's own lost-GPU lines:
Xid errors graded by NVIDIA's catalog, GPUs lost or failed to initialise, GPUs that must be reset. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from aks_gpu.gpu.health.report import Collector
from aks_gpu.gpu.smi.text import PCI_ADDRESS, Text, integer, shorten
from aks_gpu.gpu.xid import CATALOG_URL, load_xid_catalog

_KERNEL_MARKERS = ("NVRM:", " kernel: ", "kernel: ")
_XID = "NVRM: Xid ("


def read_kernel_log(t: Text, out: Collector, *, any_kernel_log: bool) -> bool:
    """Xid lines of the NVIDIA kernel module in dmesg or journalctl form (any prefix), and lost-GPU lines anywhere.

    A kernel log is judged for Xids when it carries the NVIDIA module's lines ("NVRM:"), or any kernel log when
    the caller named NVIDIA as the vendor: an AMD node's log without NVRM lines says nothing about Xids. A lost
    GPU is reported by the kernel module ("has fallen off the bus") and by nvidia-smi itself ("Unable to
    determine the device handle for GPU ...: GPU is lost"), so those lines count in any input. A line the output
    was cut in is read only as far as it is whole (``whole_last_line``): "Xid (...): 7" may be the start of 79.
    """
    last = whole_last_line(t)
    lines = t.complete + ((last,) if last is not None else ())
    kernel = (
        t.prefix == "journal-kernel"
        or any(marker in line for line in lines for marker in _KERNEL_MARKERS)
        or any(_dmesg_stamp(line) for line in lines)
    )
    judged = kernel and (any_kernel_log or any("NVRM" in line for line in lines))
    lost = _lost_gpus(lines)
    reset = _reset_required(lines)
    if judged:
        out.checked.update(("xid", "gpu-lost", "gpu-reset-required"))
        _xid_findings(lines, out)
    if lost:
        out.checked.add("gpu-lost")
    for bus, line in lost.items():
        out.add("gpu-lost", "critical", bus, _lost_message(bus, line))
    if reset:
        out.checked.add("gpu-reset-required")
    for bus, line in reset.items():
        where = f" at {bus}" if bus else ""
        out.add(
            "gpu-reset-required",
            "critical",
            bus,
            f"the driver says the GPU{where} must be reset before it can be used again ({line}): CUDA fails on it until "
            "then; drain the node and reboot it; if it recurs, open an Azure support case",
        )
    return judged or bool(lost) or bool(reset)


# What the NVIDIA driver and NVML print when a GPU is unusable until it is reset (or the node rebooted). NVML's
# return code NVML_ERROR_RESET_REQUIRED ("The GPU requires a reset before it can be used again", nvml.h) prints as
# "GPU requires reset" (leptonai/gpud, nvml errors: ErrGPURequiresReset); the kernel module's status
# NV_ERR_RESET_REQUIRED (0x62) in its assertions (scitix/sichek#51, fixture 40); "GPU marked for reset" after back to
# back GSP RPC timeouts and Xid 154's recovery action "GPU Reset Required" / "Node Reboot Required" / "Drain and
# Reset" (NVIDIA/open-gpu-kernel-modules#446, fixture 41; the actions are nvidia-smi -q's GPU Recovery Action); "may
# need to be reset" when GSP cannot boot (open-gpu-kernel-modules#1230, fixture 42); and uvm's "requiring os reboot to
# recover" (the global fatal error it reports with Xid 154, open-gpu-kernel-modules#1134).
_RESET_MARKERS = (
    "NV_ERR_RESET_REQUIRED",
    "GPU requires reset",
    "GPU marked for reset",
    "may need to be reset",
    "requiring os reboot to recover",
    "(GPU Reset Required)",
    "(Node Reboot Required)",
    "(Drain and Reset)",
)


def _reset_required(lines: Sequence[str]) -> dict[str | None, str]:
    found: dict[str | None, str] = {}
    for number, line in enumerate(lines):
        if any(marker in line for marker in _RESET_MARKERS):
            bus = pci_address(line) or next(
                (address for nearby in (*reversed(lines[max(0, number - 3) : number]), *lines[number + 1 : number + 4])
                 if (address := pci_address(nearby))),
                None,
            )
            found.setdefault(bus, shorten(line.strip(), 160))
    if None in found and len(found) > 1:
        del found[None]  # the same event, named with its GPU on another line
    return found


# What the NVIDIA kernel module and nvidia-smi print for a GPU the driver cannot use. Beyond the three, the
# kernel module's "RmInitAdapter failed" / "rm_init_adapter failed": the driver could not initialise the GPU, and
# nvidia-smi then reports "No devices were found" for it (tests/fixtures/health/18, from
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/862; the same pair in issues 789 there and in
# NVIDIA/gpu-operator#1146). The GPU is out of service as surely as one fallen off the bus.
_LOST_MARKERS = ("fallen off the bus", "GPU is lost", "Unable to determine the device handle")
_INIT_FAILED_MARKERS = ("RmInitAdapter failed", "rm_init_adapter failed")


def whole_last_line(t: Text) -> str | None:
    """The last line of an input that does not end with a line end, where what the checks read of it is whole.

    Such a line may have been cut (an exec stopped by its timeout), or may be whole: a line pasted from a ticket,
    ``echo -n``, an editor that adds no final line end. Dropping it would hide an Xid 79 on the last line and still
    claim the log checked. What is read of it is whole when an Xid's code is followed by its comma ("Xid (PCI:...):
    79," cannot be the start of another code), or when a lost-GPU marker stands after the GPU's address in full
    (nvidia-smi's "...: GPU is lost", the kernel's "... has fallen off the bus", "RmInitAdapter failed"): the rest
    of the line is only the message, shortened anyway.
    """
    if not t.partial or not t.lines:
        return None
    last = t.lines[-1]
    at = last.find(_XID)
    parsed = _xid_line(last[at + len(_XID) :]) if at >= 0 else None
    if parsed is not None and last[at + len(_XID) :].partition("): ")[2].partition(",")[1]:
        return last
    if any(marker in last for marker in _LOST_MARKERS[:2] + _INIT_FAILED_MARKERS):
        return last
    return None


def _lost_gpus(lines: Sequence[str]) -> dict[str | None, str]:
    lost: dict[str | None, str] = {}
    for number, line in enumerate(lines):
        if any(marker in line for marker in _LOST_MARKERS + _INIT_FAILED_MARKERS):
            bus = pci_address(line) or next(
                (found for earlier in reversed(lines[max(0, number - 3) : number]) if (found := pci_address(earlier))), None
            )
            lost.setdefault(bus, shorten(line.strip(), 160))
    return lost


def _lost_message(bus: str | None, line: str) -> str:
    at = f" at {bus}" if bus else ""
    if any(marker in line for marker in _INIT_FAILED_MARKERS):
        return (
            f"the driver could not initialise the GPU{at} ({line}): it is not usable (nvidia-smi shows no device for it); "
            "drain the node and reboot or reimage it; if it recurs, open an Azure support case for the hardware"
        )
    return (
        f"the GPU{at} is lost ({line}): the driver cannot reach it and it stays lost until the VM restarts; drain the "
        "node and reboot or reimage it; if it recurs, open an Azure support case for the hardware"
    )


def _xid_findings(lines: Sequence[str], out: Collector) -> None:
    catalog = load_xid_catalog()
    xids: dict[tuple[str | None, int], tuple[int, str]] = {}
    for line in lines:
        at = line.find(_XID)
        if at < 0:
            continue
        parsed = _xid_line(line[at + len(_XID) :])
        if parsed is not None:
            bus, code, detail = parsed
            seen, first = xids.get((bus, code), (0, detail))
            xids[(bus, code)] = (seen + 1, first)
    for (bus, code), (seen, detail) in sorted(xids.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        entry = catalog.get(code)
        times = f", {seen} times" if seen > 1 else ""
        where = f" on PCI {bus}" if bus else ""
        said = f"; the log says: {detail}" if detail else ""
        if entry is None:
            out.add(
                "xid",
                "warning",
                bus,
                f"Xid {code}{where}{times}: not in NVIDIA's Xid catalog ({CATALOG_URL}); look it up for this driver and "
                f"GPU{said}",
            )
            continue
        severity = entry.severity
        if entry.immediate == _NVLINK5_WORKFLOW and detail.split()[1:2] == ["Fatal"]:
            # The driver names the NVLink5 error's severity itself ("NETIR_LINK_EVT Fatal XC0 ..." against
            # "SAW_MVB Nonfatal ..."): a Fatal one takes the link down until the GPUs are reset (gpud grades the same
            # lines so, leptonai/gpud#1160 and #1174; fixtures 48, 49).
            severity = "critical"
        out.add(
            "xid",
            severity,
            bus,
            f"Xid {code} ({entry.mnemonic}: {entry.description}){where}{times}: {entry.action} (NVIDIA's immediate action: "
            f"{entry.immediate or 'none given'}; {entry.source}){said}",
        )


_NVLINK5_WORKFLOW = "WORKFLOW_NVLINK5_ERR"


def _dmesg_stamp(line: str) -> bool:
    """ "[ 1843.308145] ..." or "[Fri Aug 30 11:43:09 2024] ...": a dmesg line (a markdown quote "> " before it)."""
    stripped = line.lstrip("> ").lstrip()
    inside, closing, _ = stripped[1:40].partition("]")
    if not stripped.startswith("[") or not closing:
        return False
    seconds, dot, fraction = inside.strip().partition(".")
    if dot and seconds.isascii() and seconds.isdigit() and fraction.isdigit():
        return True
    words = inside.split()
    return len(words) == 5 and words[3].count(":") == 2 and words[4].isascii() and words[4].isdigit() and len(words[4]) == 4


def _xid_line(rest: str) -> tuple[str | None, int, str] | None:
    """After "NVRM: Xid (": "PCI:0000:9b:00): 119, pid=..., <message>" -> (bus, code, message)."""
    inside, closing, after = rest.partition("): ")
    if not closing or len(inside) > 24:
        return None
    bus = inside.removeprefix("PCI:")
    code_text, comma, detail = after.partition(",")
    code = integer(code_text) if len(code_text) <= 4 else None
    if code is None:
        return None
    return (bus if PCI_ADDRESS.fullmatch(bus) else None), code, shorten(detail.strip(), 160) if comma else ""


def pci_address(line: str) -> str | None:
    for word in line.replace(",", " ").replace("(", " ").replace(")", " ").split():
        # "PCI:0000:9b:00" in NVRM lines; "GPU0000:07:00.0" in nvidia-smi's "Unable to determine the device handle".
        candidate = word.removeprefix("PCI:").removeprefix("GPU").rstrip(":.")
        if len(candidate) <= 16 and PCI_ADDRESS.fullmatch(candidate):
            return candidate
    return None
