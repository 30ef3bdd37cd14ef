#!/usr/bin/env bash
# bench/run.sh: keyshard against a direct connection, in the same run, as a
# ratio. See bench/README.md for what it measures and every option.
#
#   bench/run.sh [--workloads=LIST] [--threads=LIST] [--time=S] [--rounds=N]
#                [--skip-big] [--ks-bin=PATH] [--out=FILE] [--down] [--self-test]
#                [--ref=haproxy|none] [--pipe=DEPTH]
#
# Every option can also be given as an environment variable (WORKLOADS,
# THREADS, TIME, ROUNDS, SKIP_BIG=1, SKIP_SHARD=1, SHARD_THREADS, SKIP_PS=1, SKIP_MERGE=1,
# PS_WORKLOADS, PS_THREADS, KS_BIN, OUT, REF, PIPE, KS_EXTRA (ks.yaml lines to
# add, e.g. KS_EXTRA='digest_size: 0'),
# DOWN=1, SELF_TEST=1);
# flags win over the environment.
set -euo pipefail
CALLER_DIR=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROOT=$PWD
export LC_ALL=C

WORKLOADS=${WORKLOADS:-oltp_point_select oltp_read_only oltp_read_write}
THREADS=${THREADS:-4 16 64}
TIME=${TIME:-10}
ROUNDS=${ROUNDS:-2}
SKIP_BIG=${SKIP_BIG:-0}
SKIP_SHARD=${SKIP_SHARD:-0}
SHARD_THREADS=${SHARD_THREADS:-16}
SKIP_PS=${SKIP_PS:-0}
SKIP_MERGE=${SKIP_MERGE:-0}
PS_WORKLOADS=${PS_WORKLOADS:-oltp_point_select oltp_read_write}
PS_THREADS=${PS_THREADS:-16}
KS_BIN=${KS_BIN:-}
OUT=${OUT:-}
DOWN=${DOWN:-0}
SELF_TEST=${SELF_TEST:-0}
# REF=haproxy adds a third arm to the OLTP runs: HAProxy in TCP mode in
# front of the same backend, the cost any relay pays on this machine (no
# parsing, no pooling). none skips it.
REF=${REF:-haproxy}
REF_ADDR=${REF_ADDR:-127.0.0.1:19698}
# PIPE=N (N >= 2) adds an arm to the OLTP runs: a second keyshard, the same
# ks.yaml plus backend_pipeline_depth: N, in the same rounds. 0 or 1 skips it.
PIPE=${PIPE:-8}
PIPE_ADDR=${PIPE_ADDR:-127.0.0.1:19699}
TABLE_SIZE=${TABLE_SIZE:-10000}
BIG_ROWS=${BIG_ROWS:-1000000}
DIRECT_PORT=${DIRECT_PORT:-23400}
KS_ADDR=${KS_ADDR:-127.0.0.1:19696}
WEB_ADDR=${WEB_ADDR-127.0.0.1:19697}
# Bench backends live apart from the demo's and the tests' so that their
# `down` never stops the bench backend and vice versa.
export KS_BACKENDS_DIR=${KS_BACKENDS_DIR:-/tmp/keyshard-bench}

usage() {
	sed -n '2,10s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

while (($#)); do
	arg=$1
	shift
	case $arg in
	--*=*) name=${arg%%=*} val=${arg#*=} ;;
	--skip-big | --skip-shard | --skip-ps | --skip-merge | --down | --self-test | -h | --help) name=$arg val=1 ;;
	--*)
		(($#)) || usage
		name=$arg val=$1
		shift
		;;
	*) usage ;;
	esac
	case $name in
	--workloads) WORKLOADS=${val//,/ } ;;
	--threads) THREADS=${val//,/ } ;;
	--time) TIME=$val ;;
	--rounds) ROUNDS=$val ;;
	--skip-big) SKIP_BIG=$val ;;
	--skip-shard) SKIP_SHARD=$val ;;
	--skip-merge) SKIP_MERGE=$val ;;
	--skip-ps) SKIP_PS=$val ;;
	--ks-bin) KS_BIN=$val ;;
	--out) OUT=$val ;;
	--down) DOWN=$val ;;
	--self-test) SELF_TEST=$val ;;
	--ref) REF=$val ;;
	--pipe) PIPE=$val ;;
	*) usage ;;
	esac
