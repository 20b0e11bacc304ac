"""The cluster's join token: made once on the controller, 0600 in the state dir, never printed."""

from __future__ import annotations

import secrets
from pathlib import Path

from numalab.files import file_lock, write_private

TOKEN_FILE = "rke2-token"


def ensure_token(state_dir: Path) -> str:
    """The token in `state_dir/rke2-token`, generated (256 random bits, hex) when absent."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / TOKEN_FILE
    with file_lock(state_dir / f".{TOKEN_FILE}.lock"):
        if path.exists():
            token = path.read_text().strip()
            if not token:
                raise ValueError(f"{path} is empty; remove it to make a new token (every node must rejoin)")
            return token
        token = secrets.token_hex(32)
        write_private(path, f"{token}\n".encode())
        return token
