# shellcheck shell=bash
# shellcheck disable=SC2034 # the ARM_* results are read by the scripts that source this
# bench/lib.sh: shared by the bench scripts (sourced): run.sh, hotkey.sh,
# loaddata.sh, xa.sh, frozen.sh, hostile.sh.

# bench_users_node1 ADDR: a keyshard config's start on ADDR: user ks, and
# node1 on the bench backend 127.0.0.1:23400 (nodes: continues).
bench_users_node1() {
	cat <<YAML
addr: $1
log_level: warn
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:23400
    max_conns_limit: 32
YAML
}

# one_node_yaml ADDR: a keyshard config on ADDR with user ks on node1 only.
one_node_yaml() {
	bench_users_node1 "$1"
	cat <<YAML
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
YAML
}

# two_node_yaml ADDR DB TABLE: a keyshard config on ADDR with user ks on the
# bench backends 127.0.0.1:23400 (node1) and :23401 (node2), DB.TABLE
# hash-sharded on id over 2 x 4 sub-tables.
two_node_yaml() {
	bench_users_node1 "$1"
	cat <<YAML
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:23401
    max_conns_limit: 32
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      - db: $2
        table: $3
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
YAML
}

# start_keyshard BIN CONFIG LOG PORT: starts keyshard, sets KS_PID, stops
# it on exit, and waits until it listens on 127.0.0.1:PORT.
start_keyshard() {
	"$1" -config "$2" >"$3" 2>&1 &
	KS_PID=$!
	trap 'kill -TERM $KS_PID 2>/dev/null || true; wait $KS_PID 2>/dev/null || true; [[ ${DOWN:-0} == 1 ]] && scripts/backends.sh down >/dev/null 2>&1 || true' EXIT
	for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$4") 2>/dev/null && return 0; sleep 0.2; done
	echo "keyshard not listening on :$4 after 10s" >&2
	return 1
}

# fcalc evaluates an awk expression (floating point).
fcalc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

# cpu_ticks prints utime+stime of PID in clock ticks.
cpu_ticks() {
	local stat
	stat=$(<"/proc/$1/stat")
	stat=${stat##*) }
	# After "pid (comm) ", field 1 is state; utime and stime are 12 and 13.
	awk '{ print $12 + $13 }' <<<"$stat"
}

# vm_kib PID KEY: a /proc/PID/status value in KiB (VmRSS, VmHWM, ...).
vm_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# mysql_at PORT ARGS...: the mariadb client as ks on 127.0.0.1:PORT.
mysql_at() {
	local port=$1
	shift
	mariadb -h127.0.0.1 -P"$port" -uks -pks "$@"
}

# ratio A B: A/B with two decimals ("-" if either is "-").
ratio() {
	if [[ $1 == - || $2 == - ]]; then echo "-"; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; fi
}

# Per-query costs of each process in an arm: perf counts the syscalls and
# context switches of the processes given (all their threads) from
# arm_start to arm_stop; cpu_ticks their CPU. PERF=0, or no usable perf,
# leaves the syscall columns "-".
#
# arm_start NAME PID...: start counting for the processes (one perf each).
# arm_stop NAME TOTAL: stop; sets ARM_SYS[NAME.i], ARM_CS[NAME.i] and
# ARM_CPU[NAME.i] (per query, TOTAL queries) for the i-th PID.
declare -A ARM_PERF ARM_T0 ARM_SYS ARM_CS ARM_CPU ARM_PIDS
perf_usable() {
	[[ ${PERF:-1} == 1 ]] && command -v perf >/dev/null &&
		perf stat -x, -e raw_syscalls:sys_enter -p "${1:-$$}" -- true >/dev/null 2>&1
}
# arm_kill stops every perf still counting (an interrupted run).
arm_kill() {
	local p
	for p in "${ARM_PERF[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	return 0
}
arm_start() {
	local name=$1 i=0 pid
	shift
	ARM_PIDS[$name]="$*"
	for pid in "$@"; do
		ARM_T0[$name.$i]=$(cpu_ticks "$pid")
		if [[ $PERF_OK == 1 ]]; then
			perf stat -x, -o "$WORK/perf.$name.$i" -e raw_syscalls:sys_enter,context-switches -p "$pid" >/dev/null 2>&1 &
			ARM_PERF[$name.$i]=$!
		fi
		i=$((i + 1))
	done
	[[ $PERF_OK == 1 ]] && sleep 0.1 # perf attaches
	return 0
}
# perf_per FILE EVENT TOTAL: EVENT's count in perf's CSV FILE per query
# ("-" if it is missing).
perf_per() {
	awk -F, -v e="$2" -v t="$3" '$3 == e && t > 0 { v = sprintf("%.2f", $1 / t) } END { print (v == "" ? "-" : v) }' "$1" 2>/dev/null || echo -
}
arm_stop() {
	local name=$1 total=$2 i=0 pid f
	((total > 0)) || total=1
	for pid in ${ARM_PIDS[$name]}; do
		ARM_CPU[$name.$i]=$(fcalc "($(cpu_ticks "$pid") - ${ARM_T0[$name.$i]}) / $CLK_TCK * 1000000 / $total")
		ARM_SYS[$name.$i]=- ARM_CS[$name.$i]=-
		if [[ -n ${ARM_PERF[$name.$i]:-} ]]; then
			kill -INT "${ARM_PERF[$name.$i]}" 2>/dev/null || true
			wait "${ARM_PERF[$name.$i]}" 2>/dev/null || true
			unset "ARM_PERF[$name.$i]"
			f=$WORK/perf.$name.$i
			ARM_SYS[$name.$i]=$(perf_per "$f" raw_syscalls:sys_enter "$total")
			ARM_CS[$name.$i]=$(perf_per "$f" context-switches "$total")
		fi
		i=$((i + 1))
	done
}
