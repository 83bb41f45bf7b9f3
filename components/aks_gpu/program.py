"""The Pulumi program's edge: Pulumi's runtime config in, a validated and resolved stack out (``load_from_pulumi``),
secret config kept secret. Used by ``__main__.py`` under ``pulumi up`` and under the offline plan alike, so both see
the same rules and messages.

Secret config stays secret. ``pulumi config set --secret`` (also with ``--path``: the whole top-level key
becomes a secure object, pulumi/pulumi ``sdk/go/common/resource/config/map.go`` ``SecureKeys``, v3.259.0)
makes the Python language host pass the key in ``PULUMI_CONFIG_SECRET_KEYS``, which the program's runner
loads with ``set_all_config`` (``sdk/python/cmd/pulumi-language-python-exec``); the values themselves come
as plain text, and the validated model that everything is built from is plain too. So the free text of each
secret key (names, ids, tags, labels, images: every string that is not one of a fixed set of choices) is
tracked as a secret: a stack transformation marks secret every resource input whose value contains one, the
program's exports go through ``SecretConfig.protect``, and messages show ``[secret]`` in its place. This is
the rule the engine itself uses to mask secret config in what it prints (plain-text replacement of every
secure value, ``pkg/engine/events.go`` ``AddGlobalSecretFilter``). Texts under 4 characters are matched only as
a whole value, so a secret ``"a"`` does not turn every input secret. Numbers and booleans of a secret key are
not tracked: they cannot be told apart from the same number elsewhere.

Resource names cannot be secret: a resource's name is a plain string of the registration, the URN is made from
it (pulumi/pulumi ``proto/pulumi/resource.proto``, ``RegisterResourceRequest.name``, "the name, for URN
purposes"), and URNs are stored and printed in clear. A secret text that becomes part of a resource name (a
pool's name makes its components' and AgentPool's names) is therefore warned about once, without the text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config
from pydantic import BaseModel

from aks_gpu.args import is_output, log_warnings
from aks_gpu.azure.prerequisites import missing_prerequisites, not_ready_message, subscription_prerequisites
from aks_gpu.config.encrypted import SECRET
from aks_gpu.config.loader import PROJECT, stack_file_path
from aks_gpu.config.models import StackConfig
from aks_gpu.config.problems import ConfigError
from aks_gpu.internal_error import debug_requested, internal_error_message
from aks_gpu.resolved.stack import ValidatedStack, validate_stack

if typing.TYPE_CHECKING:
    from aks_gpu.platform.node_provisioning import NodeClassOf

# Below this length a secret text is matched only as a whole value, not inside longer strings.
MIN_SUBSTRING = 4
# Inputs that name a resource's own type, fixed by its SDK class: never derived from config.
_TYPE_PROPS = frozenset({"api_version", "apiVersion", "kind"})


def runtime_config_map() -> dict[str, Any]:
    """Every config key Pulumi handed to this program (``namespace:key`` -> value)."""
    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return merged


def secret_keys(keys: typing.Iterable[str]) -> set[str]:
    """The config keys among ``keys`` that Pulumi says hold secrets."""
    from_env = set(runtime_config.get_config_secret_keys_env())
    return {key for key in keys if key in from_env or runtime_config.is_config_secret(key)}


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a raw config value (structured values travel as JSON text)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value[:1] in "[{" else value
        except (ValueError, RecursionError):  # not JSON, too deep or a too long number: the text itself
            decoded = value
        if isinstance(decoded, str):
            yield decoded
        else:
            yield from _strings(decoded)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _is_choice(annotation: Any) -> bool:
    """A field whose values are a fixed set of choices (a ``Literal``): not free text, not a secret."""
    if typing.get_origin(annotation) is typing.Literal:
        return True
    return any(_is_choice(arg) for arg in typing.get_args(annotation) if arg is not type(None))


def free_text(value: Any, annotation: Any = None) -> Iterator[str]:
    """The strings a user set in a validated config value, but for fixed choices. Defaults are left out: the
    user did not write them, and they are the same in every stack."""
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        for name in sorted(value.model_fields_set):
            yield from free_text(getattr(value, name), fields[name].annotation)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from free_text(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from free_text(item, _item_annotation(annotation))
    elif isinstance(value, str) and value and not (annotation is not None and _is_choice(annotation)):
        yield value


def _item_annotation(annotation: Any) -> Any:
    for arg in typing.get_args(annotation):
        if arg is not Ellipsis and arg is not type(None):
            return arg
    return None


NAME_WARNING = (
    "secret config: resource names hold a secret text of the stack's config (the first: a {type}), and Pulumi stores "
    "and prints resource names and URNs in clear, never as secrets: keep names (pool names) out of secret keys"
)


@dataclass(frozen=True)
class SecretConfig:
    """The secret texts of a stack's config, and what keeps them secret."""

    texts: frozenset[str] = frozenset()
    # Types of the resources whose names hold a secret text, in registration order (see the module's docstring).
    named: list[str] = dataclass_field(default_factory=list, compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.texts)

    def found_in(self, value: Any) -> bool:
        """Whether a plain value holds one of the texts (in a string, or as a map key)."""
        if isinstance(value, str):
            return value in self.texts or any(text in value for text in self.texts if len(text) >= MIN_SUBSTRING)
        if isinstance(value, Mapping):
            return any(self.found_in(key) or self.found_in(item) for key, item in value.items())
        if isinstance(value, list | tuple):
            return any(self.found_in(item) for item in value)
        return False

    def protect(self, value: Any) -> Any:
        """``value``, made secret if it holds a secret text (once known, for an output)."""
        if not self:
            return value
        if is_output(value) or _holds_output(value):
            return pulumi.Output.from_input(value).apply(self._secret_if_found)
        return self._secret_if_found(value)

    def _secret_if_found(self, value: Any) -> Any:
        return pulumi.Output.secret(value) if self.found_in(value) else value

    def transformation(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        """A stack transformation: every input that holds a secret text becomes a secret input."""
        if self.found_in(args.name):
            self.named.append(args.type_)
            if len(self.named) == 1:  # once; no text of the name is printed: it holds the secret
                pulumi.log.warn(NAME_WARNING.format(type=args.type_))
        props = dict(args.props or {})
        changed = {key: self.protect(value) for key, value in props.items() if key not in _TYPE_PROPS and value is not None}
        if not changed:
            return None
        return pulumi.ResourceTransformationResult(props={**props, **changed}, opts=args.opts)

    def mask(self, text: str) -> str:
        """``text`` with each secret text replaced by ``[secret]`` (longest first)."""
        for secret in sorted(self.texts, key=len, reverse=True):
            whole = len(secret) < MIN_SUBSTRING
            text = text.replace(repr(secret), repr(SECRET)) if whole else text.replace(secret, SECRET)
        # Messages show long values cut (head ... tail) and cut long lines: mask what is left of a secret too.
        for secret in self.texts:
            if len(secret) >= MIN_FRAGMENT:
                text = _mask_fragments(text, secret)
        return text


# A piece of a secret this long, anywhere in a message, is masked (the head or tail a cut value leaves).
MIN_FRAGMENT = 8


def _mask_fragments(text: str, secret: str) -> str:
    grams = {secret[start : start + MIN_FRAGMENT] for start in range(len(secret) - MIN_FRAGMENT + 1)}
    pieces: list[str] = []
    index = 0
    while index < len(text):
        if text[index : index + MIN_FRAGMENT] in grams:
            end = index + MIN_FRAGMENT
            while end < len(text) and text[index : end + 1] in secret:
                end += 1
            pieces.append(SECRET)
            index = end
        else:
            pieces.append(text[index])
            index += 1
    return "".join(pieces)


def _holds_output(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(is_output(item) or _holds_output(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(is_output(item) or _holds_output(item) for item in value)
    return False


def secret_config(raw: Mapping[str, Any], config: StackConfig | None = None) -> SecretConfig:
    """The secret texts of ``raw`` (a stack's raw config map): the free text of each of its secret keys, read
    off the validated ``config`` when there is one, else every string of those keys (for messages)."""
    secret = secret_keys(raw)
    if not secret:
        return SecretConfig()
    if config is None:
        return SecretConfig(frozenset(text for key in secret for text in _strings(raw[key]) if text))
    texts: set[str] = set()
    for key in secret:
        namespace, _, name = key.partition(":")
        if key == "azure-native:location":
            texts.add(config.location)
        elif namespace == PROJECT:
            field = next((n for n, f in StackConfig.model_fields.items() if (f.alias or n) == name), None)
            if field is not None:
                texts |= set(free_text(getattr(config, field), StackConfig.model_fields[field].annotation))
    return SecretConfig(frozenset(texts))


def stack_secrets(validated: ValidatedStack) -> SecretConfig:
    """The secret texts of the running stack's config (validated by ``load_from_pulumi``)."""
    return secret_config(runtime_config_map(), validated.config)


def load_from_pulumi() -> ValidatedStack:
    """Validate the running stack's config; on failure raise ``pulumi.RunError`` (no traceback), so
    nothing is registered and the message names the stack file and every bad key. Secret config is kept
    secret from here on (see the module's docstring); ``stack_secrets`` protects the program's exports."""
    try:
        source = str(stack_file_path(Path("."), pulumi.get_stack()))
    except ConfigError:  # only a label for the messages: Pulumi itself has read the project file
        source = f"Pulumi.{pulumi.get_stack()}.yaml"
    raw = runtime_config_map()
    try:
        validated = validate_stack(raw, source)
    except ConfigError as exc:
        masked = secret_config(raw)
        lines = (masked.mask(p.render(exc.source)) for p in exc.problems)
        raise pulumi.RunError("invalid stack config:\n" + "\n".join(lines)) from None
    except Exception as exc:
        # Any other exception is a bug: say so in one line, as the command line does (exit 3 there).
        if debug_requested():
            raise
        raise pulumi.RunError(internal_error_message(exc, "pulumi up")) from None
    given = validated.config.cluster.kubeconfig
    if given is not None and not os.access(Path(given).expanduser(), os.R_OK):
        # The given-cluster mode's one file, checked before the first resource so the message is one line.
        raise pulumi.RunError(f"invalid stack config:\n{source}: aks-gpu:cluster.kubeconfig: cannot read {given}")
    secrets = secret_config(raw, validated.config)
    if secrets:
        pulumi.runtime.register_stack_transformation(secrets.transformation)
    log_warnings(validated.warnings, validated.config, lambda p: secrets.mask(p.render(source)))
    return validated


# ---------------------------------------------------------------- the subscription, before the first resource

SKIP_SUBSCRIPTION_CHECK = "AKSGPU_SKIP_SUBSCRIPTION_CHECK"
# One `az` call: a few seconds normally; a CLI that waits on a login prompt is stopped here.
AZ_TIMEOUT_S = 60
AZ_OUTPUT_LIMIT = 16 * 1024 * 1024


def run_az(arguments: list[str]) -> str | None:
    """The Azure CLI's stdout for ``arguments``, or None when it is not installed, fails or takes too long."""
    az = shutil.which("az")
    if az is None:
        return None
    try:
        done = subprocess.run(
            [az, *arguments], capture_output=True, timeout=AZ_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or len(done.stdout) > AZ_OUTPUT_LIMIT:
        return None
    return done.stdout.decode("utf-8", errors="replace")


def _under_mocks() -> bool:
    """Whether the program runs under the mock engine (aksgpu plan, tests): nothing there may call Azure."""
    from pulumi.runtime.mocks import MockMonitor

    return isinstance(pulumi.runtime.settings.get_monitor(), MockMonitor)


def check_subscription(
    validated: ValidatedStack,
    az: Callable[[list[str]], str | None] = run_az,
    environment: Mapping[str, str] = os.environ,
    subscription_id: str | None = None,
) -> None:
    """Stop ``pulumi up`` (and preview) before the first resource, with one message, when the subscription lacks a
    resource provider or preview feature the stack needs. The states come from the Azure CLI (the provider has no
    invoke that reads them); without a usable CLI nothing is checked and a warning lists the commands. Skipped under
    the mock engine, for an adopted cluster, and with AKSGPU_SKIP_SUBSCRIPTION_CHECK set."""
    config = validated.config
    if (
        environment.get(SKIP_SUBSCRIPTION_CHECK)
        or not isinstance(config, StackConfig)
        or config.cluster.existing
        or config.cluster.kubeconfig is not None  # the given-cluster mode reaches no subscription
    ):
        return
    if az is run_az and _under_mocks():
        return
    if subscription_id is None and az is run_az:
        subscription_id = pulumi.Config("azure-native").get("subscriptionId")
    needed = [item for item in subscription_prerequisites(config) if item.kind != "role"]
    # The subscription the provider deploys to, when it is named (azure-native:subscriptionId, ARM_SUBSCRIPTION_ID);
    # else the CLI's default, which is the provider's too when it signs in through the CLI.
    subscription = subscription_id or environment.get("ARM_SUBSCRIPTION_ID")
    scope = ["--subscription", subscription] if subscription else []
    listed = az(
        ["provider", "list", "--query", "[].{namespace:namespace, state:registrationState}", "--output", "json", *scope]
    )
    try:
        rows = json.loads(listed) if listed is not None else None
    except ValueError:
        rows = None
    if not isinstance(rows, list):
        commands = "; ".join(item.command for item in needed)
        pulumi.log.warn(
            "could not read the subscription's resource provider registrations (no usable Azure CLI login); if the "
            f"first resources fail with MissingSubscriptionRegistration, run: {commands}"
        )
        return
    providers = {
        str(row.get("namespace")): str(row.get("state")) for row in rows if isinstance(row, dict) and row.get("namespace")
    }
    features: dict[str, str] = {}
    for item in needed:
        if item.kind == "feature":
            query = ["--query", "properties.state", "--output", "tsv"]
            state = az(["feature", "show", "--namespace", item.namespace, "--name", item.feature, *query, *scope])
            features[f"{item.namespace}/{item.feature}"] = (state or "").strip()
    missing = missing_prerequisites(needed, providers, features)
    if missing:
        raise pulumi.RunError(not_ready_message(missing))


# ---------------------------------------------------------------- the program itself


def run_platform(nap_node_class: NodeClassOf | None = None) -> None:
    """The platform program: what ``__main__.py`` runs under ``pulumi up``, and ``aksgpu local`` as the Automation
    API's inline program (the same resources, names and exports either way; ``aksgpu local`` points the NAP
    NodePools at Karpenter's kwok node class, ``nap_node_class``)."""
    from aks_gpu.naming import PLATFORM_COMPONENT_NAME
    from aks_gpu.platform import GpuPlatform, stack_exports

    validated = load_from_pulumi()
    # A fresh subscription stops here with one message, before the first resource (docs/deploying.md).
    check_subscription(validated)
    platform = GpuPlatform.of(
        PLATFORM_COMPONENT_NAME,
        validated.model,
        # The root's name no longer follows the stack's (a `pulumi stack rename` would have replaced everything). Stacks
        # deployed before are found under their old name, the stack's; every child is named after the root, so the
        # engine carries them all over with it (it renames a child's name prefix with its parent's alias:
        # inheritedChildAlias).
        pulumi.ResourceOptions(aliases=[pulumi.Alias(name=pulumi.get_stack())]),
        nap_node_class,
    )
    secrets = stack_secrets(validated)
    for output_name, value in stack_exports(platform).items():
        # An export that holds secret config (a cluster name set with --secret) stays a secret output.
        pulumi.export(output_name, secrets.protect(value))

