"""``aksgpu local``'s I/O edge: runs kwokctl (the control plane's processes, from local binaries), creates the simulated
nodes with kubectl, and deploys the stack's in-cluster layer with the real Pulumi CLI through the Automation API's
inline program (the in-process language host needs only the ``pulumi`` CLI; the Python language host plugin is not
buildable from a module the Go proxy serves). Every wait has a timeout; every failure is a ``LocalError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aks_gpu.config.encrypted import holds_secure_form
from aks_gpu.config.models import QueueingConfig, StackConfig
from aks_gpu.kube.kueue import kueue_namespace_manifest, kueue_pin
from aks_gpu.local.control_plane import (
    LOOPBACK,
    SMI_TOOLS,
    LocalPaths,
    built_kube_version,
    create_cluster_args,
    delete_cluster_args,
    foreign_servers,
    kwokctl_configuration,
    kwokctl_documents,
    kwokctl_environment,
    minor_of,
    missing_tools,
    node_command_script,
    tools_dir,
)
from aks_gpu.local.karpenter import (
    KARPENTER_BINARY,
    KARPENTER_CRDS,
    instance_types,
    karpenter_crds,
    karpenter_environment,
    karpenter_version,
    kwok_node_class,
)
from aks_gpu.local.kueue import (
    CA_CERT_FILE,
    KUEUE_BINARY,
    KUEUE_CRDS,
    KUEUE_WEBHOOKS,
    certificate_commands,
    local_configuration,
    local_crds,
    local_webhooks,
    server_extensions,
    webhook_secret,
)
from aks_gpu.resolved.model import PlatformModel

EXIT_USAGE = 2
KWOKCTL_TIMEOUT_S = 240
KUBECTL_TIMEOUT_S = 60
# The Pulumi Python SDK's kubernetes provider version (requirements.txt: pulumi-kubernetes==4.34.2 asks for it).
KUBERNETES_PLUGIN_VERSION = "4.34.2"
# The Helm charts of the releases a stack may install, and the host a `pulumi up` pulls each from.
CHART_HOSTS = {"NVSentinel (remediation)": "ghcr.io"}
CONNECT_TIMEOUT_S = 3.0

Say = Callable[[str], None]


class LocalError(Exception):
    """A refusal or failure with its exit status (2: usage or environment, 1: a step failed)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class UpResult:
    server: str
    kubeconfig: Path
    started: bool
    nodes: int
    left_out: dict[str, str] = field(default_factory=dict)
    changes: dict[str, int] = field(default_factory=dict)


def require_tools(project_dir: Path) -> Path:
    """The tools folder, or exit 2 naming ``make tools``."""
    bin_dir = tools_dir(project_dir)
    present = {p.name for p in bin_dir.iterdir()} if bin_dir.is_dir() else set()
    missing = missing_tools(bin_dir, present)
    if missing:
        raise LocalError(f"missing tools in {bin_dir}: {', '.join(missing)}; run `make tools` (builds them with Go)")
    return bin_dir


def kube_version(bin_dir: Path) -> str:
    """The built Kubernetes version: ``.tools/versions.json``, else what kube-apiserver says (``Kubernetes v1.36.3``)."""
    versions = bin_dir.parent / "versions.json"
    if versions.is_file():
        found = built_kube_version(json.loads(versions.read_text(encoding="utf-8")))
        if found:
            return found
    said = _run([str(bin_dir / "kube-apiserver"), "--version"], os.environ, 30).split()
    return said[-1] if said else "unknown"


def check_kubernetes_minor(config: StackConfig, built: str) -> None:
    """The local control plane runs the stack's Kubernetes minor, or nothing (exit 2)."""
    if minor_of(config.cluster.kubernetes_version) != minor_of(built):
        raise LocalError(
            f"the stack runs Kubernetes {config.cluster.kubernetes_version} and the tools are {built}: change "
            "KUBERNETES_VERSION in tools/go/versions and run `make tools`"
        )


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


