"""tools/go/build-tools says what it does while it takes time: which group of how many it builds, and, waiting on
another checkout's build of the same tools, whose lock it waits on and, once free, how long it waited. A new version
of one group (or a new group) builds that group alone: the others come from the cache.

Nothing is built here: a stand-in `go` answers the script's calls (`env`, `mod download`, `mod edit`, `build -o`,
`run`) and writes small executables where the real one would write binaries, and the cache is a temporary folder,
so the machine's tool cache and a build running beside the tests are never touched."""

from __future__ import annotations

import os
import re
import select
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from aks_gpu.aks_facts import karpenter_facts
from aks_gpu.kube.kueue import kueue_pin
from tests.conftest import PROJECT_DIR

BUILD_TOOLS = PROJECT_DIR / "tools" / "go" / "build-tools"


def recipe_groups(recipes: Path) -> list[str]:
    """The groups in build order, as the recipes name them (``groups="kubernetes etcd ..."``)."""
    [line] = [line for line in recipes.read_text(encoding="utf-8").splitlines() if line.startswith("groups=")]
    return line.removeprefix("groups=").strip('"').split()


GROUPS = recipe_groups(BUILD_TOOLS.parent / "recipes")

FAKE_GO = r"""#!/usr/bin/env bash
# A stand-in for go: answers what tools/go/build-tools asks, builds nothing.
set -eu
case "$1" in
  env)
    case "$2" in GOVERSION) echo go1.26.8 ;; GOOS) echo linux ;; GOARCH) echo amd64 ;; esac ;;
  mod)
    if [ "$2" = download ]; then
      dir=$FAKE_GO_ROOT/mod/$(echo "$4" | tr '/@' '__')
      mkdir -p "$dir/cmd/pulumi-resource-kubernetes" "$dir/config/components/crd/bases"
      echo "kind: CustomResourceDefinition" >"$dir/config/components/crd/bases/crd.yaml"
      mkdir -p "$dir/config/components/webhook"
      echo "kind: MutatingWebhookConfiguration" >"$dir/config/components/webhook/manifests.yaml"
      echo "module fake" >"$dir/go.mod"
      mkdir -p "$dir/pkg/operator" "$dir/kwok/charts/crds" "$dir/kwok/apis/crds"
      printf 'a := fmt.Sprintf(":%%d", m)\nb := fmt.Sprintf(":%%d", h)\n' >"$dir/pkg/operator/operator.go"
      for crd in charts/crds/karpenter.sh_nodepools charts/crds/karpenter.sh_nodeclaims \
        apis/crds/karpenter.kwok.sh_kwoknodeclasses; do
        echo "kind: CustomResourceDefinition" >"$dir/kwok/$crd.yaml"
      done
      printf '{\n\t"GoMod": "%s",\n\t"Dir": "%s"\n}\n' "$dir/go.mod" "$dir"
    fi ;;
  build)
    while [ -e "${FAKE_GO_HOLD:-/nonexistent}" ]; do sleep 0.1; done
    shift
    while [ "$1" != -o ]; do shift; done
    output=$2
    shift 2
    made() { printf '#!/bin/sh\nexit 0\n' >"$1"; chmod +x "$1"; }
    case $output in
      */) for package in "$@"; do made "$output$(basename "$package")"; done ;;
      *) made "$output" ;;
    esac ;;
esac
"""


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    go = fake_bin / "go"
    go.write_text(FAKE_GO, encoding="utf-8")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return {
        **os.environ,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "FAKE_GO_ROOT": str(tmp_path / "fake-go"),
        "AKSGPU_TOOLS_CACHE": str(tmp_path / "cache"),
        "AKSGPU_TOOLS_OUT": str(tmp_path / "tools" / "bin"),
    }


def build_tools(environment: dict[str, str], script: Path = BUILD_TOOLS) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(script)], env=environment, capture_output=True, text=True, timeout=120, check=False)


