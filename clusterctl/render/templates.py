"""The Jinja2 environment over the project's templates/: strict (a missing value is an error), no autoescape.

Every template writes a line-oriented file, so every output expression is checked to hold no line break (finalize).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from clusterctl.render.lines import LineBreakError, check_single_line
from clusterctl.core.resources import resource_dir

if TYPE_CHECKING:
    import jinja2


def _single_line(value: object) -> object:
    check_single_line(str(value), "template")  # the template's name is added by render_with
    return value


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_single_line,
    )


def render_with(env: jinja2.Environment, name: str, **context: Any) -> str:
    """Render template `name` of `env` (this environment or an overlay of it); a line break names the template."""
    try:
        return env.get_template(name).render(**context)
    except LineBreakError as e:
        raise LineBreakError(name, e.value) from None


def render_template(name: str, **context: Any) -> str:
    return render_with(environment(), name, **context)
