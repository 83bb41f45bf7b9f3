"""What an SMI output says, as frozen data: the report ``parse_smi`` returns and its parts. Pure, no I/O."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from aks_gpu.naming import Vendor

VendorChoice = Literal["nvidia", "amd", "auto"]
MigMode = Literal["Enabled", "Disabled"]
# unreadable: the output is a format this reads, and the GPU rows it must hold could not be read (a prefix before
# each line, a layout this does not know): never "0 GPUs" without an error.
# duplicate_gpu: one GPU (one PCI address) is listed twice, as two runs of the tool in one file are: read once.
ErrorKind = Literal[
    "driver_not_loaded",
    "driver_library_mismatch",
    "nvml_init_failed",
    "no_devices",
    "unreadable",
    "unrecognized",
    "duplicate_gpu",
]
LinkState = Literal["active", "inactive", "down", "disabled"]

# The formats parse_smi tells apart, as the report's ``format`` names them (the command that prints each).
Format = Literal[
    "nvidia-smi",
    "nvidia-smi -q",
    "nvidia-smi -q -x",
    "nvidia-smi -L",
    "nvidia-smi mig -lgip",
    "nvidia-smi --query-gpu",
    "nvidia-smi --query-compute-apps",
    "nvidia-smi nvlink -s",
    "nvidia-smi topo -m",
    "amd-smi",
    "amd-smi version",
    "amd-smi static/list",
    "amd-smi --json",
    "rocm-smi",
    "rocm-smi --json",
]


@dataclass(frozen=True)
class GpuInfo:
    index: int | None
    name: str | None
    uuid: str | None
    memory_total_mib: int | None
    mig_mode: MigMode | None
    bus_id: str | None = None  # PCI address as the tool prints it ("00000000:18:00.0", "0000:0c:00.0")


@dataclass(frozen=True)
class MigDevice:
    gpu_index: int | None
    profile: str | None  # "1g.10gb": the name nvidia-smi prints, without its "MIG " prefix
    uuid: str | None


@dataclass(frozen=True)
class GpuProcess:
    """One row of ``nvidia-smi --query-compute-apps``: a compute process holding GPU memory."""

    gpu_uuid: str | None
    pid: int | None
    name: str | None
    used_memory_mib: int | None


@dataclass(frozen=True)
class NvLink:
    """One link of ``nvidia-smi nvlink -s``: "Link 3: 25 GB/s" (active) or "Link 3: <inactive>"."""

    gpu_index: int | None
    link: int
    state: LinkState
    speed_gb_s: float | None


@dataclass(frozen=True)
class TopologyLink:
    """One cell of ``nvidia-smi topo -m`` between two GPUs: "NV12" (12 bonded NVLinks), "SYS", "PIX"..."""

    gpu_index: int
    peer_index: int
    connection: str
    nvlinks: int | None  # the # of "NV#"; None for a PCIe path


@dataclass(frozen=True)
class SmiError:
    kind: ErrorKind
    message: str


@dataclass(frozen=True)
class SmiReport:
    """One SMI output. A value the output does not show, or shows as "N/A", is None: nothing is inferred.

    ``truncated`` is True when the output stops short (an exec cut by its timeout keeps partial output): values
    are read only from the part that is complete, so a cut driver version is None, never a shorter number.
    ``kernel_driver`` is the kernel release an AMD tool prints where the amdgpu module has no version of its
    own (the in-tree driver): it is not a driver version and never appears as ``driver_version``.
    """

    vendor: Vendor | None
    driver_version: str | None
    cuda_version: str | None
    rocm_version: str | None
    gpus: tuple[GpuInfo, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    error: SmiError | None = None
    format: Format | None = None
    truncated: bool = False
    kernel_driver: str | None = None
    processes: tuple[GpuProcess, ...] = ()
    nvlinks: tuple[NvLink, ...] = ()
    topology: tuple[TopologyLink, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The report as the JSON object ``aksgpu smi parse`` prints."""
        return {
            "vendor": self.vendor,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "rocm_version": self.rocm_version,
            "gpus": [asdict(gpu) for gpu in self.gpus],
            "mig_devices": [asdict(device) for device in self.mig_devices],
            "error": None if self.error is None else asdict(self.error),
            "format": self.format,
            "truncated": self.truncated,
            "kernel_driver": self.kernel_driver,
            "processes": [asdict(process) for process in self.processes],
            "nvlinks": [asdict(link) for link in self.nvlinks],
            "topology": [asdict(link) for link in self.topology],
        }


@dataclass(frozen=True)
class MigProfile:
    """One row of ``nvidia-smi mig -lgip``: a GPU-instance profile a MIG-enabled GPU offers."""

    gpu_index: int
    profile: str  # "1g.10gb", "1g.10gb+me"
    profile_id: int
    instances_free: int
    instances_total: int
    memory_mib: int  # printed in GiB with two decimals (9.75); 9.75 GiB is the 9984 MiB a 1g.10gb reports
    multiprocessor_count: int


def empty_report(vendor: Vendor | None, format_: Format | None = None) -> SmiReport:
    return SmiReport(vendor=vendor, driver_version=None, cuda_version=None, rocm_version=None, format=format_)
