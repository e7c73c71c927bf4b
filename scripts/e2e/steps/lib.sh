# The journey's steps as they run inside a booted test host (sourced by each
# boot's step.sh; POSIX sh, as root). Everything goes through the installed
# .deb: /usr/bin/vfio-assistant and the helper at its policy path. Each step
# writes what it saw into $OUT for the harness, and fails (exit 1) with the
# reason when the host is not what the step expects.

OUT=/mnt/ctl/out
VA=/usr/bin/vfio-assistant
HELPER=/usr/libexec/vfio-assistant/vfio-assistant-helper

fail() { echo "FAIL: $*"; exit 1; }
note() { echo "== $*"; }

# The VM's "GPU" (1234:1111 behind its own root port, with its audio as
# function 1) and its audio function; the host's own display (virtio-vga on
# the root bus, or on the twin-card machine the other 1234:1111 there).
gpu_addr() {
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x1234:0x1111" ] && [ -e "${d%.0}.1" ] && { echo "${d##*/}"; return; }
    done
}
GPU=$(gpu_addr)
AUDIO=${GPU%.0}.1
HOSTGPU=$(for d in /sys/bus/pci/devices/*; do
    id="$(cat "$d/vendor"):$(cat "$d/device")"
    { [ "$id" = "0x1af4:0x1050" ] || { [ "$id" = "0x1234:0x1111" ] && [ "${d##*/}" != "$GPU" ]; }; } && echo "${d##*/}"
done | head -n 1)

driver_of() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null) && basename "$d" || echo none; }

# Every regular file under /etc and /boot with its hash (the journal and what
# libvirt and systemd keep for themselves left out: they are not ours).
hash_state() {
    find /etc /boot -xdev \( -type f -o -type l \) 2>/dev/null \
        | grep -v -e '^/etc/machine-id$' -e '^/etc/libvirt/qemu/e2e' -e '^/boot/efi/loader/random-seed$' \
            -e '^/etc/ld.so.cache$' -e '^/etc/adjtime$' -e '^/boot/efi/loader/entries.srel$' \
        | LC_ALL=C sort | while read -r f; do
            if [ -L "$f" ]; then echo "link $(readlink "$f") $f"; else echo "$(sha256sum < "$f" | cut -c1-64) $f"; fi
        done
}

# What a boot left: the command line, the two functions' drivers, hugepages.
facts() {
    # printf, not echo: dash's echo reads backslashes, and systemd-boot's
    # initrd=\<machine-id>\… ends the line at a "\c" (a machine id that
    # starts with c).
    printf 'cmdline %s\n' "$(cat /proc/cmdline)"
    echo "kernel $(uname -r)"
    echo "gpu $GPU $(driver_of "$GPU")"
    echo "audio $AUDIO $(driver_of "$AUDIO")"
    echo "hostgpu $HOSTGPU $(driver_of "$HOSTGPU")"
    echo "hugepages $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"
    echo "iommu_group $(basename "$(readlink /sys/bus/pci/devices/$GPU/iommu_group)") $(cat /sys/bus/pci/devices/$GPU/iommu_group/type 2>/dev/null)"
    echo "group_members $(ls /sys/bus/pci/devices/$GPU/iommu_group/devices | tr '\n' ' ')"
    # The firmware's Secure Boot state (the variable's last byte), and the
    # kernel's lockdown.
    sb=none
    v=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
    [ -e "$v" ] && sb=$(od -An -tu1 "$v" | awk '{print $NF}')
    echo "secure_boot $sb"
    echo "lockdown $(cat /sys/kernel/security/lockdown 2>/dev/null || echo none)"
}

# The request the journey applies: the VM's GPU with its audio, 1 vCPU of 2,
# 512 MiB of guest memory on 2 MiB hugepages.
REQ_ARGS="--gpu $GPU --vcpus 1 --memory 512M"
REQ_JSON="{\"kind\":\"apply\",\"request\":{\"gpus\":[\"$GPU\"],\"vcpus\":1,\"memory_mib\":512}}"

step_install() {
    note "install the .deb"
    dpkg -i /mnt/ctl/vfio-assistant.deb || fail "dpkg -i"
    $VA --version
}

# The distribution's own commands for what the apply does, timed in this
# boot (the apply's time is set beside them): update-initramfs and
# update-grub on the GRUB hosts, dracut and kernel-install on the
# systemd-boot one, update-initramfs (and through its hook kernel-install
# and ukify) on the UKI one. Run before the host is hashed: they make the boot files
# again from the same untouched inputs.
step_distro_times() {
    note "the distribution's own commands, timed"
    rel=$(uname -r)
    t0=$(cut -d' ' -f1 /proc/uptime)
    if command -v update-grub >/dev/null 2>&1; then
        what="update-initramfs -u -k $rel; update-grub"
        update-initramfs -u -k "$rel" >/dev/null 2>&1 || fail "update-initramfs"
        update-grub >/dev/null 2>&1 || fail "update-grub"
    elif command -v dracut >/dev/null 2>&1; then
        what="dracut -f /boot/initrd.img-$rel $rel; kernel-install add $rel /boot/vmlinuz-$rel"
        dracut -f "/boot/initrd.img-$rel" "$rel" >/dev/null 2>&1 || fail "dracut"
        kernel-install add "$rel" "/boot/vmlinuz-$rel" >/dev/null 2>&1 || fail "kernel-install"
    else
        # The UKI host: Debian's post-update hook runs kernel-install, whose
        # ukify plugin builds the image again.
        what="update-initramfs -u -k $rel (its hook: kernel-install add, ukify)"
        update-initramfs -u -k "$rel" >/dev/null 2>&1 || fail "update-initramfs"
    fi
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "$(awk "BEGIN{print $t1 - $t0}") $what" | tee "$OUT/distro-seconds.txt"
}

