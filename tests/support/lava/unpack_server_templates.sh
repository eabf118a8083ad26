#!/bin/sh
# Unpack lava-server's device-type templates (qemu.jinja2, base.jinja2, ...)
# into a cache directory and print the directory holding them.
#
# Usage: unpack_server_templates.sh CACHE_DIR
#
# lava-server is not installed (it pulls in a database and a web server);
# only its templates are needed, to render a device configuration for
# `lava-run` (render_device.py). The package is fetched with
# `apt-get download` into CACHE_DIR when no lava-server_*.deb is there yet,
# and unpacked with `dpkg-deb -x` into CACHE_DIR/lava-server. Idempotent: a
# second call downloads and unpacks nothing and prints the same path.
#
# The templates are under usr/share/lava-server/device-types in the
# package (2023.01); older packages kept them under
# etc/lava-server/dispatcher-config/device-types. Whichever holds
# qemu.jinja2 is printed.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi
cache=$1
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
root=$cache/lava-server

find_templates() {
    for d in "$root/usr/share/lava-server/device-types" \
        "$root/etc/lava-server/dispatcher-config/device-types"; do
        if [ -f "$d/qemu.jinja2" ] && [ -f "$d/base.jinja2" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

if [ -f "$root/.complete" ] && find_templates; then
    exit 0
fi

deb=$(ls "$cache"/lava-server_*.deb 2>/dev/null | tail -n 1 || true)
if [ -z "$deb" ]; then
    if ! (cd "$cache" && apt-get download lava-server >&2); then
        echo "$0: 'apt-get download lava-server' failed in $cache" >&2
        exit 1
    fi
    deb=$(ls "$cache"/lava-server_*.deb 2>/dev/null | tail -n 1 || true)
    if [ -z "$deb" ]; then
        echo "$0: apt-get download left no lava-server_*.deb in $cache" >&2
        exit 1
    fi
fi

rm -rf "$root.partial"
mkdir -p "$root.partial"
if ! dpkg-deb -x "$deb" "$root.partial"; then
    echo "$0: cannot unpack $deb" >&2
    rm -rf "$root.partial"
    exit 1
fi
rm -rf "$root"
mv "$root.partial" "$root"
touch "$root/.complete"
if ! find_templates; then
    echo "$0: no qemu.jinja2 and base.jinja2 in $deb" >&2
    exit 1
fi
