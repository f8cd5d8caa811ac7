"""The `s3://bucket/prefix` backend, for pipelines whose runners are thrown away after each job.

Under <prefix>/<cluster>/:
  lock                      the apply lock (clusterctl.state.s3lock)
  builds/<n>-<uid>.json.gz  one object per apply: the whole build, written before anything points at it
  current.json              the pointer: version n, the current build's key and sha256, the history of applies.
                            Moved only by a conditional write (If-Match on the ETag read, or If-None-Match for the
                            first), so a build stored half-way is never current and two writers never both move it
  secrets/<name>.enc        envelope-encrypted secrets (clusterctl.state.envelope); created once, If-None-Match
  plain/known_hosts         host keys recorded on first contact (public: not encrypted)
Endpoint, region and credentials come from the usual AWS settings (AWS_ENDPOINT_URL included).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import uuid
from typing import Any, Callable, ContextManager

from clusterctl.state.backend import Applied, StateConflict, StateError

_CONDITION_FAILED = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}

NO_KMS_KEY = ("cluster {cluster}: an s3 state backend keeps secrets only encrypted; name the KMS key in the spec's "
              "state.kms_key (alias/... or a key ARN) or $CLUSTERCTL_STATE_KMS_KEY. Nothing was changed")


class Objects:
    """The few S3 calls the backend makes; conditional writes answer None/False instead of raising."""

    def __init__(self, bucket: str):
        import boto3

        self.bucket, self.client = bucket, boto3.client("s3")

    def _code(self, e: Any) -> str:  # a botocore ClientError
        return str(e.response.get("Error", {}).get("Code", ""))

    def get(self, key: str) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        try:
            r = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as e:
            if self._code(e) in ("NoSuchKey", "404"):
                return None
            raise StateError(f"s3://{self.bucket}/{key}: {e}") from None
        return r["Body"].read(), r["ETag"]

    def put(self, key: str, body: bytes, if_none_match: bool = False, if_match: str | None = None) -> str | None:
        from botocore.exceptions import ClientError

        cond = {"IfNoneMatch": "*"} if if_none_match else {"IfMatch": if_match} if if_match else {}
        try:
            return self.client.put_object(Bucket=self.bucket, Key=key, Body=body, **cond)["ETag"]
        except ClientError as e:
            if cond and self._code(e) in _CONDITION_FAILED:
                return None
            raise StateError(f"s3://{self.bucket}/{key}: {e}") from None

    def delete(self, key: str, if_match: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=key, IfMatch=if_match)
            return True
        except ClientError as e:
            if self._code(e) in _CONDITION_FAILED | {"NoSuchKey", "404"}:
                return False
            raise StateError(f"s3://{self.bucket}/{key}: {e}") from None

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


class S3Backend:
    def __init__(self, bucket: str, prefix: str, cluster: str, kms_key: str | None):
        from clusterctl.state.s3lock import S3Lock

        self.url = f"s3://{bucket}/{prefix}".rstrip("/")
        self.cluster, self.kms_key = cluster, kms_key
        self.root = f"{prefix}/{cluster}/" if prefix else f"{cluster}/"
        self.objects = Objects(bucket)
        self._lock = S3Lock(self.objects, self.root + "lock", cluster)
        self._kms = None

    # -- applied builds -------------------------------------------------------------------------------------------

    def _pointer(self) -> tuple[dict, str | None]:
        got = self.objects.get(self.root + "current.json")
        if got is None:
            return {"version": 0, "build": None, "history": []}, None
        return json.loads(got[0]), got[1]

    def applied(self) -> Applied:
        pointer, _ = self._pointer()
        if not pointer.get("build"):
            return Applied({}, str(pointer["version"]) if pointer["version"] else None)
        got = self.objects.get(pointer["build"])
        if got is None or hashlib.sha256(got[0]).hexdigest() != pointer["sha256"]:
            raise StateError(f"{self.url}: the current build {pointer['build']} is missing or does not match its "
                             "checksum; the state backend was altered outside clusterctl")
        return Applied(json.loads(gzip.decompress(got[0])), str(pointer["version"]))

    def record(self, files: dict[str, str], entry: dict) -> str:
        # mtime=0: the same build stores as the same bytes (and checksum)
        body = gzip.compress(json.dumps(files, sort_keys=True).encode(), mtime=0)
        return self._move(entry, body)

    def forget(self, entry: dict) -> None:
        self._move(entry, None)

    def _move(self, entry: dict, body: bytes | None) -> str:
        pointer, etag = self._pointer()
        version = pointer["version"] + 1
        key = None
        if body is not None:
            # The whole build first, under a name nobody else can have; only then is the pointer moved to it.
            key = f"{self.root}builds/{version:06d}-{uuid.uuid4().hex[:12]}.json.gz"
            if self.objects.put(key, body, if_none_match=True) is None:
                raise StateConflict(f"{self.url}: {key} exists already")
        new = {"version": version, "build": key, "sha256": hashlib.sha256(body).hexdigest() if body else None,
               "history": [*pointer["history"], {"version": str(version), **entry, "build_object": key}]}
        moved = self.objects.put(self.root + "current.json", json.dumps(new).encode(),
                                 if_match=etag, if_none_match=etag is None)
        if moved is None:
            raise StateConflict(f"{self.url}: another run recorded an apply of cluster {self.cluster} meanwhile "
                                f"(version {version} is taken); this apply was not recorded: run `clusterctl plan`")
        return str(version)

    def history(self) -> list[dict]:
        return self._pointer()[0]["history"]

    # -- the lock ------------------------------------------------------------------------------------------------

    def check_ready(self) -> None:
        """Before a command changes anything: the bucket keeps secrets only sealed with the KMS key, so without one
        the command would fail at its first secret, with machines already booted (reads no object)."""
        if not self.kms_key:
            raise StateError(NO_KMS_KEY.format(cluster=self.cluster))

    def lock(self, command: str) -> ContextManager[dict]:
        return self._lock.held(command)

    def holder(self) -> dict | None:
        return self._lock.holder()

    def break_lock(self, lock_id: str | None) -> dict | None:
        return self._lock.break_(lock_id)

    # -- non-secret files -------------------------------------------------------------------------------------------

    def plain(self, name: str) -> bytes | None:
        got = self.objects.get(f"{self.root}plain/{name}")
        return got[0] if got else None

    def put_plain(self, name: str, data: bytes) -> None:
        self.objects.put(f"{self.root}plain/{name}", data)

    # -- secrets -------------------------------------------------------------------------------------------------

    def _kms_client(self) -> Any:  # a boto3 KMS client
        if self._kms is None:
            import boto3
            from botocore.exceptions import NoRegionError

            try:
                self._kms = boto3.client("kms")
            except NoRegionError:
                raise StateError("the s3 state backend's secrets need KMS, and KMS a region: set AWS_REGION "
                                 "(or AWS_DEFAULT_REGION) to the KMS key's") from None
        return self._kms

    def secret(self, name: str, make: Callable[[], bytes] | None, mode: int = 0o600) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self._secret(name, make)
        except ClientError as e:  # KMS: no such key, no permission, a wrapped key that is not this secret's
            raise StateError(f"secret {name} of cluster {self.cluster} in {self.url}: KMS refused: "
                             f"{e.response.get('Error', {}).get('Code', e)}") from None

    def _secret(self, name: str, make: Callable[[], bytes] | None) -> bytes | None:
        from clusterctl.state import envelope

        key = f"{self.root}secrets/{name}.enc"
        got = self.objects.get(key)
        if got is None and make is not None:
            if not self.kms_key:
                raise StateError(NO_KMS_KEY.format(cluster=self.cluster))
            plain = make()
            sealed = envelope.seal(self._kms_client(), self.kms_key, self.cluster, name, plain)
            if self.objects.put(key, sealed, if_none_match=True) is not None:
                return plain
            got = self.objects.get(key)  # another runner made it first: theirs is the one, as with local files
        return None if got is None else envelope.open_sealed(self._kms_client(), self.cluster, name, got[0])

    def secret_names(self) -> list[str]:
        prefix = f"{self.root}secrets/"
        return sorted(k[len(prefix):-len(".enc")] for k in self.objects.keys(prefix) if k.endswith(".enc"))
