"""How `aksgpu local` starts a control plane: loopback only, TLS, RBAC, AKS's admission plugins, local binaries."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from aks_gpu.admission.chain import aks_plugins
from aks_gpu.local.control_plane import (
    RECORDED_SMI_ENV,
    RECORDED_SMI_UNSET_EXIT,
    LocalPaths,
    built_kube_version,
    foreign_servers,
    kwokctl_configuration,
    kwokctl_environment,
    minor_of,
    missing_tools,
    node_command_script,
    recorded_output_name,
    server_is_loopback,
    smi_exec,
)
from aks_gpu.resolved.targets import smi_command


def test_every_listener_is_on_loopback_with_tls_rbac_and_aks_admission_plugins(tmp_path: Path) -> None:
    document = kwokctl_configuration(tmp_path, 6443, "v1.36.3")
    options = document["options"]
    # kwokctl's own default bind address is 0.0.0.0: it must never be left to it.
    assert options["bindAddress"] == "127.0.0.1"
    assert options["securePort"] is True and options["kubeAuthorization"] is True and options["kubeAdmission"] is True
    assert options["runtime"] == "binary" and options["kubeApiserverPort"] == 6443
    (patch,) = document["componentsPatches"]
    assert patch["name"] == "kube-apiserver"
    plugins = dict((arg["key"], arg["value"]) for arg in patch["extraArgs"])["enable-admission-plugins"].split(",")
    assert plugins == list(aks_plugins())
    assert {"ExtendedResourceToleration", "PodNodeSelector", "PodTolerationRestriction", "ResourceQuota"} <= set(plugins)


def test_every_binary_is_a_local_path_so_nothing_is_downloaded(tmp_path: Path) -> None:
    options = kwokctl_configuration(tmp_path, 6443, "v1.36.3")["options"]
    binaries = {key: value for key, value in options.items() if key.endswith(("Binary", "BinaryPrefix"))}
    assert {
        "kubeApiserverBinary",
        "kubeControllerManagerBinary",
        "kubeSchedulerBinary",
        "kubectlBinary",
        "etcdBinary",
        "kwokControllerBinary",
        "kubeBinaryPrefix",
    } <= set(binaries)
    assert all(value.startswith(str(tmp_path)) and "://" not in value for value in binaries.values())


def test_the_files_of_a_stack_stay_under_local_name(tmp_path: Path) -> None:
    paths = LocalPaths(tmp_path, "dev")
    for path in (paths.kubeconfig, paths.state, paths.passphrase, paths.kwok_workdir, paths.cluster_dir, paths.workspace):
        assert path.is_relative_to(tmp_path / ".local" / "dev")
    assert paths.kubeconfig.name == "kubeconfig" and paths.cluster_name == "aks-gpu-dev"


@pytest.mark.parametrize(
    ("server", "loopback"),
    [
        ("https://127.0.0.1:6443", True),
        ("https://127.8.0.1", True),
        ("https://localhost:1", True),
        ("https://[::1]:6443", True),
        ("https://aks-gpu-prod-dns-1234.hcp.swedencentral.azmk8s.io:443", False),
        ("https://10.0.0.1:443", False),
        ("not a url", False),
    ],
)
def test_a_server_is_loopback_only_on_this_machine(server: str, loopback: bool) -> None:
    assert server_is_loopback(server) is loopback


def test_a_kubeconfig_with_any_foreign_server_is_foreign() -> None:
    local = {"clusters": [{"name": "a", "cluster": {"server": "https://127.0.0.1:1"}}]}
    mixed = {"clusters": [*local["clusters"], {"name": "b", "cluster": {"server": "https://x.azmk8s.io"}}]}
    assert foreign_servers(local) == []
    assert foreign_servers(mixed) == ["https://x.azmk8s.io"]
    assert foreign_servers({}) == ["(no server)"] and foreign_servers("text") == ["(no server)"]


def test_missing_tools_are_named(tmp_path: Path) -> None:
    assert "kube-apiserver" in missing_tools(tmp_path, {"kwokctl"})
    everything = {
        "kwokctl",
        "kwok",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "etcd",
        "pulumi",
        "pulumi-resource-kubernetes",
    }
    assert missing_tools(tmp_path, everything) == []


def test_the_built_version_and_minors() -> None:
    assert built_kube_version({"kube-apiserver": "k8s.io/kubernetes@v1.36.3"}) == "v1.36.3"
    assert built_kube_version({}) is None and built_kube_version([]) is None
    assert minor_of("v1.36.3") == minor_of("1.36") == "1.36"


def stand_in(tmp_path: Path, tool: str) -> Path:
    script = tmp_path / "bin" / tool
    script.parent.mkdir(exist_ok=True)
    script.write_text(node_command_script(tool))
    script.chmod(0o700)
    return script


def test_the_smi_stand_in_prints_the_recorded_output_of_its_arguments(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    xml = '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>550.54.15</driver_version></nvidia_smi_log>\n'
    (recorded / recorded_output_name(["nvidia-smi", "-q", "-x"])).write_text(xml)
    exec_object = smi_exec("kube-system", "nvidia-device-plugin-abcde", "nvidia-device-plugin-ctr", recorded)
    (env,) = exec_object["spec"]["execs"][0]["local"]["envs"]
    # As kwok runs it: the command looked up on its PATH, the Exec's envs added to its own environment.
    environment = {"PATH": f"{stand_in(tmp_path, 'nvidia-smi').parent}:/usr/bin:/bin", env["name"]: env["value"]}
    done = subprocess.run(["nvidia-smi", "-q", "-x"], env=environment, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, xml)
    # Another command of the same tool has no recording: said, with the exit status of a missing command.
    other = subprocess.run(["nvidia-smi", "-L"], env=environment, capture_output=True, text=True, check=False)
    assert other.returncode == RECORDED_SMI_UNSET_EXIT and "nvidia-smi_-L.txt" in other.stderr and not other.stdout


def test_the_amd_stand_in_serves_each_command_the_shell_runs(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    outputs = {("amd-smi", "static", "--json"): '[{"gpu": 0}]\n', ("amd-smi", "metric", "--ecc", "--json"): "[]\n"}
    for command, text in outputs.items():
        (recorded / recorded_output_name(command)).write_text(text)
    environment = {"PATH": f"{stand_in(tmp_path, 'amd-smi').parent}:/usr/bin:/bin", RECORDED_SMI_ENV: str(recorded)}
    done = subprocess.run(smi_command("amd"), env=environment, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, '[{"gpu": 0}]\n[]\n')


def test_a_pod_without_a_recording_is_told_why(tmp_path: Path) -> None:
    environment = {"PATH": f"{stand_in(tmp_path, 'nvidia-smi').parent}:/usr/bin:/bin"}
    done = subprocess.run(["nvidia-smi", "-q", "-x"], env=environment, capture_output=True, text=True, check=False)
    assert done.returncode == RECORDED_SMI_UNSET_EXIT and RECORDED_SMI_ENV in done.stderr and "docs/local.md" in done.stderr


def test_kwok_finds_the_stand_ins_before_anything_else_and_serves_execs(tmp_path: Path) -> None:
    paths = LocalPaths(tmp_path, "prod")
    env = kwokctl_environment(paths, tmp_path / ".tools" / "bin", {"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[:2] == [str(paths.node_commands), str(tmp_path / ".tools" / "bin")]
    assert kwokctl_configuration(tmp_path, 6443, "v1.36.3")["options"]["enableCRDs"] == ["Exec", "Logs"]
    with pytest.raises(ValueError):
        recorded_output_name(["sh", "-c", "amd-smi static; rm -rf /"])
