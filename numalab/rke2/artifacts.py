"""An airgap artifact set (`rke2_artifacts_dir`), checked on the controller before anything is uploaded.

A missing file, a file the sums file does not list, or a sum that differs is an error naming the file,
so a bad set never reaches a node. The node checks its staged copy again before installing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from numalab.files import file_digest
from numalab.model.errors import ValidationError
from numalab.model.rke2_install import IMAGES, SUMS, TARBALL, expected_sum, parse_sums


class ArtifactError(ValueError):
    """The artifact set cannot be installed; the message names the file."""


@dataclass(frozen=True)
class Artifact:
    name: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class ArtifactSet:
    """The files to stage on a node: tarball, images archive, and the sums file they were checked against."""

    directory: Path
    tarball: Artifact
    images: Artifact
    sums: Artifact

    @property
    def files(self) -> tuple[Artifact, ...]:
        return (self.sums, self.tarball, self.images)


def check_artifact_set(directory: Path | str) -> ArtifactSet:
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise ArtifactError(f"rke2_artifacts_dir: {directory} is not a directory")
    sums_path = directory / SUMS
    if not sums_path.is_file():
        raise ArtifactError(f"rke2_artifacts_dir: {sums_path} is missing")
    try:
        sums = parse_sums(sums_path.read_text(), where=str(sums_path))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"rke2_artifacts_dir: {exc}") from None
    present_images = [name for name in IMAGES if (directory / name).is_file()]
    if not present_images:
        raise ArtifactError(f"rke2_artifacts_dir: {directory} has neither {' nor '.join(IMAGES)}")
    tarball, images = (_checked(directory / name, sums, sums_path) for name in (TARBALL, present_images[0]))
    return ArtifactSet(directory, tarball, images, Artifact(SUMS, sums_path, file_digest(sums_path)))


def _checked(path: Path, sums: dict[str, str], sums_path: Path) -> Artifact:
    if not path.is_file():
        raise ArtifactError(f"rke2_artifacts_dir: {path} is missing")
    try:
        expected = expected_sum(sums, path.name, where=str(sums_path))
    except ValidationError as exc:
        raise ArtifactError(f"rke2_artifacts_dir: {exc}") from None
    actual = file_digest(path)
    if actual != expected:
        raise ArtifactError(f"rke2_artifacts_dir: {path} does not match {sums_path.name} "
                            f"(sha256 {actual}, expected {expected}); nothing was uploaded")
    return Artifact(path.name, path, actual)