def built_groups(stderr: str) -> list[str]:
    return [line.split()[2] for line in stderr.splitlines() if re.match(r"build-tools: building \w+ \(", line)]


def test_a_build_numbers_its_groups_and_says_how_long_each_took(environment: dict[str, str]) -> None:
    first = build_tools(environment)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    total = len(GROUPS)
    assert lines[0].startswith(f"build-tools: building {total} tool group(s) from their Go modules into ")
    building = [line for line in lines if re.match(r"build-tools: building \w+ \(", line)]
    assert built_groups(first.stderr) == GROUPS
    assert f"build-tools: building kubernetes (1 of {total}: k8s.io/kubernetes@v1.36.3), log: " in building[0]
    assert building[-1].startswith(f"build-tools: building {GROUPS[-1]} ({total} of {total}: ")
    assert [line for line in lines if re.fullmatch(r"build-tools: \w+ done in \d+s", line)] != []
    assert (Path(environment["AKSGPU_TOOLS_OUT"]) / "kube-apiserver").exists()

    # Everything is in the cache now: a second run builds nothing and says nothing of building.
    second = build_tools(environment)
    assert second.returncode == 0, second.stderr
    assert "building" not in second.stderr
    assert second.stderr.startswith("build-tools: tools in ")


def said_within(process: subprocess.Popen[str], seconds: float) -> str:
    """The next line ``process`` writes on stderr, or "" when it writes none within ``seconds``."""
    assert process.stderr is not None
    ready, _, _ = select.select([process.stderr], [], [], seconds)
    return process.stderr.readline() if ready else ""


