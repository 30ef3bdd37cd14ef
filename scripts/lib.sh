# shellcheck shell=bash
# lib.sh: helpers shared by the scripts that install packages and run
# throwaway servers (backends.sh, etcd.sh, chromium.sh). Source it after
# defining die.

# run_root runs a command as root (directly, or with sudo when available).
run_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

# apt_install PKG...: apt-get update, then install the packages, without
# letting their maintainer scripts start a system service (invoke-rc.d
# and deb-systemd-invoke honour policy-rc.d).
apt_install() {
	local policy=/usr/sbin/policy-rc.d added=0
	if [[ ! -e $policy ]]; then
		run_root sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy"
		added=1
	fi
	local rc=0
	run_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
	if ((rc == 0)); then
		run_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" || rc=$?
	fi
	((added)) && run_root rm -f "$policy"
	((rc == 0)) || die "apt-get failed (exit $rc)"
}

# lock serialises commands that change instances under BASE_DIR. The lock
# file sits next to the directory because down removes the directory.
lock() {
	command -v flock >/dev/null || return 0
	mkdir -p "$(dirname "$BASE_DIR")"
	exec 9>"$BASE_DIR.lock"
	flock -w 300 9 || die "timed out waiting for $BASE_DIR.lock"
}

inst_dir() { echo "$BASE_DIR/$1"; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The instances live in BASE_DIR/PORT/ (with a data/ directory); MARKER in
# BASE_DIR says the script made it.

# ensure_base makes BASE_DIR, marked as the script's.
ensure_base() {
	mkdir -p "$BASE_DIR"
	touch "$BASE_DIR/$MARKER"
}

# instances lists the ports of the instances under BASE_DIR.
instances() {
	local d
	[[ -d $BASE_DIR ]] || return 0
	for d in "$BASE_DIR"/*/; do
		d=${d%/}
		[[ -d $d/data && ${d##*/} =~ ^[0-9]+$ ]] && echo "${d##*/}"
	done | sort -n
}

# remove_base deletes BASE_DIR, only ever if the script made it.
remove_base() {
	if [[ -f $BASE_DIR/$MARKER ]]; then
		rm -rf "$BASE_DIR"
	else
		die "$BASE_DIR has no $MARKER marker; not removing it"
	fi
}
