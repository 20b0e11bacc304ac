"""`numalab image push` against a real docker-registry 2.8 over TLS, then read back through the v2 API."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from e2e.probe_pods import probe_container
from numalab.cli import main
from numalab.images.lab_images import lab_images, push_lab_images, select_images
from numalab.images.oci import MANIFEST_MEDIA_TYPE, sha256_digest
from numalab.images.push import RegistryClient, RegistryError
from tests.images.conftest import free_port, make_ca

PROBE_SCRIPT = Path(__file__).parents[2] / "e2e" / "probe.sh"
# coredns is left out: its image needs a Go build of CoreDNS (minutes when not cached); test_coredns_image.py
# builds it from a stand-in binary.
PUSHED = ["pause", "probe"]


def push(registry, capsys, *images: str, ca: Path | None = None, resolve: str | None = None) -> tuple[int, str, str]:
    argv = ["image", "push", "--registry", registry.name, "--ca", str(ca or registry.ca_file),
            "--resolve", resolve or registry.resolve, *images]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def first_push(registry):
    """The pause and probe images pushed once into the empty registry, through the Python API the deploy calls."""
    return push_lab_images(registry.name, registry.ca_file, registry.resolve, only=PUSHED)


def layer_files(client: RegistryClient, repository: str, manifest: dict) -> tuple[bytes, dict[str, bytes]]:
    layer = client.get_blob(repository, manifest["layers"][0]["digest"])
    tar_bytes = gzip.decompress(layer)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        files = {m.name: (tar.extractfile(m).read() if m.isfile() else m.linkname.encode()) for m in tar}
    return tar_bytes, files


def test_first_push_uploads_every_blob_and_the_registry_serves_them(registry, first_push):
    client = registry.client()
    assert [(image.repository, image.blobs_uploaded, image.manifest_uploaded) for image in first_push] == [
        ("numa-lab/pause", 2, True), ("numa-lab/probe", 2, True)]
    for pushed in first_push:
        answer = client.get_manifest(pushed.repository, pushed.tag)
        assert answer.header("Docker-Content-Digest") == pushed.digest == sha256_digest(answer.body)
        assert answer.header("Content-Type") == MANIFEST_MEDIA_TYPE
        manifest = json.loads(answer.body)
        config = json.loads(client.get_blob(pushed.repository, manifest["config"]["digest"]))
        tar_bytes, _ = layer_files(client, pushed.repository, manifest)
        assert config["rootfs"]["diff_ids"] == [sha256_digest(tar_bytes)]
        assert pushed.reference == f"{registry.name}/{pushed.repository}:{pushed.tag}"


def test_containerd_resolves_the_tag_with_its_accept_header(registry, first_push):
    """containerd 1.7's resolver HEADs the tag accepting Docker and OCI types; registry 2.8 answers OCI."""
    accept = ", ".join(["application/vnd.docker.distribution.manifest.v2+json",
                        "application/vnd.docker.distribution.manifest.list.v2+json",
                        MANIFEST_MEDIA_TYPE, "application/vnd.oci.image.index.v1+json", "*/*"])
    for pushed in first_push:
        answer = registry.client().request("HEAD", f"/v2/{pushed.repository}/manifests/{pushed.tag}", "resolve",
                                           pushed.repository, headers={"Accept": accept})
        assert (answer.status, answer.header("Content-Type")) == (200, MANIFEST_MEDIA_TYPE)
        assert answer.header("Docker-Content-Digest") == pushed.digest


def test_pause_layer_holds_a_static_pause_binary(registry, first_push, tmp_path):
    client = registry.client()
    pause = first_push[0]
    _, files = layer_files(client, pause.repository, json.loads(client.get_manifest(pause.repository, pause.tag).body))
    assert list(files) == ["pause"]
    binary = tmp_path / "pause"
    binary.write_bytes(files["pause"])
    binary.chmod(0o755)
    assert files["pause"][:4] == b"\x7fELF" and b"/lib64/ld-linux" not in files["pause"]
    assert "statically linked" in subprocess.run(["file", str(binary)], capture_output=True, text=True).stdout
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    assert ldd.returncode != 0 and "not a dynamic executable" in ldd.stdout + ldd.stderr
    version = subprocess.run([str(binary), "-v"], capture_output=True, text=True, check=True).stdout
    assert version == f"pause.c v{pause.tag}-v1.36.3\n"


