"""The journey through the app's window on the desktop host (issue 42):
the desktop's user, logged in by lightdm, opens VFIO Assistant from its
.desktop entry and clicks; polkit's agent (mate-polkit) asks for the
password. The driver (desktop/drive.py) finds every control over AT-SPI by
role and name; the harness photographs the screen at each step (QMP
screendump) and checks, besides the window's words, what root sees.

* window-journey: Overview's next step, Tuning, Apply, the password; after
  the reboot "took effect" and Keep (the password again), New VM, Create,
  Start, Stop; after the next, Undo twice; the host as before.
* window-cancel: the dialog cancelled: said, nothing changed.
* window-wrong-password: three wrong passwords: said, nothing changed.
* window-killed: the app killed mid-apply and opened again: what it says
  then, and its Undo puts the host back.
"""

import json
import os
from pathlib import Path

import hosts
from journey import CaseFailed, check_restored, expect, missed, read_facts, settle, write_step
from log import phase, say

DESKTOP = Path(__file__).resolve().parent / "desktop"
BOOT_TIMEOUT_S = 4000


def shots(guest):
    """A watch answering the driver's screenshot requests (want-TAG in
    out/window/shots) with QMP's screendump of the screen, as TAG.png."""
    def watch(guest):
        d = guest.out / "window/shots"
        for w in sorted(d.glob("want-*")):
            tag = w.name[len("want-"):]
            tmp = d / f".{tag}.png"
            reply = guest.qmp("screendump", filename=str(tmp), format="png")
            if "error" not in reply and tmp.exists():
                os.replace(tmp, d / f"{tag}.png")
            w.unlink(missing_ok=True)
        return False
    return watch


def boot(guest, name, body):
    """One boot of the desktop: its step as root, the window's phase in it."""
    share = guest.share
    for p in (share / "desktop", share / "out/window", share / "out/window/shots"):
        p.mkdir(parents=True, exist_ok=True)
    for p in (share / "out/window", share / "out/window/shots"):
        os.chmod(p, 0o777)
    for f in DESKTOP.glob("*.py"):
        (share / "desktop" / f.name).write_text(f.read_text())
    write_step(share, f"DESKTOP_USER={hosts.DESKTOP_USER}\nDESKTOP_PASSWORD={hosts.DESKTOP_PASSWORD}\n{body}")
    with phase(f"{guest.host.name}: {name}"):
        rc = guest.boot_step(BOOT_TIMEOUT_S, watch=shots(guest))
    for line in guest.step_log().splitlines()[-80:]:
        say(f"  . {line}")
    if rc != 0:
        missed().clear()
        raise CaseFailed(f"boot '{name}': its step exited {rc}")


def window(share, ph):
    """The phase's steps as the driver recorded them; each said with its
    time (the note's table)."""
    p = share / f"out/window/{ph}.json"
    steps = json.loads(p.read_text())["steps"] if p.exists() else []
    for s in steps:
        say(f"  {'ok ' if s['ok'] else 'NO '} {s['seconds']:7.1f} s  {s['step']}: {str(s.get('said', ''))[:240]}")
        for line in s.get("progress", []):
            say(f"            | {line}")
    return steps


def said(steps, name):
    return next((str(s.get("said", "")) for s in steps if s["step"] == name), "")


def walked(steps, ph):
    expect(steps and all(s["ok"] for s in steps),
           f"the window's {ph}: every step done ({[s['step'] for s in steps if not s['ok']] or len(steps)})")


def status(share, name):
    try:
        return json.loads((share / f"out/status-{name}.json").read_text())
    except (OSError, ValueError):
        return []


def unchanged(share, what):
    """Nothing of the host changed: every file under /etc and /boot as
    before, no transaction in the journal."""
    from journey import hash_diff
    changed, gone, new = hash_diff(share, "before", "after")
    expect(not changed and not gone and not new,
           f"{what}: every file under /etc and /boot as before (changed {changed}, gone {gone}, new {new})")
    rows = status(share, "after")
    expect(not rows, f"{what}: tune status lists no transaction ({[r.get('standing') for r in rows]})")


