#!/usr/bin/env bash
# bench/frozen.sh: what 16 client threads see while their backend is frozen
# (SIGSTOP for FREEZE, default 12s), through keyshard with its default
# settings (backend_silence 5s, connect_timeout 3s) and directly
# (go-sql-driver without timeouts). One backend, 127.0.0.1:23400 under
# /tmp/keyshard-bench; keyshard on 127.0.0.1:23493 (bench/frozen).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/frozen
mkdir -p "$WORK"
FREEZE=${FREEZE:-12s}
make -s build
scripts/backends.sh install >/dev/null
scripts/backends.sh up 1 23400 >&2
one_node_yaml 127.0.0.1:23493 >"$WORK/ks.yaml"
bin/keyshard -config "$WORK/ks.yaml" >"$WORK/keyshard.log" 2>&1 &
pid=$!
trap 'kill -CONT "$(cat $KS_BACKENDS_DIR/23400/pid)" 2>/dev/null || true; kill -TERM $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/23493) 2>/dev/null && break; sleep 0.2; done
echo "| path | threads | freeze to first error, median | max | threads hung the whole freeze | errors | SIGCONT to first success |"
echo "|---|---:|---:|---:|---:|---:|---:|"
go run ./bench/frozen -dsn "ks:ks@tcp(127.0.0.1:23493)/" -pidfile "$KS_BACKENDS_DIR/23400/pid" -freeze "$FREEZE" -label keyshard
go run ./bench/frozen -dsn "ks:ks@tcp(127.0.0.1:23400)/" -pidfile "$KS_BACKENDS_DIR/23400/pid" -freeze "$FREEZE" -label direct
