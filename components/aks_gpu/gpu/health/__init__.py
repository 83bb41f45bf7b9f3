"""GPU health: what fails GPU jobs in production, read from SMI output, kernel logs and node conditions. Pure.

Two readers, both text or dicts in, frozen results out, no I/O and no Pulumi:

- ``read_health(text, vendor)`` reads ``nvidia-smi -q`` (text or ``-x``), the default ``nvidia-smi`` table,
  ``--query-gpu`` / ``--query-remapped-rows`` CSV with its header, ``nvidia-smi nvlink -s``, ``topo -m`` (on an NVLink
  size), ``dcgmi nvlink --link-status``, kernel log lines (``dmesg``, ``journalctl -k``, the amdgpu driver's RAS lines),
  ``amd-smi metric --ecc`` / ``--ecc-blocks`` (text or ``--json``) and ``rocm-smi --showrasinfo``, and returns
  ``HealthReport(findings, checked)``: ``checked`` names what the input allowed to judge, so "no finding" is
  never claimed for what was not read. ``read_smi_and_health`` returns the SMI report of the same text too, from
  one pass over it (the validation reads both for every node).
- ``read_gpu_conditions(node)`` reads the GPU conditions the AKS Node Problem Detector sets on a node object
  (``kubectl get node -o json``): GPUMissing, XIDErrors, NVLinkStatusInactive, IBLinkFlapping and the others
  AKS documents.

The readers by source: ``nvidia`` (nvidia-smi, dcgmi), ``kernel_log`` (the NVIDIA kernel module's lines), ``amd``
(amd-smi, rocm-smi, the amdgpu driver), ``conditions`` (the node's NPD conditions); ``reader`` runs them over one input
into the ``report``.

Finding ids (a contract: ``aksgpu smi health`` prints them, other tools match on them):

=========================  ========  ==========================================================================
id                         severity  when
=========================  ========  ==========================================================================
``ecc-uncorrectable``      critical  volatile uncorrectable ECC errors above zero (warning: aggregate only)
``row-remap-failure``      critical  the row remapper failed (no spare row left: the GPU needs replacing)
``row-remap-pending``      critical  rows wait for remapping (the GPU needs a reset)
``retired-pages-pending``  critical  pages wait for retirement (the driver needs a reload, i.e. a reset)
``xid``                    per code  an Xid in the kernel log; severity from components/aks_gpu/data/xid.yaml
``gpu-lost``               critical  "GPU is lost", "Unable to determine the device handle", fallen off the bus,
                                     "RmInitAdapter failed" (the driver could not initialise the GPU), a GPU whose
                                     name nvidia-smi prints as ERR! or most of whose fields read ERR! (a warning when
                                     only some do)
``gpu-reset-required``     critical  the driver or NVML says the GPU needs a reset (or the node a reboot) before it
                                     can be used again: NV_ERR_RESET_REQUIRED, "GPU requires reset", "GPU marked for
                                     reset", "may need to be reset", Xid 154 to a reset or reboot, uvm's "requiring
                                     os reboot", nvidia-smi -q's GPU Recovery Action
``hw-slowdown``            warning   HW slowdown, HW thermal slowdown or HW power brake active
``pcie-degraded``          warning   PCIe link width below its maximum
``nvlink-inactive``        critical  inactive NVLinks (warning when all are and the size may have none)
``fabric-not-ready``       critical  NVSwitch fabric state not Completed or status not Success
``ras-uncorrectable``      critical  AMD: uncorrectable RAS (ECC) errors above zero, or the amdgpu kernel driver
                                     reporting one (an uncorrectable hardware error, an ACA bank with UC, PCC, UECC,
                                     deferred or poison set)
=========================  ========  ==========================================================================

Sources: NVIDIA's Xid catalog (xid.yaml), "NVIDIA A100 GPU memory error management"
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html: row remapping, pending and failure),
"Dynamic page retirement" (https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html), nvidia-smi's own
field help (the PCIe link "may be reduced when the GPU is not in use"), the fabric states NVIDIA's tools walk
through ("Not Started" -> "In Progress" -> "Completed", https://github.com/NVIDIA/NVSentinel/pull/1382), and the AKS
Node Problem Detector facts of components/aks_gpu/data/remediation.yaml (npd_gpu_checks) that ``GPU_CONDITIONS`` reads.
"""

from aks_gpu.gpu.health.conditions import GPU_CONDITIONS, GpuCondition, GpuConditionType, active_conditions, read_gpu_conditions
from aks_gpu.gpu.health.reader import nvlink_expected_for, read_health, read_smi_and_health
from aks_gpu.gpu.health.report import FINDING_IDS, Finding, FindingId, HealthReport, NotChecked, Severity

__all__ = [
    "FINDING_IDS",
    "GPU_CONDITIONS",
    "Finding",
    "FindingId",
    "GpuCondition",
    "GpuConditionType",
    "HealthReport",
    "NotChecked",
    "Severity",
    "active_conditions",
    "nvlink_expected_for",
    "read_gpu_conditions",
    "read_health",
    "read_smi_and_health",
]
