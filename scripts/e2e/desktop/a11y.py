"""What the driver sees of the screen: the accessibility tree over AT-SPI
(pyatspi), found by role and name, never by coordinates.

AccessKit (eframe's `accesskit` feature) publishes the app's tree only once
org.a11y.Status says assistive technology is on; a structural change
republishes a subtree under new object paths, so every lookup here walks
the tree again from the application (nothing is kept between steps). A
check box's toggle is the action "click"; egui's text fields have no
EditableText, so text goes in by xdotool into the focused field.
"""

import re
import subprocess
import time

import pyatspi


def turn_on():
    """Assistive technology on for this session (what a screen reader's
    switch does): org.a11y.Status IsEnabled on the session bus's a11y bus
    launcher. True when it says so afterwards."""
    base = ["gdbus", "call", "--session", "--dest", "org.a11y.Bus", "--object-path", "/org/a11y/bus",
            "--method", "org.freedesktop.DBus.Properties."]
    subprocess.run(base[:-1] + [base[-1] + "Set", "org.a11y.Status", "IsEnabled", "<true>"], check=False)
    got = subprocess.run(base[:-1] + [base[-1] + "Get", "org.a11y.Status", "IsEnabled"],
                         capture_output=True, text=True)
    return "true" in got.stdout


def apps():
    d = pyatspi.Registry.getDesktop(0)
    out = []
    for i in range(d.childCount):
        try:
            a = d.getChildAtIndex(i)
        except Exception:
            continue
        if a is not None:
            out.append(a)
    return out


def app_by_pid(pid):
    for a in apps():
        try:
            if a.get_process_id() == pid:
                return a
        except Exception:
            continue
    return None


def app_named(pattern):
    for a in apps():
        try:
            if re.search(pattern, a.name or ""):
                return a
        except Exception:
            continue
    return None


def walk(node, depth=0, limit=4000):
    """(depth, node) for the node and everything under it."""
    stack = [(depth, node)]
    n = 0
    while stack and n < limit:
        d, x = stack.pop()
        n += 1
        yield d, x
        try:
            kids = [x.getChildAtIndex(i) for i in range(x.childCount)]
        except Exception:
            kids = []
        for k in reversed(kids):
            if k is not None:
                stack.append((d + 1, k))


def role(x):
    try:
        return x.getRoleName()
    except Exception:
        return "?"


def name(x):
    try:
        return x.name or ""
    except Exception:
        return ""


def states(x):
    try:
        s = x.getState()
        return {pyatspi.stateToString(v) for v in s.getStates()}
    except Exception:
        return set()


def usable(x):
    """Enabled, as a user can tell: AT-SPI's SENSITIVE state, and the
    app's description not starting with "unavailable" (AccessKit's AT-SPI
    adapter 0.20 says ENABLED for a disabled button; the app says it in
    the description, src/ui/widgets/a11y.rs)."""
    st = states(x)
    try:
        d = x.description or ""
    except Exception:
        d = ""
    return ("sensitive" in st or "enabled" in st) and not d.startswith("unavailable")


def find_all(root, role_name=None, pattern=None):
    out = []
    for _, x in walk(root):
        if role_name and role(x) != role_name:
            continue
        if pattern and not re.search(pattern, name(x)):
            continue
        out.append(x)
    return out


def find(root, role_name, pattern):
    xs = find_all(root, role_name, pattern)
    return xs[0] if xs else None


def texts(root):
    """Every name and description in the tree, in order: the words on
    screen (egui's labels are nodes named by their text)."""
    out = []
    for _, x in walk(root):
        n = name(x)
        if n:
            out.append(n)
        try:
            d = x.description
        except Exception:
            d = ""
        if d:
            out.append(d)
    return out


def write_share(path, text, tries=5):
    """Write `text` to `path` on the 9p share, asked again a few times: the
    harness empties the folder as it answers, and under load a create there
    has failed with ENOENT (seen in a clean-clone CI run). The last error is
    raised when every try failed."""
    for i in range(tries):
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return
        except OSError:
            if i + 1 == tries:
                raise
            time.sleep(1)


def dump(root, path):
    """The tree as text: role, name, states (what AT-SPI showed)."""
    lines = []
    for d, x in walk(root):
        st = sorted(states(x) & {"focused", "sensitive", "checked", "showing", "editable"})
        lines.append(f"{'  ' * d}{role(x)} {name(x)!r} {' '.join(st)}".rstrip())
    try:
        write_share(path, "\n".join(lines) + "\n")
    except OSError as e:
        # The tree is evidence beside a step, never the step.
        print(f"the tree for {path} was not kept: {e}", flush=True)
    return lines


def actions(x):
    try:
        a = x.queryAction()
    except Exception:
        return None, []
    return a, [a.getName(i) for i in range(a.nActions)]


def press(x, preferred=("click", "press", "activate")):
    """Its action (a button's click, a check box's "click"); the name of
    the action done, or None when it has none."""
    a, names = actions(x)
    for want in preferred:
        if want in names:
            a.doAction(names.index(want))
            return want
    if names:
        a.doAction(0)
        return names[0]
    return None


def focus(x):
    try:
        return bool(x.queryComponent().grabFocus())
    except Exception:
        return False


def wait_for(get, timeout_s, every_s=1.0):
    """get() until it returns something truthy; that, or None."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            v = get()
        except Exception:
            v = None
        if v:
            return v
        if time.monotonic() > end:
            return None
        time.sleep(every_s)


def xtype(text):
    """Keys into the focused window (XTEST: real key events, not synthetic
    ones that GTK ignores)."""
    subprocess.run(["xdotool", "type", "--delay", "60", "--", text], check=False)


def xkey(key):
    subprocess.run(["xdotool", "key", key], check=False)
