#!/usr/bin/env python3
"""The journey through VFIO Assistant's window, as the desktop's user in
its session (run by e2e-session, so the app it starts is the session's and
polkit asks this session's agent).

    drive.py PHASE OUT PASSWORD

PHASE: apply, tuned, undo (the journey's three sessions), cancel,
wrong-password, killed. Into OUT: PHASE.json (each step: its time, whether
it did what it should, the words the window said), a tree dump and a
screenshot per step (the harness takes it from outside: QMP's screendump of
the screen, asked for through shots/want-*). A step the app cannot do stops
the phase there, with what AT-SPI showed.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import a11y  # noqa: E402

DESKTOP_FILE = "/usr/share/applications/io.github.vfio_assistant.VfioAssistant.desktop"
CLICKABLE = {"push button", "toggle button", "check box", "radio button", "page tab", "link", "list item",
             "menu item", "button"}
# What the Tuning page says when an apply (or undo, or keep) has ended.
ENDED = (r"^Applied \(|^Undone: every file|^Nothing to do:|^Nothing applied:|^Refused, nothing changed|"
         r"^Cancelled|^Not authorised|^No polkit|^pkexec did not run|^The helper ended")
AGENT = r"polkit-mate|polkit.*agent"


class Stop(Exception):
    """The app (or the desktop) cannot do this step: the phase stops."""


def need(value, why):
    """The value, or the step stops saying why."""
    if not value:
        raise Stop(why)
    return value


class Run:
    def __init__(self, phase, out, password):
        self.phase, self.out, self.password = phase, Path(out), password
        self.steps, self.n = [], 0
        self.app_proc = None
        self.t0 = time.monotonic()

    # -- what the run keeps
    def say(self, text):
        print(f"[{time.monotonic() - self.t0:7.1f} s] {text}", flush=True)

    def shot(self, label):
        """A screenshot of the screen, taken by the harness (QMP
        screendump), and the app's tree beside it."""
        self.n += 1
        tag = f"{self.phase}-{self.n:02d}-{label}"
        shots = self.out / "shots"
        want = shots / f"want-{tag}"
        # The ask goes through the 9p share, which the harness empties as it
        # answers: under load a create there has failed with ENOENT (seen in
        # a clean-clone CI run). A picture is evidence, not a step: asked
        # again, and a phase never stops for want of one.
        try:
            a11y.write_share(want, "")
            asked = True
        except OSError as e:
            asked = e
        got = asked is True and a11y.wait_for(lambda: (shots / f"{tag}.png").exists(), 60, 0.5)
        if asked is not True:
            self.say(f"no screenshot for {tag} (could not ask for it: {asked})")
        elif not got:
            self.say(f"no screenshot for {tag} (nobody answered {want.name})")
        app = self.app()
        if app is not None:
            a11y.dump(app, self.out / f"{tag}.tree.txt")
        agent = a11y.app_named(AGENT)
        if agent is not None:
            a11y.dump(agent, self.out / f"{tag}.agent-tree.txt")
        return tag

    def step(self, name, fn):
        t = time.monotonic()
        self.say(f"step {name}")
        rec = {"step": name}
        try:
            rec["said"] = fn() or ""
            rec["ok"] = True
        except Stop as e:
            rec["ok"], rec["said"] = False, str(e)
        rec["seconds"] = round(time.monotonic() - t, 1)
        rec["shot"] = self.shot(re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))
        self.steps.append(rec)
        self.say(f"step {name}: {'ok' if rec['ok'] else 'STOPPED'} in {rec['seconds']} s: {str(rec['said'])[:300]}")
        self.save()
        if not rec["ok"]:
            raise Stop(rec["said"])
        return rec["said"]

    def save(self):
        a11y.write_share(self.out / f"{self.phase}.json",
                         json.dumps({"phase": self.phase, "steps": self.steps}, indent=1))

    # -- the app
    def open_app(self):
        """The .desktop entry's command, as the menu runs it."""
        exec_line = next(ln for ln in Path(DESKTOP_FILE).read_text().splitlines() if ln.startswith("Exec="))
        argv = [w for w in exec_line[5:].split() if not w.startswith("%")]
        log = open(self.out / f"{self.phase}-app-{int(time.monotonic())}.log", "w")
        self.app_proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        app = a11y.wait_for(lambda: a11y.app_by_pid(self.app_proc.pid), 300, 2)
        if app is None:
            raise Stop(f"{' '.join(argv)} (pid {self.app_proc.pid}) never appeared on AT-SPI in 300 s "
                       f"(exit {self.app_proc.poll()}); apps there: {[a11y.name(a) for a in a11y.apps()]}")
        # The first frame with its pages (the top bar's buttons).
        if not a11y.wait_for(lambda: self.clickable(r"^Tuning$"), 300, 2):
            raise Stop("the app's window has no 'Tuning' page button on AT-SPI after 300 s")
        return f"{' '.join(argv)} (pid {self.app_proc.pid}) on AT-SPI as {a11y.name(app)!r}"

    def app(self):
        if self.app_proc is None or self.app_proc.poll() is not None:
            return None
        return a11y.app_by_pid(self.app_proc.pid)

    def close_app(self):
        if self.app_proc and self.app_proc.poll() is None:
            self.app_proc.terminate()
            try:
                self.app_proc.wait(20)
            except subprocess.TimeoutExpired:
                self.app_proc.kill()

    def clickable(self, pattern, enabled=True):
        app = self.app()
        if app is None:
            return None
        for x in a11y.find_all(app, None, pattern):
            if a11y.role(x) in CLICKABLE and (not enabled or a11y.usable(x)):
                return x
        return None

    def click(self, pattern, timeout_s=120):
        x = a11y.wait_for(lambda: self.clickable(pattern), timeout_s, 2)
        if x is None:
            near = [f"{a11y.role(y)} {a11y.name(y)!r}" for y in a11y.find_all(self.app(), None, pattern)] if self.app() else []
            raise Stop(f"no enabled control named /{pattern}/ in {timeout_s} s (named so but not clickable: {near})")
        what = a11y.name(x)
        if a11y.press(x) is None:
            raise Stop(f"{a11y.role(x)} {what!r} has no action on AT-SPI")
        return what

    def words(self, pattern, timeout_s):
        """The first words on screen matching `pattern` (within timeout)."""
        def get():
            app = self.app()
            return next((t for t in a11y.texts(app) if re.search(pattern, t)), None) if app else None
        return a11y.wait_for(get, timeout_s, 3)

    def number(self, pattern, value):
        """A number typed into egui's DragValue: its spin button has no
        Value interface on AT-SPI (nothing to set or read), so it is
        clicked (egui makes it a text field, its number selected) and the
        number typed into the app's window, then Enter."""
        x = need(self.app() and a11y.find(self.app(), "spin button", pattern), f"no spin button /{pattern}/")
        subprocess.run(["xdotool", "search", "--pid", str(self.app_proc.pid), "--onlyvisible",
                        "windowactivate", "--sync"], check=False, capture_output=True)
        a11y.press(x)
        time.sleep(2)
        a11y.xkey("ctrl+a")
        a11y.xtype(str(value))
        a11y.xkey("Return")
        time.sleep(3)
        return f"{a11y.name(x)}: typed {value}"

    def count(self, pattern):
        app = self.app()
        return sum(1 for t in a11y.texts(app) if re.search(pattern, t)) if app else 0

    def page(self, title):
        self.click(rf"^{title}$")
        return title

    # -- the polkit agent's dialog
    def dialog(self, timeout_s):
        def get():
            agent = a11y.app_named(AGENT)
            if agent is None:
                return None
            for x in a11y.find_all(agent, "password text"):
                # Not sensitive while PAM waits after a wrong password.
                if {"showing", "sensitive"} <= a11y.states(x):
                    return agent, x
            return None
        return a11y.wait_for(get, timeout_s, 1)

    def answer(self, password, timeout_s=120):
        """The agent's password dialog, answered: the field focused over
        AT-SPI, the password typed by xdotool, Enter. The dialog's words."""
        got = self.dialog(timeout_s)
        if not got:
            raise Stop(f"no polkit agent dialog with a password field in {timeout_s} s "
                       f"(apps on AT-SPI: {[a11y.name(a) for a in a11y.apps()]})")
        agent, field = got
        said = [t for t in a11y.texts(agent) if t.strip()]
        self.shot("agent-dialog")
        a11y.focus(field)
        win = subprocess.run(["xdotool", "getactivewindow", "getwindowname"], capture_output=True, text=True).stdout.strip()
        if not re.search(r"Authenticat", win):
            subprocess.run(["xdotool", "search", "--name", "Authenticat", "windowactivate", "--sync"], check=False)
            a11y.focus(field)
        a11y.xtype(password)
        try:
            typed = field.queryText().characterCount
        except Exception:
            typed = -1
        a11y.xkey("Return")
        return f"dialog: {' | '.join(said)[:400]}; typed {typed} characters"

    def cancel_dialog(self):
        agent, _ = self.dialog(60) or (None, None)
        if agent is None:
            raise Stop("no agent dialog to cancel")
        b = a11y.find(agent, "push button", r"^_?Cancel$")
        if b is None:
            raise Stop(f"the agent's dialog has no Cancel button: {[a11y.name(x) for x in a11y.find_all(agent, 'push button')]}")
        a11y.press(b)
        return "pressed Cancel"

    def ended(self, timeout_s=1200):
        """The page's last word on a run, once it no longer says Applying…
        (closing the app before would interrupt the helper)."""
        def get():
            app = self.app()
            if app is None:
                return None
            ts = a11y.texts(app)
            if any(t.startswith("Applying") for t in ts):
                return None
            return next((t for t in ts if re.search(ENDED, t)), None)
        w = a11y.wait_for(get, timeout_s, 3)
        if not w:
            raise Stop(f"no end said on the Tuning page in {timeout_s} s")
        return w

    def progress_lines(self):
        app = self.app()
        return [t for t in a11y.texts(app) if re.match(r"^(ok |verified |to verify |NOT verified |FAILED |undone: )", t)] if app else []


