"""The RKE2 install keys of host data, the release's sums file and the fetched kubeconfig, checked without a node."""

from __future__ import annotations

from typing import Any

import pytest

from numalab.model.errors import ValidationError
from numalab.model.rke2_install import (
    RELEASES_URL,
    Rke2Install,
    expected_sum,
    parse_sums,
    rewrite_kubeconfig_server,
    rke2_install_from_data,
)

VERSION = "v1.31.4+rke2r1"
HEX_A = "a" * 64
HEX_B = "0123456789abcdef" * 4


def field_of(data: dict[str, Any]) -> str:
    """The field a rejected host data names (errors must point at the key to fix)."""
    with pytest.raises(ValidationError) as caught:
        rke2_install_from_data(data, where="worker-a")
    return caught.value.field


@pytest.mark.parametrize("method", ["online", "preinstalled"])
def test_online_and_preinstalled_need_only_a_version(method: str) -> None:
    install = rke2_install_from_data({"rke2_install": method, "rke2_version": VERSION}, where="worker-a")
    assert install == Rke2Install(method, VERSION, None, RELEASES_URL)


def test_the_method_defaults_to_online() -> None:
    assert rke2_install_from_data({"rke2_version": VERSION}, where="h").method == "online"


def test_airgap_keeps_its_artifacts_dir() -> None:
    data = {"rke2_install": "airgap", "rke2_version": VERSION, "rke2_artifacts_dir": "/srv/rke2"}
    install = rke2_install_from_data(data, where="h")
    assert (install.method, install.artifacts_dir) == ("airgap", "/srv/rke2")


def test_an_unknown_method_names_rke2_install() -> None:
    assert field_of({"rke2_install": "tarball", "rke2_version": VERSION}) == "worker-a.rke2_install"


@pytest.mark.parametrize("version", [None, "", "v1.31.4", "1.31.4+rke2r1", "v1.31+rke2r1", "v1.31.4+k3s1", 1.31])
def test_a_missing_or_malformed_version_names_rke2_version(version: Any) -> None:
    assert field_of({"rke2_version": version}) == "worker-a.rke2_version"


def test_airgap_without_artifacts_dir_is_refused() -> None:
    assert field_of({"rke2_install": "airgap", "rke2_version": VERSION}) == "worker-a.rke2_artifacts_dir"


@pytest.mark.parametrize("method", ["online", "preinstalled"])
def test_an_artifacts_dir_outside_airgap_is_refused(method: str) -> None:
    data = {"rke2_install": method, "rke2_version": VERSION, "rke2_artifacts_dir": "/srv/rke2"}
    assert field_of(data) == "worker-a.rke2_artifacts_dir"


@pytest.mark.parametrize("url", ["ftp://mirror/rke2", "mirror.example/rke2", "https://", 42])
def test_a_release_url_must_be_http_or_https(url: Any) -> None:
    assert field_of({"rke2_version": VERSION, "rke2_release_url": url}) == "worker-a.rke2_release_url"


def test_kubelet_version_is_the_kubernetes_release() -> None:
    assert Rke2Install("online", VERSION).kubelet_version == "v1.31.4"
    assert Rke2Install("online", "v1.30.10+rke2r2").kubelet_version == "v1.30.10"


def test_download_base_url_encodes_the_plus() -> None:
    assert Rke2Install("online", VERSION).download_base == f"{RELEASES_URL}/v1.31.4%2Brke2r1"
    mirror = Rke2Install("online", VERSION, release_url="http://10.77.0.5:8080/rke2/")
    assert mirror.download_base == "http://10.77.0.5:8080/rke2/v1.31.4%2Brke2r1"


def test_parse_sums_reads_text_binary_and_path_forms() -> None:
    text = f"{HEX_A}  rke2.linux-amd64.tar.gz\n\n{HEX_B} *rke2-images.linux-amd64.tar.zst\n{HEX_A.upper()}  ./x/y.txt\n"
    assert parse_sums(text) == {
        "rke2.linux-amd64.tar.gz": HEX_A,
        "rke2-images.linux-amd64.tar.zst": HEX_B,
        "y.txt": HEX_A,
    }


@pytest.mark.parametrize("bad", ["deadbeef  rke2.linux-amd64.tar.gz", HEX_A, f"{HEX_A[:-1]}g  file"])
def test_a_malformed_sums_line_names_file_and_line(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_sums(f"{HEX_A}  ok\n{bad}\n", where="/srv/rke2/sha256sum-amd64.txt")
    assert caught.value.field == "/srv/rke2/sha256sum-amd64.txt:2"


def test_expected_sum_names_the_missing_file() -> None:
    sums = {"rke2.linux-amd64.tar.gz": HEX_A}
    assert expected_sum(sums, "rke2.linux-amd64.tar.gz") == HEX_A
    with pytest.raises(ValidationError, match="no sum for rke2-images.linux-amd64.tar.zst"):
        expected_sum(sums, "rke2-images.linux-amd64.tar.zst")


def test_rewrite_kubeconfig_server_points_at_the_address_and_keeps_the_rest() -> None:
    fetched = {
        "apiVersion": "v1",
        "clusters": [
            {"name": "default", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="}}
        ],
        "users": [{"name": "default", "user": {"client-key-data": "a2V5"}}],
    }
    rewritten = rewrite_kubeconfig_server(fetched, "10.77.0.10")
    assert rewritten["clusters"] == [
        {"name": "default", "cluster": {"server": "https://10.77.0.10:6443", "certificate-authority-data": "Q0E="}}
    ]
    assert rewritten["users"] == fetched["users"]
    assert fetched["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"  # the input is not changed


def test_rewrite_kubeconfig_server_without_clusters_is_an_error() -> None:
    with pytest.raises(ValidationError) as caught:
        rewrite_kubeconfig_server({"clusters": []}, "10.77.0.10")
    assert caught.value.field == "rke2.yaml.clusters"
