#!/usr/bin/env bash
# bench/pipeline.sh: what pipelining statements on backend connections
# would buy (issue 21), measured on MariaDB alone. bench/pipeline sends
# point selects straight to the bench backend (127.0.0.1:23400, sbtest1
# of bench/run.sh: run that once first), DEPTH statements per write on
# each of INFLIGHT/DEPTH connections, so every run has INFLIGHT statements
# in flight; perf counts MariaDB's syscalls and context switches per
# query, /proc its CPU. ROUNDS alternations of DEPTHS, TIME each.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/pipeline
mkdir -p "$WORK"
INFLIGHT=${INFLIGHT:-16}
DEPTHS=${DEPTHS:-"1 2 4 8"}
ROUNDS=${ROUNDS:-2}
TIME=${TIME:-5s}
CLK_TCK=$(getconf CLK_TCK)
scripts/backends.sh up 1 23400 >&2
mysql_at 23400 -N -e 'SELECT COUNT(*) FROM sbtest.sbtest1' >/dev/null 2>&1 ||
	{ echo "pipeline.sh: no sbtest.sbtest1 on 23400: run bench/run.sh once" >&2; exit 1; }
go build -o "$WORK/pipeline" ./bench/pipeline
MDB_PID=$(<"$KS_BACKENDS_DIR/23400/pid")
PERF_OK=0
perf_usable "$MDB_PID" && PERF_OK=1
trap arm_kill EXIT
declare -A SUM
add() { SUM[$1]=$(fcalc "${SUM[$1]:-0} + $2"); }
for ((r = 1; r <= ROUNDS; r++)); do
	for d in $DEPTHS; do
		c=$((INFLIGHT / d))
		((c > 0)) || { echo "pipeline.sh: depth $d is over INFLIGHT $INFLIGHT" >&2; exit 2; }
		arm_start mdb "$MDB_PID"
		out=$("$WORK/pipeline" -conns "$c" -depth "$d" -time "$TIME") || { echo "pipeline.sh: bench/pipeline failed" >&2; exit 1; }
		read -r total qps <<<"$out"
		arm_stop mdb "$total"
		add "$d/qps" "$qps"
		add "$d/cpu" "${ARM_CPU[mdb.0]}"
		[[ ${ARM_SYS[mdb.0]} == - ]] || { add "$d/sys" "${ARM_SYS[mdb.0]}"; add "$d/cs" "${ARM_CS[mdb.0]}"; }
		echo "round $r depth $d x $c connections: $qps qps, MariaDB ${ARM_CPU[mdb.0]} us, ${ARM_SYS[mdb.0]} syscalls, ${ARM_CS[mdb.0]} ctx switches per query" >&2
	done
done
echo "| statements per write | connections | QPS | MariaDB CPU µs/query | MariaDB syscalls/query | MariaDB ctx switches/query |"
echo "|---:|---:|---:|---:|---:|---:|"
for d in $DEPTHS; do
	m() { awk -v s="${SUM[$d/$1]:-}" -v n="$ROUNDS" -v f="$2" 'BEGIN { if (s == "") print "-"; else printf f, s / n }'; }
	echo "| $d | $((INFLIGHT / d)) | $(m qps %.0f) | $(m cpu %.1f) | $(m sys %.2f) | $(m cs %.2f) |"
done