def port_closes(port: int, timeout_s: float = 15.0) -> bool:
    """Whether the port is free within ``timeout_s`` (a stopped API server lets go of it a moment after its pid ends)."""
    deadline = time.monotonic() + timeout_s
    while port_in_use(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (0600), never wider even for a moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    path.chmod(0o600)


def _run(command: list[str], env: Mapping[str, str], timeout: float, stdin: str | None = None) -> str:
    """A command's stdout. Its output goes to files, not pipes: kwokctl leaves the control plane's processes running,
    and they inherit the command's stdout; a pipe would then never reach its end and the call would never return."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        try:
            done = subprocess.run(
                command,
                input=stdin.encode() if stdin is not None else None,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=dict(env),
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LocalError(f"{Path(command[0]).name} {' '.join(command[1:3])} took over {timeout:.0f}s", 1) from None
        stdout.seek(0)
        stderr.seek(0)
        said, complained = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
    if done.returncode != 0:
        tail = "\n".join((complained or said).strip().splitlines()[-8:])
        raise LocalError(f"{Path(command[0]).name} {' '.join(command[1:3])} failed ({done.returncode}):\n{tail}", 1)
    return said


@dataclass
class Local:
    """One stack's local cluster."""

    paths: LocalPaths
    bin_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return kwokctl_environment(self.paths, self.bin_dir, dict(os.environ))

    def kwokctl(self, *args: str, timeout: float = KWOKCTL_TIMEOUT_S) -> str:
        return _run([str(self.bin_dir / "kwokctl"), *args], self.env, timeout)

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = KUBECTL_TIMEOUT_S) -> str:
        command = [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.paths.kubeconfig), *args]
        return _run(command, self.env, timeout, stdin)

    # ---------------------------------------------------------------- the control plane

    def exists(self) -> bool:
        return (self.paths.cluster_dir / "kwok.yaml").is_file()

    def server(self) -> str | None:
        config = self.paths.kwokctl_config
        if not config.is_file():
            return None
        # The file's first document is the KwokctlConfiguration (kwokctl_documents; the Stages follow it).
        port = next(yaml.safe_load_all(config.read_text(encoding="utf-8")))["options"]["kubeApiserverPort"]
        return f"https://{LOOPBACK}:{port}"

    def answering(self) -> bool:
        if not self.paths.kubeconfig.is_file():
            return False
        try:
            self.kubectl("get", "--raw", "/readyz", timeout=10)
        except LocalError:
            return False
        return True

    def start(self, port: int | None, say: Say, workload_namespaces: Sequence[str] = ()) -> bool:
        """Start the control plane unless it answers; True when this call started it. A Job's pod in one of
        ``workload_namespaces`` runs until deleted (local/stages.py), as set when the cluster is created."""
        if self.exists() and self.answering():
            say(f"the local cluster {self.paths.cluster_name} is running at {self.server()}")
            return False
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.root.chmod(0o700)
        self._write_node_commands()
        if self.exists():
            chosen = int((self.server() or ":0").rsplit(":", 1)[1])
            if port_in_use(chosen):
                raise LocalError(f"port {chosen} on {LOOPBACK} is in use (the stopped cluster's API server port)")
            say(f"starting the stopped local cluster {self.paths.cluster_name}")
            try:
                self.kwokctl("start", "cluster", "--name", self.paths.cluster_name)
            except BaseException:
                self._stop_quietly()
                raise
        else:
            chosen = port if port is not None else free_port()
            if port_in_use(chosen):
                raise LocalError(f"port {chosen} on {LOOPBACK} is in use")
            configuration = kwokctl_configuration(self.bin_dir, chosen, kube_version(self.bin_dir))
            documents = kwokctl_documents(configuration, workload_namespaces)
            _private(self.paths.kwokctl_config, yaml.safe_dump_all(documents))
            say(f"creating the local cluster {self.paths.cluster_name} on {LOOPBACK}:{chosen}")
            try:
                self.kwokctl(*create_cluster_args(self.paths))
            except BaseException:
                # Ctrl-C or a failure half-way: nothing that was started may outlive this call.
                self._delete_quietly()
                raise
        self._protect_secrets()
        return True

    def _write_node_commands(self) -> None:
        """The SMI stand-ins kwok runs for an exec (control_plane: ``node_command_script``), before kwok starts."""
        self.paths.node_commands.mkdir(mode=0o700, exist_ok=True)
        for tool in SMI_TOOLS:
            script = self.paths.node_commands / tool
            script.write_text(node_command_script(tool), encoding="utf-8")
            script.chmod(0o700)

    def _protect_secrets(self) -> None:
        """The CA and every other private key, and the admin kubeconfig: 0600 (kwokctl writes them 0644)."""
        for key in self.paths.cluster_dir.rglob("*.key"):
            key.chmod(0o600)
        source = self.paths.cluster_dir / "kubeconfig.yaml"
        _private(self.paths.kubeconfig, source.read_text(encoding="utf-8"))
        source.chmod(0o600)
        foreign = foreign_servers(yaml.safe_load(self.paths.kubeconfig.read_text(encoding="utf-8")))
        if foreign:
            raise LocalError(f"{self.paths.kubeconfig} names a server that is not this machine: {', '.join(foreign)}")

    def _stop_quietly(self) -> None:
        with contextlib.suppress(LocalError, OSError):
            self.kwokctl("stop", "cluster", "--name", self.paths.cluster_name)

    def _delete_quietly(self) -> None:
        with contextlib.suppress(LocalError, OSError):
            self.kwokctl(*delete_cluster_args(self.paths))

    def stop(self) -> bool:
        if not self.exists():
            return False
        self.kwokctl("stop", "cluster", "--name", self.paths.cluster_name)
        return True

    def delete(self) -> None:
        if self.exists():
            self.kwokctl(*delete_cluster_args(self.paths))

    # ---------------------------------------------------------------- what runs on it

    def apply(self, manifests: list[dict[str, Any]]) -> None:
        document = {"apiVersion": "v1", "kind": "List", "items": manifests}
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(document))

    def nodes(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]
        return items


