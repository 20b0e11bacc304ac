"""numa-lab/numa-align: the device plugin's image, built without a container engine.

Debian 13 packages (python3.13 and the shared libraries it and the grpcio wheel need) are fetched with
apt-get under a private state directory (the host's apt is not touched), unpacked with dpkg-deb, and the
wheelhouse the systemd install uses (numalab.wheelhouse) is installed over them with the host's pip
for CPython 3.13 on manylinux x86_64. Before packing, the staged root runs the plugin's imports and CLI in a
chroot. The debs and the finished image are cached under the image dir by the hash of their inputs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from numalab.files import file_lock
from numalab.images.oci import Entry, Image, RuntimeConfig, build_image, sha256_digest
from numalab.lab.image import host_debian_mirror
from numalab.lab.recipe import SUITE
from numalab.lab.settings import settings_from_env
from numalab.progress import step
from numalab.wheelhouse import PLUGIN_DIR, inputs_digest, wheelhouse

RECIPE = 1  # bump when what goes into the image changes in a way the inputs below do not show
PYTHON = "3.13"
ROOTS = (f"python{PYTHON}-minimal", f"libpython{PYTHON}-stdlib", "libstdc++6")  # libstdc++: grpcio's .so
# What apt's dependencies pull in that a container running one Python program never uses: debconf and its
# front ends (no package is configured in the image), time zones (the plugin logs in UTC).
SKIPPED = frozenset({"debconf", "cdebconf", "libdebian-installer4", "libnewt0.52", "libslang2", "libtextwrap1",
                     "tzdata", "readline-common"})
DROPPED_DIRS = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian")
SITE = f"usr/local/lib/python{PYTHON}/dist-packages"  # on Debian's sys.path, beside the distro's own
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


class PluginImageError(RuntimeError):
    """A step of the build failed; the message names it and the command's last lines."""


def _cache_root() -> Path:
    return settings_from_env(os.environ).image_dir.expanduser() / "numa-align-image"


def _run(argv: list[str], what: str, **kwargs: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False, **kwargs)
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise PluginImageError(f"numa-align image, {what}: `{' '.join(argv[:3])} ...` exited {done.returncode}: "
                               f"{tail}")
    return done.stdout


def apt_options(root: Path) -> list[str]:
    """apt-get/apt-cache options that keep every file of theirs under `root`."""
    return [f"-oDir::State={root}/state", f"-oDir::Cache={root}/cache", f"-oDir::Etc::SourceList={root}/sources.list",
            "-oDir::Etc::SourceParts=/dev/null", "-oDir::Etc::Preferences=/dev/null",
            "-oDir::Etc::PreferencesParts=/dev/null", "-oAPT::Architecture=amd64", "-oDebug::NoLocking=1"]


def packages_from_depends(output: str) -> list[str]:
    """Real package names of `apt-cache depends --recurse` output, without virtual ones (<x>) and SKIPPED."""
    names = {line.strip() for line in output.splitlines() if line and not line.startswith(" ")}
    return sorted(name for name in names if not name.startswith("<") and name not in SKIPPED)


def fetch_debs(root: Path, mirror: str) -> list[Path]:
    """The .deb files of ROOTS and their dependencies (SKIPPED left out), downloaded into root/debs."""
    for sub in ("state/lists/partial", "cache/archives/partial", "debs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "sources.list").write_text(f"deb [signed-by={KEYRING}] {mirror} {SUITE} main\n")
    options = apt_options(root)
    _run(["apt-get", *options, "-q", "update"], f"apt-get update from {mirror}")
    depends = _run(["apt-cache", *options, "depends", "--recurse", "--no-recommends", "--no-suggests",
                    "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *ROOTS], "apt-cache depends")
    names = packages_from_depends(depends)
    _run(["apt-get", *options, "-q", "download", *names], f"apt-get download of {len(names)} packages",
         cwd=root / "debs")
    debs = sorted((root / "debs").glob("*.deb"))
    wanted = {name for name in names}
    return [deb for deb in debs if deb.name.split("_")[0] in wanted]


def stage_root(debs: list[Path], wheels: Path, target: Path) -> None:
    """Unpack `debs` into `target`, drop docs, link python3, install the wheels into SITE."""
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(target)], f"unpacking {deb.name}")
    for name in DROPPED_DIRS:
        shutil.rmtree(target / name, ignore_errors=True)
    merge_usr(target)
    python3 = target / "usr/bin/python3"
    if not python3.exists():
        python3.symlink_to(f"python{PYTHON}")
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-index",
          "--find-links", str(wheels), "--only-binary=:all:", "--platform", "manylinux2014_x86_64",
          "--implementation", "cp", "--python-version", PYTHON, "--no-compile", "--target", str(target / SITE),
          "numa-align"], "installing the wheels")
    launcher = target / "usr/local/bin/numa-align"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text("#!/usr/bin/python3\nimport sys\nfrom numa_align.cli import main\nsys.exit(main())\n")
    launcher.chmod(0o755)


