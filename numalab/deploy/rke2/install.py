"""Stage `rke2_install`: RKE2 onto the node by `rke2_install` (online, airgap, preinstalled).

airgap: the artifact set is checked on the controller (numalab.rke2.artifacts), uploaded to a staging
directory, checked again there against its sums file, and only then installed; a mismatch removes the
staging directory and fails naming the file, so the node is left as it was. online: the node downloads
the release tarball and sums file from `rke2_release_url` into the staging directory, same checks. The
install follows RKE2's install script with INSTALL_RKE2_ARTIFACT_PATH: images archive into
/var/lib/rancher/rke2/agent/images/, the tarball extracted into /usr/local. A marker records what was
installed, so a second run uploads and installs nothing; an install (a new `rke2_version`) is returned to the
service stage, which restarts rke2-server / rke2-agent for it.
"""

from __future__ import annotations

import functools
import shlex

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.operation import OperationMeta
from pyinfra.facts.files import File
from pyinfra.operations import files, server, systemd

from numalab.deploy import context
from numalab.deploy.facts import TextFile
from numalab.model import rke2_install as spec
from numalab.rke2.artifacts import ArtifactError, ArtifactSet, check_artifact_set


@functools.lru_cache(maxsize=4)
def _artifact_set(directory: str) -> ArtifactSet:
    try:
        return check_artifact_set(directory)
    except ArtifactError as exc:
        raise DeployError(str(exc)) from None


def verify_command(names: list[str]) -> str:
    """Check staged files against the staged sums file; on a mismatch remove the stage and fail naming it."""
    stage, sums = shlex.quote(spec.STAGE_DIR), shlex.quote(spec.SUMS)
    return (
        f"cd {stage} && for f in {' '.join(shlex.quote(n) for n in names)}; do "
        f"want=$(awk -v f=\"$f\" "
        f"'{{n=$2; sub(/^\\*/, \"\", n); sub(/.*\\//, \"\", n)}} n == f {{print tolower($1)}}' {sums}); "
        f"have=$(sha256sum \"$f\" | cut -c1-64); "
        f"if [ -z \"$want\" ] || [ \"$want\" != \"$have\" ]; then "
        f"echo \"$f does not match {spec.SUMS} (sha256 $have, expected ${{want:-none}}); "
        f"staged files removed, nothing installed\" >&2; rm -rf {stage}; exit 1; fi; done"
    )


def download_command(base: str) -> str:
    """The sums file and tarball into the stage; a failed download removes the stage (nothing half-written)."""
    stage = shlex.quote(spec.STAGE_DIR)
    fetches = " && ".join(
        f"curl -fsSL --retry 3 -o {stage}/{name} {shlex.quote(f'{base}/{name}')}" for name in (spec.SUMS, spec.TARBALL)
    )
    failed = f"echo \"download from {base} failed; staged files removed\" >&2; rm -rf {stage}; exit 1"
    return f"{{ {fetches}; }} || {{ {failed}; }}"


def install_commands(version: str, tarball: str, images: str | None) -> list[str]:
    stage = spec.STAGE_DIR
    marker_fields = f"{shlex.quote(version)} $(sha256sum {stage}/{tarball} | cut -c1-64)"
    commands = []
    if images:
        commands += [f"mkdir -p {spec.IMAGES_DIR}", f"cp {stage}/{images} {spec.IMAGES_DIR}/{images}"]
        marker_fields += f" $(sha256sum {stage}/{images} | cut -c1-64)"
    commands += [
        f"tar xzf {stage}/{tarball} -C {spec.TAR_PREFIX}",
        f"test -x {spec.BINARY}",
        f"mkdir -p {spec.INSTALLED_MARKER.rsplit('/', 1)[0]}",
        f"echo {marker_fields} > {spec.INSTALLED_MARKER}",
        f"rm -rf {stage}",
    ]
    return commands


@deploy("rke2_install")
def rke2_install() -> list[OperationMeta]:
    """Install the pinned RKE2 release, or check that a preinstalled one is there. Returns the operations
    that change RKE2's binaries: the service stage restarts rke2-server / rke2-agent when one did, or the
    running service would keep the old release."""
    install = context.rke2_install(host)
    installed = host.get_fact(TextFile, path=spec.INSTALLED_MARKER).strip()
    if install.method == "preinstalled":
        if not host.get_fact(File, path=spec.BINARY):
            raise DeployError(f"{host.name}: rke2_install is preinstalled but {spec.BINARY} is missing")
        host.noop(f"RKE2 preinstalled ({spec.BINARY}): config and services only")
        return []
    if install.method == "airgap":
        artifacts = _artifact_set(install.artifacts_dir or "")
        wanted = f"{install.version} {artifacts.tarball.sha256} {artifacts.images.sha256}"
        if installed == wanted:
            host.noop(f"RKE2 {install.version} from {artifacts.directory} is installed")
            return []
        files.directory(name="RKE2 staging directory", path=spec.STAGE_DIR, mode="700")
        for artifact in artifacts.files:
            files.put(name=f"Upload {artifact.name}", src=str(artifact.path),
                      dest=f"{spec.STAGE_DIR}/{artifact.name}", mode="600")
        staged = [artifacts.tarball.name, artifacts.images.name]
        images: str | None = artifacts.images.name
    else:
        if installed.split(" ")[0] == install.version:
            host.noop(f"RKE2 {install.version} is installed")
            return []
        files.directory(name="RKE2 staging directory", path=spec.STAGE_DIR, mode="700")
        server.shell(name=f"Download RKE2 {install.version} from {install.download_base}",
                     commands=[download_command(install.download_base)])
        staged, images = [spec.TARBALL], None
    server.shell(name=f"Check the staged files against {spec.SUMS}", commands=[verify_command(staged)])
    install_op = server.shell(name=f"Install RKE2 {install.version} into {spec.TAR_PREFIX} "
                              "(INSTALL_RKE2_ARTIFACT_PATH way)",
                              commands=install_commands(install.version, spec.TARBALL, images))
    systemd.daemon_reload(name="Reload systemd for the RKE2 units")
    return [install_op]