def journey(guest):
    share = guest.share
    boot(guest, "install; the window: next step, Tuning, Apply, the password", """
step_install
step_before
step_window apply
step_status applied
""")
    steps = window(share, "apply")
    walked(steps, "apply")
    expect(said(steps, "the progress, to its end").startswith("Applied ("), "the Tuning page says Applied (…)")
    rows = status(share, "applied")
    expect(rows and rows[-1]["standing"] in ("applied", "waiting_for_reboot"),
           f"tune status: the window's apply is in the journal ({[r['standing'] for r in rows]})")
    if missed():
        settle()
    boot(guest, "tuned; the window: took effect, Keep, New VM, Start, Stop", """
facts | tee "$OUT/facts-tuned.txt"
step_status tuned
# QEMU's TCG here aborts when it runs a KVM guest (qemu.py): the VM the
# window starts is emulated, as the CLI journey's is.
modprobe -r kvm_amd kvm_intel 2>/dev/null; modprobe -r kvm 2>/dev/null
step_window tuned
step_status kept-applied
""")
    f = read_facts(share / "out/facts-tuned.txt")
    expect(f["gpu"].endswith("vfio-pci"), f"the GPU is on vfio-pci after the reboot ({f['gpu']})")
    rows = status(share, "tuned")
    expect(rows and rows[-1]["standing"] == "took_effect", f"tune status: took effect ({[r['standing'] for r in rows]})")
    walked(window(share, "tuned"), "tuned session")
    boot(guest, "kept; the window: Undo twice", """
facts | tee "$OUT/facts-kept.txt"
step_status kept
step_window undo
step_forget_vms
step_status undone
""")
    f = read_facts(share / "out/facts-kept.txt")
    expect(f["gpu"].endswith("vfio-pci"), f"the default entry boots tuned after Keep ({f['gpu']})")
    walked(window(share, "undo"), "undo")
    rows = status(share, "undone")
    expect(rows and all(r["standing"] == "undone" for r in rows), f"tune status: undone ({[r['standing'] for r in rows]})")
    boot(guest, "undone: verify", "step_restored")
    check_restored(share)
    settle()


def refused(guest, ph, words):
    """The prompt not answered with the password (cancelled, or wrong three
    times): the window says so, and nothing changed."""
    share = guest.share
    boot(guest, f"install; the window: Apply, the prompt {ph}", f"""
step_install
step_before
step_window {ph}
facts > "$OUT/facts-after.txt"
hash_state > "$OUT/hash-after.txt"
step_status after
""")
    steps = window(share, ph)
    walked(steps, ph)
    end = said(steps, "what the window says")
    expect(any(w in end for w in words), f"the window says {words}: {end[:300]!r}")
    expect("Nothing was changed" in end, "and that nothing was changed")
    unchanged(share, ph)
    settle()


def killed(guest):
    share = guest.share
    boot(guest, "install; the window: Apply, the app killed mid-apply, reopened, Undo", """
step_install
step_before
step_window killed
step_status after-undo
hash_state > "$OUT/hash-after.txt"
""")
    steps = window(share, "killed")
    walked(steps, "killed")
    say(f"  reopened: {said(steps, 'what the reopened window says')[:400]}")
    rows = status(share, "after-undo")
    expect(rows and rows[-1]["standing"] == "undone", f"tune status: undone ({[r['standing'] for r in rows]})")
    from journey import hash_diff
    changed, gone, new = hash_diff(share, "before", "after")
    expect(not changed and not gone and not new,
           f"every file under /etc and /boot as before (changed {changed}, gone {gone}, new {new})")
    settle()


def run(guest, case):
    if case == "window-journey":
        journey(guest)
    elif case == "window-cancel":
        refused(guest, "cancel", ("Cancelled",))
    elif case == "window-wrong-password":
        refused(guest, "wrong-password", ("Not authorised", "Cancelled"))
    elif case == "window-killed":
        killed(guest)
