#!/usr/bin/env bash
# Build dist/spark-watchd_<version>_<arch>.deb from this checkout's tracked files.
#
#   bash packaging/deb/build.sh [--arch amd64|arm64] [--version VERSION] [--out DIR]
#
# Network: only the Python package index (pip: the project's build backend, the pinned wheels of
# requirements.txt, checked against their sha256). Tools: python3 with venv, dpkg-deb, help2man, readelf.
# --arch defaults to this machine's; arm64 on an x86_64 machine fetches the manylinux aarch64 wheels.
# --version replaces the package version (default: spark_watchd.__version__), e.g. to build an upgrade.
# See packaging/deb/README.md for what goes where and why.
set -euo pipefail
umask 022
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arch=$(dpkg --print-architecture)
version=""
out="$repo/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) arch=${2:?--arch needs amd64 or arm64}; shift 2 ;;
        --version) version=${2:?--version needs a value}; shift 2 ;;
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
case "$arch" in
    amd64) machine=x86_64 ;;
    arm64) machine=aarch64 ;;
    *) echo "build.sh: --arch must be amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
for tool in python3 dpkg-deb help2man readelf; do
    command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (see packaging/deb/README.md)" >&2; exit 1; }
done
# shellcheck source=packaging/deb/targets
. "$here/targets"
upstream=$(sed -n 's/^__version__ = "\([^"]*\)"$/\1/p' "$repo/spark_watchd/__init__.py")
[ -n "$upstream" ] || { echo "build.sh: no __version__ in spark_watchd/__init__.py" >&2; exit 1; }
version=${version:-$upstream}
if ! dpkg --validate-version "$version" 2>/dev/null; then
    echo "build.sh: '$version' is not a valid Debian version" >&2; exit 2
fi
# Every file's time and the changelog date come from the last commit: two builds of one commit are equal.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1

