"""Run every validator over a spec; load a spec file into (spec, findings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from clusterctl.core.errors import SpecError
from clusterctl.core.findings import Finding, Level
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.loader import SourceMap, attach_lines, parse_yaml, pydantic_findings, read_spec_text, to_plain
from clusterctl.validate import fabric, pools, scheduler, storage, vendor

VALIDATORS = [
    pools.KnownInstanceType(),
    pools.GpusPerNodeMatchesInstance(),
    pools.GpuModelMatchesInstance(),
    pools.GpuCountNeedsModel(),
    pools.OnpremHostsValid(),
    pools.MarketNeedsReservation(),
    pools.MarketFallbacks(),
    pools.SpotNeedsCheckpoints(),
    pools.BurstImageHasGpuStack(),
    pools.UniqueNodes(),
    pools.ProviderMix(),
    pools.LabFits(),
    pools.OneAwsRegion(),
    fabric.EfaOnlyOnAws(),
    fabric.NoInfinibandOnAws(),
    fabric.FabricSpeedMatchesType(),
    fabric.EthernetAtScale(),
    storage.FsxCombination(),
    storage.FsxInTheNodesAz(),
    storage.LnetNetworksAgree(),
    storage.StoragePoolsExist(),
    storage.UniqueMounts(),
    storage.CheckpointTarget(),
    scheduler.PartitionPoolsExist(),
    scheduler.PartitionNames(),
    scheduler.BurstTargetsElastic(),
    scheduler.ElasticPoolsReachable(),
    scheduler.ResumeTimeoutFitsBoot(),
    scheduler.PoolsInSomePartition(),
    scheduler.SlurmVersionSupported(),
    scheduler.PreemptionHasTiers(),
    vendor.VendorBuildsForDistro(),
    vendor.MirrorsSigned(),
    vendor.DriverFlavor(),
    vendor.LabIsDebian12(),
    vendor.OsMatchesImage(),
]


@dataclass
class Loaded:
    """A spec read from text: the model (None when the schema rejected it) and every finding."""

    spec: ClusterSpec | None
    findings: list[Finding] = field(default_factory=list)
    source: SourceMap | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.ERROR]

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.errors


def run_validators(spec: ClusterSpec, source: SourceMap | None = None) -> list[Finding]:
    found: list[Finding] = []
    for v in VALIDATORS:
        found.extend(v.check(spec))
    return attach_lines(found, source) if source is not None else found


def load_text(text: str, filename: str = "<spec>") -> Loaded:
    """YAML text -> Loaded. Never raises for bad input: every problem becomes a finding."""
    try:
        data, smap = parse_yaml(text, filename)
    except SpecError as e:
        return Loaded(None, e.findings)
    try:
        spec = ClusterSpec.model_validate(to_plain(data))
    except ValidationError as e:
        return Loaded(None, pydantic_findings(e, smap), smap)
    return Loaded(spec, run_validators(spec, smap), smap)


def load_file(path: str | Path) -> Loaded:
    return load_text(read_spec_text(path), str(path))


def load_valid(path: str | Path) -> ClusterSpec:
    """Load a spec that must be free of errors; raises SpecError carrying the findings otherwise."""
    loaded = load_file(path)
    if not loaded.ok:
        raise SpecError(f"{path}: the spec has {len(loaded.errors)} error(s); run `clusterctl validate {path}`", loaded.findings)
    assert loaded.spec is not None  # ok means it loaded
    return loaded.spec
