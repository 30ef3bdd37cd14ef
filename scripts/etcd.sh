#!/usr/bin/env bash
# etcd.sh: throwaway single-member etcd servers for keyshard tests and demos.
#
#   etcd.sh install          apt-get install etcd-server etcd-client if etcd or etcdctl is missing;
#                            no-op otherwise
#   etcd.sh up PORT          start (or reuse) an etcd with clients on 127.0.0.1:PORT and peers on
#                            127.0.0.1:PORT+1, wait until healthy, print 127.0.0.1:PORT; idempotent
#   etcd.sh start PORT       start a stopped instance again on its data (prints 127.0.0.1:PORT)
#   etcd.sh stop PORT        stop one instance (SIGTERM, SIGKILL after 10s), keep its data
#   etcd.sh kill PORT        SIGKILL one instance (for fault tests), keep its data
#   etcd.sh down             stop every instance under the directory and remove it
#   etcd.sh status           one line per instance: port, pid, up/down
#
# Every instance lives in ${KS_ETCD_DIR:-/tmp/keyshard-etcd}/<port>/ (data/,
# etcd.log, pid). Readiness waits at most ${KS_ETCD_TIMEOUT:-30} seconds. It
# never uses, starts or stops the system etcd service (Debian's package
# enables one on 127.0.0.1:2379), and refuses ports 2379 and 2380.
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export LC_ALL=C
export ETCDCTL_API=3
# Settings from the caller's environment must not redirect etcdctl or etcd
# (ETCDCTL_ENDPOINTS, ETCD_DATA_DIR, ...) to, say, the system service;
# ETCD_UNSUPPORTED_ARCH (needed on some architectures) is kept.
while read -r v; do
	[[ $v == ETCDCTL_API || $v == ETCD_UNSUPPORTED_ARCH ]] || unset "$v"
done < <(compgen -e | grep -E '^ETCD(CTL)?_' || true)

BASE_DIR=${KS_ETCD_DIR:-/tmp/keyshard-etcd}
BASE_DIR=${BASE_DIR%/}
MARKER=.keyshard-etcd
READY_TIMEOUT=${KS_ETCD_TIMEOUT:-30}
STOP_TIMEOUT=10
PKGS=(etcd-server etcd-client)

