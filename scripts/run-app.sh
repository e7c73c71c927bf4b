#!/bin/sh
# Set up and start VFIO Assistant on this machine.
#   scripts/run-app.sh          the live host (read; changed only through the Tuning
#                               page's Apply, which asks for your password)
#   scripts/run-app.sh --demo   a bundled sample host, for machines without VFIO hardware
# Any other arguments go to the program (e.g. `scan`, `--root DIR`).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh app
cargo build --release --quiet
exec target/release/vfio-assistant "$@"
