"""Signed channels, on Nix's model (`trusted-public-keys`, `nix store verify --sigs-needed`).

A publisher with a key (`publish --sign-key FILE`, `sign_key` in orchestrate.toml: an OpenSSH ed25519 private
key, as `ssh-keygen -t ed25519` writes it) signs each package's record: its file name, sha256, size, input hash
and builder. A reader names the keys it trusts (`trusted_keys` in orchestrate.toml, `--trusted-key`: public keys
as `ssh-ed25519 AAAA… comment`, or a .pub file); `build-all --cache-channel` then takes only packages whose
bytes a trusted key signed, and `verify` names every package that is unsigned, signed by another key, or whose
bytes differ from what was signed.

Where signatures live: one file per package and key, `orchestrate-manifest.d/<subdir>/<file>.sig/<key id>.sig`
(the key id: the sha256 of the public key's OpenSSH blob, in hex), written create-only like a lookup entry, so
two publishers never write the same shared file; a reader over HTTP, which cannot list, reads the file of each
key it trusts by its name. A signature file planted under another key's id proves nothing: it verifies only
under the key it names, and it is read only for a key the reader trusts.

The signature is Ed25519 (through `cryptography`) over a fixed prefix and the record as canonical JSON.
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ..channel import LOOKUP_DIR
from ..errors import UserError
from .untrusted import MAX_JSON_BYTES, Refused, hex_or_none, json_object, number, shown, text

SIGNED_PREFIX = b"rocm-stack orchestrate package signature v1\n"
SIG_SUFFIX = ".sig"
PUBLIC_KEY = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/]+={0,2}(?: [^\x00-\x1f\x7f]*)?\Z")
RECORD_FIELDS = ("file", "sha256", "size", "input_hash", "builder")


@dataclass(frozen=True)
class PublicKey:
    """An OpenSSH ed25519 public key a reader trusts or a signature names."""

    text: str  # "ssh-ed25519 AAAA… comment"
    blob: bytes  # the key in OpenSSH's wire form (what its fingerprint hashes)

    @property
    def key_id(self) -> str:
        """The name of this key's signature files: the sha256 of its blob, in hex."""
        return hashlib.sha256(self.blob).hexdigest()

    @property
    def fingerprint(self) -> str:
        """As `ssh-keygen -l` shows it: SHA256:<base64 without padding>."""
        return "SHA256:" + base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")

    @property
    def name(self) -> str:
        """The key's comment (ci@team) and fingerprint, for a line that says whose signature it is."""
        comment = self.text.split(" ", 2)[2].strip() if self.text.count(" ") >= 2 else ""
        return f"{comment} ({self.fingerprint})" if comment else self.fingerprint

    def verify(self, signature: bytes, message: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.blob[-32:]).verify(signature, message)
            return True
        except (InvalidSignature, ValueError):
            return False


def parse_public_key(value: str, where: str) -> PublicKey:
    """`ssh-ed25519 AAAA… [comment]`, or the path of a .pub file holding one; UserError naming `where` else."""
    value = value.strip()
    if not value.startswith("ssh-"):
        path = Path(value).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{where}: {value!r} is neither a public key (ssh-ed25519 AAAA…) nor a readable .pub file "
                            f"({getattr(exc, 'strerror', None) or type(exc).__name__}): pass the key's line, e.g. the "
                            "content of ~/.ssh/id_ed25519.pub") from None
    key = _public_key(value)
    if key is None:
        raise UserError(f"{where}: {shown(value[:60])}… is no OpenSSH ed25519 public key: pass a line as "
                        "`ssh-keygen -t ed25519` writes it into the .pub file (ssh-ed25519 AAAA… comment)")
    return key


def _public_key(value: str) -> PublicKey | None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(value, str) or not PUBLIC_KEY.match(value):
        return None
    try:
        loaded = serialization.load_ssh_public_key(value.encode())
    except (ValueError, TypeError):
        return None
    if not isinstance(loaded, Ed25519PublicKey):
        return None
    return PublicKey(value, base64.b64decode(value.split()[1]))


def trusted_keys(values: list[str], where: str) -> list[PublicKey]:
    keys = [parse_public_key(v, where) for v in values]
    return list({k.key_id: k for k in keys}.values())


