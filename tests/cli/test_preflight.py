"""`aksgpu preflight` against a stand-in for ARM on 127.0.0.1 (started per test, answering only what the test says,
stopped after it and after 30 s whatever happens): the verdicts a user acts on, and the token tested as an attacker
would use a redirect, a nextLink, an echo or a flood to get it or the process."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aks_gpu.azure import arm
from aks_gpu.azure.quota import load_quota_facts, quota_plan
from aks_gpu.cli import common, main, preflight, tables
from tests.conftest import PROJECT_DIR, stack_config

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
# A JWT's shape, as Entra ID issues them: what must never be printed.
TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL21hbmFnZW1lbnQuYXp1cmUuY29tLyJ9.c2lnbmF0dXJlLXNlY3JldA"
USAGES = re.compile(rf"^/subscriptions/{SUBSCRIPTION}/providers/Microsoft\.Compute/locations/(\w+)/usages\?api-version=")
PROVIDER = re.compile(rf"^/subscriptions/{SUBSCRIPTION}/providers/([\w.]+)\?api-version=")
SKUS = re.compile(rf"^/subscriptions/{SUBSCRIPTION}/providers/Microsoft\.Compute/skus\?api-version=2021-07-01&")
# A Location restriction as the skus list gives one (az vm list-skus: "NotAvailableForSubscription, type: Location").
NOT_FOR_SUBSCRIPTION = {
    "type": "Location",
    "values": ["swedencentral"],
    "restrictionInfo": {"locations": ["swedencentral"]},
    "reasonCode": "NotAvailableForSubscription",
}

Answer = tuple[int, dict[str, str], bytes]
# A header the stand-in reads as "send no Content-Length" (HTTP/1.0: the body ends when the connection closes).
NO_LENGTH = "X-Test-No-Length"


@dataclass
class FakeArm:
    """Answers GETs with ``answer(path)``; records each request's path and Authorization header."""

    answer: Callable[[str], Answer]
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    base: str = ""


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str], Answer]], FakeArm]]:
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[str], Answer]) -> FakeArm:
        fake = FakeArm(answer)

        class Handler(BaseHTTPRequestHandler):
            timeout = 10

            def do_GET(self) -> None:
                fake.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = fake.answer(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    if name != NO_LENGTH:
                        self.send_header(name, value)
                if "Content-Length" not in headers and NO_LENGTH not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # The client may stop reading (an oversized answer): expected.
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        # Stops itself after 30 s even if the test hangs.
        stopper = threading.Timer(30, server.shutdown)
        stopper.daemon = True
        stopper.start()
        fake.base = f"http://127.0.0.1:{server.server_address[1]}"
        return fake

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _json(document: Any, status: int = 200) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(document).encode()


def usages_for(stack: str, spare: int = 0, drop: str | None = None) -> dict[str, Any]:
    """A usages list where each quota the stack draws on has ``spare`` vCPUs past its need free (negative: short)."""
    rows = []
    for line in quota_plan(stack_config(stack)).lines:
        if line.family != drop:
            used = 8
            rows.append({"name": {"value": line.family, "localizedValue": line.local_name or line.family},
                         "currentValue": used, "limit": used + line.vcpus + spare, "unit": "Count"})
    rows.append({"name": {"value": "availabilitySets", "localizedValue": "Availability Sets"}, "currentValue": 0, "limit": 2500})
    return {"value": rows}


def skus_for(stack: str, restrictions: dict[str, list[dict[str, Any]]], absent: tuple[str, ...]) -> dict[str, Any]:
    """A skus list of swedencentral with each VM size the stack's pools run (zones 1-3, the restrictions given), but
    the ``absent`` ones, and rows of other resource types, which are not VM sizes."""
    rows: list[dict[str, Any]] = [{"resourceType": "disks", "name": "Premium_LRS", "locations": ["swedencentral"]}]
    for size in sorted({need.vm_size for need in quota_plan(stack_config(stack)).pools} - set(absent)):
        rows.append(
            {
                "resourceType": "virtualMachines",
                "name": size,
                "tier": "Standard",
                # ARM spells the region as it pleases in this list (az vm list-skus prints "SwedenCentral").
                "locations": ["SwedenCentral"],
                "locationInfo": [{"location": "SwedenCentral", "zones": ["2", "1", "3"]}],
                "capabilities": [{"name": "vCPUs", "value": "8"}],
                "restrictions": restrictions.get(size, []),
            }
        )
    return {"value": rows}


def arm_answers(
    stack: str = "prod",
    spare: int = 0,
    unregistered: tuple[str, ...] = (),
    drop: str | None = None,
    restrictions: dict[str, list[dict[str, Any]]] | None = None,
    absent: tuple[str, ...] = (),
    skus: Answer | None = None,
) -> Callable[[str], Answer]:
    def answer(path: str) -> Answer:
        if USAGES.match(path):
            return _json(usages_for(stack, spare, drop))
        if SKUS.match(path):
            return skus or _json(skus_for(stack, restrictions or {}, absent))
        provider = PROVIDER.match(path)
        if provider:
            state = "NotRegistered" if provider.group(1) in unregistered else "Registered"
            return _json({"namespace": provider.group(1), "registrationState": state})
        return _json({"error": {"code": "NotFound", "message": path}}, 404)

    return answer


@pytest.fixture
def run_preflight(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    monkeypatch.setenv(arm.TOKEN_ENV, TOKEN)
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", SUBSCRIPTION)

    def go(fake: FakeArm, *extra: str, stack: str = "prod", wide: bool = True) -> tuple[int, str, str]:
        monkeypatch.setattr(preflight, "ARM_BASE", fake.base)
        flags = ["--wide"] if wide else []
        code = main(["preflight", "--stack", stack, "--project-dir", str(PROJECT_DIR), *flags, *extra])
        printed = capsys.readouterr()
        for text in (printed.out, printed.err):
            assert TOKEN not in text and TOKEN[:20] not in text and "c2lnbmF0dXJl" not in text
            assert "Traceback" not in text
        return code, printed.out, printed.err

    return go


def test_everything_fits_exit_0_and_the_token_went_only_as_a_bearer_header(serve: Any, run_preflight: Any) -> None:
    fake = serve(arm_answers())
    code, out, _ = run_preflight(fake)
    assert code == 0, out
    row = next(line for line in out.splitlines() if "standardNDSH100v5Family" in line)
    need = next(line.vcpus for line in quota_plan(stack_config("prod")).lines if line.family == "standardNDSH100v5Family")
    assert str(need) in row and "enough" in row
    assert "registered resource provider Microsoft.ContainerService" in out
    assert fake.seen and all(header == f"Bearer {TOKEN}" for _, header in fake.seen)
    assert any("/locations/swedencentral/usages?api-version=2024-07-01" in path for path, _ in fake.seen)
    # The region's Compute SKUs, filtered by location: what az vm list-skus --location swedencentral --all reads.
    assert any(path.endswith("/skus?api-version=2021-07-01&$filter=location%20eq%20%27swedencentral%27") for path, _ in fake.seen)
    assert "offered Standard_ND96isr_H100_v5 (train, inferfull) in swedencentral, zones 1,2,3" in out
    assert "offered Standard_D4ds_v5 (system) in swedencentral" in out and "offered Standard_D8ds_v5 (cpu)" in out


def test_a_family_one_vcpu_short_is_exit_1_with_the_request_that_covers_it(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers(spare=-1)))
    assert code == 1
    row = next(line for line in out.splitlines() if "standardNDSH100v5Family" in line and "│" in line)
    assert "short" in row and re.search(r"│\s+-1\s+│", row) is None  # free is need - 1, shown as a number
    h100 = load_quota_facts().size("Standard_ND96isr_H100_v5").vcpus or 0
    # The request asks for the family's usage (8) plus the need of its two pools, 96 vCPUs a node: train's 4 nodes +
    # 1 surge node and inferfull's 2 nodes + 1 surge node.
    scope = f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/swedencentral"
    assert f"--resource-name 'standardNDSH100v5Family' --scope {scope} --limit-object value={8 + (5 + 3) * h100}" in out


def test_a_family_the_region_does_not_list_is_not_offered_exit_1(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers(drop="standardNDSH100v5Family")))
    assert code == 1
    assert "not offered" in out and "az vm list-skus --location swedencentral" in out


