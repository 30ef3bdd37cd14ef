#!/usr/bin/env bash
# chromium.sh: make sure a headless Chromium is installed for the browser
# tests (test/e2e/status_test.go), and print its path.
#
#   chromium.sh            install Debian's chromium (and a font to render
#                          text in screenshots) with apt-get if missing;
#                          no-op otherwise. Prints the binary's path.
#
# KS_CHROMIUM names a browser binary to use instead (nothing is installed).
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export LC_ALL=C

PKGS=(chromium fonts-dejavu-core)

die() {
	echo "chromium.sh: $*" >&2
	exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"

find_browser() {
	local c
	if [[ -n ${KS_CHROMIUM:-} ]]; then
		command -v "$KS_CHROMIUM" && return 0
		return 1
	fi
	for c in chromium chromium-browser google-chrome; do
		command -v "$c" && return 0
	done
	return 1
}

if find_browser; then
	exit 0
fi
[[ -z ${KS_CHROMIUM:-} ]] || die "KS_CHROMIUM=$KS_CHROMIUM is not an executable"

echo "chromium.sh: installing ${PKGS[*]} with apt-get" >&2
# A lock so that two test runs do not run apt-get at once.
if command -v flock >/dev/null; then
	exec 9>/tmp/keyshard-chromium.lock
	flock -w 600 9 || die "timed out waiting for /tmp/keyshard-chromium.lock"
	if find_browser; then
		exit 0
	fi
fi
run_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || die "apt-get update failed"
run_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${PKGS[@]}" >&2 ||
	die "apt-get install ${PKGS[*]} failed"
find_browser || die "no chromium after apt-get install ${PKGS[*]}"
