"""``dcgmi diag`` (NVIDIA DCGM's active diagnostic, levels 1-4) read and graded, as its table prints it and as ``-j``
prints JSON.

The table (DCGM 2.x to 4.x): a ``Metadata`` block (DCGM version, driver, device ids), then one block per category
(``Deployment``, ``Integration``, ``Hardware``, ``Stress``) with one row per test whose result is ``Pass``,
``Fail``, ``Warn`` or ``Skip`` (DCGM 3: ``Pass - All``, ``Fail - GPU: 0``; DCGM 4: the test's result, then one
``GPU<n>: <result>`` row per GPU), and ``Warning`` / ``Info`` rows whose text wraps over the following rows. The
JSON: DCGM 3's ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"gpu_ids"
| "gpu_id", "status", "warnings", "info"}]}]}]}}`` (null entries between tests included, as NVIDIA/DCGM's JsonResult
test shows), DCGM 4's ``"DCGM Diagnostic"`` with ``entity_group`` / ``entity_id`` results (GPUs, and CPUs on DCGM
4), ``warnings`` of ``{"warning", "error_id", ...}``, a ``test_summary`` per test and ``runtime_error`` when nothing
ran (NVIDIA/DCGM ``testing/python3/dcgm_diag_schema.json`` and ``dcgmi/Diag.cpp`` @72fa3fe, DCGM 4.6.0). Text before
the document (a warning line) is skipped.
https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html

Graded as an engineer reads it:
- a test that failed on a GPU is ``unhealthy`` with the test and GPU named;
- a test that failed because DCGM itself could not run it ("There was an internal error during the test", a plugin
  that cannot load, an error instead of a table) is ``inconclusive``: nothing was learned about the GPU
  (NVIDIA/DCGM#254: the pcie plugin's helper was missing from the install);
- a skipped test is ``inconclusive`` (the plugin is not allowed on this SKU, or lacks its CUDA support package:
  NVIDIA/DCGM#55, #139), never a pass, except EUD's (an optional test: its executable is installed apart and supports
  some products only), which is a warning; a level-2 or higher run that tested nothing past Deployment is too;
- ``Warn`` is a warning, not a failure; so is a Deployment failure that only says persistence mode is off (CUDA works
  without it: the first context is slower to create), which DCGM 3 reported as a failure;
- a result that continues on the next row (``Pass - GPUs: 1, 2`` then ``Fail - GPU: 0``) counts for the GPUs it
  names, and the worst of them is the test's (stas00/ml-engineering compute/accelerator/nvidia/debug.md @744d01e);
- an ``Error`` row that no test row came before (DCGM 3 prints the Deployment plugin's errors so: "GPU 3 has
  uncorrectable memory errors and row remappings are pending") is a failure of that category, on the GPU it names;
- a table that does not end in its closing border was cut off: what it passed proves nothing (a failure in it still
  counts); a ``-j`` document that does not parse, or a piece of one (NVIDIA/DCGM#139, #215 as posted), is likewise
  not read whole: its tests are told name by name, DCGM 4's nested per-entity results included;
- the lines around the output are not part of it: ``kubectl``'s ``Defaulted container`` line, a shell prompt, a log
  line's prefix (the ``-j`` document is the whole object that opens on DCGM's root key); a table printed twice (two
  Slurm tasks) says each finding once; DCGM 3's test named "Diagnostic" is a test, not the header row;
- nvvs's or nv-hostengine's debug log (``2023-12-07 17:09:52.612 ERROR [73032:73032] ...``) says what went wrong inside
  DCGM, not what a test found: inconclusive;
- DCGM refuses a GPU in MIG mode ("GPU 0's MIG configuration is incompatible with the diagnostic", NVIDIA/DCGM#94):
  inconclusive, as is any ``Error:`` instead of a table (host engine not running, an empty group, a test name it
  does not know).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aks_gpu.gpu.diag.cuda import cuda_error_grade, cuda_error_of_message
from aks_gpu.gpu.diag.grade import Grade

TOOL = "dcgm-diag"
_HEADER = re.compile(r"^[|+]-{3,}\s+([A-Za-z][A-Za-z ]*?)\s+-+[+|]")
_PER_GPU = re.compile(r"^(GPU|CPU)\s*(\d+)\s*:\s*(Pass|Fail|Warn|Skip|Not Run)\b", re.IGNORECASE)
# DCGM 3's result cell: "Pass - All", "Fail - GPU: 0", "Pass - GPUs: 1, 2, 3", "Skip - All".
_RESULT_CELL = re.compile(r"^(Pass|Fail|Warn|Skip)\s*-\s*(All|GPUs?\s*:?\s*[\d,\s]+)", re.IGNORECASE)
_GPU_LIST = re.compile(r"GPUs?\s*:?\s*([\d,\s]+)")
_NAMED_GPU = re.compile(r"\bGPU\s*(\d+)\b")
_BORDER = re.compile(r"^\+[-=+\s]*\+$")
_TABLE_HEADER = re.compile(r"^\s*\|\s*Diagnostic\s+\|\s*Result\b", re.MULTILINE)
_JSON_KEYS = re.compile(r'"(?:DCGM GPU Diagnostic|DCGM Diagnostic|test_categories|entity_group|test_summary|runtime_error)"\s*:')
# A line of DCGM's own log (nvvs.log, nv-hostengine.log): "2023-12-07 17:09:52.612 ERROR [73032:73032] ...".
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+(?:ERROR|WARN|WARNING|INFO|DEBUG|VERB)\s+\[\d+:\d+\]")
_DOCUMENT_START = re.compile(r'\{\s*"DCGM (?:GPU )?Diagnostic"\s*:')
_JSON_STATUS = re.compile(r'"status"\s*:\s*"([^"]*)"')
_JSON_CATEGORY = re.compile(r'"category"\s*:\s*"([^"]+)"')
_JSON_WARNING = re.compile(r'"(?:warning|error)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_NOT_WHOLE_JSON = "the dcgmi diag -j document is not valid JSON, or not the whole document (cut off or edited): not read whole"
# Lines that say why dcgmi diag printed no table, best first.
_NOT_RUN_LINES = (
    (re.compile(r"MIG configuration is incompatible", re.IGNORECASE), "DCGM cannot test a GPU in MIG mode"),
    (re.compile(r"^Error\b", re.IGNORECASE), ""),
    (re.compile(r"\b(unable to|cannot|could not|failed to)\b", re.IGNORECASE), ""),
)
_INTERNAL = (
    "internal error during the test",
    "cannot load plugins",
    "unable to change to the plugin dir",
    "returned an error",
    "could not exec",
    "couldn't be parsed",
)
_PERSISTENCE = "persistence mode"
# CUDA errors of the diagnostic's own build or environment, not of the GPU, as the CUDA reader grades them (one table,
# cuda.py): DCGM's plugins print the CUDA error they met ("Unable to initialize CUDA library: '<message>'"), and a
# plugin whose CUDA needs a newer driver (35), was not built for the GPU (209, 222), meets a forward-compatibility
# package the GPU does not support (804), names a GPU it was not given (101) or is refused a system call (304) has
# tested nothing. The GPU's own states stay failures: busy or out of memory (46, 2) while DCGM holds the GPUs is the
# GPU's (NVIDIA/DCGM#145: the same GPU fails alone), as are 802, 803, 100 and 999.
_DIAGNOSTICS_OWN_CUDA_ERRORS = frozenset({35, 101, 209, 222, 304, 804})
# The EUD plugin runs NVIDIA's EUD executable where it is installed and the product supports it: its skip says the
# test does not apply here, not that a test that should have run could not
# (https://docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/plugins/eud.html, "Availability").
_OPTIONAL = re.compile(r"^(?:cpu_)?eud(?: test)?$", re.IGNORECASE)
STATUSES = ("pass", "fail", "warn", "skip")


class _NotRunError(Exception):
    """The JSON says the diagnostic could not run (``runtime_error``)."""


@dataclass
class _Test:
    category: str
    name: str
    status: str  # pass | fail | warn | skip | "" (unknown)
    gpus: dict[str, str] = field(default_factory=dict)  # GPU id: its own status
    messages: list[str] = field(default_factory=list)


def read_dcgm_diag(text: str, level: int | None = None) -> Grade:
    """The grade of one ``dcgmi diag`` run (table or JSON). ``level``: the ``-r`` it was run with, when known (a
    level-2 or higher run must have tested something past Deployment)."""
    stripped = text.strip()
    if not stripped:
        return Grade(TOOL, "inconclusive", "dcgmi diag printed nothing")
    table = bool(_TABLE_HEADER.search(stripped))
    document = None if table else _document(stripped)
    cut = ""  # why the tests read are not the whole run
    if document is not None:
        try:
            tests = _json_tests(document)
        except _NotRunError as error:
            return Grade(TOOL, "inconclusive", f"dcgmi diag did not run: {str(error)[:300]}", (str(error)[:300],))
    elif not table and _looks_like_json(stripped):
        return _grade(_json_pieces(stripped[stripped.find("{") :]), level, _NOT_WHOLE_JSON)
    else:
        tests, complete = _table_tests(stripped)
        cut = "" if complete else "the table ends before its closing border (cut off)"
    if not tests:
        return _not_run(stripped, table)
    return _grade(tests, level, cut)


def _not_run(text: str, table: bool = False) -> Grade:
    """No result in the output: the reason DCGM printed instead of a table, or a table cut before its first test."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if table:
        return Grade(TOOL, "inconclusive", "the table ends before its first test result (cut off)")
    logged = [line for line in lines if _LOG_LINE.match(line)]
    if logged:
        # nvvs's or nv-hostengine's debug log: what went wrong inside DCGM, never a test's result.
        error = next((line for line in logged if " ERROR " in line), logged[0])
        return Grade(TOOL, "inconclusive", f"DCGM's debug log holds no test result (it says: {error[:240]})", (error,))
    for pattern, meaning in _NOT_RUN_LINES:
        said = [line for line in lines if pattern.search(line)]
        if said:
            why = f"{meaning}: {said[0]}" if meaning else said[0]
            return Grade(TOOL, "inconclusive", f"dcgmi diag did not run: {why[:300]}", tuple(said[:5]))
    return Grade(TOOL, "inconclusive", f"no dcgmi diag result in the output: {lines[0][:200]}")


