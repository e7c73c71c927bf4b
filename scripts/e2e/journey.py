"""The cases run on each host, boot by boot, and what the harness checks from
outside after each (the guest's own checks are in steps/lib.sh).

* journey: install the .deb, scan and check, apply (the helper through
  pkexec on the GRUB host, `tune apply` on the systemd-boot one), reboot;
  the tuning took (command line, drivers, hugepages, status, check, nothing
  more to plan); the VM defined with Looking Glass and tuned twice, started
  with both functions (SPICE answers its link handshake at the address the
  client is told, QEMU has one ivshmem device), stopped; undo, reboot; the
  host as before, every file under /etc and /boot hashed.
* cut-bootcfg, cut-initramfs, cut-after-apply: the power cut (QEMU killed)
  during the boot configuration's regeneration, during the initramfs
  rebuild, and after the apply before the reboot. After each: the host
  boots into either the old or the new boot setup (never a mix), `tune
  status` names the state, `tune undo --last` gives the old host back.
* single-gpu, shared-gpu: in gpu_cases.py.
"""

import json
import re
import threading
import time
from pathlib import Path

from log import phase, say

STEPS = Path(__file__).resolve().parent / "steps"

BOOT_TIMEOUT_S = 1800


class CaseFailed(Exception):
    pass


# What failed in the running case: a check that fails is said and the case
# goes on (the next boots still tell something); the case fails at its end.
# One list per thread: `run.py --jobs 2` runs two cases at once.
_CASE = threading.local()


def missed():
    if not hasattr(_CASE, "missed"):
        _CASE.missed = []
    return _CASE.missed


def expect(ok, what):
    if not ok:
        missed().append(what)
        say(f"  FAILED: {what}")
    else:
        say(f"  ok: {what}")


def settle():
    """End of a case: raise what failed on the way."""
    if missed():
        said = list(missed())
        missed().clear()
        raise CaseFailed("; ".join(said))


def write_step(share, body):
    (share / "lib.sh").write_text((STEPS / "lib.sh").read_text())
    (share / "step.sh").write_text(". /mnt/ctl/lib.sh\nset -u\n" + body + "\n")


