"""A value encrypted by ``pulumi config set --secret`` (``{secure: <ciphertext>}``, pulumi/pulumi
sdk/go/common/resource/config/value.go) stops no offline command that does not need its plaintext: a text stands as
``[secret]`` everywhere the plan would show it, a value the rules need is a warning naming the key (the plan refuses to
present a stand-in), and everything else is checked. The real CLI's form of it is in tests/e2e/test_stacks.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, STACKS_DIR, MockHarness, raw_stack

DEV = (STACKS_DIR / "Pulumi.dev.yaml").read_text(encoding="utf-8")
CIPHERTEXT = "v1:AAAAhush4711CCCCDDDD"
# Where `pulumi config set --secret --path 'aks-gpu:monitoring.azureMonitor.receivers[1].webhook' ...` puts it.
RECEIVER = "        - {name: gpu-oncall, email: gpu-dev-team@example.com}\n"
WEBHOOK = RECEIVER + f"        - name: pager\n          webhook:\n            secure: {CIPHERTEXT}\n"


def secure(value: str) -> str:
    return f"{{secure: {CIPHERTEXT}}}" if value else value


def stack_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Pulumi.hush.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def command(args: list[str], path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*args, "--stack", "hush", "--config-file", str(path), "--project-dir", str(PROJECT_DIR)])
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_a_secret_webhook_stops_no_offline_command_and_plans_as_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, DEV.replace(RECEIVER, WEBHOOK))
    out = tmp_path / "plan"
    pods = tmp_path / "pod.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: gpu-dev}\nspec:\n  containers:\n"
        "    - {name: c, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    (tmp_path / "plain").mkdir()
    plain = stack_file(tmp_path / "plain", DEV)
    for args in (["rules"], ["admission", "check", str(pods)]):
        assert command(args, path, capsys)[0] == command(args, plain, capsys)[0], args
    code, printed = command(["plan", "--out", str(out)], path, capsys)
    assert code == 0, printed
    written = "".join(file.read_text(encoding="utf-8") for file in out.rglob("*") if file.is_file())
    assert "hush4711" not in written + printed  # never the ciphertext
    [group] = [r for r in json.loads((out / "resources.json").read_text())["resources"] if r["type"].endswith("ActionGroup")]
    assert group["inputs"]["webhookReceivers"] == "[secret]"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    name: aks-gpu-dev\n", f"    name: {secure('x')}\n"),  # a pattern-checked name
        ("    skuTier: Free\n", f"    skuTier: Free\n    tags: {{costCenter: {secure('x')}}}\n"),  # a map's value
        ("{name: gpu-oncall, email: gpu-dev-team@example.com}", f"{{name: gpu-oncall, email: {secure('x')}}}"),
        ("      spot: true\n", f"      spot: true\n      taints: ['a=b:NoSchedule', {secure('x')}]\n"),  # a list item
        ("      spot: true\n", f"      spot: true\n      labels: {{team: {secure('x')}}}\n"),
    ],
)
def test_a_secret_text_anywhere_is_a_placeholder_that_passes_unchecked(tmp_path: Path, old: str, new: str) -> None:
    raw = load_stack_file(stack_file(tmp_path, DEV.replace(old, new, 1)))
    validated = validate_stack(raw, "hush")
    assert not [p for p in validated.warnings if p.stand_in]
    assert "[secret]" in json.dumps(validated.config.model_dump(mode="json"))
    assert CIPHERTEXT not in repr(validated.config)


def test_a_rule_that_would_judge_the_placeholder_says_it_is_not_checked_offline(tmp_path: Path) -> None:
    # The cluster name makes the default dnsPrefix: a rule judges it, and it cannot judge a value nobody can read.
    raw = load_stack_file(stack_file(tmp_path, DEV.replace("    name: aks-gpu-dev\n", f"    name: {secure('x')}\n")))
    [warning] = [p for p in validate_stack(raw, "hush").warnings if p.path == "aks-gpu:cluster.dnsPrefix"]
    assert warning.severity == "warning" and "encrypted" in warning.message and "pulumi preview" in warning.message


def test_a_secret_number_is_a_warning_naming_the_key_and_the_plan_will_not_present_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_file(tmp_path, DEV.replace("      maxCount: 2\n", f"      maxCount: {secure('x')}\n", 1))
    [stand_in] = [p for p in validate_stack(load_stack_file(path), "hush").warnings if p.stand_in]
    assert stand_in.path == "aks-gpu:gpuPools[0].maxCount" and "a number" in stand_in.message
    # gpuQuota 8 against the default maxCount (1 node of 4 replicas) would be an error that depends on the value:
    # held back; the rest of the stack is checked.
    code, printed = command(["rules"], path, capsys)
    assert code == 0 and "more than its pools can ever offer" not in printed
    code, printed = command(["plan", "--out", str(tmp_path / "plan")], path, capsys)
    assert code == 2 and "aks-gpu:gpuPools[0].maxCount" in printed and "nothing was planned" in printed


def test_a_secret_the_stack_cannot_do_without_is_an_error_and_the_other_mistakes_are_still_named(tmp_path: Path) -> None:
    text = DEV.replace("      vendor: nvidia\n", f"      vendor: {secure('x')}\n").replace("skuTier: Free", "skuTier: Freee")
    with pytest.raises(ConfigError) as caught:
        validate_stack(load_stack_file(stack_file(tmp_path, text)), "hush")
    errors = {p.path: p.message for p in caught.value.errors}
    assert "encrypted" in errors["aks-gpu:gpuPools[0].vendor"] and "pulumi preview" in errors["aks-gpu:gpuPools[0].vendor"]
    assert "aks-gpu:cluster.skuTier" in errors


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("  aks-gpu:cluster:\n    secure: v1:AAAABBBBCCCCDDDD\n", "aks-gpu:cluster"),
        ("  aks-gpu:gpuPools:\n    secure: v1:AAAABBBBCCCCDDDD\n", "aks-gpu:gpuPools"),
    ],
)
def test_a_whole_structured_key_encrypted_says_so_and_what_to_do(value: str, path: str, tmp_path: Path) -> None:
    # Without --path the whole object is one ciphertext: nothing of its shape can be checked or planned offline.
    text = re.sub(rf"  {re.escape(path)}:\n(    .*\n)+", value, DEV, count=1)
    text = text.replace("config:\n", "config:\n  azure-native:clientSecret:\n    secure: v1:ZZZZ\n", 1)
    with pytest.raises(ConfigError) as caught:
        validate_stack(load_stack_file(stack_file(tmp_path, text)), "hush")
    problems = [p for p in caught.value.problems if "encrypted" in p.message]
    assert [p.path for p in problems] == [path]  # the provider's own secret is not ours to read
    assert "pulumi preview" in problems[0].message


PROD = (STACKS_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8")
PROD_RECEIVER = "        - {name: gpu-oncall, email: gpu-oncall@example.com}\n"
HEALTHY = str(PROJECT_DIR / "examples" / "snapshots" / "healthy")


@pytest.mark.parametrize("command_name", ["validate", "audit"])
def test_the_live_commands_read_a_stack_with_a_secret_as_without(
    command_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = stack_file(tmp_path, PROD.replace(PROD_RECEIVER, PROD_RECEIVER + WEBHOOK.removeprefix(RECEIVER)))
    (tmp_path / "plain").mkdir()
    plain = stack_file(tmp_path / "plain", PROD)
    args = [command_name, "--snapshot", HEALTHY, "--json"]
    assert command(args, secret, capsys)[0] == command(args, plain, capsys)[0] == 0


def test_under_pulumi_the_decrypted_webhook_stays_a_secret_output(monkeypatch: pytest.MonkeyPatch) -> None:
    # What `pulumi up` hands the program: the plaintext, and the key in PULUMI_CONFIG_SECRET_KEYS (program.py).
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(["aks-gpu:monitoring"]))
    raw = raw_stack("dev")
    receivers = raw["aks-gpu:monitoring"]["azureMonitor"]["receivers"]
    receivers.append({"name": "pager", "webhook": "https://hooks.example.com/services/hush4711"})
    result = MockHarness().run_stack("dev", raw)
    [group] = result.by_type("azure-native:monitor:ActionGroup")
    assert group.inputs["webhookReceivers"] == "[secret]"
    assert "hush4711" not in json.dumps(result.to_json()) + json.dumps(result.manifests())


def test_the_local_stack_carries_a_secret_it_cannot_decrypt_as_a_placeholder(tmp_path: Path) -> None:
    # `aksgpu local up` deploys with a passphrase of its own: the stack's ciphertext goes as its key's JSON text, which
    # the program reads back as the [secret] placeholder (before: the real engine failed to decrypt it).
    from aks_gpu.local.engine import local_stack_config

    raw = load_stack_file(stack_file(tmp_path, DEV.replace(RECEIVER, WEBHOOK)))
    local = local_stack_config(raw, tmp_path / "kubeconfig", {})
    assert isinstance(local["aks-gpu:monitoring"], str) and json.loads(local["aks-gpu:monitoring"]) == raw["aks-gpu:monitoring"]
    assert not isinstance(local["aks-gpu:workloads"], str)  # keys without a secret are written as they are
    (tmp_path / "kubeconfig").write_text("")
    validated = validate_stack(local, "local")
    assert validated.config.monitoring.azure_monitor.receivers[1].webhook == "[secret]"
