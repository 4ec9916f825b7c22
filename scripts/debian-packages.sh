#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed
# yet (apt-get, as root or through sudo); does nothing when all are. Used by
# scripts/test.sh for what the tests need from Debian: Python's grpcio,
# protobuf, setuptools, wheel and venv to install and test the Python
# package (e2e/python_test.go), protoc and its gRPC Python plugin for the
# drift check of its stubs (api/proto3/python_test.go), chromium for the
# console's browser test (e2e/console_test.go).
#
# Usage: scripts/debian-packages.sh PACKAGE...
set -euo pipefail

missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} = 0 ] && exit 0

sudo=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "debian-packages.sh: ${missing[*]} not installed, and this is not root (and there is no sudo)" >&2; exit 1; }
	sudo=(sudo)
fi
command -v apt-get >/dev/null || { echo "debian-packages.sh: ${missing[*]} not installed, and there is no apt-get" >&2; exit 1; }
echo "debian-packages.sh: installing ${missing[*]} with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