# -- the phases ------------------------------------------------------------------

def open_and_tuning(r, via_next_step):
    r.step("open the app from its .desktop entry", r.open_app)
    if via_next_step:
        def next_step():
            sentence = r.words(r"[A-Za-z]", 5)
            app = r.app()
            strong = [t for t in a11y.texts(app) if "GPU" in t or "card" in t][:3]
            pressed = r.click(r"on the Tuning page$", 180)
            return f"{pressed!r} pressed; the Overview said: {strong or sentence}"
        r.step("Overview: the next step", next_step)
    else:
        r.step("the Tuning page", lambda: r.page("Tuning"))


def apply_with_password(r, label="Apply"):
    r.step("Tuning: Apply", lambda: r.click(r"^Apply \(asks for your password\)$", 600))
    r.step("the agent asks; the password typed", lambda: r.answer(r.password))
    said = r.step("the progress, to its end", lambda: r.ended())
    lines = r.progress_lines()
    r.steps[-1]["progress"] = lines
    r.save()
    if not said.startswith("Applied ("):
        raise Stop(f"{label} did not apply: {said}")


def ticked(r, pattern):
    """A check box the app ticked itself."""
    box = a11y.wait_for(lambda: (lambda b: b if b and "checked" in a11y.states(b) else None)(
        a11y.find(r.app(), "check box", pattern)), 60, 2)
    return need(box and a11y.name(box), f"the check box /{pattern}/ is not ticked")


