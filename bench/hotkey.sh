#!/usr/bin/env bash
# bench/hotkey.sh: a hot key. THREADS (64) sysbench threads all read ONE row
# (bench/hotkey.lua: SELECT c FROM sbtest1 WHERE id = 1) directly, through
# keyshard without a result cache and through keyshard with one (a rule
# caching sbtest.sbtest1 for CACHE_TTL), alternating in rounds. See
# bench/README.md.
#
#   bench/hotkey.sh [--threads=N] [--time=S] [--rounds=N] [--ttl=D]
#                   [--mode=table|hint|none] [--ks-bin=PATH] [--out=FILE] [--down]
#
# Every option can also be given as an environment variable (THREADS, TIME,
# ROUNDS, CACHE_TTL, CACHE_MODE, KS_BIN, OUT, DOWN=1; also ROW_ID, CACHE_MB,
# WARMUP, KS_EXTRA: ks.yaml lines added to both configs); flags win.
set -euo pipefail
CALLER_DIR=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROOT=$PWD
export LC_ALL=C

THREADS=${THREADS:-64}
TIME=${TIME:-10}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2}
ROW_ID=${ROW_ID:-1}
# table: a result_cache_rules entry for sbtest.sbtest1; hint: no rule, the
# cache arm's statement carries /*+ cache(TTL) */; none: no cache arm (a
# keyshard that does not know the result_cache_* keys).
CACHE_MODE=${CACHE_MODE:-table}
CACHE_TTL=${CACHE_TTL:-1s}
CACHE_MB=${CACHE_MB:-64}
KS_BIN=${KS_BIN:-}
OUT=${OUT:-}
DOWN=${DOWN:-0}
TABLE_SIZE=${TABLE_SIZE:-10000}
# Ports of this script alone: the backend, then keyshard without the cache
# (SQL, web) and keyshard with it (SQL, web).
DIRECT_PORT=${DIRECT_PORT:-23498}
KS_PORT=${KS_PORT:-23499}
KS_WEB=${KS_WEB:-127.0.0.1:23500}
KSC_PORT=${KSC_PORT:-23501}
KSC_WEB=${KSC_WEB:-127.0.0.1:23502}
# A backend directory of its own: `DOWN=1` removes this one only, never
# the one bench/run.sh and the other scripts share.
export KS_BACKENDS_DIR=${KS_BACKENDS_DIR:-/tmp/keyshard-bench-hotkey}

usage() {
	sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

while (($#)); do
	arg=$1
	shift
	case $arg in
	--*=*) name=${arg%%=*} val=${arg#*=} ;;
	--down | -h | --help) name=$arg val=1 ;;
	--*)
		(($#)) || usage
		name=$arg val=$1
		shift
		;;
	*) usage ;;
	esac
	case $name in
	--threads) THREADS=$val ;;
	--time) TIME=$val ;;
	--rounds) ROUNDS=$val ;;
	--ttl) CACHE_TTL=$val ;;
	--mode) CACHE_MODE=$val ;;
	--ks-bin) KS_BIN=$val ;;
	--out) OUT=$val ;;
	--down) DOWN=$val ;;
	*) usage ;;
	esac
done
for v in THREADS TIME ROUNDS ROW_ID TABLE_SIZE CACHE_MB DIRECT_PORT KS_PORT KSC_PORT; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
		echo "hotkey: $v must be a positive integer, got '${!v}'" >&2
		exit 2
	}
done
[[ $WARMUP =~ ^[0-9]+$ ]] || {
	echo "hotkey: WARMUP must be a number of seconds, got '$WARMUP'" >&2
	exit 2
}
case $CACHE_MODE in
table | hint | none) ;;
*)
	echo "hotkey: --mode must be table, hint or none, got '$CACHE_MODE'" >&2
	exit 2
	;;
esac
[[ $CACHE_TTL =~ ^[0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h)$ ]] || {
	echo "hotkey: --ttl must be a duration such as 1s or 500ms, got '$CACHE_TTL'" >&2
	exit 2
}
((ROW_ID <= TABLE_SIZE)) || {
	echo "hotkey: ROW_ID $ROW_ID is past TABLE_SIZE $TABLE_SIZE" >&2
	exit 2
}

