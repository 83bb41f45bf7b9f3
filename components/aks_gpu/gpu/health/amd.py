"""GPU health from AMD's tools and driver: amd-smi metric --ecc / --ecc-blocks (text or --json), rocm-smi
--showrasinfo and the amdgpu kernel driver's uncorrectable RAS lines. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from aks_gpu.gpu.health.kernel_log import pci_address
from aks_gpu.gpu.health.report import Collector
from aks_gpu.gpu.smi import amd as amd_formats
from aks_gpu.gpu.smi.text import Text, integer, shorten


def read_amd(t: Text, out: Collector) -> bool:
    recognized = False
    for document in amd_formats.json_documents(t.raw):
        for index, fields in amd_formats.json_devices(document):
            recognized = _amd_ecc(str(index), fields, out) or recognized
    recognized = _amdgpu_kernel_ras(t, out) or recognized
    return _amd_text_ecc(t, out) or _rocm_smi_ras(t, out) or recognized


# The amdgpu kernel driver's uncorrectable RAS reports. Its messages: "uncorrectable hardware error(ERREVENT_ATHUB_
# INTERRUPT) detected!" (fixtures 43 on MI300X, 44 on MI50, from ROCm/legacy-rocm-build#4021 and #1886) and "N
# uncorrectable hardware errors detected in <block> block" (amdgpu_ras.c, its per-block count); and the ACA banks it
# dumps under "[Hardware Error]: aca entry[N].STATUS=0x...", whose STATUS bits are those of amdgpu_aca.h (Linux,
# drivers/gpu/drm/amd/amdgpu): UC 61, PCC 57, UECC 45, DEFERRED 44, POISON 43 - any of them is an error the hardware did
# not correct (deferred and poisoned data are uncorrectable data not yet consumed). A bank with none of them (a
# corrected error) is not a finding. A log without such a line does not say the GPU had none (logs rotate): no
# "checked" from it.
_ACA_STATUS = ".STATUS=0x"
_ACA_UNCORRECTED_BITS = {61: "UC", 57: "PCC", 45: "UECC", 44: "deferred", 43: "poison"}


def _amdgpu_kernel_ras(t: Text, out: Collector) -> bool:
    if "amdgpu" not in t.raw:
        return False
    found: dict[str | None, str] = {}
    for line in t.complete:
        if "amdgpu" not in line:
            continue
        lowered = line.lower()
        if "uncorrectable hardware error" in lowered:
            found.setdefault(pci_address(line), shorten(line.strip(), 160))
            continue
        at = line.find(_ACA_STATUS)
        if at < 0 or "aca entry" not in line:
            continue
        digits = line[at + len(_ACA_STATUS) : at + len(_ACA_STATUS) + 16]
        status = int(digits, 16) if len(digits) == 16 and all(c in "0123456789abcdefABCDEF" for c in digits) else None
        bits = [name for bit, name in _ACA_UNCORRECTED_BITS.items() if status is not None and status >> bit & 1]
        if bits:
            found.setdefault(pci_address(line), f"ACA bank with {', '.join(bits)} set: {shorten(line.strip(), 120)}")
    for bus, line in found.items():
        _ras(out, bus, f"the amdgpu driver reports an uncorrectable error ({line})")
    return bool(found)


def _amd_ecc(gpu: str | None, fields: Mapping[str, object], out: Collector) -> bool:
    """amd-smi metric --ecc ("ecc": totals) and --ecc-blocks ("ecc_blocks": per block), as --json prints them."""
    read = False
    ecc = fields.get("ecc")
    if isinstance(ecc, Mapping):
        total = integer(ecc.get("total_uncorrectable_count"))
        if total is not None:
            read = True
            if total:
                _ras(out, gpu, f"{total} uncorrectable RAS (ECC) error(s) in total")
    blocks = fields.get("ecc_blocks")
    if isinstance(blocks, Mapping):
        for block, counts in blocks.items():
            count = integer(counts.get("uncorrectable_count")) if isinstance(counts, Mapping) else None
            if count is not None:
                read = True
                if count:
                    _ras(out, gpu, f"{count} uncorrectable RAS error(s) in block {block}")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _amd_text_ecc(t: Text, out: Collector) -> bool:
    """amd-smi metric --ecc / --ecc-blocks as text: "GPU: N", then "ECC:" or a block ("UMC:") and its counts.

    Lines cut out of that output (a grep of one block) are read too, without a GPU.
    """
    gpu: str | None = None
    block: str | None = None
    read = False
    for line in t.complete:
        stripped = line.strip()
        kind, colon, rest = stripped.partition(": ")
        if line[:1] not in (" ", "\t") and colon and kind == "GPU":
            number = integer(rest)
            gpu, block = (str(number) if number is not None else None), None
            continue
        if stripped.endswith(":") and " " not in stripped:
            block = stripped[:-1]
            continue
        name = kind.upper()
        if name not in ("TOTAL_UNCORRECTABLE_COUNT", "UNCORRECTABLE_COUNT") or not colon:
            continue
        count = integer(rest)
        if count is None:
            continue
        read = True
        if count:
            where = f" in block {block}" if block and block != "ECC" and name == "UNCORRECTABLE_COUNT" else " in total"
            _ras(out, gpu, f"{count} uncorrectable RAS error(s){where}")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _rocm_smi_ras(t: Text, out: Collector) -> bool:
    """``rocm-smi --showrasinfo``: per "GPU[N]:" a table of Block, Status, Correctable Error, Uncorrectable Error."""
    gpu: str | None = None
    in_table = False
    read = False
    for line in t.complete:
        stripped = line.strip()
        if stripped.startswith("GPU[") and "]" in stripped[:10]:
            number = integer(stripped[4 : stripped.index("]")])
            gpu = str(number) if number is not None else None
            in_table = False
            continue
        if "Uncorrectable Error" in stripped and "Block" in stripped:
            in_table = True
            continue
        words = stripped.split()
        if not in_table or len(words) != 4:
            in_table = in_table and bool(words) and not stripped.startswith(("_", "="))
            continue
        count = integer(words[3])
        if count is None or integer(words[2]) is None:
            continue
        read = True
        if count:
            _ras(out, gpu, f"{count} uncorrectable RAS error(s) in block {words[0]} (status {words[1]})")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _ras(out: Collector, gpu: str | None, what: str) -> None:
    out.add(
        "ras-uncorrectable",
        "critical",
        gpu,
        f"{what}: data on this GPU may be corrupt; drain the node and reset the GPU (reboot the node); if errors return "
        "or the bad-page threshold is reached (amd-smi bad-pages), open an Azure support case",
    )