def phase_apply(r):
    open_and_tuning(r, via_next_step=True)
    # The next step ticks the binding with what it needs: the kernel's
    # parameters (the IDs vfio-pci claims are there; GRUB boots them once
    # from an entry of ours, kept after the reboot). Seen ticked, not
    # ticked by the driver.
    r.step("Tuning: the kernel parameters ticked with the binding", lambda: ticked(r, r"^Kernel parameters: "))
    apply_with_password(r)


def phase_tuned(r):
    open_and_tuning(r, via_next_step=False)
    r.step("took effect", lambda: need(r.words(r"^took effect$", 300), "no 'took effect' on the Tuning page"))
    r.step("Keep it as the default", lambda: r.click(r"^Keep it as the default$", 60))
    r.step("the agent asks; the password typed (keep)", lambda: r.answer(r.password))
    said = r.step("the keep, to its end", lambda: r.ended())
    if not said.startswith("Applied ("):
        raise Stop(f"the keep did not apply: {said}")
    new_vm(r)


def new_vm(r):
    # A host of 2 CPUs and 3 GiB: 1 vCPU, 1 GiB, a disk of 1 GiB (the
    # wizard's own 2 vCPUs and 128 GiB do not fit, and says so).
    r.step("New VM page", lambda: r.page("New VM"))
    r.step("New VM: Next", lambda: r.click(r"^Next$", 60))
    r.step("CPU: 1 vCPU", lambda: r.number(r"^vCPUs$", 1))
    r.step("New VM: Next", lambda: r.click(r"^Next$", 60))
    r.step("Memory: 1 GiB", lambda: r.number(r"^Guest memory$", 1))
    r.step("New VM: Next", lambda: r.click(r"^Next$", 60))
    r.step("Storage: 1 GiB", lambda: r.number(r"^Size$", 1))
    r.step("Storage: Create the image", lambda: r.click(r"^Create the image$", 120))
    def created():
        # Made: the page turns to "Use an image or block device I have"
        # with the new image's path (it says no "Created …" then).
        def made():
            app = r.app()
            use = app and a11y.find(app, "radio button", r"^Use an image or block device I have$")
            if use is not None and "checked" in a11y.states(use):
                return "the page now uses the image made (the radio turned to 'Use an image or block device I have')"
            return r.words(r"^Created |could not|Could not|cannot|Cannot|failed", 1)
        said = need(a11y.wait_for(made, 300, 3), "nothing said after Create the image")
        return need(not re.search(r"could not|Could not|cannot|Cannot|failed", said) and said,
                    f"the image was not created: {said}")
    r.step("Storage: created", created)
    for _ in range(4):  # Network, Use it, Features, Review
        r.step("New VM: Next", lambda: r.click(r"^Next$", 60))
    r.step("Review: Define in libvirt", lambda: r.click(r"^Define in libvirt$", 120))
    r.step("Start", lambda: r.click(r"^Start$", 300))
    r.step("running", lambda: need(r.words(r"^running$", 300), "the VM's badge never said 'running'"))
    r.step("Stop (Force off)", lambda: r.click(r"^Force off$", 60))
    r.step("shut off", lambda: need(r.words(r"^shut ?off$", 300), "the VM's badge never said 'shut off'"))


