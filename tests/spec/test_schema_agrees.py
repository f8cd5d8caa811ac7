"""The JSON Schema (what an editor checks) and `validate` give the same verdict: every example is valid for both, and
every single-field error of the hostile corpus is rejected by both."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from ruamel.yaml import YAML

from clusterctl.spec.schema import schema_json
from clusterctl.validate import load_text
from tests.conftest import EXAMPLES
from tests.spec.hostile import corpus



def _ecma_pattern(validator, pattern, instance, schema):
    """JSON Schema patterns are ECMA-262 regexes, where `$` ends the input; Python's `re` (which the jsonschema
    package uses) also lets `$` match before a final newline, so "flock\n" would pass there and in no editor."""
    if validator.is_type(instance, "string") and not re.search(pattern.replace("$", r"\Z"), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


Ecma = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _ecma_pattern})
VALIDATOR = Ecma(json.loads(schema_json()))
SINGLE_FIELD = [c for c in corpus() if c.schema]


def _data(text: str):
    return YAML(typ="safe").load(text)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_valid_for_both(path):
    text = path.read_text()
    assert load_text(text).ok
    assert not list(VALIDATOR.iter_errors(_data(text)))


@pytest.mark.parametrize("case", SINGLE_FIELD, ids=[c.id for c in SINGLE_FIELD])
def test_single_field_errors_rejected_by_both(case):
    assert not load_text(case.text).ok
    assert list(VALIDATOR.iter_errors(_data(case.text))), f"the JSON Schema accepts what validate refuses: {case.id}"


def test_most_of_the_corpus_is_single_field():
    assert len(SINGLE_FIELD) >= 60
