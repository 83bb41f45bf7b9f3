"""Running a Pulumi program under the mock engine: a whole stack's ``__main__.py`` or any function that registers
resources, in a fresh context and event loop, into a ``PlanResult``."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import gc
import json
import logging
import runpy
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import Mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from aks_gpu.config.encrypted import holds_secure_form
from aks_gpu.mock_engine.api_versions import api_version_warnings, installed_api_version
from aks_gpu.mock_engine.mocks import PlanMocks
from aks_gpu.mock_engine.monitors import HookRunningMonitor, RecordingMonitor
from aks_gpu.mock_engine.records import SECRET, UNKNOWN, PlanResult, mask_secrets
from aks_gpu.mock_engine.references import UndeclaredAzureReferenceError, undeclared_azure_references
from aks_gpu.naming import PACKAGE_NAME


class _CollectingHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


def _config_values(raw: Mapping[str, Any]) -> dict[str, str]:
    """Pulumi hands config to programs as strings; structured values travel as JSON text."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in raw.items()}


async def _resolve_export(value: Any) -> Any:
    output = pulumi.Output.from_input(value)
    if await output.is_secret():
        return SECRET
    if not await output.is_known():
        return UNKNOWN
    resolved = await output.future()
    return mask_secrets(resolved)


class DuplicateUrnError(RuntimeError):
    """Two resources registered under one URN: Pulumi would refuse the program at deploy time."""


def run_program(
    project_dir: Path,
    stack: str,
    raw_config: Mapping[str, Any],
    project: str = PACKAGE_NAME,
    mocks: Mocks | None = None,
    *,
    preview: bool = False,
    run_hooks: bool = False,
) -> PlanResult:
    """Run ``project_dir/__main__.py`` for ``stack`` under the mock engine and return what it registered.
    ``preview=True`` runs it as ``pulumi preview`` would (see ``run_mocked``); with ``run_hooks`` the resource
    hooks run as the engine runs them (``HookRunningMonitor``)."""
    main = project_dir / "__main__.py"
    added_path = str(project_dir.resolve())

    def program() -> None:
        sys.path.insert(0, added_path)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            sys.path.remove(added_path)

    # A whole stack program: everything Azure-side it names must be created or looked up in it (a component run on
    # its own gets its cluster from its caller, so run_mocked checks only when asked).
    return run_mocked(
        program, stack, raw_config, project, mocks, preview=preview, run_hooks=run_hooks, check_references=True
    )


def run_mocked(
    program: Callable[[], object],
    stack: str,
    raw_config: Mapping[str, Any] | None = None,
    project: str = PACKAGE_NAME,
    mocks: Mocks | None = None,
    *,
    preview: bool = False,
    run_hooks: bool = False,
    check_references: bool = False,
) -> PlanResult:
    """Run ``program`` (which registers resources) under fresh mocks (``PlanMocks`` unless given) and a fresh
    event loop. ``preview=True`` is a dry run, as ``pulumi preview``: outputs the providers compute are unknown
    (recorded as ``[unknown]``) and invokes that depend on them are not made. With ``run_hooks``, resource hooks
    run too (not in a preview, unless registered with on_dry_run) and a failed one raises ``HookFailedError``. With
    ``check_references`` an Azure scope the program neither creates nor looks up raises
    ``UndeclaredAzureReferenceError`` (``undeclared_azure_references``)."""
    answers = mocks or PlanMocks(preview=preview)
    monitor = HookRunningMonitor(answers) if run_hooks else RecordingMonitor(answers)
    warnings: list[str] = []
    logger = logging.getLogger(f"{PACKAGE_NAME}.plan.{stack}")
    logger.propagate = False
    logger.handlers = [_CollectingHandler(warnings)]
    thresholds = gc.get_threshold()
    # A plan's Output graph is hundreds of thousands of small objects; at the default generation-0 threshold
    # the cyclic GC walks it again and again: half the CPU time of a large plan, and growing faster than linear.
    gc.set_threshold(100_000, 20, 100)
    try:
        # A fresh, empty context: the runtime keeps its settings, root stack and config in context variables,
        # so each run starts clean and leaves nothing behind for the next.
        return contextvars.Context().run(
            _run_in_context, program, stack, raw_config or {}, project, monitor, logger, warnings, preview, check_references
        )
    finally:
        gc.set_threshold(*thresholds)


def _run_in_context(
    program: Callable[[], object],
    stack: str,
    raw_config: Mapping[str, Any],
    project: str,
    monitor: RecordingMonitor,
    logger: logging.Logger,
    warnings: list[str],
    preview: bool,
    check_references: bool = False,
) -> PlanResult:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        # The runtime's set of pending outputs outlives a run; a run that failed midway would leave outputs of
        # its closed event loop there for the next run to await.
        pulumi.runtime.settings.SETTINGS.outputs = set()
        # A value still encrypted (`secure:`, a stack file read offline) makes its key secret, as Pulumi makes it.
        secret = [key for key, value in raw_config.items() if holds_secure_form(value)]
        pulumi.runtime.set_all_config(_config_values(raw_config), secret)
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=logger)
        _sync_await(run_pulumi_func(lambda: _discard(program())))
        root = pulumi.runtime.settings.get_root_resource()
        exported: dict[str, Any] = dict(getattr(root, "outputs", {}) or {})
        outputs = {name: _sync_await(_resolve_export(value)) for name, value in sorted(exported.items())}
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    if monitor.duplicates:
        raise DuplicateUrnError("registered twice: " + ", ".join(sorted(monitor.duplicates)))
    records = sorted(
        (dataclasses.replace(r, api_version=installed_api_version(r.type)) if r.custom else r for r in monitor.records),
        key=lambda r: r.urn,
    )
    warnings += api_version_warnings({r.type for r in records if r.custom})
    undeclared = undeclared_azure_references(records, monitor.invokes, monitor.azure_inputs) if check_references else []
    if undeclared:
        raise UndeclaredAzureReferenceError(
            "the program refers to Azure resources it neither creates nor looks up (a first deploy would fail "
            "with NotFound): " + "; ".join(undeclared)
        )
    result = PlanResult(project=project, stack=stack, resources=records, outputs=outputs, warnings=warnings)
    if isinstance(monitor, HookRunningMonitor):
        monitor.finish(result)
    return result


def _discard(_: object) -> None:
    return None