work=$(mktemp -d "${TMPDIR:-/tmp}/spark-watchd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { echo "build.sh: $*" >&2; }

# 1. The sources: tracked files only (a stray file in the checkout never reaches the package).
mkdir -p "$work/src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z | xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$work/src"
else
    cp -a "$repo/." "$work/src/"
fi
src="$work/src"

# 2. A build environment of its own (the system Python stays untouched), the project's wheel, and the
# pinned wheels for every target Python, hash-checked.
say "build environment"
python3 -m venv "$work/env"
pip="$work/env/bin/python -m pip"
$pip wheel -q --no-deps -w "$work/wheels/project" "$src"
platforms=()
for tag in $MANYLINUX; do platforms+=(--platform "${tag}_${machine}"); done
for py in $PYTHONS; do
    say "wheels for Python $py on $machine"
    $pip download -q --require-hashes --only-binary=:all: --implementation cp --python-version "$py" \
        "${platforms[@]}" -r "$here/requirements.txt" -d "$work/wheels/$py"
done

# 3. The tree under /opt/spark-watchd: a venv-like prefix on the system's python3 (Python finds pyvenv.cfg
# beside bin/python and takes /opt/spark-watchd as its prefix): lib/python3/site-packages holds the daemon
# and every wheel that serves all target Pythons; lib/pythonX.Y/site-packages, the one that Python X.Y
# reads, holds the rest and a .pth adding the shared directory after it.
root="$work/root"
opt="$root/opt/spark-watchd"
common="$opt/lib/python3/site-packages"
install_target() {  # DIR PYTHON WHEEL...: unpack wheels as pip installs them, without compiling
    local dir=$1 py=$2
    shift 2
    $pip install -q --no-deps --no-index --no-compile --only-binary=:all: --implementation cp \
        --python-version "$py" "${platforms[@]}" --target "$dir" "$@"
}
# A wheel that is the same file for every target Python (py3-none-any, the abi3 ones) goes to the shared
# directory; the rest (pydantic-core, PyYAML: one build per CPython) to each Python's own.
n_pythons=$(echo $PYTHONS | wc -w)
mapfile -t shared < <(cd "$work/wheels" && ls -1 */*.whl | grep -v '^project/' | cut -d/ -f2 | sort | uniq -c \
    | awk -v n="$n_pythons" '$1 == n {print $2}')
first_py=${PYTHONS%% *}
install_target "$common" "$first_py" "$work/wheels/project"/*.whl "${shared[@]/#/$work/wheels/$first_py/}"
for py in $PYTHONS; do
    mapfile -t own < <(ls -1 "$work/wheels/$py" | grep -vxF -f <(printf '%s\n' "${shared[@]}"))
    site="$opt/lib/python$py/site-packages"
    install_target "$site" "$py" "${own[@]/#/$work/wheels/$py/}"
    echo /opt/spark-watchd/lib/python3/site-packages > "$site/spark-watchd.pth"
done
# pip's own leftovers: console scripts with the build machine's interpreter, and the build's paths.
rm -rf "$common/bin" "$opt"/lib/python3.*/site-packages/bin
find "$opt" -name direct_url.json -delete
find "$opt" -name RECORD -exec sed -i -E '/direct_url\.json/d; /^(\.\.\/)*bin\//d' {} +
mkdir -p "$opt/bin" "$root/usr/bin"
ln -s /usr/bin/python3 "$opt/bin/python"
ln -s python "$opt/bin/python3"
cat > "$opt/pyvenv.cfg" <<'EOF'
home = /usr/bin
include-system-site-packages = false
EOF
cat > "$opt/bin/spark-watchd" <<'EOF'
#!/opt/spark-watchd/bin/python
import sys

from spark_watchd.cli import main

sys.exit(main())
EOF
chmod 0755 "$opt/bin/spark-watchd"
ln -s /opt/spark-watchd/bin/spark-watchd "$root/usr/bin/spark-watchd"

# 4. What only the daemon can say (the default config, the --help texts) from a host copy of it.
say "default config and manual page"
host="$work/host"
$pip install -q --no-compile --require-hashes -r "$here/requirements.txt" --target "$host"
$pip install -q --no-compile --no-deps --target "$host" "$work/wheels/project"/*.whl
cat > "$work/spark-watchd" <<EOF
#!/bin/sh
PYTHONPATH="$host" exec "$work/env/bin/python" -m spark_watchd "\$@"
EOF
chmod +x "$work/spark-watchd"
install -d "$root/etc/spark-watchd"
"$work/spark-watchd" run --help >/dev/null  # fails loudly here rather than as an empty page below
PYTHONPATH="$host" "$work/env/bin/python" -m spark_watchd.service.configdoc > "$root/etc/spark-watchd/config.toml"
PYTHONPATH="$host" COLUMNS=80 "$work/env/bin/python" "$here/manpage.py" > "$work/verbs.h2m"
install -d "$root/usr/share/man/man1"
COLUMNS=80 help2man --no-info --section 1 --version-string "$upstream" --include "$work/verbs.h2m" \
    --name "monitoring daemon for NVIDIA DGX Spark (GB10)" "$work/spark-watchd" \
    | gzip -9n > "$root/usr/share/man/man1/spark-watchd.1.gz"

# 5. The unit, the alert rules and dashboards, the documents.
install -D -m 0644 "$src/systemd/spark-watchd.service" "$root/lib/systemd/system/spark-watchd.service"
install -D -m 0644 "$here/tmpfiles.conf" "$root/usr/lib/tmpfiles.d/spark-watchd.conf"
share="$root/usr/share/spark-watchd"
install -D -m 0644 -t "$share/prometheus" "$src"/deploy/prometheus/{rules.yml,prometheus-single.yml,prometheus-fleet.yml}
install -D -m 0644 -t "$share/prometheus/targets" "$src"/deploy/prometheus/targets/*.json
install -D -m 0644 -t "$share/alertmanager" "$src/deploy/alertmanager/alertmanager.yml"
install -D -m 0644 -t "$share/grafana/dashboards" "$src"/grafana/dashboards/*.json
install -D -m 0644 -t "$share/grafana/provisioning/dashboards" "$src"/grafana/provisioning/dashboards/*.yml
install -D -m 0644 -t "$share/grafana/provisioning/datasources" "$src"/grafana/provisioning/datasources/*.yml
doc="$root/usr/share/doc/spark-watchd"
install -d "$doc"
install -m 0644 "$here/copyright" "$doc/copyright"
for f in README.md docs/operator.md docs/alerts.md docs/runbook.md; do
    gzip -9nc "$src/$f" > "$doc/$(basename "$f").gz"
done
{
    printf 'spark-watchd (%s) unstable; urgency=medium\n\n' "$version"
    printf '  * Package built from spark-watchd %s (commit %s).\n\n' "$upstream" \
        "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    printf ' -- %s  %s\n' "${DEBFULLNAME:-spark-watchd maintainers} <${DEBEMAIL:-spark-watchd@users.noreply.github.com}>" \
        "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/spark-watchd"

# 6. Every ELF file must be for the target machine; its NEEDED libraries and glibc symbol versions
# become the package's Depends (dpkg-shlibdeps needs the target's libc installed, so it cannot serve arm64).
want_machine=$([ "$arch" = arm64 ] && echo AArch64 || echo X86-64)
glibc=2.17
needs_gcc=0
while IFS= read -r -d '' f; do
    head -c 4 "$f" | grep -q $'^\x7fELF' || continue
    m=$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')
    case "$m" in *"$want_machine"*) ;; *) echo "build.sh: $f is for '$m', not $arch" >&2; exit 1 ;; esac
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        case "$lib" in
            libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-*) ;;
            libgcc_s.so.1) needs_gcc=1 ;;
            *) echo "build.sh: $f needs $lib: add its package to Depends in build.sh" >&2; exit 1 ;;
        esac
    done
    v=$(readelf -V "$f" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -V | tail -1)
    [ -n "$v" ] && glibc=$(printf '%s\n%s\n' "$glibc" "$v" | sort -V | tail -1)
done < <(find "$opt" -type f -print0)
first=${PYTHONS%% *}
last=${PYTHONS##* }
next="${last%.*}.$((${last#*.} + 1))"
depends="python3 (>= $first), python3 (<< $next), libc6 (>= $glibc), adduser"
[ "$needs_gcc" = 1 ] && depends="$depends, libgcc-s1"

# 7. Control files, modes and times, then the archive.
install -d "$root/DEBIAN"
for s in postinst prerm postrm; do install -m 0755 "$here/$s" "$root/DEBIAN/$s"; done
echo /etc/spark-watchd/config.toml > "$root/DEBIAN/conffiles"
find "$root" -path "$root/DEBIAN" -prune -o -type d -exec chmod 0755 {} + -o -type f -perm /111 -exec chmod 0755 {} + \
    -o -type f -exec chmod 0644 {} +
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" \
    -e "s/@INSTALLED_SIZE@/$installed_size/" \
    -e "s/@MAINTAINER@/${DEBFULLNAME:-spark-watchd maintainers} <${DEBEMAIL:-spark-watchd@users.noreply.github.com}>/" \
    "$here/control.in" > "$root/DEBIAN/control"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb="$out/spark-watchd_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
say "built $deb ($(du -h "$deb" | cut -f1), installed $((installed_size / 1024)) MiB; Depends: $depends)"
