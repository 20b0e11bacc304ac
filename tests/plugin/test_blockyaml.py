"""The kubeconfig YAML reader: kubectl's and PyYAML's block style, comments and quotes, JSON, and a clear
error for what it does not read."""

from __future__ import annotations

import pytest
from numa_align.blockyaml import BlockYamlError, parse

KUBECTL = """\
---
# written by kubectl config
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTg==
    server: https://10.77.0.10:6443   # the server
  name: "numa-lab"
contexts:
- context: {}
  name: 'it''s'
- name: empty
current-context: numa-align@numa-lab
preferences: {}
users:
- name: system:node:worker-1
  user:
    token: "a#b: c"
    insecure: true
    nothing: ~
nested:
  - - a
    - b
"""


def test_kubectls_block_style_with_comments_and_quotes():
    assert parse(KUBECTL) == {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": "LS0tLS1CRUdJTg==",
                                  "server": "https://10.77.0.10:6443"}, "name": "numa-lab"}],
        "contexts": [{"context": {}, "name": "it's"}, {"name": "empty"}],
        "current-context": "numa-align@numa-lab",
        "preferences": {},
        "users": [{"name": "system:node:worker-1", "user": {"token": "a#b: c", "insecure": True, "nothing": None}}],
        "nested": [["a", "b"]],
    }


def test_the_labs_kubeconfig_reads_as_pyyaml_reads_it():
    yaml = pytest.importorskip("yaml")
    kubeconfigs = pytest.importorskip("numalab.pki.kubeconfigs")
    text = kubeconfigs.kubeconfig("https://10.77.0.10:6443", b"CA" * 600, b"CERT" * 300, b"KEY" * 400,
                                  "system:node:worker-1")
    assert parse(text) == yaml.safe_load(text)


@pytest.mark.parametrize(("text", "words"), [
    ("a: |\n  x\n", "line 1: '|': flow collections, anchors, aliases, tags and block scalars are not read"),
    ("a: [1, 2]\n", "line 1: '.1, 2.': flow collections"),
    ("a: b\n  c\n", "line 2: unexpected indentation"),
    ("a: 1\na: 2\n", "line 2: key 'a' given twice"),
    ("a: 'open\n", "line 1: unterminated quoted string"),
    ("a:\n\t- b\n", "line 2: a tab in the indentation"),
    ('{"a": }', "line 1: not JSON"),
])
def test_what_it_does_not_read_is_an_error_naming_the_line(text, words):
    with pytest.raises(BlockYamlError, match=words):
        parse(text)
