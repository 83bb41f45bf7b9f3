"""Where the advice's series come from (the I/O edge): a folder of ``query_range`` responses, one ``<metric>.json``
each, or the same queries against a live Prometheus (or an Azure Monitor workspace's query endpoint).

The live client is read-only (GET /api/v1/query_range) and guards its token: only https (or http to this machine, for a
local Prometheus), TLS verified with the system's roots, a redirect followed only to the same scheme, host and port
(one elsewhere is refused before anything is sent there), each response read to a bound, and the token never in an
error message (``aks_gpu.redaction``).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aks_gpu.addresses import is_loopback_host
from aks_gpu.advise.metrics import ALL_METRICS, EXPORTERS, KUEUE_METRICS, LABELS_ONLY, ExporterMetrics
from aks_gpu.advise.series import AdviceInputError, Series, parse_query_range
from aks_gpu.input_files import InputFileError, read_chunks, size_text
from aks_gpu.redaction import redact_known

# A week of 1,000 GPUs at a 5-minute step is about 45 MiB of query_range JSON per metric; a bound ten times that.
MAX_RESPONSE_BYTES = 512 << 20
# The token for --prometheus, where one is needed: this variable first, else (for an Azure Monitor workspace) the
# Azure CLI's login.
TOKEN_ENV = "AKSGPU_PROMETHEUS_TOKEN"
# Azure Monitor workspaces' query endpoints (https://<workspace>.<region>.prometheus.monitor.azure.com) take an Entra
# ID token for this resource: https://learn.microsoft.com/azure/azure-monitor/metrics/prometheus-api-promql
AZURE_MONITOR_HOST_SUFFIX = ".prometheus.monitor.azure.com"
AZURE_MONITOR_RESOURCE = "https://prometheus.monitor.azure.com"
# Prometheus refuses a range query of more than 11,000 points per series (web/api/v1/api.go, "exceeded maximum
# resolution of 11,000 points per timeseries"): the step grows for long windows.
MAX_POINTS = 11_000
DEFAULT_STEP_SECONDS = 300
MAX_REDIRECTS = 3
_SINCE = re.compile(r"(?P<count>[1-9]\d{0,4})(?P<unit>[mhdw])")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_seconds(text: str) -> int:
    """``7d`` -> 604800; ``ValueError`` for anything but a count and one of m, h, d, w."""
    matched = _SINCE.fullmatch(text.strip())
    if not matched:
        raise ValueError(f"--since {text!r}: give a count and a unit, m, h, d or w (7d, 36h)")
    return int(matched["count"]) * _UNIT_SECONDS[matched["unit"]]


# ---------------------------------------------------------------- a folder of responses


def read_metrics_dir(folder: Path, limit: int = MAX_RESPONSE_BYTES) -> dict[str, list[Series]]:
    """The series of each ``<metric>.json`` in ``folder`` the advice reads (an exporter's memory metric and the best
    activity metric present; kube_pod_owner and kube_node_labels where they are there)."""
    if not folder.is_dir():
        raise AdviceInputError(f"--metrics {folder}: not a folder")
    present = {name for name in (*ALL_METRICS, *LABELS_ONLY) if (folder / f"{name}.json").exists()}
    if not present & set(ALL_METRICS):
        raise AdviceInputError(
            f"--metrics {folder}: no <metric>.json the advice reads; expected {', '.join(f'{n}.json' for n in ALL_METRICS)}"
        )
    wanted: list[str] = []
    for exporter in EXPORTERS:
        if exporter.memory_used in present:
            wanted.append(exporter.memory_used)
        # The first activity metric present; the coarser ones are not read at all.
        wanted += next(([name] for name, _ in exporter.activity if name in present), [])
    wanted += [name for name in LABELS_ONLY if name in present]
    return {name: _read_metric_file(folder, name, limit) for name in wanted}


def _read_metric_file(folder: Path, name: str, limit: int) -> list[Series]:
    path = folder / f"{name}.json"
    # A piece at a time: a week of 1,000 GPUs is 45 MiB a metric, never held whole (advise.series).
    try:
        return parse_query_range(name, read_chunks(path, limit), labels_only=name in LABELS_ONLY, again=read_chunks(path, limit))
    except InputFileError as error:
        raise AdviceInputError(f"{path}: {error}") from None


def read_queue_metrics_dir(folder: Path, limit: int = MAX_RESPONSE_BYTES) -> dict[str, list[Series]]:
    """Kueue's ClusterQueue gauges (``<metric>.json`` of ``KUEUE_METRICS``) where the folder has them; none is no error."""
    return {name: _read_metric_file(folder, name, limit) for name in KUEUE_METRICS if (folder / f"{name}.json").exists()}


