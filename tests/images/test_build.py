"""Building the lab images: deterministic bytes, the pause TAG and CFLAGS read from the Makefile, layer contents."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from numalab.images.lab_images import (
    ImageBuildError,
    build_pause,
    build_probe,
    lab_images,
    pause_cflags,
    pause_makefile,
    pause_tag,
    select_images,
)
from numalab.images.oci import MANIFEST_MEDIA_TYPE, Entry, RuntimeConfig, build_image, layer_tar, sha256_digest
from numalab.k8s.versions import KUBERNETES_VERSION


def members(layer_gz: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer_gz))) as tar:
        return {member.name: member for member in tar.getmembers()}


def test_same_inputs_give_same_digests():
    entries = [Entry.file("b/x", b"x"), Entry.directory("b"), Entry.symlink("b/y", "x")]
    first = build_image(entries, RuntimeConfig(cmd=("sh",)), "test")
    second = build_image(list(reversed(entries)), RuntimeConfig(cmd=("sh",)), "test")
    assert first.digest == second.digest and first.layer == second.layer
    changed = build_image([*entries, Entry.file("b/z", b"")], RuntimeConfig(cmd=("sh",)), "test")
    assert changed.digest != first.digest


def test_layer_is_sorted_with_fixed_owner_and_mtime():
    tar = layer_tar([Entry.file("etc/passwd", b"root"), Entry.directory("etc"), Entry.symlink("bin/sh", "busybox"),
                     Entry.directory("bin")])
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        infos = archive.getmembers()
    assert [info.name for info in infos] == ["bin", "bin/sh", "etc", "etc/passwd"]
    assert {(info.mtime, info.uid, info.gid) for info in infos} == {(0, 0, 0)}
    assert infos[1].issym() and infos[1].linkname == "busybox"


def test_layer_refuses_bad_paths():
    with pytest.raises(ValueError, match=r"'\.\./etc' must be a relative path"):
        layer_tar([Entry.file("../etc", b"")])
    with pytest.raises(ValueError, match="'a' is given twice"):
        layer_tar([Entry.file("a", b""), Entry.file("/a", b"")])


def test_manifest_names_config_and_layer_and_config_names_diff_id():
    image = build_image([Entry.file("pause", b"\x7fELF", 0o755)], RuntimeConfig(entrypoint=("/pause",)), "test")
    manifest = json.loads(image.manifest)
    assert manifest["mediaType"] == MANIFEST_MEDIA_TYPE
    assert manifest["config"] == {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": image.config_digest, "size": len(image.config)}
    assert manifest["layers"][0]["digest"] == sha256_digest(image.layer)
    config = json.loads(image.config)
    assert (config["architecture"], config["os"]) == ("amd64", "linux")
    assert config["rootfs"]["diff_ids"] == [sha256_digest(gzip.decompress(image.layer))]
    assert image.layer[:2] == b"\x1f\x8b" and image.layer[4:8] == b"\0\0\0\0"  # gzip with mtime 0


def test_pause_tag_and_cflags_come_from_the_makefile(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("REGISTRY ?= x\nTAG ?= 9.8.7\nREV = $(shell git describe)\n"
                        "CFLAGS = -Os -Wall -static -DVERSION=v$(TAG)-$(REV)\n")
    assert pause_tag(makefile) == "9.8.7"
    assert pause_cflags(makefile, "v1.2.3") == ["-Os", "-Wall", "-static", "-DVERSION=v9.8.7-v1.2.3"]
    makefile.write_text("TAG := 1\n")
    with pytest.raises(ImageBuildError, match=r"no `TAG \?= <version>` line"):
        pause_tag(makefile)


def test_real_pause_makefile_gives_the_tag_lab_images_uses():
    makefile = pause_makefile(KUBERNETES_VERSION)
    pause = select_images(lab_images(), ["pause"])[0]
    assert pause.name == f"numa-lab/pause:{pause_tag(makefile)}"
    assert "-static" in pause_cflags(makefile, KUBERNETES_VERSION)


def test_select_images_by_key_repository_or_name():
    images = lab_images()
    assert [image.key for image in select_images(images, [])] == ["pause", "probe", "coredns", "numa-align"]
    assert [image.key for image in select_images(images, ["numa-lab/probe:1", "probe", "pause"])] == ["probe", "pause"]
    with pytest.raises(LookupError, match="'nginx' is not a lab image; expected one of pause"):
        select_images(images, ["nginx"])


def test_pause_and_probe_builds_are_deterministic():
    assert build_pause().digest == build_pause().digest
    assert build_probe().digest == build_probe().digest


def test_pause_image_is_one_binary_run_as_65535():
    image = build_pause()
    assert list(members(image.layer)) == ["pause"]
    assert members(image.layer)["pause"].mode == 0o755
    config = json.loads(image.config)["config"]
    assert config["Entrypoint"] == ["/pause"] and config["User"] == "65535:65535"


def test_probe_image_links_every_applet_to_busybox():
    layer = members(build_probe().layer)
    for applet in ("sh", "grep", "cat", "sleep", "echo", "ls"):
        assert layer[f"bin/{applet}"].issym() and layer[f"bin/{applet}"].linkname == "busybox"
    assert layer["bin/busybox"].isfile() and layer["bin/busybox"].mode == 0o755
    assert "bin/busybox/busybox" not in layer and layer["tmp"].mode == 0o1777
