"""A lab on a remote libvirt host (qemu+ssh:// URI): its guests sit on that host's lab bridge, reached through it.

The hop is an ssh_config alias built from the URI, so it uses the same host, user, port, key and host key
checking as libvirt's own connection.
"""

from __future__ import annotations

import urllib.parse

JUMP_ALIAS = "libvirt-host.numalab"  # a dot: never a guest name, so its ssh_config block matches no guest


def is_local_uri(uri: str) -> bool:
    return urllib.parse.urlparse(uri).hostname in (None, "", "localhost")


def proxy_jump(uri: str) -> str | None:
    """The ssh hop for guests of a remote libvirt host (they sit on that host's lab bridge).

    An alias defined in the lab's ssh_config by `jump_options`, not `user@host:port`: plain `ssh`
    takes no port in its destination, and the hop needs the key and known_hosts of the URI.
    """
    return None if is_local_uri(uri) else JUMP_ALIAS


def jump_options(uri: str) -> dict[str, str] | None:
    """ssh_config options of the hop to a remote libvirt host, from its URI.

    Host, user and port come from the URI; libvirt's `keyfile`, `known_hosts` and `no_verify`
    parameters, when present, give the hop the same key and host key checking as libvirt's own
    connection (without them ssh's defaults apply: ~/.ssh keys and known_hosts, strict checking).
    """
    if is_local_uri(uri):
        return None
    parsed = urllib.parse.urlparse(uri)
    params = dict(urllib.parse.parse_qsl(parsed.query))
    options = {"HostName": str(parsed.hostname)}
    if parsed.port:
        options["Port"] = str(parsed.port)
    if parsed.username:
        options["User"] = parsed.username
    if params.get("keyfile"):
        options["IdentityFile"] = params["keyfile"]
        options["IdentitiesOnly"] = "yes"
    if params.get("known_hosts"):
        options["UserKnownHostsFile"] = params["known_hosts"]
    options["StrictHostKeyChecking"] = "no" if params.get("no_verify", "0") not in ("", "0") else "yes"
    options["BatchMode"] = "yes"
    options["ConnectTimeout"] = "10"
    return options