def phase_undo(r):
    """Every transaction undone, newest first (the keep, then the apply);
    the second may not ask again (polkit's auth_admin_keep: five minutes
    for this app)."""
    open_and_tuning(r, via_next_step=False)
    undos = len(a11y.wait_for(lambda: a11y.find_all(r.app(), "push button", r"^Undo$"), 120, 3) or [])
    r.say(f"{undos} transaction(s) to undo")
    for n in range(1, undos + 1):
        before = r.count(r"^undone$")
        r.step(f"Undo ({n})", lambda: r.click(r"^Undo$", 300))
        asked = a11y.wait_for(lambda: r.dialog(0) or r.count(r"^undone$") > before or None, 120, 2)
        if isinstance(asked, tuple):
            r.step(f"the agent asks; the password typed (undo {n})", lambda: r.answer(r.password))
        said = r.step(f"undo {n}, to its end", lambda: need(a11y.wait_for(
            lambda: r.count(r"^undone$") > before and r.words(r"^Undone: every file", 1), 1200, 5),
            f"no {n} 'undone' in the journal"))
        r.say(f"undo {n}: {said}")


def phase_cancel(r):
    open_and_tuning(r, via_next_step=True)
    r.step("Tuning: Apply", lambda: r.click(r"^Apply \(asks for your password\)$", 600))
    r.step("the agent asks; Cancel", r.cancel_dialog)
    r.step("what the window says", lambda: r.ended(300))


