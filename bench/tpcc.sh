#!/usr/bin/env bash
# bench/tpcc.sh: test/tpcc's TPC-C-like workload (bench/tpcc; the one
# TestTPCC checks) on one MariaDB directly and through keyshard over two
# nodes (every table but item hash-sharded by its warehouse column, 2 x 2
# sub-tables, item global), in turn, ROUNDS times for TIME each. Each target is created and loaded
# through itself, then CLIENTS clients run TPC-C's mix (1% of new-order
# lines and 15% of payments for another warehouse), retrying deadlocks;
# one markdown row per target, the consistency conditions checked after;
# then what keyshard's deadlock detector did (its /metrics counters).
# Backends: scripts/backends.sh on 127.0.0.1:23600-23601 under
# /tmp/keyshard-bench-tpcc; keyshard on 127.0.0.1:23697.
# Env: KS_BIN (default: make build), WAREHOUSES (4), CLIENTS (8), TIME (10s),
# ROUNDS (3), PARAMS (go-sql-driver DSN parameters for both targets, e.g.
# interpolateParams=true for the text protocol; default: prepared
# statements), DOWN=1 stops the backends at the end, PPROF=1 writes a CPU
# profile of keyshard (20 s, from its first round) to .tmp/tpcc/keyshard.pprof.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench-tpcc
WORK=$PWD/.tmp/tpcc
mkdir -p "$WORK"
if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23600 >&2
for port in 23600 23601; do
	scripts/backends.sh sql "$port" "DROP DATABASE IF EXISTS ks_tpcc; CREATE DATABASE ks_tpcc; DROP DATABASE IF EXISTS ks_tpcc_direct; CREATE DATABASE ks_tpcc_direct"
done
{
	echo "web_addr: 127.0.0.1:23698"
	echo "web_pprof_auth: false"
	bench_users_node1 127.0.0.1:23697 | sed 's/23400/23600/'
	cat <<YAML
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:23601
    max_conns_limit: 32
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
YAML
	for tk in warehouse:w_id district:d_w_id customer:c_w_id history:h_w_id orders:o_w_id new_orders:no_w_id order_line:ol_w_id stock:s_w_id; do
		cat <<YAML
      - db: ks_tpcc
        table: ${tk%%:*}
        key: ${tk#*:}
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
YAML
	done
	cat <<YAML
      - db: ks_tpcc
        table: item
        nodes: [node1, node2]
        type: global
YAML
} >"$WORK/ks.yaml"
start_keyshard "$KS_BIN" "$WORK/ks.yaml" "$WORK/keyshard.log" 23697
go build -o "$WORK/tpcc" ./bench/tpcc
if [[ ${PPROF:-0} == 1 ]]; then
	secs=${TIME:-10s}
	secs=${secs%s}
	(sleep $((secs + 3)) && curl -s -o "$WORK/keyshard.pprof" "http://127.0.0.1:23698/debug/pprof/profile?seconds=20") &
fi
# keyshard's deadlock detector (proxy/deadlock): its counters around the
# runs (only the keyshard arm goes through it).
deadlock_metrics() {
	echo "start 0" # never empty (awk reads the first file as the before)
	curl -s "http://127.0.0.1:23698/metrics" | awk '/^keyshard_deadlock(s|_checks|_victims|_detection_seconds)_total /{print $1, $2}'
}
deadlock_metrics >"$WORK/deadlocks.before"
"$WORK/tpcc" -targets "one MariaDB=ks:ks@tcp(127.0.0.1:23600)/ks_tpcc_direct?${PARAMS:-},keyshard 2 nodes=ks:ks@tcp(127.0.0.1:23697)/ks_tpcc?${PARAMS:-}" \
	-pids "keyshard=$KS_PID,mariadbd node1=$(cat "$KS_BACKENDS_DIR/23600/pid"),mariadbd node2=$(cat "$KS_BACKENDS_DIR/23601/pid")" -warehouses "${WAREHOUSES:-4}" -clients "${CLIENTS:-8}" -time "${TIME:-10s}" -rounds "${ROUNDS:-3}" \
	"node1=ks:ks@tcp(127.0.0.1:23600)/" "node2=ks:ks@tcp(127.0.0.1:23601)/"
deadlock_metrics >"$WORK/deadlocks.after"
echo
echo "keyshard's deadlock detector over the keyshard rounds (cycles across nodes found, victims answered 1213, wait-for graphs read, mean detection latency):"
echo
awk 'NR==FNR {before[$1]=$2; next} {d[$1]=$2-before[$1]}
	END {
		v=d["keyshard_deadlock_victims_total"]
		printf "| deadlocks across nodes | victims (1213) | wait-for graphs read | mean detection ms |\n|---:|---:|---:|---:|\n"
		printf "| %d | %d | %d | %s |\n", d["keyshard_deadlocks_total"], v, d["keyshard_deadlock_checks_total"], (v > 0 ? sprintf("%.1f", 1000*d["keyshard_deadlock_detection_seconds_total"]/v) : "-")
	}' "$WORK/deadlocks.before" "$WORK/deadlocks.after"
