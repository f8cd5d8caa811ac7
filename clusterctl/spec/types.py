"""Allow-list types for every free-text spec field.

The spec arrives in pull requests, so each string is checked against what it may be (an address, a POSIX user, a
path, a Lustre NID...) before anything renders it into a config file, an Ansible variable or a command. Each type is
a regular expression that the JSON Schema carries too (so an editor and `validate` agree), plus, where a regex cannot
say it, a semantic check (an IPv4 octet above 255, a hostlist's size). None of them admits whitespace, quotes, `{`,
`}`, `$`, `;`, `|`, `&`, backquotes or newlines.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from clusterctl.core import hostlist

# The most nodes one cluster may have (every pool, static and elastic together): Slurm's own tested scale, and a
# bound on the work one command may do for a spec from a pull request.
MAX_NODES = 65_536

_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
DNS_NAME = rf"{_LABEL}(\.{_LABEL})*\.?"  # a name at least one letter long, checked below not to look like an IPv4
IPV6 = r"[0-9A-Fa-f:.]{2,45}"  # shape only; ipaddress decides


# pattern -> what it allows, in words: the error for a value that does not match says this, not the regex.
ALLOWED: dict[str, str] = {}


def _pattern(regex: str, max_length: int, allowed: str) -> StringConstraints:
    pattern = f"^({regex})$"
    ALLOWED[pattern] = allowed
    return StringConstraints(pattern=pattern, max_length=max_length)


def allowed(pattern: str, allowed: str) -> str:
    """Register words for a pattern used directly in a spec_field(pattern=...)."""
    ALLOWED[pattern] = allowed
    return pattern


def _is_address(v: str) -> bool:
    """An IPv4/IPv6 address, or a DNS name that is not a mistyped dotted quad (10.0.1.256)."""
    try:
        ipaddress.ip_address(v)
        return True
    except ValueError:
        pass
    if ":" in v:
        return False
    return not re.fullmatch(r"[0-9.]+", v)


def _address(v: str) -> str:
    if not _is_address(v):
        raise ValueError(f"{v!r} is not an IPv4/IPv6 address or a DNS host name")
    return v


def _ip(v: str) -> str:
    try:
        ipaddress.ip_address(v)
    except ValueError:
        raise ValueError(f"{v!r} is not an IPv4 or IPv6 address") from None
    return v


HOST_OR_ADDRESS = f"{IPV4}|{IPV6}|{DNS_NAME}"

# An IP address or a DNS name: where a server or a node is reached.
# The schema says what _address checks: digits and dots alone must make a real IPv4 address.
_NOT_A_BAD_QUAD = {"anyOf": [{"pattern": f"^({IPV4})$"}, {"not": {"pattern": r"^[0-9.]+$"}}]}
Address = Annotated[
    str,
    _pattern(HOST_OR_ADDRESS, 253, "an IPv4/IPv6 address or a DNS host name"),
    AfterValidator(_address),
    Field(json_schema_extra=_NOT_A_BAD_QUAD),
]
# An IP address only (node addresses in an address_map).
IpAddress = Annotated[str, _pattern(f"{IPV4}|{IPV6}", 45, "an IPv4 or IPv6 address"), AfterValidator(_ip)]

# A node's host name as Slurm, DNS and /etc/hosts all accept it: one lower-case label.
NODE_NAME = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
NodeName = Annotated[str, _pattern(NODE_NAME, 63, "a host name: lower-case letters, digits and inner -, at most 63")]

# A POSIX login name (useradd's default NAME_REGEX).
PosixUser = Annotated[
    str, _pattern(r"[a-z_][a-z0-9_-]{0,31}", 32, "a POSIX user name: a lower-case letter or _, then letters, digits, _ or -")
]

# A path segment other than "." and "..", spelled without look-ahead so that pydantic's and JSON Schema's regex
# engines both take it.
_SEGMENT = r"([A-Za-z0-9_+@-][A-Za-z0-9._+@-]*|\.[A-Za-z0-9_+@-][A-Za-z0-9._+@-]*|\.\.[A-Za-z0-9._+@-]+)"
_PATH_CHARS = "letters, digits and . _ + @ - between slashes (no '..')"
_PATH_WORDS = "an absolute path of " + _PATH_CHARS
_ABS = rf"/|(/{_SEGMENT})+/?"


def _no_dot_segments(v: str) -> str:
    if any(part in (".", "..") for part in v.split("/")):
        raise ValueError(f"{v!r}: '.' and '..' are not allowed in a path")
    return v


# An absolute path on a node (mount points, exports, checkpoint directories): no '..', no '.' segments.
AbsPath = Annotated[str, _pattern(_ABS, 1024, _PATH_WORDS), AfterValidator(_no_dot_segments)]
# A file on the workstation running clusterctl (private key, pinned known_hosts): absolute or under ~/.
LocalPath = Annotated[str, _pattern(rf"{_ABS}|~(/{_SEGMENT})+", 1024, "a path (absolute or ~/...) of " + _PATH_CHARS), AfterValidator(_no_dot_segments)]
# A block device for the NVMe cache.
DevicePath = Annotated[
    str, _pattern(r"/dev(/[A-Za-z0-9_:+-][A-Za-z0-9._:+-]*)+", 255, "a device path under /dev, e.g. /dev/nvme1n1"),
    AfterValidator(_no_dot_segments)]

# Where a jump host is: [user@]host[:port].
JumpHost = Annotated[
    str,
    _pattern(
        rf"([a-z_][a-z0-9_-]{{0,31}}@)?({IPV4}|{DNS_NAME}|\[{IPV6}\])(:[0-9]{{1,5}})?", 300,
        "[user@]host[:port]: a POSIX user, an address or DNS name, a port number",
    ),
]

# A Lustre NID: address@lnd[number], e.g. 10.0.0.1@o2ib or mgs.example.com@tcp1.
LND = r"(tcp|o2ib|kfi|efa|gni)[0-9]{0,3}"
LustreNid = Annotated[
    str, _pattern(rf"({IPV4}|{DNS_NAME})@{LND}", 300, "a Lustre NID: address@network, e.g. 10.0.0.1@o2ib or mgs@tcp1")
]
# LNet networks: o2ib0(ib0) or tcp0(eth0),o2ib1(ib1,ib2).
_IFACES = r"[A-Za-z0-9_.:-]{1,15}(,[A-Za-z0-9_.:-]{1,15})*"
LnetNetworks = Annotated[
    str,
    _pattern(rf"{LND}(\({_IFACES}\))?(,{LND}(\({_IFACES}\))?)*", 512, "LNet networks, e.g. o2ib0(ib0) or tcp0(eth0),o2ib1(ib1)"),
]

# mount -o: comma-separated tokens, each a word or word=value.
_MOUNT_TOKEN = r"[a-z0-9_]+(=[A-Za-z0-9._:/+@-]+)?"
MountOptions = Annotated[
    str, _pattern(rf"{_MOUNT_TOKEN}(,{_MOUNT_TOKEN})*", 512, "mount options: comma-separated word or word=value, e.g. vers=4.2,hard")
]

# AWS names.
AWS_REGION = r"[a-z]{2}(-[a-z]+)+-[0-9]"
AwsRegion = Annotated[str, _pattern(AWS_REGION, 32, "an AWS region, e.g. us-east-1")]
AvailabilityZone = Annotated[
    str, _pattern(rf"{AWS_REGION}[a-z]|{AWS_REGION}-[a-z]+-[0-9][a-z]", 40, "an availability zone name, e.g. us-east-1a")
]
InstanceType = Annotated[str, _pattern(r"[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}", 40, "an EC2 instance type, e.g. p5.48xlarge")]
S3Prefix = Annotated[str, _pattern(r"[A-Za-z0-9!_.*'()/-]*", 1024, "an S3 key prefix: letters, digits and ! _ . * ' ( ) / -")]

# Environment variables (NCCL, Slurm task prolog): a C identifier in upper case; a value without shell
# metacharacters, quotes, spaces or line breaks.
# An RDMA device as /sys/class/infiniband names it (mlx5_0, mlx5_bond_0, ibp26s0), optionally :port (mlx5_0:1).
HcaPort = Annotated[str, _pattern(r"[a-z][a-z0-9_]{0,31}(:[1-9][0-9]?)?", 35, "an RDMA device name with an optional :port, e.g. mlx5_0 or mlx5_0:1")]
EnvName = Annotated[str, _pattern(r"[A-Z_][A-Z0-9_]*", 128, "an environment variable name: A-Z, 0-9 and _, not starting with a digit")]
EnvValue = Annotated[
    str, _pattern(r"[A-Za-z0-9_.,:/=+@%^-]*", 1024, "letters, digits and _ . , : / = + @ % ^ - (no spaces, quotes or shell metacharacters)")
]


def _hostlist_names(v: str) -> str:
    try:
        n = hostlist.count(v)
    except hostlist.HostlistError as e:
        raise ValueError(str(e)) from None
    if n > MAX_NODES:
        raise ValueError(f"{v!r} names {n:,} hosts; a cluster has at most {MAX_NODES:,} nodes")
    return v


# Slurm hostlists: gpu[001-064] of node names, 10.1.0.[1-64] of addresses. Sizes are counted before anything
# is expanded, so a hostile `n[1-99999999]` costs nothing.
HostlistOfNames = Annotated[
    str, _pattern(r"[a-z0-9\[\],-]+", 4096, "a Slurm hostlist of lower-case host names, e.g. gpu[001-064]"),
    AfterValidator(_hostlist_names)]
HostlistOfAddresses = Annotated[
    str, _pattern(r"[A-Za-z0-9.:\[\],-]+", 4096, "a Slurm hostlist of addresses, e.g. 10.1.0.[1-64]"),
    AfterValidator(_hostlist_names)]

# A Pulumi state backend URL.
PulumiBackend = Annotated[
    str,
    _pattern(
        r"(file|s3|gs|azblob)://[A-Za-z0-9._~/:@%+=,?&-]+|https://[A-Za-z0-9._~/:@%+=,?&-]+", 1024,
        "a Pulumi backend URL: s3://, gs://, azblob://, file:// or https://, without spaces or quotes",
    ),
]

# Where clusterctl keeps a cluster's state: `local` (the state directory) or an S3 bucket and prefix. The bucket
# follows S3's naming rules; prefix segments are plain key characters (no spaces, quotes, braces, `..`).
StateBackend = Annotated[
    str,
    _pattern(r"local|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9_+=-][A-Za-z0-9._+=-]*)*/?", 512,
             "`local` or s3://bucket/prefix (letters, digits and . _ + = - between slashes)"),
]

# The KMS key that wraps the state's secrets: an alias or a key ARN (never a free string: it reaches KMS calls).
KmsKey = Annotated[
    str,
    _pattern(r"alias/[A-Za-z0-9/_-]{1,250}|arn:aws(-[a-z]+)*:kms:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:"
             r"(key/[0-9a-f-]{36}|alias/[A-Za-z0-9/_-]{1,250})", 2048,
             "a KMS key alias (alias/...) or a KMS key ARN"),
]

# Names the spec gives (cluster, pools, node prefixes) and names that refer to them.
NAME_PATTERN = allowed(r"^[a-z][a-z0-9-]{0,30}$", "a name: a lower-case letter, then letters, digits or -, at most 31")
PART_NAME_PATTERN = allowed(
    r"^[a-z][a-z0-9_-]{0,30}$", "a partition name: a lower-case letter, then letters, digits, _ or -, at most 31"
)
PoolName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
PartitionName = Annotated[str, StringConstraints(pattern=PART_NAME_PATTERN)]

# Mounting over these would replace the node's own system (a hostile `mount_point: /etc`).
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys",
               "/usr", "/var")


def _not_system_dir(v: str) -> str:
    path = v.rstrip("/") or "/"
    if path == "/" or any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS):
        raise ValueError(f"{v!r} is (or is under) a system directory; mount shared storage elsewhere (e.g. /shared)")
    return v


_SYSTEM_DIR_PATTERN = "^(/|(" + "|".join(re.escape(d) for d in SYSTEM_DIRS) + ")(/.*)?)$"
MountPoint = Annotated[
    AbsPath, AfterValidator(_not_system_dir), Field(json_schema_extra={"not": {"pattern": _SYSTEM_DIR_PATTERN}})
]

# A vendor repository or key location (an internal mirror, an apt-cacher, the vendor itself): http(s) only, a host,
# then path characters that need no quoting in an apt sources line or a URL given to get_url. No whitespace, quotes,
# `{`/`}` (no Jinja), `%` (no encoded newline), `[`/`]` (no apt options such as [trusted=yes]), no user:password@.
RepoUrl = Annotated[
    str,
    _pattern(rf"https?://({DNS_NAME}|{IPV4})(:[0-9]{{1,5}})?(/[A-Za-z0-9._~+-]*)*", 512,
             "an http(s) URL: a host, an optional :port, then a path of letters, digits and . _ ~ + - /"),
]
