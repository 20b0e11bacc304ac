"""Operations pyinfra lacks: a file whose content must never be printed (keys, tokens, kubeconfigs), a large
file compared by a stamp instead of a remote checksum (the Kubernetes binaries), a barrier between stages."""

from __future__ import annotations

import hashlib
import shlex
from io import BytesIO
from pathlib import PurePosixPath

from pyinfra import host
from pyinfra.api import FileUploadCommand, operation
from pyinfra.facts.files import File, Sha256File
from pyinfra.operations.util import files as file_utils

from numalab.deploy.facts import StampedFile
from numalab.files import gzip_copy, sha256_of_file

STAMP_DIR = "/var/lib/numa-lab/stamps"


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
def stamped_file(src: str, dest: str, mode: str = "755", stamps: str = STAMP_DIR):
    """
    Put a large local file (a Kubernetes binary) at ``dest``, compared by a stamp, not a remote checksum.

    + src: local path
    + dest: remote path (its directory must exist)
    + mode: set when the file is written or differs
    + stamps: the remote directory of the stamps

    ``files.put`` hashes the remote file on every run: 2 to 4 s per binary under software emulation, about
    a minute over a lab's deploy run for files that did not change. When this puts the file it records, in
    a stamp under ``stamps``, its sha256 and the inode, size and mtime the file has after the rename. A
    later run reads those with one ``stat``: while they match, the stamp's sha256 is the file's. A file
    replaced or rewritten since (another inode, size or mtime), or one without a stamp, is hashed once as
    ``files.put`` would: the same bytes get a new stamp, others are uploaded. The upload lands beside
    ``dest`` and is renamed into place: a running binary keeps its inode, nothing sees half a file. What
    crosses SSH is its gzip copy (made once, ``numalab.files.gzip_copy``), unpacked on the node and checked
    against the sha256 before the rename.

    **Example:**

    .. code:: python

        stamped_file(name="kubelet binary", src="/cache/bin/kubelet", dest="/usr/local/bin/kubelet")
    """
    local = sha256_of_file(src)
    stamp = stamp_path(dest, stamps)
    remote = host.get_fact(StampedFile, path=dest, stamp=stamp)
    current = remote["file"]
    if current is not None:
        recorded = remote["stamp"]
        stamped = recorded is not None and recorded[0] == local and recorded[1:] == current[:3]
        if stamped or host.get_fact(Sha256File, path=dest) == local:
            mode_differs = current[3] != mode.lstrip("0")
            if mode_differs:
                yield file_utils.chmod(dest, mode)  # a chmod keeps inode, size and mtime: the stamp holds
            if not stamped:
                yield write_stamp(dest, local, stamps)
            if stamped and not mode_differs:
                host.noop(f"{dest} is already up to date (stamp)")
            return
    staged = f"{dest}.numa-lab-new"
    packed = f"{staged}.gz"
    yield FileUploadCommand(str(gzip_copy(src, local)), packed, remote_temp_filename=host.get_temp_filename(dest))
    yield unpack_and_check(packed, staged, local)
    yield f"chmod {shlex.quote(mode)} {shlex.quote(staged)} && mv -f {shlex.quote(staged)} {shlex.quote(dest)}"
    yield write_stamp(dest, local, stamps)


def unpack_and_check(packed: str, staged: str, sha256: str) -> str:
    """The node's command unpacking the uploaded gzip copy to `staged` and checking it has `sha256`; on any
    failure both files go and the operation fails (the file in place is untouched)."""
    gz, out = shlex.quote(packed), shlex.quote(staged)
    return (f"{{ gzip -dc {gz} > {out} && rm -f {gz} && echo {sha256}'  '{out} | sha256sum -c --quiet --strict; }} "
            f"|| {{ rm -f {gz} {out}; echo 'numa-lab: {staged} does not unpack to sha256 {sha256}' >&2; false; }}")


def stamp_path(dest: str, stamps: str = STAMP_DIR) -> str:
    """Where ``stamped_file`` records what it put at ``dest``."""
    return f"{stamps}/{dest.strip('/').replace('/', '%')}.sha256"


def write_stamp(dest: str, sha256: str, stamps: str = STAMP_DIR) -> str:
    """The command recording ``sha256`` with the inode, size and mtime ``dest`` has now (renamed into place)."""
    stamp = shlex.quote(stamp_path(dest, stamps))
    now = f"$(stat -c '%i %s %.9Y' {shlex.quote(dest)})"
    return f"mkdir -p {shlex.quote(stamps)} && echo \"{sha256} {now}\" > {stamp}.new && mv -f {stamp}.new {stamp}"


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
