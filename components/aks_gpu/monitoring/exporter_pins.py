"""The pinned GPU metrics exporters and the metrics they are made to publish (``data/gpu_exporters.yaml``). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from aks_gpu.config.models import MonitoringConfig
from aks_gpu.data_files import load_yaml

PINS_FILE = Path(__file__).resolve().parents[1] / "data" / "gpu_exporters.yaml"

CounterType = Literal["gauge", "counter", "label"]


@dataclass(frozen=True)
class DcgmCounter:
    """One line of the DCGM exporter's counters file: published as a metric named ``field`` (labels: ``label``)."""

    field: str
    type: CounterType
    help: str
    origin: Literal["default", "added"]
    why: str | None = None

    def csv_line(self) -> str:
        # The exporter's format: "DCGM FIELD, Prometheus metric type, help message" (commas separate the columns,
        # so none may appear in the help).
        return f"{self.field}, {self.type}, {self.help}"


@dataclass(frozen=True)
class AmdField:
    field: str
    metric: str


@dataclass(frozen=True)
class ExporterPins:
    dcgm_image: str
    dcgm_port: int
    dcgm_health_path: str
    dcgm_counters: tuple[DcgmCounter, ...]
    amd_image: str
    amd_port: int
    amd_fields: tuple[AmdField, ...]

    @property
    def dcgm_metrics(self) -> frozenset[str]:
        """The metric names the DCGM exporter publishes with our counters file (label-type fields are labels)."""
        return frozenset(c.field for c in self.dcgm_counters if c.type != "label")

    @property
    def amd_metrics(self) -> frozenset[str]:
        return frozenset(f.metric for f in self.amd_fields)


@lru_cache(maxsize=1)
def default_exporter_pins() -> ExporterPins:
    raw: dict[str, Any] = load_yaml(PINS_FILE)
    dcgm, amd = raw["dcgm_exporter"], raw["amd_device_metrics_exporter"]
    counters = tuple(DcgmCounter(**entry) for entry in dcgm["counters"])
    for counter in counters:
        if "," in counter.help:
            raise ValueError(f"{PINS_FILE.name}: {counter.field}: a help text cannot hold a comma (CSV column)")
        if counter.origin == "added" and not counter.why:
            raise ValueError(f"{PINS_FILE.name}: {counter.field}: an added counter says why")
    return ExporterPins(
        dcgm_image=dcgm["image"],
        dcgm_port=int(dcgm["port"]),
        dcgm_health_path=dcgm["health_path"],
        dcgm_counters=counters,
        amd_image=amd["image"],
        amd_port=int(amd["port"]),
        amd_fields=tuple(AmdField(**entry) for entry in amd["fields"]),
    )


def resolve_exporter_pins(config: MonitoringConfig) -> ExporterPins:
    """The pins with the stack's image overrides applied (metric lists are never overridden)."""
    pins = default_exporter_pins()
    return ExporterPins(
        dcgm_image=config.dcgm_exporter_image or pins.dcgm_image,
        dcgm_port=pins.dcgm_port,
        dcgm_health_path=pins.dcgm_health_path,
        dcgm_counters=pins.dcgm_counters,
        amd_image=config.amd_exporter_image or pins.amd_image,
        amd_port=pins.amd_port,
        amd_fields=pins.amd_fields,
    )


def dcgm_counters_csv(counters: tuple[DcgmCounter, ...]) -> str:
    """The counters file: comment lines start with '#' (the exporter's CSV reader skips them)."""
    lines = ["# aks-gpu: the exporter's default counters plus the ones the alert rules need (aks_gpu/data/gpu_exporters.yaml)"]
    lines += [c.csv_line() for c in counters]
    return "\n".join(lines) + "\n"