# ---------------------------------------------------------------- a live Prometheus


class PrometheusError(Exception):
    """The live query failed; the message is safe to print (no token in it)."""


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host.lower(), self.port)


def parse_endpoint(url: str) -> Endpoint:
    """The Prometheus base URL; ``PrometheusError`` unless https, or http to this machine."""
    parsed = urllib.parse.urlsplit(url.strip())
    host = parsed.hostname or ""
    if parsed.username or parsed.password:
        raise PrometheusError("--prometheus: put no user or password in the URL; the token goes in " + TOKEN_ENV)
    if parsed.scheme == "http" and not is_loopback_host(host):
        raise PrometheusError(f"--prometheus {host or url!r}: http only to this machine (127.0.0.1); use https")
    if parsed.scheme not in ("https", "http") or not host:
        raise PrometheusError("--prometheus: give an https:// URL (or http://127.0.0.1:PORT for a local Prometheus)")
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        raise PrometheusError("--prometheus: the URL's port is not a number") from None
    return Endpoint(parsed.scheme, host, port, parsed.path.rstrip("/"))


def token_for(endpoint: Endpoint, environ: Mapping[str, str] | None = None, az: Callable[[], str] | None = None) -> str | None:
    """The bearer token to send: ``AKSGPU_PROMETHEUS_TOKEN``, else for an Azure Monitor workspace the Azure CLI's
    (``az account get-access-token``), else none (a Prometheus without authentication)."""
    env = os.environ if environ is None else environ
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV].strip()
    if endpoint.host.lower().endswith(AZURE_MONITOR_HOST_SUFFIX):
        return (az or azure_cli_token)()
    return None


def azure_cli_token(timeout: float = 60.0) -> str:
    executable = shutil.which("az")
    if executable is None:
        raise PrometheusError(
            f"an Azure Monitor workspace needs an Entra ID token: set {TOKEN_ENV} or install the Azure CLI and az login"
        )
    try:
        done = subprocess.run(
            [
                executable,
                "account",
                "get-access-token",
                "--resource",
                AZURE_MONITOR_RESOURCE,
                "--query",
                "accessToken",
                "-o",
                "tsv",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PrometheusError(f"az account get-access-token did not answer: {type(error).__name__}") from None
    token = done.stdout.strip()
    if done.returncode != 0 or not token:
        raise PrometheusError("az account get-access-token failed (az login first, or set " + TOKEN_ENV + ")")
    return token


class PrometheusClient:
    def __init__(
        self,
        endpoint: Endpoint,
        token: str | None,
        *,
        timeout: float = 60.0,
        limit: int = MAX_RESPONSE_BYTES,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._token = token
        self.timeout = timeout
        self.limit = limit
        # Verified TLS: the system's roots, host names checked (create_default_context's defaults).
        self._context = context or ssl.create_default_context()

    def redact(self, text: str) -> str:
        return redact_known(text, [self._token] if self._token else [])

    def query_range(self, query: str, start: float, end: float, step: int) -> bytes:
        params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)})
        try:
            return self._get(f"{self.endpoint.base_path}/api/v1/query_range?{params}")
        except PrometheusError as error:
            raise PrometheusError(self.redact(str(error))) from None
        except (OSError, http.client.HTTPException) as error:
            raise PrometheusError(self.redact(f"{self.endpoint.host}: {type(error).__name__}: {error}")) from None

    def _connection(self, endpoint: Endpoint) -> http.client.HTTPConnection:
        if endpoint.scheme == "https":
            return http.client.HTTPSConnection(endpoint.host, endpoint.port, timeout=self.timeout, context=self._context)
        return http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=self.timeout)

    def _get(self, target: str) -> bytes:
        endpoint = self.endpoint
        for _ in range(MAX_REDIRECTS + 1):
            connection = self._connection(endpoint)
            try:
                headers = {"Accept": "application/json", "User-Agent": "aksgpu-advise"}
                if self._token:
                    headers["Authorization"] = f"Bearer {self._token}"
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
                if response.status in (301, 302, 303, 307, 308):
                    location = response.getheader("Location") or ""
                    moved = urllib.parse.urlsplit(
                        urllib.parse.urljoin(f"{endpoint.scheme}://{endpoint.host}:{endpoint.port}{target}", location)
                    )
                    try:
                        next_port = moved.port or (443 if moved.scheme == "https" else 80)
                    except ValueError:
                        next_port = -1
                    if (moved.scheme, (moved.hostname or "").lower(), next_port) != endpoint.origin:
                        raise PrometheusError(
                            f"{endpoint.host}: redirected to another host ({moved.hostname or '?'}): "
                            "not followed, the token not sent there"
                        )
                    target = moved.path + (f"?{moved.query}" if moved.query else "")
                    continue
                length = response.getheader("Content-Length")
                if length and length.isdigit() and int(length) > self.limit:
                    raise PrometheusError(
                        f"{endpoint.host}: the response is {size_text(int(length))}, over the {size_text(self.limit)} limit"
                    )
                body = response.read(self.limit + 1)
                if len(body) > self.limit:
                    raise PrometheusError(f"{endpoint.host}: the response is over the {size_text(self.limit)} limit")
                if response.status != 200:
                    said = _error_of(body)
                    raise PrometheusError(f"{endpoint.host}: HTTP {response.status}{': ' + said if said else ''}")
                return body
            finally:
                connection.close()
        raise PrometheusError(f"{endpoint.host}: more than {MAX_REDIRECTS} redirects")


