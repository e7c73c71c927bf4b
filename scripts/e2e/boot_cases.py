"""The boot-path cases on a booted GRUB host (run.py's tried-once-fails and
twins).

* tried-once-fails: the first tuned boot (GRUB's entry of ours, booted once)
  goes wrong on purpose — the step powers the machine off at once, as a user
  who sees no screen holds the power button: the next power-on is the old
  setup with nothing undone, and `tune status` says the try did not come up.
* twins (the "twins" machine: QEMU's VGA twice, the root bus's the boot GPU
  and the host's screen): the next step asks which card is the VM's; bound
  by address (never by the ID both share), the VM's card is on vfio-pci after
  the reboot and the host's twin on bochs-drm with the console; undone.

Their steps are steps/lib.sh's step_tried_then_cut and step_twins_check.
"""

import json

from journey import (boot, check_restored, count_tokens, expect, read_facts, settle, status_of,
                     tokens_planned)


def tried_once_fails(guest, apply_with):
    """The first tuned boot goes wrong (the user sees no screen and holds the
    power button): the next power-on is the old setup, with nothing to undo
    for it to come up, and `tune status` says the try did not come up."""
    share = guest.share
    boot(guest, "install, apply", f"""
step_install
step_before
step_apply {apply_with}
""")
    toks = tokens_planned(share)
    boot(guest, "the boot tried once: no screen, the power button held", "step_tried_then_cut",
         want_rc=None)
    t = read_facts(share / "out/facts-tried.txt")
    counts = count_tokens(t["cmdline"], toks)
    expect(toks and all(n == 1 for n in counts.values()), f"the boot tried once was the new setup ({counts})")
    boot(guest, "the next power-on: the old setup, status, undo", """
facts | tee "$OUT/facts-after.txt"
step_status after
step_undo
""")
    f = read_facts(share / "out/facts-after.txt")
    a = read_facts(share / "out/facts-before.txt")
    counts = count_tokens(f["cmdline"], toks)
    expect(all(n == 0 for n in counts.values()), f"the old setup: no token of ours ({counts})")
    expect(f["gpu"] == a["gpu"] and f["audio"] == a["audio"],
           f"the card on its own drivers, as before ({f['gpu']}, {f['audio']})")
    st = status_of(share, "after")
    words = (st or {}).get("tried_once") or ""
    expect(st and st["standing"] == "did_not_take" and "did not come up" in words and st.get("next_boot") == "old",
           f"tune status: the try did not come up, the next boot is the old setup "
           f"({st and st['standing']}, {st and st.get('next_boot')}: {words})")
    boot(guest, "after the undo: verify", "step_restored")
    check_restored(share)
    settle()


def twins(guest, apply_with):
    """Two identical cards (the twin machine: QEMU's VGA twice, the root
    bus's the boot GPU): the next step asks which is the VM's; bound by
    address, the VM's card is on vfio-pci after the reboot and the host's
    twin on bochs-drm with the console; undone, both as before."""
    share = guest.share
    boot(guest, "install, the next step, apply", f"""
step_install
step_before
step_twins_check
step_apply {apply_with}
""")
    gpu = read_facts(share / "out/facts-before.txt")["gpu"].split()[0]
    nxt = json.loads((share / "out/check.json").read_text())["next_step"]
    offered = [c["address"] for c in nxt["action"].get("cards", [])]
    expect(nxt["action"]["kind"] == "choose_gpu" and gpu in offered and len(offered) == 2,
           f"the next step asks which card is the VM's ({nxt['action']['kind']}: {offered})")
    chosen = json.loads((share / "out/check-chosen.json").read_text())["next_step"]
    expect(chosen["action"].get("device") == gpu, f"with --gpu, the step binds that card ({chosen['sentence']})")
    plan = (share / "out/plan.json").read_text()
    expect("vfio_assistant.bind=1" in plan and "vfio_pci.ids" not in plan and "driver_override" in plan,
           "the plan binds by address (the switch on the command line, no vfio_pci.ids)")
    boot(guest, "tuned: the VM's card on vfio-pci, the host's twin on bochs-drm; undo", """
facts | tee "$OUT/facts-tuned.txt"
step_status tuned
ls -l /sys/class/graphics/ > "$OUT/fb-tuned.txt" 2>&1
for f in /sys/class/graphics/fb*; do echo "$f $(readlink -f "$f/device")"; done >> "$OUT/fb-tuned.txt"
cat "$OUT/fb-tuned.txt"
step_undo
""")
    f = read_facts(share / "out/facts-tuned.txt")
    expect(f["gpu"].endswith("vfio-pci") and f["audio"].endswith("vfio-pci"),
           f"the VM's card on vfio-pci ({f['gpu']}, {f['audio']})")
    expect(f["hostgpu"].endswith("bochs-drm"), f"the host's twin on bochs-drm ({f['hostgpu']})")
    host = f["hostgpu"].split()[0]
    fbs = (share / "out/fb-tuned.txt").read_text(errors="replace")
    expect(host in fbs and gpu not in fbs, f"the console's framebuffer is on the host's twin ({fbs.strip()})")
    st = status_of(share, "tuned")
    expect(st and st["standing"] == "took_effect", f"tune status: took effect ({st and st['standing']})")
    boot(guest, "after the undo: verify", "step_restored")
    check_restored(share)
    settle()
