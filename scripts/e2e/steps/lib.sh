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

# The VM's "GPU" (1234:1111 behind its own root port) and its audio function;
# the host's own display (virtio-vga on the root bus).
gpu_addr() {
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x1234:0x1111" ] && { echo "${d##*/}"; return; }
    done
}
GPU=$(gpu_addr)
AUDIO=${GPU%.0}.1
HOSTGPU=$(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x1af4:0x1050" ] && echo "${d##*/}"; done)

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
    echo "cmdline $(cat /proc/cmdline)"
    echo "gpu $GPU $(driver_of "$GPU")"
    echo "audio $AUDIO $(driver_of "$AUDIO")"
    echo "hostgpu $HOSTGPU $(driver_of "$HOSTGPU")"
    echo "hugepages $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)"
    echo "iommu_group $(basename "$(readlink /sys/bus/pci/devices/$GPU/iommu_group)") $(cat /sys/bus/pci/devices/$GPU/iommu_group/type 2>/dev/null)"
    echo "group_members $(ls /sys/bus/pci/devices/$GPU/iommu_group/devices | tr '\n' ' ')"
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
    $VA domain new --name e2e $REQ_ARGS --network none --no-spice --disk /var/lib/libvirt/images/e2e.img \
        $PLAY --looking-glass 1920x1080 > /tmp/e2e.xml 2> "$OUT/domain-new.err" \
        || { cat "$OUT/domain-new.err"; fail "domain new"; }
    cp /tmp/e2e.xml "$OUT/domain.xml"
    $VA domain define /tmp/e2e.xml --yes || fail "domain define"
    $VA domain start e2e --json > "$OUT/domain-start.json"; rc=$?
    cat "$OUT/domain-start.json"
    [ "$rc" = 0 ] || fail "domain start exited $rc"
    sleep 10
    state=$(virsh -c qemu:///system domstate e2e)
    echo "after 10 s: $state"
    [ "$state" = running ] || fail "the domain is '$state' 10 s after its start"
    virsh -c qemu:///system dumpxml e2e > "$OUT/domain-running.xml"
    grep -A3 "<hostdev" "$OUT/domain-running.xml" > "$OUT/domain-hostdevs.txt"
    grep -c "<hostdev" "$OUT/domain-hostdevs.txt"
    $VA tune plan $REQ_ARGS --json > "$OUT/replan-running.json" || fail "tune plan while the VM runs"
    $VA domain stop e2e --json > "$OUT/domain-stop.json"; echo "domain stop exited $?"
    cat "$OUT/domain-stop.json"
    virsh -c qemu:///system domstate e2e | grep -q "shut off" || $VA domain destroy e2e
    virsh -c qemu:///system undefine e2e --nvram >/dev/null 2>&1 || virsh -c qemu:///system undefine e2e
}

step_undo() {
    note "tune undo --last"
    $VA tune undo --last --yes --json > "$OUT/undo.jsonl"; rc=$?
    tail -n 1 "$OUT/undo.jsonl"
    [ "$rc" = 0 ] || { cat "$OUT/undo.jsonl"; fail "undo exited $rc"; }
    step_status undone
}

step_restored() {
    note "after the undo and a reboot: the host as before"
    facts | tee "$OUT/facts-restored.txt"
    hash_state > "$OUT/hash-restored.txt"
    step_status restored
}