def test_an_unregistered_provider_is_exit_1_naming_the_register_command(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers(unregistered=("Microsoft.ContainerService",))))
    assert code == 1
    assert "not registered resource provider Microsoft.ContainerService" in out
    assert "az provider register --namespace Microsoft.ContainerService --wait" in out


@pytest.mark.parametrize("width", (80, 100, 120))
def test_at_80_columns_and_wider_every_quota_label_and_command_shows_whole(
    width: int, serve: Any, run_preflight: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = arm_answers(spare=-1, unregistered=("Microsoft.ContainerService",))
    _, out, _ = run_preflight(serve(answers), "--json")
    report = json.loads(out)
    tables._REPLACED_WIDTH.clear()
    monkeypatch.setattr(common.out, "width", width)
    code, out, _ = run_preflight(serve(answers), wide=False)
    assert code == 1
    assert "…" not in out
    words = {word.strip("│ ,():") for line in out.splitlines() for word in line.split()}
    flat = " ".join(out.replace("│", " ").split())
    for quota in report["quotas"]:
        assert quota["quota"] in words, quota["quota"]
        # a label wraps between its words in a table's column, never inside one
        assert set(quota["localName"].split()) <= words, quota["localName"]
        assert quota["verdict"] in flat
    # each command on one line of its own, however long (the terminal wraps it; it copies whole)
    lines = [line.strip() for line in out.splitlines()]
    for command in report["requests"]:
        assert command in lines, command
    assert "az provider register --namespace Microsoft.ContainerService --wait" in lines
    table = [line for line in out.splitlines() if not line.startswith("  az ")]
    assert max(len(line) for line in table) <= width
    if "laid out as a list" in flat:
        assert "--wide for one line a row" in flat and "--json for every field" in flat
        assert all(" ".join(quota["localName"].split()) in flat for quota in report["quotas"])


def test_json_reports_every_quota_and_provider_and_nothing_else_on_stdout(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers(spare=-1)), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["fits"] is False and report["location"] == "swedencentral" and report["subscription"] == SUBSCRIPTION
    h100 = next(q for q in report["quotas"] if q["quota"] == "standardNDSH100v5Family")
    assert h100["verdict"] == "short" and h100["free"] == h100["needed"] - 1 and h100["used"] == 8
    assert any(q["quota"] == "cores" and q["kind"] == "total" for q in report["quotas"])
    assert all(p["registered"] for p in report["providers"])


def test_json_reports_each_pool_vm_size_offered_in_the_location(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers()), "--json")
    assert code == 0
    sizes = {entry["vmSize"]: entry for entry in json.loads(out)["vmSizes"]}
    # Every pool the stack creates, each size once with the pools that run it.
    assert {size: entry["pools"] for size, entry in sizes.items()} == {
        "Standard_D4ds_v5": ["system"],
        "Standard_ND96isr_H100_v5": ["train", "inferfull"],
        "Standard_NC24ads_A100_v4": ["infer"],
        "Standard_D8ds_v5": ["cpu"],
    }
    assert all(entry["offered"] and entry["restrictions"] == [] and entry["zones"] == ["1", "2", "3"] for entry in sizes.values())


