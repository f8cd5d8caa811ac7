"""Errors of the AWS engine. All are ClusterctlError, so the CLI prints them without a traceback."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.errors import ClusterctlError
from clusterctl.core.findings import Finding


class CloudError(ClusterctlError):
    """The cloud engine failed (a Pulumi operation, an AWS call)."""


class PulumiCliMissing(CloudError):
    """The `pulumi` CLI (or the aws provider plugin) is not installed; nothing was touched."""


class PreflightFailed(CloudError):
    """The AWS account cannot host the spec as written; carries the findings that say why."""

    def __init__(self, message: str, findings: Iterable[Finding] = ()) -> None:
        super().__init__(message)
        self.findings = list(findings)


class NotConfirmed(CloudError):
    """The user declined the preview; nothing was changed."""
