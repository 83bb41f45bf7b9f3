"""Reading Azure Resource Manager, read-only, for ``aksgpu preflight``: a bearer token from the Azure CLI (or
``AKSGPU_ARM_TOKEN``) sent to management.azure.com only, over TLS verified against the system's roots, never
printed. I/O: the HTTP calls and the ``az`` subprocess live here; what the answers mean is ``aks_gpu.azure.quota``'s.

What an attacker on the path or behind a redirect could try, and what stops it: a redirect (3xx) is never followed,
so the token never leaves for another host; a ``nextLink`` to another host is refused before any request; an answer
past ``MAX_RESPONSE_BYTES`` is refused, by its Content-Length or once that many bytes have come; every message that
quotes ARM or the CLI goes through ``redact`` (the token, whole or in part, and anything shaped like a credential).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from aks_gpu.config.problems import clipped
from aks_gpu.redaction import redact_known, scrub_secret_shapes

ARM_BASE = "https://management.azure.com"
# The resource the token is for: "az account get-access-token --resource https://management.azure.com/"
# (https://learn.microsoft.com/cli/azure/account#az-account-get-access-token).
ARM_RESOURCE = "https://management.azure.com/"
TOKEN_ENV = "AKSGPU_ARM_TOKEN"
# A usages list is some 100-200 rows of ~200 bytes; a provider is a few KiB. Past this it is not ARM's answer.
MAX_RESPONSE_BYTES = 4 << 20
# Pages of one list followed at most (usages fit in one today).
MAX_PAGES = 20
TIMEOUT_S = 30.0
AZ_TIMEOUT_S = 60
MAX_AZ_OUTPUT_BYTES = 1 << 20
# What an ARM error message is cut to.
MAX_MESSAGE_CHARS = 300
# A bearer token is base64url and dots (a JWT); anything else (a space, a newline: a header injection) is refused.
_TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
# Plain HTTP is spoken to the loopback address only: a test's server (tests/cli/test_preflight.py).
_LOOPBACK = "127.0.0.1"

ErrorKind = Literal["auth", "unreachable", "response"]


class ArmError(RuntimeError):
    """ARM could not be read: ``kind`` says whether the login (auth), the network (unreachable) or the answer
    (response) is at fault. The message is safe to print."""

    def __init__(self, message: str, kind: ErrorKind) -> None:
        super().__init__(message)
        self.kind = kind


def redact(text: str, secrets: list[str]) -> str:
    return scrub_secret_shapes(redact_known(text, secrets))


@dataclass(frozen=True)
class Login:
    token: str
    # The subscription the CLI login defaults to, when the token came from it.
    subscription: str | None
    source: str


def _checked_token(token: str, source: str) -> str:
    token = token.strip()
    if not token or not _TOKEN.fullmatch(token):
        raise ArmError(f"the token from {source} is not a bearer token (empty, or holds spaces or other characters)", "auth")
    return token


def get_login(
    environment: Mapping[str, str] = os.environ, run: Callable[[list[str]], subprocess.CompletedProcess[bytes]] | None = None
) -> Login:
    """A token for ARM: ``AKSGPU_ARM_TOKEN`` when set, else the Azure CLI's login. ``ArmError`` (auth) saying how to
    sign in otherwise."""
    if environment.get(TOKEN_ENV):
        return Login(_checked_token(environment[TOKEN_ENV], TOKEN_ENV), None, TOKEN_ENV)
    arguments = ["account", "get-access-token", "--resource", ARM_RESOURCE, "--output", "json"]
    try:
        done = (run or _run_az)(arguments)
    except FileNotFoundError:
        raise ArmError(f"no Azure CLI (az) on PATH and no {TOKEN_ENV}: install az and run az login", "auth") from None
    except subprocess.TimeoutExpired:
        waited = f"az account get-access-token took over {AZ_TIMEOUT_S}s (waiting on a login?): run az login"
        raise ArmError(waited, "auth") from None
    except OSError as error:
        raise ArmError(f"could not run az: {error.strerror or type(error).__name__}", "auth") from None
    if done.returncode != 0:
        said = redact(clipped(done.stderr[:4096].decode("utf-8", "replace").strip(), MAX_MESSAGE_CHARS), [])
        raise ArmError(f"az account get-access-token failed ({said or f'exit {done.returncode}'}): run az login", "auth")
    if len(done.stdout) > MAX_AZ_OUTPUT_BYTES:
        raise ArmError("az account get-access-token wrote more than a token: not read", "auth")
    try:
        answer = json.loads(done.stdout.decode("utf-8", "replace"))
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("accessToken"), str):
        raise ArmError("az account get-access-token did not answer with an accessToken", "auth")
    subscription = answer.get("subscription")
    return Login(
        _checked_token(answer["accessToken"], "az account get-access-token"),
        subscription if isinstance(subscription, str) else None,
        "the Azure CLI login",
    )


def _run_az(arguments: list[str]) -> subprocess.CompletedProcess[bytes]:
    az = shutil.which("az")
    if az is None:
        raise FileNotFoundError("az")
    return subprocess.run([az, *arguments], capture_output=True, timeout=AZ_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)


class ArmClient:
    """GETs against ARM with one token. ``base`` is management.azure.com; a test may name ``http://127.0.0.1:PORT``,
    and nothing else is accepted, so no configuration can send the token to another host."""

    def __init__(self, token: str, base: str = ARM_BASE, *, timeout: float = TIMEOUT_S, limit: int = MAX_RESPONSE_BYTES) -> None:
        parts = urlsplit(base)
        secure = parts.scheme == "https" and parts.hostname == "management.azure.com" and parts.port in (None, 443)
        loopback = parts.scheme == "http" and parts.hostname == _LOOPBACK
        if not (secure or loopback) or parts.path not in ("", "/") or parts.username or parts.query:
            raise ValueError(f"ARM base {base!r}: only {ARM_BASE} (or a test's http://{_LOOPBACK}:PORT)")
        self._token = token
        self._scheme = parts.scheme
        self._host = parts.hostname or ""
        self._port = parts.port
        self._timeout = timeout
        self._limit = limit

    def secrets(self) -> list[str]:
        return [self._token]

    def _safe(self, text: str) -> str:
        return redact(text, self.secrets())

    def get(self, path_and_query: str) -> Any:
        """The JSON ARM answers for ``path_and_query`` (``/subscriptions/...?api-version=...``)."""
        if not path_and_query.startswith("/"):
            raise ValueError("a path starts with /")
        connection: http.client.HTTPConnection
        if self._scheme == "https":
            # Verified: the system's CA roots and the host name (ssl.create_default_context checks both).
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        where = path_and_query.split("?")[0]
        try:
            connection.request(
                "GET",
                path_and_query,
                headers={
                    "Authorization": f"Bearer {self._token}",
                    "Accept": "application/json",
                    "User-Agent": "aksgpu-preflight",
                },
            )
            response = connection.getresponse()
            status = response.status
            if 300 <= status < 400:
                target = urlsplit(response.getheader("Location") or "").hostname or "(no Location)"
                raise ArmError(
                    f"ARM answered GET {where} with a redirect ({status}) to {self._safe(target)}: not followed (the token is"
                    " sent to management.azure.com only)",
                    "response",
                )
            declared = response.getheader("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > self._limit:
                size = f"ARM's answer to GET {where} is {int(declared):,} bytes, over the {self._limit:,} byte limit"
                raise ArmError(size, "response")
            body = response.read(self._limit + 1)
        except ArmError:
            raise
        except ssl.SSLError as error:
            said = self._safe(error.reason or str(error))
            raise ArmError(f"TLS to {self._host} failed ({said}): nothing was sent", "unreachable") from None
        except (OSError, http.client.HTTPException) as error:
            said = self._safe(clipped(str(error) or type(error).__name__, MAX_MESSAGE_CHARS))
            raise ArmError(f"cannot reach {self._host} ({said}): check the network or proxy", "unreachable") from None
        finally:
            connection.close()
        if len(body) > self._limit:
            raise ArmError(f"ARM's answer to GET {where} is over the {self._limit:,} byte limit: not read", "response")
        if status != 200:
            raise self._status_error(status, where, body)
        try:
            return json.loads(body.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            raise ArmError(f"ARM's answer to GET {where} is not JSON", "response") from None

    def _status_error(self, status: int, where: str, body: bytes) -> ArmError:
        code, message = "", ""
        try:
            error = json.loads(body.decode("utf-8", "replace")).get("error") or {}
            code, message = str(error.get("code") or ""), str(error.get("message") or "")
        except (ValueError, AttributeError, RecursionError):
            pass
        said = self._safe(clipped(f"{code}: {message}" if code or message else f"HTTP {status}", MAX_MESSAGE_CHARS))
        if status == 401:
            return ArmError(f"ARM refused the token (401, {said}): run az login (or renew {TOKEN_ENV})", "auth")
        if status == 403:
            return ArmError(f"ARM denied GET {where} (403, {said}): the identity needs Reader on the subscription", "auth")
        return ArmError(f"ARM answered GET {where} with {status} ({said})", "response")

    def get_list(self, path_and_query: str) -> list[Any]:
        """Every item of a paged ARM list (``value``, then ``nextLink`` while there is one, on this host only)."""
        items: list[Any] = []
        next_path: str | None = path_and_query
        for _ in range(MAX_PAGES):
            if next_path is None:
                return items
            page = self.get(next_path)
            if not isinstance(page, dict) or not isinstance(page.get("value"), list):
                raise ArmError(f"ARM's answer to GET {path_and_query.split('?')[0]} is not a list (no `value`)", "response")
            items.extend(page["value"])
            link = page.get("nextLink")
            next_path = self._same_host_path(link) if link else None
        raise ArmError(f"GET {path_and_query.split('?')[0]}: more than {MAX_PAGES} pages, not read on", "response")

    def _same_host_path(self, link: Any) -> str:
        parts = urlsplit(str(link))
        if (parts.scheme, parts.hostname, parts.port) != (self._scheme, self._host, self._port) or parts.username:
            raise ArmError(
                f"ARM's nextLink points at {self._safe(parts.hostname or '(no host)')}: not followed (the token is sent to"
                f" {self._host} only)",
                "response",
            )
        return parts.path + (f"?{parts.query}" if parts.query else "")
