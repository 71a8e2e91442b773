"""Signed entries in kernelwright's cache: trusted results that a later run takes without redoing the work.

A candidate's job sees the cache read-only where the box can make a mount namespace (isolation/plan.py); where it
cannot (a subreaper box), the job could rewrite an entry. So every trusted entry carries an HMAC-SHA256 of its body
under this cache's secret (``keys/digest.key``, hidden from a candidate's box), and an entry whose digest does not
match is treated as missing (integrity #33): the work is done again.

    signed.write(path, key, {"passing": [...]})     # key: what the entry answers (its cache key)
    body = signed.read(path, key)                   # the body, or None (missing, unreadable or not signed here)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from kernelwright.config import config

log = logging.getLogger(__name__)


def secret() -> bytes:
    """This cache's secret, made on first use (0600 in ``keys/``)."""
    path = Path(config.cache_dir) / "keys" / "digest.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    made = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(made.hex())
    return made


def digest(key: str, body: Any) -> str:
    """HMAC-SHA256 of ``body`` (JSON) answering ``key``, under this cache's secret."""
    message = f"{key}\n{json.dumps(body, sort_keys=True)}".encode()
    return hmac.new(secret(), message, hashlib.sha256).hexdigest()


def write(path: Path, key: str, body: dict[str, Any]) -> bool:
    """Write ``body`` with its digest (atomically: a reader never sees half an entry); False if it could not."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"body": body, "digest": digest(key, body)}))
        os.replace(temporary, path)
        return True
    except OSError as exc:
        log.info("could not write the cache entry %s: %s", path, exc)
        return False


def read(path: Path, key: str) -> dict[str, Any] | None:
    """The body of the entry at ``path`` if it carries this cache's digest for ``key``, else None."""
    try:
        entry = json.loads(path.read_text())
        body = entry["body"]
        signature = entry["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(body, dict) or not isinstance(signature, str) or not hmac.compare_digest(
            signature, digest(key, body)):
        log.info("cache entry %s carries no valid digest: the work is done again", path.name)
        return None
    return body