# Kueue's start: its caches synced and its webhook server up (the readyz check of cmd/kueue/main.go).
KUEUE_READY_TIMEOUT_S = 120.0
# A controller's CRDs (Kueue's, Karpenter's): served before the controller starts.
CRDS_TIMEOUT_S = 60


def apply_crds(local: Local, crds: list[dict[str, Any]]) -> None:
    """Apply CustomResourceDefinitions and wait until the server serves them (Established)."""
    local.apply(crds)
    names = [f"crd/{crd['metadata']['name']}" for crd in crds]
    local.kubectl("wait", "--for=condition=Established", *names, f"--timeout={CRDS_TIMEOUT_S}s", timeout=90)


def process_pid(folder: Path) -> int | None:
    """The running process whose pid file is ``folder/pid`` (Kueue's, Karpenter's), or None."""
    try:
        pid = int((folder / "pid").read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def stop_process(folder: Path) -> bool:
    """Stop the process of ``folder/pid``; True when one was running."""
    pid = process_pid(folder)
    if pid is None:
        return False
    end_processes([pid])
    return True


def kueue_pid(paths: LocalPaths) -> int | None:
    """The running Kueue process of this stack's cluster, or None."""
    return process_pid(paths.kueue)


def start_kueue(local: Local, queueing: QueueingConfig, say: Say) -> None:
    """Kueue for a queueing stack (local/kueue.py): its CRDs and namespace, the controller as a process of this
    machine (left running, like the control plane; `local down` stops it), then its webhook configurations, once it
    answers, so the queues Pulumi creates next pass its webhooks."""
    paths, bin_dir = local.paths, local.bin_dir
    if not (bin_dir / KUEUE_BINARY).is_file():
        raise LocalError(f"the stack queues GPU Jobs with Kueue, and {bin_dir / KUEUE_BINARY} is missing: run `make tools`")
    paths.kueue.mkdir(mode=0o700, parents=True, exist_ok=True)
    stop_kueue(paths)
    certs = paths.kueue / "certs"
    certs.mkdir(mode=0o700, exist_ok=True)
    (certs / "server.ext").write_text(server_extensions(), encoding="utf-8")
    for command in certificate_commands(certs):
        _run(command, dict(os.environ), 60)
    ca_pem = (certs / CA_CERT_FILE).read_bytes()
    webhook_port, health_port = free_port(), free_port()
    crds = local_crds(yaml.safe_load_all((bin_dir / KUEUE_CRDS).read_text(encoding="utf-8")), webhook_port, ca_pem)
    apply_crds(local, crds)
    local.apply([kueue_namespace_manifest()])
    local.apply([webhook_secret(certs)])
    documents = yaml.safe_load_all((bin_dir / KUEUE_WEBHOOKS).read_text(encoding="utf-8"))
    local.apply(local_webhooks(documents, webhook_port, ca_pem))
    # certDir holds the Secret's files, as the kubelet mounts them for the chart's Pod: the rotator waits for them.
    configuration = local_configuration(queueing, webhook_port, health_port, certs)
    config_file = paths.kueue / "config.yaml"
    _private(config_file, yaml.safe_dump(configuration))
    # VisibilityOnDemand off: its API server would bind a fixed port on every address (cmd/kueue/main.go).
    command = [str(bin_dir / KUEUE_BINARY), f"--config={config_file}", "--feature-gates=VisibilityOnDemand=false"]
    env = {**os.environ, "KUBECONFIG": str(paths.kubeconfig)}
    process = _start_controller(paths.kueue / "kueue.log", command, env)
    say(f"Kueue {kueue_pin().module_version} running as process {process.pid}, webhooks on {LOOPBACK}:{webhook_port}")
    _wait_ready("Kueue", process, health_port, KUEUE_READY_TIMEOUT_S, paths.kueue / "kueue.log")


def _start_controller(log: Path, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A controller as a process of this machine in a session of its own (it outlives `up`), its output appended to
    ``log`` and its pid in ``pid`` beside it (``process_pid``)."""
    with log.open("ab") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    (log.parent / "pid").write_text(str(process.pid), encoding="utf-8")
    return process


def _wait_ready(name: str, process: subprocess.Popen[bytes], port: int, timeout_s: float, log: Path) -> None:
    """Until the process's health probe server says ready; exit 1 naming its log if it ends or takes too long."""
    deadline = time.monotonic() + timeout_s
    while not _ready(port):
        if process.poll() is not None:
            raise LocalError(f"{name} exited ({process.returncode}); its log: {log}", 1)
        if time.monotonic() > deadline:
            raise LocalError(f"{name} was not ready after {timeout_s:.0f}s; its log: {log}", 1)
        time.sleep(0.5)


def _ready(port: int) -> bool:
    """Whether a controller-runtime manager's health probe server on ``port`` says ready (its /readyz checks)."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def stop_kueue(paths: LocalPaths) -> bool:
    """Stop this stack's Kueue process; True when one was running."""
    return stop_process(paths.kueue)


# Karpenter's start: its caches synced and the NodePool and NodeClaim kinds served (the readyz checks of
# sigs.k8s.io/karpenter pkg/operator/operator.go).
KARPENTER_READY_TIMEOUT_S = 120.0


def karpenter_pid(paths: LocalPaths) -> int | None:
    """The running Karpenter process of this stack's cluster, or None."""
    return process_pid(paths.karpenter)


def start_karpenter(local: Local, config: StackConfig, model: PlatformModel, say: Say) -> None:
    """Karpenter for a NAP stack (local/karpenter.py): its CRDs and the KWOKNodeClass, the instance types file of the
    stack's NAP VM sizes, then the controller as a process of this machine (left running, like the control plane;
    `local down` stops it), before Pulumi creates the NodePools it acts on."""
    paths, bin_dir = local.paths, local.bin_dir
    if not (bin_dir / KARPENTER_BINARY).is_file():
        raise LocalError(
            f"the stack has NAP GPU pools, and {bin_dir / KARPENTER_BINARY} (Karpenter's kwok provider) is missing: run "
            "`make tools`"
        )
    paths.karpenter.mkdir(mode=0o700, parents=True, exist_ok=True)
    stop_karpenter(paths)
    crds = karpenter_crds(yaml.safe_load_all((bin_dir / KARPENTER_CRDS).read_text(encoding="utf-8")))
    apply_crds(local, crds)
    local.apply([kwok_node_class()])
    types_file = paths.karpenter / "instance-types.json"
    types_file.write_text(json.dumps(instance_types(config, model), indent=2), encoding="utf-8")
    health_port = free_port()
    env = {**os.environ, **karpenter_environment(paths.kubeconfig, types_file, free_port(), health_port)}
    process = _start_controller(paths.karpenter / "karpenter.log", [str(bin_dir / KARPENTER_BINARY)], env)
    say(f"Karpenter {karpenter_version()} (kwok provider) running as process {process.pid}")
    _wait_ready("Karpenter", process, health_port, KARPENTER_READY_TIMEOUT_S, paths.karpenter / "karpenter.log")


def stop_karpenter(paths: LocalPaths) -> bool:
    """Stop this stack's Karpenter process; True when one was running."""
    return stop_process(paths.karpenter)


def check_kubeconfig(path: Path) -> None:
    """Refuse a kubeconfig that reaches anywhere but this machine (exit 2)."""
    if not path.is_file():
        return
    foreign = foreign_servers(yaml.safe_load(path.read_text(encoding="utf-8")))
    if foreign:
        raise LocalError(f"{path} points at {', '.join(foreign)}, not at 127.0.0.1: `aksgpu local` deploys nowhere else")


def unreachable_charts(config: StackConfig, reach: Callable[[str], str | None]) -> dict[str, str]:
    """The Helm releases the stack installs whose chart registry cannot be reached, with why."""
    left_out: dict[str, str] = {}
    if config.remediation.mode != "off" and any(pool.vendor == "nvidia" for pool in config.gpu_pools):
        host = CHART_HOSTS["NVSentinel (remediation)"]
        why = reach(host)
        if why is not None:
            left_out["NVSentinel (remediation)"] = f"its chart's registry {host} is out of reach ({why})"
    return left_out


def reach_host(host: str) -> str | None:
    try:
        with socket.create_connection((host, 443), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


# What local_stack_config changes in a stack's config, said by `local up` each time.
LOCAL_CHANGES = (
    "cluster.kubeconfig: the local cluster's (the given-cluster mode: no Azure resource)",
    "validation.onDeploy fail -> warn: the simulated nodes have no GPU for the post-deploy hook's nvidia-smi checks",
    "validation.smokeJob off: the Job controller never counts a kwok pod's completion, Pulumi would wait to its timeout",
    "queueing.installChart false (a stack with queueing): Kueue runs as a process of this machine, built by make tools",
)


def local_stack_config(raw: Mapping[str, Any], kubeconfig: Path, left_out: Mapping[str, str]) -> dict[str, Any]:
    """The stack file's config, in the given-cluster mode on ``kubeconfig``, without the releases left out."""
    config = {key: value for key, value in raw.items()}
    cluster = dict(config.get("aks-gpu:cluster") or {})
    cluster["kubeconfig"] = str(kubeconfig)
    config["aks-gpu:cluster"] = cluster
    validation = dict(config.get("aks-gpu:validation") or {})
    if validation.get("onDeploy", "fail") == "fail":
        # The post-deploy hook runs under the real engine here too, but a simulated node has no GPU to run nvidia-smi
        # on, so its GPU checks cannot pass: it reports (warn) instead of failing the update (LOCAL_CHANGES says so).
        validation["onDeploy"] = "warn"
    # kwok completes a smoke Job's pod (Succeeded), yet the Job controller here never counts it (the Job shows
    # SuccessCriteriaMet with 0/1 completions), so the provider's await for the Job would run to its timeout.
    validation["smokeJob"] = {**dict(validation.get("smokeJob") or {}), "enabled": False}
    config["aks-gpu:validation"] = validation
    if config.get("aks-gpu:queueing"):
        # Kueue is the process `local up` starts (start_kueue), not the chart: its image would run on no simulated node.
        config["aks-gpu:queueing"] = {**dict(config["aks-gpu:queueing"]), "installChart": False}
    if "NVSentinel (remediation)" in left_out:
        remediation = dict(config.get("aks-gpu:remediation") or {})
        remediation["mode"] = "off"
        config["aks-gpu:remediation"] = remediation
    # A value encrypted by the stack's secrets provider (`secure:`) cannot be decrypted by the local stack's (a
    # passphrase of its own): its key travels as JSON text, which Pulumi hands the program as it is, and the program
    # reads the encrypted value in it as the offline plan does, a `[secret]` placeholder (aks_gpu.config.encrypted).
    return {key: json.dumps(value) if holds_secure_form(value) else value for key, value in config.items()}


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` in this process's environment while the block runs, each variable given back as it was (or removed)
    after: an inline Pulumi program runs in this process, and its plugins read the engine's variables from here."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------- the Pulumi engine


@dataclass
class PulumiRun:
    paths: LocalPaths
    bin_dir: Path
    stack_config: dict[str, Any]
    # The Pulumi program (aks_gpu.program.run_platform: the program layer, above this edge, hands it down).
    program: Callable[[], None]

    def _env(self) -> dict[str, str]:
        if not self.paths.passphrase.is_file():
            _private(self.paths.passphrase, secrets.token_urlsafe(32))
        return {
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(self.paths.passphrase),
            "PULUMI_BACKEND_URL": self.paths.state.resolve().as_uri(),
            "PULUMI_HOME": str(self.paths.pulumi_home),
            "AKSGPU_SKIP_SUBSCRIPTION_CHECK": "1",
            "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}",
        }

    def _install_plugin(self, env: Mapping[str, str]) -> None:
        plugin = self.paths.pulumi_home / "plugins" / f"resource-kubernetes-v{KUBERNETES_PLUGIN_VERSION}"
        binary = self.bin_dir / "pulumi-resource-kubernetes"
        if (plugin / binary.name).is_file():
            return
        _run(
            [
                str(self.bin_dir / "pulumi"),
                "plugin",
                "install",
                "resource",
                "kubernetes",
                KUBERNETES_PLUGIN_VERSION,
                "--file",
                str(binary),
            ],
            {**os.environ, **env},
            120,
        )

    @contextlib.contextmanager
    def stack(self) -> Iterator[Any]:
        from pulumi import automation as auto

        env = self._env()
        self.paths.state.mkdir(parents=True, exist_ok=True)
        self.paths.workspace.mkdir(parents=True, exist_ok=True)
        self._install_plugin(env)
        # The stack file the workspace reads: the stack's own config, in the given-cluster mode.
        stack_file = {"config": self.stack_config}
        (self.paths.workspace / f"Pulumi.{self.paths.stack}.yaml").write_text(yaml.safe_dump(stack_file), encoding="utf-8")
        with environment(env):
            project = auto.ProjectSettings(name="aks-gpu", runtime="python")
            stack = auto.create_or_select_stack(
                stack_name=self.paths.stack,
                project_name="aks-gpu",
                program=self.program,
                opts=auto.LocalWorkspaceOptions(
                    work_dir=str(self.paths.workspace),
                    pulumi_home=str(self.paths.pulumi_home),
                    env_vars=env,
                    project_settings=project,
                    secrets_provider="passphrase",
                ),
            )
            yield stack


def pulumi_processes(pulumi_home: Path, proc: Path = Path("/proc")) -> list[int]:
    """The processes this stack's Pulumi runs left: every process of this user whose environment names this stack's
    PULUMI_HOME (``PulumiRun`` sets it; the ``pulumi`` CLI and its plugins, ``pulumi-resource-kubernetes``, inherit
    it). When ``aksgpu local`` is killed (not interrupted) mid-run, they outlive it; ``down`` ends them. No other
    process has that environment value: it is a path under this stack's ``.local/NAME``. Linux only (``/proc``);
    elsewhere none are found."""
    wanted = f"PULUMI_HOME={pulumi_home.resolve()}".encode()
    found = []
    for entry in proc.glob("[0-9]*"):
        try:
            if entry.stat().st_uid != os.getuid() or int(entry.name) == os.getpid():
                continue
            environment = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue  # gone, or not ours to read
        if wanted in environment:
            found.append(int(entry.name))
    return sorted(found)


def end_processes(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """SIGTERM each, then SIGKILL what is left after ``timeout_s``; the pids that were still running when asked."""
    ended = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            ended.append(pid)
    deadline = time.monotonic() + timeout_s
    while ended and time.monotonic() < deadline and any(_alive(pid) for pid in ended):
        time.sleep(0.1)
    for pid in ended:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return ended


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # A child of this process that ended but was not reaped yet is a zombie: not running.
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def change_counts(summary: Mapping[str, Any] | None) -> dict[str, int]:
    """The changes of an update or preview summary, ``same`` left out."""
    return {str(op): int(count) for op, count in (summary or {}).items() if op != "same" and count}
