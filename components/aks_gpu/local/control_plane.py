"""How ``aksgpu local`` runs a control plane: the kwokctl configuration (binary runtime, local binaries only, every
server on 127.0.0.1, TLS, RBAC and AKS's admission plugins), the files under ``.local/NAME/`` and what a kubeconfig
must point at. Pure: names and paths in, documents and argument lists out (``local/engine.py`` runs them).

kwokctl (sigs.k8s.io/kwok v0.8.0) reads a ``KwokctlConfiguration`` (``pkg/apis/config/v1alpha1/
kwokctl_configuration_types.go``: ``options.runtime``, ``bindAddress``, ``kubeApiserverPort``, ``securePort``,
``kubeAuthorization``, ``kubeAdmission``, the ``*Binary`` paths; ``componentsPatches[].extraArgs[]`` of ``key`` and
``value``). Its default bind address is 0.0.0.0 (``pkg/apis/config/v1alpha1/zz_generated.defaults.go``), so it is
always set here. Given a path for every binary it starts, the binary runtime downloads none.

A simulated node runs no container, so an exec into its pods (the SMI command the live audit and validator run in a
device plugin pod) is kwok's: with the ``Exec`` CRD enabled (``options.enableCRDs``), an ``Exec`` object named after
a pod maps its containers to a command kwok runs on this machine (``pkg/kwok/server/debugging_exec.go``:
``spec.execs[].containers`` and ``local.envs``; the command is looked up on kwok's own PATH). ``.local/NAME/
node-commands`` comes first on that PATH and holds stand-ins for the SMI tools that print a recorded output from the
folder the pod's ``Exec`` names (``smi_exec``), so the live paths read SMI output through the real API server's exec.
With the ``Logs`` CRD, a ``Logs`` object named after a pod serves each container's log from a local file
(``pkg/kwok/server/debugging_logs.go``: the CRI log format, ``cri_log``): the diagnostic pod's init containers
(``recorded_logs``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aks_gpu.addresses import is_loopback_host
from aks_gpu.admission.chain import aks_plugins
from aks_gpu.local.stages import local_stages
from aks_gpu.naming import local_cluster_name

LOOPBACK = "127.0.0.1"
# The admission plugins AKS runs (the AKS FAQ's list, components/aks_gpu/data/aks_admission.yaml): every one is a
# plugin of kube-apiserver 1.36 (plugin/pkg/admission/ in k8s.io/kubernetes), which adds its default-on plugins
# (ValidatingAdmissionPolicy among them) to whatever --enable-admission-plugins names.
# The binaries a local control plane runs, all from .tools/bin (make tools).
REQUIRED_TOOLS = ("kwokctl", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "pulumi")
PULUMI_PLUGIN_TOOLS = ("pulumi-resource-kubernetes",)


@dataclass(frozen=True)
class LocalPaths:
    """Everything ``aksgpu local`` keeps for one stack, under ``<project>/.local/<stack>/``."""

    project_dir: Path
    stack: str

    @property
    def root(self) -> Path:
        return self.project_dir / ".local" / self.stack

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig, written 0600."""
        return self.root / "kubeconfig"

    @property
    def kwok_workdir(self) -> Path:
        """kwokctl's work folder (KWOK_WORKDIR): the cluster's PKI, logs, pid files and etcd data."""
        return self.root / "kwok"

    @property
    def kwokctl_config(self) -> Path:
        return self.root / "kwokctl.yaml"

    @property
    def state(self) -> Path:
        """The Pulumi file backend (file://)."""
        return self.root / "state"

    @property
    def workspace(self) -> Path:
        """The Pulumi project folder of the inline program (its Pulumi.yaml and stack file)."""
        return self.root / "workspace"

    @property
    def pulumi_home(self) -> Path:
        return self.root / "pulumi-home"

    @property
    def passphrase(self) -> Path:
        """The Pulumi state's passphrase, written 0600 and never printed."""
        return self.root / "passphrase"

    @property
    def node_commands(self) -> Path:
        """The stand-ins for the SMI tools that kwok runs for an exec into a simulated node's pod (first on its PATH)."""
        return self.root / "node-commands"

    @property
    def kueue(self) -> Path:
        """A queueing stack's Kueue process: its Configuration, serving certificate, log and pid file."""
        return self.root / "kueue"

    @property
    def karpenter(self) -> Path:
        """A NAP stack's Karpenter process (kwok provider): its instance types file, log and pid file."""
        return self.root / "karpenter"

    @property
    def cluster_name(self) -> str:
        return local_cluster_name(self.stack)

    @property
    def cluster_dir(self) -> Path:
        """Where kwokctl keeps this cluster (``<workdir>/clusters/<name>``, kwok's pkg/config/vars.go ClustersDir)."""
        return self.kwok_workdir / "clusters" / self.cluster_name


