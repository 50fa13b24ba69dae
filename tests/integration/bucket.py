"""The local cluster's S3-compatible object store (SeaweedFS, `cluster/cluster.sh
object-store`) as the bucket tests use it: its address and bucket, the Secrets an instance's
spec.backup names (the store's credentials, an age identity made here), spec.backup of an
instance that backs up there, and a client pod of the backup-tools image that reads the
bucket the way the backup Jobs write it (rclone's :s3: remote, age, zstd)."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

from tests import harness, kube

REPO = Path(__file__).resolve().parents[2]
STORE_NAMESPACE = "object-store"
ENDPOINT = "http://seaweedfs.object-store.svc.cluster.local:8333"
BUCKET = "backups"
TOOLS_IMAGE = "localhost/backup-tools:bookworm"
TOOLS_POD = "bucket-client"  # in Store.ns: the test's reads and writes of the bucket
UNREACHABLE_ENDPOINT = "http://no-such-host.object-store.svc.cluster.local:8333"
MISSING_BUCKET = "no-such-bucket"


_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _polymod(values: list[int]) -> int:
    generator = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i in range(5):
            check ^= generator[i] if (top >> i) & 1 else 0
    return check


def age_identity() -> str:
    """A new age X25519 identity (AGE-SECRET-KEY-1...): 32 random bytes, bech32-encoded."""
    hrp = "age-secret-key-"
    bits, acc, data = 0, 0, []
    for byte in secrets.token_bytes(32):
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            data.append((acc >> bits) & 31)
    if bits:
        data.append((acc << (5 - bits)) & 31)
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    mod = _polymod(expanded + data + [0] * 6) ^ 1
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return (hrp + "1" + "".join(_BECH32[d] for d in data + checksum)).upper()


def secret(ns: str, name: str, data: dict[str, str]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                       "type": "Opaque", "stringData": data})


def s3_backup(ns: str, credentials: str = "s3-creds", **extra: Any) -> dict[str, Any]:
    """spec.backup of the module's store; `extra` adds to (or replaces) spec.backup.s3's fields."""
    return {"verify": True, "encryptionSecret": "backup-key",
            "s3": {"endpoint": ENDPOINT, "bucket": BUCKET, "credentialsSecret": credentials, **extra}}


def bucket_env() -> list[dict[str, Any]]:
    """The bucket client's environment: the store's credentials for rclone's :s3: remote and
    the age identity in $AGE_IDENTITY, from the namespace's Secrets."""
    return [{"name": "RCLONE_S3_PROVIDER", "value": "Other"},
            {"name": "RCLONE_S3_ENDPOINT", "value": ENDPOINT},
            {"name": "HOME", "value": "/tmp"},
            {"name": "RCLONE_S3_ACCESS_KEY_ID",
             "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}},
            {"name": "RCLONE_S3_SECRET_ACCESS_KEY",
             "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}}},
            {"name": "AGE_IDENTITY", "valueFrom": {"secretKeyRef": {"name": "backup-key", "key": "identity"}}}]


def store_credentials(cluster: harness.Cluster) -> dict[str, str]:
    """The store up (cluster.sh object-store, a no-op when it runs), and its credentials."""
    subprocess.run([str(REPO / "cluster" / "cluster.sh"), "object-store"], check=True, stdout=subprocess.DEVNULL)
    found = cluster.get("-n", STORE_NAMESPACE, "secret", "seaweedfs-s3")["data"]
    return {key: base64.b64decode(value).decode() for key, value in found.items()}


def give_secrets(cluster: harness.Cluster, ns: str, credentials: dict[str, str], identity: str) -> None:
    """The store's credentials (`s3-creds`) and the age identity (`backup-key`) in `ns`."""
    cluster.apply(secret(ns, "s3-creds", credentials))
    cluster.apply(secret(ns, "backup-key", {"identity": identity}))


def start_client(cluster: harness.Cluster, ns: str) -> None:
    """The bucket client pod TOOLS_POD in `ns` (idle until a test execs a script in it; TERM
    ends it at once); wait_client waits for it."""
    cluster.apply(kube.shell_pod(ns, TOOLS_POD, "trap 'exit 0' TERM; while :; do sleep 2; done",
                                 env=bucket_env(), image=TOOLS_IMAGE))


def wait_client(cluster: harness.Cluster, ns: str) -> None:
    cluster.kubectl("-n", ns, "wait", "--for=condition=Ready", f"pod/{TOOLS_POD}", "--timeout=180s", timeout=200)


def run_in_client(cluster: harness.Cluster, ns: str, script: str, stdin: str | None = None) -> str:
    """Run `script` in the bucket client's pod in `ns` (bucket_env: the store's credentials
    for rclone's :s3: remote, the age identity in $AGE_IDENTITY); its output."""
    return cluster.kubectl("-n", ns, "exec", *(["-i"] if stdin is not None else []), TOOLS_POD, "--", "sh", "-c",
                           "set -eu\numask 077\n" + script, timeout=300, stdin=stdin).stdout
