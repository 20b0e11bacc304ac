"""The coredns lab image: named after the CoreDNS pin, built only when asked, /coredns run with the Corefile."""

from __future__ import annotations

import gzip
import importlib
import io
import json
import tarfile

import pytest

from numalab.images.lab_images import ImageBuildError, build_coredns, lab_images, select_images
from numalab.k8s.errors import BinariesError

# The module, not the function numalab.images re-exports under the same name.
module = importlib.import_module("numalab.images.lab_images")
FAKE_BINARY = b"\x7fELF fake coredns\n"


def layer_files(layer_gz: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer_gz))) as tar:
        return {m.name: (m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()}


@pytest.fixture
def binary(tmp_path):
    path = tmp_path / "coredns"
    path.write_bytes(FAKE_BINARY)
    return path


def test_coredns_is_a_lab_image_tagged_with_the_pin_and_not_built_by_listing(monkeypatch):
    monkeypatch.setattr(module, "coredns_binary", lambda: pytest.fail("listing the images must not build CoreDNS"))
    (image,) = select_images(lab_images(), ["coredns"])
    assert (image.key, image.repository, image.tag) == ("coredns", "numa-lab/coredns", "1.15.0")
    assert image.name == "numa-lab/coredns:1.15.0"
    assert select_images(lab_images(), ["numa-lab/coredns:1.15.0"]) == [image]


def test_coredns_image_runs_the_binary_with_the_mounted_corefile(binary):
    image = build_coredns(binary)
    files = layer_files(image.layer)
    assert sorted(files) == ["coredns", "etc", "etc/group", "etc/passwd"]
    info, data = files["coredns"]
    assert info.isfile() and info.mode == 0o755 and data == FAKE_BINARY
    assert files["etc/passwd"][1].startswith(b"root:x:0:0:") and files["etc/group"][1].startswith(b"root:x:0:")
    config = json.loads(image.config)["config"]
    assert config["Entrypoint"] == ["/coredns"] and config["Cmd"] == ["-conf", "/etc/coredns/Corefile"]
    assert config["User"] == "0:0"
    assert build_coredns(binary).digest == image.digest


def test_lab_image_builds_from_the_cached_binary(binary, monkeypatch):
    monkeypatch.setattr(module, "coredns_binary", lambda: binary)
    (image,) = select_images(lab_images(), ["coredns"])
    assert image.build().digest == build_coredns(binary).digest


def test_a_failed_coredns_build_is_an_image_build_error(monkeypatch):
    def refuse():
        raise BinariesError("go build failed (exit 1): boom")

    monkeypatch.setattr(module, "coredns_binary", refuse)
    with pytest.raises(ImageBuildError, match="go build failed"):
        build_coredns()