def tools_dir(project_dir: Path) -> Path:
    return project_dir / ".tools" / "bin"


def missing_tools(bin_dir: Path, present: set[str]) -> list[str]:
    """The tools ``aksgpu local`` needs that ``present`` (the names found in ``bin_dir``) lacks."""
    return [tool for tool in (*REQUIRED_TOOLS, *PULUMI_PLUGIN_TOOLS) if tool not in present]


def kwokctl_configuration(bin_dir: Path, port: int, kube_version: str) -> dict[str, Any]:
    """The KwokctlConfiguration of a stack's local cluster. ``kube_version`` is the built kube-apiserver's (kwokctl
    derives its defaults from it; the versions of the running binaries are read from the binaries themselves)."""
    binary = {
        "kubeApiserverBinary": "kube-apiserver",
        "kubeControllerManagerBinary": "kube-controller-manager",
        "kubeSchedulerBinary": "kube-scheduler",
        "kubectlBinary": "kubectl",
        "etcdBinary": "etcd",
        "kwokControllerBinary": "kwok",
    }
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": LOOPBACK,
            "kubeApiserverPort": port,
            "securePort": True,
            # RBAC as AKS runs it: kwokctl's kubeAuthorization is --authorization-mode=Node,RBAC
            # (pkg/kwokctl/components/kube_apiserver.go); kube-apiserver refuses the flag said twice.
            "kubeAuthorization": True,
            "kubeAdmission": True,
            "quietPull": True,
            # Exec objects map a pod's exec to a local command, Logs objects a container's log to a local file (the
            # module docstring); nothing else of kwok's CRDs.
            "enableCRDs": ["Exec", "Logs"],
            "kubeVersion": kube_version,
            # Every other binary kwokctl derives from this prefix is a local path too, never a download URL.
            "kubeBinaryPrefix": str(bin_dir),
            **{key: str(bin_dir / name) for key, name in binary.items()},
        },
        "componentsPatches": [
            {
                "name": "kube-apiserver",
                "extraArgs": [
                    {"key": "enable-admission-plugins", "value": ",".join(aks_plugins())},
                ],
            }
        ],
    }