class SigningKey:
    """A publisher's private key (an OpenSSH ed25519 private key file) and its public half."""

    def __init__(self, path: Path):
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        path = Path(path).expanduser()
        fix = "pass an OpenSSH ed25519 private key as `ssh-keygen -t ed25519 -N '' -f FILE` writes it"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UserError(f"signing key {path} cannot be read ({exc.strerror}): {fix}") from None
        try:
            private = serialization.load_ssh_private_key(data, password=None)
        except TypeError:  # encrypted, and no passphrase given
            raise UserError(f"signing key {path} is protected by a passphrase, which a publish cannot type: keep an "
                            "unencrypted copy where only this job can read it (`ssh-keygen -p -N '' -f COPY`), as CI "
                            "keeps a secret") from None
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise UserError(f"signing key {path} is no OpenSSH private key ({' '.join(str(exc).split())[:80]}): "
                            f"{fix}") from None
        if not isinstance(private, Ed25519PrivateKey):
            raise UserError(f"signing key {path} is a {type(private).__name__.removesuffix('PrivateKey')} key, not "
                            f"ed25519: {fix}")
        self._private = private
        raw = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        comment = _comment_of(path)
        self.public = PublicKey(raw.decode() + (f" {comment}" if comment else ""), base64.b64decode(raw.split()[1]))

    def sign(self, record: dict) -> bytes:
        """The signature file's bytes for `record` (RECORD_FIELDS)."""
        signature = self._private.sign(signed_message(record))
        return json.dumps({"key": self.public.text, "record": record,
                           "signature": base64.b64encode(signature).decode()}, indent=1, sort_keys=True).encode()


def _comment_of(path: Path) -> str:
    """The comment of the key's .pub file beside it (ci@team), which names the signer; "" without one."""
    try:
        parts = path.with_name(path.name + ".pub").read_text(encoding="utf-8").split(None, 2)
    except (OSError, UnicodeDecodeError):
        return ""
    comment = parts[2].strip() if len(parts) == 3 else ""
    return comment if comment and not re.search(r"[\x00-\x1f\x7f]", comment) and len(comment) < 200 else ""


def package_record(file: str, sha256: str, size: int, input_hash: str, builder: str) -> dict:
    return {"file": file, "sha256": sha256, "size": size, "input_hash": input_hash, "builder": builder}


def signed_message(record: dict) -> bytes:
    return SIGNED_PREFIX + json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def signature_path(file: str, key: PublicKey) -> str:
    return f"{LOOKUP_DIR}/{file}{SIG_SUFFIX}/{key.key_id}{SIG_SUFFIX}"


def signature_folder(file: str) -> str:
    return f"{LOOKUP_DIR}/{file}{SIG_SUFFIX}"


@dataclass
class Signature:
    key: PublicKey | None  # the key the file names (None: none that parses)
    record: dict | None
    valid: bool  # the signature verifies under `key`
    path: str
    why: str = ""  # why it is refused, where it is


def parse_signature(raw: bytes | None, path: str, file: str) -> Signature | None:
    """A signature file's content, checked; None when there is none."""
    if raw is None:
        return None
    try:
        document = json_object(raw, path, MAX_JSON_BYTES)
        key = _public_key(document.get("key"))
        if key is None:
            raise Refused(f"{shown(path)}: names no ed25519 public key")
        record = _checked_record(document.get("record"), path, file)
        signature = base64.b64decode(text(document.get("signature"), f"{shown(path)}: signature", 200), validate=True)
    except (Refused, ValueError) as exc:
        return Signature(None, None, False, path, str(exc))
    return Signature(key, record, key.verify(signature, signed_message(record)), path)


def _checked_record(record, path: str, file: str) -> dict:
    if not isinstance(record, dict) or set(record) != set(RECORD_FIELDS):
        raise Refused(f"{shown(path)}: its record does not hold exactly {', '.join(RECORD_FIELDS)}")
    if record["file"] != file:
        raise Refused(f"{shown(path)}: signs another file ({shown(str(record['file']))[:120]})")
    for key in ("sha256", "input_hash"):
        if record[key] is None:
            raise Refused(f"{shown(path)}: {key} is null")
        hex_or_none(record[key], f"{shown(path)}: {key}")
    number(record["size"], f"{shown(path)}: size")
    text(record["builder"], f"{shown(path)}: builder", 256)
    return record


def read_signature(store, path: str, file: str) -> Signature | None:
    try:
        raw = store.read(path, limit=MAX_JSON_BYTES)
    except Refused as exc:
        return Signature(None, None, False, path, str(exc))
    return parse_signature(raw, path, file)


