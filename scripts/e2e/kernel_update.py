"""The case after the apply that every tuned desktop meets: a kernel update.

Tuned and rebooted, the host gets Debian's newer kernel by dpkg (its
packages were fetched into the image, hosts.KERNEL_UPDATE): its postinst
builds the new kernel's initramfs from our changed /etc, and update-grub
puts it first in the menu with our command line. The new kernel must boot
tuned, `tune status` must say so; `tune undo --last` on that kernel must
leave nothing of ours in any kernel's image or the menu (the undo rebuilds
the image it never made), and the next boot is the host as before.
"""

import json

from journey import (boot, count_tokens, expect, expect_one_setup, hash_diff, read_facts, settle,
                     status_of, tokens_planned)
from log import say

OURS = ("/etc/modprobe.d/vfio-assistant.conf",)
RESTORED = ("/etc/default/grub", "/etc/initramfs-tools/modules")


def images(share, name):
    """{kernel: (our modprobe.d file, vfio modules)} and the menu's count."""
    out, menu = {}, None
    for line in (share / f"out/images-{name}.txt").read_text().splitlines():
        w = line.split()
        if w[:1] == ["image"] and len(w) == 4:
            out[w[1]] = tuple(int(x.split("=")[1]) for x in w[2:])
        elif w[:1] == ["menu"]:
            menu = int(w[1]) if len(w) > 1 and w[1].isdigit() else 0
    return out, menu


def kernel_update(guest, apply_with):
    share = guest.share
    boot(guest, "install, apply", f"""
step_install
step_before
step_scan_check
step_apply {apply_with}
""")
    # The boot tried once is kept first (GRUB's entry of ours), as a user
    # keeps a setup that came up; the update then meets the default entries.
    once = guest.host.boot_once
    boot(guest, "tuned; then a kernel update", f"""
facts | tee "$OUT/facts-tuned.txt"
step_status tuned
{'step_keep' if once else ''}
step_kernel_update
step_images updated
""")
    old = read_facts(share / "out/facts-tuned.txt")
    expect(old["gpu"].endswith("vfio-pci"), f"tuned on the old kernel {old['kernel']} ({old['gpu']})")
    imgs, menu = images(share, "updated")
    new = sorted(k for k in imgs if k != old["kernel"])
    say(f"  kernels after the update: {sorted(imgs)}; our file in each image: {imgs}")
    expect(len(new) == 1, f"dpkg installed one newer kernel ({new})")
    expect(new and imgs[new[0]][0] == 1,
           f"the new kernel's image was built with our modprobe.d file ({new and imgs[new[0]]})")

    boot(guest, "the new kernel: tuned? then undo", f"""
facts | tee "$OUT/facts-newkernel.txt"
step_status newkernel
step_undo
{'step_undo' if once else ''}
step_images undone
""")
    toks = tokens_planned(share)
    f = read_facts(share / "out/facts-newkernel.txt")
    expect(new and f["kernel"] == new[0], f"the next boot runs the new kernel ({f['kernel']})")
    counts = count_tokens(f["cmdline"], toks)
    expect(toks and all(n == 1 for n in counts.values()), f"with our command line ({counts})")
    expect(f["gpu"].endswith("vfio-pci") and f["audio"].endswith("vfio-pci"),
           f"the VM's card is on vfio-pci on the new kernel ({f['gpu']}, {f['audio']})")
    st = status_of(share, "newkernel")
    rows = json.loads((share / "out/status-newkernel.json").read_text())
    expect(all(r["standing"] == "took_effect" for r in rows),
           f"every transaction took effect on the new kernel ({[r['standing'] for r in rows]})")
    expect(st and st["standing"] == "took_effect",
           f"tune status on the new kernel: took effect ({st and st['standing']})")

    boot(guest, "undone on the new kernel: verify", """
step_restored
step_images restored
""")
    b = read_facts(share / "out/facts-restored.txt")
    a = read_facts(share / "out/facts-before.txt")
    expect(b["kernel"] == f["kernel"], f"still the new kernel ({b['kernel']})")
    counts = count_tokens(b["cmdline"], toks)
    expect(all(n == 0 for n in counts.values()), f"no token of ours on the command line ({counts})")
    expect(b["gpu"].split()[-1] == a["gpu"].split()[-1] and b["audio"].split()[-1] == a["audio"].split()[-1],
           f"the card is on its own drivers as before the apply ({b['gpu']}, {b['audio']})")
    imgs, menu = images(share, "restored")
    left = {k: v for k, v in imgs.items() if v != (0, 0)}
    expect(imgs and not left, f"no kernel's image holds our file or vfio modules ({imgs})")
    expect(menu == 0, f"the boot menu names no vfio-pci IDs ({menu})")
    changed, gone, new_files = hash_diff(share, "before", "restored")
    ours = [p for p in OURS if p in new_files or p in changed]
    expect(not ours, f"our files are gone ({ours})")
    put_back = [p for p in RESTORED if p in changed or p in gone]
    expect(not put_back, f"the files the apply changed are as before ({put_back})")
    say(f"  since the install, besides ours: changed {len(changed)}, new {len(new_files)} "
        f"(the new kernel's files; e.g. {new_files[:3]})")
    st = status_of(share, "restored")
    expect(st and st["standing"] == "undone", f"tune status: undone ({st and st['standing']})")
    settle()


