"""``aksgpu preflight``: before ``pulumi up``, read (never change) the subscription's compute quota in the stack's region,
the VM sizes it is offered there and its resource provider registrations, and say whether the stack fits."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any
from urllib.parse import quote

from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_stack_arguments, err, load_stack, out, report_warnings, safe

# The Compute usages list: "GET https://management.azure.com/subscriptions/{subscriptionId}/providers/Microsoft.Compute/
# locations/{location}/usages?api-version=2024-07-01" (https://learn.microsoft.com/rest/api/compute/usage/list).
USAGES_API_VERSION = "2024-07-01"
# Resource Skus - List: "GET https://management.azure.com/subscriptions/{subscriptionId}/providers/Microsoft.Compute/
# skus?api-version=2021-07-01&$filter={$filter}", the filter "location eq 'westus'"
# (https://learn.microsoft.com/rest/api/compute/resource-skus/list): what `az vm list-skus --location L --all` reads.
SKUS_API_VERSION = "2021-07-01"
# A region's skus list is every Compute SKU there (VM sizes, disks, host groups...) with its capabilities: megabytes,
# well past the usages' limit (arm.MAX_RESPONSE_BYTES). Past this it is not ARM's answer.
SKUS_MAX_RESPONSE_BYTES = 64 << 20
# Providers - Get: GET /subscriptions/{subscriptionId}/providers/{resourceProviderNamespace}?api-version=2021-04-01,
# `registrationState` (https://learn.microsoft.com/rest/api/resources/providers/get).
PROVIDERS_API_VERSION = "2021-04-01"
# Features - Get: GET /subscriptions/{id}/providers/Microsoft.Features/providers/{namespace}/features/{name}
# ?api-version=2021-07-01, `properties.state` (https://learn.microsoft.com/rest/api/resources/features/get).
FEATURES_API_VERSION = "2021-07-01"
# The base every request goes to; tests point it at their own server on 127.0.0.1 (ArmClient refuses anything else).
ARM_BASE = "https://management.azure.com"
QUOTA_COLUMNS = ("quota", "portal label", "needed", "limit", "used", "free", "verdict")
# An ARM location name: lowercase letters and digits (swedencentral); a provider namespace: Microsoft.Xyz.
_LOCATION = re.compile(r"^[a-z0-9]{2,40}$")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "preflight",
        help=COMMANDS["preflight"],
        description="Read the Azure subscription's compute usage in the stack's region and its resource provider "
        "registrations, and compare them with what the stack needs (the quota `aksgpu plan` prints): per quota, needed, "
        "limit, used, free and a verdict. Read-only. The token comes from AKSGPU_ARM_TOKEN or `az account "
        "get-access-token`, and goes to management.azure.com only. Exit 0: everything fits; 1: a quota is short, not "
        "offered or unknown, or a provider is not registered; 2: usage, config, login or network error. It also reads "
        "the region's Compute SKUs (az vm list-skus) and exits 1 when a pool's VM size is not offered to the "
        "subscription there.",
    )
    add_stack_arguments(parser)
    tables.add_wide_argument(parser)
    parser.add_argument(
        "--subscription",
        metavar="ID",
        help="the subscription id (default: azure-native:subscriptionId, ARM_SUBSCRIPTION_ID, else the az login's)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout, nothing else")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aks_gpu.azure.arm import ArmClient, ArmError, get_login
    from aks_gpu.azure.prerequisites import missing_prerequisites, subscription_prerequisites
    from aks_gpu.azure.quota import SUBSCRIPTION_ID, UsageShapeError, check_quota, quota_plan, read_usages
    from aks_gpu.azure.vm_skus import SkuShapeError, read_skus, size_offers
    from aks_gpu.config.models import StackConfig

    tables.apply_wide(args)
    loaded = load_stack(args)
    report_warnings(loaded)
    config = loaded.validated.config
    if not isinstance(config, StackConfig):
        return _usage_error("the stack has no cluster section: nothing to check")
    plan = quota_plan(config)
    if not _LOCATION.fullmatch(plan.location):
        return _usage_error(f"location {plan.location!r} is not an Azure region name (such as swedencentral)")
    try:
        login = get_login()
    except ArmError as error:
        return _usage_error(str(error))
    configured = loaded.raw.get("azure-native:subscriptionId")
    subscription = args.subscription or (configured if isinstance(configured, str) else None)
    subscription = subscription or os.environ.get("ARM_SUBSCRIPTION_ID") or login.subscription
    if not subscription:
        return _usage_error("no subscription: pass --subscription, set azure-native:subscriptionId, or run az account set")
    if not SUBSCRIPTION_ID.fullmatch(subscription):
        return _usage_error(f"subscription {safe(subscription, 60)!r} is not a subscription id (a GUID)")

    client = ArmClient(login.token, ARM_BASE)
    needed = [item for item in subscription_prerequisites(config) if item.kind != "role"]
    root = f"/subscriptions/{subscription}"
    try:
        usages_path = f"{root}/providers/Microsoft.Compute/locations/{plan.location}/usages"
        rows = client.get_list(f"{usages_path}?api-version={USAGES_API_VERSION}")
        usages = read_usages({"value": rows})
        skus_client = ArmClient(login.token, ARM_BASE, limit=SKUS_MAX_RESPONSE_BYTES)
        location_filter = quote(f"location eq '{plan.location}'")
        skus_path = f"{root}/providers/Microsoft.Compute/skus?api-version={SKUS_API_VERSION}&$filter={location_filter}"
        skus = read_skus(skus_client.get_list(skus_path))
        providers: dict[str, str] = {}
        features: dict[str, str] = {}
        for item in needed:
            if item.kind == "provider":
                answer = client.get(f"{root}/providers/{item.namespace}?api-version={PROVIDERS_API_VERSION}")
                providers[item.namespace] = str(answer.get("registrationState", "")) if isinstance(answer, dict) else ""
            else:
                path = f"{root}/providers/Microsoft.Features/providers/{item.namespace}/features/{item.feature}"
                answer = client.get(f"{path}?api-version={FEATURES_API_VERSION}")
                state = (answer.get("properties") or {}).get("state", "") if isinstance(answer, dict) else ""
                features[f"{item.namespace}/{item.feature}"] = str(state)
    except ArmError as error:
        return _usage_error(str(error))
    except UsageShapeError as error:
        return _usage_error(f"the usages ARM answered are not the documented list: {error}")
    except SkuShapeError as error:
        return _usage_error(f"the Compute SKUs ARM answered are not the documented list: {error}")

    checks = check_quota(plan, usages)
    offers = size_offers(((need.pool, need.vm_size) for need in plan.pools), skus, plan.location)
    missing = missing_prerequisites(needed, providers, features)
    # What to ask for: the family's usage plus the need (a quota request sets the new limit).
    limits = {check.line.family: (check.used or 0) + check.line.vcpus for check in checks if check.verdict == "short"}
    short = [check for check in checks if check.verdict != "enough"]
    fits = not short and not missing and not plan.unknown and all(offer.offered for offer in offers)
    if args.json:
        report = _report(loaded.stack, subscription, plan, checks, needed, missing, fits, limits, offers)
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return EXIT_OK if fits else EXIT_FAILED
    _print(loaded.stack, subscription, plan, checks, needed, missing, limits, offers)
    return EXIT_OK if fits else EXIT_FAILED


def _usage_error(message: str) -> int:
    err.print(f"[bold red]aksgpu preflight[/]: {safe(message)}")
    return EXIT_USAGE


def _report(
    stack: str, subscription: str, plan: Any, checks: list[Any], needed: list[Any], missing: list[Any], fits: bool,
    limits: dict[str, int], offers: list[Any],
) -> dict[str, Any]:
    missing_names = {item.what for item in missing}
    return {
        "stack": stack,
        "subscription": subscription,
        "location": plan.location,
        "fits": fits,
        "quotas": [
            {
                "quota": check.line.family,
                "localName": check.line.local_name,
                "kind": check.line.kind,
                "pools": list(check.line.pools),
                "needed": check.line.vcpus,
                "limit": check.limit,
                "used": check.used,
                "free": check.free,
                "verdict": check.verdict,
                "unknownPools": list(check.line.unknown),
            }
            for check in checks
        ],
        "unknownSizes": [{"pool": need.pool, "vmSize": need.vm_size} for need in plan.unknown],
        # Per VM size the pools run: whether the subscription is offered it in the location, and the restrictions
        # the skus list gives it there (reasonCode NotAvailableForSubscription or QuotaId).
        "vmSizes": [
            {
                "vmSize": offer.vm_size,
                "pools": list(offer.pools),
                "offered": offer.offered,
                "offer": offer.offer,
                "zones": list(offer.zones),
                "restrictions": [
                    {"type": r.type, "reasonCode": r.reason, "locations": list(r.locations), "zones": list(r.zones)}
                    for r in offer.restrictions
                ],
            }
            for offer in offers
        ],
        "providers": [
            {"what": item.what, "registered": item.what not in missing_names, "command": item.command} for item in needed
        ],
        "requests": plan.request_commands(subscription, limits) if limits else [],
    }


def _print(
    stack: str, subscription: str, plan: Any, checks: list[Any], needed: list[Any], missing: list[Any], limits: dict[str, int],
    offers: list[Any],
) -> None:
    title = f"compute quota for stack {safe(stack)} in {safe(plan.location)} (subscription {safe(subscription)})"
    styles = {"enough": "green", "short": "bold red", "not offered": "bold red", "unknown": "yellow"}
    rows: list[tuple[str, ...]] = []
    entries: list[tuple[str, ...]] = []
    for check in checks:
        limit, used, free = (str(value) if value is not None else "-" for value in (check.limit, check.used, check.free))
        needed_text = safe(f"{check.line.vcpus}" + (" + unknown" if check.line.unknown else ""))
        verdict = f"[{styles[check.verdict]}]{check.verdict}[/]"
        rows.append((safe(check.line.family), safe(check.line.local_name or "-"), needed_text, limit, used, free, verdict))
        # the list: the verdict and the quota first, as the audit's severity and id
        counts = f"needed {needed_text}, limit {limit}, used {used}, free {free}"
        entries.append((verdict, safe(check.line.family), safe(check.line.local_name or ""), counts))
    if tables.print_table(
        out,
        title,
        QUOTA_COLUMNS,
        rows,
        right=("needed", "limit", "used", "free"),
        keep=("quota", "needed", "limit", "used", "free", "verdict"),
        flexible={"portal label": 0},
        lead=2,
        bare=("vCPUs",),
        listed=(("verdict", "quota", "portal label", "vCPUs"), entries),
    ):
        out.print(f"[dim]{tables.list_note(json=True)}[/]")
    for need in plan.unknown:
        out.print(
            f"[yellow]unknown[/] {safe(need.pool)}: no quota facts for {safe(need.vm_size)}: read its family with `az vm "
            f"list-skus --location {safe(plan.location)} --size {safe(need.vm_size)}` and check that quota by hand"
        )
    for check in checks:
        if check.verdict == "not offered":
            out.print(
                f"[bold red]not offered[/] {safe(check.line.family)}: {safe(plan.location)} lists no such quota for this"
                " subscription: the size is not sold there, or not to this subscription (az vm list-skus --location"
                f" {safe(plan.location)})"
            )
    if limits:
        from aks_gpu.azure.quota import QUOTA_REQUEST_DOC

        out.print(f"request more on the portal's Quotas page ({QUOTA_REQUEST_DOC}) or:", markup=False)
        for command in plan.request_commands(subscription, limits):
            # one line, never broken: the terminal wraps it, and it copies whole
            out.print(f"  {command}", markup=False, soft_wrap=True)
    _print_offers(plan.location, offers)
    missing_names = {item.what for item in missing}
    for item in needed:
        if item.what in missing_names:
            out.print(f"[bold red]not registered[/] {safe(item.what)} ({safe(item.why)}):")
            out.print(f"  {item.command}", markup=False, soft_wrap=True)
        else:
            out.print(f"[green]registered[/] {safe(item.what)}")


def _print_offers(location: str, offers: list[Any]) -> None:
    from aks_gpu.azure.vm_skus import SKU_NOT_AVAILABLE_DOC

    where = safe(location)
    for offer in offers:
        pools = safe(", ".join(offer.pools))
        size = safe(offer.vm_size)
        zone_closed = sorted({zone for r in offer.restrictions if r.type.lower() == "zone" for zone in r.zones})
        if offer.offer == "offered":
            zones = f", zones {safe(','.join(offer.zones))}" if offer.zones else ""
            closed = f" (zones {safe(','.join(zone_closed))} not for this subscription)" if zone_closed else ""
            out.print(f"[green]offered[/] {size} ({pools}) in {where}{zones}{closed}")
        elif offer.offer == "restricted":
            reasons = safe(", ".join(sorted({f"{r.reason or '?'} ({r.type})" for r in offer.restrictions})))
            out.print(
                f"[bold red]not offered[/] {size} ({pools}): {where} has it but not for this subscription: {reasons};"
                f" choose another region or size, or ask Azure support for it ({SKU_NOT_AVAILABLE_DOC})"
            )
        else:
            out.print(
                f"[bold red]not offered[/] {size} ({pools}): {where} lists no such VM size (`az vm list-skus --location"
                f" {where} --size {size} --all --output table`); choose another region or size"
            )
