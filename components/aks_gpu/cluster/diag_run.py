"""One node's active diagnostic on a live cluster: create its diagnostic pod, wait for its init containers, read their
logs, exec ``dcgmi diag`` in its holder container, delete the pod; and the Node patch a verdict calls for.

The pod and the patch are built elsewhere (``aks_gpu.validation.diagnostics``, pure); this module only talks to the API
server, every wait bounded: the pod must be scheduled and through its init containers within ``schedule_wait_s``
(a node whose GPUs are held by other work never schedules it: that is reported, not waited on for ever), each log read
and the exec have their own timeout, and the pod is deleted whatever happened. What went wrong is a note of that
tool's output, never an exception, so one node's trouble never stops the others'.

RBAC the caller needs: create, get, delete pods and pods/log, create pods/exec in ``gpu-resources``; get and patch
nodes (``--quarantine``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as kube_client

from aks_gpu.cluster.pod_exec import MAX_EXEC_OUTPUT_BYTES, ExecJob, run_exec
from aks_gpu.cluster.retries import describe

# A Node merge patch (RFC 7386): a list in it replaces the Node's list whole, so the taints given are the taints kept.
MERGE_PATCH = "application/merge-patch+json"
API_TIMEOUT_S = 30.0


@dataclass
class DiagRun:
    """What the tools printed, by tool name (``None``: no output), and why a tool gave none."""

    outputs: dict[str, str | None] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


def _plain(api: kube_client.ApiClient, obj: Any) -> dict[str, Any]:
    plain: Any = api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return plain if isinstance(plain, dict) else {}


def _delete_pod(core: kube_client.CoreV1Api, namespace: str, name: str, wait_s: float, sleep: Callable[[float], None]) -> None:
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _request_timeout=API_TIMEOUT_S)
    except kube_client.ApiException as error:
        if error.status == 404:
            return
        raise
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_pod(name, namespace, _request_timeout=API_TIMEOUT_S)
        except kube_client.ApiException as error:
            if error.status == 404:
                return
            raise
        sleep(0.5)


def _started(pod: Mapping[str, Any], init_containers: Sequence[str]) -> tuple[bool, str | None]:
    """Whether the init containers are done (so their logs are whole) and the holder runs; the phase that ends the
    wait otherwise (Failed, Succeeded), as a note."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        return True, f"the diagnostic pod ended ({phase}: {status.get('reason') or status.get('message') or 'no reason given'})"
    done = {
        s.get("name") for s in status.get("initContainerStatuses") or [] if (s.get("state") or {}).get("terminated") is not None
    }
    return phase == "Running" and set(init_containers) <= done, None


def _pending_reason(pod: Mapping[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {condition.get('message') or condition.get('reason') or 'no reason given'}"
    return f"phase {(pod.get('status') or {}).get('phase') or 'unknown'}"


def run_diagnostic(
    core: kube_client.CoreV1Api,
    manifest: Mapping[str, Any],
    exec_tool: str,
    exec_command: Sequence[str],
    *,
    schedule_wait_s: float,
    exec_timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> DiagRun:
    """Run the diagnostic pod ``manifest`` (a Pod whose init containers are tools and whose first container is the
    holder to exec ``exec_command`` in, reported as ``exec_tool``), and return every tool's output."""
    metadata = manifest["metadata"]
    name, namespace = str(metadata["name"]), str(metadata["namespace"])
    spec = manifest["spec"]
    init_containers = [str(c["name"]) for c in spec.get("initContainers") or []]
    holder = str(spec["containers"][0]["name"])
    run = DiagRun()
    api = core.api_client
    try:
        # A pod of an earlier run that was cut short would hold the node's GPUs: replace it.
        _delete_pod(core, namespace, name, schedule_wait_s, sleep)
        # The client sends a plain dict as it sends a V1Pod (its stubs name only the model).
        core.create_namespaced_pod(namespace, dict(manifest), _request_timeout=API_TIMEOUT_S)  # type: ignore[arg-type]
        deadline = time.monotonic() + schedule_wait_s
        pod: dict[str, Any] = {}
        ended: str | None = None
        while True:
            pod = _plain(api, core.read_namespaced_pod(name, namespace, _request_timeout=API_TIMEOUT_S))
            ready, ended = _started(pod, init_containers)
            if ready or time.monotonic() >= deadline:
                break
            sleep(1.0)
        if not ready:
            why = f"the diagnostic pod did not start within {schedule_wait_s:g} s ({_pending_reason(pod)})"
            for tool in (*init_containers, exec_tool):
                run.outputs[tool], run.notes[tool] = None, why
            return run
        for tool in init_containers:
            try:
                text = core.read_namespaced_pod_log(
                    name, namespace, container=tool, limit_bytes=MAX_EXEC_OUTPUT_BYTES, _request_timeout=API_TIMEOUT_S
                )
                run.outputs[tool] = str(text)
            except Exception as error:  # noqa: BLE001 - one tool's log is data, not a crash
                run.outputs[tool], run.notes[tool] = None, f"its log could not be read: {describe(error)}"
        if ended:
            run.outputs[exec_tool], run.notes[exec_tool] = None, ended
            return run
        try:
            result = run_exec(
                core,
                ExecJob(
                    str(spec["nodeSelector"].get("kubernetes.io/hostname", "")), namespace, name, holder, tuple(exec_command)
                ),
                exec_timeout_s,
            )
            run.outputs[exec_tool] = result.output
            if result.note:
                run.notes[exec_tool] = result.note
        except Exception as error:  # noqa: BLE001
            run.outputs[exec_tool], run.notes[exec_tool] = None, f"exec failed: {describe(error)}"
        return run
    except Exception as error:  # noqa: BLE001
        why = f"the diagnostic pod could not be run: {describe(error)}"
        for tool in (*init_containers, exec_tool):
            if tool not in run.outputs:
                run.outputs[tool], run.notes[tool] = None, why
        return run
    finally:
        # Whatever happened, the pod goes (its own deadline would end it anyway).
        with contextlib.suppress(Exception):
            _delete_pod(core, namespace, name, 0.0, sleep)


def read_node(core: kube_client.CoreV1Api, name: str) -> dict[str, Any]:
    return _plain(core.api_client, core.read_node(name, _request_timeout=API_TIMEOUT_S))


def patch_node(core: kube_client.CoreV1Api, name: str, patch: Mapping[str, Any]) -> None:
    core.patch_node(name, dict(patch), _content_type=MERGE_PATCH, _request_timeout=API_TIMEOUT_S)


def list_nodes(core: kube_client.CoreV1Api, label_selector: str) -> list[dict[str, Any]]:
    found = core.list_node(label_selector=label_selector, _request_timeout=API_TIMEOUT_S)
    return [_plain(core.api_client, item) for item in found.items or []]
