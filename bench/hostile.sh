#!/usr/bin/env bash
# bench/hostile.sh: keyshard's memory under clients that never log in (300
# and 1,000 connections announcing 16 MiB, or holding a 60 KiB login open)
# and under 50 sessions that each sent one 15 MB statement (bench/hostile).
# Runs each build given in KS_BINS (space-separated; default: this tree's)
# against one backend, 127.0.0.1:23400 under /tmp/keyshard-bench; keyshard
# on 127.0.0.1:23495 with no cap on connections not logged in
# (max_unauthenticated_per_host: 0), to see what each one costs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/hostile
mkdir -p "$WORK"
if [[ -z ${KS_BINS:-} ]]; then
	make -s build
	KS_BINS=bin/keyshard
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 1 23400 >&2
ulimit -n 8192 || true
{
	one_node_yaml 127.0.0.1:23495
	echo "web_addr: 127.0.0.1:23494"
	echo "web_user: bench"
	echo "web_password: bench"
	echo "max_connections: 0"
} >"$WORK/ks-old.yaml"
{
	cat "$WORK/ks-old.yaml"
	echo "max_unauthenticated_per_host: 0"
} >"$WORK/ks.yaml"
echo "| build | clients | keyshard RSS MiB |"
echo "|---|---|---:|"
for bin in $KS_BINS; do
	cfg=$WORK/ks.yaml
	"$bin" check-config "$cfg" >/dev/null 2>&1 || cfg=$WORK/ks-old.yaml # a build before the key
	"$bin" -config "$cfg" >"$WORK/keyshard.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/23495) 2>/dev/null && break; sleep 0.2; done
	go run ./bench/hostile -addr 127.0.0.1:23495 -pid "$pid" -web 127.0.0.1:23494 -label "$(basename "$bin")" || true
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
done
