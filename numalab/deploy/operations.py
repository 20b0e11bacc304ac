"""Operations pyinfra lacks: a file whose content must never be printed (keys, tokens, kubeconfigs)."""

from __future__ import annotations

import hashlib
import shlex
from io import BytesIO
from pathlib import PurePosixPath

from pyinfra import host
from pyinfra.api import FileUploadCommand, operation
from pyinfra.facts.files import File, Sha256File
from pyinfra.operations.util import files as file_utils


@operation()
def secret_file(content: bytes, dest: str, mode: str = "600", user: str = "root", group: str = "root"):
    """
    Put bytes that must stay secret at ``dest``: compared by sha256, never diffed or logged, never readable by
    others, not even while being written.

    + content: the file's bytes
    + dest: remote path (its directory must exist)
    + mode, user, group: set when the file is written or differs

    ``files.put`` prints a diff of old and new content with ``--diff``, and writes with the default umask before
    its chmod; this uploads into a 0700 directory made beside ``dest`` under ``umask 077``, sets owner and mode
    there, and renames the file into place (atomic: ``dest`` is the old file or the new one, never a half or a
    readable one). With ``_sudo`` pyinfra first stages the upload in its own temp dir as the login user.

    **Example:**

    .. code:: python

        secret_file(name="apiserver key", content=pki.read("apiserver.key"), dest="/etc/kubernetes/pki/apiserver.key")
    """
    remote = host.get_fact(File, path=dest)
    if remote and host.get_fact(Sha256File, path=dest) == hashlib.sha256(content).hexdigest():
        if remote["mode"] != int(mode) or remote["user"] != user or remote["group"] != group:
            yield file_utils.chown(dest, user, group)
            yield file_utils.chmod(dest, mode)
        else:
            host.noop(f"{dest} is already up to date")
        return
    host.log(f"Will write {dest} (secret: content not shown)")
    stage = staging_dir(dest)
    staged = f"{stage}/{PurePosixPath(dest).name}"
    yield f"umask 077 && rm -rf {shlex.quote(stage)} && mkdir -m 700 {shlex.quote(stage)}"
    yield FileUploadCommand(BytesIO(content), staged, remote_temp_filename=host.get_temp_filename(dest))
    yield (f"chown {shlex.quote(f'{user}:{group}')} {shlex.quote(staged)} && chmod {shlex.quote(mode)} "
           f"{shlex.quote(staged)} && mv -f {shlex.quote(staged)} {shlex.quote(dest)} && rmdir {shlex.quote(stage)}")


def staging_dir(dest: str) -> str:
    """The private directory a secret is staged in: beside ``dest``, so the final ``mv`` is a rename."""
    path = PurePosixPath(dest)
    return str(path.with_name(f".{path.name}.numa-lab-new"))


@operation()
def stage_barrier(before: str):
    """
    Nothing to do on the host: a point every host passes before ``before`` starts.

    pyinfra orders each host's operations and interleaves hosts freely; an operation called from the
    same line on every host is one node of that order, so what follows it on one host (a kubelet
    joining) waits for what precedes it on another (the API server being ready).

    + before: the stage that follows, for the output
    """
    host.noop(f"ready for {before}")
    return
    yield  # an operation is a generator
