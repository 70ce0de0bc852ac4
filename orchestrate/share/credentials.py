"""Credentials from the places pixi and rattler-build read, held so that they never reach a log.

Order, as in rattler-build: the usual environment variables of each service, then the JSON auth store
named by RATTLER_AUTH_FILE, then ~/.rattler/credentials.json (the file `pixi auth login` and
`rattler-build auth login` write when no OS keyring is available). Package-server uploads through
py-rattler-build also consult the OS keyring themselves when we pass no key.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

AUTH_FILE_ENV = "RATTLER_AUTH_FILE"
DEFAULT_AUTH_FILE = Path.home() / ".rattler" / "credentials.json"
# Every secret we have handed out this process, so error text from libraries can be scrubbed.
_KNOWN_SECRETS: set[str] = set()


class Secret:
    """A credential value: prints as *** so that no f-string or traceback can leak it."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value
        if value:
            _KNOWN_SECRETS.add(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


@dataclass(frozen=True)
class S3Keys:
    access_key_id: Secret
    secret_access_key: Secret
    session_token: Secret | None
    origin: str  # where they came from, for messages (never the values)


def redact(text: str) -> str:
    for secret in sorted(_KNOWN_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def auth_store_path() -> Path | None:
    named = os.environ.get(AUTH_FILE_ENV)
    if named:
        return Path(named)
    return DEFAULT_AUTH_FILE if DEFAULT_AUTH_FILE.is_file() else None


def _auth_store() -> dict:
    path = auth_store_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{AUTH_FILE_ENV} names {path}, which does not exist: fix the variable or unset it") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"auth store {path} cannot be read ({type(exc).__name__}): fix or remove the file") from None
    if not isinstance(data, dict):
        raise UserError(f"auth store {path} is not a JSON object of host -> credentials: fix or remove the file")
    return data


def stored_for(key: str) -> dict | None:
    """The auth-store entry for a host (wildcards like *.prefix.dev allowed) or an s3://bucket key."""
    store = _auth_store()
    if key in store:
        return store[key]
    for pattern, value in store.items():
        if "*" in pattern and fnmatch.fnmatch(key, pattern):
            return value
    return None


def s3_keys(bucket: str) -> S3Keys | None:
    """None means: let the AWS SDK's own chain (profile, SSO, instance role, OIDC) decide."""
    key_id, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        token = os.environ.get("AWS_SESSION_TOKEN")
        return S3Keys(Secret(key_id), Secret(secret), Secret(token) if token else None, "AWS_* environment variables")
    stored = (stored_for(f"s3://{bucket}") or {}).get("S3Credentials")
    if stored:
        token = stored.get("session_token")
        return S3Keys(Secret(stored["access_key_id"]), Secret(stored["secret_access_key"]),
                      Secret(token) if token else None, f"auth store entry s3://{bucket}")
    return None


def token_from_env(variable: str) -> Secret | None:
    value = os.environ.get(variable)
    return Secret(value) if value else None


def http_auth_header(host: str) -> dict[str, str]:
    """Headers for reading a channel over HTTP(S) with stored credentials (Bearer or Basic)."""
    import base64

    entry = stored_for(host) or {}
    if "BearerToken" in entry:
        Secret(entry["BearerToken"])
        return {"Authorization": f"Bearer {entry['BearerToken']}"}
    basic = entry.get("BasicHTTP") or entry.get("BasicHttp")
    if basic:
        Secret(basic["password"])
        pair = f"{basic['username']}:{basic['password']}".encode()
        return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
    return {}


def conda_token(host: str) -> str | None:
    """anaconda.org / quetz put the token in the URL path (/t/TOKEN/...)."""
    token = (stored_for(host) or {}).get("CondaToken")
    if token:
        Secret(token)
    return token