@dataclass
class Verdict:
    signer: PublicKey | None  # the trusted key whose valid signature matches, or None
    problem: str = ""  # what a reader who trusts `keys` is told otherwise
    kind: str = ""  # unsigned, untrusted-signature, signed-record-differs, refused-signature

    @property
    def ok(self) -> bool:
        return self.signer is not None


def differences(record: dict, sha256: str | None, size: int | None, input_hash: str | None) -> list[str]:
    """What in `record` disagrees with the package as it is (a None is not compared)."""
    found = []
    if sha256 is not None and record["sha256"] != sha256:
        found.append(f"sha256 {sha256[:12]}… but signed {record['sha256'][:12]}…")
    if size is not None and record["size"] != size:
        found.append(f"size {size} but signed {record['size']}")
    if input_hash is not None and record["input_hash"] != input_hash:
        found.append(f"input hash {input_hash[:12]}… but signed {record['input_hash'][:12]}…")
    return found


def judge(store, file: str, keys: list[PublicKey], sha256: str | None, size: int | None = None,
          input_hash: str | None = None) -> Verdict:
    """Whether a key of `keys` signed package `file` as it is (sha256, size, input hash: each compared where
    given). Reads only the signature files of the trusted keys, plus a listing where the store can list, to say
    whose signatures there are instead."""
    seen = []
    for key in keys:
        signature = read_signature(store, signature_path(file, key), file)
        if signature is None:
            continue
        if signature.why or not signature.valid or signature.key.key_id != key.key_id:
            seen.append(f"a signature file for {key.name} that does not verify"
                        + (f" ({signature.why.split(': ', 1)[-1]})" if signature.why else " (forged, or damaged)"))
            continue
        wrong = differences(signature.record, sha256, size, input_hash)
        if wrong:
            return Verdict(None, f"its bytes differ from what {key.name} signed ({'; '.join(wrong)}): it was replaced "
                           "after signing, or is damaged", "signed-record-differs")
        return Verdict(key)
    if seen:
        return Verdict(None, "; ".join(seen), "refused-signature")
    others = other_signers(store, file, keys)
    if others:
        return Verdict(None, f"signed only by {', '.join(others)}, a key you do not trust", "untrusted-signature")
    return Verdict(None, "not signed by a key you trust" if others is None else "unsigned", "unsigned")


def other_signers(store, file: str, keys: list[PublicKey]) -> list[str] | None:
    """The names of the keys (other than `keys`) with a valid signature of `file`; None where the store cannot
    list (HTTP): then only the trusted keys' files can be read."""
    listed = store.list(signature_folder(file))
    if listed is None:
        return None
    trusted = {k.key_id for k in keys}
    names = []
    for path in listed:
        if not path.endswith(SIG_SUFFIX) or path.rsplit("/", 1)[-1][:-len(SIG_SUFFIX)] in trusted:
            continue
        signature = read_signature(store, path, file)
        if signature and signature.valid:
            names.append(signature.key.name)
    return names


def all_signatures(store) -> dict[str, list[str]] | None:
    """package file -> the paths of its signature files, from one listing (None: the store cannot list)."""
    listed = store.list(LOOKUP_DIR)
    if listed is None:
        return None
    found: dict[str, list[str]] = {}
    for path in listed:
        folder, _, name = path.rpartition("/")
        if folder.endswith(SIG_SUFFIX) and name.endswith(SIG_SUFFIX):
            found.setdefault(folder[len(LOOKUP_DIR) + 1:-len(SIG_SUFFIX)], []).append(path)
    return found


def loopback(host: str) -> bool:
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plain_http_risk(url: str, signed: bool) -> str | None:
    """The risk of reading `url` over plain HTTP from another machine, in words (None: none, or https, or this
    machine): anyone on the path reads what is fetched, and without trusted keys can change it too."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http" or loopback(parts.hostname or ""):
        return None
    if signed:
        return (f"{url} is plain HTTP: anyone on the network path sees what you fetch (a change to a package is caught "
                "by its signature); put TLS in front of it (docs/sharing.md, Serving over TLS)")
    return (f"{url} is plain HTTP from another machine: anyone on the network path can read and change what you "
            "fetch, and nothing here would notice; put TLS in front of it (docs/sharing.md, Serving over TLS), or "
            "name the team's signing keys with trusted_keys / --trusted-key so that changed packages are refused")