def two_kernels(guest, apply_with):
    """Two kernels installed when the apply runs: it rebuilds the image of
    the kernel the next boot starts and names the other; a boot into the
    other (once, by grub-reboot) is one setup or the other, never a mix."""
    share = guest.share
    boot(guest, "install; a newer kernel beside the old", """
step_install
step_kernel_update
""")
    boot(guest, "on the newer kernel: apply", f"""
step_before
step_scan_check
step_apply {apply_with}
""")
    a = read_facts(share / "out/facts-before.txt")
    plan = (share / "out/plan.txt").read_text(errors="replace")
    rebuilt = [line.strip() for line in plan.splitlines() if "Rebuilt:" in line or "Not rebuilt:" in line]
    say(f"  the plan: {rebuilt}")
    expect(any("Rebuilt: the initramfs of " + a["kernel"] in line for line in rebuilt),
           f"the plan names the running, newest kernel {a['kernel']} as the one rebuilt")
    once = guest.host.boot_once
    boot(guest, "tuned on the newer kernel; the old one next, once", f"""
facts | tee "$OUT/facts-tuned.txt"
{'step_keep' if once else ''}
step_images tuned
old=$(ls /boot/vmlinuz-* | sed 's|/boot/vmlinuz-||' | grep -v "^$(uname -r)$" | head -n 1)
echo "old kernel: $old"
uuid=$(findmnt -no UUID /)
grub-reboot "gnulinux-advanced-$uuid>gnulinux-$old-advanced-$uuid" || fail "grub-reboot"
grep next_entry /boot/grub/grubenv
""")
    imgs, _ = images(share, "tuned")
    others = [k for k in imgs if k != a["kernel"]]
    expect(any(k in line for k in others for line in rebuilt if "Not rebuilt:" in line),
           f"the plan names the kernel it leaves whole ({others})")
    boot(guest, "the old kernel, once: one setup, never a mix; undo", f"""
facts | tee "$OUT/facts-other.txt"
step_images other
step_undo
{'step_undo' if once else ''}
""")
    o = read_facts(share / "out/facts-other.txt")
    expect(o["kernel"] in others, f"the old kernel booted ({o['kernel']})")
    say(f"  the old kernel: card {o['gpu']}, audio {o['audio']}")
    expect_one_setup(o, tokens_planned(share), "the old kernel's boot")
    boot(guest, "undone: the default kernel as before", """
step_restored
step_images restored
""")
    b = read_facts(share / "out/facts-restored.txt")
    expect(b["kernel"] == a["kernel"], f"the default kernel again ({b['kernel']})")
    expect(b["gpu"] == a["gpu"] and b["audio"] == a["audio"], f"the card as before ({b['gpu']}, {b['audio']})")
    imgs, menu = images(share, "restored")
    left = {k: v for k, v in imgs.items() if v != (0, 0)}
    expect(not left and menu == 0, f"nothing of ours in any image or the menu ({imgs}, menu {menu})")
    settle()
