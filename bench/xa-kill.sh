#!/usr/bin/env bash
# bench/xa-kill.sh: crossing transfers over two nodes through keyshard
# while it is SIGKILLed (bench/xakill): KILLS kills at even intervals in
# DUR against none, RUNS times each. A kill leaves a transaction's
# branches prepared with no decision (KS_FAILPOINT=kill:decide:1 after the
# serving process is killed): their row locks last until recovery rolls
# them back. With BEFORE=1 it also measures a build with the liveness rule
# disabled (recovery by xa_prepared_timeout only, as before it), from a
# copy of the tree. Backends: scripts/backends.sh on 127.0.0.1:23420-23421
# under /tmp/keyshard-bench-xakill; keyshard on 127.0.0.1:23498,
# xa_prepared_timeout 60s, xa_recover_interval 30s (the defaults).
# Env: KS_BIN, DUR (24s), KILLS (3), RUNS (2), WORKERS (8), BEFORE (0).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench-xakill
WORK=$PWD/.tmp/xakill
mkdir -p "$WORK"
if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
bins=("after:$KS_BIN")
if [[ ${BEFORE:-0} == 1 ]]; then
	rm -rf "$WORK/src" && mkdir -p "$WORK/src"
	git archive HEAD | tar -x -C "$WORK/src"
	sed -i 's/case x.liveness(b.gtrid, lives) == dead:/case false \&\& x.liveness(b.gtrid, lives) == dead:/' "$WORK/src/proxy/xa/recovery.go"
	grep -q 'case false && x.liveness' "$WORK/src/proxy/xa/recovery.go" || { echo "cannot disable the liveness rule" >&2; exit 1; }
	(cd "$WORK/src" && go build -o "$WORK/keyshard-before" ./cmd/keyshard)
	bins+=("before:$WORK/keyshard-before")
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23420 >&2
for port in 23420 23421; do
	scripts/backends.sh sql "$port" "DROP DATABASE IF EXISTS ks_xakill; CREATE DATABASE ks_xakill"
done
{
	two_node_yaml 127.0.0.1:23498 ks_xakill accounts | sed 's/127.0.0.1:23400/127.0.0.1:23420/; s/127.0.0.1:23401/127.0.0.1:23421/'
	echo "xa_prepared_timeout: 60s"
} >"$WORK/ks.yaml"
go build -o "$WORK/xakill" ./bench/xakill
echo "| build | run | kills | duration | transfers acked | per s | refused (lock wait) | longest gap without an ack | kills at | total balance |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"
for run in $(seq "${RUNS:-2}"); do
	for b in "${bins[@]}"; do
		for kills in 0 "${KILLS:-3}"; do
			[[ $kills == 0 && ${b%%:*} == before ]] && continue # no kill: the same code
			line=$("$WORK/xakill" -bin "${b#*:}" -config "$WORK/ks.yaml" -addr 127.0.0.1:23498 -log "$WORK/keyshard.log" \
				-dur "${DUR:-24s}" -kills "$kills" -workers "${WORKERS:-8}")
			echo "| ${b%%:*} | $run | $line |"
			# What a run left prepared goes before the next: a clean start.
			for port in 23420 23421; do
				scripts/backends.sh sql "$port" "XA RECOVER" | awk 'NR>1 && $4 ~ /^ks-/ {print $2, $3, $4}' |
					while read -r gl _ data; do
						scripts/backends.sh sql "$port" "XA ROLLBACK '${data:0:gl}','${data:gl}'" || true
					done
			done
		done
	done
done
