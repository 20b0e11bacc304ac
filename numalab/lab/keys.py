"""SSH material generated on the controller: the lab's login key, per-guest host keys, known_hosts.

Host keys are made here and handed to each guest through its seed, so the controller knows them
before first contact and host key checking stays on (StrictHostKeyChecking yes).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

KEY_TYPE = "ed25519"


def ensure_keypair(private: Path, comment: str) -> str:
    """Create an ed25519 key pair at `private` (and `private`.pub) if missing; return the public line."""
    if not private.exists():
        private.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", KEY_TYPE, "-N", "", "-C", comment, "-f", str(private)],
            check=True,
            stdin=subprocess.DEVNULL,
        )
    return private.with_name(private.name + ".pub").read_text().strip()


def known_hosts_lines(entries: Iterable[tuple[str, str, str]]) -> str:
    """known_hosts text for (address, name, public key line) entries; the key comment is dropped."""
    lines = []
    for address, name, public in entries:
        key_type, key_data = public.split()[:2]
        lines.append(f"{address},{name} {key_type} {key_data}\n")
    return "".join(lines)


def ssh_config_text(
    entries: Iterable[tuple[str, str]],
    identity: Path,
    known_hosts: Path,
    proxy_jump: str | None,
    jump_options: Mapping[str, str] | None = None,
) -> str:
    """An ssh_config with one Host block per (name, address) entry, for ssh, testinfra and pyinfra.

    With `jump_options`, `proxy_jump` is an alias and gets its own Host block with those options.
    """
    blocks = []
    if proxy_jump and jump_options:
        blocks.append("\n".join([f"Host {proxy_jump}", *(f"  {k} {v}" for k, v in jump_options.items())]) + "\n")
    for name, address in entries:
        lines = [
            f"Host {name} {address}",
            f"  HostName {address}",
            "  User root",
            f"  IdentityFile {identity}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {known_hosts}",
            "  StrictHostKeyChecking yes",
            "  ConnectTimeout 10",
        ]
        if proxy_jump:
            lines.append(f"  ProxyJump {proxy_jump}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