def merge_usr(target: Path) -> None:
    """Debian 13's merged /usr (base-files makes it; not unpacked here): /bin, /sbin, /lib, /lib64 link into
    /usr, where the ELF interpreter /lib64/ld-linux-x86-64.so.2 then resolves."""
    for name in ("bin", "sbin", "lib", "lib64"):
        top, usr = target / name, target / "usr" / name
        usr.mkdir(parents=True, exist_ok=True)
        if top.is_dir() and not top.is_symlink():
            for child in top.iterdir():
                shutil.move(str(child), str(usr / child.name))
            top.rmdir()
        if not top.is_symlink():
            top.symlink_to(f"usr/{name}")


def check_root(target: Path) -> None:
    """The staged root runs the plugin: its imports and its CLI, in a chroot (root is needed, and had).

    It compiles every module first, the stdlib included (no package postinst ran): the container's root is
    read-only, so without .pyc files each start would compile them again. Unchecked hashes, because the
    layer's mtimes are 0 and would never match what a timestamp-based .pyc recorded.
    """
    _run(["chroot", str(target), "/usr/bin/python3", "-m", "compileall", "-q", "--invalidation-mode",
          "unchecked-hash", f"/usr/lib/python{PYTHON}", f"/{SITE}"], "compiling the modules in a chroot")
    _run(["chroot", str(target), "/usr/bin/python3", "-c",
          "import grpc, google.protobuf, prometheus_client, yaml, xxhash, numa_align.cli"],
         "the plugin's imports in a chroot")
    _run(["chroot", str(target), "/usr/local/bin/numa-align", "--help"], "`numa-align --help` in a chroot")


def entries_of(target: Path) -> list[Entry]:
    """Every directory, file and symlink under `target` as layer entries (hard links become copies)."""
    entries = []
    for directory, dirs, files in os.walk(target):
        for name in sorted(dirs + files):
            path = Path(directory) / name
            relative = str(path.relative_to(target))
            if path.is_symlink():
                entries.append(Entry.symlink(relative, os.readlink(path)))
            elif path.is_dir():
                entries.append(Entry.directory(relative, path.stat().st_mode & 0o7777))
            elif path.is_file():
                entries.append(Entry.file(relative, path.read_bytes(), path.stat().st_mode & 0o7777))
    return entries


def plugin_image_tag() -> str:
    """`<plugin version>-<hash>`: a change of the plugin's sources or pins, or of RECIPE, is a new tag."""
    digest = hashlib.sha256(f"{RECIPE}:{PYTHON}:{inputs_digest(PYTHON)}:{sorted(ROOTS)}:{sorted(SKIPPED)}".encode())
    return f"{_plugin_version()}-{digest.hexdigest()[:12]}"


def _plugin_version() -> str:
    for line in (PLUGIN_DIR / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    raise PluginImageError("plugin/pyproject.toml has no version line")


@functools.cache
def build_plugin_image() -> Image:
    """The image, from the cache when its tag was built before (a second process reads it in a second)."""
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    entry = root / plugin_image_tag()
    with file_lock(root / "build.lock"):
        if not (entry / "manifest.json").is_file():
            _build_into(root, entry)
    return _load(entry)


def _build_into(root: Path, entry: Path) -> None:
    mirror = os.environ.get("NUMALAB_DEBIAN_MIRROR") or host_debian_mirror()
    with step(f"numa-lab/numa-align image {entry.name} (Debian {SUITE} packages + the wheelhouse)"):
        debs = fetch_debs(root / "apt", mirror)
        wheels = wheelhouse(PYTHON, root / "wheelhouse")
        with tempfile.TemporaryDirectory(prefix="numalab-plugin-image-") as work:
            target = Path(work) / "root"
            target.mkdir()
            stage_root(debs, wheels, target)
            check_root(target)
            image = build_image(entries_of(target), RuntimeConfig(entrypoint=("numa-align",), cmd=("serve",),
                                                                  user="0:0"),
                                f"numalab: Debian {SUITE} {', '.join(d.name for d in debs)} + numa-align wheels")
    staging = entry.with_name(entry.name + ".build")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    (staging / "layer.tar.gz").write_bytes(image.layer)
    (staging / "config.json").write_bytes(image.config)
    (staging / "diff_id").write_text(image.diff_id)
    (staging / "manifest.json").write_bytes(image.manifest)
    staging.rename(entry)


def _load(entry: Path) -> Image:
    layer, config = (entry / "layer.tar.gz").read_bytes(), (entry / "config.json").read_bytes()
    return Image(manifest=(entry / "manifest.json").read_bytes(), config=config, layer=layer,
                 diff_id=(entry / "diff_id").read_text(),
                 blobs={sha256_digest(layer): layer, sha256_digest(config): config})