def _looks_like_json(text: str) -> bool:
    """Keys only a ``-j`` document (or a piece of one: DCGM 4's ``entity_group`` results) holds."""
    return bool(_JSON_KEYS.search(text))


def _json_pieces(document: str) -> list[_Test]:
    """The tests of a ``-j`` document that does not parse, or of a piece of one (cut off, or edited), as far as they can
    be told: each test's ``"name"`` up to the next one, with the worst status and the warnings written in between
    (DCGM 3's flat results and DCGM 4's nested per-entity ones alike) and the category named last before it. Graded as
    a cut run: what failed counts, nothing else proves anything."""
    names = list(re.finditer(r'"name"\s*:\s*"([^"]+)"', document))
    ends = [name.start() for name in names[1:]] + [len(document)] if names else []
    tests = []
    for name, end in zip(names, ends, strict=True):
        piece = document[name.end() : end]
        statuses = {_status(found) for found in _JSON_STATUS.findall(piece)}
        status = next((s for s in ("fail", "warn", "skip", "pass") if s in statuses), "")
        categories = _JSON_CATEGORY.findall(document, 0, name.start())
        said = list(dict.fromkeys(_JSON_WARNING.findall(piece)))
        tests.append(_Test(categories[-1] if categories else "", name.group(1), status, messages=said))
    return [test for test in tests if test.status]


