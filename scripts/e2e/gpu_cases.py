"""The GPU cases on a booted host (run.py's single-gpu and shared-gpu).

* single-gpu (the "one-gpu" machine: no virtio-vga, the VGA+audio slot is
  the host's only GPU, its console and a display manager on it): tuned for
  single GPU, the card goes to the VM at its start and comes back at its
  stop, and after starts that fail; a holder outside the display manager
  (a stray program, one that mapped the card and closed its fd) refuses the
  start before the desktop is touched, a fake holder from a user namespace
  holds nothing, and a display manager that ignores TERM is given up on
  within the hook's bounds.
* shared-gpu (the "desktop" machine): the second card lent ten times, a
  holder that may not be stopped (or that mapped the card and closed its
  fd) refuses the start with the card kept, a fake holder from a user
  namespace holds nothing, a holder's unit that ignores TERM is given up on
  within the hook's bounds.

Their steps are steps/lib.sh's step_single_gpu_* and step_shared_*.
"""

import json
import re

from journey import boot, expect, settle
from log import say


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


def out_text(share, name):
    """One of the steps' out/ files, stripped ("" when it is not there)."""
    p = share / "out" / name
    return p.read_text(errors="replace").strip() if p.exists() else ""


def seconds_in(text):
    """The N of "refused in N s" (infinity when there is none)."""
    m = re.search(r"refused in ([0-9.]+) s", text)
    return float(m.group(1)) if m else float("inf")


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
    for phase in ("stopped", "missing-disk", "stray-holder", "mapped", "fake-holder", "term"):
        s = screen_of(share, phase)
        back = (s is not None and s["gpu"] == "bochs-drm" and s["audio"] == before["audio"]
                and s["dm"] == "active" and fb_consoles(s) == on_fb)
        expect(back, f"{phase}: the screen is back (card on bochs-drm, consoles {on_fb} bound, display manager up) ({s})")
    log = (share / "out/single-gpu.log").read_text(errors="replace") if (share / "out/single-gpu.log").exists() else ""
    expect("e2e-cuda" in log and "not ended by stopping the display manager" in log,
           "the stray holder is named in the hook's log, before the display manager was stopped")
    took = (share / "out/stray-seconds.txt").read_text() if (share / "out/stray-seconds.txt").exists() else "?"
    say(f"  {took.strip()}")
    # Issue 41: holders by the device, before the desktop is touched; every
    # wait bounded.
    mapped = out_text(share, "mapped.txt")
    say(f"  mapped and closed: {mapped}")
    expect(mapped.startswith("refused") and "dm=active" in mapped and "stops=0" in mapped
           and "e2e-mapper" in log,
           f"a holder that mapped the card and closed its fd: named, the start refused before the display manager was stopped ({mapped})")
    fake = out_text(share, "fake.txt")
    expect(fake.startswith("started"), f"a fake holder from a user namespace holds nothing: the VM started ({fake})")
    term = out_text(share, "term.txt")
    say(f"  a display manager ignoring TERM: {term}")
    expect(term.startswith("refused in") and seconds_in(term) < 2 * (20 + 2) + 15,
           f"a stop that ignores TERM: killed at its bound, the start refused within 2 x (20 + 2) s ({term})")
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
    # Issue 41: holders by the device; every wait bounded.
    mapped = out_text(share, "mapped.txt")
    expect(mapped.startswith("refused") and "gpu=bochs-drm" in mapped and "e2e-mapper" in log,
           f"a holder that mapped the card and closed its fd: named, the start refused, the card stays ({mapped})")
    fake = out_text(share, "fake.txt")
    expect(fake.startswith("started gpu=vfio-pci") and "after gpu=bochs-drm" in fake,
           f"a fake holder from a user namespace holds nothing: the card lent and given back ({fake})")
    term = out_text(share, "term.txt")
    say(f"  a holder's unit ignoring TERM: {term}")
    expect(term.startswith("refused in") and seconds_in(term) < 2 * (10 + 2) + 10 and "gpu=bochs-drm" in term,
           f"a stop that ignores TERM: killed at its bound, the start refused within 2 x (10 + 2) s, the card stays ({term})")
    settle()
