"""Building a host's disk image without loop devices or mounts, cached by the
hash of its recipe:

1. mmdebstrap installs the packages into a folder (root, Debian's archive);
2. the folder becomes an ext4 file system with `mkfs.ext4 -d`, placed into a
   partitioned raw disk (sfdisk) with dd; a UEFI host gets a FAT ESP
   (mkfs.vfat on a file);
3. a first boot straight from the folder's kernel and initramfs (-kernel)
   runs the host's provisioning script, which installs its boot loader onto
   the disk (grub-install, or bootctl + kernel-install), and powers off.

From then on every boot goes through firmware and boot loader. The image is
kept as <cache>/images/<host>-<hash>.raw (+ its UEFI variables); a run copies
it (sparse) for each case, so every case starts from a fresh install.
"""

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import hosts
import qemu
from log import phase, say

HERE = Path(__file__).resolve().parent
DISK_GIB = 8
ESP_MIB = 200
# Bump when the way images are made changes (not the recipe).
LAYOUT = "4"


def recipe_hash(host):
    h = hashlib.sha256()
    h.update(LAYOUT.encode())
    h.update(host.recipe().encode())
    for p in sorted((HERE / "guest").glob("*")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def run(argv, **kw):
    say("$ " + " ".join(str(a) for a in argv))
    return subprocess.run(argv, check=True, **kw)


def bake_control(root, host):
    """The unit that runs each boot's step from the 9p share, in the image."""
    (root / "usr/local/sbin").mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "guest/e2e-ctl", root / "usr/local/sbin/e2e-ctl")
    os.chmod(root / "usr/local/sbin/e2e-ctl", 0o755)
    unit = root / "etc/systemd/system/e2e-ctl.service"
    shutil.copy(HERE / "guest/e2e-ctl.service", unit)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "e2e-ctl.service"
    if not link.is_symlink():
        link.symlink_to("/etc/systemd/system/e2e-ctl.service")
    for u in hosts.MASK:
        m = root / "etc/systemd/system" / u
        if not m.is_symlink():
            m.symlink_to("/dev/null")
    (root / "etc/hostname").write_text(f"e2e-{host.name}\n")
    # Root logs in on the serial console without a password (a test guest).
    subprocess.run(["chroot", str(root), "passwd", "-d", "root"], check=True,
                   stdout=subprocess.DEVNULL)


def mmdebstrap(host, root):
    if not hosts.MIRROR:
        raise SystemExit("no Debian archive in this machine's apt sources (/etc/apt/sources.list.d, "
                         "sources.list): set E2E_MIRROR to one")
    customize = host.customize.replace("$ROOT_UUID", hosts.ROOT_UUID).replace(
        "$ESP_ID", hosts.ESP_ID).replace("$MIRROR", hosts.MIRROR)
    run(["mmdebstrap", "--variant=minbase", "--mode=root",
         "--aptopt=APT::Install-Recommends \"false\"",
         "--dpkgopt=path-exclude=/usr/share/doc/*",
         "--dpkgopt=path-exclude=/usr/share/locale/*",
         "--dpkgopt=path-exclude=/usr/share/man/*",
         "--include=" + ",".join(hosts.COMMON + host.packages),
         "--customize-hook=" + customize,
         host.suite, str(root), hosts.MIRROR],
        stdout=subprocess.DEVNULL)


