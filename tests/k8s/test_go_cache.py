"""go:vX.Y.Z specs through the real cache, lock and rename, with the Go build replaced by a fake builder."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest

from numalab.k8s.binaries import resolve_binaries
from numalab.k8s.cache import default_cache_root
from numalab.k8s.errors import BinariesError
from numalab.k8s.source import go_version
from numalab.k8s.versions import BINARIES
from tests.k8s.fakebinaries import RecordingProgress, fake_binaries


class FakeBuilder:
    """Writes fake binaries stamped `stamp` (default: the version asked for) and counts its calls."""

    def __init__(self, stamp: str | None = None, delay: float = 0.0, fail: bool = False) -> None:
        self.stamp, self.delay, self.fail = stamp, delay, fail
        self.calls: list[str] = []

    def __call__(self, version, work, progress):
        self.calls.append(version)
        time.sleep(self.delay)
        fake_binaries(work / "bin", self.stamp or version)
        if self.fail:
            raise BinariesError(f"go build failed (exit 1): boom; full output in {work}.log")
        return {"build_date": "2026-07-22T18:07:38Z"}


@pytest.fixture(scope="module")
def toolchain():
    return go_version()


def build(tmp_path, builder, spec="go:v1.36.3", **kwargs):
    progress = kwargs.pop("progress", RecordingProgress())
    return resolve_binaries(spec, tmp_path / "cache", builder=builder, progress=progress, **kwargs)


def test_first_call_builds_into_a_complete_entry(tmp_path, toolchain):
    builder = FakeBuilder()
    binaries = build(tmp_path, builder, expected_version="v1.36.3")
    entry = tmp_path / "cache" / f"v1.36.3-{toolchain}"
    assert builder.calls == ["v1.36.3"]
    assert binaries.directory == entry / "bin"
    assert binaries.version == "v1.36.3"
    assert binaries.source == f"go:v1.36.3 built with {toolchain}"
    sums = {name: hashlib.sha256((entry / "bin" / name).read_bytes()).hexdigest() for name in BINARIES}
    assert binaries.sha256 == sums
    assert (entry / "SHA256SUMS").read_text().splitlines()[0] == f"{sums['kubelet']}  bin/kubelet"
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["version"] == "v1.36.3" and manifest["go_version"] == toolchain
    assert manifest["sha256"] == sums and manifest["build_date"] == "2026-07-22T18:07:38Z"
    assert manifest["seconds"] >= 0
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([entry.name, f"{entry.name}.lock"])


def test_second_call_is_a_cache_hit(tmp_path):
    builder = FakeBuilder()
    first = build(tmp_path, builder)
    progress = RecordingProgress()
    assert build(tmp_path, builder, progress=progress) == first
    assert builder.calls == ["v1.36.3"]
    assert progress.saw("check cached")


def test_damaged_entry_is_rebuilt_with_a_message(tmp_path):
    builder = FakeBuilder()
    first = build(tmp_path, builder)
    with (first.directory / "kube-scheduler").open("a") as binary:
        binary.write("# changed\n")
    progress = RecordingProgress()
    again = build(tmp_path, builder, progress=progress)
    assert builder.calls == ["v1.36.3", "v1.36.3"]
    assert progress.saw("is damaged (bin/kube-scheduler has sha256")
    assert again.sha256 == first.sha256


def test_entry_without_manifest_is_rebuilt(tmp_path):
    builder = FakeBuilder()
    first = build(tmp_path, builder)
    (first.directory.parent / "manifest.json").unlink()
    progress = RecordingProgress()
    build(tmp_path, builder, progress=progress)
    assert len(builder.calls) == 2 and progress.saw("is damaged (no manifest.json)")


def test_parallel_callers_build_once(tmp_path):
    builder = FakeBuilder(delay=1.0)
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(build(tmp_path, builder))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builder.calls == ["v1.36.3"]
    assert len(results) == 2 and results[0] == results[1]


def test_build_stamping_another_version_is_refused_and_not_cached(tmp_path):
    with pytest.raises(BinariesError, match=r"are v1\.36\.2, expected v1\.36\.3"):
        build(tmp_path, FakeBuilder(stamp="v1.36.2"))
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_failed_build_leaves_no_work_directory(tmp_path):
    with pytest.raises(BinariesError, match="go build failed"):
        build(tmp_path, FakeBuilder(fail=True))
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_not_built_yet_is_reported_when_building_is_off(tmp_path, toolchain):
    builder = FakeBuilder()
    refusal = rf"go:v1\.36\.3 is not built yet for {toolchain} under .*; run `numalab k8s build --version go:v1\.36\.3`"
    with pytest.raises(BinariesError, match=refusal):
        build(tmp_path, builder, build=False)
    assert builder.calls == []
    build(tmp_path, builder)
    assert build(tmp_path, builder, build=False).version == "v1.36.3"


@pytest.mark.parametrize(
    ("spec", "expected", "message"),
    [
        ("go:v1.36.3", "v1.36.2", r"go:v1\.36\.3 asks for v1\.36\.3, but v1\.36\.2 is expected"),
        ("go:1.36.3", None, r"go:1\.36\.3: '1\.36\.3' is not a Kubernetes release version"),
        ("go:v1.20.0", None, r"older than v1\.21"),
        ("go:v1.36.3", "latest", r"expected version: 'latest' is not"),
    ],
)
def test_bad_go_specs_are_refused_before_building(tmp_path, spec, expected, message):
    builder = FakeBuilder()
    with pytest.raises(BinariesError, match=message):
        build(tmp_path, builder, spec=spec, expected_version=expected)
    assert builder.calls == []


def test_real_go_refuses_a_version_the_proxy_does_not_have(tmp_path):
    with pytest.raises(BinariesError) as refused:
        resolve_binaries("go:v1.36.99", tmp_path / "cache", progress=RecordingProgress())
    message = str(refused.value)
    assert message.startswith("k8s.io/kubernetes@v1.36.99 cannot be downloaded:") and "\n" not in message
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".lock"]


def test_cache_root_follows_the_image_dir(tmp_path):
    assert default_cache_root({"NUMALAB_IMAGE_DIR": str(tmp_path)}) == tmp_path / "k8s"
    assert default_cache_root({}) == Path("~/.local/share/numa-lab/images/k8s").expanduser()