def kwokctl_documents(configuration: dict[str, Any], workload_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The file ``kwokctl create cluster --config`` reads: the configuration, then the cluster's kwok Stages
    (local/stages.py: a Job's pod in a workload namespace runs until deleted)."""
    return [configuration, *local_stages(workload_namespaces)]


def built_kube_version(versions: Any) -> str | None:
    """The Kubernetes version ``make tools`` built (``.tools/versions.json``: kube-apiserver's ``module@version``)."""
    module = versions.get("kube-apiserver") if isinstance(versions, dict) else None
    if not isinstance(module, str) or "@" not in module:
        return None
    return module.rsplit("@", 1)[1]


def minor_of(version: str) -> str:
    """``1.36`` of ``v1.36.3``, ``1.36.3`` or ``1.36``."""
    return ".".join(version.removeprefix("v").split(".")[:2])


def create_cluster_args(paths: LocalPaths) -> list[str]:
    """``kwokctl create cluster`` for a stack, with the configuration written to ``paths.kwokctl_config``."""
    # --wait: kwokctl waits for the control plane to answer; the engine's own waits bound the rest.
    return ["create", "cluster", "--name", paths.cluster_name, "--config", str(paths.kwokctl_config), "--wait", "2m"]


def delete_cluster_args(paths: LocalPaths) -> list[str]:
    return ["delete", "cluster", "--name", paths.cluster_name]


def kwokctl_environment(paths: LocalPaths, bin_dir: Path, base: dict[str, str]) -> dict[str, str]:
    """kwokctl's environment: its work folder under ``.local``, the SMI stand-ins, then the tools, first on PATH (the
    kwok controller it starts inherits it, and looks an exec's command up on it)."""
    path = f"{paths.node_commands}:{bin_dir}:{base.get('PATH', '')}"
    return {**base, "KWOK_WORKDIR": str(paths.kwok_workdir), "PATH": path}


# The tools the live paths run in a GPU node's pod, each stood in for on a simulated node: the SMI tools
# (resolved/targets.py smi_command: nvidia-smi, and amd-smi through sh) and dcgmi and rvs, which `aksgpu validate --deep`
# execs in a node's diagnostic pod (validation/diagnostics.py exec_step).
SMI_TOOLS = ("nvidia-smi", "amd-smi", "dcgmi", "rvs")
# The environment variable an Exec sets for the stand-ins: the folder of that pod's recorded outputs.
RECORDED_SMI_ENV = "AKSGPU_RECORDED_SMI"
RECORDED_SMI_UNSET_EXIT = 127


def recorded_output_name(command: Sequence[str]) -> str:
    """The file of a recorded SMI folder that holds what ``command`` printed: the tool and its arguments joined by
    ``_`` (``nvidia-smi_-q_-x.txt``), as the stand-in looks it up."""
    name = "_".join(command)
    if not command or not re.fullmatch(r"[A-Za-z0-9._=-]+", name):
        raise ValueError(f"not a command a recorded output can be named after: {list(command)!r}")
    return f"{name}.txt"


def node_command_script(tool: str) -> str:
    """The stand-in for ``tool``: prints the recorded output of its arguments from the Exec's folder, or says why
    it cannot (exit 127, as a shell says of a command it cannot find)."""
    return f"""#!/bin/sh
# aksgpu local: {tool} on a simulated (kwok) node prints a recorded output; written by `aksgpu local up`.
name={tool}
for arg in "$@"; do name="${{name}}_$arg"; done
if [ -z "${{{RECORDED_SMI_ENV}:-}}" ]; then
  echo "{tool}: a simulated node has no GPU; an Exec of this pod sets {RECORDED_SMI_ENV} to a folder of" \
    "recorded outputs (docs/local.md)" >&2
  exit {RECORDED_SMI_UNSET_EXIT}
fi
if [ ! -f "${RECORDED_SMI_ENV}/$name.txt" ]; then
  echo "{tool}: no recorded output $name.txt in ${RECORDED_SMI_ENV}" >&2
  exit {RECORDED_SMI_UNSET_EXIT}
fi
exec cat "${RECORDED_SMI_ENV}/$name.txt"
"""


def smi_exec(namespace: str, pod: str, container: str | None, recorded: Path) -> dict[str, Any]:
    """The kwok ``Exec`` (``kwok.x-k8s.io/v1alpha1``) that serves ``recorded`` (a folder of outputs named by
    ``recorded_output_name``) to an exec into ``namespace/pod`` (``container``; None: every container)."""
    target: dict[str, Any] = {"local": {"envs": [{"name": RECORDED_SMI_ENV, "value": str(recorded.resolve())}]}}
    if container is not None:
        target["containers"] = [container]
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Exec",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"execs": [target]},
    }


def cri_log(text: str, at: str = "2026-01-01T00:00:00.000000000Z") -> str:
    """``text`` as a container log file in the CRI format the kubelet keeps and kwok reads for a ``Logs`` object
    (k8s.io/kubernetes pkg/kubelet/kuberuntime/logs: ``<RFC3339Nano time> stdout F <line>`` per line)."""
    return "".join(f"{at} stdout F {line}\n" for line in text.splitlines())


def recorded_logs(namespace: str, pod: str, files: dict[str, Path]) -> dict[str, Any]:
    """The kwok ``Logs`` (``kwok.x-k8s.io/v1alpha1``) that serves each container's log of ``namespace/pod`` from its
    file in ``files`` (a ``cri_log`` file), through the API server's ``pods/log`` as a kubelet would."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [{"containers": [name], "logsFile": str(path.resolve())} for name, path in files.items()]},
    }


def server_is_loopback(server: str) -> bool:
    """Whether a kubeconfig's ``server`` URL names this machine's loopback (127.0.0.0/8, ::1 or localhost)."""
    host = urlsplit(server).hostname
    return host is not None and is_loopback_host(host)


def kubeconfig_servers(document: Any) -> list[str]:
    """Every cluster server a kubeconfig document names (``clusters[].cluster.server``)."""
    if not isinstance(document, dict):
        return []
    servers = []
    for entry in document.get("clusters") or []:
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        if isinstance(cluster, dict) and isinstance(cluster.get("server"), str):
            servers.append(cluster["server"])
    return servers


def foreign_servers(document: Any) -> list[str]:
    """The servers of a kubeconfig that are not this machine's loopback: ``aksgpu local`` refuses to deploy through
    such a kubeconfig (a stack's local kubeconfig replaced by one for a real cluster must not reach it)."""
    servers = kubeconfig_servers(document)
    if not servers:
        return ["(no server)"]
    return [server for server in servers if not server_is_loopback(server)]