def test_probe_layer_runs_the_probe_script_with_its_own_busybox(registry, first_push, tmp_path):
    client = registry.client()
    probe = first_push[1]
    manifest = json.loads(client.get_manifest(probe.repository, probe.tag).body)
    tar_bytes, files = layer_files(client, probe.repository, manifest)
    assert files["bin/sh"] == b"busybox" and files["bin/busybox"][:4] == b"\x7fELF"
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        tar.extractall(tmp_path, filter="tar")
    env = {"PATH": str(tmp_path / "bin")}
    direct = subprocess.run([str(tmp_path / "bin" / "busybox"), "sh", str(PROBE_SCRIPT)], env=env,
                            capture_output=True, text=True, timeout=30)
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout.startswith("numa-probe begin\nCpus_allowed_list:")
    assert "numa-probe end" in direct.stdout
    # What the pod runs: `sh -c <probe script>` with sh, grep and cat found on the image's PATH.
    command = probe_container("probe", "1", hold=False)["command"]
    as_pod = subprocess.run([str(tmp_path / "bin" / command[0]), *command[1:]], env=env,
                            capture_output=True, text=True, timeout=30)
    assert as_pod.returncode == 0 and as_pod.stdout == direct.stdout, as_pod.stderr


def test_second_push_uploads_nothing_and_says_so(registry, first_push, capsys):
    code, out, err = push(registry, capsys, *PUSHED)
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{image.repository}:{image.tag} {image.digest} already present"
                                for image in first_push]


def test_cli_pushes_one_image_by_key(registry, first_push, capsys):
    client = registry.client()
    probe = first_push[1]
    deleted = client.request("DELETE", f"/v2/{probe.repository}/manifests/{probe.digest}", "delete", probe.repository)
    assert deleted.status == 202
    code, out, _ = push(registry, capsys, "probe")
    assert code == 0
    assert out == f"numa-lab/probe:1 {probe.digest} uploaded 0 blobs (2 already present)\n"
    assert client.manifest_digest(probe.repository, "1") == probe.digest


def test_digests_do_not_depend_on_the_push(registry, first_push):
    images = select_images(lab_images(), PUSHED)
    assert [image.build().digest for image in images] == [image.digest for image in first_push]


def test_wrong_ca_fails_tls_and_names_the_registry(registry, capsys, tmp_path):
    make_ca(tmp_path, "other-ca")
    code, out, err = push(registry, capsys, "probe", ca=tmp_path / "other-ca.crt")
    assert (code, out) == (1, "")
    assert f"registry {registry.name} (at 127.0.0.1), numa-lab/probe, HEAD blob sha256:" in err
    assert "TLS verification failed: unable to get local issuer certificate" in err


def test_name_not_in_the_certificate_fails_tls(registry):
    client = RegistryClient(f"elsewhere:{registry.port}", registry.ca_file, "elsewhere:127.0.0.1")
    with pytest.raises(RegistryError, match=r"TLS verification failed: Hostname mismatch.*'elsewhere'"):
        client.manifest_digest("numa-lab/probe", "1")


def test_unreachable_registry_fails_with_the_step(capsys, registry):
    port = free_port()
    code, out, err = main(["image", "push", "--registry", f"registry:{port}", "--ca", str(registry.ca_file),
                           "--resolve", "registry:127.0.0.1", "probe"]), *capsys.readouterr()
    assert (code, out) == (1, "")
    assert f"registry registry:{port} (at 127.0.0.1), numa-lab/probe, HEAD blob sha256:" in err
    assert "cannot reach it: [Errno 111] Connection refused" in err


@pytest.mark.parametrize("argv, message", [
    (["--registry", "registry"], "registry 'registry': expected HOST:PORT"),
    (["--registry", "registry:5000", "--resolve", "other:10.0.0.1"], "names host 'other' but the registry is"),
    (["--registry", "registry:5000", "--ca", "/nonexistent/ca.crt"], "CA file /nonexistent/ca.crt does not exist"),
    (["--registry", "registry:5000", "nginx"], "'nginx' is not a lab image"),
])
def test_bad_arguments_exit_2(argv, message, capsys):
    code, out, err = main(["image", "push", *argv]), *capsys.readouterr()
    assert (code, out) == (2, "") and message in err


def test_registry_error_names_http_status(registry):
    expected = r"numa-lab/none, GET manifest 1: HTTP 404 \(expected 200\): .*MANIFEST_UNKNOWN"
    with pytest.raises(RegistryError, match=expected):
        registry.client().get_manifest("numa-lab/none", "1")

