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
# What the package put on this machine, to prove that removing it takes it all.
ours=$(dpkg -L vfio-assistant | while read -r f; do [ -f "$f" ] && echo "$f"; done)
[ -n "$ours" ] || { echo "dpkg -L lists no files for vfio-assistant" >&2; exit 1; }
/usr/bin/vfio-assistant --version
/usr/bin/vfio-assistant scan --json >/dev/null && echo "scan --json: ok"
# What users run does not load libvirt; what needs it continues in the
# installed vfio-assistant-virt (libvirt's test driver, no daemon).
if ldd /usr/bin/vfio-assistant | grep -q libvirt; then
    echo "/usr/bin/vfio-assistant links libvirt" >&2
    exit 1
fi
ldd /usr/libexec/vfio-assistant/vfio-assistant-virt | grep -q libvirt.so
/usr/bin/vfio-assistant domain list --demo | grep -q "test:///default" && echo "domain list (vfio-assistant-virt): ok"
test -x /usr/libexec/vfio-assistant/vfio-assistant-helper
echo '{"kind":"status"}' | /usr/libexec/vfio-assistant/vfio-assistant-helper >/dev/null && echo "helper: ok"
# The installed helper has no test hooks: any argument is refused.
if echo '{"kind":"status"}' | /usr/libexec/vfio-assistant/vfio-assistant-helper --journal "$(mktemp -d)" >/dev/null 2>&1; then
    echo "the installed helper took --journal" >&2
    exit 1
fi
echo "helper: no test hooks"
# The sudoers line we print, tried by the second user (needs root).
if [ "$(id -u)" -eq 0 ] && id vfio-remote >/dev/null 2>&1; then
    sh scripts/sudoers-check.sh
fi
man -w vfio-assistant
man -w vfio-assistant-tune-apply
# Bash completion: `vfio-assistant tu<TAB>` offers `tune`.
got=$(bash -c '. /usr/share/bash-completion/completions/vfio-assistant
COMP_WORDS=(vfio-assistant tu); COMP_CWORD=1; COMP_LINE="vfio-assistant tu"; COMP_POINT=${#COMP_LINE}
f=$(complete -p vfio-assistant | sed "s/.*-F \([^ ]*\).*/\1/"); "$f" vfio-assistant tu vfio-assistant; echo "${COMPREPLY[*]}"')
case " $got " in *" tune "*) echo "completion: tu -> $got" ;; *) echo "bash completion of 'tu' gave: '$got'" >&2; exit 1 ;; esac
xmllint --noout --dtdvalid /usr/share/polkit-1/policyconfig-1.dtd /usr/share/polkit-1/actions/io.github.vfio_assistant.policy
if command -v pkaction >/dev/null 2>&1; then
    # polkit answers over the system bus. A desktop has both running; a
    # container without systemd (CI) has neither, and may hold a dead socket
    # left in /run/dbus by an earlier run. So when the machine's bus does not
    # answer, ask a private one: a system-policy dbus-daemon on a socket of
    # our own, and polkitd on it, both stopped when this script ends.
    if ! pkaction --action-id io.github.vfio_assistant.tune >/dev/null 2>&1; then
        busdir=$(mktemp -d)
        chmod 755 "$busdir"
        DBUS_SYSTEM_BUS_ADDRESS="unix:path=$busdir/system_bus_socket"
        export DBUS_SYSTEM_BUS_ADDRESS
        buspid=$($sudo dbus-daemon --config-file=/usr/share/dbus-1/system.conf \
            --address="$DBUS_SYSTEM_BUS_ADDRESS" --fork --nopidfile --print-pid)
        polkitpid=""
        trap '$sudo kill $buspid $polkitpid 2>/dev/null || true' EXIT
        for p in /usr/lib/polkit-1/polkitd /usr/libexec/polkitd; do
            if [ -x "$p" ]; then
                $sudo env DBUS_SYSTEM_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" \
                    "$p" --no-debug --replace >/dev/null 2>&1 &
                polkitpid=$!
                break
            fi
        done
        i=0
        until pkaction --action-id io.github.vfio_assistant.tune >/dev/null 2>&1; do
            i=$((i + 1))
            if [ "$i" -gt 40 ]; then
                echo "polkit does not know io.github.vfio_assistant.tune (no answer on the system bus after 20 s):" >&2
                pkaction --action-id io.github.vfio_assistant.tune >&2 || true
                exit 1
            fi
            sleep 0.5
        done
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
# Removing the package leaves nothing of ours behind.
DEBIAN_FRONTEND=noninteractive $sudo apt-get remove -y -qq vfio-assistant >/dev/null
left=""
for f in $ours; do [ -e "$f" ] && left="$left $f"; done
for d in /usr/libexec/vfio-assistant /usr/share/doc/vfio-assistant; do [ -e "$d" ] && left="$left $d"; done
if [ -n "$left" ]; then echo "apt-get remove left behind:$left" >&2; exit 1; fi
echo "apt-get remove: nothing of ours left ($(echo "$ours" | wc -l) files gone)"
# The rpm: built, and its file list holds the same content as the .deb's
# (man pages uncompressed there, zsh's folder per distribution, no docs).
PROFILE=${PROFILE:-dev} sh scripts/package.sh rpm >/dev/null
rpmfile=$(ls target/generate-rpm/*.rpm | head -n 1)
rpmlist=$(rpm -qlp "$rpmfile")
missing=""
for f in $ours; do
    case $f in /usr/share/doc/*) continue ;; esac
    want=${f%.gz}
    case $want in /usr/share/zsh/vendor-completions/*) want=/usr/share/zsh/site-functions/${want##*/} ;; esac
    echo "$rpmlist" | grep -qxF "$want" || missing="$missing $want"
done
if [ -n "$missing" ]; then echo "the rpm lacks:$missing" >&2; exit 1; fi
echo "rpm: $rpmfile holds what the .deb holds ($(echo "$rpmlist" | wc -l) files)"
echo "Package checks passed."
