"""Read cluster.yaml keeping line numbers, and turn pydantic errors into findings that point at the YAML line."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Iterable, Sequence
import functools
import re
from dataclasses import replace
from io import StringIO
from pathlib import Path

from pydantic import ValidationError

from clusterctl.core.errors import SpecError
from clusterctl.core.findings import Finding, Level, format_path
from clusterctl.spec.bounds import MAX_SPEC_BYTES, BoundsError, check_size, scan

if TYPE_CHECKING:
    from ruamel.yaml import YAML


class SourceMap:
    """Maps a path like ('pools', 1, 'gpu') to the (line, column) it was written on, both 1-based."""

    def __init__(self, node: Any) -> None:  # the ruamel document, None for an empty one
        self.node = node

    def locate(self, parts: Iterable[str | int]) -> tuple[int | None, int | None]:
        node, best = self.node, (1, 1) if self.node is not None else (None, None)
        for p in parts:
            lc = getattr(node, "lc", None)
            try:
                if isinstance(node, dict) and p in node:
                    if lc is not None:
                        ln, col = lc.key(p)
                        best = (ln + 1, col + 1)
                    node = node[p]
                elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
                    if lc is not None:
                        ln, col = lc.item(p)
                        best = (ln + 1, col + 1)
                    node = node[p]
                else:
                    break
            except (KeyError, IndexError, TypeError):
                break
        return best

    def real_path(self, loc: Sequence[str | int]) -> tuple:
        """Drop pydantic's union tags (e.g. 'aws' in ('pools', 0, 'aws', 'count')) that are not keys in the YAML."""
        node, out = self.node, []
        for i, p in enumerate(loc):
            if isinstance(node, dict) and p in node:
                out.append(p)
                node = node[p]
            elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
                out.append(p)
                node = node[p]
            elif isinstance(node, dict) and isinstance(p, str) and i + 1 < len(loc):
                continue  # a union tag pydantic inserts, not a key the user wrote
            else:
                if isinstance(node, dict):
                    out.append(p)  # a missing or unknown key: name it
                break
        return tuple(out)


def _yaml() -> YAML:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.allow_duplicate_keys = False
    return y


def parse_yaml(text: str, filename: str = "<spec>") -> tuple[Any, SourceMap]:
    """YAML text -> (data, SourceMap). Syntax errors and anything outside the parsing bounds become a SpecError with
    one finding at the line; no input makes this raise anything else."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        scan(text)  # bounded, before anything is composed
        data = _yaml().load(StringIO(text))
    except BoundsError as e:
        f = Finding(Level.ERROR, "yaml-bounds", "", str(e), line=e.line, column=e.column)
        raise SpecError(f"{filename}: refused to parse", [f]) from None
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        f = Finding(
            Level.ERROR,
            "yaml-syntax",
            "",
            f"{e.problem or 'invalid YAML'}" + (f" ({e.context})" if e.context else ""),
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        )
        raise SpecError(f"{filename}: invalid YAML", [f]) from None
    except (YAMLError, ValueError, TypeError, RecursionError, UnicodeError) as e:
        # ruamel's constructor can still fail on odd input (e.g. an integer of 5,000 digits): a finding, not a crash.
        msg = f"cannot read the YAML: {type(e).__name__}: {str(e)[:200]}"
        raise SpecError(f"{filename}: invalid YAML", [Finding(Level.ERROR, "yaml-syntax", "", msg)]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(
            f"{filename}: not a spec",
            [Finding(Level.ERROR, "yaml-shape", "", "the spec must be a mapping (apiVersion:, name:, pools:, ...)", 1, 1)],
        )
    return data, SourceMap(data)


def to_plain(node: Any) -> Any:
    """ruamel's commented containers -> plain dicts/lists/scalars (what pydantic validates)."""
    if isinstance(node, dict):
        return {str(k) if not isinstance(k, (int, float, bool)) else k: to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if hasattr(node, "__float__") and type(node).__name__ == "ScalarFloat":
        return float(node)
    if type(node).__name__ in ("ScalarBoolean",):
        return bool(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, int) and not isinstance(node, bool):
        return int(node)
    return node


_MESSAGES = {
    "extra_forbidden": "unknown field (not part of the spec: check the spelling)",
    "missing": "required field is missing",
}


def _message(e: Any) -> str:
    """pydantic's message, made to say what was given and what is allowed (never a bare regex)."""
    from clusterctl.spec.types import ALLOWED

    if e["type"] == "extra_forbidden":
        return _MESSAGES["extra_forbidden"] + _did_you_mean(str(e["loc"][-1]), _spec_field_names())
    if e["type"] in _MESSAGES:
        return _MESSAGES[e["type"]]
    if e["type"] == "literal_error" and isinstance(e.get("input"), str):
        choices = re.findall(r"'([^']*)'", e.get("ctx", {}).get("expected", ""))
        return e["msg"] + _did_you_mean(e["input"], choices)
    given = repr(e.get("input"))
    given = given if len(given) <= 80 else given[:77] + "..."
    if e["type"] == "string_pattern_mismatch":
        pattern = e.get("ctx", {}).get("pattern", "")
        return f"{given} is not allowed here: expected {ALLOWED.get(pattern, 'a value matching ' + pattern)}"
    if e["type"] == "string_too_long" or e["type"].endswith("_type"):
        return f"{e['msg']} (got {given})"
    return e["msg"]


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    near = [c for c in choices if c.startswith(word)][:1] or difflib.get_close_matches(word, list(choices), n=1, cutoff=0.7)
    return f"; did you mean {near[0]!r}?" if near else ""


@functools.cache
def _spec_field_names() -> frozenset[str]:
    """Every key a spec may use somewhere (field names and aliases of every spec model)."""
    from clusterctl.spec.base import SpecModel
    from clusterctl.spec.cluster import ClusterSpec  # noqa: F401 - imports every model, so all are subclasses

    names: set[str] = set()
    todo = list(SpecModel.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        for name, info in model.model_fields.items():
            names.add(info.alias or name)
    return frozenset(names)


def pydantic_findings(err: ValidationError, smap: SourceMap) -> list[Finding]:
    out = []
    for e in err.errors(include_url=False):
        parts = smap.real_path(e["loc"])
        msg = _message(e).removeprefix("Value error, ")
        line, col = smap.locate(parts)
        out.append(Finding(Level.ERROR, f"schema.{e['type']}", format_path(parts), msg, line, col, parts))
    return _dedupe(out)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.path, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def attach_lines(findings: Iterable[Finding], smap: SourceMap) -> list[Finding]:
    out = []
    for f in findings:
        if f.line is None and smap is not None:
            line, col = smap.locate(f.parts)
            f = replace(f, line=line, column=col)
        out.append(f)
    return out


def read_spec_text(path: str | Path) -> str:
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)  # never more than the bound, whatever the file's size
        check_size(len(data))
        return data.decode("utf-8")
    except BoundsError as e:
        raise SpecError(f"{p}: {e}", [Finding(Level.ERROR, "yaml-bounds", "", str(e))]) from None
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read the spec ({e})") from None
