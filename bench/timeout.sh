#!/usr/bin/env bash
# bench/timeout.sh: statement time limits (max_execution_time). Two bench
# backends (127.0.0.1:23400, :23401 under /tmp/keyshard-bench), table
# bench_to.bt hash-sharded over 2 x 4 sub-tables, and two keyshards on
# them: 127.0.0.1:23491 with max_execution_time (LIMIT_MS, default 500)
# and :23492 without. Prints how long after the limit the client gets its
# error (a SLEEP on one node; a merge whose 8 legs compute for seconds),
# what is left running on the backends, and the CPU a limit costs a point
# read (bench/timeout).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/timeout
mkdir -p "$WORK"
LIMIT_MS=${LIMIT_MS:-500}
make -s build
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23400 >&2
for port in 23400 23401; do
	mysql_at "$port" -e "DROP DATABASE IF EXISTS bench_to; CREATE DATABASE bench_to"
done
two_node_yaml 127.0.0.1:23491 bench_to bt | sed "s/^    default: node1$/    default: node1\n    max_execution_time: $LIMIT_MS/" >"$WORK/limited.yaml"
two_node_yaml 127.0.0.1:23492 bench_to bt >"$WORK/plain.yaml"
bin/keyshard -config "$WORK/limited.yaml" >"$WORK/limited.log" 2>&1 &
lim=$!
bin/keyshard -config "$WORK/plain.yaml" >"$WORK/plain.log" 2>&1 &
plain=$!
trap 'kill -TERM $lim $plain 2>/dev/null || true' EXIT
for port in 23491 23492; do
	for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.2; done
done
mysql_at 23492 bench_to -e "CREATE TABLE bt (id INT PRIMARY KEY, k VARCHAR(20))"
mysql_at 23492 bench_to -e "INSERT INTO bt (id, k) VALUES $(seq -s, 0 63 | sed 's/\([0-9]*\)/(\1, "k\1")/g')"
go run ./bench/timeout -limit "${LIMIT_MS}ms" \
	-limited "ks:ks@tcp(127.0.0.1:23491)/bench_to?interpolateParams=true" -plain "ks:ks@tcp(127.0.0.1:23492)/bench_to?interpolateParams=true" -pids "$lim,$plain" \
	-backends "ks:ks@tcp(127.0.0.1:23400)/,ks:ks@tcp(127.0.0.1:23401)/"
