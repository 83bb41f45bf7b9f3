"""How `aksgpu local` starts a control plane: loopback only, TLS, RBAC, AKS's admission plugins, local binaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from aks_gpu.local.control_plane import (
    AKS_ADMISSION_PLUGINS,
    LocalPaths,
    built_kube_version,
    foreign_servers,
    kwokctl_configuration,
    minor_of,
    missing_tools,
    server_is_loopback,
)


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
    assert plugins == list(AKS_ADMISSION_PLUGINS)
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
