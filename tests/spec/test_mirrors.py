"""mirrors: URLs are untrusted strings that end up in an apt sources line and a get_url task: only plain http(s)
URLs pass, and a refusal names the field."""

from __future__ import annotations

import pytest

from tests.helpers import edited, load_dict

ONPREM = "onprem-64xh100-ib.yaml"

HOSTILE = [
    ("url", "https://mirror.example.com/cuda\ndeb [trusted=yes] http://evil.example.com/ /"),
    ("url", "https://mirror.example.com/{{ lookup('pipe', 'id') }}"),
    ("url", "https://mirror.example.com/{% raw %}x"),
    ("url", "https://mirror.example.com/cuda' /"),
    ("url", 'https://mirror.example.com/"x'),
    ("url", "file:///etc/passwd"),
    ("url", "ftp://mirror.example.com/cuda"),
    ("url", "[trusted=yes] https://mirror.example.com/cuda"),
    ("url", "https://user:secret@mirror.example.com/cuda"),
    ("url", "https://mirror.example.com/a b"),
    ("url", "https://mirror.example.com/%0adeb"),
    ("url", "https://mirror.example.com/" + "a" * 600),
    ("key_url", "https://mirror.example.com/key.asc\n"),
    ("key_url", "gopher://mirror.example.com/key"),
]


@pytest.mark.parametrize("field,value", HOSTILE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HOSTILE)])
def test_hostile_mirror_is_refused_naming_the_field(field, value):
    loaded = load_dict(edited(ONPREM, lambda d: d["mirrors"]["cuda"].update({field: value})))
    assert loaded.spec is None
    assert any(f.path == f"mirrors.cuda.{field}" for f in loaded.errors), [(f.path, f.message) for f in loaded.errors]


@pytest.mark.parametrize("url", ["https://artifactory.example.com/nvidia-cuda", "http://10.213.0.1:8080/vendor/nvidia/",
                                 "https://mirror.example.com/a_b/c~d/e+f-1.2/"])
def test_plain_mirror_urls_pass(url):
    loaded = load_dict(edited(ONPREM, lambda d: d["mirrors"]["cuda"].update(url=url)))
    assert loaded.ok, [(f.path, f.message) for f in loaded.errors]


def test_unknown_component_is_refused():
    loaded = load_dict(edited(ONPREM, lambda d: d["mirrors"].update(nvidia={"url": "https://x.example.com/"})))
    assert loaded.spec is None and any(f.path.startswith("mirrors") for f in loaded.errors)


def test_unknown_os_is_refused():
    loaded = load_dict(edited(ONPREM, lambda d: d["pools"][0].update(os="rhel9")))
    assert loaded.spec is None and any(f.path == "pools[0].os" for f in loaded.errors)
