"""``aksgpu catalog``: the GPU VM sizes and MIG profiles the config rules check against."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.markup import escape

from aks_gpu.catalog import load_catalog
from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import EXIT_OK, out

COLUMNS = ("vm size", "series", "cpu", "gpus", "memory/gpu", "MIG profiles", "local NVMe", "caveats")
# The narrowest the caveats column may be before the sizes are laid out as a list instead.
CAVEAT_MIN_WIDTH = 40


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help=COMMANDS["catalog"],
        description="Print the GPU VM sizes the config rules check a stack against: GPUs per VM, GPU memory, the MIG "
        "profiles as AKS (MIG3g) and NVIDIA (3g.40gb) name them, local NVMe and caveats, each with its source "
        "(components/aks_gpu/data/gpu_catalog.yaml).",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of sizes on stdout, nothing else")
    tables.add_wide_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tables.apply_wide(args)
    catalog = load_catalog()
    if args.json:
        rows = [
            {
                "vmSize": size.name,
                "series": size.series,
                "vendor": size.vendor,
                "gpuModel": size.gpu.key,
                "gpuCount": size.gpu_count,
                "cpuArchitecture": size.cpu_architecture,
                "memoryGiBPerGpu": size.gpu.memory_gib,
                "migProfiles": {name: m.profile for name, m in size.gpu.mig.items()},
                "nvme": {"disks": size.nvme.disks, "capacityGiB": size.nvme.capacity_gib} if size.nvme else None,
                "caveats": list(size.caveats),
                "source": size.source,
            }
            for size in catalog.vm_sizes.values()
        ]
        out.print_json(json.dumps(rows))
        return EXIT_OK
    cells_of: list[tuple[str, ...]] = []
    entries: list[tuple[str, ...]] = []
    for size in catalog.vm_sizes.values():
        # one MIG profile a line: a profile is a name people copy, never split between two lines
        mig = "\n".join(f"{name}={m.profile}x{m.max_instances}" for name, m in size.gpu.mig.items())
        nvme = f"{size.nvme.disks} disks, {size.nvme.capacity_gib} GiB" if size.nvme else ""
        cells = (
            size.name,
            size.series,
            size.cpu_architecture,
            f"{size.gpu_count} x {size.gpu.product}",
            f"{size.gpu.memory_gib} GiB",
            mig,
            nvme,
        )
        # The catalog's text is data too: a caveat such as "[preview]" must show, not vanish as markup.
        caveats = "\n".join(escape(caveat) for caveat in size.caveats)
        cells_of.append((*(escape(cell) for cell in cells), caveats))
        # the list: a size's series, CPU and GPUs on one line under its name, then what it has besides
        gpus = f"{size.series} series, {size.cpu_architecture}: {cells[3]}, {cells[4]} a GPU"
        entries.append((escape(size.name), escape(gpus), escape(mig), escape(nvme), caveats))
    if tables.print_table(
        out,
        "AKS GPU VM sizes",
        COLUMNS,
        cells_of,
        keep=("vm size", "series", "cpu", "memory/gpu", "MIG profiles"),
        flexible={"gpus": 16, "local NVMe": 9, "caveats": CAVEAT_MIN_WIDTH},
        missing="-",
        bare=("gpus",),
        listed=(("vm size", "gpus", "MIG profiles", "local NVMe", "caveats"), entries),
    ):
        out.print(f"[dim]{tables.list_note(json=True)}[/]")
    return EXIT_OK
