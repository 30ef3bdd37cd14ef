#!/usr/bin/env bash
# Checks `make install` and `make uninstall` into throwaway DESTDIRs (make
# test runs it): the binary, the unit and the config land where they
# should with the right modes, the unit starts the installed binary, the
# binary runs and accepts the installed config, a second install keeps an
# edited config, PREFIX reaches the unit's ExecStart, and
# `systemd-analyze verify` accepts the unit when systemd-analyze exists.
# Touches nothing outside the temporary directories but bin/ (make build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
# Run from make test, the make calls below must not inherit its flags and
# variables (a -j without the jobserver, a DESTDIR or PREFIX).
unset MAKEFLAGS MFLAGS MAKELEVEL DESTDIR PREFIX SYSTEMD_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "install_test: FAIL: $*" >&2
	exit 1
}

# mode FILE WANT: FILE exists as a regular file with permissions WANT.
mode() {
	[[ -f $1 ]] || fail "$1 missing"
	local got
	got=$(stat -c %a "$1")
	[[ $got == "$2" ]] || fail "$1 has mode $got, want $2"
}

# execstart UNIT: the unit's ExecStart command line.
execstart() {
	sed -n 's/^ExecStart=//p' "$1"
}

# --- default PREFIX ---------------------------------------------------------
dest=$tmp/root
make -s install GO="$GO" DESTDIR="$dest" >/dev/null
bin=$dest/usr/local/bin/keyshard
unit=$dest/lib/systemd/system/keyshard.service
cfg=$dest/etc/keyshard/ks.yaml
mode "$bin" 755
mode "$unit" 644
mode "$cfg" 644
cmp -s etc/ks.yaml "$cfg" || fail "$cfg differs from etc/ks.yaml"

want="/usr/local/bin/keyshard -config /etc/keyshard/ks.yaml"
[[ $(execstart "$unit") == "$want" ]] || fail "ExecStart is '$(execstart "$unit")', want '$want'"

out=$("$bin" version) || fail "$bin version failed"
[[ $out == "keyshard "?* ]] || fail "$bin version said '$out'"
# In a git checkout LDFLAGS set the version from git describe.
if git rev-parse --git-dir >/dev/null 2>&1; then
	[[ $out != "keyshard dev" ]] || fail "$bin version said '$out': LDFLAGS not applied"
fi
"$bin" check-config "$cfg" >/dev/null || fail "$bin check-config $cfg failed"

# --- a second install keeps an operator's config ------------------------------
echo "# edited by the operator" >>"$cfg"
cp "$cfg" "$tmp/edited.yaml"
rm "$bin"
make -s install GO="$GO" DESTDIR="$dest" >/dev/null
cmp -s "$tmp/edited.yaml" "$cfg" || fail "a second make install overwrote $cfg"
mode "$bin" 755

# --- systemd-analyze verify -------------------------------------------------
# Verified on a copy whose ExecStart is the DESTDIR binary: the unit's own
# path (/usr/local/bin/keyshard) need not exist on this host.
if command -v systemd-analyze >/dev/null; then
	mkdir "$tmp/unit"
	sed "s|^ExecStart=/usr/local/bin/keyshard |ExecStart=$bin |" "$unit" >"$tmp/unit/keyshard.service"
	if ! vout=$(systemd-analyze verify --man=no "$tmp/unit/keyshard.service" 2>&1) || [[ -n $vout ]]; then
		echo "$vout" >&2
		fail "systemd-analyze verify complained about the unit"
	fi
else
	echo "install_test: systemd-analyze not found; unit not verified" >&2
fi

# --- uninstall ----------------------------------------------------------------
make -s uninstall DESTDIR="$dest" >/dev/null
[[ ! -e $bin ]] || fail "make uninstall left $bin"
[[ ! -e $unit ]] || fail "make uninstall left $unit"
cmp -s "$tmp/edited.yaml" "$cfg" || fail "make uninstall touched $cfg"

# --- PREFIX and SYSTEMD_DIR -----------------------------------------------------
dest=$tmp/opt
make -s install GO="$GO" DESTDIR="$dest" PREFIX=/opt/keyshard SYSTEMD_DIR=/etc/systemd/system >/dev/null
mode "$dest/opt/keyshard/bin/keyshard" 755
unit=$dest/etc/systemd/system/keyshard.service
mode "$unit" 644
want="/opt/keyshard/bin/keyshard -config /etc/keyshard/ks.yaml"
[[ $(execstart "$unit") == "$want" ]] || fail "with PREFIX=/opt/keyshard ExecStart is '$(execstart "$unit")', want '$want'"

echo "install_test: ok"
