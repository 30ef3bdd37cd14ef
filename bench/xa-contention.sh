#!/usr/bin/env bash
# bench/xa-contention.sh: crossing transfers (bench/xacontention): 8
# clients move money between two pairs of accounts, half one way and half
# the other, 15 s on one MariaDB directly and 15 s through keyshard with
# each pair's accounts on two nodes (transaction_mode xa), where a
# deadlock's cycle spans the nodes. Prints one markdown row per target,
# then keyshard's deadlock detector counters (mean detection latency).
# Backends: scripts/backends.sh on 127.0.0.1:23400-23401 under
# /tmp/keyshard-bench; keyshard on 127.0.0.1:23497.
# Env: KS_BIN (default: make build), BEFORE_BIN (another keyshard binary,
# run as a third target on 127.0.0.1:23498: e.g. a build without deadlock
# detection), CLIENTS (8), PAIRS (2), TIME (15s).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/xacontention
mkdir -p "$WORK"
if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23400 >&2
for port in 23400 23401; do
	scripts/backends.sh sql "$port" "DROP DATABASE IF EXISTS ks_bank; CREATE DATABASE ks_bank; DROP DATABASE IF EXISTS ks_bank_direct; CREATE DATABASE ks_bank_direct"
done
# acc: one sub-table per node, so accounts 2k (node1) and 2k+1 (node2)
# of each pair are on different nodes.
{
	echo "web_addr: 127.0.0.1:23496" # /metrics: the deadlock detector's counters
	two_node_yaml 127.0.0.1:23497 ks_bank acc | sed 's/locations: \[4, 4\]/locations: [1, 1]/'
} >"$WORK/ks.yaml"
start_keyshard "$KS_BIN" "$WORK/ks.yaml" "$WORK/keyshard.log" 23497
targets="one MariaDB=ks:ks@tcp(127.0.0.1:23400)/ks_bank_direct,keyshard 2 nodes=ks:ks@tcp(127.0.0.1:23497)/ks_bank"
if [[ -n ${BEFORE_BIN:-} ]]; then
	sed 's/127.0.0.1:23497/127.0.0.1:23498/; s/127.0.0.1:23496/127.0.0.1:23495/' "$WORK/ks.yaml" >"$WORK/ks-before.yaml"
	"$BEFORE_BIN" -config "$WORK/ks-before.yaml" >"$WORK/keyshard-before.log" 2>&1 &
	BEFORE_PID=$!
	trap 'kill -TERM $KS_PID $BEFORE_PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
	for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/23498) 2>/dev/null && break; sleep 0.2; done
	targets="$targets,keyshard 2 nodes ($(basename "$(dirname "$BEFORE_BIN")"))=ks:ks@tcp(127.0.0.1:23498)/ks_bank"
fi
go run ./bench/xacontention -targets "$targets" -clients "${CLIENTS:-8}" -pairs "${PAIRS:-2}" -time "${TIME:-15s}"
# Where a crossing transfer's time goes: keyshard's deadlock detector
# (proxy/deadlock), its counters for the keyshard target.
echo
curl -s http://127.0.0.1:23496/metrics | awk '/^keyshard_deadlock(s|_checks|_victims|_detection_seconds)_total /{v[$1]=$2}
	END {
		n=v["keyshard_deadlock_victims_total"]
		printf "keyshard: %d deadlocks across nodes, %d victims, %d wait-for graphs read, mean detection %s ms (from the start of the wait that closed the cycle to the victim'"'"'s stop)\n",
			v["keyshard_deadlocks_total"], n, v["keyshard_deadlock_checks_total"], (n > 0 ? sprintf("%.0f", 1000*v["keyshard_deadlock_detection_seconds_total"]/n) : "-")
	}'
