"""The seam between the vendor diagnostics and the remediation engine's repair, on the prod stack's local cluster
(the real API server, kwok as the kubelet): on a node the engine holds (its quarantine taint `=fault`, cordoned, and
fault-quarantine's `quarantineHealthEvent` annotation), a passing `aksgpu validate --deep --quarantine` records the
node's current boot in `aks-gpu/diagnostics-passed-boot-id` and leaves the engine's quarantine alone; a failing one
takes the record away. The gate policy NVSentinel evaluates on that node (tests/monitoring/test_repair.py) then
releases or holds it. NVSentinel itself does not run here (its images need a container runtime)."""

from __future__ import annotations

import json

from aks_gpu.naming import DIAGNOSTICS_PASSED_ANNOTATION, QUARANTINE_TAINT_KEY
from tests.e2e.conftest import LocalCluster
from tests.e2e.test_diagnostics import DCGM_FAIL, DCGM_PASS, Served, diagnose, served

__all__ = ["served"]  # the module's fixture: the recorded outputs kwok serves

BOOT = "6b1e2c1a-0000-4000-8000-00000000e2e2"


def annotation(prod: LocalCluster, node: str) -> str | None:
    value = prod.json("get", "node", node)["metadata"].get("annotations", {}).get(DIAGNOSTICS_PASSED_ANNOTATION)
    return None if value is None else str(value)


def test_a_pass_records_the_boot_for_the_engine_and_a_failure_takes_it_away(prod: LocalCluster, served: Served) -> None:
    node = served.healthy
    status = json.dumps({"status": {"nodeInfo": {"bootID": BOOT}}})
    boot = prod.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", status)
    assert boot.returncode == 0, boot.stderr
    held = prod.kubectl("taint", "node", node, f"{QUARANTINE_TAINT_KEY}=fault:NoSchedule", "--overwrite")
    assert held.returncode == 0, held.stderr
    prod.kubectl("cordon", node)
    prod.kubectl("annotate", "node", node, "quarantineHealthEvent={}", "--overwrite")
    try:
        assert prod.json("get", "node", node)["status"]["nodeInfo"]["bootID"] == BOOT
        code, nodes, stderr = diagnose(prod, node)
        assert code == 0, stderr[-2000:]
        assert nodes[node]["action"] == "proven", nodes[node]
        assert annotation(prod, node) == BOOT
        # The engine's quarantine stays: only the engine lifts it, once its gate sees the record.
        item = prod.json("get", "node", node)
        assert [t.get("value") for t in item["spec"]["taints"] if t["key"] == QUARANTINE_TAINT_KEY] == ["fault"]
        assert item["spec"]["unschedulable"] is True
        # A failing diagnostic takes the record away; the engine's taint keeps holding the node (the API server takes
        # no second taint of the same key and effect), and it stays cordoned.
        served.dcgm_file[node].write_text(DCGM_FAIL.read_text())
        code, nodes, stderr = diagnose(prod, node)
        assert code == 1 and nodes[node]["action"] == "none", stderr[-2000:]
        assert annotation(prod, node) is None
        item = prod.json("get", "node", node)
        assert [t.get("value") for t in item["spec"]["taints"] if t["key"] == QUARANTINE_TAINT_KEY] == ["fault"]
        assert item["spec"]["unschedulable"] is True
    finally:
        served.dcgm_file[node].write_text(DCGM_PASS.read_text())
        prod.kubectl("annotate", "node", node, "quarantineHealthEvent-", f"{DIAGNOSTICS_PASSED_ANNOTATION}-")
        prod.kubectl("taint", "node", node, f"{QUARANTINE_TAINT_KEY}-")
        prod.kubectl("uncordon", node)
