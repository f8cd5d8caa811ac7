"""The Jinja2 environment over the project's templates/: strict (a missing value is an error), no autoescape."""

from __future__ import annotations

from functools import lru_cache

from clusterctl.resources import resource_dir


@lru_cache(maxsize=1)
def environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_template(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
