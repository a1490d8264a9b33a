#!/usr/bin/env bash
# Installs the Debian 12 packages switchboard needs to build and test.
# Does nothing when all are present; runs apt-get update only when an
# install is needed; uses sudo when not root.
set -euo pipefail

PKGS=(
  build-essential pkg-config clang libclang-rt-14-dev
  libzmq3-dev libczmq-dev libmsgpack-dev libcurl4-openssl-dev libsodium-dev
  liblmdb-dev lmdb-utils libwebsockets-dev libjansson-dev libcriterion-dev
  python3-zmq python3-msgpack
  libedit-dev
  bubblewrap git procps
)
# `make bench` adds the peers it measures us against in the same run.
if [ "${1:-}" = "--bench" ]; then
  PKGS+=(redis-server)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