# ---------------------------------------------------------------- the table


def _status(value: str) -> str:
    """``pass``, ``fail``, ``warn`` or ``skip`` of a result cell (``Pass - All``, ``Fail - GPU: 0``, ``Not Run``: DCGM 4's
    result for a test that did not run, counted as skipped); "" when the cell is no result."""
    word = value.strip().lower()
    if word.startswith("not run"):
        return "skip"
    first = word.split(" ", 1)[0] if word else ""
    return first if first in STATUSES else ""


def _entity(group: str, entity: str) -> str:
    """A GPU by its id (``0``), any other entity by its group too (``CPU 0``: DCGM 4 also tests CPUs)."""
    return entity if group.upper() == "GPU" else f"{group.upper()} {entity}"


def _table_tests(text: str) -> tuple[list[_Test], bool]:
    """The tests of a table, and whether the table was read to its closing border."""
    tests: list[_Test] = []
    category = ""
    current: _Test | None = None
    message_open = False
    last = ""
    chunk = ""  # the last piece of the open message as the table printed it
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("|", "+")):
            last = line
        header = _HEADER.match(line)
        if header:
            category, current, message_open = header.group(1).strip(), None, False
            continue
        if not line.startswith("|"):
            continue
        cells = line.strip("|").split("|")
        if len(cells) < 2:
            continue
        name, value = cells[0].strip(), cells[1].strip()
        if category.lower() == "metadata" or (name, value) == ("Diagnostic", "Result"):
            # The header row; DCGM 3's Hardware test is also named "Diagnostic", with a result in place of "Result".
            continue
        # "Warning", or DCGM 4.6's per-entity "Warning: GPU1" (dcgmi/Diag.cpp @72fa3fe).
        if re.match(r"(Warning|Info|Error)\b", name):
            if current is None and name.startswith("Error"):
                # An error no test row came before: the category's own failure, on the GPU it names.
                current = _Test(category, category or "Error", "fail")
                tests.append(current)
            if current is not None:
                current.messages.append(value)
                message_open = True
                chunk = cells[1][1:]
                if current.name == (category or "Error"):
                    named = _NAMED_GPU.search(value)
                    if named and not current.gpus:
                        current.gpus[named.group(1)] = "fail"
            continue
        if not name:
            per_gpu = _PER_GPU.match(value)
            cell = _RESULT_CELL.match(value)
            if per_gpu and current is not None:
                current.gpus[_entity(per_gpu.group(1), per_gpu.group(2))] = _status(per_gpu.group(3))
                message_open = False
            elif cell and current is not None and not message_open:
                _add_result(current, cell)
            elif message_open and current is not None and value:
                current.messages[-1] = _unwrap(current.messages[-1], chunk, cells[1][1:])
                chunk = cells[1][1:]
            continue
        current = _Test(category, name, _status(value))
        message_open = False
        cell = _RESULT_CELL.match(value)
        if cell:
            _add_result(current, cell)
        tests.append(current)
    return [test for test in tests if test.status], bool(_BORDER.match(last))


