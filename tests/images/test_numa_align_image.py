"""numa-lab/numa-align's image: the Debian packages apt resolves minus what a one-program container never
uses, a merged /usr so the ELF interpreter resolves, every file kept with its mode, a tag that follows the
plugin's sources, and the build's failures named by step. The real build is the `lab` test at the end."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from numalab.images import numa_align_image as plugin_image
from numalab.images.numa_align_image import PluginImageError, entries_of, merge_usr, packages_from_depends

DEPENDS = """python3.13-minimal
  Depends: libpython3.13-minimal
  Depends: <debconf-2.0>
    debconf
    cdebconf
libpython3.13-stdlib
  Depends: tzdata
  Depends: libssl3t64
libssl3t64
debconf
cdebconf
tzdata
<mime-support>
libc6
"""


def test_resolved_packages_leave_out_virtual_and_skipped_ones() -> None:
    assert packages_from_depends(DEPENDS) == ["libc6", "libpython3.13-stdlib", "libssl3t64", "python3.13-minimal"]


def test_merged_usr_links_the_top_directories_and_keeps_what_a_package_put_there(tmp_path: Path) -> None:
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "ld-linux-x86-64.so.2").write_text("ld")
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    merge_usr(tmp_path)
    for name in ("bin", "sbin", "lib", "lib64"):
        assert os.readlink(tmp_path / name) == f"usr/{name}"
    assert (tmp_path / "lib64" / "ld-linux-x86-64.so.2").read_text() == "ld"  # now in usr/lib64
    assert (tmp_path / "usr" / "lib64" / "ld-linux-x86-64.so.2").is_file()


def test_entries_keep_modes_and_symlinks(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    tool = tmp_path / "usr" / "bin" / "python3.13"
    tool.write_bytes(b"\x7fELF")
    tool.chmod(0o755)
    (tmp_path / "usr" / "bin" / "python3").symlink_to("python3.13")
    entries = {entry.path: entry for entry in entries_of(tmp_path)}
    assert entries["usr/bin/python3.13"].mode == 0o755 and entries["usr/bin/python3.13"].data == b"\x7fELF"
    assert entries["usr/bin/python3"].kind == "symlink" and entries["usr/bin/python3"].target == "python3.13"
    assert entries["usr"].kind == "dir"


def test_the_tag_follows_the_plugins_inputs(monkeypatch) -> None:
    tag = plugin_image.plugin_image_tag()
    assert tag.startswith("0.1.0-") and len(tag) == len("0.1.0-") + 12
    monkeypatch.setattr(plugin_image, "RECIPE", plugin_image.RECIPE + 1)
    assert plugin_image.plugin_image_tag() != tag


def test_a_failed_step_is_named_with_the_commands_last_lines() -> None:
    with pytest.raises(PluginImageError, match=r"numa-align image, unpacking x.deb: `sh -c echo one; .*` exited 3: "
                                               r"one \| two"):
        plugin_image._run(["sh", "-c", "echo one; echo two >&2; exit 3"], "unpacking x.deb")


@pytest.mark.lab
def test_the_real_image_runs_the_plugin_and_stays_small() -> None:
    """Downloads Debian 13 packages (cached after the first run) and builds the image; the build itself
    runs the plugin's imports and `numa-align --help` in a chroot of the staged root."""
    image = plugin_image.build_plugin_image()
    raw = gzip.decompress(image.layer)
    assert len(raw) < 120 * 2**20 and len(image.layer) < 40 * 2**20
    names = set(tarfile.open(fileobj=io.BytesIO(raw)).getnames())
    assert {"usr/local/bin/numa-align", "usr/bin/python3.13", "lib64"} <= names
    assert not any(name.startswith("usr/share/doc/") for name in names)