def read_facts(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def tokens_planned(share):
    """The kernel parameters the plan adds (its cmdline change's checks)."""
    plan = json.loads((share / "out/plan.json").read_text())
    toks = []
    for c in plan.get("changes", []):
        for v in c.get("verify", []):
            if v.get("kind") in ("boot_entries_have", "cmdline_has", "menu_entry_has"):
                toks += [t for t in v.get("tokens", []) if t not in toks]
    return toks


def cmdline_words(line):
    return line.split()


def count_tokens(cmdline, toks):
    words = cmdline_words(cmdline)
    norm = [w.replace("-", "_") for w in words]
    return {t: norm.count(t.replace("-", "_")) for t in toks}


def status_of(share, name):
    rows = json.loads((share / f"out/status-{name}.json").read_text())
    return rows[-1] if rows else None


def hash_diff(share, a, b):
    def load(n):
        d = {}
        for line in (share / f"out/hash-{n}.txt").read_text().splitlines():
            h, _, f = line.rpartition(" ")
            d[f] = h
        return d
    x, y = load(a), load(b)
    changed = sorted(f for f in x.keys() & y.keys() if x[f] != y[f])
    gone = sorted(x.keys() - y.keys())
    new = sorted(y.keys() - x.keys())
    return changed, gone, new


def boot(guest, name, body, watch=None, want_rc=0):
    write_step(guest.share, body)
    with phase(f"{guest.host.name}: {name}"):
        rc = guest.boot_step(BOOT_TIMEOUT_S, watch=watch)
    log = guest.step_log()
    for line in log.splitlines()[-60:]:
        say(f"  . {line}")
    cut_case = watch is not None and getattr(watch, "cuts", False)
    if not cut_case and rc != want_rc:
        missed().clear()
        raise CaseFailed(f"boot '{name}': its step exited {rc}")
    return rc


def check_tuned(share, host):
    toks = tokens_planned(share)
    f = read_facts(share / "out/facts-tuned.txt")
    say(f"  cmdline after apply: {f['cmdline']}")
    counts = count_tokens(f["cmdline"], toks)
    expect(toks and all(n == 1 for n in counts.values()),
           f"/proc/cmdline holds each of {len(toks)} new tokens once ({counts})")
    expect(f["gpu"].endswith("vfio-pci"), f"the GPU is on vfio-pci ({f['gpu']})")
    expect(f["audio"].endswith("vfio-pci"), f"its audio function is on vfio-pci ({f['audio']})")
    expect(not f["hostgpu"].endswith("vfio-pci"), f"the host's display is not ({f['hostgpu']})")
    expect(int(f["hugepages"]) >= 256, f"256 hugepages of 2 MiB reserved ({f['hugepages']})")
    gpu = f["gpu"].split()[0]
    dmesg = (share / "out/dmesg-tuned.txt").read_text(errors="replace")
    touched = [l for l in dmesg.splitlines() if gpu in l and "bochs" in l.lower()]
    expect(not touched, f"the GPU never met its host driver (bochs-drm) in this boot {touched[:2]}")
    st = status_of(share, "tuned")
    expect(st and st["standing"] == "took_effect" and not st["drifted"],
           f"tune status: took effect, nothing drifted ({st and st['standing']}, {st and st['drifted']})")
    check = json.loads((share / "out/check-tuned.json").read_text())
    by = {}
    for x in check["findings"]:
        by.setdefault(x["id"], []).append(x)
    audio = f["audio"].split()[0]
    for fid in ("iommu.passthrough_mode", "device.bound", "cpu.isolation"):
        # device.bound of the VM's functions (the host's own display is
        # rightly on its driver).
        sts = [x["status"] for x in by.get(fid, []) if x.get("device") in (None, gpu, audio)]
        expect(sts and all(s == "pass" for s in sts), f"check: {fid} passes ({sts})")
    replan = json.loads((share / "out/replan-tuned.json").read_text())
    # A driver may put an interrupt of its own back on the VM's CPU at boot
    # (a runtime value, not kept across reboots): the check above says so
    # and the Tuning page moves it again; everything else is done.
    left = [c["id"] for c in replan.get("changes", []) if c["id"] != "irq-affinity"]
    if host.boot_once:
        # The boot loader (GRUB, systemd-boot) booted our entry once: the
        # next reboot would go back to the old default, and the same request
        # now plans the keep.
        expect(st and st.get("next_boot") == "old" and st.get("keep") and st.get("tried_once"),
               f"tune status: booted once, not kept yet; the next boot is the old one "
               f"({st and st.get('next_boot')}, {st and st.get('tried_once')})")
        keep = [c for c in replan.get("changes", []) if c["id"] == "cmdline"]
        expect(keep and "keep" in keep[0]["title"], f"the same request plans the keep ({[c['title'] for c in keep]})")
        left = [c for c in left if c != "cmdline"]
    moved = [v["path"] for c in replan.get("changes", []) if c["id"] == "irq-affinity" for v in c["values"]]
    if moved:
        say(f"  note: interrupts back on the VM's CPU after the reboot: {moved}")
    expect(not left, f"the same request plans nothing more after the reboot ({left})")


def check_kept(share):
    """The boot after `tune keep`: the default entry starts the tuned setup;
    undoing the first transaction from under the keep was refused; both
    undone, newest first (the boot after checks the host is as before)."""
    f = read_facts(share / "out/facts-kept.txt")
    toks = tokens_planned(share)
    counts = count_tokens(f["cmdline"], toks)
    expect(toks and all(n == 1 for n in counts.values()),
           f"the default entry booted the tuned setup: each token once ({counts})")
    expect(f["gpu"].endswith("vfio-pci"), f"the GPU is on vfio-pci ({f['gpu']})")
    rows = json.loads((share / "out/status-kept.json").read_text())
    words = [(r["standing"], r.get("tried_once")) for r in rows]
    expect(len(rows) == 2 and all(w == ("took_effect", None) for w in words),
           f"tune status: both took effect, nothing tried once any more ({words})")
    replan = json.loads((share / "out/replan-kept.json").read_text())
    left = [c["id"] for c in replan.get("changes", []) if c["id"] != "irq-affinity"]
    expect(not left, f"the same request plans nothing more ({left})")
    rc = (share / "out/undo-first.rc").read_text().strip()
    said = (share / "out/undo-first.jsonl").read_text(errors="replace")
    expect(rc == "2" and "first" in said,
           f"undoing the first transaction from under the keep is refused (exit {rc}: {said.strip()[:200]})")


def press_keys():
    """A watch that types on the guest's USB keyboard and moves its mouse
    (QMP input-send-event) while the picker in the guest watches."""
    sent = {}

    def watch(guest):
        if sent or not (guest.share / "out/watching").exists():
            return False
        time.sleep(3)
        events = []
        for key in ("v", "f", "i", "o"):
            for down in (True, False):
                events.append({"type": "key", "data": {"down": down, "key": {"type": "qcode", "data": key}}})
        # `device` names the console's display device (virtio-vga, id
        # vga0), whose bound keyboard is the USB one (usb-kbd display=vga0):
        # the keys reach it, not the PS/2 keyboard on the LPC bridge.
        if "error" in guest.qmp("input-send-event", device="vga0", events=events):
            # Then to whichever keyboard has the focus.
            guest.qmp("input-send-event", events=events)
        for _ in range(3):
            guest.qmp("input-send-event",
                      events=[{"type": "rel", "data": {"axis": "x", "value": 40}},
                              {"type": "rel", "data": {"axis": "y", "value": -20}}])
        sent["at"] = time.monotonic()
        say("  typed 4 keys on the USB keyboard and moved the mouse (QMP)")
        return False
    return watch


def check_input(share):
    found = json.loads((share / "out/input-watch.json").read_text())
    kbd = [r for r in found if r["by_id"].endswith("-event-kbd") and r["keys"] > 0]
    mouse = [r for r in found if r["by_id"].endswith("-event-mouse") and r["moves"] > 0]
    expect(kbd, f"the picker saw the keys on {kbd[0]['by_id'] if kbd else 'no keyboard'}")
    expect(mouse, f"and the moves on {mouse[0]['by_id'] if mouse else 'no mouse'}")
    xml = (share / "out/domain-running.xml").read_text()
    expect("type='evdev'" in xml or 'type="evdev"' in xml,
           "the running domain reads them by evdev")
    expect("looking-glass" in xml, "and has Looking Glass's shared memory")


def check_vm(share):
    replan = json.loads((share / "out/replan-running.json").read_text())
    left = [c["id"] for c in replan.get("changes", [])]
    expect("hugepages" not in left, f"while the VM runs, no more hugepages are asked for ({left})")
    n = (share / "out/domain-hostdevs.txt").read_text().count("<hostdev")
    expect(n >= 2, f"the running domain holds both functions ({n} hostdevs)")
    told = (share / "out/lg-told.txt").read_text().strip()
    said = (share / "out/lg-handshake.txt").read_text().strip()
    say(f"  {told}; {said}")
    expect("spice:host=127.0.0.1" in told and said.endswith("answered: 'REDQ'"),
           "Looking Glass's client is told 127.0.0.1 and SPICE answers the link handshake there")
    args = (share / "out/qemu-cmdline.txt").read_text(errors="replace").splitlines()
    ivshmem = [a for a in args if "ivshmem" in a]
    expect(len(ivshmem) == 1, f"QEMU has one ivshmem device after the domain was tuned twice ({ivshmem})")


def check_secure_boot(share, on):
    """The check's word on Secure Boot is the firmware's: on (with the
    kernel's lockdown) on the Secure Boot host, off on the other UEFI ones."""
    found = [x for x in json.loads((share / "out/check.json").read_text())["findings"]
             if x["id"] == "boot.secure_boot"]
    facts = read_facts(share / "out/facts-before.txt")
    say(f"  firmware: {facts.get('secure_boot', '?')}; check: {[x['title'] for x in found]}")
    if facts.get("secure_boot", "none") == "none":
        return
    want = "Secure Boot is on" if on else "Secure Boot is off"
    expect(found and found[0]["title"] == want, f"check: {want} ({[x['title'] for x in found]})")
    if on:
        expect(facts.get("lockdown", "").find("[none]") < 0,
               f"the kernel is locked down under Secure Boot ({facts.get('lockdown')})")


def check_restored(share):
    a = read_facts(share / "out/facts-before.txt")
    b = read_facts(share / "out/facts-restored.txt")
    say(f"  cmdline after undo: {b['cmdline']}")
    for k in ("cmdline", "gpu", "audio", "hostgpu", "hugepages"):
        expect(a[k] == b[k], f"{k} as before ({b[k]})")
    changed, gone, new = hash_diff(share, "before", "restored")
    expect(not changed and not gone and not new,
           f"every file under /etc and /boot as before (changed {changed}, gone {gone}, new {new})")


def journey(guest, apply_with, keep=True):
    """The user's journey. On a host whose boot loader tries the new setup
    once, `keep` keeps it from the tried boot (and a boot from the default
    entry proves it); without it, the user undoes from the tried boot, as one
    who did not like what they tried does."""
    share = guest.share
    boot(guest, "install, check, apply", f"""
step_install
step_distro_times
step_before
step_scan_check
step_apply {apply_with}
""")
    apply_vs_distro(share)
    nxt = json.loads((share / "out/check.json").read_text())["next_step"]
    say(f"  next step: {nxt['sentence']} ({nxt['action']})")
    gpu = read_facts(share / "out/facts-before.txt")["gpu"].split()[0]
    expect(nxt["action"].get("device") in (gpu, None) and "Virtio" not in nxt["sentence"],
           "the next step names the VM's GPU, not the host's display")
    check_secure_boot(share, guest.host.secure_boot)
    once = guest.host.boot_once and keep
    boot(guest, f"tuned: verify, the input picker, the VM, {'keep' if once else 'undo'}", f"""
step_tuned
step_input
step_vm
{'step_keep' if once else 'step_undo'}
""", watch=press_keys())
    check_tuned(share, guest.host)
    check_input(share)
    check_vm(share)
    if once:
        boot(guest, "kept: verify, undo both", "step_kept")
        check_kept(share)
    boot(guest, "undone: verify", "step_restored")
    check_restored(share)
    st = status_of(share, "restored")
    expect(st and st["standing"] == "undone", f"tune status: undone ({st and st['standing']})")
    settle()


def apply_vs_distro(share):
    """The apply's time beside the distribution's own commands for the same
    boot files, in the same boot: said as a ratio."""
    try:
        apply_s = float((share / "out/apply-seconds.txt").read_text().split()[0])
        distro = (share / "out/distro-seconds.txt").read_text().strip()
        distro_s = float(distro.split()[0])
    except (OSError, ValueError, IndexError):
        say("  apply vs the distribution's commands: not measured")
        return
    what = distro.split(" ", 1)[1] if " " in distro else "?"
    ratio = apply_s / distro_s if distro_s > 0 else float("inf")
    say(f"  apply {apply_s:.1f} s vs the distribution's own commands {distro_s:.1f} s ({what}): {ratio:.2f}x")


def progress_events(share):
    p = share / "out/progress.jsonl"
    try:
        lines = p.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def expect_one_setup(f, toks, what):
    """A boot (its facts) is the old setup or the new one, never a mix:
    every planned token once and both functions on vfio-pci, or no token
    and neither. True for the new one."""
    counts = count_tokens(f["cmdline"], toks)
    new = all(n == 1 for n in counts.values())
    old = all(n == 0 for n in counts.values())
    expect(new or old, f"{what} is the old or the new setup, not a mix ({counts})")
    on_vfio = [f[k].endswith("vfio-pci") for k in ("gpu", "audio")]
    expect(all(on_vfio) == new and any(on_vfio) == new,
           f"the drivers match that setup ({f['gpu']}, {f['audio']})")
    return new


def cut_when(pattern, delay_s):
    """A watch that cuts the power `delay_s` after a step matching `pattern`
    started (None: when the apply's result is out)."""
    seen = {}

    def watch(guest):
        for e in progress_events(guest.share):
            if pattern is None and "result" in e:
                seen.setdefault("t", time.monotonic())
            elif pattern and e.get("event") == "started" and re.search(pattern, e.get("step", "")):
                if "t" not in seen:
                    seen["t"] = time.monotonic()
                    say(f"  cut armed: '{e['step']}' started; power off in {delay_s} s")
        return "t" in seen and time.monotonic() - seen["t"] >= delay_s
    watch.cuts = True
    return watch


CUTS = {
    "cut-bootcfg": (r"update-grub|grub-mkconfig|bootctl|kernel-install|loader/entries", 3),
    "cut-initramfs": (r"update-initramfs|dracut", 20),
    "cut-after-apply": (None, 0),
}


def cut(guest, apply_with, case):
    share = guest.share
    pattern, delay = CUTS[case]
    rc = boot(guest, f"apply, power cut ({case})", f"""
step_install
step_before
step_apply {apply_with}
""", watch=cut_when(pattern, delay))
    events = progress_events(share)
    last = [e.get("step") or e.get("what") or "result" for e in events[-3:]]
    say(f"  the apply got to: {last}")
    expect(rc is None, "the power was cut while the step ran")
    if rc is not None:
        settle()
    boot(guest, "after the cut: status, undo", """
facts | tee "$OUT/facts-cut.txt"
step_status cut
step_undo
""")
    f = read_facts(share / "out/facts-cut.txt")
    say(f"  cmdline after the cut: {f['cmdline']}")
    expect_one_setup(f, tokens_planned(share), "the boot after the cut")
    st = status_of(share, "cut")
    expect(st is not None, "tune status names the transaction after the cut")
    want = {"cut-after-apply": ("took_effect",)}.get(case, ("interrupted",))
    expect(st["standing"] in want, f"tune status says {want} ({st['standing']}: {st.get('failure')})")
    boot(guest, "after the undo: verify", "step_restored")
    check_restored(share)
    settle()