step_before() {
    note "the host before"
    facts | tee "$OUT/facts-before.txt"
    hash_state > "$OUT/hash-before.txt"
    # The boot loader's own word for itself (a fixture for the tests).
    cp /sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f "$OUT/" 2>/dev/null || true
    echo "$(wc -l < "$OUT/hash-before.txt") files under /etc and /boot hashed"
}

step_scan_check() {
    note "scan and check"
    [ -n "$GPU" ] || fail "no 1234:1111 device: the VM's GPU is not there"
    $VA scan > "$OUT/scan.txt" || fail "scan exited $?"
    $VA scan --json > "$OUT/scan.json" || fail "scan --json"
    $VA check --json > "$OUT/check.json"; echo "check exited $?"
    $VA check > "$OUT/check.txt" 2>&1 || true
    tail -n 3 "$OUT/check.txt"
    # This host as the tool captures it (its USB and input devices become
    # test fixtures: tests/fixtures/topology/e2e-*).
    $VA snapshot "$OUT/host-snapshot.tar.gz" --force >/dev/null || echo "snapshot failed"
}

# The app's way: the helper's request through pkexec (polkit on the system
# bus; root is authorised without an agent). The CLI's way: tune apply.
step_apply() {
    mode=$1
    note "tune plan"
    $VA tune plan $REQ_ARGS > "$OUT/plan.txt" 2>&1 || fail "tune plan exited $?"
    $VA tune plan $REQ_ARGS --json > "$OUT/plan.json" || fail "tune plan --json"
    note "apply ($mode)"
    start=$(cut -d' ' -f1 /proc/uptime)
    if [ "$mode" = pkexec ]; then
        echo "$REQ_JSON" | pkexec "$HELPER" > "$OUT/progress.jsonl" 2> "$OUT/apply.err"
        rc=$?
    else
        $VA tune apply $REQ_ARGS --yes --json > "$OUT/progress.jsonl" 2> "$OUT/apply.err"
        rc=$?
    fi
    end=$(cut -d' ' -f1 /proc/uptime)
    echo "apply exited $rc after $(awk "BEGIN{print $end - $start}") s"
    awk "BEGIN{print $end - $start}" > "$OUT/apply-seconds.txt"
    cat "$OUT/apply.err"
    tail -n 1 "$OUT/progress.jsonl"
    [ "$rc" = 0 ] || fail "apply exited $rc"
    $VA tune status --json > "$OUT/status-applied.json"
    $VA tune status
}

step_status() {
    name=$1
    $VA tune status --json > "$OUT/status-$name.json"; echo "tune status --json exited $?"
    $VA tune status; $VA tune list
}

step_tuned() {
    note "after the reboot: the tuning took"
    facts | tee "$OUT/facts-tuned.txt"
    step_status tuned
    $VA check --json > "$OUT/check-tuned.json"; echo "check exited $?"
    $VA check > "$OUT/check-tuned.txt" 2>&1 || true
    dmesg > "$OUT/dmesg-tuned.txt"
    cat /proc/interrupts > "$OUT/interrupts-tuned.txt"
    $VA tune plan $REQ_ARGS --json > "$OUT/replan-tuned.json" || fail "tune plan again"
}

# "Press a key": the picker watches the keyboards and mice while the harness
# types and moves them from outside (QMP input-send-event into the USB
# keyboard and mouse); the nodes that reacted go to the VM by evdev.
step_input() {
    note "the input picker"
    $VA input list --json > "$OUT/input.json" || fail "input list"
    $VA input list
    : > "$OUT/watching"
    $VA input watch --seconds 30 --json > "$OUT/input-watch.json" || fail "input watch"
    rm -f "$OUT/watching"
    cat "$OUT/input-watch.json"
    KBD=$(grep -o '"by_id": "[^"]*-event-kbd"' "$OUT/input-watch.json" | head -n 1 | cut -d'"' -f4)
    MOUSE=$(grep -o '"by_id": "[^"]*-event-mouse"' "$OUT/input-watch.json" | head -n 1 | cut -d'"' -f4)
    echo "picked: keyboard $KBD, mouse $MOUSE"
}