done
WORKLOADS=${WORKLOADS//,/ }
THREADS=${THREADS//,/ }
[[ $PIPE =~ ^[0-9]+$ ]] || {
	echo "bench: PIPE must be a depth (0 or 1: no pipelined arm), got '$PIPE'" >&2
	exit 2
}
PIPE=$((10#$PIPE))
if ((PIPE > 1)) && [[ ${KS_EXTRA:-} == *backend_pipeline_depth* ]]; then
	echo "bench: KS_EXTRA sets backend_pipeline_depth: the keyshard arm would not be the unpipelined one; use PIPE=0 with it" >&2
	exit 2
fi
for v in TIME ROUNDS TABLE_SIZE BIG_ROWS DIRECT_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "bench: $v must be a positive integer, got '${!v}'" >&2
		exit 2
	}
done
case $REF in
haproxy | none) ;;
*)
	echo "bench: --ref must be haproxy or none, got '$REF'" >&2
	exit 2
	;;
esac
for t in $THREADS; do
	[[ $t =~ ^[1-9][0-9]*$ ]] || {
		echo "bench: bad thread count '$t'" >&2
		exit 2
	}
done

# Relative paths are the caller's, not the repo root's.
[[ -z $OUT || $OUT == /* ]] || OUT=$CALLER_DIR/$OUT
[[ -z $KS_BIN || $KS_BIN == /* ]] || KS_BIN=$CALLER_DIR/$KS_BIN

KS_PORT=${KS_ADDR##*:}
if [[ $SELF_TEST == 1 ]]; then
	# Both sides direct: checks the script and shows the noise floor (the
	# ratio should be ~1.00).
	B_PORT=$DIRECT_PORT
	B_NAME="direct (self-test)"
else
	B_PORT=$KS_PORT
	B_NAME=keyshard
fi

WORK=$(mktemp -d /tmp/keyshard-bench-run.XXXXXX)
KS_PID=
PIPE_PID=
STARTED_PID=
REF_PID=
FAILED=0
CLK_TCK=$(getconf CLK_TCK)

log() { echo "bench: $*" >&2; }

die() {
	log "$*"
	FAILED=1
	exit 1
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	arm_kill
	for pid in $KS_PID $PIPE_PID $STARTED_PID; do
		kill -0 "$pid" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n $REF_PID ]]; then
		kill -TERM "$REF_PID" 2>/dev/null || true
	fi
	if [[ $DOWN == 1 ]]; then
		scripts/backends.sh down >&2 || true
	fi
	if ((rc != 0 || FAILED)); then
		log "work dir kept for inspection: $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ks_alive [PID LOG]: dies if that keyshard (the main one by default) is gone.
ks_alive() {
	[[ $SELF_TEST == 1 ]] && return 0
	local pid=${1:-$KS_PID} logf=${2:-$WORK/keyshard.log}
	kill -0 "$pid" 2>/dev/null && return 0
	log "keyshard (pid $pid) died; last log lines:"
	tail -n 30 "$logf" >&2 || true
	die "keyshard is gone"
}

# start_ks YAML LOG ADDR: starts keyshard, waits until it serves on ADDR and
# sets STARTED_PID.
start_ks() {
	local yaml=$1 logf=$2 addr=$3 deadline
	if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
		die "$addr is already in use"
	fi
	"$KS_BIN" -config "$yaml" >"$logf" 2>&1 &
	STARTED_PID=$!
	deadline=$((SECONDS + 30))
	until mysql_at "${addr##*:}" --connect-timeout=1 -e 'SELECT 1' >/dev/null 2>&1; do
		ks_alive "$STARTED_PID" "$logf"
		((SECONDS < deadline)) || die "keyshard not serving on $addr after 30s (log: $logf)"
		sleep 0.2
	done
}

# ---------------------------------------------------------------- setup
# Two backends: the second is node2 of the sharded run.
scripts/backends.sh up 2 "$DIRECT_PORT" >&2
MDB_PID=$(<"$KS_BACKENDS_DIR/$DIRECT_PORT/pid")
PERF_OK=0
if perf_usable "$MDB_PID"; then PERF_OK=1; else log "perf unusable (PERF=0, or missing: apt-get install linux-perf): no syscall counts"; fi
[[ $SELF_TEST != 1 ]] || SKIP_SHARD=1
[[ $SELF_TEST != 1 ]] || SKIP_MERGE=1

if [[ $SELF_TEST != 1 ]]; then
	if [[ -z $KS_BIN ]]; then
		log "building bin/keyshard"
		go build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" \
			-o bin/keyshard ./cmd/keyshard
		KS_BIN=$ROOT/bin/keyshard
	fi
	[[ -x $KS_BIN ]] || die "$KS_BIN is not an executable"
	cat >"$WORK/bench.yaml" <<EOF
# Written by bench/run.sh: one unsharded node, everything goes to node1.
addr: $KS_ADDR
web_addr: $WEB_ADDR
web_user: bench
web_password: bench
log_level: warn
log_sql: off
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    max_conns_limit: 128
    user: ks
    password: ks
    master: 127.0.0.1:$DIRECT_PORT
  - name: node2
    max_conns_limit: 128
    user: ks
    password: ks
    master: 127.0.0.1:$((DIRECT_PORT + 1))
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    # sbtest stays unsharded (everything on node1); sbshard.sbtest1 is the
    # sharded run's table: hash on id, 2 nodes x 4 sub-tables.
    shard:
      - db: sbshard
        table: sbtest1
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
      # The merge run's table: 1,000,000 rows over 8 sub-tables.
      - db: sbshard
        table: big
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
EOF
	[[ -n $WEB_ADDR ]] || sed -i '/^web_addr:/d' "$WORK/bench.yaml"
	[[ -z ${KS_EXTRA:-} ]] || printf '%s\n' "$KS_EXTRA" >>"$WORK/bench.yaml"
	start_ks "$WORK/bench.yaml" "$WORK/keyshard.log" "$KS_ADDR"
	KS_PID=$STARTED_PID
	log "keyshard pid $KS_PID on $KS_ADDR${WEB_ADDR:+ (pprof: http://bench:bench@$WEB_ADDR/debug/pprof/)}"
	if ((PIPE > 1)); then
		# The same ks.yaml, its own address, no web listener, pipelining on.
		sed -e "s/^addr: .*/addr: $PIPE_ADDR/" -e '/^web_/d' -e '/^prometheus_addr:/d' "$WORK/bench.yaml" >"$WORK/pipe.yaml"
		echo "backend_pipeline_depth: $PIPE" >>"$WORK/pipe.yaml"
		start_ks "$WORK/pipe.yaml" "$WORK/keyshard-pipe.log" "$PIPE_ADDR"
		PIPE_PID=$STARTED_PID
		log "keyshard pid $PIPE_PID on $PIPE_ADDR (backend_pipeline_depth: $PIPE)"
	fi
fi
[[ $SELF_TEST != 1 ]] || REF=none

REF_PORT=${REF_ADDR##*:}
if [[ $REF == haproxy ]]; then
	command -v haproxy >/dev/null || scripts/backends.sh install haproxy >&2
	if (exec 3<>"/dev/tcp/${REF_ADDR%:*}/$REF_PORT") 2>/dev/null; then
		die "$REF_ADDR (the haproxy reference) is already in use"
	fi
	# HAProxy's defaults (one thread per CPU), TCP mode: bytes in, bytes out.
	cat >"$WORK/haproxy.cfg" <<EOF
global
    maxconn 4096
    pidfile $WORK/haproxy.pid
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
listen ref
    bind $REF_ADDR
    server direct 127.0.0.1:$DIRECT_PORT
EOF
	haproxy -f "$WORK/haproxy.cfg" -D || die "haproxy did not start (config $WORK/haproxy.cfg)"
	for _ in $(seq 50); do
		[[ -s $WORK/haproxy.pid ]] && break
		sleep 0.1
	done
	REF_PID=$(head -n 1 "$WORK/haproxy.pid" 2>/dev/null || true)
	[[ -n $REF_PID ]] || die "haproxy wrote no pid file"
	log "haproxy $(haproxy -v | awk 'NR == 1 { print $3 }') pid $REF_PID on $REF_ADDR (reference relay)"
fi

SB_COMMON=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=ks --mysql-password=ks
	--tables=1 --table-size="$TABLE_SIZE")

rows=$(mysql_at "$DIRECT_PORT" -N sbtest -e 'SELECT COUNT(*) FROM sbtest1' 2>/dev/null || echo 0)
if [[ $rows != "$TABLE_SIZE" ]]; then
	log "sysbench prepare: sbtest1 with $TABLE_SIZE rows"
	sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db=sbtest --mysql-port="$DIRECT_PORT" cleanup >/dev/null
	sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db=sbtest --mysql-port="$DIRECT_PORT" prepare >"$WORK/prepare.log" ||
		die "sysbench prepare failed: $(tail -n 5 "$WORK/prepare.log")"
fi

# ---------------------------------------------------------------- OLTP
# run_sysbench PORT WORKLOAD THREADS LOGFILE [DB [PS_MODE]] -> "qps p95_ms total_queries"
run_sysbench() {
	local port=$1 wl=$2 th=$3 out=$4 db=${5:-sbtest} ps=${6:-disable}
	if ! sysbench "$wl" "${SB_COMMON[@]}" --db-ps-mode="$ps" --mysql-db="$db" --mysql-port="$port" --threads="$th" --time="$TIME" \
		--report-interval=0 --percentile=95 run >"$out" 2>&1; then
		log "sysbench $wl threads=$th port=$port failed:"
		tail -n 15 "$out" >&2
		return 1
	fi
	awk '
		$1 == "queries:" { total = $2; qps = $3; gsub(/[(]/, "", qps) }
		/95th percentile:/ { p95 = $3 }
		END { if (qps == "" || p95 == "") exit 1; print qps, p95, total }' "$out"
}

declare -A SUM
add() { SUM[$1]=$(fcalc "${SUM[$1]:-0} + $2"); }

# costs ARM WL TH KEY...: adds the per-query costs arm_stop measured for
# ARM's processes, the i-th under the i-th KEY ("" skips it): syscalls
# (c.KEY.sys), context switches (c.KEY.cs), CPU µs (c.KEY.cpu).
costs() {
	local arm=$1 key=$2/$3 i=0 k
	shift 3
	for k in "$@"; do
		if [[ -n $k && -n ${ARM_CPU[$arm.$i]:-} ]]; then
			add "$key/c.$k.cpu" "${ARM_CPU[$arm.$i]}"
			add "$key/c.$k.n" 1
			if [[ ${ARM_SYS[$arm.$i]} != - ]]; then
				add "$key/c.$k.sys" "${ARM_SYS[$arm.$i]}"
				add "$key/c.$k.cs" "${ARM_CS[$arm.$i]}"
				add "$key/c.$k.pn" 1
			fi
		fi
		i=$((i + 1))
	done
}

n=0
for wl in $WORKLOADS; do
	for th in $THREADS; do
		for ((r = 1; r <= ROUNDS; r++)); do
			n=$((n + 1))
			arm_start direct "$MDB_PID"
			res=$(run_sysbench "$DIRECT_PORT" "$wl" "$th" "$WORK/$wl.$th.$r.direct.log") || {
				arm_stop direct 1
				FAILED=1
				continue
			}
			read -r qps p95 total <<<"$res"
			arm_stop direct "$total"
			costs direct "$wl" "$th" dm
			add "$wl/$th/dq" "$qps"
			add "$wl/$th/dp" "$p95"
			add "$wl/$th/dn" 1
			log "$wl threads=$th round $r: direct   $qps qps, p95 $p95 ms, MariaDB CPU $(printf %.1f "${ARM_CPU[direct.0]}") us/query"

			ks_alive
			if [[ $SELF_TEST == 1 ]]; then arm_start ks "$MDB_PID"; else arm_start ks "$MDB_PID" "$KS_PID"; fi
			res=$(run_sysbench "$B_PORT" "$wl" "$th" "$WORK/$wl.$th.$r.keyshard.log") || {
				arm_stop ks 1
				FAILED=1
				ks_alive
				continue
			}
			read -r qps p95 total <<<"$res"
			arm_stop ks "$total"
			costs ks "$wl" "$th" km k
			add "$wl/$th/kq" "$qps"
			add "$wl/$th/kp" "$p95"
			add "$wl/$th/kn" 1
			cpu="n/a"
			[[ $SELF_TEST == 1 ]] || cpu=$(printf %.1f "${ARM_CPU[ks.1]}")
			log "$wl threads=$th round $r: $B_NAME $qps qps, p95 $p95 ms, proxy CPU $cpu us/query, syscalls ${ARM_SYS[ks.1]:--}/query"

			if [[ -n $PIPE_PID ]]; then
				ks_alive "$PIPE_PID" "$WORK/keyshard-pipe.log"
				arm_start pipe "$MDB_PID" "$PIPE_PID"
				if res=$(run_sysbench "${PIPE_ADDR##*:}" "$wl" "$th" "$WORK/$wl.$th.$r.pipelined.log"); then
					read -r qps p95 total <<<"$res"
					arm_stop pipe "$total"
					costs pipe "$wl" "$th" xm x
					add "$wl/$th/xq" "$qps"
					add "$wl/$th/xp" "$p95"
					add "$wl/$th/xn" 1
					log "$wl threads=$th round $r: pipelined $qps qps, p95 $p95 ms, proxy CPU $(printf %.1f "${ARM_CPU[pipe.1]}") us/query, syscalls ${ARM_SYS[pipe.1]:--}/query"
				else
					arm_stop pipe 1
					FAILED=1
					ks_alive "$PIPE_PID" "$WORK/keyshard-pipe.log"
				fi
			fi

			[[ $REF == haproxy ]] || continue
			arm_start ref "$MDB_PID" "$REF_PID"
			res=$(run_sysbench "$REF_PORT" "$wl" "$th" "$WORK/$wl.$th.$r.haproxy.log") || {
				arm_stop ref 1
				FAILED=1
				continue
			}
			read -r qps p95 total <<<"$res"
			arm_stop ref "$total"
			costs ref "$wl" "$th" rm r
			add "$wl/$th/rq" "$qps"
			add "$wl/$th/rn" 1
			log "$wl threads=$th round $r: haproxy  $qps qps, p95 $p95 ms, CPU $(printf %.1f "${ARM_CPU[ref.1]}") us/query, syscalls ${ARM_SYS[ref.1]}/query"
		done
	done
done

OLTP_RSS=
[[ $SELF_TEST == 1 ]] || OLTP_RSS=$(vm_kib "$KS_PID" VmHWM)

# ---------------------------------------------------------------- 1M rows
# make_big PORT DB TABLE WHERE: a table of big's shape with the rows of
# 1..BIG_ROWS that WHERE keeps, unless it has them already.
make_big() {
	local port=$1 db=$2 table=$3 where=$4 want=$5
	rows=$(mysql_at "$port" -N "$db" -e "SELECT COUNT(*) FROM $table" 2>/dev/null || echo 0)
	[[ $rows != "$want" ]] || return 0
	log "creating $db.$table on 127.0.0.1:$port with $want rows"
	# As root over the socket, without binlogging the bulk insert.
	scripts/backends.sh sql "$port" "
		SET SESSION sql_log_bin = 0;
		CREATE DATABASE IF NOT EXISTS $db;
		USE $db;
		DROP TABLE IF EXISTS $table;
		CREATE TABLE $table (
		  id  INT UNSIGNED NOT NULL PRIMARY KEY,
		  k   INT UNSIGNED NOT NULL,
		  c   CHAR(120) NOT NULL,
		  pad CHAR(60) NOT NULL
		) ENGINE=InnoDB;
		INSERT INTO $table
		  SELECT seq, seq % 100003, CONCAT_WS('-', MD5(seq), MD5(seq + 1), MD5(seq + 2)), MD5(seq * 31)
		  FROM seq_1_to_${BIG_ROWS} WHERE $where;" >&2
}
if [[ $SKIP_BIG != 1 || $SKIP_MERGE != 1 ]]; then
	make_big "$DIRECT_PORT" sbtest big 1 "$BIG_ROWS"
fi
if [[ $SKIP_BIG != 1 ]]; then
	# Peak RSS of the streaming test alone: reset VmHWM to the current RSS.
	if [[ $SELF_TEST != 1 ]]; then
		echo 5 >"/proc/$KS_PID/clear_refs" 2>/dev/null || log "cannot reset VmHWM; peak RSS covers the whole run"
	fi
	# big_select PORT -> seconds
	big_select() {
		local t0 t1
		t0=$(date +%s%N)
		mysql_at "$1" --quick sbtest -e 'SELECT * FROM big' >/dev/null || return 1
		t1=$(date +%s%N)
		fcalc "($t1 - $t0) / 1e9"
	}
	for ((r = 1; r <= ROUNDS; r++)); do
		if s=$(big_select "$DIRECT_PORT"); then
			add big/d "$s"
			add big/dn 1
			log "SELECT * FROM big round $r: direct   $(printf %.2f "$s") s"
		else
			FAILED=1
		fi
		ks_alive
		t0=0
		[[ $SELF_TEST == 1 ]] || t0=$(cpu_ticks "$KS_PID")
		if s=$(big_select "$B_PORT"); then
			add big/k "$s"
			add big/kn 1
			if [[ $SELF_TEST != 1 ]]; then
				t1=$(cpu_ticks "$KS_PID")
				add big/cpu "$(fcalc "($t1 - $t0) / $CLK_TCK")"
			fi
			log "SELECT * FROM big round $r: $B_NAME $(printf %.2f "$s") s"
		else
			FAILED=1
			ks_alive
		fi
	done
	BIG_RSS=
	[[ $SELF_TEST == 1 ]] || BIG_RSS=$(vm_kib "$KS_PID" VmHWM)
fi

# ---------------------------------------------------------------- sharded
# oltp_point_select on sbshard.sbtest1, hash-sharded over both backends
# (sub-tables 0-3 on node1 and 4-7 on node2, filled directly with the same
# rows as sbtest.sbtest1's shape), against the same workload on the
# unsharded sbtest through keyshard, alternating: the cost of routing.
if [[ $SKIP_SHARD != 1 ]]; then
	for i in 0 1 2 3 4 5 6 7; do
		port=$DIRECT_PORT
		((i < 4)) || port=$((DIRECT_PORT + 1))
		rows=$(mysql_at "$port" -N -e "SELECT COUNT(*) FROM sbshard.sbtest1_000$i" 2>/dev/null || echo 0)
		want=$(((TABLE_SIZE - i + 7) / 8))
		((i > 0)) || want=$((TABLE_SIZE / 8))
		if [[ $rows != "$want" ]]; then
			log "preparing sbshard.sbtest1_000$i on 127.0.0.1:$port"
			scripts/backends.sh sql "$port" "
				SET SESSION sql_log_bin = 0;
				CREATE DATABASE IF NOT EXISTS sbshard;
				DROP TABLE IF EXISTS sbshard.sbtest1_000$i;
				CREATE TABLE sbshard.sbtest1_000$i (
				  id  INT NOT NULL PRIMARY KEY,
				  k   INT NOT NULL DEFAULT 0,
				  c   CHAR(120) NOT NULL DEFAULT '',
				  pad CHAR(60) NOT NULL DEFAULT '',
				  KEY k_1 (k)
				) ENGINE=InnoDB;
				INSERT INTO sbshard.sbtest1_000$i (id, k, c, pad)
				  SELECT seq, seq, REPEAT('c', 119), REPEAT('p', 59) FROM sbshard.seq_1_to_$TABLE_SIZE WHERE seq % 8 = $i;" >/dev/null
		fi
	done
	for ((r = 1; r <= ROUNDS; r++)); do
		ks_alive
		for side in plain sharded; do
			db=sbtest
			[[ $side == plain ]] || db=sbshard
			t0=$(cpu_ticks "$KS_PID")
			if res=$(run_sysbench "$KS_PORT" oltp_point_select "$SHARD_THREADS" "$WORK/shard.$side.$r.log" "$db"); then
				read -r qps p95 total <<<"$res"
				t1=$(cpu_ticks "$KS_PID")
				add "shard/$side/q" "$qps"
				add "shard/$side/p" "$p95"
				add "shard/$side/cpu" "$(fcalc "($t1 - $t0) / $CLK_TCK * 1000000 / $total")"
				add "shard/$side/n" 1
				log "point_select threads=$SHARD_THREADS round $r: keyshard $side ($db) $qps qps, p95 $p95 ms"
			else
				FAILED=1
			fi
		done
	done
fi

# ---------------------------------------------------------------- merge
# Scatter-gather (bench/mergebench): sbshard.big is sbtest.big's rows over
# 8 sub-tables (id % 8), filled directly on the backends.
MERGE_REPORT=
if [[ $SKIP_MERGE != 1 ]]; then
	for i in 0 1 2 3 4 5 6 7; do
		port=$DIRECT_PORT
		((i < 4)) || port=$((DIRECT_PORT + 1))
		want=$(((BIG_ROWS - i + 8) / 8))
		((i > 0)) || want=$((BIG_ROWS / 8))
		make_big "$port" sbshard "big_000$i" "seq % 8 = $i" "$want"
	done
	ks_alive
	if MERGE_REPORT=$(go run ./bench/mergebench -proxy "$KS_ADDR" -nodes "127.0.0.1:$DIRECT_PORT,127.0.0.1:$((DIRECT_PORT + 1))" \
		-pid "$KS_PID" -rounds "$ROUNDS"); then
		log "merge: done"
	else
		FAILED=1
	fi
fi

# ---------------------------------------------------------------- prepared
# The same workloads with server-side prepared statements
# (sysbench --db-ps-mode=auto): direct, keyshard prepared, keyshard text,
# alternating. After each prepared run through keyshard the backend's
# Prepared_stmt_count is read: keyshard's per-connection statement cache
# must keep it under max_conns_limit x stmt_cache_size.
PS_MAX_STMTS=0
if [[ $SKIP_PS != 1 ]]; then
	for wl in $PS_WORKLOADS; do
		for ((r = 1; r <= ROUNDS; r++)); do
			for side in direct ps text; do
				port=$B_PORT mode=auto
				[[ $side != direct ]] || port=$DIRECT_PORT
				[[ $side != text ]] || mode=disable
				ks_alive
				if res=$(run_sysbench "$port" "$wl" "$PS_THREADS" "$WORK/ps.$wl.$side.$r.log" sbtest "$mode"); then
					read -r qps p95 _ <<<"$res"
					add "ps/$wl/$side/q" "$qps"
					add "ps/$wl/$side/p" "$p95"
					add "ps/$wl/$side/n" 1
					log "$wl threads=$PS_THREADS round $r: $side (ps-mode $mode) $qps qps, p95 $p95 ms"
				else
					FAILED=1
				fi
				if [[ $side == ps ]]; then
					c=$(mysql_at "$DIRECT_PORT" -N -e "SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'" | awk '{ print $2 }')
					((c <= PS_MAX_STMTS)) || PS_MAX_STMTS=$c
				fi
			done
		done
	done
fi

# ---------------------------------------------------------------- report
# mean KEY COUNTKEY FORMAT
mean() {
	local n=${SUM[$2]:-0}
	if [[ -z ${SUM[$1]:-} || $n == 0 || $n == 0.000000 ]]; then
		echo "-"
	else
		awk -v s="${SUM[$1]}" -v n="$n" -v f="$3" 'BEGIN { printf f, s / n }'
	fi
}

# qps WL TH: sets dq, kq, rq and xq to the mean QPS of the direct,
# keyshard, HAProxy and pipelined arms ("-": none).
qps() {
	dq=$(mean "$1/$2/dq" "$1/$2/dn" %.0f)
	kq=$(mean "$1/$2/kq" "$1/$2/kn" %.0f)
	rq=$(mean "$1/$2/rq" "$1/$2/rn" %.0f)
	xq=$(mean "$1/$2/xq" "$1/$2/xn" %.0f)
}

ver=$(git describe --always --dirty 2>/dev/null || echo dev)
ksver=
[[ $SELF_TEST == 1 ]] || ksver=$("$KS_BIN" -version 2>/dev/null || true)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
dbver=$(mysql_at "$DIRECT_PORT" -N -e 'SELECT VERSION()')
{
	echo
	echo "### $(date -u '+%Y-%m-%d %H:%M UTC') - ${ksver:-keyshard} (git $ver)$([[ $SELF_TEST == 1 ]] && echo ' - SELF_TEST: both sides direct')"
	echo
	echo "$(nproc) CPUs ($cpu_model), MariaDB $dbver, $(sysbench --version)." \
		"sysbench --tables=1 --table-size=$TABLE_SIZE --db-ps-mode=disable, ${TIME}s per run," \
		"$ROUNDS rounds alternating direct/keyshard$([[ -n $PIPE_PID ]] && echo /pipelined)$([[ $REF == haproxy ]] && echo /haproxy); means over rounds. Client, proxy and server share the machine."
	echo
	echo "| workload | threads | direct QPS | keyshard QPS | keyshard/direct | direct p95 ms | keyshard p95 ms | proxy CPU µs/query |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for wl in $WORKLOADS; do
		for th in $THREADS; do
			qps "$wl" "$th"
			dp=$(mean "$wl/$th/dp" "$wl/$th/dn" %.2f)
			kp=$(mean "$wl/$th/kp" "$wl/$th/kn" %.2f)
			cpu=$(mean "$wl/$th/c.k.cpu" "$wl/$th/c.k.n" %.0f)
			[[ $SELF_TEST == 1 ]] && cpu="n/a"
			echo "| ${wl#oltp_} | $th | $dq | $kq | $(ratio "$kq" "$dq") | $dp | $kp | $cpu |"
		done
	done
	if [[ $REF == haproxy ]]; then
		echo
		echo "The same runs through HAProxy in TCP mode (the reference relay: no parsing, no pooling), in the same rounds:"
		echo
		echo "| workload | threads | haproxy QPS | haproxy/direct | keyshard/haproxy | haproxy CPU µs/query | keyshard CPU µs/query |"
		echo "|---|---:|---:|---:|---:|---:|---:|"
		for wl in $WORKLOADS; do
			for th in $THREADS; do
				qps "$wl" "$th"
				echo "| ${wl#oltp_} | $th | $rq | $(ratio "$rq" "$dq") | $(ratio "$kq" "$rq") |" \
					"$(mean "$wl/$th/c.r.cpu" "$wl/$th/c.r.n" %.0f) | $(mean "$wl/$th/c.k.cpu" "$wl/$th/c.k.n" %.0f) |"
			done
		done
	fi
	if [[ -n $PIPE_PID ]]; then
		echo
		echo "The same runs through a second keyshard with backend_pipeline_depth: $PIPE (autocommit reads of sessions in the same state share backend connections), in the same rounds:"
		echo
		echo "| workload | threads | pipelined QPS | pipelined/direct | pipelined/keyshard | pipelined/haproxy | pipelined p95 ms | proxy CPU µs/query |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|"
		for wl in $WORKLOADS; do
			for th in $THREADS; do
				qps "$wl" "$th"
				echo "| ${wl#oltp_} | $th | $xq | $(ratio "$xq" "$dq") | $(ratio "$xq" "$kq") | $(ratio "$xq" "$rq") |" \
					"$(mean "$wl/$th/xp" "$wl/$th/xn" %.2f) | $(mean "$wl/$th/c.x.cpu" "$wl/$th/c.x.n" %.0f) |"
			done
		done
	fi
	echo
	echo "Per query in the same runs, for each arm: syscalls and context switches (perf stat, every thread)" \
		"and CPU µs (/proc) of the proxy and of MariaDB. Fewer syscalls and wake-ups per query on both sides is what a proxy can win:"
	echo
	echo "| workload | threads | arm | proxy syscalls | proxy ctx switches | proxy CPU µs | MariaDB syscalls | MariaDB ctx switches | MariaDB CPU µs |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
	for wl in $WORKLOADS; do
		for th in $THREADS; do
			for arm in "direct::dm" "$B_NAME:k:km" "pipelined:x:xm" "haproxy:r:rm"; do
				IFS=: read -r name p m <<<"$arm"
				[[ $name != haproxy || $REF == haproxy ]] || continue
				[[ $name != pipelined || -n $PIPE_PID ]] || continue
				row="| ${wl#oltp_} | $th | $name"
				for k in "$p" "$m"; do
					if [[ -z $k ]]; then
						row+=" | - | - | -"
					else
						row+=" | $(mean "$wl/$th/c.$k.sys" "$wl/$th/c.$k.pn" %.1f) | $(mean "$wl/$th/c.$k.cs" "$wl/$th/c.$k.pn" %.1f)"
						row+=" | $(mean "$wl/$th/c.$k.cpu" "$wl/$th/c.$k.n" %.1f)"
					fi
				done
				echo "$row |"
			done
		done
	done
	if [[ -n $OLTP_RSS ]]; then
		echo
		echo "keyshard peak RSS during the OLTP runs: $(awk -v k="$OLTP_RSS" 'BEGIN { printf "%.1f", k / 1024 }') MiB."
	fi
	if [[ $SKIP_BIG != 1 ]]; then
		d=$(mean big/d big/dn %.2f)
		k=$(mean big/k big/kn %.2f)
		echo
		echo "\`SELECT * FROM big\` ($BIG_ROWS rows, \`mariadb --quick\` to /dev/null):"
		echo
		echo "| direct s | keyshard s | keyshard/direct | keyshard CPU s | keyshard peak RSS MiB |"
		echo "|---:|---:|---:|---:|---:|"
		kcpu="n/a" rss="n/a"
		if [[ $SELF_TEST != 1 ]]; then
			kcpu=$(mean big/cpu big/kn %.2f)
			rss=$(awk -v k="${BIG_RSS:-0}" 'BEGIN { printf "%.1f", k / 1024 }')
		fi
		echo "| $d | $k | $(ratio "$k" "$d") | $kcpu | $rss |"
	fi
	if [[ $SKIP_SHARD != 1 ]]; then
		pq=$(mean shard/plain/q shard/plain/n %.0f)
		sq=$(mean shard/sharded/q shard/sharded/n %.0f)
		echo
		echo "Sharded point_select through keyshard ($SHARD_THREADS threads; sbshard.sbtest1 hash-sharded 2 nodes x 4 sub-tables) vs the unsharded table through keyshard:"
		echo
		echo "| unsharded QPS | sharded QPS | sharded/unsharded | unsharded p95 ms | sharded p95 ms | unsharded CPU µs/query | sharded CPU µs/query |"
		echo "|---:|---:|---:|---:|---:|---:|---:|"
		echo "| $pq | $sq | $(ratio "$sq" "$pq") | $(mean shard/plain/p shard/plain/n %.2f) | $(mean shard/sharded/p shard/sharded/n %.2f) |" \
			"$(mean shard/plain/cpu shard/plain/n %.0f) | $(mean shard/sharded/cpu shard/sharded/n %.0f) |"
	fi
	if [[ $SKIP_PS != 1 ]]; then
		echo
		echo "Prepared statements (sysbench --db-ps-mode=auto, $PS_THREADS threads): keyshard prepared vs keyshard text (--db-ps-mode=disable) and vs direct prepared." \
			"Backend Prepared_stmt_count after the keyshard prepared runs: at most $PS_MAX_STMTS (bound: 128 connections x stmt_cache_size 64)."
		echo
		echo "| workload | direct ps QPS | keyshard ps QPS | keyshard text QPS | ps/text | ps/direct ps | keyshard ps p95 ms |"
		echo "|---|---:|---:|---:|---:|---:|---:|"
		for wl in $PS_WORKLOADS; do
			dq=$(mean "ps/$wl/direct/q" "ps/$wl/direct/n" %.0f)
			pq=$(mean "ps/$wl/ps/q" "ps/$wl/ps/n" %.0f)
			tq=$(mean "ps/$wl/text/q" "ps/$wl/text/n" %.0f)
			echo "| ${wl#oltp_} | $dq | $pq | $tq | $(ratio "$pq" "$tq") | $(ratio "$pq" "$dq") | $(mean "ps/$wl/ps/p" "ps/$wl/ps/n" %.2f) |"
		done
	fi
	[[ -z $MERGE_REPORT ]] || echo "$MERGE_REPORT"
	if ((FAILED)); then
		echo
		echo "Some runs failed (see stderr); their rows are means over the runs that passed, or '-'."
	fi
} >"$WORK/report.md"

cat "$WORK/report.md"
if [[ -n $OUT ]]; then
	cat "$WORK/report.md" >>"$OUT"
	log "appended to $OUT"
fi
((FAILED == 0)) || exit 1