die() {
	echo "etcd.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,12s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

valid_port() {
	if ! [[ $1 =~ ^[0-9]+$ ]] || ((10#$1 < 1024 || 10#$1 > 65534)); then
		die "bad port: $1 (want 1024-65534; PORT+1 is the peer port)"
	fi
	if ((10#$1 == 2378 || 10#$1 == 2379 || 10#$1 == 2380)); then
		die "ports 2379 and 2380 belong to the system etcd; pick another"
	fi
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"

have_tools() { [[ -x /usr/bin/etcd && -x /usr/bin/etcdctl ]]; }

cmd_install() {
	[[ $# -eq 0 ]] || usage
	have_tools && return 0
	echo "etcd.sh: installing ${PKGS[*]} with apt-get" >&2
	apt_install "${PKGS[@]}"
	have_tools || die "/usr/bin/etcd or /usr/bin/etcdctl still missing after apt-get install ${PKGS[*]}"
}


# inst_pid prints the pid of the instance's etcd if it is running.
inst_pid() {
	local pidf
	pidf="$(inst_dir "$1")/pid"
	[[ -s $pidf ]] || return 1
	local pid
	pid=$(<"$pidf")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# A recycled pid must not be mistaken for ours.
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == etcd ]] || return 1
	# A killed etcd may linger as a zombie until init reaps it.
	local stat
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]] || return 1
	echo "$pid"
}

alive() {
	etcdctl --endpoints="127.0.0.1:$1" --dial-timeout=2s --command-timeout=3s \
		endpoint health >/dev/null 2>&1
}


log_tail() {
	local d
	d=$(inst_dir "$1")
	echo "--- $d/etcd.log (tail) ---" >&2
	tail -n 30 "$d/etcd.log" >&2 2>/dev/null || true
}

# wait_healthy waits until the instance answers endpoint health, failing
# early if its process is gone.
wait_healthy() {
	local port=$1 deadline=$((SECONDS + READY_TIMEOUT)) dead=0
	until alive "$port"; do
		if inst_pid "$port" >/dev/null; then
			dead=0
		else
			dead=$((dead + 1))
		fi
		if ((SECONDS >= deadline || dead >= 10)); then
			log_tail "$port"
			((dead >= 10)) && die "etcd on port $port exited during startup"
			die "etcd on port $port not healthy after ${READY_TIMEOUT}s"
		fi
		sleep 0.2
	done
}

start_instance() {
	local port=$1 peer=$(($1 + 1)) d name
	d=$(inst_dir "$port")
	name="keyshard-etcd-$port"
	local p
	for p in "$port" "$peer"; do
		if port_in_use "$p"; then
			die "127.0.0.1:$p is in use by another process (not the etcd in $d)"
		fi
	done
	mkdir -p "$d"
	[[ -d $d/data ]] || mkdir -m 700 "$d/data"
	rm -f "$d/pid"
	# New session and no inherited descriptors (stdio, our lock, a CI
	# runner's or make's pipes): whoever waits for our output or our pipes
	# (go test's exec.Command, a pipeline) must not wait for etcd. The pid
	# file is written by the shell that then becomes etcd, so it stays right
	# even if setsid forks.
	local setsid=()
	command -v setsid >/dev/null && setsid=(setsid)
	(
		for fd in "/proc/$BASHPID/fd/"*; do
			fd=${fd##*/}
			if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then
				eval "exec $fd>&-" 2>/dev/null || true
			fi
		done
		# shellcheck disable=SC2016 # $$ and $@ belong to the inner sh.
		exec "${setsid[@]}" nohup sh -c 'echo $$ >"$0" && exec "$@"' "$d/pid" \
			etcd \
			--name "$name" \
			--data-dir "$d/data" \
			--listen-client-urls "http://127.0.0.1:$port" \
			--advertise-client-urls "http://127.0.0.1:$port" \
			--listen-peer-urls "http://127.0.0.1:$peer" \
			--initial-advertise-peer-urls "http://127.0.0.1:$peer" \
			--initial-cluster "$name=http://127.0.0.1:$peer" \
			--initial-cluster-token "$name" \
			--initial-cluster-state new \
			--logger zap \
			--log-outputs stderr \
			</dev/null >>"$d/etcd.log" 2>&1
	) &
	wait_healthy "$port"
}

cmd_up() {
	[[ $# -eq 1 ]] || usage
	local port=$1
	valid_port "$port"
	cmd_install
	lock
	ensure_base
	if inst_pid "$port" >/dev/null; then
		# Running (maybe still starting): reuse it.
		wait_healthy "$port"
	else
		start_instance "$port"
	fi
	echo "127.0.0.1:$port"
}

cmd_start() {
	[[ $# -eq 1 ]] || usage
	local port=$1
	valid_port "$port"
	[[ -d $(inst_dir "$port")/data/member ]] || die "no instance for port $port under $BASE_DIR (use up)"
	cmd_up "$port"
}

# stop_instance sends SIG to the instance and waits until it is gone; a
# SIGTERM not obeyed within STOP_TIMEOUT seconds becomes a SIGKILL.
stop_instance() {
	local port=$1 sig=${2:-TERM} pid
	pid=$(inst_pid "$port") || return 0
	kill "-$sig" "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + STOP_TIMEOUT))
	while inst_pid "$port" >/dev/null; do
		if [[ $sig != KILL ]] && ((SECONDS >= deadline)); then
			echo "etcd.sh: port $port: pid $pid ignored SIG$sig; killing" >&2
			sig=KILL
			kill -KILL "$pid" 2>/dev/null || true
			deadline=$((SECONDS + STOP_TIMEOUT))
		elif ((SECONDS >= deadline)); then
			die "port $port: pid $pid still running after SIGKILL"
		fi
		sleep 0.1
	done
}

need_instance() {
	valid_port "$1"
	[[ -d $(inst_dir "$1")/data ]] || die "no instance for port $1 under $BASE_DIR"
}

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	need_instance "$1"
	lock
	stop_instance "$1" TERM
}

cmd_kill() {
	[[ $# -eq 1 ]] || usage
	need_instance "$1"
	lock
	stop_instance "$1" KILL
}

cmd_down() {
	[[ $# -eq 0 ]] || usage
	[[ -d $BASE_DIR ]] || return 0
	lock
	local port
	for port in $(instances); do
		stop_instance "$port" TERM
		echo "127.0.0.1:$port stopped"
	done
	remove_base
}

cmd_status() {
	[[ $# -eq 0 ]] || usage
	local port pid state
	for port in $(instances); do
		pid=$(inst_pid "$port") || pid=-
		if [[ $pid != - ]] && alive "$port"; then state=up; else state=down; fi
		printf '%s\t%s\t%s\n' "$port" "$pid" "$state"
	done
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case $cmd in
	install) cmd_install "$@" ;;
	up) cmd_up "$@" ;;
	start) cmd_start "$@" ;;
	stop) cmd_stop "$@" ;;
	kill) cmd_kill "$@" ;;
	down) cmd_down "$@" ;;
	status) cmd_status "$@" ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