# libvirt in the test host runs QEMU under emulation too: the bar is that the
# domain starts with both functions assigned and runs for 10 s.
step_vm() {
    note "the VM: domain new, define, start, stop"
    # KVM on the emulated SVM of this test host aborts the QEMU that runs it
    # (qemu.py): without /dev/kvm the domain is adapted to emulation, which
    # is what the tool does for any host without KVM.
    modprobe -r kvm_amd kvm_intel 2>/dev/null; modprobe -r kvm 2>/dev/null
    [ ! -e /dev/kvm ] || fail "/dev/kvm is still there"
    # A blank disk: nothing boots from it (QEMU runs emulated here too), the
    # firmware starts and the devices are assigned — that is the bar.
    truncate -s 256M /var/lib/libvirt/images/e2e.img
    PLAY=""
    [ -n "${KBD:-}" ] && PLAY="$PLAY --evdev-keyboard $KBD"
    [ -n "${MOUSE:-}" ] && PLAY="$PLAY --evdev-mouse $MOUSE"
    $VA domain new --name e2e $REQ_ARGS --network none --disk /var/lib/libvirt/images/e2e.img \
        $PLAY --looking-glass 1920x1080 > /tmp/e2e.xml 2> "$OUT/domain-new.err" \
        || { cat "$OUT/domain-new.err"; fail "domain new"; }
    cat "$OUT/domain-new.err"
    cp /tmp/e2e.xml "$OUT/domain.xml"
    $VA domain define /tmp/e2e.xml --yes || fail "domain define"
    # Tuned twice more, as a user going back to the wizard would: Looking
    # Glass's device must still be there once.
    for n in 1 2; do
        $VA domain tune --domain e2e --looking-glass 1920x1080 > /tmp/e2e-tuned.xml 2> "$OUT/domain-tune-$n.err" \
            || { cat "$OUT/domain-tune-$n.err"; fail "domain tune ($n)"; }
        $VA domain define /tmp/e2e-tuned.xml --yes > "$OUT/domain-define-$n.txt" 2>&1 \
            || { cat "$OUT/domain-define-$n.txt"; fail "domain define after tune ($n)"; }
    done
    $VA domain start e2e --json > "$OUT/domain-start.json"; rc=$?
    cat "$OUT/domain-start.json"
    [ "$rc" = 0 ] || fail "domain start exited $rc"
    sleep 10
    state=$(virsh -c qemu:///system domstate e2e)
    echo "after 10 s: $state"
    [ "$state" = running ] || fail "the domain is '$state' 10 s after its start"
    step_looking_glass
    virsh -c qemu:///system dumpxml e2e > "$OUT/domain-running.xml"
    grep -A3 "<hostdev" "$OUT/domain-running.xml" > "$OUT/domain-hostdevs.txt"
    grep -c "<hostdev" "$OUT/domain-hostdevs.txt"
    $VA tune plan $REQ_ARGS --json > "$OUT/replan-running.json" || fail "tune plan while the VM runs"
    $VA domain stop e2e --json > "$OUT/domain-stop.json"; echo "domain stop exited $?"
    cat "$OUT/domain-stop.json"
    virsh -c qemu:///system domstate e2e | grep -q "shut off" || $VA domain destroy e2e
    virsh -c qemu:///system undefine e2e --nvram >/dev/null 2>&1 || virsh -c qemu:///system undefine e2e
}

# The client's way in: the address `domain new` told (spice:host=…
# spice:port=…) answers SPICE's link handshake (the server's reply starts
# with the magic "REDQ"), and QEMU has one ivshmem device however often the
# domain was tuned.
step_looking_glass() {
    note "Looking Glass: the SPICE address the client is told, QEMU's ivshmem"
    told=$(grep -o 'looking-glass-client [^)]*' "$OUT/domain-new.err" | head -n 1)
    echo "told: $told" | tee "$OUT/lg-told.txt"
    host=$(echo "$told" | sed -n 's/.*spice:host=\([^ ]*\).*/\1/p')
    port=$(echo "$told" | sed -n 's/.*spice:port=\([0-9]*\).*/\1/p')
    virsh -c qemu:///system domdisplay e2e | tee "$OUT/lg-domdisplay.txt"
    [ -n "$host" ] && [ -n "$port" ] || fail "domain new told no SPICE address ($told)"
    # SpiceLinkHeader (magic, major 2, minor 2, size 18) and a SpiceLinkMess
    # for the main channel with no capabilities.
    reply=$(timeout 20 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 2
        printf "REDQ\002\000\000\000\002\000\000\000\022\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\000\000\022\000\000\000" >&3
        head -c 4 <&3' "$host" "$port")
    echo "SPICE at $host:$port answered: '$reply'" | tee "$OUT/lg-handshake.txt"
    pid=$(cat /run/libvirt/qemu/e2e.pid)
    tr '\0' '\n' < "/proc/$pid/cmdline" > "$OUT/qemu-cmdline.txt"
    echo "ivshmem devices: $(grep -c 'ivshmem' "$OUT/qemu-cmdline.txt")"
}

# systemd-boot's entry (or image) tried once came up: keep it as the
# default, as the app's Keep button does (one more transaction).
step_keep() {
    note "tune keep"
    $VA tune keep --yes --json > "$OUT/keep.jsonl" 2> "$OUT/keep.err"; rc=$?
    tail -n 1 "$OUT/keep.jsonl"
    [ "$rc" = 0 ] || { cat "$OUT/keep.jsonl" "$OUT/keep.err"; fail "tune keep exited $rc"; }
    $VA tune status
}

# The boot after the keep: the default entry starts the tuned setup; the
# first transaction cannot be undone from under the keep; both undone, newest
# first.
step_kept() {
    note "after the reboot: kept"
    facts | tee "$OUT/facts-kept.txt"
    step_status kept
    $VA tune plan $REQ_ARGS --json > "$OUT/replan-kept.json" || fail "tune plan again"
    first=$($VA tune list | head -n 1 | cut -d' ' -f1)
    $VA tune undo "$first" --yes --json > "$OUT/undo-first.jsonl" 2>&1; echo $? > "$OUT/undo-first.rc"
    cat "$OUT/undo-first.jsonl"
    note "tune undo --last: the keep"
    $VA tune undo --last --yes --json > "$OUT/undo-keep.jsonl"; rc=$?
    tail -n 1 "$OUT/undo-keep.jsonl"
    [ "$rc" = 0 ] || { cat "$OUT/undo-keep.jsonl"; fail "undo of the keep exited $rc"; }
    step_undo
}

step_undo() {
    note "tune undo --last"
    $VA tune undo --last --yes --json > "$OUT/undo.jsonl"; rc=$?
    tail -n 1 "$OUT/undo.jsonl"
    [ "$rc" = 0 ] || { cat "$OUT/undo.jsonl"; fail "undo exited $rc"; }
    step_status undone
}

# The boot tried once, gone wrong on purpose: the user sees no screen and
# holds the power button (the machine off at once, no clean shutdown).
step_tried_then_cut() {
    note "the boot tried once: no screen, the power button held"
    facts | tee "$OUT/facts-tried.txt"
    sync
    echo 1 > /proc/sys/kernel/sysrq
    echo o > /proc/sysrq-trigger
    sleep 60
}

# Two identical cards (1234:1111 twice): the next step asks which is the
# VM's; with it chosen, the VM's card is bound by address, never by the ID
# the host's card shares.
step_twins_check() {
    note "two identical cards: $GPU for the VM, $HOSTGPU the host's"
    [ -n "$HOSTGPU" ] && [ "$HOSTGPU" != "$GPU" ] || fail "no second 1234:1111 card for the host"
    $VA check --json > "$OUT/check.json"; echo "check exited $?"
    $VA check --gpu "$GPU" --json > "$OUT/check-chosen.json"; echo "check --gpu exited $?"
    $VA check --gpu "$GPU" 2>&1 | tail -n 4
}

# A kernel update on the tuned host: Debian's newer kernel (bookworm-
# backports; its packages were fetched into the image under
# /root/kernel-update) installed by dpkg, whose postinst builds its
# initramfs from the changed /etc and update-grub puts it first in the menu,
# as on a user's machine.
step_kernel_update() {
    note "a kernel update: dpkg -i Debian's newer kernel"
    ls /root/kernel-update
    if ! dpkg -i /root/kernel-update/*.deb > "$OUT/kernel-update.txt" 2>&1; then
        tail -n 30 "$OUT/kernel-update.txt"
        fail "dpkg -i the newer kernel"
    fi
    tail -n 6 "$OUT/kernel-update.txt"
    ls /boot
}

# What of ours each kernel's image and the boot menu hold: per image, our
# modprobe.d file and vfio modules; the menu's lines naming vfio-pci's IDs.
step_images() {
    name=$1
    note "what of ours each kernel's image holds ($name)"
    for i in /boot/initrd.img-*; do
        conf=$(lsinitramfs "$i" 2>/dev/null | grep -c 'modprobe.d/vfio-assistant.conf')
        mods=$(lsinitramfs "$i" 2>/dev/null | grep -c '/vfio[-_a-z0-9]*\.ko')
        echo "image ${i#/boot/initrd.img-} conf=$conf vfio_modules=$mods"
    done | tee "$OUT/images-$name.txt"
    echo "menu $(grep -c 'vfio.pci.ids' /boot/grub/grub.cfg 2>/dev/null)" | tee -a "$OUT/images-$name.txt"
}

step_restored() {
    note "after the undo and a reboot: the host as before"
    facts | tee "$OUT/facts-restored.txt"
    hash_state > "$OUT/hash-restored.txt"
    step_status restored
}

# Single GPU (the "one-gpu" machine: no virtio-vga, the VM's GPU is the boot
# GPU): a display manager's stand-in holds the card's DRM node, the console
# is on its framebuffer; the hook must take all of it at the VM's start and
# give it back at its stop, and after a start that fails.
SG_ARGS="--gpu $GPU --single-gpu e2e"
SG_HOOK=/etc/libvirt/hooks/qemu.d/vfio-assistant-single-gpu
SG_LOG=/var/log/vfio-assistant-single-gpu.log
CARD_NODE=/dev/dri/by-path/pci-$GPU-card

# What the screen has, one fact per line: the two functions' drivers, each
# virtual console's binding, the display manager and the card's holders.
screen_state() {
    echo "gpu $(driver_of "$GPU")"
    echo "audio $(driver_of "$AUDIO")"
    echo "boot_vga $(cat "/sys/bus/pci/devices/$GPU/boot_vga" 2>/dev/null)"
    for v in /sys/class/vtconsole/vtcon*; do
        echo "${v##*/} $(cat "$v/bind") $(cat "$v/name")"
    done
    echo "dm $(systemctl is-active display-manager.service)"
    echo "node $(readlink -f "$CARD_NODE" 2>/dev/null || echo none)"
    echo "fb $(tr '\n' ';' < /proc/fb)"
    echo "holders $(for f in /proc/[0-9]*/fd/*; do case "$(readlink "$f" 2>/dev/null)" in /dev/dri/*) p=${f%/fd/*}; echo "${p##*/}:$(cat "$p/comm")";; esac; done | sort -u | tr '\n' ' ')"
}

# Phase NAME: the state into $OUT/screen-NAME.txt and the log.
screen() {
    note "screen: $1"
    screen_state | tee "$OUT/screen-$1.txt"
}

# A display manager's stand-in, as Debian installs one: a unit aliased
# display-manager.service that keeps the card's DRM node open.
step_fake_dm() {
    note "a display manager on the only GPU"
    i=0; while [ ! -e "$CARD_NODE" ] && [ "$i" -lt 60 ]; do sleep 1; i=$((i + 1)); done
    [ -e "$CARD_NODE" ] || fail "the GPU has no DRM node ($(driver_of "$GPU"))"
    cat > /etc/systemd/system/e2e-dm.service <<UNIT
[Unit]
Description=A display manager's stand-in: holds the only GPU's DRM node
[Service]
ExecStart=/bin/sh -c 'i=0; while [ ! -e $CARD_NODE ] && [ \$i -lt 50 ]; do sleep 0.2; i=\$((i+1)); done; exec 3<>$CARD_NODE; exec sleep infinity'
[Install]
Alias=display-manager.service
UNIT
    systemctl daemon-reload
    systemctl enable e2e-dm.service || fail "enable the display manager"
    systemctl start display-manager.service || fail "start the display manager"
    sleep 2
}

# Issue 41's holders and waits, for both GPU cases.
# A holder that maps the card and closes its fd: a DRM dumb buffer of the
# card's, mapped (perl-base is in every Debian: ioctl, and mmap as syscall
# 9), its fd closed, then a long sleep — in a unit of its own, as a CUDA
# job's would be. Its name is e2e-mapper (a copy of perl).
MAPPER=/usr/local/lib/e2e-map-card.pl
start_mapper() {
    cp /usr/bin/perl /usr/local/bin/e2e-mapper
    cat > "$MAPPER" <<'PERL'
no warnings;
open(my $fh, "+<", $ARGV[0]) or die "open $ARGV[0]: $!";
# struct drm_mode_create_dumb: height, width, bpp, flags, handle, pitch, size.
my $c = pack("L6Q", 64, 64, 32, 0, 0, 0, 0);
ioctl($fh, 0xC02064B2, $c) or die "CREATE_DUMB: $!";
my (undef, undef, undef, undef, $handle, undef, $size) = unpack("L6Q", $c);
# struct drm_mode_map_dumb: handle, pad, offset.
my $m = pack("LLQ", $handle, 0, 0);
ioctl($fh, 0xC01064B3, $m) or die "MAP_DUMB: $!";
my (undef, undef, $offset) = unpack("LLQ", $m);
my $addr = syscall(9, 0, $size, 3, 1, fileno($fh), $offset);
die "mmap: $!" if $addr == -1;
close($fh);
open(my $r, ">", $ARGV[1]) and close($r);
sleep(600);
PERL
    rm -f /tmp/e2e-mapper-ready
    systemd-run --unit=e2e-mapper --property=Type=exec /usr/local/bin/e2e-mapper "$MAPPER" "$CARD_NODE" /tmp/e2e-mapper-ready \
        || fail "systemd-run the mapper"
    i=0; while [ ! -e /tmp/e2e-mapper-ready ] && [ "$i" -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    [ -e /tmp/e2e-mapper-ready ] || { journalctl -u e2e-mapper --no-pager | tail -n 5; fail "the mapper did not map the card"; }
    pid=$(systemctl show -p MainPID --value e2e-mapper.service)
    echo "the mapper (pid $pid): $(grep -c "$(readlink -f "$CARD_NODE")" "/proc/$pid/maps") mapping(s) of the card, fds on it: $(ls -l "/proc/$pid/fd" | grep -c /dev/dri/)"
}
stop_mapper() { systemctl stop e2e-mapper.service 2>/dev/null; systemctl reset-failed e2e-mapper.service 2>/dev/null; }

# A fake holder from a user namespace, as any user can make one: nobody,
# `unshare -rm`, a tmpfs over /dev with a file named like the card open.
start_fake_holder() {
    name=$(basename "$(readlink -f "$CARD_NODE")")
    rm -f /tmp/e2e-fake-ready
    setpriv --reuid=65534 --regid=65534 --clear-groups unshare -rm sh -c \
        "mount -t tmpfs none /dev && mkdir /dev/dri && : > /dev/dri/$name && exec 3<>/dev/dri/$name && : > /tmp/e2e-fake-ready && exec sleep 600" &
    fake=$!
    i=0; while [ ! -e /tmp/e2e-fake-ready ] && [ "$i" -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    [ -e /tmp/e2e-fake-ready ] || fail "no fake holder (user namespaces off?)"
    echo "the fake holder (pid $fake) has: $(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c "/dev/dri/$name") fd(s) named /dev/dri/$name"
}
stop_fake_holder() { pkill -KILL -U 65534 -x sleep 2>/dev/null; wait "$fake" 2>/dev/null; }

# A unit whose processes ignore TERM (a child that does), with systemd
# waiting TIMEOUT s before it KILLs them: `systemctl stop` hangs that long.
ignore_term() {
    mkdir -p "/etc/systemd/system/$1.d"
    printf '[Service]\nExecStart=\nExecStart=/bin/sh -c %s\nTimeoutStopSec=%s\n' "'$2'" "$3" > "/etc/systemd/system/$1.d/e2e-term.conf"
    systemctl daemon-reload
    systemctl restart "$1" || fail "restart $1 ignoring TERM"
    sleep 2
}
heed_term() {
    systemctl kill -s KILL "$1" 2>/dev/null
    rm -rf "/etc/systemd/system/$1.d"
    systemctl daemon-reload
    systemctl reset-failed "$1" 2>/dev/null
    systemctl restart "$1" || fail "restart $1"
    sleep 2
}
# Seconds since boot, for the bounds.
now() { cut -d' ' -f1 /proc/uptime; }
took() { awk "BEGIN{printf \"%.1f\", $2 - $1}"; }

step_single_gpu_apply() {
    note "tune plan/apply $SG_ARGS"
    $VA tune plan $SG_ARGS > "$OUT/plan.txt" 2>&1; rc=$?
    cat "$OUT/plan.txt"
    [ "$rc" = 0 ] || fail "tune plan exited $rc"
    $VA tune plan $SG_ARGS --json > "$OUT/plan.json" || fail "tune plan --json"
    $VA tune apply $SG_ARGS --yes --json > "$OUT/progress.jsonl" 2> "$OUT/apply.err"; rc=$?
    cat "$OUT/apply.err"; tail -n 1 "$OUT/progress.jsonl"
    [ "$rc" = 0 ] || fail "apply exited $rc"
    [ -x "$SG_HOOK" ] || fail "no hook at $SG_HOOK"
    step_status applied
}

# One start of the VM; "ok" when it runs, "failed" when the start fails.
sg_start() {
    $VA domain start e2e --json > "$OUT/start-$1.json" 2> "$OUT/start-$1.err"; rc=$?
    cat "$OUT/start-$1.err"
    echo "start ($1) exited $rc"
    return $rc
}

step_single_gpu_vm() {
    note "the VM on the only GPU: define, start, stop, a failed start, a stray holder"
    modprobe -r kvm_amd kvm_intel 2>/dev/null; modprobe -r kvm 2>/dev/null
    [ ! -e /dev/kvm ] || fail "/dev/kvm is still there"
    truncate -s 256M /var/lib/libvirt/images/e2e.img
    $VA domain new --name e2e --gpu "$GPU" --vcpus 1 --memory 512M --network none \
        --disk /var/lib/libvirt/images/e2e.img > /tmp/e2e.xml 2> "$OUT/domain-new.err" \
        || { cat "$OUT/domain-new.err"; fail "domain new"; }
    cp /tmp/e2e.xml "$OUT/domain.xml"
    $VA domain define /tmp/e2e.xml --yes || fail "domain define"
    screen before

    # 1. Started: the hook stops the display manager, unbinds the consoles,
    # libvirt hands the card to vfio-pci.
    sg_start run || { screen start-failed; cat "$SG_LOG"; fail "the VM did not start"; }
    sleep 5
    echo "state: $(virsh -c qemu:///system domstate e2e)"
    virsh -c qemu:///system domstate e2e > "$OUT/domstate-running.txt"
    screen running
    # 2. Stopped (no guest OS answers ACPI here: forced off, as a hung
    # guest would be): the card, the consoles and the display manager back.
    $VA domain destroy e2e || virsh -c qemu:///system destroy e2e
    sleep 5
    screen stopped

    # 3. A start that fails after the hook took the screen: the disk gone.
    mv /var/lib/libvirt/images/e2e.img /var/lib/libvirt/images/e2e.img.away
    if sg_start missing-disk; then fail "the VM started without its disk"; fi
    sleep 3
    screen missing-disk
    mv /var/lib/libvirt/images/e2e.img.away /var/lib/libvirt/images/e2e.img

    # 4. A program outside the display manager holds the card (a CUDA job,
    # a compositor from a TTY): the start fails with its name, nothing hangs.
    cp /bin/sleep /usr/local/bin/e2e-cuda
    sh -c "exec 3<>$CARD_NODE; exec /usr/local/bin/e2e-cuda 600" &
    stray=$!
    sleep 1
    started=$(cut -d' ' -f1 /proc/uptime)
    if sg_start stray-holder; then fail "the VM started while e2e-cuda held the card"; fi
    ended=$(cut -d' ' -f1 /proc/uptime)
    echo "the refused start took $(awk "BEGIN{print $ended - $started}") s" | tee "$OUT/stray-seconds.txt"
    screen stray-holder
    kill "$stray" 2>/dev/null
    wait "$stray" 2>/dev/null

    # 5. A holder that mapped the card and closed its fd (issue 41): seen by
    # the device in its mappings, the start refused before the display
    # manager is stopped.
    start_mapper
    t=$(now)
    since=$(date '+%F %T')
    sleep 1
    if sg_start mapped; then
        echo "started" > "$OUT/mapped.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
    else
        echo "refused in $(took "$t" "$(now)") s dm=$(systemctl is-active display-manager.service) stops=$(journalctl -u e2e-dm.service --since "$since" --no-pager | grep -c Stopping)" > "$OUT/mapped.txt"
    fi
    cat "$OUT/mapped.txt"
    screen mapped
    stop_mapper

    # 6. A fake holder from a user namespace: nothing of the card's, the VM
    # starts, and stops with the screen back.
    start_fake_holder
    if sg_start fake-holder; then
        echo "started" > "$OUT/fake.txt"
        sleep 3
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
        sleep 5
    else
        echo "refused" > "$OUT/fake.txt"
    fi
    cat "$OUT/fake.txt"
    screen fake-holder
    stop_fake_holder

    # 7. The display manager's processes ignore TERM (systemd would wait
    # 60 s): the hook's stop is killed at its bound, the start fails, and
    # nothing waits past the bounds (the stop, then the give-back's start:
    # 2 x (20 + 2) s).
    ignore_term e2e-dm.service "trap \"\" TERM; i=0; while [ ! -e $CARD_NODE ] && [ \$i -lt 50 ]; do sleep 0.2; i=\$((i+1)); done; exec 3<>$CARD_NODE; exec sleep infinity" 60
    t=$(now)
    if sg_start term; then
        echo "started" > "$OUT/term.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
    else
        echo "refused in $(took "$t" "$(now)") s" > "$OUT/term.txt"
    fi
    cat "$OUT/term.txt"
    heed_term e2e-dm.service
    i=0; while [ "$(systemctl is-active display-manager.service)" != active ] && [ "$i" -lt 30 ]; do sleep 1; i=$((i + 1)); done
    sleep 5
    screen term

    cp "$SG_LOG" "$OUT/single-gpu.log"
    cat "$SG_LOG"
    virsh -c qemu:///system undefine e2e --nvram >/dev/null 2>&1 || virsh -c qemu:///system undefine e2e
    step_undo
    [ ! -e "$SG_HOOK" ] || fail "the hook is still there after the undo"
}

# Shared GPU (the "desktop" machine: virtio-vga is the host's screen, the
# VGA+audio slot the second card): a unit of the host's holds the second
# card's DRM node (a CUDA job's stand-in) and may be stopped by the hook;
# the VM starts and stops ten times without a reboot, the card going to
# vfio-pci and back each time; a program that may not be stopped makes the
# start fail with its name; undo removes the mode.
SH_ARGS="--gpu $GPU --shared-gpu e2e --shared-stop e2e-holder.service"
SH_HOOK=/etc/libvirt/hooks/qemu.d/vfio-assistant-shared-gpu
SH_LOG=/var/log/vfio-assistant-shared-gpu.log
SH_RULE=/etc/udev/rules.d/61-vfio-assistant-shared-gpu.rules

step_shared_apply() {
    # --shared-stop takes a unit the plan sees holding the card (issue 41):
    # the holder runs while the plan is made.
    step_shared_holder
    note "tune plan/apply $SH_ARGS"
    $VA tune plan $SH_ARGS > "$OUT/plan.txt" 2>&1; rc=$?
    cat "$OUT/plan.txt"
    [ "$rc" = 0 ] || fail "tune plan exited $rc"
    $VA tune plan $SH_ARGS --json > "$OUT/plan.json" || fail "tune plan --json"
    $VA tune apply $SH_ARGS --yes --json > "$OUT/progress.jsonl" 2> "$OUT/apply.err"; rc=$?
    cat "$OUT/apply.err"; tail -n 1 "$OUT/progress.jsonl"
    [ "$rc" = 0 ] || fail "apply exited $rc"
    [ -x "$SH_HOOK" ] || fail "no hook at $SH_HOOK"
    ls -l /dev/dri/ | tee "$OUT/dri-applied.txt"
    step_status applied
}

# Who has one of the second card's DRM nodes open (pid:program).
card_holders() {
    for f in /proc/[0-9]*/fd/*; do
        case "$(readlink "$f" 2>/dev/null)" in
        /dev/dri/card*|/dev/dri/renderD*)
            n=$(readlink "$f"); n=${n##*/}
            [ -e "/sys/bus/pci/devices/$GPU/drm/$n" ] || continue
            p=${f%/fd/*}; echo "${p##*/}:$(cat "$p/comm")" ;;
        esac
    done | sort -u | tr '\n' ' '
}

step_shared_holder() {
    i=0; while [ ! -e "$CARD_NODE" ] && [ "$i" -lt 60 ]; do sleep 1; i=$((i + 1)); done
    [ -e "$CARD_NODE" ] || fail "the second GPU has no DRM node ($(driver_of "$GPU"))"
    cat > /etc/systemd/system/e2e-holder.service <<UNIT
[Unit]
Description=A program of the host's on the second GPU (a CUDA job's stand-in)
[Service]
ExecStart=/bin/sh -c 'i=0; while [ ! -e $CARD_NODE ] && [ \$i -lt 100 ]; do sleep 0.2; i=\$((i+1)); done; exec 3<>$CARD_NODE; exec sleep infinity'
UNIT
    systemctl daemon-reload
    systemctl start e2e-holder.service || fail "start the holder"
    sleep 2
    echo "holders at the start: $(card_holders)"
}

# One line of what the host has: both functions' drivers, the host's own
# card's, the holder's unit, who holds the card.
shared_state() {
    echo "gpu=$(driver_of "$GPU") audio=$(driver_of "$AUDIO") host=$(driver_of "$HOSTGPU") holder=$(systemctl is-active e2e-holder.service) holds=$(card_holders | tr ' ' ',')"
}

step_shared_vm() {
    note "the second GPU lent to the VM and given back, ten times; a holder that may not be stopped"
    modprobe -r kvm_amd kvm_intel 2>/dev/null; modprobe -r kvm 2>/dev/null
    step_shared_holder
    echo "before $(shared_state)" | tee "$OUT/cycles.txt"
    truncate -s 256M /var/lib/libvirt/images/e2e.img
    $VA domain new --name e2e --gpu "$GPU" --vcpus 1 --memory 512M --network none \
        --disk /var/lib/libvirt/images/e2e.img > /tmp/e2e.xml 2> "$OUT/domain-new.err" \
        || { cat "$OUT/domain-new.err"; fail "domain new"; }
    cp /tmp/e2e.xml "$OUT/domain.xml"
    $VA domain define /tmp/e2e.xml --yes || fail "domain define"
    t0=$(cut -d' ' -f1 /proc/uptime)
    i=1
    while [ "$i" -le 10 ]; do
        if ! sg_start "cycle-$i"; then
            echo "$i start-failed $(shared_state)" | tee -a "$OUT/cycles.txt"
            break
        fi
        sleep 2
        echo "$i running $(virsh -c qemu:///system domstate e2e | head -n 1) $(shared_state)" | tee -a "$OUT/cycles.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
        j=0
        while { [ "$(driver_of "$GPU")" != bochs-drm ] || [ "$(systemctl is-active e2e-holder.service)" != active ] \
            || [ -z "$(card_holders)" ]; } && [ "$j" -lt 30 ]; do sleep 1; j=$((j + 1)); done
        echo "$i stopped $(shared_state)" | tee -a "$OUT/cycles.txt"
        i=$((i + 1))
    done
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "ten cycles took $(awk "BEGIN{print $t1 - $t0}") s" | tee "$OUT/cycles-seconds.txt"

    # A program outside any unit the hook may stop holds the card: the
    # start fails with its name, and the card stays with the host.
    cp /bin/sleep /usr/local/bin/e2e-cuda
    sh -c "exec 3<>$CARD_NODE; exec /usr/local/bin/e2e-cuda 600" &
    stray=$!
    sleep 1
    if sg_start stray-holder; then
        echo "started" > "$OUT/stray.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
    else
        echo "refused $(shared_state)" > "$OUT/stray.txt"
    fi
    cat "$OUT/stray.txt"
    kill "$stray" 2>/dev/null
    wait "$stray" 2>/dev/null

    # A holder that mapped the card and closed its fd (issue 41): found by
    # the device in its mappings; the start refused, the card stays.
    start_mapper
    if sg_start mapped; then
        echo "started" > "$OUT/mapped.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
    else
        echo "refused $(shared_state)" > "$OUT/mapped.txt"
    fi
    cat "$OUT/mapped.txt"
    stop_mapper

    # A fake holder from a user namespace: nothing of the card's; the card
    # is lent, and comes back at the stop.
    start_fake_holder
    if sg_start fake-holder; then
        echo "started $(shared_state)" > "$OUT/fake.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
        j=0; while [ "$(driver_of "$GPU")" != bochs-drm ] && [ "$j" -lt 30 ]; do sleep 1; j=$((j + 1)); done
    else
        echo "refused $(shared_state)" > "$OUT/fake.txt"
    fi
    echo "after $(shared_state)" >> "$OUT/fake.txt"
    cat "$OUT/fake.txt"
    stop_fake_holder

    # The holder's unit ignores TERM (systemd would wait 60 s): the hook's
    # stop is killed at its bound, the start fails, the card stays, and
    # nothing waits past the bounds (the stop, then the give-back's start:
    # 2 x (10 + 2) s).
    ignore_term e2e-holder.service "trap \"\" TERM; i=0; while [ ! -e $CARD_NODE ] && [ \$i -lt 100 ]; do sleep 0.2; i=\$((i+1)); done; exec 3<>$CARD_NODE; exec sleep infinity" 60
    t=$(now)
    if sg_start term; then
        echo "started" > "$OUT/term.txt"
        $VA domain destroy e2e >/dev/null 2>&1 || virsh -c qemu:///system destroy e2e
    else
        echo "refused in $(took "$t" "$(now)") s $(shared_state)" > "$OUT/term.txt"
    fi
    cat "$OUT/term.txt"
    heed_term e2e-holder.service

    $VA check --device "$GPU" > "$OUT/check-device.txt" 2>&1; echo "check --device exited $?"
    cat "$OUT/check-device.txt"
    cp "$SH_LOG" "$OUT/shared-gpu.log"
    tail -n 30 "$SH_LOG"
    virsh -c qemu:///system undefine e2e --nvram >/dev/null 2>&1 || virsh -c qemu:///system undefine e2e
    step_undo
    [ ! -e "$SH_HOOK" ] || fail "the hook is still there after the undo"
    [ ! -e "$SH_RULE" ] || fail "the udev rule is still there after the undo"
}

# The desktop host (issue 42): a phase of the journey through the app's
# window, driven as the desktop's user inside its session by
# scripts/e2e/desktop/drive.py. e2e-session (the session's autostart) runs
# what is put into its folder; this waits for it and keeps its log.
# $DESKTOP_USER and $DESKTOP_PASSWORD come from the case (hosts.py).
step_window() {
    phase=$1
    uid=$(id -u "$DESKTOP_USER") || fail "no user $DESKTOP_USER"
    d=/run/user/$uid/e2e
    note "the window: $phase (as $DESKTOP_USER in its session)"
    i=0; while [ ! -e "$d/ready" ] && [ "$i" -lt 600 ]; do sleep 2; i=$((i + 2)); done
    if [ ! -e "$d/ready" ]; then
        loginctl list-sessions --no-pager; systemctl status lightdm --no-pager | tail -n 20
        tail -n 30 /var/log/lightdm/*.log 2>/dev/null
        fail "no desktop session for $DESKTOP_USER after 600 s"
    fi
    echo "the session came up ${i} s after the step began"
    for s in $(loginctl list-sessions --no-legend | awk '{print $1}'); do
        loginctl show-session "$s" -p Name -p Seat -p Type -p Class -p Active -p State --no-pager | tr '\n' ' '; echo
    done | tee "$OUT/window/sessions-$phase.txt"
    rm -f "$d/rc"
    printf 'exec python3 /mnt/ctl/desktop/drive.py %s /mnt/ctl/out/window %s\n' "$phase" "$DESKTOP_PASSWORD" > "$d/request.tmp"
    chown "$uid" "$d/request.tmp"
    mv "$d/request.tmp" "$d/request"
    i=0; while [ ! -e "$d/rc" ] && [ "$i" -lt 3000 ]; do sleep 5; i=$((i + 5)); done
    cp "$d/driver.log" "$OUT/window/$phase-driver.log" 2>/dev/null
    cp "$d/env.txt" "$OUT/window/session-env.txt" 2>/dev/null
    journalctl -b --no-pager -t polkitd -t pkexec -t polkit-agent-helper-1 > "$OUT/window/$phase-polkit.log" 2>&1
    cat "$d/driver.log"
    [ -e "$d/rc" ] || fail "the driver did not end in 3000 s"
    echo "the driver exited $(cat "$d/rc")"
}

# libvirt's "default" storage pool over /var/lib/libvirt/images, as
# virt-manager's first start makes it: the New VM page creates its disk
# through it (an ordinary user may not write into that folder: without a
# pool the page says qemu-img's "Permission denied").
step_default_pool() {
    virsh -c qemu:///system pool-info default >/dev/null 2>&1 && return 0
    virsh -c qemu:///system pool-define-as default dir --target /var/lib/libvirt/images >/dev/null || fail "pool-define-as default"
    virsh -c qemu:///system pool-start default || fail "pool-start default"
}

# Every libvirt domain the window made, undefined, and the pool (their
# definitions under /etc would not be as before).
step_forget_vms() {
    virsh -c qemu:///system pool-destroy default >/dev/null 2>&1
    virsh -c qemu:///system pool-undefine default >/dev/null 2>&1 && echo "undefined the pool 'default'"
    for v in $(virsh -c qemu:///system list --all --name); do
        virsh -c qemu:///system destroy "$v" >/dev/null 2>&1
        virsh -c qemu:///system undefine "$v" --nvram >/dev/null 2>&1 || virsh -c qemu:///system undefine "$v"
        echo "undefined the VM '$v'"
    done
}
