#!/bin/sh
# The sudoers line we print, as a neighbour would use it (issue 30): after
# the .deb is installed (scripts/package-check.sh), the second local user
# vfio-remote is given exactly the line `vfio-assistant tune apply` prints
# when sudo asks it a password, and tries every flag and a corpus of
# hostile requests. Nothing may run as root but the closed request, and
# nothing outside the journal may change. Needs root (CI is root) and the
# user vfio-remote (scripts/setup.sh test makes it); the line is removed at
# the end whatever happens.
set -eu
[ "$(id -u)" -eq 0 ] || { echo "sudoers-check: needs root" >&2; exit 1; }
id vfio-remote >/dev/null
HELPER=/usr/libexec/vfio-assistant/vfio-assistant-helper
drop=/etc/sudoers.d/vfio-assistant-check
work=$(mktemp -d)
chmod 755 "$work"
cleanup() { rm -f "$drop"; rm -rf "$work"; }
trap cleanup EXIT
as_user() { runuser -u vfio-remote -- "$@"; }
fail() { echo "sudoers-check: $*" >&2; exit 1; }

# 1. The line, as the program prints it for this user.
line=$(cd "$work" && as_user env USER=vfio-remote /usr/bin/vfio-assistant tune sudoers 2>/dev/null)
[ -n "$line" ] || fail "tune sudoers printed no line"
echo "the line printed: $line"
case "$line" in
    "vfio-remote ALL=(root) NOPASSWD: $HELPER \"\"") ;;
    *) fail "not the helper-only line: $line" ;;
esac
printf '%s\n' "$line" > "$drop"
chmod 440 "$drop"
visudo -cf "$drop" >/dev/null || fail "visudo refuses the line"

# 2. What it allows: the helper with its request, nothing else.
out=$(echo '{"kind":"status"}' | as_user sudo -n "$HELPER") || fail "status through the line failed: $out"
echo "allowed: status -> $out"
mark="$work/ran-as-root"
for args in "--journal $work" "--root $work" "--fail-at 0" "--pause-at 0" "--help" "-c id"; do
    # shellcheck disable=SC2086 # the words are the test
    if echo '{"kind":"status"}' | as_user sudo -n "$HELPER" $args >/dev/null 2>&1; then
        fail "the helper ran with '$args' through the line"
    fi
done
for other in /usr/bin/vfio-assistant /bin/sh /usr/bin/id; do
    if as_user sudo -n "$other" --version >/dev/null 2>&1; then
        fail "the line lets vfio-remote run $other as root"
    fi
done
echo "refused: every flag, and every other program"

# 3. Hostile requests: each refused (exit 2), nothing run, nothing changed.
mkdir -p "$work/j/1"
printf '{"id":"1","plan":{"changes":[{"id":"ksm","undo_commands":[{"argv":["/bin/sh","-c","id > %s"]}]}]}}' "$mark" > "$work/j/1/entry.json"
chown -R vfio-remote "$work/j"
ln -s "$work/j" "$work/link"
big=$(head -c 2000000 /dev/zero | tr '\0' ' ')
before=$(find /etc /boot /var/lib/vfio-assistant -xdev -newer "$drop" 2>/dev/null | sort | md5sum)
n=0
while IFS= read -r req; do
    n=$((n + 1))
    code=0
    printf '%s' "$req" | as_user sudo -n "$HELPER" >/dev/null 2>&1 || code=$?
    [ "$code" -eq 2 ] || fail "request $n exited $code, not refused: $req"
done <<EOF_REQ
{"kind":"undo","id":"1","force":true}
{"kind":"undo","id":"../../../../$work/j/1","force":true}
{"kind":"shell","argv":["/bin/sh","-c","id > $mark"]}
{"kind":"status"} {"kind":"status"}
{"kind":"status","journal":"$work/link"}
{"kind":"apply","request":{"gpus":["../../etc/passwd"]}}
{"kind":"apply","request":{"only":["thp; id > $mark"]}}
{"kind":"apply","request":{"vm":"x\$(id>$mark)","isolation_hook":true}}
{"kind":"apply","request":{"desktop_user":"root\nuser = \"root\""}}
{"kind":"apply","request":{"gpus":["0b:00.0"],"path":"/etc/shadow"}}
$big{"kind":"status"}
EOF_REQ
head -c 3000000 /dev/zero | as_user sudo -n "$HELPER" >/dev/null 2>&1 && fail "3 MB of input was taken"
[ ! -e "$mark" ] || fail "a hostile request ran a command as root: $(cat "$mark")"
after=$(find /etc /boot /var/lib/vfio-assistant -xdev -newer "$drop" 2>/dev/null | sort | md5sum)
[ "$before" = "$after" ] || fail "files under /etc, /boot or the journal changed"
echo "refused: $n hostile requests and a huge input; nothing ran, nothing changed"
echo "2 passed, 0 failed"
