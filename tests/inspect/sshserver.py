"""A small SSH server on loopback (paramiko's server side) that runs exec requests with the local shell.

It stands in for a lab node's sshd so `numalab inspect` is tested over the real SSH protocol: host key
checking, public-key auth, exec with exit status and stderr, and direct-tcpip forwarding (ProxyJump).
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import paramiko


class _Server(paramiko.ServerInterface):
    def __init__(self, allowed: paramiko.PKey, user: str) -> None:
        self.allowed = allowed
        self.user = user
        self.commands: dict[int, bytes] = {}
        self.forwards: dict[int, tuple[str, int]] = {}
        self.event = threading.Condition()

    def check_auth_publickey(self, username, key):
        ok = username == self.user and key.get_base64() == self.allowed.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def get_allowed_auths(self, username):
        return "publickey"

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command):
        with self.event:
            self.commands[channel.get_id()] = command
            self.event.notify_all()
        return True

    def check_channel_direct_tcpip_request(self, chanid, origin, destination):
        with self.event:
            self.forwards[chanid] = destination
            self.event.notify_all()
        return paramiko.OPEN_SUCCEEDED


@dataclass
class LoopbackSSH:
    """Where the server listens and what a client needs: host key, accepted user key, user."""

    port: int
    host_key: paramiko.RSAKey
    client_key: paramiko.RSAKey
    user: str
    executed: list[str] = field(default_factory=list)


def _pump(src, dst) -> None:
    try:
        while data := src.recv(32768):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for end in (src, dst):
            try:
                end.close()
            except OSError:
                pass


def _run(channel: paramiko.Channel, command: bytes, executed: list[str]) -> None:
    executed.append(command.decode())
    proc = subprocess.run(command.decode(), shell=True, capture_output=True)
    channel.sendall(proc.stdout)
    channel.sendall_stderr(proc.stderr)
    channel.send_exit_status(proc.returncode)
    channel.close()


def _session(conn: socket.socket, state: LoopbackSSH) -> None:
    """Serve one client connection; a client that goes away mid-session ends it quietly, as sshd does."""
    try:
        _serve(conn, state)
    except (paramiko.SSHException, OSError, EOFError):
        conn.close()


def _serve(conn: socket.socket, state: LoopbackSSH) -> None:
    transport = paramiko.Transport(conn)
    transport.add_server_key(state.host_key)
    server = _Server(state.client_key, state.user)
    try:
        transport.start_server(server=server)
    except paramiko.SSHException:
        return
    while transport.is_active():
        channel = transport.accept(timeout=0.5)
        if channel is None:
            continue
        chan_id = channel.get_id()
        with server.event:
            server.event.wait_for(lambda cid=chan_id: cid in server.commands or cid in server.forwards, timeout=5)
            command = server.commands.pop(chan_id, None)
            forward = server.forwards.pop(chan_id, None)
        if command is not None:
            threading.Thread(target=_run, args=(channel, command, state.executed), daemon=True).start()
        elif forward is not None:
            upstream = socket.create_connection(forward)
            threading.Thread(target=_pump, args=(channel, upstream), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, channel), daemon=True).start()


@contextmanager
def loopback_ssh(user: str = "root") -> Iterator[LoopbackSSH]:
    """Listen on 127.0.0.1 (a free port) until the block ends; each connection is served in a thread."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    state = LoopbackSSH(listener.getsockname()[1], _HOST_KEY, _CLIENT_KEY, user)
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_session, args=(conn, state), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        listener.close()
        thread.join(timeout=5)


_HOST_KEY = paramiko.RSAKey.generate(2048)
_CLIENT_KEY = paramiko.RSAKey.generate(2048)
