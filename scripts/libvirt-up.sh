#!/bin/sh
# Make sure qemu:///system answers, for the domain tests. On a desktop systemd
# already runs libvirtd (or virtqemud); in a container without systemd (CI) we
# start virtlogd and libvirtd ourselves.
set -eu
if virsh -q -c qemu:///system uri >/dev/null 2>&1; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ -d /run/systemd/system ]; then
    $sudo systemctl start libvirtd.service 2>/dev/null || $sudo systemctl start virtqemud.socket
else
    $sudo virtlogd -d || true  # may already run
    $sudo libvirtd -d
fi
i=0
while ! virsh -q -c qemu:///system uri >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 40 ]; then
        echo "libvirtd did not come up on qemu:///system" >&2
        exit 1
    fi
    sleep 0.5
done