def make_disk(host, root, disk):
    """Partition a sparse raw disk and put the root (and ESP) in place."""
    total = DISK_GIB * 1024  # MiB
    disk.unlink(missing_ok=True)
    with open(disk, "wb") as f:
        f.truncate(total * 1024 * 1024)
    if host.firmware == "bios":
        layout = "label: dos\nstart=2048, type=83, bootable\n"
        root_start = 1
    else:
        layout = (
            "label: gpt\n"
            f"start=2048, size={ESP_MIB}MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp\n"
            "type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name=root\n"
        )
        root_start = 1 + ESP_MIB
    run(["sfdisk", "--quiet", str(disk)], input=layout.encode())
    root_mib = total - root_start - 1
    fs = disk.with_suffix(".rootfs")
    fs.unlink(missing_ok=True)
    run(["mkfs.ext4", "-q", "-F", "-L", "root", "-U", hosts.ROOT_UUID, "-d", str(root),
         str(fs), f"{root_mib}M"])
    run(["dd", f"if={fs}", f"of={disk}", "bs=1M", f"seek={root_start}", "conv=notrunc,sparse",
         "status=none"])
    fs.unlink()
    if host.firmware == "uefi":
        esp = disk.with_suffix(".esp")
        esp.unlink(missing_ok=True)
        run(["mkfs.vfat", "-F", "32", "-n", "ESP", "-i", hosts.ESP_ID, "-C", str(esp),
             str(ESP_MIB * 1024)], stdout=subprocess.DEVNULL)
        run(["dd", f"if={esp}", f"of={disk}", "bs=1M", "seek=1", "conv=notrunc,sparse",
             "status=none"])
        esp.unlink()


def build(host, cache):
    """The cached image of `host`, built first when its recipe changed."""
    key = recipe_hash(host)
    images = cache / "images"
    images.mkdir(parents=True, exist_ok=True)
    disk = images / f"{host.name}-{key}.raw"
    if disk.exists():
        say(f"image {disk.name}: cached")
        return disk
    for old in images.glob(f"{host.name}-*"):
        old.unlink()
    work = cache / "build" / host.name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    root = work / "root"
    with phase(f"{host.name}: mmdebstrap"):
        mmdebstrap(host, root)
        bake_control(root, host)
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise SystemExit(f"{host.name}: mmdebstrap installed no kernel")
    release = kernels[-1].name[len("vmlinuz-"):]
    shutil.copy(kernels[-1], work / "vmlinuz")
    shutil.copy(root / "boot" / f"initrd.img-{release}", work / "initrd")
    tmp = work / "disk.raw"
    with phase(f"{host.name}: disk"):
        make_disk(host, root, tmp)
    shutil.rmtree(root)
    vars_tmp = None
    if host.firmware == "uefi":
        vars_tmp = work / "disk.vars"
        shutil.copy(qemu.OVMF_VARS, vars_tmp)
    with phase(f"{host.name}: provisioning boot"):
        share = work / "share"
        share.mkdir()
        script = host.provision.replace("$ROOT_UUID", hosts.ROOT_UUID)
        (share / "step.sh").write_text("set -eux\n" + script)
        vm = qemu.Guest(host, tmp, vars_tmp, share, work / "provision",
                        # no_timer_check: under load (CI builds beside it) a TCG
                        # vCPU can miss the kernel's timer test, and with the
                        # emulated IOMMU's interrupt remapping that test panics
                        # ("timer doesn't work through Interrupt-remapped
                        # IO-APIC": the uki image's three tries, seen here with
                        # two guests and two builds on two cores). The image's
                        # own boots keep their stock command line.
                        kernel=(work / "vmlinuz", work / "initrd",
                                f"root=UUID={hosts.ROOT_UUID} ro console=ttyS0,115200 no_timer_check"))
        # Its first boot runs longer before the step (the firmware, a first
        # boot's units): a stall is called after 15 min, not the cases' 10.
        rc = vm.boot_step(timeout_s=1800, stall_s=900)
        if rc != 0:
            raise SystemExit(f"{host.name}: provisioning failed (exit {rc}); see {work}/provision")
    os.replace(tmp, disk)
    if host.secure_boot:
        # From now on with Microsoft's keys and Secure Boot on (the
        # provisioning boot had none: its -kernel is not signed for them).
        shutil.copy(qemu.OVMF_VARS_SB, vars_tmp)
    if vars_tmp:
        os.replace(vars_tmp, disk.with_suffix(".vars"))
    say(f"image {disk.name}: built ({time.strftime('%H:%M:%S')})")
    return disk


def copy_for_case(disk, dest):
    """A fresh copy of the image (sparse), and its UEFI variables."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    run(["cp", "--sparse=always", str(disk), str(dest)])
    v = disk.with_suffix(".vars")
    if v.exists():
        shutil.copy(v, dest.with_suffix(".vars"))
        return dest.with_suffix(".vars")
    return None
