#!/usr/bin/env bash
# The Debian package end to end, as root on a Debian/Ubuntu machine without spark-watchd installed:
# build amd64 twice (this version and a bumped one), lintian, install with apt, verify the installed unit,
# run the installed daemon as its user and scrape /metrics, upgrade, remove, reinstall under a refusing
# policy-rc.d, purge, and check nothing is left; then build arm64 and check every ELF inside is aarch64.
#
# Where systemd is not PID 1 (CI, containers) the maintainer scripts must skip starting; a stand-in
# systemctl (logging its calls; apt hands it to dpkg by DPkg::Path) and /run/systemd/system then show
# which calls they make when it is.
#
#   bash packaging/deb/test.sh        (about 5 minutes: three builds, each fetching its wheels)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test.sh: run as root (it installs and purges the package)" >&2; exit 1; }
[ "$(dpkg --print-architecture)" = amd64 ] || { echo "test.sh: expects an amd64 machine" >&2; exit 1; }
if dpkg-query -W -f='${Status}' spark-watchd 2>/dev/null | grep -q 'installed\|config-files'; then
    echo "test.sh: spark-watchd is already installed here; purge it first" >&2; exit 1
fi
getent passwd spark-watchd >/dev/null && { echo "test.sh: a spark-watchd user exists already" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
work=$(mktemp -d /tmp/spark-watchd-debtest.XXXXXX)
chmod 0755 "$work"
daemon_pid=""
made_run_systemd=0
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
    restore_policy
    [ "$made_run_systemd" = 1 ] && rmdir /run/systemd/system 2>/dev/null || true
    if dpkg-query -W spark-watchd >/dev/null 2>&1; then apt-get purge -y -qq spark-watchd >/dev/null || true; fi
    if [ -e "$work/state-before" ]; then rm -rf /var/lib/spark-watchd; mv "$work/state-before" /var/lib/spark-watchd; fi
    rm -rf "$work"
}
trap cleanup EXIT
# A state directory already here (a daemon run by hand as root, as CI's step 1 runs the README's command)
# is put aside and back at the end: the install below starts from none, and the purge must not take it.
if [ -e /var/lib/spark-watchd ]; then mv /var/lib/spark-watchd "$work/state-before"; fi
# The machine's policy-rc.d (Docker images carry one answering 101) is put back as it was at the end.
policy_saved=0
if [ -e /usr/sbin/policy-rc.d ]; then cp -p /usr/sbin/policy-rc.d "$work/policy-rc.d.orig"; policy_saved=1; fi
set_policy() {  # EXIT_CODE: what policy-rc.d answers every maintainer script
    printf '#!/bin/sh\nexit %s\n' "$1" > /usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
}
restore_policy() {
    if [ "$policy_saved" = 1 ]; then cp -p "$work/policy-rc.d.orig" /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi
}
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
apt_q() { apt-get "$@" -y -q -o Dpkg::Use-Pty=0 >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get $*"; }; }

version=$(sed -n 's/^__version__ = "\([^"]*\)"$/\1/p' "$repo/spark_watchd/__init__.py")
bumped="$version+test1"
step "build amd64 $version and $bumped"
# DEB_TEST_PREBUILT=DIR: take the packages already built there (build.sh --out DIR) instead of building.
if [ -n "${DEB_TEST_PREBUILT:-}" ]; then
    cp "$DEB_TEST_PREBUILT"/spark-watchd_{"$version","$bumped"}_amd64.deb "$DEB_TEST_PREBUILT/spark-watchd_${version}_arm64.deb" "$work/"
else
    bash "$here/build.sh" --arch amd64 --out "$work" 2>&1 | grep '^build.sh: built'
    bash "$here/build.sh" --arch amd64 --version "$bumped" --out "$work" 2>&1 | grep '^build.sh: built'
fi
deb="$work/spark-watchd_${version}_amd64.deb"
deb2="$work/spark-watchd_${bumped}_amd64.deb"

step "lintian: nothing left but what lintian-overrides explains"
out=$(lintian --fail-on none "$deb" 2>&1 | grep -v 'running with root privileges' || true)
[ -z "$out" ] || fail "lintian: $out"
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./lib/systemd/system/spark-watchd.service ./usr/lib/tmpfiles.d/spark-watchd.conf ./etc/spark-watchd/config.toml \
    ./usr/share/man/man1/spark-watchd.1.gz ./usr/share/spark-watchd/prometheus/rules.yml \
    ./usr/share/spark-watchd/grafana/dashboards/spark-overview.json ./usr/bin/spark-watchd \
    ./opt/spark-watchd/pyvenv.cfg; do
    grep -qxF "$f" <<<"$contents" || fail "$f is not in the package"
done
cmp <(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./lib/systemd/system/spark-watchd.service) \
    "$repo/systemd/spark-watchd.service" || fail "the packaged unit is not systemd/spark-watchd.service"

step "install with apt, without network (systemd is not PID 1 here: enabled, not started)"
# The dependencies first (from the archive), then the package inside a network namespace of its own
# where the machine allows one: no maintainer script may reach the network.
# shellcheck disable=SC2046  # one word per package
apt_q install $(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/,/ /g')
if unshare -n true 2>/dev/null; then
    unshare -n apt-get install -y -q -o Dpkg::Use-Pty=0 "$deb" >"$work/apt.log" 2>&1 \
        || { cat "$work/apt.log"; fail "apt-get install without network"; }
else
    echo "(no network namespace here: installing with the network up)"
    apt_q install "$deb"
fi
[ "$(dpkg-query -W -f='${Status} ${Version}' spark-watchd)" = "install ok installed $version" ] || fail "not installed"
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd spark-watchd) || fail "no spark-watchd user"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/spark-watchd ] && [ "$shell" = /usr/sbin/nologin ] \
    || fail "user: uid $uid home $home shell $shell"
