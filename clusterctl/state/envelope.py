"""Envelope encryption of the secrets an s3 backend keeps: a fresh data key per secret from KMS GenerateDataKey,
AES-256-GCM over the secret, only the KMS-wrapped data key stored next to the ciphertext. The bucket alone (its
readers, its backups) never yields a secret: reading one also takes kms:Decrypt on the spec's key.

The cluster and the secret's name are bound in twice: as the GCM associated data and as the KMS encryption context,
so a ciphertext copied under another name or cluster does not decrypt (and CloudTrail names what was unwrapped)."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

FORMAT = "clusterctl-envelope-v1"


def _context(cluster: str, name: str) -> dict[str, str]:
    return {"clusterctl:cluster": cluster, "clusterctl:secret": name}


def seal(kms: Any, key_id: str, cluster: str, name: str, plaintext: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    ctx = _context(cluster, name)
    dk = kms.generate_data_key(KeyId=key_id, KeySpec="AES_256", EncryptionContext=ctx)
    nonce = os.urandom(12)
    sealed = AESGCM(dk["Plaintext"]).encrypt(nonce, plaintext, json.dumps(ctx, sort_keys=True).encode())
    doc = {"format": FORMAT, "kms_key": key_id, "wrapped_key": dk["CiphertextBlob"], "nonce": nonce, "ciphertext": sealed}
    return json.dumps({k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in doc.items()}).encode()


def open_sealed(kms: Any, cluster: str, name: str, blob: bytes) -> bytes:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from clusterctl.state.backend import StateError

    try:
        doc = json.loads(blob)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}")
        raw = {k: base64.b64decode(doc[k]) for k in ("wrapped_key", "nonce", "ciphertext")}
    except (ValueError, KeyError, TypeError) as e:
        raise StateError(f"secret {name} in the state backend is not an envelope clusterctl wrote ({e})") from None
    ctx = _context(cluster, name)
    from cryptography.exceptions import InvalidTag

    key = kms.decrypt(CiphertextBlob=raw["wrapped_key"], EncryptionContext=ctx)["Plaintext"]
    try:
        return AESGCM(key).decrypt(raw["nonce"], raw["ciphertext"], json.dumps(ctx, sort_keys=True).encode())
    except InvalidTag:
        raise StateError(f"secret {name} in the state backend does not decrypt (altered, or moved from another "
                         "name or cluster)") from None
