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
* single-gpu (the "one-gpu" machine: no virtio-vga, the VGA+audio slot is
  the boot GPU with the console and a display manager's stand-in on it):
  the plan binds nothing at boot and the host has its screen after the
  reboot; the VM starts on the card (display manager stopped, consoles
  unbound, both functions on vfio-pci), stops, fails to start without its
  disk and with a stray program holding the card; each time the card, the
  consoles and the display manager come back; undo removes the hook.
* shared-gpu (the "desktop" machine): the second card shared — it stays
  on bochs-drm at boot, a unit of the host's holds its DRM node; ten VM
  starts and stops in a row lend it to vfio-pci and give it back healthy
  (the unit stopped and started again); a holder that may not be stopped
  fails the start by name with the card left on the host; undo removes it.
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


def journey(guest, apply_with):
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
    once = guest.host.boot_once
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


def screen_of(share, phase):
    """A phase's screen state (steps/lib.sh screen_state) as a dict; the
    virtual consoles as {vtconN: (bind, name)}."""
    out, vt = {}, {}
    p = share / f"out/screen-{phase}.txt"
    if not p.exists():
        return None
    for line in p.read_text(errors="replace").splitlines():
        k, _, v = line.partition(" ")
        if k.startswith("vtcon"):
            bind, _, name = v.partition(" ")
            vt[k] = (bind, name)
        else:
            out[k] = v
    out["vt"] = vt
    return out


def fb_consoles(s):
    """The consoles bound to a framebuffer (fbcon's 'frame buffer device')."""
    return sorted(k for k, (b, n) in s["vt"].items() if b == "1" and "frame buffer" in n)


def single_gpu(guest):
    """The host's only GPU (the boot GPU, the console and a display manager
    on it): tuned for single GPU and rebooted, the host still has its screen;
    the card goes to the VM at its start and comes back at its stop, and
    after starts that fail (a missing disk, a program holding the card)."""
    share = guest.share
    boot(guest, "single GPU: install, a display manager, plan, apply", """
step_install
step_fake_dm
screen installed
step_single_gpu_apply
""")
    plan = json.loads((share / "out/plan.json").read_text())
    ids = [c["id"] for c in plan.get("changes", [])]
    text = json.dumps(plan)
    say(f"  planned: {ids}")
    expect("single-gpu-hook" in ids, "the plan installs the single-GPU hook")
    expect("vfio_pci.ids" not in text and "vfio-pci.ids" not in text and "softdep" not in text,
           "nothing binds the only GPU at boot (no vfio-pci.ids, no softdep)")
    boot(guest, "single GPU: after the reboot, the VM's starts and stops, undo", """
step_single_gpu_vm
""")
    before = screen_of(share, "before")
    expect(before is not None and before["boot_vga"] == "1", "the VM's GPU is the boot GPU")
    on_fb = fb_consoles(before) if before else []
    expect(before and before["gpu"] == "bochs-drm" and before["dm"] == "active" and on_fb,
           f"before: the card on bochs-drm, the display manager up, a console on its framebuffer ({before})")
    run = screen_of(share, "running")
    state = (share / "out/domstate-running.txt").read_text().strip() if (share / "out/domstate-running.txt").exists() else "?"
    expect(state == "running", f"the VM runs on the only GPU ({state})")
    expect(run and run["gpu"] == "vfio-pci" and run["audio"] == "vfio-pci",
           f"running: both functions on vfio-pci ({run and (run['gpu'], run['audio'])})")
    expect(run and run["dm"] != "active" and not fb_consoles(run) and not run["holders"].strip(),
           f"running: display manager stopped, no console on a framebuffer, nobody holds /dev/dri ({run})")
    for phase in ("stopped", "missing-disk", "stray-holder"):
        s = screen_of(share, phase)
        back = (s is not None and s["gpu"] == "bochs-drm" and s["audio"] == before["audio"]
                and s["dm"] == "active" and fb_consoles(s) == on_fb)
        expect(back, f"{phase}: the screen is back (card on bochs-drm, consoles {on_fb} bound, display manager up) ({s})")
    log = (share / "out/single-gpu.log").read_text(errors="replace") if (share / "out/single-gpu.log").exists() else ""
    expect("e2e-cuda" in log and "still holding the GPU" in log,
           "the stray holder is named in the hook's log")
    took = (share / "out/stray-seconds.txt").read_text() if (share / "out/stray-seconds.txt").exists() else "?"
    say(f"  {took.strip()}")
    expect(log.count("the host has its screen back") >= 3,
           f"the hook gave the screen back each time ({log.count('the host has its screen back')})")
    settle()


def cycle_states(share):
    """steps/lib.sh's cycles.txt: [(label, {gpu, audio, host, holder, holds})]."""
    p = share / "out/cycles.txt"
    out = []
    if not p.exists():
        return out
    for line in p.read_text(errors="replace").splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        label = " ".join(f for f in line.split() if "=" not in f)
        out.append((label, fields))
    return out


def shared_gpu(guest):
    """The second GPU shared (the "desktop" machine: virtio-vga the host's
    screen, the VGA+audio slot the card lent): tuned and rebooted, the card
    stays on bochs-drm; a unit holding its DRM node is stopped at each start
    and started again at each stop; ten starts and stops in a row, the card
    on vfio-pci while the VM runs and back on bochs-drm and snd_hda_intel
    after, healthy each time, the host's own card untouched; a holder that
    may not be stopped fails the start by name and the card stays; undo
    removes the mode."""
    share = guest.share
    boot(guest, "shared GPU: install, plan, apply", """
step_install
step_shared_apply
""")
    plan = json.loads((share / "out/plan.json").read_text())
    ids = [c["id"] for c in plan.get("changes", [])]
    text = json.dumps(plan)
    say(f"  planned: {ids}")
    expect("shared-gpu-hook" in ids and "shared-gpu-desktop" in ids,
           "the plan has the hook and the desktop's side")
    expect("vfio-boot" not in ids and "vfio_pci.ids" not in text and "softdep" not in text,
           "nothing binds the card at boot")
    dri = (share / "out/dri-applied.txt").read_text(errors="replace") if (share / "out/dri-applied.txt").exists() else ""
    expect("vfio-assistant-desktop-card" in dri, "udev named the desktop's card at once")
    boot(guest, "shared GPU: after the reboot, ten starts and stops, a refused holder, undo", """
step_shared_vm
""")
    states = cycle_states(share)
    before = states[0][1] if states else {}
    expect(before.get("gpu") == "bochs-drm" and before.get("audio") == "snd_hda_intel"
           and before.get("holder") == "active" and before.get("holds"),
           f"after the reboot the card is the host's, held by e2e-holder ({before})")
    host = before.get("host")
    running = [s for l, s in states if "running" in l]
    stopped = [s for l, s in states if "stopped" in l]
    expect(len(running) == 10 and all("running" in l for l, _ in states if "running" in l),
           f"ten starts ({len(running)})")
    expect(all(s.get("gpu") == "vfio-pci" and s.get("audio") == "vfio-pci" and s.get("holder") != "active"
               and not s.get("holds") for s in running),
           "while the VM runs: both functions on vfio-pci, the holder's unit stopped, nobody holds the card")
    expect(len(stopped) == 10 and all(s.get("gpu") == "bochs-drm" and s.get("audio") == "snd_hda_intel"
                                      and s.get("holder") == "active" and s.get("holds") for s in stopped),
           "after each stop: back on bochs-drm and snd_hda_intel, the holder started again and holding it")
    expect(all(s.get("host") == host for _, s in states), f"the host's own card stayed on {host}")
    took = (share / "out/cycles-seconds.txt").read_text().strip() if (share / "out/cycles-seconds.txt").exists() else "?"
    say(f"  {took}")
    log = (share / "out/shared-gpu.log").read_text(errors="replace") if (share / "out/shared-gpu.log").exists() else ""
    healthy = len(re.findall(r"healthy: \S+\.0 on bochs-drm \(D0", log))
    expect(healthy >= 10 and "NOT HEALTHY" not in log, f"the card came back healthy each time ({healthy})")
    stray = (share / "out/stray.txt").read_text(errors="replace") if (share / "out/stray.txt").exists() else ""
    expect(stray.startswith("refused") and "gpu=bochs-drm" in stray,
           f"a holder that may not be stopped: the start refused, the card stays ({stray.strip()})")
    expect("e2e-cuda" in log and "still holding the GPU" in log, "the holder is named in the hook's log")
    settle()


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