def test_waiting_on_another_build_names_the_lock_and_its_holder_then_how_long_it_waited(
    environment: dict[str, str], tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()  # the stand-in go "builds" until this file is gone
    environment = {**environment, "FAKE_GO_HOLD": str(hold)}

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([str(BUILD_TOOLS)], env=environment, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)

    first = start()
    try:
        said_within(first, 30)  # "building 6 tool group(s) ..."
        assert said_within(first, 30).startswith(f"build-tools: building kubernetes (1 of {len(GROUPS)}: ")  # it holds the lock
        second = start()
        try:
            # Said at once, before it blocks (the old script said nothing for as long as the other build ran).
            waiting = said_within(second, 20)
            time.sleep(1.5)
            assert second.poll() is None, "it went on while the lock was held"
        finally:
            hold.unlink()  # the first build ends, and the second goes on
        _, rest = second.communicate(timeout=60)
    finally:
        first.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, rest
    lock_file = Path(environment["AKSGPU_TOOLS_CACHE"]) / ".lock"
    assert waiting.startswith(
        f"build-tools: waiting for another build of the tools (lock {lock_file} held by PID {first.pid} ("
    ), waiting
    assert str(BUILD_TOOLS) in waiting  # the holder's command line
    assert waiting.rstrip().endswith(f"its logs: {lock_file.parent}/*/build.log")
    lines = rest.splitlines()
    waited = re.fullmatch(r"build-tools: the other build finished after (\d+)s of waiting; going on", lines[0])
    assert waited and int(waited[1]) >= 1, lines[0]
    assert not any("building" in line for line in lines)  # the other build built everything


def test_a_new_version_of_one_group_builds_that_group_alone(environment: dict[str, str], tmp_path: Path) -> None:
    # A copy of the driver, its recipes and its versions, so the versions can change without touching the checkout's.
    tools = tmp_path / "repo" / "tools" / "go"
    shutil.copytree(BUILD_TOOLS.parent, tools)
    assert build_tools(environment, tools / "build-tools").returncode == 0
    versions = tools / "versions"
    text = versions.read_text(encoding="utf-8")
    helm = re.search(r"^HELM_VERSION=(\S+)$", text, re.MULTILINE)
    assert helm is not None
    versions.write_text(text.replace(helm[0], "HELM_VERSION=v3.99.0"), encoding="utf-8")

    again = build_tools(environment, tools / "build-tools")
    assert again.returncode == 0, again.stderr
    assert built_groups(again.stderr) == ["helm"]
    assert "building helm (1 of 1: helm.sh/helm/v3@v3.99.0)" in again.stderr
    recorded = (Path(environment["AKSGPU_TOOLS_OUT"]).parent / "versions.json").read_text(encoding="utf-8")
    assert '"helm": "helm.sh/helm/v3@v3.99.0"' in recorded and '"kubectl": "k8s.io/kubernetes@v1.36.3"' in recorded

    # A change to a group's own recipe builds that group alone too; one to the shared part builds them all.
    recipes = tools / "recipes"
    recipe = recipes.read_text(encoding="utf-8")
    recipes.write_text(recipe.replace("build_etcd() {\n", "build_etcd() {\n  : a changed recipe\n"), encoding="utf-8")
    assert built_groups(build_tools(environment, tools / "build-tools").stderr) == ["etcd"]
    recipes.write_text(recipe.replace("build_parallelism=2", "build_parallelism=1"), encoding="utf-8")
    assert built_groups(build_tools(environment, tools / "build-tools").stderr) == GROUPS


def test_the_local_karpenter_is_the_version_of_the_nodepool_crd_the_stacks_are_held_to() -> None:
    """`aksgpu local` runs the Karpenter core that `make tools` builds; the NodePools are checked against the CRD of
    components/aks_gpu/data/karpenter.yaml: one version, or the e2e tier would prove another API than the one held."""
    text = (BUILD_TOOLS.parent / "versions").read_text(encoding="utf-8")
    pinned = re.search(r"^KARPENTER_VERSION=(\S+)$", text, re.MULTILINE)
    assert pinned is not None
    node_pool = karpenter_facts()["node_pool"]
    assert pinned[1] == node_pool["module_version"]
    assert f"sigs.k8s.io/karpenter@{pinned[1]} " in node_pool["source"]


def test_the_karpenter_recipe_binds_its_servers_on_loopback_and_stops_on_an_unexpected_source(
    environment: dict[str, str], tmp_path: Path
) -> None:
    """The one change the recipe makes to Karpenter's source: its two ":%d" bind addresses on 127.0.0.1; a module
    whose operator.go no longer has them stops the group instead of building a binary that listens everywhere."""
    assert build_tools(environment).returncode == 0
    [built] = Path(environment["AKSGPU_TOOLS_CACHE"]).glob("karpenter-*/src/karpenter/karpenter/pkg/operator/operator.go")
    assert built.read_text(encoding="utf-8").count('fmt.Sprintf("127.0.0.1:%d", ') == 2

    tools = tmp_path / "repo" / "tools" / "go"
    shutil.copytree(BUILD_TOOLS.parent, tools)
    recipes = tools / "recipes"
    # A recipe of another version: the fake module it downloads binds once only.
    text = recipes.read_text(encoding="utf-8")
    copy = 'cp -R "$(module_dir "$mod" "$v")" "$src"\n'
    recipes.write_text(text.replace(copy, copy + '  sed -i 1d "$src/pkg/operator/operator.go"\n'), encoding="utf-8")
    again = build_tools(environment, tools / "build-tools")
    assert again.returncode == 1
    assert "karpenter FAILED" in again.stderr
    assert 'not the two ":%d" bind addresses this recipe moves to 127.0.0.1' in again.stderr


def test_the_local_kueue_is_the_version_the_stacks_deploy() -> None:
    """`aksgpu local` runs the Kueue that `make tools` builds; Azure gets the chart of components/aks_gpu/data/kueue.yaml:
    one version, or the e2e tier would prove another engine than the one deployed."""
    text = (BUILD_TOOLS.parent / "versions").read_text(encoding="utf-8")
    pinned = re.search(r"^KUEUE_VERSION=(\S+)$", text, re.MULTILINE)
    assert pinned is not None
    pin = kueue_pin()
    assert pinned[1] == pin.module_version == f"v{pin.version}"
