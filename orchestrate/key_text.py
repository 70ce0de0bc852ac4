"""What a signing key and a trusted key look like as text: the checkers of --sign-key, --trusted-key, sign_key and
trusted_keys (share/signing.py reads and checks the keys themselves, with `cryptography`)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

ED25519_PUBLIC_KEY = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/]+={0,2}(?: [^\x00-\x1f\x7f]*)?\Z")


def public_key(text: str) -> str:
    """A key a reader trusts: an OpenSSH ed25519 public key line, or a .pub file holding one (share/signing.py
    reads it whole)."""
    if ED25519_PUBLIC_KEY.match(text.strip()) or (not text.startswith("ssh-") and Path(text).expanduser().is_file()):
        return text
    raise argparse.ArgumentTypeError(f"{text[:60]!r} is no ed25519 public key: pass a line as `ssh-keygen -t ed25519` "
                                     "writes it (ssh-ed25519 AAAA… ci@team), or its .pub file")


def key_file(text: str) -> str:
    """A private key file (share/signing.py reads and checks it when a publish signs)."""
    if not text or Path(text).expanduser().is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is no key file: pass the private key `ssh-keygen -t ed25519` "
                                         "wrote, e.g. ~/.ssh/id_ed25519")
    return text