def test_a_size_not_available_for_the_subscription_is_not_offered_exit_1_with_its_reason(
    serve: Any, run_preflight: Any
) -> None:
    fake = serve(arm_answers(restrictions={"Standard_ND96isr_H100_v5": [NOT_FOR_SUBSCRIPTION]}))
    code, out, _ = run_preflight(fake)
    assert code == 1
    line = next(line for line in out.splitlines() if "Standard_ND96isr_H100_v5 (train, inferfull)" in line)
    assert line.startswith("not offered") and "NotAvailableForSubscription (Location)" in line
    # The quota itself has room: the size, not the quota, is what stops the pool.
    assert "enough" in next(line for line in out.splitlines() if "standardNDSH100v5Family" in line)
    code, out, _ = run_preflight(fake, "--json")
    report = json.loads(out)
    h100 = next(entry for entry in report["vmSizes"] if entry["vmSize"] == "Standard_ND96isr_H100_v5")
    assert code == 1 and report["fits"] is False and h100["offered"] is False and h100["offer"] == "restricted"
    assert h100["restrictions"] == [
        {"type": "Location", "reasonCode": "NotAvailableForSubscription", "locations": ["swedencentral"], "zones": []}
    ]


def test_a_size_the_region_does_not_list_is_not_offered_exit_1(serve: Any, run_preflight: Any) -> None:
    code, out, _ = run_preflight(serve(arm_answers(absent=("Standard_NC24ads_A100_v4",))))
    assert code == 1
    assert (
        "not offered Standard_NC24ads_A100_v4 (infer): swedencentral lists no such VM size (`az vm list-skus --location "
        "swedencentral --size Standard_NC24ads_A100_v4 --all --output table`)" in " ".join(out.split())
    )


def test_a_zone_restriction_leaves_the_size_offered_and_names_the_closed_zones(serve: Any, run_preflight: Any) -> None:
    zone = {**NOT_FOR_SUBSCRIPTION, "type": "Zone", "restrictionInfo": {"locations": ["swedencentral"], "zones": ["1"]}}
    code, out, _ = run_preflight(serve(arm_answers(restrictions={"Standard_NC24ads_A100_v4": [zone]})))
    assert code == 0, out
    assert "offered Standard_NC24ads_A100_v4 (infer) in swedencentral, zones 1,2,3 (zones 1 not for this subscription)" in out