[ "$(stat -c '%U:%G %a' /var/lib/spark-watchd)" = "spark-watchd:spark-watchd 750" ] \
    || fail "state dir: $(stat -c '%U:%G %a' /var/lib/spark-watchd)"
[ "$(stat -c '%U:%G %a' /etc/spark-watchd/config.toml)" = "root:spark-watchd 640" ] || fail "config mode"
[ "$(readlink /etc/systemd/system/multi-user.target.wants/spark-watchd.service)" = /lib/systemd/system/spark-watchd.service ] \
    || fail "the unit is not enabled"
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
ls /opt/spark-watchd/lib/python3/site-packages/spark_watchd/__pycache__/*.cpython-"${pyver/./}".pyc >/dev/null \
    || fail "postinst compiled nothing for Python $pyver"
[ "$(spark-watchd --version)" = "spark-watchd $version" ] || fail "spark-watchd --version"
/opt/spark-watchd/bin/python -c 'import sys; assert sys.prefix == "/opt/spark-watchd", sys.prefix
assert not any("dist-packages" in p for p in sys.path), sys.path' || fail "the environment is not its own"
man -w spark-watchd >/dev/null 2>&1 || [ -f /usr/share/man/man1/spark-watchd.1.gz ] || fail "no manual page"

step "systemd-analyze verify the installed unit: no output"
out=$(systemd-analyze verify /lib/systemd/system/spark-watchd.service 2>&1) || fail "verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"

step "run the installed daemon as the unit does (user spark-watchd, the packaged config) and scrape /metrics"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/spark-watchd.service)
# shellcheck disable=SC2086  # ExecStart's words
setpriv --reuid=spark-watchd --regid=spark-watchd --init-groups --inh-caps=-all \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin STATE_DIRECTORY=/var/lib/spark-watchd $exec_start --listen "127.0.0.1:$port" \
    --state-dir /var/lib/spark-watchd >"$work/daemon.log" 2>&1 &
daemon_pid=$!
served=0
for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/metrics" >"$work/metrics" 2>/dev/null && grep -q '^sparkwatchd_source_up' "$work/metrics"; then
        served=1; break
    fi
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 1
done
[ "$served" = 1 ] || { cat "$work/daemon.log"; fail "the installed daemon did not serve /metrics"; }
grep -q '^sparkwatchd_source_up{source="meminfo"} 1' "$work/metrics" || fail "meminfo down: $(grep source_up "$work/metrics")"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || { cat "$work/daemon.log"; fail "the daemon did not stop cleanly on SIGTERM"; }
daemon_pid=""
[ -n "$(find /var/lib/spark-watchd -mindepth 1 -user spark-watchd -print -quit)" ] || fail "the daemon wrote no state"

step "upgrade to $bumped under a (stand-in) running systemd: restarted, config and state kept"
echo '# kept across upgrades' >> /etc/spark-watchd/config.toml
echo marker > /var/lib/spark-watchd/test-marker
chown spark-watchd: /var/lib/spark-watchd/test-marker
mkdir -p "$work/bin"
cat > "$work/bin/systemctl" <<EOF
#!/bin/sh
echo "\$*" >> "$work/systemctl.log"
case "\$*" in *is-enabled*) echo enabled ;; esac
exit 0
EOF
chmod +x "$work/bin/systemctl"
if [ ! -d /run/systemd/system ]; then mkdir -p /run/systemd/system; made_run_systemd=1; fi
[ "$made_run_systemd" = 1 ] || fail "systemd runs here: this test would drive the real one"
set_policy 0
apt_q -o "DPkg::Path=$work/bin:/usr/sbin:/usr/bin:/sbin:/bin" install "$deb2"
[ "$(dpkg-query -W -f='${Version}' spark-watchd)" = "$bumped" ] || fail "not upgraded"
grep -qx -- '--system daemon-reload' "$work/systemctl.log" || fail "no daemon-reload: $(cat "$work/systemctl.log")"
grep -q -- 'restart spark-watchd.service' "$work/systemctl.log" || fail "not restarted: $(cat "$work/systemctl.log")"
grep -qx '# kept across upgrades' /etc/spark-watchd/config.toml || fail "the upgrade replaced the edited config"
[ -f /var/lib/spark-watchd/test-marker ] || fail "the upgrade lost the state"
[ "$(getent passwd spark-watchd | cut -d: -f3)" = "$uid" ] || fail "the upgrade changed the user"

step "remove: stopped, config, state and user kept"
: > "$work/systemctl.log"
apt_q -o "DPkg::Path=$work/bin:/usr/sbin:/usr/bin:/sbin:/bin" remove spark-watchd
grep -q -- 'stop spark-watchd.service' "$work/systemctl.log" || fail "not stopped: $(cat "$work/systemctl.log")"
[ ! -e /opt/spark-watchd ] || fail "/opt/spark-watchd left after remove: $(find /opt/spark-watchd | head)"
[ ! -e /usr/bin/spark-watchd ] || fail "/usr/bin/spark-watchd left after remove"
[ -f /etc/spark-watchd/config.toml ] && [ -f /var/lib/spark-watchd/test-marker ] && getent passwd spark-watchd >/dev/null \
    || fail "remove took config, state or user"

step "reinstall with policy-rc.d refusing (exit 101) over a state dir a root run left: handed over, not started; postinst again: no change"
# Between remove and reinstall the admin ran `spark-watchd run` by hand as root (the README's virtualenv install):
# the state directory and what that run wrote are root's, 0700, as a root run leaves them.
chown -R root:root /var/lib/spark-watchd
chmod 0700 /var/lib/spark-watchd
install -m 0600 /dev/null /var/lib/spark-watchd/root-run-state
set_policy 101
: > "$work/systemctl.log"
apt_q -o "DPkg::Path=$work/bin:/usr/sbin:/usr/bin:/sbin:/bin" install "$deb2"
restore_policy
! grep -q 'start spark-watchd' "$work/systemctl.log" || fail "started despite policy-rc.d: $(cat "$work/systemctl.log")"
[ "$(stat -c '%U:%G %a' /var/lib/spark-watchd)" = "spark-watchd:spark-watchd 750" ] \
    || fail "the root run's state dir was not handed over: $(stat -c '%U:%G %a' /var/lib/spark-watchd)"
notours=$(find /var/lib/spark-watchd ! -user spark-watchd -print)
[ -z "$notours" ] || fail "left root's in the state dir: $notours"
[ -f /var/lib/spark-watchd/test-marker ] && [ -f /var/lib/spark-watchd/root-run-state ] || fail "the hand-over lost state"
before=$(stat -c '%U:%G %a' /var/lib/spark-watchd /etc/spark-watchd/config.toml; getent passwd spark-watchd)
env DPKG_MAINTSCRIPT_PACKAGE=spark-watchd DPKG_MAINTSCRIPT_NAME=postinst PATH="$work/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    /var/lib/dpkg/info/spark-watchd.postinst configure "$bumped" || fail "postinst configure is not idempotent"
[ "$before" = "$(stat -c '%U:%G %a' /var/lib/spark-watchd /etc/spark-watchd/config.toml; getent passwd spark-watchd)" ] \
    || fail "a second postinst changed ownership, modes or the user"
rmdir /run/systemd/system && made_run_systemd=0

step "purge: nothing left"
apt_q purge spark-watchd
dpkg-query -W spark-watchd >/dev/null 2>&1 && fail "dpkg still knows spark-watchd"
for p in /opt/spark-watchd /etc/spark-watchd /var/lib/spark-watchd /usr/bin/spark-watchd \
    /lib/systemd/system/spark-watchd.service /etc/systemd/system/spark-watchd.service \
    /etc/systemd/system/multi-user.target.wants/spark-watchd.service; do
    [ ! -e "$p" ] && [ ! -L "$p" ] || fail "$p left after purge"
done
getent passwd spark-watchd >/dev/null && fail "user left after purge"
getent group spark-watchd >/dev/null && fail "group left after purge"
dpkg-statoverride --list | grep -q spark-watchd && fail "statoverride left after purge"
left=$(find /etc /var/lib /opt /usr /lib -xdev -path "$repo" -prune -o -name '*spark-watchd*' -print 2>/dev/null || true)
[ -z "$left" ] || fail "left after purge: $left"

step "build arm64: every ELF file inside is aarch64"
[ -n "${DEB_TEST_PREBUILT:-}" ] || bash "$here/build.sh" --arch arm64 --out "$work" 2>&1 | grep '^build.sh: built'
arm="$work/spark-watchd_${version}_arm64.deb"
[ "$(dpkg-deb -f "$arm" Architecture)" = arm64 ] || fail "arm64 control"
mkdir "$work/arm"
dpkg-deb -x "$arm" "$work/arm"
elves=0
while IFS= read -r -d '' f; do
    desc=$(file -b "$f")
    case "$desc" in
        ELF*) elves=$((elves + 1)); [[ "$desc" == *"ARM aarch64"* ]] || fail "not aarch64: ${f#"$work/arm"}: $desc" ;;
    esac
done < <(find "$work/arm" -type f -print0)
[ "$elves" -ge 4 ] || fail "only $elves ELF files in the arm64 package"
echo "arm64: $elves ELF files, all aarch64"
out=$(lintian --fail-on none "$arm" 2>&1 | grep -v 'running with root privileges' || true)
[ -z "$out" ] || fail "lintian arm64: $out"
echo "test.sh: all checks passed"
