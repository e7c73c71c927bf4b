#!/bin/sh
# `scan` of another machine over SSH against the yardstick `ssh HOST lspci -nnk`,
# as a ratio (farm-bench --vs): a throwaway sshd on 127.0.0.1 with its own keys,
# logging in as this user; the "remote" vfio-assistant is this build.
# Usage: sh scripts/bench-remote.sh [RUNS]   (after cargo build --release)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/target/release/vfio-assistant"
[ -x "$bin" ] || bin="$top/target/debug/vfio-assistant"
runs=${1:-10}
d=$(mktemp -d)
trap 'kill "$(cat "$d/sshd.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$d"' EXIT
ssh-keygen -q -t ed25519 -N "" -f "$d/hostkey"
ssh-keygen -q -t ed25519 -N "" -f "$d/client"
cp "$d/client.pub" "$d/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
[ "$(id -u)" != 0 ] || mkdir -p /run/sshd
cat > "$d/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $d/hostkey
AuthorizedKeysFile $d/authorized_keys
PidFile $d/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
PermitRootLogin prohibit-password
CONF
/usr/sbin/sshd -f "$d/sshd_config"
sleep 0.5
user=$(id -un)
cat > "$d/ssh" <<W
#!/bin/sh
exec ssh -F none -i $d/client -o IdentitiesOnly=yes -o UserKnownHostsFile=$d/known_hosts -o StrictHostKeyChecking=accept-new "\$@"
W
chmod +x "$d/ssh"
"$d/ssh" -p "$port" "$user@127.0.0.1" true
VFIO_ASSISTANT_SSH="$d/ssh" VFIO_ASSISTANT_REMOTE_PROGRAM="$bin" \
    farm-bench -n "$runs" --timeout 600 \
    --vs "$d/ssh -p $port $user@127.0.0.1 lspci -nnk" \
    -- "$bin" scan --json --host "ssh://$user@127.0.0.1:$port"