def phase_wrong_password(r):
    open_and_tuning(r, via_next_step=True)
    r.step("Tuning: Apply", lambda: r.click(r"^Apply \(asks for your password\)$", 600))
    for n in (1, 2, 3):
        r.step(f"wrong password {n}", lambda: r.answer(r.password + "-wrong", 60))
        time.sleep(6)  # PAM's delay after a failure
    def after():
        got = r.dialog(5)
        if got:
            said = [t for t in a11y.texts(got[0]) if t.strip()]
            r.cancel_dialog()
            return f"the dialog still asks after three: {' | '.join(said)[:300]}; cancelled"
        return "the dialog is gone after three"
    r.step("after three wrong passwords", after)
    r.step("what the window says", lambda: r.ended(300))


def phase_killed(r):
    open_and_tuning(r, via_next_step=True)
    r.step("Tuning: Apply", lambda: r.click(r"^Apply \(asks for your password\)$", 600))
    r.step("the agent asks; the password typed", lambda: r.answer(r.password))

    def kill():
        line = a11y.wait_for(lambda: r.progress_lines(), 600, 1)
        if not line:
            raise Stop("no progress line to kill the app after")
        os.kill(r.app_proc.pid, signal.SIGKILL)
        r.app_proc.wait()
        return f"killed (SIGKILL) after: {line[-1]}"
    r.step("the app killed mid-apply", kill)
    time.sleep(20)
    r.step("reopened", r.open_app)
    r.step("the Tuning page", lambda: r.page("Tuning"))
    said = r"A tuning|interrupted|still running|Now in|Stopped in|Changes done|waiting for a reboot|took effect|Restore"
    r.step("what the reopened window says", lambda: need(" | ".join(
        t for t in a11y.texts(r.app()) if re.search(said, t))[:600], "nothing said of the apply"))
    # The helper goes on after the app is gone: nothing is undone before
    # it ends (the page holds its buttons meanwhile).
    r.step("the apply's end, seen from the reopened window", lambda: need(a11y.wait_for(
        lambda: not r.words(r"still running", 1) and " | ".join(
            t for t in a11y.texts(r.app()) if re.search(said, t))[:600], 1200, 5), "still running after 1200 s"))
    before = r.count(r"^undone$")
    r.step("Undo (or Restore the host)", lambda: r.click(r"^(Restore the host|Undo)$", 120))
    asked = a11y.wait_for(lambda: r.dialog(0) or r.count(r"^undone$") > before or None, 120, 2)
    if isinstance(asked, tuple):
        r.step("the agent asks; the password typed (undo)", lambda: r.answer(r.password))
    r.step("undo, to its end", lambda: need(a11y.wait_for(
        lambda: r.count(r"^undone$") > before and r.words(ENDED, 1), 1200, 5), "no 'undone' in the journal"))


PHASES = {"apply": phase_apply, "tuned": phase_tuned, "undo": phase_undo, "cancel": phase_cancel,
          "wrong-password": phase_wrong_password, "killed": phase_killed}


def main():
    phase, out, password = sys.argv[1], sys.argv[2], sys.argv[3]
    r = Run(phase, out, password)
    r.say(f"AT-SPI on for this session: {a11y.turn_on()}")
    r.say(f"DISPLAY={os.environ.get('DISPLAY')} DBUS_SESSION_BUS_ADDRESS={os.environ.get('DBUS_SESSION_BUS_ADDRESS')} "
          f"XDG_SESSION_ID={os.environ.get('XDG_SESSION_ID')}")
    rc = 0
    try:
        PHASES[phase](r)
    except Stop as e:
        r.say(f"STOPPED: {e}")
        rc = 1
    except Exception as e:  # what the driver did not foresee, said and kept
        r.say(f"DRIVER ERROR: {type(e).__name__}: {e}")
        r.steps.append({"step": "driver error", "ok": False, "said": f"{type(e).__name__}: {e}", "seconds": 0})
        r.save()
        rc = 2
    finally:
        r.close_app()
        r.save()
    return rc


if __name__ == "__main__":
    sys.exit(main())