_RANK = {"fail": 3, "warn": 2, "skip": 1, "pass": 0, "": -1}


def _add_result(test: _Test, cell: re.Match[str]) -> None:
    """One ``<Result> - All|GPU(s): ...`` cell: its status for the GPUs it names; the worst status is the test's."""
    status = cell.group(1).lower()
    listed = _GPU_LIST.search(cell.group(2))
    for gpu in (g.strip() for g in (listed.group(1).split(",") if listed else ["all"])):
        if gpu:
            test.gpus[gpu] = status
    if _RANK[status] > _RANK[test.status]:
        test.status = status


def _unwrap(before: str, chunk: str, after: str) -> str:
    """The table wraps a message every 45 characters, inside words too ("non-ze" / "ro status"): where the piece
    before filled its 45 characters with no space at its end and the next does not start with one, the two are one
    word (NVIDIA/DCGM dcgmi/Diag.cpp; DCGM 3 and 4 tables alike)."""
    piece = chunk[:45]
    joined = len(piece) == 45 and not piece[-1:].isspace() and not after[:1].isspace()
    return before + ("" if joined else " ") + after.strip()


# ---------------------------------------------------------------- the JSON


_ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")


def _document(text: str) -> dict[str, Any] | None:
    """The ``-j`` document in ``text``: the whole JSON object that opens on DCGM's root key (dcgmi writes it first; else
    the object at the first ``{``), so that the lines around it (a warning before it, ``kubectl``'s or a log's prefix,
    a shell prompt after it, braces in them) are skipped. None where no such document is whole."""
    decoder = json.JSONDecoder()
    first = text.find("{")
    for start in [*(opening.start() for opening in _DOCUMENT_START.finditer(text)), *([first] if first != -1 else [])]:
        try:
            data, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(data, dict) and any(isinstance(data.get(root), dict) for root in _ROOTS):
            return data
    return None


def _json_tests(data: dict[str, Any]) -> list[_Test]:
    root: dict[str, Any] = next(data[key] for key in _ROOTS if isinstance(data.get(key), dict))
    if root.get("runtime_error"):
        # DCGM 4 (-j) reports a diagnostic that could not run so (dcgmi/Diag.cpp HelperDisplayFailureMessage).
        raise _NotRunError(str(root["runtime_error"]))
    tests: list[_Test] = []
    for category in root.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        name = str(category.get("category") or "")
        for entry in category.get("tests") or []:
            if not isinstance(entry, dict):
                continue  # DCGM 3 writes null between tests
            tests.append(_json_test(name, entry))
    return tests


def _json_test(category: str, entry: dict[str, Any]) -> _Test:
    test = _Test(category, str(entry.get("name") or "?"), "")
    statuses: list[str] = []
    for result in entry.get("results") or []:
        if not isinstance(result, dict):
            continue
        status = str(result.get("status") or "").lower()
        status = "skip" if status.startswith("skip") or status == "not run" else status
        statuses.append(status)
        if result.get("entity_id") is not None:
            # DCGM 4: an entity of a group, "GPU" or "CPU" (dcgmlib/src/dcgm_fields.cpp DcgmFieldsGetEntityGroupString).
            test.gpus[_entity(str(result.get("entity_group") or "GPU"), str(result["entity_id"]))] = status
        ids = result.get("gpu_ids", result.get("gpu_id"))
        for gpu in str(ids).split(",") if ids is not None and str(ids) != "" else []:
            test.gpus[gpu.strip()] = status
        _add_messages(test, result)
    summary = entry.get("test_summary")
    if isinstance(summary, dict):
        _add_messages(test, summary)  # DCGM 4 repeats a test's warnings there, and puts test-wide ones only there
    overall = _status(str(summary.get("status") or "")) if isinstance(summary, dict) else ""
    for status in ("fail", "warn", "skip", "pass"):
        if status in statuses or overall == status:
            test.status = status
            break
    return test


