"""Fuzz the whole front half as a pull request would: a mutated spec (hostile strings included) goes through load,
validate, render and the plan report in every format. The only outcome other than success is findings: no
exception of any kind escapes (the CLI would print `internal error`).

CLUSTERCTL_FUZZ_EXAMPLES sets the number of cases (4,000 by default, what CI runs); CLUSTERCTL_FUZZ_SECONDS bounds the
time: once it is spent, the remaining cases return at once and the count of exercised ones is printed and checked.
Hypothesis draws a new random seed on every run (no example database, not derandomized), so each CI run exercises
different cases; a failure prints the seed and the shrunk example to reproduce it.
"""

from __future__ import annotations

import copy
import os
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.diff import build_report
from clusterctl.diff.formats import FORMATS
from clusterctl.render import render_spec
from clusterctl.validate import load_text
from tests.conftest import EXAMPLES
from tests.helpers import example_dict, to_yaml
from tests.spec.test_mutations import _mutate, _paths

EXAMPLES_WANTED = int(os.environ.get("CLUSTERCTL_FUZZ_EXAMPLES", "4000"))
SECONDS = float(os.environ.get("CLUSTERCTL_FUZZ_SECONDS", "900"))
MIN_EXERCISED = min(EXAMPLES_WANTED, 4_000)

BASES = [example_dict(p.name) for p in EXAMPLES]
BUILDS = [render_spec(load_text(p.read_text()).spec)[1] for p in EXAMPLES]

HOSTILE = ["{{ lookup('pipe','id') }}", "{% for x in y %}", "a\nb", "x\rNodeName=evil", "$(id)", "`id`", "a b", "../..",
           "/etc", "/", "GPU[01-02]", "n[1-99999999]", "10.0.1.256", "\u2028", "\x00", "", "é", "9" * 50, "x" * 300,
           "ops@h:22", "10.0.0.1@o2ib", "o2ib0(ib0)", "vers=4.2,hard", "us-west-2a", "p5.48xlarge", "s3://b/p"]

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16),
    st.sampled_from(HOSTILE),
    st.lists(st.sampled_from(HOSTILE + ["gpu", "owned", "burst", "p5"]), max_size=3),
    st.dictionaries(st.sampled_from(["name", "count", "pools", "type", "A_B", "bad key"]),
                    st.one_of(st.integers(0, 3), st.sampled_from(HOSTILE)), max_size=2),
)

exercised = {"n": 0, "rendered": 0, "started": None}


@settings(max_examples=EXAMPLES_WANTED, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    base=st.sampled_from(range(len(BASES))),
    picks=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "delete", "duplicate", "unknown-key"]),
                             values), min_size=1, max_size=4),
)
def test_pipeline_never_raises(base, picks):
    exercised["started"] = exercised["started"] or time.monotonic()
    if time.monotonic() - exercised["started"] > SECONDS:
        return  # the time bound is spent; the count below says how many cases really ran
    exercised["n"] += 1
    data = copy.deepcopy(BASES[base])
    for index, action, value in picks:
        paths = list(_paths(data))
        data = _mutate(data, paths[index % len(paths)], action, value)
    loaded = load_text(to_yaml(data))
    for f in loaded.findings:
        assert f.message and f.code
    if not loaded.ok:
        return
    _, files = render_spec(loaded.spec)
    exercised["rendered"] += 1
    report = build_report(loaded.spec.name, BUILDS[base], files)
    for fmt in FORMATS.values():
        assert fmt(report)


def test_enough_cases_were_exercised():
    """Runs after the fuzz (file order): the bound on time must not have cut the run short of the wanted count."""
    print(f"\nfuzz: {exercised['n']} cases through load/validate, {exercised['rendered']} rendered and reported, "
          f"{time.monotonic() - (exercised['started'] or time.monotonic()):.0f} s")
    assert exercised["n"] >= MIN_EXERCISED