def _error_of(body: bytes) -> str:
    """Prometheus's own error text from an error response, cut short."""
    try:
        document = json.loads(body[:65536])
    except ValueError:
        return ""
    said = document.get("error") if isinstance(document, dict) else None
    return str(said)[:300] if said else ""


def read_live(
    client: PrometheusClient, since: int, now: float | None = None, metrics: Sequence[str] = (*ALL_METRICS, *LABELS_ONLY)
) -> dict[str, list[Series]]:
    """Each metric's series over the last ``since`` seconds, queried as its bare name (every label kept)."""
    end = time.time() if now is None else now
    start = end - since
    step = max(DEFAULT_STEP_SECONDS, math.ceil(since / MAX_POINTS))
    series: dict[str, list[Series]] = {}
    for name in metrics:
        series[name] = parse_query_range(name, client.query_range(name, start, end, step), labels_only=name in LABELS_ONLY)
    return series


SUMMARY_STEP_SECONDS = 86_400


@cache
def summarised() -> tuple[ExporterMetrics, ...]:
    """The exporters read through the recording rules `aksgpu rules` prints (monitoring/rules.py, the aks-gpu-advice
    group): one sample a day per series, at a day's step."""
    # Imported here: the rules' module loads the stack model, half a second a folder of responses does not need.
    from aks_gpu.monitoring.rules import advice_record_name

    return tuple(exporter.summarised(advice_record_name) for exporter in EXPORTERS)


def read_live_summaries(client: PrometheusClient, since: int, now: float | None = None) -> dict[str, list[Series]]:
    """The recorded daily summaries over the last ``since`` seconds (with kube_pod_owner raw); every series empty where
    the Prometheus does not run the recording rules."""
    end = time.time() if now is None else now
    names = [name for exporter in summarised() for name in exporter.metric_names]
    series = {
        name: parse_query_range(name, client.query_range(name, end - since + SUMMARY_STEP_SECONDS, end, SUMMARY_STEP_SECONDS))
        for name in names
    }
    if any(one.values for found in series.values() for one in found):
        for name in LABELS_ONLY:
            response = client.query_range(name, end - since, end, SUMMARY_STEP_SECONDS)
            series[name] = parse_query_range(name, response, labels_only=True)
    return series
