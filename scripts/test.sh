#!/bin/sh
# Set up and run every check: formatting, clippy with the lints in Cargo.toml as
# errors, all tests (unit, integration, GUI through egui_kittest), and the
# packaging validators.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh test
sh scripts/libvirt-up.sh
cargo fmt --all --check
# Both builds: the one users get (no test hooks), and the tests' (with them).
cargo clippy --lib --bins --locked -- -D warnings
cargo clippy --all-targets --locked --features test-hooks -- -D warnings
cargo test --locked --features test-hooks
python3 scripts/link-check.py
desktop-file-validate packaging/*.desktop
appstreamcli validate --no-net packaging/*.metainfo.xml
xmllint --noout --dtdvalid /usr/share/polkit-1/policyconfig-1.dtd packaging/*.policy
echo "All checks passed."