def test_a_restriction_in_another_region_does_not_count_here(serve: Any, run_preflight: Any) -> None:
    elsewhere = {**NOT_FOR_SUBSCRIPTION, "values": ["westeurope"], "restrictionInfo": {"locations": ["westeurope"]}}
    code, out, _ = run_preflight(serve(arm_answers(restrictions={"Standard_D8ds_v5": [elsewhere]})), "--json")
    assert code == 0 and all(entry["offered"] for entry in json.loads(out)["vmSizes"])


def test_a_skus_list_of_the_wrong_shape_is_exit_2(serve: Any, run_preflight: Any) -> None:
    broken = {"value": [{"resourceType": "virtualMachines", "name": "Standard_D4ds_v5", "locations": "swedencentral"}]}
    code, _, err = run_preflight(serve(arm_answers(skus=_json(broken))))
    assert code == 2 and "Compute SKUs" in err and "not the documented list" in err


def test_a_401_is_exit_2_with_a_login_hint_and_an_echoed_token_is_redacted(serve: Any, run_preflight: Any) -> None:
    echo = {"error": {"code": "InvalidAuthenticationToken", "message": f"The access token {TOKEN} is invalid."}}
    code, _, err = run_preflight(serve(lambda path: _json(echo, 401)))
    assert code == 2
    assert "401" in err and "az login" in err and "InvalidAuthenticationToken" in err and "[redacted]" in err


def test_a_403_is_exit_2_naming_the_role_needed(serve: Any, run_preflight: Any) -> None:
    code, _, err = run_preflight(serve(lambda path: _json({"error": {"code": "AuthorizationFailed", "message": "no"}}, 403)))
    assert code == 2 and "Reader" in err


def test_a_redirect_to_another_host_is_not_followed_and_carries_no_token(serve: Any, run_preflight: Any) -> None:
    thief = serve(lambda path: _json({"value": []}))
    fake = serve(lambda path: (302, {"Location": f"{thief.base}/steal"}, b""))
    code, _, err = run_preflight(fake)
    assert code == 2 and "redirect" in err and "not followed" in err
    assert thief.seen == []


def test_a_next_link_to_another_host_is_refused_before_any_request(serve: Any, run_preflight: Any) -> None:
    thief = serve(lambda path: _json({"value": []}))
    fake = serve(lambda path: _json({"value": [], "nextLink": f"{thief.base}/next?api-version=1"}))
    code, _, err = run_preflight(fake)
    assert code == 2 and "nextLink" in err
    assert thief.seen == []


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "no-content-length"])
def test_an_oversized_answer_is_refused(serve: Any, run_preflight: Any, declared: bool) -> None:
    # A usages list padded past the limit: refused by its Content-Length, or, sent without one until the connection
    # closes, once the limit's worth of bytes has come.
    body = b'{"value": [' + b" " * (arm.MAX_RESPONSE_BYTES + 1) + b"]}"
    code, _, err = run_preflight(serve(lambda path: (200, {} if declared else {NO_LENGTH: "1"}, body)))
    assert code == 2 and f"over the {arm.MAX_RESPONSE_BYTES:,} byte limit" in " ".join(err.split())


def test_an_unreachable_arm_is_exit_2_with_a_message(run_preflight: Any) -> None:
    closed = FakeArm(lambda path: _json({}), base="http://127.0.0.1:9")
    code, _, err = run_preflight(closed)
    assert code == 2 and "cannot reach 127.0.0.1" in err


def test_no_token_and_no_azure_cli_is_exit_2(monkeypatch: pytest.MonkeyPatch, serve: Any, run_preflight: Any) -> None:
    fake = serve(arm_answers())
    monkeypatch.delenv(arm.TOKEN_ENV)
    monkeypatch.setenv("PATH", "")
    code, _, err = run_preflight(fake)
    assert code == 2 and "az login" in err and fake.seen == []


def test_a_token_holding_a_newline_is_refused_not_sent(monkeypatch: pytest.MonkeyPatch, serve: Any, run_preflight: Any) -> None:
    fake = serve(arm_answers())
    monkeypatch.setenv(arm.TOKEN_ENV, "abc\r\nX-Injected: 1")
    code, _, err = run_preflight(fake)
    assert code == 2 and "not a bearer token" in err and fake.seen == []


def test_a_subscription_that_is_not_a_guid_never_reaches_a_url(serve: Any, run_preflight: Any) -> None:
    fake = serve(arm_answers())
    code, _, err = run_preflight(fake, "--subscription", "../../providers/x")
    assert code == 2 and "not a subscription id" in err and fake.seen == []


@pytest.mark.parametrize(
    "base", ["https://evil.example", "http://management.azure.com", "https://management.azure.com.evil.example", "http://10.0.0.1:80"]
)
def test_the_client_sends_the_token_to_arm_or_a_loopback_test_server_only(base: str) -> None:
    with pytest.raises(ValueError):
        arm.ArmClient(TOKEN, base)
