"""What a change saves on the bill (issue 42, class 3): a node is what Azure bills, so a pool change saves the nodes it
frees at the VM's price (the GPUs it frees are capacity, reported apart); the GPUs "now" are those held at the same time
(a rolled-out Deployment is not three GPUs, a GPU time-sliced between pods is one); a new MIG pool starts at one whole
node. Prices come from one dated table (or a team's own, --prices), the VM size and region from the stack or from
kube_node_labels, and a saving is never silently null."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from aks_gpu.advise.recommend import HELD_AT_ONCE_SECONDS, Advice, NodeFacts, Pricing, advise, held_at_once, node_labels
from aks_gpu.advise.series import parse_query_range
from aks_gpu.advise.usage import read_usage
from aks_gpu.aks_facts import vm_size_regions
from aks_gpu.audit import html
from aks_gpu.audit.prices import DATA_FILE, load_prices
from aks_gpu.catalog import load_catalog, vm_size_key
from aks_gpu.cli import main
from aks_gpu.config.models import CpuPoolConfig, SystemPool
from aks_gpu.data_files import load_yaml
from tests.advise.histories import START, STEP, Gpu, dcgm_labels, query_range
from tests.conftest import FIXTURES_DIR, STACK_NAMES, stack_config

DAY = 288  # 5-minute steps
A100 = "NVIDIA A100 80GB PCIe"
H100 = "NVIDIA H100 80GB HBM3"
DCGM = FIXTURES_DIR / "advise" / "dcgm"
PRICES = load_prices()
A100_NODE = PRICES.monthly("eastus", "Standard_NC24ads_A100_v4")[0]  # type: ignore[index]
H100_NODE = PRICES.monthly("eastus", "Standard_ND96isr_H100_v5")[0]  # type: ignore[index]
SINGLE = {"infer": NodeFacts("infer", "Standard_NC24ads_A100_v4", "eastus")}
EIGHT = {"infer": NodeFacts("infer", "Standard_ND96isr_H100_v5", "eastus")}


def held(gpu: Gpu, steps: range) -> Gpu:
    """``gpu`` with its samples only over ``steps`` (a pod that came or went in the window)."""
    gpu.extra = {**gpu.extra, "_steps": f"{steps.start}:{steps.stop}"}
    return gpu


def responses(gpus: Sequence[Gpu], steps: int) -> dict[str, str]:
    """Memory and activity query_range responses of ``gpus``, each over the steps ``held`` gave it (all ``steps``
    otherwise)."""
    found: dict[str, str] = {}
    for metric, reading in (("DCGM_FI_DEV_FB_USED", "memory"), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "activity")):
        result = []
        for gpu in gpus:
            first, _, last = gpu.extra.get("_steps", f"0:{steps}").partition(":")
            labels = {key: value for key, value in dcgm_labels(metric, gpu).items() if key != "_steps"}
            values = [[START + n * STEP, str(round(getattr(gpu, reading)(n), 6))] for n in range(int(first), int(last))]
            result.append({"metric": labels, "values": values})
        found[metric] = query_range(result)
    return found


def advice_of(gpus: Sequence[Gpu], steps: int, pools: dict[str, NodeFacts]) -> Advice:
    catalog = load_catalog()
    series = {metric: parse_query_range(metric, text) for metric, text in responses(gpus, steps).items()}
    return advise(read_usage(series, catalog), Pricing(prices=PRICES, catalog=catalog, pools=pools))


def small(host: str, index: int, pod: str, activity: float = 0.05) -> Gpu:
    model = H100 if host.startswith("aks-infer-1") else A100
    return Gpu(host, index, model_name=model, pod=("team", pod, "main"), memory=lambda n: 3000.0, activity=lambda n: activity)


# --- GPUs and nodes held at the same time -------------------------------------------------------------------------


def test_a_rolled_out_deployment_is_one_gpu_not_three() -> None:
    # Three generations of one Deployment's single replica over three days, each on its own node, the next one up half
    # an hour before the last one went (a rolling update's surge): one GPU and one node held at once.
    pods = [
        held(
            small(f"aks-infer-31245367-vmss00000{n}", 0, f"api-7d9c5b6f{n}-x2k9p", activity=0.0),
            range(n * DAY, (n + 1) * DAY + 6),
        )
        for n in range(3)
    ]
    (change,) = advice_of(pods, 3 * DAY + 12, SINGLE).pool_changes
    assert (change.recommend, change.workloads, change.gpus_now, change.gpus_after) == ("release", 3, 1, 0)
    assert change.nodes_freed == 1
    assert change.monthly_saving == pytest.approx(A100_NODE, abs=0.01)


def test_a_gpu_time_sliced_between_pods_counts_once() -> None:
    # Two idle notebooks on one shared GPU (the exporter puts the GPU's figures on both pods' series).
    pods = [small("aks-infer-31245367-vmss000000", 0, name, activity=0.0) for name in ("nb-a-0", "nb-b-0")]
    (change,) = advice_of(pods, DAY + 12, SINGLE).pool_changes
    assert (change.workloads, change.gpus_now, change.nodes_freed) == (2, 1, 1)
    assert change.monthly_saving == pytest.approx(A100_NODE, abs=0.01)


def test_held_at_once_ignores_overlaps_shorter_than_an_hour() -> None:
    day = 86_400.0
    assert held_at_once([(0, day), (day - 600, 2 * day)]) == 1
    assert held_at_once([(0, day), (day - HELD_AT_ONCE_SECONDS, 2 * day)]) == 2
    # Many short surges are still short: a daily rollout for a week.
    assert held_at_once([(n * day - (600 if n else 0), (n + 1) * day) for n in range(7)]) == 1
    assert held_at_once([(0, 3 * day), (0, 1.5 * day), (1.5 * day, 3 * day)]) == 2
    # A window shorter than the hour: the most held at once.
    assert held_at_once([(0, 600), (0, 600)]) == 2
    assert held_at_once([]) == 0


def on_instance(node: int, pod: str, instance: str, memory: float = 3000.0, activity: float = 0.05) -> Gpu:
    """A pod on a 3g.40gb instance (two a GPU) of the one A100 of a Standard_NC24ads_A100_v4 node."""
    gpu = Gpu(f"aks-infer-31245367-vmss00000{node}", 0, model_name=A100, pod=("team", pod, "main"))
    gpu.memory, gpu.activity = (lambda n: memory), (lambda n: activity)
    gpu.extra = {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": instance}
    return gpu


def test_a_mig_instance_counts_as_its_share_of_a_gpu_other_pods_hold() -> None:
    # Two small workloads, each on half of a GPU whose other half a trainer keeps (its 3g.40gb holds it, no smaller
    # one does): moving both to 1g.10gb frees no GPU (the trainers still hold both), and the new pool costs a node.
    trainers = [on_instance(node, f"trainer{node}-0", "2", memory=20_000.0, activity=0.5) for node in range(2)]
    pods = [on_instance(node, f"batch{node}-x7k2p", "1") for node in range(2)]
    advice = advice_of([*pods, *trainers], DAY + 12, SINGLE)
    assert {one.usage.pod: one.recommend for one in advice.recommendations if "trainer" in one.usage.pod} == {
        "trainer0-0": "keep",
        "trainer1-0": "keep",
    }
    (change,) = advice.pool_changes
    assert (change.profile, change.workloads, change.gpus_now, change.gpus_after, change.gpus_freed) == ("1g.10gb", 2, 1, 1, 0)
    assert (change.nodes_now, change.nodes_freed) == (0, -1)
    # The same two alone on their GPUs: both GPUs and one of the two nodes go.
    (change,) = advice_of(pods, DAY + 12, SINGLE).pool_changes
    assert (change.gpus_now, change.gpus_after, change.gpus_freed, change.nodes_freed) == (2, 1, 1, 1)
    assert change.monthly_saving == pytest.approx(A100_NODE, abs=0.01)
    # Two on the two halves of one GPU: one GPU, however many instances.
    both = [on_instance(0, "batch0-x7k2p", "1"), on_instance(0, "batch1-x7k2p", "2")]
    (change,) = advice_of(both, DAY + 12, SINGLE).pool_changes
    assert (change.workloads, change.gpus_now, change.gpus_after) == (2, 1, 1)
    assert held_at_once([(0, 7200, 0.5), (0, 7200, 0.5), (3600, 7200, 1 / 7)]) == 2  # 1 1/7 GPUs for an hour: 2


# --- nodes are what Azure bills -------------------------------------------------------------------------------------


def test_the_saving_is_the_nodes_freed_at_the_vms_price_and_the_gpus_freed_are_capacity() -> None:
    # 16 small services filling two 8-GPU ND H100 v5 nodes: 1g.10gb carries 7 a GPU, so 3 GPUs, on one node.
    pods = [
        small(f"aks-infer-1234567{node}-vmss00000{node}", index, f"svc{node}{index}-0") for node in range(2) for index in range(8)
    ]
    (change,) = advice_of(pods, DAY + 12, EIGHT).pool_changes
    assert (change.profile, change.gpus_now, change.gpus_after, change.gpus_freed) == ("1g.10gb", 16, 3, 13)
    assert (change.nodes_now, change.nodes_after, change.nodes_freed) == (2, 1, 1)
    assert change.monthly_saving == pytest.approx(H100_NODE, abs=0.01)


def shared_node() -> list[Gpu]:
    """Two small services on an 8-GPU node that also runs a training pod."""
    pods = [small("aks-infer-12345670-vmss000000", index, f"svc{index}-0") for index in range(2)]
    trainer = Gpu("aks-infer-12345670-vmss000000", 7, model_name=H100, pod=("ml", "trainer-0", "main"), memory=lambda n: 70_000.0)
    trainer.activity = lambda n: 0.95
    return [*pods, trainer]


def test_a_new_mig_pool_starts_at_one_whole_node() -> None:
    # Moving the two small services frees two GPUs of capacity but no node, and their new MIG pool needs a node of
    # its own: the change costs a node, it does not save 2/8 of one.
    (change,) = advice_of(shared_node(), DAY + 12, EIGHT).pool_changes
    assert (change.gpus_now, change.gpus_after, change.gpus_freed) == (2, 1, 1)
    assert (change.nodes_now, change.nodes_after, change.nodes_freed) == (0, 1, -1)
    assert change.monthly_saving == pytest.approx(-H100_NODE, abs=0.01)
    advice = advice_of(shared_node(), DAY + 12, EIGHT)
    shares = [one.monthly_saving for one in advice.recommendations if one.recommend == "mig"]
    assert shares == [pytest.approx(-H100_NODE / 2, abs=0.01)] * 2


def test_the_table_says_what_a_change_costs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for metric, text in responses(shared_node(), DAY + 12).items():
        (tmp_path / f"{metric}.json").write_text(text, encoding="utf-8")
    (tmp_path / "kube_node_labels.json").write_text(
        node_labels_of("aks-infer-12345670-vmss000000", "Standard_ND96isr_H100_v5"), "utf-8"
    )
    main(["advise", "--metrics", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert f"the new pool needs 1 node(s) more (costs USD {H100_NODE:,.0f} more a month)" in out


def node_labels_of(*nodes_and_size: str, region: str = "eastus", pool: str | None = None) -> str:
    """kube_node_labels as kube-state-metrics exports them: each node with the VM size (the last argument)."""
    *nodes, size = nodes_and_size
    labels = {"label_node_kubernetes_io_instance_type": size, "label_topology_kubernetes_io_region": region}
    if pool:
        labels["label_kubernetes_azure_com_agentpool"] = pool
    return query_range(
        [{"metric": {"__name__": "kube_node_labels", "node": node, **labels}, "values": [[START, "1"]]} for node in nodes]
    )


# --- where the prices come from -------------------------------------------------------------------------------------


def test_kube_node_labels_give_the_size_and_region_without_the_stack(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for path in DCGM.glob("*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    nodes = [f"aks-infer-31245367-vmss00000{n}" for n in range(4)]
    (tmp_path / "kube_node_labels.json").write_text(node_labels_of(*nodes, "Standard_NC24ads_A100_v4", pool="infer"), "utf-8")
    main(["advise", "--metrics", str(tmp_path), "--json"])
    document = json.loads(capsys.readouterr().out)
    release = next(change for change in document["poolChanges"] if change["recommend"] == "release")
    assert (release["pool"], release["nodesFreed"], release["priced"]) == ("infer", 1, True)
    assert release["monthlySaving"] == pytest.approx(A100_NODE, abs=0.01)
    assert document["unpriced"] == []


def dev_history(folder: Path) -> Path:
    """A day of the dev stack's pool (Standard_NC4as_T4_v3, one T4 a node): a notebook that never computes, and a
    node no pod used."""
    notebook = Gpu("aks-dev-20481632-vmss000000", 0, model_name="Tesla T4", pod=("gpu-dev", "notebook-0", "main"))
    notebook.activity = lambda n: 0.0
    for metric, text in responses([notebook, Gpu("aks-dev-20481632-vmss000001", 0, model_name="Tesla T4")], DAY + 12).items():
        (folder / f"{metric}.json").write_text(text, encoding="utf-8")
    return folder


# The history of each shipped stack's GPU pools: the tests' exporter fixtures (tests/fixtures/advise/SOURCES.md), on
# the nodes AKS names after the stack's pools.
HISTORIES = {
    "prod": lambda folder: DCGM,
    "teams": lambda folder: DCGM,  # prod's pools (train, infer) shared by three teams
    "amd": lambda folder: FIXTURES_DIR / "advise" / "amd",
    "dev": dev_history,
}


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_shipped_stacks_price_their_pool_changes(stack: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = stack_config(stack)
    region = config.cluster.location or config.location
    sizes = {pool.name: pool.vm_size for pool in config.gpu_pools}
    main(["advise", "--metrics", str(HISTORIES[stack](tmp_path)), "--stack", stack, "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["poolChanges"] and document["unpriced"] == []
    for change in [*document["poolChanges"], *document["idleCapacity"]]:
        price = PRICES.monthly(region, sizes[change["pool"]])
        assert price is not None and change["priced"] is True, change
        assert change["monthlySaving"] == pytest.approx(change["nodesFreed"] * price[0], abs=0.01)


def test_node_labels_read_the_kube_state_metrics_names() -> None:
    (series,) = parse_query_range(
        "kube_node_labels",
        query_range(
            [
                {
                    "metric": {
                        "node": "gpu-7",
                        "label_beta_kubernetes_io_instance_type": "Standard_ND96isr_H100_v5",
                        "label_failure_domain_beta_kubernetes_io_region": "westus",
                        "label_agentpool": "h100",
                    },
                    "values": [[START, "1"]],
                }
            ]
        ),
    )
    assert node_labels([series]) == {"gpu-7": NodeFacts("h100", "Standard_ND96isr_H100_v5", "westus")}


def test_every_pool_change_says_whether_it_is_priced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for path in DCGM.glob("*.json"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    nodes = [f"aks-infer-31245367-vmss00000{n}" for n in range(4)]
    # southeastus: not one of the regions the price table's recording priced.
    labels = node_labels_of(*nodes, "Standard_NC24ads_A100_v4", region="southeastus", pool="infer")
    (tmp_path / "kube_node_labels.json").write_text(labels, "utf-8")
    main(["advise", "--metrics", str(tmp_path), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["poolChanges"]
    for change in document["poolChanges"]:
        assert change["monthlySaving"] is None and change["priced"] == "unpriced: Standard_NC24ads_A100_v4 in southeastus"
    assert document["unpriced"] == ["unpriced: Standard_NC24ads_A100_v4 in southeastus"]
    main(["advise", "--metrics", str(DCGM), "--json"])
    document = json.loads(capsys.readouterr().out)
    for change in document["poolChanges"]:
        assert change["priced"].startswith("unpriced: the VM size and region of aks-infer-31245367-vmss00000")


def test_a_teams_own_rates(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rates = tmp_path / "rates.yaml"
    rates.write_text(
        "currency: EUR\nhours_per_month: 730\ntables:\n  - region: swedencentral\n    read: 2026-11-30\n"
        "    source: our 3-year reservation\n    prices:\n      Standard_NC24ads_A100_v4: 1.5\n",
        encoding="utf-8",
    )
    main(["advise", "--metrics", str(DCGM), "--stack", "prod", "--prices", str(rates), "--json"])
    document = json.loads(capsys.readouterr().out)
    release = next(change for change in document["poolChanges"] if change["recommend"] == "release")
    assert (document["currency"], release["priced"], release["monthlySaving"]) == ("EUR", True, 1095.0)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("tables: [", "not valid YAML"),
        ("currency: USD\ntables: []\n", "needs currency, hours_per_month"),
        ("currency: USD\nhours_per_month: 730\ntables:\n  - region: eastus\n", "table 1 needs region, read"),
        (
            "currency: USD\nhours_per_month: 730\ntables:\n  - {region: eastus, read: 2026-01-01, source: s, prices: {X: -1}}\n",
            "not a number of 0 or more",
        ),
    ],
)
def test_a_price_file_not_in_the_format_is_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, said: str
) -> None:
    rates = tmp_path / "rates.yaml"
    rates.write_text(text, encoding="utf-8")
    assert main(["advise", "--metrics", str(DCGM), "--prices", str(rates)]) == 2
    err = capsys.readouterr().err
    assert said in " ".join(err.split()) and "rates.yaml" in err


def test_the_price_table_holds_the_catalogs_and_the_default_sizes_each_table_dated_and_sourced() -> None:
    catalog = load_catalog()
    defaults = {SystemPool.model_fields["vm_size"].default, CpuPoolConfig.model_fields["vm_size"].default}
    document = load_yaml(DATA_FILE)
    for table in document["tables"]:
        assert table["read"] and "prices.azure.com" in table["source"]
        for size in table["prices"]:
            assert catalog.vm_size(size) is not None or size in defaults, size
    priced = {size for table in document["tables"] for size in table["prices"]}
    assert defaults <= priced
    # The audit's idle cost reads this same table: one source of prices.
    assert vars(html)["load_prices"] is load_prices


def test_every_size_the_project_runs_is_priced_wherever_the_recording_prices_it() -> None:
    # Each size of the catalog, the defaults and the shipped stacks, in each region data/vm_size_regions.yaml records
    # it in: priced, unless the file's `unrecorded` names the region (the recording has no price for the size there).
    defaults = {SystemPool.model_fields["vm_size"].default, CpuPoolConfig.model_fields["vm_size"].default}
    shipped: set[str] = set()
    for stack in STACK_NAMES:
        config = stack_config(stack)
        shipped |= {config.cluster.system_pool.vm_size, *(pool.vm_size for pool in config.gpu_pools)}
        shipped |= {pool.vm_size for pool in config.cpu_pools}
    unrecorded = load_yaml(DATA_FILE)["unrecorded"]
    regions = vm_size_regions()
    for size in {*load_catalog().vm_sizes, *defaults, *shipped}:
        recorded = regions.sizes.get(vm_size_key(size))
        for region in sorted(recorded.regions if recorded else ()):
            assert (PRICES.monthly(region, size) is None) == (region in unrecorded.get(size, [])), (size, region)