def _add_messages(test: _Test, result: dict[str, Any]) -> None:
    """A result's warnings and errors (not its info lines), each once."""
    for key in ("warnings", "errors"):
        for item in result.get(key) or []:
            said = item.get("warning") or item.get("error") or item.get("msg") if isinstance(item, dict) else item
            if said and str(said) not in test.messages:
                test.messages.append(str(said))


# ---------------------------------------------------------------- grading


def _where(test: _Test, status: str) -> str:
    found = sorted((entity for entity, s in test.gpus.items() if s == status), key=lambda e: (len(e), e))
    gpus = [entity for entity in found if entity.isdigit()]
    others = ["all GPUs" if entity == "all" else entity for entity in found if not entity.isdigit()]
    named = ([f"GPU {', '.join(gpus)}"] if gpus else []) + others
    return f"{test.name} ({', '.join(named)})" if named else test.name


def _grade(tests: list[_Test], level: int | None, cut: str = "") -> Grade:
    """``cut``: why the tests read are not the whole run (a table without its closing border, a -j document that is
    not whole); such a run is never healthy."""
    faults: list[str] = []
    not_run: list[str] = []
    warnings: list[str] = []
    evidence: list[str] = []
    for test in tests:
        said = "; ".join(test.messages)
        if test.status == "fail":
            own_cuda_error = _own_cuda_error(said)
            if any(marker in said.lower() for marker in _INTERNAL):
                not_run.append(f"{test.name} could not run (DCGM internal error: {said[:200]})")
            elif own_cuda_error:
                not_run.append(f"{test.name} could not run ({own_cuda_error})")
            elif (
                test.category.lower() == "deployment"
                and test.messages
                and all(_PERSISTENCE in message.lower() for message in test.messages)
            ):
                warnings.append(f"{test.name}: {said[:200]}")
            else:
                faults.append(_where(test, "fail") + _cause(said, test))
            where = f"{test.category}/{test.name}" if test.category else test.name
            evidence.append(f"{where}: fail{': ' + said[:300] if said else ''}")
        elif test.status == "skip" and _OPTIONAL.match(test.name):
            warnings.append(f"{test.name} skipped: an optional test (its executable is installed apart, for some GPUs only)")
        elif test.status == "skip":
            not_run.append(f"{test.name} skipped")
        elif test.status == "warn":
            warnings.append(f"{_where(test, 'warn')}: {said[:200] or 'Warn'}")
    # Each once: a run printed twice (two Slurm tasks, a retried command) says the same thing twice.
    warnings = list(dict.fromkeys(warnings))
    if faults:
        return Grade(TOOL, "unhealthy", ", ".join(dict.fromkeys(faults)), tuple(dict.fromkeys(evidence)), tuple(warnings))
    if cut:
        not_run.append(cut)
    if not_run:
        return Grade(TOOL, "inconclusive", ", ".join(dict.fromkeys(not_run)), tuple(dict.fromkeys(evidence)), tuple(warnings))
    if level is not None and level >= 2 and all(t.category.lower() in ("deployment", "custom") for t in tests):
        return Grade(TOOL, "inconclusive", f"level {level} ran no test past Deployment", (), tuple(warnings))
    if level is not None and level >= 3 and not any(t.category.lower() == "stress" for t in tests):
        # Levels 3 and 4 add the Stress tests (targeted stress and power, memory bandwidth): without them the run is
        # of a lower level than the one asked.
        return Grade(TOOL, "inconclusive", f"level {level} ran no Stress test (a lower level's run)", (), tuple(warnings))
    return Grade(TOOL, "healthy", warnings=tuple(warnings))


def _own_cuda_error(said: str) -> str | None:
    """Why a failed test tested nothing, where its message is a CUDA error of DCGM's own build or environment."""
    number = cuda_error_of_message(said)
    if number not in _DIAGNOSTICS_OWN_CUDA_ERRORS:
        return None
    return cuda_error_grade(number, said).part


def _cause(said: str, test: _Test) -> str:
    """What an engineer reads first in a failure's message: the named cause where DCGM gives one."""
    lower = said.lower()
    if "system not yet initialized" in lower:
        return ": CUDA cannot start (system not yet initialized: the NVSwitch fabric manager is not running)"
    if test.name == test.category and said:
        return f": {said[:200]}"
    return ""
