"""Stage `base`, "Keep swap off after reboot": the operation run for real (pyinfra's grep fact and sed command,
on this machine) against a copy of an fstab, then again to show the second run changes nothing."""

from __future__ import annotations

from pathlib import Path

from numalab.deploy.base import keep_swap_off
from tests.fakehost import commands_of, execute, local_host

FSTAB = """\
# /etc/fstab: static file system information.
UUID=0a1b-root / ext4 errors=remount-ro 0 1
UUID=0a1b-swap none swap sw 0 0
/swapfile\tnone\tswap\tdefaults\t0\t0
  /dev/sdb2 none swap sw,pri=5 0 0
/dev/sdc1 /srv/swap ext4 defaults 0 2
#/dev/sdd1 none swap sw 0 0
"""
COMMENTED = """\
# /etc/fstab: static file system information.
UUID=0a1b-root / ext4 errors=remount-ro 0 1
# UUID=0a1b-swap none swap sw 0 0
# /swapfile\tnone\tswap\tdefaults\t0\t0
#   /dev/sdb2 none swap sw,pri=5 0 0
/dev/sdc1 /srv/swap ext4 defaults 0 2
#/dev/sdd1 none swap sw 0 0
"""


def run(fstab: Path) -> list[str]:
    """Plan and run keep_swap_off on this machine; the commands it yielded."""
    with local_host() as host:
        planned = [str(command) for command in commands_of(keep_swap_off(str(fstab)))]
        execute(host)
    return planned


def test_swap_entries_are_commented_out_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    fstab = tmp_path / "fstab"
    fstab.write_text(FSTAB)
    first = run(fstab)
    assert len(first) == 1 and "sed -E" in first[0]
    assert fstab.read_text() == COMMENTED
    assert run(fstab) == []  # nothing matches any more: no command at all
    assert fstab.read_text() == COMMENTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fstab"]  # sed's backup removed


def test_an_fstab_without_swap_is_left_alone(tmp_path: Path) -> None:
    fstab = tmp_path / "fstab"
    fstab.write_text("UUID=0a1b-root / ext4 errors=remount-ro 0 1\n/dev/sdc1 /srv/swap ext4 defaults 0 2\n")
    assert run(fstab) == []
