"""The real hosts the end-to-end run boots: each a Debian install (12, or 13
for the UKI host) built from Debian's archive with mmdebstrap, with its own
boot path. A recipe is data; its
hash names the cached image (image.py), so changing a recipe rebuilds that
image and nothing else.

Both are desktops in miniature (qemu.py): q35 with an emulated Intel IOMMU, a
virtio-vga for the host's own screen (the boot GPU), the VM's "GPU" (VGA,
1234:1111, and ich9 HD audio, 8086:293e, as functions 0 and 1 of one slot
behind its own root port: one IOMMU group), an xHCI controller with a USB
keyboard and mouse behind another root port, and a NIC behind a third.
"""

from dataclasses import dataclass, field

SUITE = "bookworm"


def apt_mirror(etc="/etc/apt"):
    """The Debian archive this machine's apt uses (as a user's machine behind
    a mirror or a proxy would need): E2E_MIRROR when set, else the first
    `deb` source serving `main` whose path is a Debian archive (not its
    security one), from sources.list.d's deb822 files and sources.list.
    None when there is none: the caller says so."""
    import glob
    import os
    if os.environ.get("E2E_MIRROR"):
        return os.environ["E2E_MIRROR"].rstrip("/")
    found = []
    for path in sorted(glob.glob(os.path.join(etc, "sources.list.d", "*.sources"))):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for stanza in text.split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith((" ", "#")):
                    k, _, v = line.partition(":")
                    fields[k.strip().lower()] = v.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            if "deb" in fields.get("types", "").split() and "main" in fields.get("components", "").split():
                found.extend(fields.get("uris", "").split())
    try:
        lines = open(os.path.join(etc, "sources.list"), encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        words = [w for w in line.split() if not w.startswith("[")]
        if len(words) >= 4 and words[0] == "deb" and "main" in words[3:]:
            found.append(words[1])
    for uri in found:
        u = uri.rstrip("/")
        if not u.endswith("-security") and "/debian" in u:
            return u
    return None


# Taken from the machine (never a host name written here); part of every
# recipe, so another mirror makes other images.
MIRROR = apt_mirror() or ""
ROOT_UUID = "6d1f2c52-8a4e-4c55-9b0e-e2e0f5a0b001"
ESP_ID = "E2E0B001"

# What every host has besides its boot path: what the journey runs (the
# installed .deb needs libvirt0; pkexec with polkitd on a system bus; libvirt
# and QEMU for the VM inside), and what the checks read.
COMMON = [
    "linux-image-amd64", "systemd-sysv", "udev", "kmod", "dbus", "polkitd",
    "pkexec", "libvirt-daemon-system", "libvirt-clients", "qemu-system-x86",
    "pciutils", "procps", "e2fsprogs", "util-linux", "zstd", "cpio",
    "usbutils", "evtest",
    # The Windows 11 domain the journey starts inside: UEFI firmware and a
    # TPM (swtpm) for the VM.
    "ovmf", "swtpm", "swtpm-tools",
    # virt-xml-validate (libvirt-clients) runs xmllint.
    "libxml2-utils",
]

# Timers and units a CI guest has no use for: each costs seconds of emulated
# CPU at boot.
MASK = [
    "apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer",
    "e2scrub_all.timer", "fstrim.timer", "logrotate.timer", "dpkg-db-backup.timer",
    "systemd-tmpfiles-clean.timer", "libvirt-guests.service",
]


@dataclass(frozen=True)
class Host:
    name: str
    title: str
    firmware: str  # "bios" or "uefi"
    packages: list = field(default_factory=list)
    # Shell run in the chroot after the packages are in (mmdebstrap's
    # customize hook; "$1" is the root).
    customize: str = ""
    # Shell run in the first boot (the provisioning boot, from -kernel): it
    # installs the boot loader on the disk.
    provision: str = ""
    # How the journey applies: "pkexec" (the app's way: the helper's request)
    # or "cli" (tune apply).
    apply_with: str = "cli"
    # The kernel command line of the provisioning boot.
    cmdline: str = ""
    # UEFI with Secure Boot on: OVMF built for it (SMM) with Microsoft's
    # keys enrolled, as a shop-bought PC comes (qemu.py, image.py).
    secure_boot: bool = False
    # The cases `run.py --all` runs here (empty: every case run.py has).
    cases: tuple = ()
    # Debian's release the host is built from.
    suite: str = SUITE
    # The click's kernel command line is an entry (or image) of its own that
    # the boot loader boots once (GRUB's grub-reboot, systemd-boot's
    # set-oneshot): the journey keeps it after the tuned boot (`tune keep`)
    # and boots once more before the undo.
    boot_once: bool = False

    def recipe(self):
        """Everything that decides the image, as text (hashed by image.py)."""
        return "\n".join([
            self.name, self.firmware, self.suite, MIRROR, ROOT_UUID, ESP_ID,
            " ".join(COMMON + self.packages), " ".join(MASK), self.customize,
            self.provision, self.cmdline,
        ] + (["secure boot"] if self.secure_boot else []))


# The cases of a host without a kernel update in its image (the
# kernel-update and two-kernels cases need KERNEL_UPDATE's packages).
BASE_CASES = ("journey", "tried-then-undone", "cut-bootcfg", "cut-initramfs", "cut-after-apply", "single-gpu", "shared-gpu")
# GRUB's try-once cases: the tried boot dies (the old setup next); two
# identical cards (the twin machine, bound by address).
GRUB_CASES = ("tried-once-fails", "twins")

# GRUB's Debian configuration, shared by the three GRUB hosts: Debian's
# installer picks MODULES=dep ("targeted") for an installed system; a serial
# console for the log, no menu wait.
GRUB_DEFAULTS = r"""
printf 'MODULES=dep\n' > "$1/etc/initramfs-tools/conf.d/e2e-targeted"
sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX="console=ttyS0,115200"/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="quiet"/' \
  "$1/etc/default/grub"
printf 'GRUB_TERMINAL="serial console"\nGRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"\n' >> "$1/etc/default/grub"
"""

# The root and the ESP in fstab (the ESP at /boot/efi, as Debian's installer
# mounts it).
ESP_FSTAB = r"""mkdir -p "$1/boot/efi"
printf 'UUID=%s / ext4 errors=remount-ro 0 1\nUUID=%s-%s /boot/efi vfat umask=0077 0 2\n' \
  "$ROOT_UUID" "$(echo $ESP_ID | cut -c1-4)" "$(echo $ESP_ID | cut -c5-8)" > "$1/etc/fstab"
"""

GRUB = Host(
    name="grub",
    title="Debian 12, BIOS, GRUB, initramfs-tools",
    firmware="bios",
    packages=["initramfs-tools", "grub-pc"],
    # The chroot built the first image with MODULES=most (it cannot tell the
    # guest's disk from the build machine's), every later one in the guest is
    # targeted.
    customize=GRUB_DEFAULTS + r"""printf 'UUID=%s / ext4 errors=remount-ro 0 1\n' "$ROOT_UUID" > "$1/etc/fstab"
""",
    provision=r"""
grub-install --target=i386-pc /dev/vda
update-grub
""",
    apply_with="pkexec",
    cases=BASE_CASES + GRUB_CASES,
    boot_once=True,
)

SDBOOT = Host(
    name="sdboot",
    title="Debian 12, UEFI, systemd-boot, kernel-install, dracut",
    firmware="uefi",
    packages=["dracut", "systemd-boot", "dosfstools"],
    # dracut built the first image for any machine; later ones in the guest
    # are host-only, as Debian's own dracut users run it.
    customize=r"""
printf 'hostonly="yes"\nhostonly_mode="sloppy"\ncompress="zstd"\n' > "$1/etc/dracut.conf.d/10-e2e-hostonly.conf"
""" + ESP_FSTAB,
    provision=r"""
mountpoint -q /boot/efi || mount /boot/efi
printf 'root=UUID=%s ro console=ttyS0,115200 quiet\n' "$ROOT_UUID" > /etc/kernel/cmdline
bootctl install --no-variables --graceful || bootctl install
printf 'timeout 0\nconsole-mode keep\n' > /boot/efi/loader/loader.conf
for k in /boot/vmlinuz-*; do
  v=${k#/boot/vmlinuz-}
  kernel-install add "$v" "$k" "/boot/initrd.img-$v"
done
bootctl list --no-pager || true
""",
    apply_with="cli",
    cases=BASE_CASES,
    boot_once=True,
)

# A kernel update for the host to meet after the apply: Debian's newer
# kernel from bookworm-backports (with the linux-base it needs), fetched into
# /root/kernel-update for dpkg in the guest (which has no network).
KERNEL_UPDATE = r"""
echo "deb $MIRROR bookworm-backports main" > "$1/etc/apt/sources.list.d/e2e-backports.list"
chroot "$1" apt-get update -qq
rm -f "$1"/var/cache/apt/archives/*.deb
chroot "$1" apt-get install -qq --download-only -t bookworm-backports linux-image-amd64
mkdir -p "$1/root/kernel-update"
mv "$1"/var/cache/apt/archives/*.deb "$1/root/kernel-update/"
rm "$1/etc/apt/sources.list.d/e2e-backports.list"
chroot "$1" apt-get update -qq
"""

# QEMU's UEFI firmware drives both cards (a desktop's drives its primary
# display only), and GRUB on UEFI hands Linux the first framebuffer it finds:
# the VM's card here, which the kernel then calls the boot VGA (seen on this
# host: boot_vga 1 on 1234:1111, the next step named the virtio card). In
# text mode GRUB hands none, and the kernel's boot VGA is the first card,
# the host's virtio-vga, as on a desktop whose firmware set up only it.
GRUB_ONE_SCREEN = r"""
printf 'GRUB_GFXPAYLOAD_LINUX=text\n' >> "$1/etc/default/grub"
"""

GRUB_UEFI = Host(
    name="grub-uefi",
    title="Debian 12, UEFI, GRUB (grub-efi-amd64 on the ESP's removable path), initramfs-tools",
    firmware="uefi",
    packages=["initramfs-tools", "grub-efi-amd64", "dosfstools"],
    customize=GRUB_DEFAULTS + GRUB_ONE_SCREEN + ESP_FSTAB + KERNEL_UPDATE,
    # The firmware's removable path (EFI/BOOT/BOOTX64.EFI): the harness's
    # UEFI variables hold no boot entry. No stub grub.cfg on the ESP: the
    # unsigned core image finds /boot/grub by the root file system's UUID
    # (the Secure Boot host has Debian's signed layout with the stub).
    provision=r"""
mountpoint -q /boot/efi || mount /boot/efi
grub-install --target=x86_64-efi --efi-directory=/boot/efi --removable --no-nvram
update-grub
find /boot/efi -type f | sort
cat /boot/efi/EFI/BOOT/grub.cfg 2>/dev/null || true
""",
    apply_with="pkexec",
    cases=("journey", "tried-then-undone", "cut-bootcfg", "kernel-update", "two-kernels", "tried-once-fails"),
    boot_once=True,
)

SECUREBOOT = Host(
    name="secureboot",
    title="Debian 12, UEFI with Secure Boot (Microsoft's keys), shim, signed GRUB and kernel, initramfs-tools",
    firmware="uefi",
    secure_boot=True,
    packages=["initramfs-tools", "grub-efi-amd64", "shim-signed", "grub-efi-amd64-signed",
              "dosfstools", "mokutil"],
    customize=GRUB_DEFAULTS + GRUB_ONE_SCREEN + ESP_FSTAB,
    # shim (signed by Microsoft) as the removable path's BOOTX64.EFI, then
    # Debian's signed GRUB, then Debian's signed kernel.
    provision=r"""
mountpoint -q /boot/efi || mount /boot/efi
grub-install --target=x86_64-efi --efi-directory=/boot/efi --uefi-secure-boot --removable --no-nvram
update-grub
find /boot/efi -type f | sort
""",
    apply_with="cli",
    cases=("journey", "tried-then-undone", "cut-bootcfg"),
    boot_once=True,
)

# Debian 13 as its installer leaves a systemd-boot machine once the user
# asks kernel-install for unified kernel images (`layout=uki` in
# /etc/kernel/install.conf, ukify from systemd-ukify): every kernel
# package's postinst and every update-initramfs (Debian's post-update hook)
# runs `kernel-install add`, whose 60-ukify plugin builds one image of the
# kernel, /boot/initrd.img-<release> (55-initrd) and /etc/kernel/cmdline,
# copied to the ESP as EFI/Linux/<machine-id>-<release>.efi, which
# systemd-boot lists by itself (no loader entries). Secure Boot off: the
# images are not signed.
UKI = Host(
    name="uki",
    title="Debian 13, UEFI, systemd-boot, unified kernel images (kernel-install layout=uki, ukify), initramfs-tools",
    firmware="uefi",
    suite="trixie",
    # Debian 13 moved QEMU's SPICE into a package of its own (a Recommends
    # of qemu-system-x86, which a minimal install leaves out): the Looking
    # Glass domain needs it, as a desktop's virt-manager install has it.
    packages=["initramfs-tools", "systemd-boot", "systemd-boot-efi", "systemd-ukify", "dosfstools",
              "qemu-system-modules-spice"],
    customize=r"""
printf 'MODULES=dep\n' > "$1/etc/initramfs-tools/conf.d/e2e-targeted"
mkdir -p "$1/etc/kernel"
printf 'layout=uki\n' > "$1/etc/kernel/install.conf"
printf 'root=UUID=%s ro console=ttyS0,115200 quiet\n' "$ROOT_UUID" > "$1/etc/kernel/cmdline"
""" + ESP_FSTAB,
    provision=r"""
mountpoint -q /boot/efi || mount /boot/efi
bootctl install --no-variables --graceful || bootctl install
printf 'timeout 0\nconsole-mode keep\n' > /boot/efi/loader/loader.conf
for k in /boot/vmlinuz-*; do
  v=${k#/boot/vmlinuz-}
  kernel-install add "$v" "$k"
done
ls -l /boot/efi/EFI/Linux
bootctl list --no-pager || true
""",
    apply_with="cli",
    cases=("journey", "tried-then-undone", "cut-bootcfg"),
    boot_once=True,
)

# The desktop a user clicks in (issue 42): GRUB-on-UEFI's boot path with a
# graphical session. Xorg with its modesetting driver on the machine's
# virtio-vga (virtio-gpu's KMS, no 3D): the screen a user's monitor shows,
# which QMP's screendump photographs from outside; Xvfb or the dummy driver
# would leave logind without a seat's display and the screenshots to the
# guest. No compositor (weston would want GL under TCG). The app's GL is
# mesa's llvmpipe (software, as a machine without a GPU driver has it).
# lightdm logs "desk" in automatically (a logind session on seat0, active:
# polkit's allow_active holds); openbox is the window manager (the agent's
# dialog gets the focus xdotool types into); mate-polkit the agent (GTK 3,
# so its dialog is on AT-SPI without GTK 2's gail modules that lxpolkit
# would need). desk is in group sudo (Debian's polkit takes it as an admin)
# and libvirt (the app talks to qemu:///system as the user).
DESKTOP_USER = "desk"
DESKTOP_PASSWORD = "desk-e2e-pw"
DESKTOP_PACKAGES = [
    "xserver-xorg-core", "xserver-xorg-input-libinput", "xauth", "lightdm", "lightdm-gtk-greeter",
    "openbox", "dbus-user-session", "at-spi2-core", "python3-pyatspi", "python3-gi", "xdotool",
    "mate-polkit", "libglib2.0-bin", "fonts-dejavu-core", "x11-utils",
    # What eframe (glow, winit on X11) opens at run time: the .deb's
    # Depends do not name them (they are dlopen'ed).
    "libgl1-mesa-dri", "libegl1", "libgl1", "libx11-xcb1", "libxcursor1", "libxrandr2", "libxi6",
    "libxkbcommon-x11-0",
    # The New VM page's "Create the image" runs qemu-img: the .deb
    # recommends it (apt installs recommends on a desktop; these images
    # are built without).
    "qemu-utils",
    # libvirt's NAT network ('default', which the New VM page plugs the VM
    # into) runs dnsmasq: a Recommends of libvirt-daemon-system.
    "dnsmasq-base",
]
# The user, its automatic login and its session's autostart: the agent,
# and e2e-session, the harness's hand inside the session (what it runs is
# in the session's scope, so polkit finds the session and its agent for
# the app the driver starts). The screen never blanks.
DESKTOP_SESSION = r"""
chroot "$1" useradd -m -s /bin/bash -G sudo,libvirt $USER
echo "$USER:$PASSWORD" | chroot "$1" chpasswd
mkdir -p "$1/etc/lightdm/lightdm.conf.d" "$1/etc/X11/xorg.conf.d"
printf '[Seat:*]
autologin-user=%s
autologin-user-timeout=0
autologin-session=openbox
' "$USER"   > "$1/etc/lightdm/lightdm.conf.d/50-e2e-autologin.conf"
printf 'Section "ServerFlags"
  Option "BlankTime" "0"
  Option "StandbyTime" "0"
  Option "SuspendTime" "0"
  Option "OffTime" "0"
EndSection
'   > "$1/etc/X11/xorg.conf.d/10-e2e-noblank.conf"
ln -sf /lib/systemd/system/lightdm.service "$1/etc/systemd/system/display-manager.service"
ln -sf /lib/systemd/system/graphical.target "$1/etc/systemd/system/default.target"
cat > "$1/usr/local/bin/e2e-session" <<'SH'
#!/bin/sh
# In the desktop user's session: runs what a boot's step puts into
# $XDG_RUNTIME_DIR/e2e/request (as this user), its output in driver.log,
# its exit code in rc.
d=$XDG_RUNTIME_DIR/e2e
mkdir -p "$d"
env > "$d/env.txt"
: > "$d/ready"
while :; do
  if [ -f "$d/request" ]; then
    mv "$d/request" "$d/running"
    sh "$d/running" > "$d/driver.log" 2>&1
    echo $? > "$d/rc.tmp" && mv "$d/rc.tmp" "$d/rc"
  fi
  sleep 1
done
SH
chmod 755 "$1/usr/local/bin/e2e-session"
mkdir -p "$1/home/$USER/.config/openbox"
cat > "$1/home/$USER/.config/openbox/autostart" <<'SH'
/usr/libexec/polkit-mate-authentication-agent-1 &
/usr/local/bin/e2e-session &
SH
chroot "$1" chown -R $USER:$USER /home/$USER/.config
"""

DESKTOP = Host(
    name="desktop",
    title="Debian 12, UEFI, GRUB, initramfs-tools, Xorg on virtio-vga, lightdm's automatic login, openbox, mate-polkit",
    firmware="uefi",
    packages=["initramfs-tools", "grub-efi-amd64", "dosfstools"] + DESKTOP_PACKAGES,
    customize=GRUB_DEFAULTS + GRUB_ONE_SCREEN + ESP_FSTAB
    + DESKTOP_SESSION.replace("$USER", DESKTOP_USER).replace("$PASSWORD", DESKTOP_PASSWORD),
    provision=GRUB_UEFI.provision,
    apply_with="pkexec",
    cases=("window-journey", "window-cancel", "window-wrong-password", "window-killed"),
    boot_once=True,
)

HOSTS = {h.name: h for h in (GRUB, SDBOOT, GRUB_UEFI, SECUREBOOT, UKI, DESKTOP)}

# Every boot path here boots the click's entry once: systemd-boot (`bootctl
# set-oneshot`) and GRUB (`grub-reboot`, where GRUB can write its environment
# block: ext4 here). A host told otherwise would skip (or wrongly run) `tune
# keep` in its journey (CI's secureboot/journey once ran it where nothing
# tried once).
for _h in HOSTS.values():
    _once = "systemd-boot" in _h.packages or any(p.startswith("grub-") for p in _h.packages)
    if _h.boot_once != _once:
        raise SystemExit(f"hosts.py: {_h.name}: boot_once must be set exactly when its boot loader tries once "
                         "(systemd-boot, or GRUB with grub-reboot)")
