#!/usr/bin/env bash
# Installs the Debian 12 packages placementd builds with, when missing.
# CUDA/NCCL are not Debian packages: they are used when /usr/local/cuda has
# them (PLACEMENT_WITH_CUDA=AUTO) and skipped otherwise.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libsystemd-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  python3 python3-venv
  iproute2 openssl
  prometheus)  # promtool: the alert rules and the /metrics exposition are checked with it
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Test-only, best effort: podman (with runc and iptables, which hosts with hybrid cgroups or
# without nftables need) lets tests/ops/container_test.py build and start the image; without
# it that test skips and says why.
optional=(podman runc iptables)
missing=()
for p in "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  { $sudo_cmd apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    || echo "install_deps: optional ${missing[*]} not installed; the container test will skip"
fi
