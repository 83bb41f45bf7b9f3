"""``aksgpu advise --prometheus URL`` against a Prometheus on 127.0.0.1 that the test starts (and stops): the token
reaches only the URL given, a redirect elsewhere is refused before anything is sent there, an oversized response is
refused, and the token never shows in output or errors."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aks_gpu.advise.sources import (
    TOKEN_ENV,
    Endpoint,
    PrometheusClient,
    PrometheusError,
    parse_endpoint,
    read_live,
    token_for,
)
from aks_gpu.cli import main
from aks_gpu.monitoring.rules import advice_record_name
from tests.advise.histories import START, Gpu, dcgm_labels, query_range
from tests.conftest import FIXTURES_DIR

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXByb21ldGhldXMtdG9rZW4.c2lnbmF0dXJlLXBhcnQ"
DCGM = FIXTURES_DIR / "advise" / "dcgm"
EMPTY = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()

Respond = Callable[[BaseHTTPRequestHandler], None]


class _Server:
    def __init__(self, respond: Respond) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append({"path": self.path, "authorization": self.headers.get("Authorization")})
                respond(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"


@contextmanager
def prometheus(respond: Respond) -> Iterator[_Server]:
    """A server on 127.0.0.1 for the length of the test; stopped however the test ends."""
    server = _Server(respond)
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(timeout=5)


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for key, value in (headers or {"Content-Type": "application/json", "Content-Length": str(len(body))}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def fixture_answers(handler: BaseHTTPRequestHandler) -> None:
    """query_range answered from tests/fixtures/advise/dcgm, an empty matrix for other metrics."""
    query = handler.path.split("query=", 1)[1].split("&", 1)[0]
    path = DCGM / f"{query}.json"
    _send(handler, 200, path.read_bytes() if path.exists() else EMPTY)


def client(url: str, **options: Any) -> PrometheusClient:
    return PrometheusClient(parse_endpoint(url), TOKEN, timeout=5, **options)


def test_the_advice_from_a_live_prometheus_with_the_token_sent_there_only(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with prometheus(fixture_answers) as server:
        code = main(["advise", "--prometheus", server.url, "--since", "3h", "--json"])
    captured = capsys.readouterr()
    assert code == 1
    rows = {row["pod"]: row for row in json.loads(captured.out)["recommendations"]}
    assert rows["llm-small-7d9c5b6f4-x2k9p"]["profile"] == "1g.10gb"
    assert all(request["authorization"] == f"Bearer {TOKEN}" for request in server.requests)
    assert all(request["path"].startswith("/api/v1/query_range?query=") for request in server.requests)
    # A 3-hour window at the exporters' 5-minute step.
    assert all("step=300" in request["path"] for request in server.requests)
    assert TOKEN not in captured.out + captured.err


def test_a_redirect_to_another_host_is_refused_and_never_gets_the_token() -> None:
    with prometheus(fixture_answers) as elsewhere:

        def redirect(handler: BaseHTTPRequestHandler) -> None:
            _send(handler, 302, b"", {"Location": f"{elsewhere.url}/api/v1/query_range?query=DCGM_FI_DEV_FB_USED"})

        with prometheus(redirect) as server, pytest.raises(PrometheusError, match="redirected to another host") as caught:
            read_live(client(server.url), since=3600)
    assert elsewhere.requests == []
    assert TOKEN not in str(caught.value)


def test_a_redirect_on_the_same_host_is_followed() -> None:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        if handler.path.startswith("/old/"):
            _send(handler, 307, b"", {"Location": handler.path.replace("/old/", "/", 1)})
        else:
            fixture_answers(handler)

    with prometheus(answer) as server:
        series = read_live(client(f"{server.url}/old"), since=3600)
    assert len(series["DCGM_FI_DEV_FB_USED"]) == 4
    assert [request["authorization"] for request in server.requests][:2] == [f"Bearer {TOKEN}"] * 2


def test_an_oversized_response_is_refused_with_or_without_its_length() -> None:
    def declared(handler: BaseHTTPRequestHandler) -> None:
        _send(handler, 200, b"x" * 5000)

    def chunked(handler: BaseHTTPRequestHandler) -> None:
        # No Content-Length: the body runs until the connection closes.
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"y" * 5000)

    for respond in (declared, chunked):
        with prometheus(respond) as server, pytest.raises(PrometheusError, match="over the 1,000 bytes limit"):
            client(server.url, limit=1000).query_range("DCGM_FI_DEV_FB_USED", 0, 3600, 300)


def test_the_token_is_redacted_from_an_error_that_echoes_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def echo(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"status": "error", "error": f"token {handler.headers.get('Authorization')} is not allowed"}).encode()
        _send(handler, 403, body)

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    with prometheus(echo) as server:
        code = main(["advise", "--prometheus", server.url])
    captured = capsys.readouterr()
    assert code == 2 and "HTTP 403" in captured.err
    assert TOKEN not in captured.out + captured.err and "[redacted]" in captured.err
    assert TOKEN[10:30] not in captured.err


def test_only_https_or_this_machine() -> None:
    with pytest.raises(PrometheusError, match="http only to this machine"):
        parse_endpoint("http://prometheus.example:9090")
    with pytest.raises(PrometheusError, match="no user or password in the URL"):
        parse_endpoint("https://user:secret@prometheus.example")
    with pytest.raises(PrometheusError, match="give an https:// URL"):
        parse_endpoint("ftp://prometheus.example")
    assert parse_endpoint("https://ws.eastus.prometheus.monitor.azure.com/").origin == (
        "https",
        "ws.eastus.prometheus.monitor.azure.com",
        443,
    )


def test_the_token_comes_from_the_environment_or_the_azure_cli_for_azure_monitor() -> None:
    azure = Endpoint("https", "ws-1a2b.eastus.prometheus.monitor.azure.com", 443, "")
    plain = Endpoint("https", "prometheus.example", 443, "")
    assert token_for(plain, {TOKEN_ENV: "t0ken-from-env"}) == "t0ken-from-env"
    assert token_for(azure, {}, az=lambda: "t0ken-from-az") == "t0ken-from-az"
    assert token_for(plain, {}, az=lambda: pytest.fail("the Azure CLI is asked for Azure Monitor only")) is None


def test_since_takes_a_count_and_a_unit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--prometheus", "https://prometheus.example", "--since", "7 days"]) == 2
    assert "give a count and a unit" in capsys.readouterr().err


def _summaries(peak_activity: float) -> Respond:
    """A Prometheus that runs the aks-gpu-advice recording rules: a week of daily summaries for one small inference
    pod (a 1g.10gb holds its p95, a 2g.20gb its daily peaks) and one that is never busy at its p95 but peaked at
    ``peak_activity`` once a day."""
    small = Gpu(
        "aks-infer-31245367-vmss000000", 0, model_name="NVIDIA A100 80GB PCIe", pod=("inference", "llm-7d9c5b6f4-x2k9p", "vllm")
    )
    quiet = Gpu("aks-infer-31245367-vmss000001", 0, model_name="NVIDIA A100 80GB PCIe", pod=("dev", "notebook-x7k2p", "jupyter"))
    daily = {
        ("DCGM_FI_DEV_FB_USED", "max"): {small.host: 7000.0, quiet.host: 2000.0},
        ("DCGM_FI_DEV_FB_USED", "p95"): {small.host: 6500.0, quiet.host: 2000.0},
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "p95"): {small.host: 0.08, quiet.host: 0.0},
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "max"): {small.host: 0.12, quiet.host: peak_activity},
    }
    answers = {}
    for (metric, statistic), values in daily.items():
        name = advice_record_name(metric, statistic)  # type: ignore[arg-type]
        result = []
        for gpu in (small, quiet):
            labels = {**dcgm_labels(metric, gpu, exported=True), "__name__": name}
            result.append({"metric": labels, "values": [[START + day * 86400, repr(values[gpu.host])] for day in range(1, 8)]})
        answers[name] = query_range(result).encode()

    def respond(handler: BaseHTTPRequestHandler) -> None:
        query = urllib.parse.unquote(handler.path.split("query=", 1)[1].split("&", 1)[0])
        _send(handler, 200, answers.get(query, EMPTY))

    return respond


def test_a_week_is_read_from_the_recording_rules_daily_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(_summaries(peak_activity=0.0)) as server:
        code = main(["advise", "--prometheus", server.url, "--json"])
    captured = capsys.readouterr()
    assert code == 1 and "daily summaries" in captured.err
    rows = {row["pod"]: row for row in json.loads(captured.out)["recommendations"]}
    # A service, sized on its bursts: its daily peaks (12% + 20% is more than 1g's one slice of 7), not its p95 (8%).
    assert (rows["llm-7d9c5b6f4-x2k9p"]["recommend"], rows["llm-7d9c5b6f4-x2k9p"]["profile"]) == ("mig", "2g.20gb")
    assert rows["llm-7d9c5b6f4-x2k9p"]["peakMemoryMiB"] == 7000
    assert rows["notebook-x7k2p"]["recommend"] == "release"
    # One sample a day: the summaries are queried at a day's step, and no raw series is read.
    assert all("step=86400" in request["path"] for request in server.requests)


def test_the_daily_peak_of_activity_keeps_a_gpu_busy_once_a_day(capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(_summaries(peak_activity=0.6)) as server:
        main(["advise", "--prometheus", server.url, "--json"])
    rows = {row["pod"]: row for row in json.loads(capsys.readouterr().out)["recommendations"]}
    assert rows["notebook-x7k2p"]["recommend"] != "release"


def test_without_the_recording_rules_the_raw_series_are_read(capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(fixture_answers) as server:
        code = main(["advise", "--prometheus", server.url, "--since", "7d", "--json"])
    captured = capsys.readouterr()
    assert code == 1 and "daily summaries" not in captured.err
    assert any("step=300" in request["path"] for request in server.requests)
