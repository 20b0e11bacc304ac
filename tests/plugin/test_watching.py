"""The inotify directory watch the plugin sleeps in."""

from __future__ import annotations

import socket
import threading

from numa_align.watching import DirectoryWatch, DirEvent


def test_socket_creation_and_deletion_are_reported(socket_dir):
    watch = DirectoryWatch(socket_dir)
    try:
        path = socket_dir / "kubelet.sock"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
        path.unlink()
        (socket_dir / "other").write_text("x")
        events = watch.wait(5)
        assert events[:3] == [DirEvent("kubelet.sock", True), DirEvent("kubelet.sock", False), DirEvent("other", True)]
    finally:
        watch.close()


def test_wake_interrupts_a_wait_and_close_makes_it_a_no_op(socket_dir):
    watch = DirectoryWatch(socket_dir)
    threading.Timer(0.05, watch.wake).start()
    assert watch.wait(30) == []
    watch.close()
    watch.wake()


def test_a_removed_directory_is_reported_and_watched_again(tmp_path):
    watched = tmp_path / "dp"
    watched.mkdir()
    watch = DirectoryWatch(watched)
    try:
        watched.rmdir()
        assert DirEvent("", False) in watch.wait(5)
        assert not watch.watching and not watch.rewatch()
        watched.mkdir()
        assert watch.rewatch() and watch.watching
        (watched / "kubelet.sock").write_text("")
        assert watch.wait(5) == [DirEvent("kubelet.sock", True)]
    finally:
        watch.close()
