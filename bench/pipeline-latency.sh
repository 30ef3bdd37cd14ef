#!/usr/bin/env bash
# bench/pipeline-latency.sh: what backend_pipeline_depth costs a light
# load. Two keyshard instances on the bench backend (127.0.0.1:23400,
# sbtest1 of bench/run.sh: run that once first), one with pipelining off
# (:19710) and one with DEPTH (:19711), take sysbench point selects at
# THREADS clients in turn, ROUNDS alternations of TIME seconds; it
# reports QPS and the p99 latency of each, and the ratio.
#
#   THREADS=4 DEPTH=8 ROUNDS=3 TIME=8 KS_BIN=path bench/pipeline-latency.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
THREADS=${THREADS:-4}
DEPTH=${DEPTH:-8}
ROUNDS=${ROUNDS:-3}
TIME=${TIME:-8}
WORK=$(mktemp -d /tmp/keyshard-pipelat.XXXXXX)
scripts/backends.sh up 1 23400 >&2
mysql_at 23400 -N -e 'SELECT COUNT(*) FROM sbtest.sbtest1' >/dev/null 2>&1 ||
	{ echo "pipeline-latency.sh: no sbtest.sbtest1 on 23400: run bench/run.sh once" >&2; exit 1; }
if [[ -z ${KS_BIN:-} ]]; then
	go build -o "$WORK/keyshard" ./cmd/keyshard
	KS_BIN=$WORK/keyshard
fi
PIDS=()
for arm in "19710 1" "19711 $DEPTH"; do
	read -r port d <<<"$arm"
	{ one_node_yaml "127.0.0.1:$port"; echo "backend_pipeline_depth: $d"; } >"$WORK/ks$port.yaml"
	start_keyshard "$KS_BIN" "$WORK/ks$port.yaml" "$WORK/ks$port.log" "$port"
	PIDS+=("$KS_PID")
done
trap 'kill -TERM "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
declare -A SUM
add() { SUM[$1]=$(fcalc "${SUM[$1]:-0} + $2"); }
for ((r = 1; r <= ROUNDS; r++)); do
	for port in 19710 19711; do
		out=$(sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=ks --mysql-password=ks \
			--mysql-db=sbtest --tables=1 --db-ps-mode=disable --threads="$THREADS" --time="$TIME" --percentile=99 run)
		read -r qps p99 < <(awk '$1 == "queries:" { q = $3; gsub(/[(]/, "", q) } /99th percentile:/ { p = $3 } END { print q, p }' <<<"$out")
		add "$port/q" "$qps"
		add "$port/p" "$p99"
		echo "round $r :$port: $qps qps, p99 $p99 ms" >&2
	done
done
m() { fcalc "${SUM[$1]} / $ROUNDS"; }
echo "| threads | depth 1 QPS | depth $DEPTH QPS | depth 1 p99 ms | depth $DEPTH p99 ms | p99 ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
printf '| %s | %.0f | %.0f | %.3f | %.3f | %.2f |\n' "$THREADS" "$(m 19710/q)" "$(m 19711/q)" "$(m 19710/p)" "$(m 19711/p)" \
	"$(fcalc "${SUM[19711/p]} / ${SUM[19710/p]}")"
