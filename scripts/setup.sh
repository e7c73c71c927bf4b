#!/bin/sh
# Install what VFIO Assistant needs on Debian/Ubuntu (see packaging/DISTROS.md for
# Fedora and Arch). Usage: scripts/setup.sh [app|test]
#   app  - runtime libraries for the window (X11/Wayland, OpenGL via Mesa) and
#          libvirt's client library (libvirt-dev, to build against it)
#   test - the above plus the yardstick tools the tests compare against, and a
#          real libvirt + QEMU/KVM + OVMF + swtpm for the domain tests
set -eu
what=${1:-app}
pkgs="pkg-config gcc libxkbcommon-x11-0 libgl1 libegl1 libgl1-mesa-dri libx11-6 libx11-xcb1 libxcursor1 libxrandr2 libxi6 libwayland-client0 libwayland-egl1 libvirt-dev"
if [ "$what" = test ]; then
    # lspci (pciutils) and virt-host-validate (libvirt-clients) are yardsticks;
    # desktop-file-validate
    # and appstreamcli check the packaging files.
    # libvirt-daemon-system, qemu-system-x86, ovmf and swtpm: the domain tests define
    # and start real domains on qemu:///system (scripts/libvirt-up.sh starts it).
    pkgs="$pkgs pciutils libvirt-clients libxml2-utils desktop-file-utils appstream"
    pkgs="$pkgs libvirt-daemon-system qemu-system-x86 ovmf swtpm swtpm-tools"
    # cpio, zstd and xz build real initramfs images for the initramfs check's tests.
    pkgs="$pkgs cpio zstd xz-utils"
    # qemu-img makes the test guests' tiny disks (and the wizard's images).
    pkgs="$pkgs qemu-utils"
    # qemu-ga (the guest agent a VM runs) answers the agent client's tests on a socket.
    pkgs="$pkgs qemu-guest-agent"
    # genisoimage, xorriso and wimtools build the installer images (UDF, Joliet, WIM/ESD) the install tests read.
    pkgs="$pkgs genisoimage xorriso wimtools"
    # curl fetches virtio-win (its test serves one on 127.0.0.1 with python3).
    pkgs="$pkgs curl"
    # The package checks (scripts/package-check.sh): polkit for the helper's
    # action, man-db and bash-completion for what the .deb installs, Xvfb and
    # ImageMagick for a screenshot of the installed app, rpm to read the .rpm.
    pkgs="$pkgs polkitd pkexec man-db bash-completion xvfb imagemagick rpm"
    # The app's pages rendered to PNG by egui_kittest through wgpu on Mesa's
    # software Vulkan (lavapipe), compared with tests/snapshots/.
    pkgs="$pkgs mesa-vulkan-drivers"
    # The real-host run (scripts/e2e/run.py): Debian images built with
    # mmdebstrap, partitioned and filled without loop devices (fdisk's
    # sfdisk, e2fsprogs' mkfs.ext4 -d, dosfstools and mtools for the ESP),
    # booted in qemu-system-x86 (OVMF for UEFI).
    pkgs="$pkgs mmdebstrap debian-archive-keyring fdisk e2fsprogs dosfstools mtools python3"
    # Remote hosts (--host ssh://…): the tests start their own sshd on
    # 127.0.0.1 with throwaway keys, and reach it with the OpenSSH client.
    pkgs="$pkgs openssh-server openssh-client"
    # The printed sudoers line, tried by the second user (scripts/sudoers-check.sh).
    pkgs="$pkgs sudo"
fi
missing_packages() {
    missing=""
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
}
# Twice: installing one package can remove another (Debian 12's qemu-system-x86
# removes a newer backported qemu-utils that a machine came with), so what is
# missing after the first pass is installed again, from the same release.
for pass in 1 2; do
    missing_packages
    [ -n "$missing" ] || break
    if command -v apt-get >/dev/null 2>&1; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        echo "Installing:$missing"
        [ "$pass" -eq 2 ] || $sudo apt-get update -qq
        # shellcheck disable=SC2086 # one word per package
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
    else
        echo "Not a Debian/Ubuntu system: install the equivalents of:$missing (see packaging/DISTROS.md)" >&2
        break
    fi
done
missing_packages
if [ -n "$missing" ] && command -v apt-get >/dev/null 2>&1; then
    echo "Still missing after installing:$missing" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "Rust is not installed. Install it with rustup (https://rustup.rs), then run this again." >&2
    exit 1
fi
# egui_plot 0.38 needs Rust 1.95 or newer (Debian's packaged cargo is older).
ver=$(cargo --version | awk '{print $2}')
major=$(echo "$ver" | cut -d. -f1)
minor=$(echo "$ver" | cut -d. -f2)
if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 95 ]; }; then
    echo "cargo $ver is too old: VFIO Assistant needs Rust 1.95 or newer (rustup update)." >&2
    exit 1
fi
# The SSH tests also log in as a second local user, the "remote" machine's
# user (tests/it/remote_user.rs). Its password field is '*': no password
# ever matches it, and it has no key of its own, so only a test's own sshd
# (with its throwaway key) lets it in.
if [ "$what" = test ] && ! id vfio-remote >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo useradd --create-home --shell /bin/sh --password '*' vfio-remote
fi
