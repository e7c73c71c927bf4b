#!/bin/sh
# Build the packages: scripts/package.sh deb|rpm|all
#   deb  target/debian/vfio-assistant_*.deb      (cargo-deb, [package.metadata.deb])
#   rpm  target/generate-rpm/vfio-assistant-*.rpm (cargo-generate-rpm)
# Man pages and shell completions are generated from the CLI definition
# (examples/gen_assets.rs) into target/assets first, so they never drift.
# PROFILE=dev builds a debug package (CI: reuses the test build).
set -eu
cd "$(dirname "$0")/.."
what=${1:-all}
profile=${PROFILE:-release}
case $what in deb|rpm|all) ;; *) echo "usage: scripts/package.sh deb|rpm|all" >&2; exit 2 ;; esac
if [ "$profile" = release ]; then
    cargo build --release --locked --bins
    out=target/release
else
    cargo build --locked --bins
    out=target/debug
fi
cargo run --quiet --locked --example gen_assets -- target/assets >/dev/null
# The package metadata names target/release: a dev build is put there too,
# without its debug info (400 MB of it would take minutes to compress).
if [ "$out" != target/release ]; then
    mkdir -p target/release
    for b in vfio-assistant vfio-assistant-virt vfio-assistant-helper; do
        if command -v strip >/dev/null 2>&1; then
            strip --strip-debug -o "target/release/$b" "$out/$b"
        else
            cp "$out/$b" target/release/
        fi
    done
fi
need() {
    if ! cargo "$1" --version >/dev/null 2>&1; then
        echo "Installing cargo-$1 (once)…"
        cargo install --locked "cargo-$1"
    fi
}
if [ "$what" = deb ] || [ "$what" = all ]; then
    need deb
    cargo deb --no-build --no-strip --locked
    ls target/debian/*.deb
fi
if [ "$what" = rpm ] || [ "$what" = all ]; then
    need generate-rpm
    cargo generate-rpm
    ls target/generate-rpm/*.rpm
fi
