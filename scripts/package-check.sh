#!/bin/sh
# Prove the .deb by installing it on this machine (CI): build it, install it
# with apt, and use what it installed — the program, its man page, its bash
# completion, its polkit action, and the window under Xvfb.
set -eu
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
PROFILE=${PROFILE:-dev} sh scripts/package.sh deb
deb=$(ls target/debian/*.deb | head -n 1)
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "./$deb" >/dev/null
echo "installed: $deb"
/usr/bin/vfio-assistant --version
/usr/bin/vfio-assistant scan --json >/dev/null && echo "scan --json: ok"
test -x /usr/libexec/vfio-assistant/vfio-assistant-helper
echo '{"kind":"status"}' | /usr/libexec/vfio-assistant/vfio-assistant-helper --journal "$(mktemp -d)" >/dev/null && echo "helper: ok"
man -w vfio-assistant
man -w vfio-assistant-tune-apply
# Bash completion: `vfio-assistant tu<TAB>` offers `tune`.
got=$(bash -c '. /usr/share/bash-completion/completions/vfio-assistant
COMP_WORDS=(vfio-assistant tu); COMP_CWORD=1; COMP_LINE="vfio-assistant tu"; COMP_POINT=${#COMP_LINE}
f=$(complete -p vfio-assistant | sed "s/.*-F \([^ ]*\).*/\1/"); "$f" vfio-assistant tu vfio-assistant; echo "${COMPREPLY[*]}"')
case " $got " in *" tune "*) echo "completion: tu -> $got" ;; *) echo "bash completion of 'tu' gave: '$got'" >&2; exit 1 ;; esac
xmllint --noout --dtdvalid /usr/share/polkit-1/policyconfig-1.dtd /usr/share/polkit-1/actions/io.github.vfio_assistant.policy
if command -v pkaction >/dev/null 2>&1; then
    # polkit answers over the system bus: a container without systemd runs
    # neither, so start them for the question (a desktop already has both).
    if ! pkaction --action-id io.github.vfio_assistant.tune >/dev/null 2>&1; then
        if [ ! -S /run/dbus/system_bus_socket ] && command -v dbus-daemon >/dev/null 2>&1; then
            $sudo mkdir -p /run/dbus
            $sudo dbus-daemon --system --fork
        fi
        for p in /usr/lib/polkit-1/polkitd /usr/libexec/polkitd; do
            if [ -x "$p" ]; then
                $sudo sh -c "$p --no-debug >/dev/null 2>&1 &"
                break
            fi
        done
        sleep 2
    fi
    pkaction --action-id io.github.vfio_assistant.tune --verbose | head -n 12
    pkaction --action-id io.github.vfio_assistant.tune --verbose | grep -q "exec.path -> /usr/libexec/vfio-assistant/vfio-assistant-helper"
fi
desktop-file-validate /usr/share/applications/io.github.vfio_assistant.VfioAssistant.desktop
appstreamcli validate --no-net /usr/share/metainfo/io.github.vfio_assistant.VfioAssistant.metainfo.xml
# The window, for a few seconds, and a screenshot of it.
if command -v Xvfb >/dev/null 2>&1; then
    Xvfb :91 -screen 0 1280x800x24 >/dev/null 2>&1 &
    xvfb=$!
    sleep 1
    DISPLAY=:91 LIBGL_ALWAYS_SOFTWARE=1 /usr/bin/vfio-assistant --demo >target/package-gui.log 2>&1 &
    app=$!
    sleep 6
    if kill -0 "$app" 2>/dev/null; then
        echo "GUI: running after 6 s"
        if command -v import >/dev/null 2>&1; then
            DISPLAY=:91 import -window root target/package-gui.png && echo "screenshot: target/package-gui.png"
        fi
        kill "$app"
    else
        echo "the installed app exited under Xvfb:" >&2
        cat target/package-gui.log >&2
        kill "$xvfb"
        exit 1
    fi
    kill "$xvfb" 2>/dev/null || true
fi
echo "Package checks passed."
