"""The fast YAML writer must write exactly what PyYAML writes, or decline (None) and leave the document to PyYAML."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterctl.core.errors import RenderError
from clusterctl.render import render_spec
from clusterctl.render.yamlblock import dump_block
from clusterctl.render.yamlout import _mark_unsafe, dump_yaml, load_ansible_yaml
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES

# Text that looks like spec values (addresses, users, paths, options) and text chosen to trip a writer: YAML
# indicators, words YAML 1.1 reads as bools or nulls, numbers, dates, sexagesimals, spaces at the ends.
TRICKY = ["yes", "No", "on", "OFF", "null", "~", "true", "1", "-1", "+1", "0x1f", "0o17", "1_000", "1:20", "1.5",
          ".5", ".inf", "1e3", "2026-12-06", "=", "<<", "-", "- x", "-o X=y", "a: b", "a:b", "a #b", "a#b", "#a", "@a",
          "%a", "!a", "&a", "*a", "?a", ":a", "a:", "a,b", "[a]", "{a}", "'a'", '"a"', " a", "a ", "a  b", "é", "",
          "10.10", "10.10.0.2", "https://mirror.example.com/x", "a|b", "a>b", "`a`", "x" * 130, "---", "...x",
          "--- x", "... x", "--x", "..x"]
text = st.one_of(st.sampled_from(TRICKY), st.text(alphabet="ab1.-_: #,@%=/~+", max_size=12),
                 st.text(max_size=8).filter(lambda s: "\n" not in s and "\r" not in s))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), text)
keys = st.one_of(st.sampled_from(["ansible_host", "gpu001", "a-b", "1", "true", "", "a b", "x" * 70]), text)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(keys, inner, max_size=3)), max_leaves=12)


def pyyaml(data: dict, where: str = "f.yml") -> str:
    return dump_yaml(_mark_unsafe(data, where))


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(keys, values, min_size=1, max_size=4))
def test_writes_what_pyyaml_writes_or_declines(data):
    try:
        expected = pyyaml(data)
    except RenderError:  # a line break PyYAML's path refuses: the fast path refuses it too, or leaves it to PyYAML
        try:
            assert dump_block(data, "f.yml") is None
        except RenderError:
            pass
        return
    fast = dump_block(data, "f.yml")
    if fast is not None:
        assert fast == expected


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_inventories_take_the_fast_path_and_read_back(path):
    """The inventory is most of render's YAML at scale: it must not fall back to PyYAML for ordinary specs."""
    from clusterctl.render.ansible import inventory

    plan, files = render_spec(load_valid(path))
    data = inventory(plan)
    fast = dump_block(data, "inventory.yml")
    assert fast is not None
    assert fast == pyyaml(data) == files["ansible/inventory.yml"]
    assert load_ansible_yaml(fast) == data


def test_refuses_a_line_break_like_the_pyyaml_path():
    with pytest.raises(RenderError, match="inventory.yml"):
        dump_block({"all": {"hosts": {"n1": {"ansible_user": "ops\nAuthType=auth/none"}}}}, "inventory.yml")