# Relative paths are the caller's, not the repo root's.
[[ -z $OUT || $OUT == /* ]] || OUT=$CALLER_DIR/$OUT
[[ -z $KS_BIN || $KS_BIN == /* ]] || KS_BIN=$CALLER_DIR/$KS_BIN

WORK=$(mktemp -d /tmp/keyshard-hotkey-run.XXXXXX)
FAILED=0
CLK_TCK=$(getconf CLK_TCK)
# The arms, in the order of odd rounds (even rounds run them backwards).
ARMS=(direct nocache)
[[ $CACHE_MODE == none ]] || ARMS+=(cache)
declare -A PORT=([direct]=$DIRECT_PORT [nocache]=$KS_PORT [cache]=$KSC_PORT)
declare -A WEB=([nocache]=$KS_WEB [cache]=$KSC_WEB)
declare -A NAME=([direct]="direct" [nocache]="keyshard, no cache" [cache]="keyshard, cache")
declare -A PID=()

log() { echo "hotkey: $*" >&2; }

die() {
	log "$*"
	FAILED=1
	exit 1
}

stop_pid() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? arm
	trap - EXIT INT TERM
	for arm in "${!PID[@]}"; do
		stop_pid "${PID[$arm]}"
	done
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


ks_alive() {
	local arm=$1
	kill -0 "${PID[$arm]}" 2>/dev/null && return 0
	log "keyshard ($arm, pid ${PID[$arm]}) died; last log lines:"
	tail -n 30 "$WORK/$arm.log" >&2 || true
	die "keyshard ($arm) is gone"
}

# metric WEBADDR NAME: the sum of NAME's samples on WEBADDR/metrics (any
# labels), or "-" when keyshard does not export it.
metric() {
	curl -fsS --max-time 5 -u bench:bench "http://$1/metrics" 2>/dev/null |
		awk -v n="$2" '($1 == n || index($1, n "{") == 1) && $0 !~ /^#/ { s += $NF; found = 1 }
			END { if (found) printf "%.0f\n", s; else print "-" }'
}

com_select() {
	mysql_at "$DIRECT_PORT" -N -e "SHOW GLOBAL STATUS LIKE 'Com_select'" | awk '{ print $2 }'
}

# ---------------------------------------------------------------- setup
scripts/backends.sh up 1 "$DIRECT_PORT" >&2
DB_PID=$(<"$KS_BACKENDS_DIR/$DIRECT_PORT/pid")

SB_COMMON=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=ks --mysql-password=ks --mysql-db=sbtest)
rows=$(mysql_at "$DIRECT_PORT" -N sbtest -e 'SELECT COUNT(*) FROM sbtest1' 2>/dev/null || echo 0)
if [[ $rows != "$TABLE_SIZE" ]]; then
	log "sysbench prepare: sbtest1 with $TABLE_SIZE rows on 127.0.0.1:$DIRECT_PORT"
	sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$DIRECT_PORT" --tables=1 cleanup >/dev/null
	sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$DIRECT_PORT" --tables=1 --table-size="$TABLE_SIZE" \
		prepare >"$WORK/prepare.log" || die "sysbench prepare failed: $(tail -n 5 "$WORK/prepare.log")"
fi

if [[ -z $KS_BIN ]]; then
	# Built into the work dir: bin/keyshard may be in use by someone else.
	log "building keyshard"
	go build -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" \
		-o "$WORK/keyshard" ./cmd/keyshard
	KS_BIN=$WORK/keyshard
fi
[[ -x $KS_BIN ]] || die "$KS_BIN is not an executable"

# ks_yaml PORT WEBADDR: the config both keyshards share (one node, the
# backend above, sbtest unsharded), without the cache.
ks_yaml() {
	cat <<EOF
# Written by bench/hotkey.sh.
addr: 127.0.0.1:$1
web_addr: $2
web_user: bench
web_password: bench
log_level: warn
log_sql: off
# sysbench opens all its THREADS connections at once from one address: the
# default cap of 32 logins in progress per host can refuse some (1040).
max_unauthenticated_per_host: 0
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    max_conns_limit: 128
    user: ks
    password: ks
    master: 127.0.0.1:$DIRECT_PORT
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
EOF
	[[ -z ${KS_EXTRA:-} ]] || printf '%s\n' "$KS_EXTRA"
}
ks_yaml "$KS_PORT" "$KS_WEB" >"$WORK/nocache.yaml"
{
	ks_yaml "$KSC_PORT" "$KSC_WEB"
	echo "result_cache_mb: $CACHE_MB"
	if [[ $CACHE_MODE == table ]]; then
		cat <<EOF
result_cache_rules:
  - table: sbtest.sbtest1
    ttl: $CACHE_TTL
EOF
	fi
} >"$WORK/cache.yaml"

# start_ks ARM: starts keyshard with WORK/ARM.yaml and waits until it serves.
start_ks() {
	local arm=$1 port=${PORT[$1]} deadline
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "127.0.0.1:$port is already in use"
	fi
	if ! "$KS_BIN" check-config "$WORK/$arm.yaml" >"$WORK/$arm.check" 2>&1; then
		cat "$WORK/$arm.check" >&2
		[[ $arm != cache ]] || log "this keyshard does not take the result cache config; CACHE_MODE=none runs without the cache arm"
		die "config $WORK/$arm.yaml refused"
	fi
	"$KS_BIN" -config "$WORK/$arm.yaml" >"$WORK/$arm.log" 2>&1 &
	PID[$arm]=$!
	deadline=$((SECONDS + 30))
	until mysql_at "$port" --connect-timeout=1 -e 'SELECT 1' >/dev/null 2>&1; do
		ks_alive "$arm"
		((SECONDS < deadline)) || die "keyshard ($arm) not serving on :$port after 30s (log: $WORK/$arm.log)"
		sleep 0.2
	done
	log "keyshard ($arm) pid ${PID[$arm]} on 127.0.0.1:$port, /metrics on ${WEB[$arm]}"
}
start_ks nocache
[[ $CACHE_MODE == none ]] || start_ks cache

PREFIX=
[[ $CACHE_MODE != hint ]] || PREFIX="/*+ cache($CACHE_TTL) */"
HOT_SQL="SELECT c FROM sbtest1 WHERE id = $ROW_ID"

# Every arm answers the same row.
want=$(mysql_at "$DIRECT_PORT" -N sbtest -e "$HOT_SQL")
for arm in "${ARMS[@]}"; do
	sql=$HOT_SQL
	[[ $arm != cache || -z $PREFIX ]] || sql="SELECT $PREFIX c FROM sbtest1 WHERE id = $ROW_ID"
	got=$(mysql_at "${PORT[$arm]}" -N sbtest -e "$sql") || die "$arm: $sql failed"
	[[ $got == "$want" ]] || die "$arm answers '$got' to $sql, direct '$want'"
done

# ---------------------------------------------------------------- runs
# run_hot ARM SECONDS LOGFILE -> "qps p95_ms total_queries"
run_hot() {
	local arm=$1 secs=$2 out=$3 opt=()
	[[ $arm != cache || -z $PREFIX ]] || opt=(--prefix="$PREFIX")
	if ! sysbench bench/hotkey.lua "${SB_COMMON[@]}" --mysql-port="${PORT[$arm]}" --threads="$THREADS" --time="$secs" \
		--id="$ROW_ID" "${opt[@]}" --report-interval=0 --percentile=95 run >"$out" 2>&1; then
		log "sysbench hotkey threads=$THREADS $arm (port ${PORT[$arm]}) failed:"
		tail -n 15 "$out" >&2
		return 1
	fi
	awk '
		$1 == "queries:" { total = $2; qps = $3; gsub(/[(]/, "", qps) }
		/95th percentile:/ { p95 = $3 }
		END { if (qps == "" || p95 == "" || total == 0) exit 1; print qps, p95, total }' "$out"
}

declare -A SUM
add() { SUM[$1]=$(fcalc "${SUM[$1]:-0} + $2"); }

if ((WARMUP > 0)); then
	# Not counted: fills keyshard's pools (2 warm connections to start
	# with) and the cache, and MariaDB's buffer pool.
	for arm in "${ARMS[@]}"; do
		run_hot "$arm" "$WARMUP" "$WORK/warmup.$arm.log" >/dev/null || die "warm-up run failed ($arm)"
	done
fi

for ((r = 1; r <= ROUNDS; r++)); do
	order=("${ARMS[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((i = ${#ARMS[@]} - 1; i >= 0; i--)); do order+=("${ARMS[i]}"); done
	fi
	for arm in "${order[@]}"; do
		[[ $arm == direct ]] || ks_alive "$arm"
		k0=0 m0=- h0=- e0=- st0=-
		[[ $arm == direct ]] || k0=$(cpu_ticks "${PID[$arm]}")
		if [[ $arm == cache ]]; then
			h0=$(metric "${WEB[$arm]}" keyshard_result_cache_hits_total)
			m0=$(metric "${WEB[$arm]}" keyshard_result_cache_misses_total)
			e0=$(metric "${WEB[$arm]}" keyshard_result_cache_evictions_total)
			st0=$(metric "${WEB[$arm]}" keyshard_result_cache_stores_total)
		fi
		d0=$(cpu_ticks "$DB_PID")
		s0=$(com_select)
		res=$(run_hot "$arm" "$TIME" "$WORK/$arm.$r.log") || {
			FAILED=1
			[[ $arm == direct ]] || ks_alive "$arm"
			continue
		}
		read -r qps p95 total <<<"$res"
		s1=$(com_select)
		d1=$(cpu_ticks "$DB_PID")
		add "$arm/q" "$qps"
		add "$arm/p" "$p95"
		add "$arm/n" 1
		add "$arm/dbcpu" "$(fcalc "($d1 - $d0) / $CLK_TCK * 1000000 / $total")"
		add "$arm/sel" "$(fcalc "($s1 - $s0) / $total")"
		msg="$qps qps, p95 $p95 ms, MariaDB CPU $(printf %.1f "$(fcalc "($d1 - $d0) / $CLK_TCK * 1000000 / $total")") us/query,"
		msg+=" backend SELECTs/query $(printf %.3f "$(fcalc "($s1 - $s0) / $total")")"
		if [[ $arm != direct ]]; then
			k1=$(cpu_ticks "${PID[$arm]}")
			cpu=$(fcalc "($k1 - $k0) / $CLK_TCK * 1000000 / $total")
			add "$arm/cpu" "$cpu"
			msg+=", proxy CPU $(printf %.1f "$cpu") us/query"
		fi
		if [[ $arm == cache ]]; then
			h1=$(metric "${WEB[$arm]}" keyshard_result_cache_hits_total)
			m1=$(metric "${WEB[$arm]}" keyshard_result_cache_misses_total)
			e1=$(metric "${WEB[$arm]}" keyshard_result_cache_evictions_total)
			st1=$(metric "${WEB[$arm]}" keyshard_result_cache_stores_total)
			if [[ $h0 != - && $h1 != - && $m0 != - && $m1 != - ]]; then
				add cache/hits "$((h1 - h0))"
				add cache/misses "$((m1 - m0))"
				msg+=", hits $((h1 - h0)), misses $((m1 - m0))"
			fi
			[[ $e0 == - || $e1 == - ]] || add cache/evictions "$((e1 - e0))"
			[[ $st0 == - || $st1 == - ]] || add cache/stores "$((st1 - st0))"
		fi
		log "threads=$THREADS round $r: ${NAME[$arm]}: $msg"
	done
done

CACHE_RSS= CACHE_BYTES=-
if [[ $CACHE_MODE != none ]]; then
	CACHE_RSS=$(vm_kib "${PID[cache]}" VmHWM)
	CACHE_BYTES=$(metric "${WEB[cache]}" keyshard_result_cache_bytes)
fi
NOCACHE_RSS=$(vm_kib "${PID[nocache]}" VmHWM)

# ---------------------------------------------------------------- report
# mean KEY FORMAT: SUM[KEY] over the runs of KEY's arm.
mean() {
	local n=${SUM[${1%%/*}/n]:-0}
	if [[ -z ${SUM[$1]:-} || $n == 0 || $n == 0.000000 ]]; then
		echo "-"
	else
		awk -v s="${SUM[$1]}" -v n="$n" -v f="$2" 'BEGIN { printf f, s / n }'
	fi
}
# num N: N as an integer ("-" stays).
num() { if [[ $1 == - ]]; then echo -; else printf %.0f "$1"; fi; }
# per_s N: N over all the timed runs of the cache arm, per second.
per_s() { if [[ $1 == - ]]; then echo -; else awk -v n="$1" -v t="$TIME" -v r="${SUM[cache/n]:-0}" 'BEGIN { printf "%.1f", (r > 0) ? n / (t * r) : 0 }'; fi; }

HITS=${SUM[cache/hits]:-}
MISSES=${SUM[cache/misses]:-}
HIT_RATE=-
if [[ -n $HITS && -n $MISSES ]]; then
	HIT_RATE=$(awk -v h="$HITS" -v m="$MISSES" 'BEGIN { if (h + m > 0) printf "%.2f%%", 100 * h / (h + m); else print "-" }')
fi

ver=$(git describe --always --dirty 2>/dev/null || echo dev)
ksver=$("$KS_BIN" -version 2>/dev/null || true)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
dbver=$(mysql_at "$DIRECT_PORT" -N -e 'SELECT VERSION()')
cmd="THREADS=$THREADS TIME=$TIME ROUNDS=$ROUNDS CACHE_MODE=$CACHE_MODE CACHE_TTL=$CACHE_TTL"
[[ $ROW_ID == 1 ]] || cmd+=" ROW_ID=$ROW_ID"
[[ $CACHE_MB == 64 ]] || cmd+=" CACHE_MB=$CACHE_MB"
[[ $WARMUP == 2 ]] || cmd+=" WARMUP=$WARMUP"
[[ -z ${KS_EXTRA:-} ]] || cmd+=" KS_EXTRA='${KS_EXTRA//$'\n'/\\n}'"
cmd+=" bench/hotkey.sh"
case $CACHE_MODE in
table) cache_desc="and with \`result_cache_mb: $CACHE_MB\` and a rule \`table: sbtest.sbtest1, ttl: $CACHE_TTL\`" ;;
hint) cache_desc="and with \`result_cache_mb: $CACHE_MB\`, no rule; the cache arm's statement carries \`$PREFIX\`" ;;
none) cache_desc="(CACHE_MODE=none: no cache arm)" ;;
esac
dq=$(mean direct/q %.0f)
nq=$(mean nocache/q %.0f)
cq=$(mean cache/q %.0f)
dp=$(mean direct/p %.2f)
np=$(mean nocache/p %.2f)
cp=$(mean cache/p %.2f)
{
	echo
	echo "### $(date -u '+%Y-%m-%d %H:%M UTC') - ${ksver:-keyshard} (git $ver) - hot key, result cache"
	echo
	echo "\`$cmd\`: $THREADS sysbench threads all reading one row" \
		"(\`$HOT_SQL\`, bench/hotkey.lua, text protocol) directly and through keyshard without the result cache" \
		"$cache_desc; ${TIME}s per run, $ROUNDS round$( ((ROUNDS == 1)) || echo s) alternating" \
		"(odd rounds in this order, even rounds backwards), after a ${WARMUP}s warm-up of each; means over rounds." \
		"$(nproc) CPUs ($cpu_model), MariaDB $dbver, $(sysbench --version). Client, proxy and server share the machine."
	echo
	echo "| path | QPS | vs direct | vs no cache | p95 ms | proxy CPU µs/query | MariaDB CPU µs/query | backend SELECTs/query | cache hit rate |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	echo "| direct | $dq | 1.00 | - | $dp | - | $(mean direct/dbcpu %.1f) | $(mean direct/sel %.3f) | - |"
	echo "| keyshard, no cache | $nq | $(ratio "$nq" "$dq") | 1.00 | $np | $(mean nocache/cpu %.1f) | $(mean nocache/dbcpu %.1f) | $(mean nocache/sel %.3f) | - |"
	if [[ $CACHE_MODE != none ]]; then
		echo "| keyshard, cache | $cq | $(ratio "$cq" "$dq") | $(ratio "$cq" "$nq") | $cp | $(mean cache/cpu %.1f) | $(mean cache/dbcpu %.1f) | $(mean cache/sel %.3f) | $HIT_RATE |"
		echo
		echo "Cache over the timed runs (keyshard's /metrics): $(num "${HITS:--}") hits, $(num "${MISSES:--}") misses" \
			"($(per_s "${MISSES:--}") a second), $(num "${SUM[cache/stores]:--}") stores, $(num "${SUM[cache/evictions]:--}") evictions;" \
			"keyshard_result_cache_bytes at the end: $CACHE_BYTES." \
			"p95 cache/no cache: $(ratio "$cp" "$np"), cache/direct: $(ratio "$cp" "$dp")." \
			"keyshard peak RSS: $(awk -v k="$NOCACHE_RSS" 'BEGIN { printf "%.1f", k / 1024 }') MiB without the cache," \
			"$(awk -v k="$CACHE_RSS" 'BEGIN { printf "%.1f", k / 1024 }') MiB with it."
	else
		echo
		echo "keyshard peak RSS: $(awk -v k="$NOCACHE_RSS" 'BEGIN { printf "%.1f", k / 1024 }') MiB."
	fi
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
