"""Kubeconfigs as people write them, read through PyYAML: flow style, block scalars holding wrapped base64,
and a file that is not YAML named with its line and column."""

from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest
from numa_align.kubeconfig import ConfigError, read_kubeconfig

from tests.plugin.fakepki import Pki, make_pki


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def wrapped(data: bytes, indent: str) -> str:
    """Base64 in 64-column lines, as `base64` prints it, each line indented for a block scalar."""
    return textwrap.indent("\n".join(textwrap.wrap(b64(data), 64)), indent)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_a_kubeconfig_in_flow_style(tmp_path: Path, pki: Pki) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "{apiVersion: v1, kind: Config, current-context: lab, preferences: {},\n"
        f" clusters: [{{name: k, cluster: {{server: 'https://10.77.0.10:6443/',"
        f" certificate-authority-data: {b64(pki.pem('ca.crt'))}}}}}],\n"
        " contexts: [{name: lab, context: {cluster: k, user: u}}],\n"
        ' users: [{name: u, user: {token: "s3cret"}}]}\n')
    config = read_kubeconfig(path)
    assert (config.server, config.token, config.ca_data) == ("https://10.77.0.10:6443", "s3cret",
                                                             pki.pem("ca.crt").decode())
    assert config.source == f"kubeconfig {path}, context lab, user u"
    config.ssl_context()  # the CA loads


def test_block_scalars_holding_wrapped_base64(tmp_path: Path, pki: Pki) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: >-\n      https://10.77.0.10:6443\n"
        f"    certificate-authority-data: |\n{wrapped(pki.pem('ca.crt'), '      ')}\n"
        "contexts:\n- name: lab\n  context: {cluster: k, user: node}\ncurrent-context: lab\n"
        "users:\n- name: node\n  user:\n"
        f"    client-certificate-data: >-\n{wrapped(pki.pem('client.crt'), '      ')}\n"
        f"    client-key-data: |-\n{wrapped(pki.pem('client.key'), '      ')}\n")
    config = read_kubeconfig(path)
    assert config.server == "https://10.77.0.10:6443"
    assert config.ca_data == pki.pem("ca.crt").decode()
    assert (config.cert_data, config.key_data) == (pki.pem("client.crt"), pki.pem("client.key"))
    assert config.ssl_context()  # the CA, certificate and key load


def test_a_file_that_is_not_yaml_is_named_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nusers:\n- name: u\n  user:\n\ttoken: t\n")
    with pytest.raises(ConfigError, match=rf"^kubeconfig {path} is not YAML: line 5, column 1: while scanning for "
                                          r"the next token: found character '\\t' that cannot start any token$"):
        read_kubeconfig(path)
    path.write_text("clusters: [{name: k\n")
    with pytest.raises(ConfigError, match=rf"^kubeconfig {path} is not YAML: line 2, column 1: while parsing a flow "
                                          "mapping: expected ',' or '}', but got '<stream end>'$"):
        read_kubeconfig(path)
