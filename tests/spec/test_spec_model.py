"""The spec model itself: every field described and given an update policy; typos fail."""

from pydantic import BaseModel

from clusterctl.spec.base import SpecModel, UpdatePolicy, field_policy
from clusterctl.spec.cluster import ClusterSpec
from tests.helpers import edited, load_dict


def _models(root=ClusterSpec, seen=None):
    from clusterctl.diff.spec_changes import _list_item_models, _models_in

    seen = seen if seen is not None else set()
    if root in seen:
        return seen
    seen.add(root)
    for info in root.model_fields.values():
        for m in _models_in(info.annotation) + _list_item_models(info.annotation):
            _models(m, seen)
    return seen


def test_every_field_has_description_and_policy():
    models = _models()
    assert len(models) > 15
    for m in models:
        assert issubclass(m, SpecModel) and m.model_config["extra"] == "forbid"
        for name, info in m.model_fields.items():
            assert info.description, f"{m.__name__}.{name} has no description"
            assert isinstance(field_policy(m, name), UpdatePolicy), f"{m.__name__}.{name} has no update policy"


def test_shrinking_a_count_needs_a_drain():
    from clusterctl.spec.pools import LocalPool

    assert field_policy(LocalPool, "count") is UpdatePolicy.LIVE
    assert field_policy(LocalPool, "count", shrinking=True) is UpdatePolicy.DRAIN


def test_typo_in_nested_section_fails():
    loaded = load_dict(edited("lab.yaml", lambda d: d["scheduler"]["slurm"].update(health_check_intervl=5)))
    assert [f.path for f in loaded.errors] == ["scheduler.slurm.health_check_intervl"]


def test_base_model_is_pydantic():
    assert issubclass(SpecModel, BaseModel)
