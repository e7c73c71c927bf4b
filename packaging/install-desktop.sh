#!/bin/sh
# Install VFIO Assistant's desktop integration (menu entry, icons, AppStream
# metainfo) for the current user. Safe to run again: files are overwritten.
#
# Usage: packaging/install-desktop.sh [BINDIR]
#   BINDIR  directory holding the vfio-assistant binary; when given, the menu
#           entry runs BINDIR/vfio-assistant instead of looking it up on PATH.
# Environment:
#   PREFIX  install prefix (default: $HOME/.local)
set -eu

APP_ID=io.github.vfio_assistant.VfioAssistant
PREFIX=${PREFIX:-"$HOME/.local"}
BINDIR=${1:-}

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname -- "$here")
assets=$root/assets

for f in "$here/$APP_ID.desktop" "$here/$APP_ID.metainfo.xml" \
         "$assets/icon.svg" "$assets/icon-256.png" "$assets/icon-64.png"; do
    if [ ! -f "$f" ]; then
        echo "install-desktop.sh: missing $f" >&2
        exit 1
    fi
done

if [ -n "$BINDIR" ]; then
    if [ ! -d "$BINDIR" ]; then
        echo "install-desktop.sh: BINDIR $BINDIR is not a directory" >&2
        exit 1
    fi
    BINDIR=$(CDPATH='' cd -- "$BINDIR" && pwd)
    # Characters the Exec key would need escaped, or that break the sed below.
    case $BINDIR in
        *[\"\`\$\\\|\&%]*)
            echo "install-desktop.sh: BINDIR must not contain \" \` \$ \\ | & or %" >&2
            exit 1 ;;
    esac
    if [ ! -x "$BINDIR/vfio-assistant" ]; then
        echo "install-desktop.sh: warning: $BINDIR/vfio-assistant is missing or not executable" >&2
    fi
fi

apps=$PREFIX/share/applications
icons=$PREFIX/share/icons/hicolor
metainfo=$PREFIX/share/metainfo
mkdir -p "$apps" "$icons/scalable/apps" "$icons/256x256/apps" "$icons/64x64/apps" "$metainfo"

if [ -n "$BINDIR" ]; then
    exec_path=$BINDIR/vfio-assistant
    case $exec_path in
        *[[:space:]]*) exec_path="\"$exec_path\"" ;;
    esac
    tmp=$(mktemp)
    trap 'rm -f "$tmp"' EXIT
    sed "s|^Exec=vfio-assistant\$|Exec=$exec_path|" "$here/$APP_ID.desktop" >"$tmp"
    install -m 644 "$tmp" "$apps/$APP_ID.desktop"
else
    install -m 644 "$here/$APP_ID.desktop" "$apps/$APP_ID.desktop"
fi

install -m 644 "$assets/icon.svg"     "$icons/scalable/apps/$APP_ID.svg"
install -m 644 "$assets/icon-256.png" "$icons/256x256/apps/$APP_ID.png"
install -m 644 "$assets/icon-64.png"  "$icons/64x64/apps/$APP_ID.png"
install -m 644 "$here/$APP_ID.metainfo.xml" "$metainfo/$APP_ID.metainfo.xml"

# Refresh caches when the tools exist; failures here are not fatal.
if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$apps" 2>/dev/null || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1 && [ -f "$icons/index.theme" ]; then
    gtk-update-icon-cache -q -t "$icons" 2>/dev/null || true
fi

echo "Installed $APP_ID desktop integration under $PREFIX"
