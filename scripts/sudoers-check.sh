#!/bin/sh
# The sudoers line we print, as a neighbour would use it (issue 30): after
# the .deb is installed (scripts/package-check.sh), the second local user
# vfio-remote is given exactly the line `vfio-assistant tune apply` prints
# when sudo asks it a password, and tries every flag and a corpus of
# hostile requests, then the same through a sudo without secure_path and
# with a hostile env_keep. Nothing may run as root but the closed request,
# nothing of the caller's environment may reach a program it runs, and
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

# 4. The same line on a sudo set up as badly as one can be (issue 41): no
# secure_path (upstream sudo's default: the caller's PATH goes through) and
# env_keep of the caller's loader variables, GCONV_PATH, IFS, TMPDIR and
# locale. The caller's folder comes first on PATH and holds every program
# the helper and its scan could run, each leaving a mark; nothing of it may
# run. The loader's own variables never reach the helper (glibc drops them
# from the setuid sudo's environment) or are refused by it; the sudoers line
# gives neither undo --force nor QEMU run as the caller.
evil="$work/evil"
marks="$work/marks"
mkdir -p "$evil" "$marks"
chmod 777 "$marks"
for p in zstd xz lz4 gzip bzip2 lzop systemctl modprobe udevadm update-initramfs dracut \
    grub-mkconfig grub2-mkconfig kernel-install bootctl systemd-tmpfiles sh id; do
    printf '#!/bin/sh\necho "$0 $*" >> %s/%s\n' "$marks" "$p" > "$evil/$p"
    chmod 755 "$evil/$p"
done
chmod 755 "$evil"
printf 'Defaults:vfio-remote !secure_path, env_keep += "PATH LD_PRELOAD LD_LIBRARY_PATH GLIBC_TUNABLES GCONV_PATH IFS TMPDIR LANG LC_ALL LOCPATH"\n' > "$drop.env"
chmod 440 "$drop.env"
visudo -cf "$drop.env" >/dev/null || fail "visudo refuses the hostile Defaults"
mv "$drop.env" "$drop-env"
trap 'rm -f "$drop" "$drop-env"; rm -rf "$work"' EXIT
unchanged() { find /etc /boot /var/lib/vfio-assistant -xdev -newer "$drop-env" 2>/dev/null | sort | md5sum; }
before=$(unchanged)
hostile() {
    as_user env PATH="$evil:/usr/bin:/bin" GCONV_PATH="$evil" IFS="/ x" TMPDIR="$evil" \
        LANG=xx_EVIL.UTF-8 LC_ALL=xx_EVIL.UTF-8 LOCPATH="$evil" "$@"
}
out=$(echo '{"kind":"status"}' | hostile sudo -n "$HELPER") || fail "status with a hostile environment failed: $out"
# A scan of this host (its initramfs read with the system's decompressor),
# then a refusal: no such GPU. Nothing changes.
code=0
echo '{"kind":"apply","request":{"gpus":["0000:ff:1f.7"]}}' | hostile sudo -n "$HELPER" >/dev/null 2>&1 || code=$?
[ "$code" -eq 2 ] || fail "an apply for no GPU exited $code, not 2"
code=0
out=$(echo '{"kind":"status"}' | hostile env LD_PRELOAD="$evil/libevil.so" sudo -n "$HELPER" 2>&1) || code=$?
{ [ "$code" -eq 0 ] || case "$out" in *"LD_PRELOAD is set"*) [ "$code" -eq 2 ] ;; *) false ;; esac; } ||
    fail "LD_PRELOAD kept by sudo: exit $code: $out"
code=0
out=$(echo '{"kind":"undo","id":"1700000000000","force":true}' | hostile sudo -n "$HELPER" 2>&1) || code=$?
[ "$code" -eq 2 ] && case "$out" in *"not given through sudo"*) ;; *) false ;; esac ||
    fail "undo --force went through the sudoers line (exit $code): $out"
code=0
out=$(echo '{"kind":"apply","request":{"qemu_as_user":true}}' | hostile sudo -n "$HELPER" 2>&1) || code=$?
[ "$code" -eq 2 ] && case "$out" in *"not given through sudo"*) ;; *) false ;; esac ||
    fail "QEMU as the caller went through the sudoers line (exit $code): $out"
[ -z "$(ls -A "$marks")" ] || fail "a program of the caller's ran as root: $(cat "$marks"/*)"
[ "$before" = "$(unchanged)" ] || fail "files under /etc, /boot or the journal changed"
echo "refused: a hostile environment through a sudo without secure_path; nothing of the caller's ran"
echo "3 passed, 0 failed"
