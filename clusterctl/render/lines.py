"""Line-oriented files (slurm.conf, hosts, fstab, env files) take one value per line: a value that holds a line break
could add a line of its own (`AuthType=auth/none`, another NodeName), so rendering refuses it."""

from __future__ import annotations

import re
from typing import Iterable

from clusterctl.core.errors import RenderError

# What str.splitlines() splits on (\n \r \v \f \x1c-\x1e \x85 \u2028 \u2029), plus NUL, which ends a C string.
_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00]")


class LineBreakError(RenderError):
    """A value with a line break or NUL, bound for a line-oriented file."""

    def __init__(self, where: str, value: str):
        super().__init__(f"{where}: refusing a value with a line break or NUL: {value!r}")
        self.where, self.value = where, value


def check_single_line(value: str, where: str) -> str:
    """`value` unchanged if it holds no line break or NUL, else LineBreakError naming `where`."""
    if _BREAK.search(value):
        raise LineBreakError(where, value)
    return value


def lines_text(where: str, lines: Iterable[str]) -> str:
    """The file `where` from lines composed in Python, each checked to be one line."""
    return "".join(check_single_line(line, where) + "\n" for line in lines)
