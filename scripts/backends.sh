#!/usr/bin/env bash
# backends.sh: throwaway MariaDB servers for keyshard tests, demos and benchmarks.
#
#   backends.sh install [PKG...]        apt-get install mariadb-server mariadb-client sysbench (and gcc
#                                       for go test -race), and the Debian packages named, if missing;
#                                       no-op otherwise
#   backends.sh up N [BASEPORT]         start N instances on 127.0.0.1:BASEPORT.. (default 3307); idempotent
#   backends.sh replica MASTER PORT     start (or reuse) an instance on PORT replicating 127.0.0.1:MASTER
#                                       (GTID, MASTER_USE_GTID=slave_pos, from the master's first binlog
#                                       event), read_only like a real replica (kept over restarts); idempotent
#   backends.sh promote PORT            make a replica a master, as a failover does: STOP SLAVE,
#                                       RESET SLAVE ALL, read_only = 0
#   backends.sh down                    stop every instance under the directory and remove it
#   backends.sh status                  one line per instance: port, pid, up/down
#   backends.sh stop PORT               stop one instance, keep its datadir
#   backends.sh start PORT              start a stopped instance again
#   backends.sh sql PORT "SQL"          run SQL as root through the instance's socket (stdin if SQL omitted)
#
# Every instance lives in ${KS_BACKENDS_DIR:-/tmp/keyshard-backends}/<port>/
# (my.cnf, data/, sock, pid, error.log). It never touches the system MariaDB
# service, its datadir or port 3306. Each instance has user ks/ks (from
# 127.0.0.1 and localhost, all privileges with grant option) and databases
# kingshard, ks_test, sbtest; root logs in by unix_socket through the
# instance's own socket.
set -euo pipefail

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export LC_ALL=C

BASE_DIR=${KS_BACKENDS_DIR:-/tmp/keyshard-backends}
BASE_DIR=${BASE_DIR%/}
MARKER=.keyshard-backends
READY_TIMEOUT=${KS_BACKENDS_TIMEOUT:-60}
# gcc and libc6-dev: go test -race needs cgo, and a fresh Debian has no C compiler.
PKGS=(mariadb-server mariadb-client sysbench gcc libc6-dev)

die() {
	echo "backends.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,17s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

valid_port() {
	if ! [[ $1 =~ ^[0-9]+$ ]] || ((10#$1 < 1 || 10#$1 > 65535)); then
		die "bad port: $1"
	fi
	((10#$1 != 3306)) || die "port 3306 belongs to the system MariaDB; pick another"
}

# run_root runs a command as root (directly, or with sudo when available).
run_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

# have_tools reports whether everything the tests, demo and bench need is
# installed: MariaDB, sysbench, and a C toolchain (go test -race needs cgo).
have_tools() {
	local c
	for c in mariadbd mariadb mariadb-admin mariadb-install-db sysbench; do
		command -v "$c" >/dev/null || return 1
	done
	command -v "${CC:-gcc}" >/dev/null || command -v cc >/dev/null || return 1
	[[ -e /usr/include/stdlib.h ]] || return 1
}

cmd_install() {
	local extra=() p
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || extra+=("$p")
	done
	have_tools && ((${#extra[@]} == 0)) && return 0
	local pkgs=("${PKGS[@]}" "${extra[@]}")
	echo "backends.sh: installing ${pkgs[*]} with apt-get" >&2
	# Keep the package's maintainer scripts from starting the system
	# service: invoke-rc.d and deb-systemd-invoke honour policy-rc.d.
	local policy=/usr/sbin/policy-rc.d added=0
	if [[ ! -e $policy ]]; then
		run_root sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy"
		added=1
	fi
	local rc=0
	run_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
	if ((rc == 0)); then
		run_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${pkgs[@]}" || rc=$?
	fi
	((added)) && run_root rm -f "$policy"
	((rc == 0)) || die "apt-get failed (exit $rc)"
	have_tools || die "tools still missing after apt-get install ${pkgs[*]}"
}

# lock serialises commands that change instances under BASE_DIR. The lock
# file sits next to the directory because down removes the directory.
lock() {
	command -v flock >/dev/null || return 0
	mkdir -p "$(dirname "$BASE_DIR")"
	exec 9>"$BASE_DIR.lock"
	flock -w 300 9 || die "timed out waiting for $BASE_DIR.lock"
}

inst_dir() { echo "$BASE_DIR/$1"; }

# client runs a MariaDB client tool as root over the instance's socket. It
# reads no option files, so it also works for a directory without my.cnf.
client() {
	local tool=$1 port=$2
	shift 2
	"$tool" --no-defaults --socket="$(inst_dir "$port")/sock" --user=root "$@"
}

inst_pid() {
	local pidf
	pidf="$(inst_dir "$1")/pid"
	[[ -s $pidf ]] || return 1
	local pid
	pid=$(<"$pidf")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# A killed mariadbd may linger as a zombie until init reaps it.
	local stat
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]] || return 1
	echo "$pid"
}

alive() { client mariadb-admin "$1" --connect-timeout=2 ping >/dev/null 2>&1; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_cnf() {
	local port=$1 d
	d=$(inst_dir "$port")
	cat >"$d/my.cnf" <<EOF
# Generated by scripts/backends.sh: a throwaway MariaDB for keyshard.
[client]
user = root
socket = $d/sock

[mysqld]
user = root
port = $port
bind_address = 127.0.0.1
socket = $d/sock
pid_file = $d/pid
datadir = $d/data
tmpdir = $d/tmp
log_error = $d/error.log
skip_name_resolve
character_set_server = utf8mb4
collation_server = utf8mb4_general_ci
max_connections = 2000
max_allowed_packet = 256M
performance_schema = OFF
innodb_buffer_pool_size = 128M
innodb_log_file_size = 64M
innodb_flush_log_at_trx_commit = 2
# Binary log on so that a replica can be attached later.
server_id = $port
log_bin = mysql-bin
binlog_format = ROW
log_slave_updates = ON
relay_log = relay-bin
expire_logs_days = 1
EOF
	if [[ -f $d/.replica ]]; then
		printf '# A replica (backends.sh replica; promote turns it off).\nread_only = ON\n' >>"$d/my.cnf"
	fi
}

init_instance() {
	local port=$1 d
	d=$(inst_dir "$port")
	rm -rf "$d/data"
	mkdir -p "$d/data" "$d/tmp"
	write_cnf "$port"
	if ! mariadb-install-db --defaults-file="$d/my.cnf" --user=root --auth-root-authentication-method=socket \
		--skip-test-db >"$d/install.log" 2>&1; then
		tail -n 30 "$d/install.log" >&2
		die "mariadb-install-db failed for port $port (log: $d/install.log)"
	fi
	touch "$d/.initialized"
}

start_instance() {
	local port=$1 d
	d=$(inst_dir "$port")
	write_cnf "$port"
	mkdir -p "$d/tmp"
	if port_in_use "$port"; then
		die "127.0.0.1:$port is in use by another process (not the instance in $d)"
	fi
	# New session and no inherited descriptors (stdio, our lock, a CI
	# runner's or make's pipes): whoever waits for our output or our pipes
	# (go test's exec.Command, a pipeline) must not wait for mariadbd.
	local setsid=()
	command -v setsid >/dev/null && setsid=(setsid)
	(
		for fd in "/proc/$BASHPID/fd/"*; do
			fd=${fd##*/}
			if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then
				eval "exec $fd>&-" 2>/dev/null || true
			fi
		done
		exec "${setsid[@]}" mariadbd --defaults-file="$d/my.cnf" </dev/null >>"$d/stdout.log" 2>&1
	) &
	local launched=$! deadline=$((SECONDS + READY_TIMEOUT)) dead=0
	until alive "$port"; do
		# setsid may fork, so a gone launcher only counts once no pid file
		# names a live mariadbd either, for a couple of seconds.
		if ! kill -0 "$launched" 2>/dev/null && ! inst_pid "$port" >/dev/null; then
			dead=$((dead + 1))
		else
			dead=0
		fi
		if ((SECONDS >= deadline || dead >= 10)); then
			echo "--- $d/error.log (tail) ---" >&2
			tail -n 40 "$d/error.log" >&2 2>/dev/null || true
			tail -n 10 "$d/stdout.log" >&2 2>/dev/null || true
			((dead >= 10)) && die "mariadbd on port $port exited during startup"
			die "mariadbd on port $port not ready after ${READY_TIMEOUT}s"
		fi
		sleep 0.2
	done
}

setup_instance() {
	local port=$1
	client mariadb "$port" <<'EOF'
CREATE USER IF NOT EXISTS 'ks'@'127.0.0.1' IDENTIFIED BY 'ks';
CREATE USER IF NOT EXISTS 'ks'@'localhost' IDENTIFIED BY 'ks';
GRANT ALL PRIVILEGES ON *.* TO 'ks'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'ks'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS kingshard;
CREATE DATABASE IF NOT EXISTS ks_test;
CREATE DATABASE IF NOT EXISTS sbtest;
EOF
}

ensure_base() {
	mkdir -p "$BASE_DIR"
	touch "$BASE_DIR/$MARKER"
}

cmd_up() {
	[[ $# -ge 1 && $# -le 2 ]] || usage
	local n=$1 base=${2:-3307} i port d
	if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1)); then
		die "bad instance count: $n"
	fi
	valid_port "$base"
	valid_port "$((base + n - 1))"
	cmd_install
	lock
	ensure_base
	for ((i = 0; i < n; i++)); do
		port=$((base + i))
		valid_port "$port"
		d=$(inst_dir "$port")
		if [[ -S $d/sock ]] && alive "$port"; then
			# Left running as is; the account and databases are made sure of.
			setup_instance "$port"
			echo "127.0.0.1:$port already running (pid $(inst_pid "$port" || echo '?'))"
			continue
		fi
		mkdir -p "$d"
		if [[ ! -f $d/.initialized ]]; then
			init_instance "$port"
		fi
		start_instance "$port"
		setup_instance "$port"
		echo "127.0.0.1:$port started (pid $(inst_pid "$port" || echo '?'), dir $d)"
	done
}

# slave_field PORT FIELD prints one field of the instance's SHOW SLAVE STATUS.
slave_field() {
	client mariadb "$1" -e 'SHOW SLAVE STATUS\G' | awk -v f="$2:" '$1 == f { print $2; exit }'
}

cmd_replica() {
	[[ $# -eq 2 ]] || usage
	local master=$1 port=$2
	valid_port "$master"
	valid_port "$port"
	[[ $master != "$port" ]] || die "an instance cannot replicate itself"
	alive "$master" || die "master 127.0.0.1:$master is not running (start it first: backends.sh up 1 $master)"
	cmd_up 1 "$port" >&2
	if [[ $(slave_field "$port" Master_Port) == "$master" ]]; then
		# Already this master's replica: make sure both threads run.
		client mariadb "$port" -e 'START SLAVE' 2>/dev/null || true
	else
		# The replica replays the master's binary log from its first event
		# (the master's accounts and databases are created with IF NOT
		# EXISTS, so they replay cleanly). Tables made with sql_log_bin=0
		# on the master are not replicated.
		client mariadb "$port" <<EOF
STOP SLAVE;
RESET SLAVE ALL;
SET GLOBAL gtid_slave_pos = '';
CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $master, MASTER_USER = 'ks',
  MASTER_PASSWORD = 'ks', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
START SLAVE;
EOF
	fi
	local deadline=$((SECONDS + READY_TIMEOUT)) io sql
	while :; do
		io=$(slave_field "$port" Slave_IO_Running)
		sql=$(slave_field "$port" Slave_SQL_Running)
		[[ $io == Yes && $sql == Yes ]] && break
		if ((SECONDS >= deadline)); then
			client mariadb "$port" -e 'SHOW SLAVE STATUS\G' >&2 || true
			die "replica 127.0.0.1:$port of $master: IO thread $io, SQL thread $sql after ${READY_TIMEOUT}s"
		fi
		sleep 0.2
	done
	# Read-only as a real replica is (replication and accounts with
	# READ_ONLY ADMIN, like ks, still write), also after a restart.
	touch "$(inst_dir "$port")/.replica"
	client mariadb "$port" -e 'SET GLOBAL read_only = 1'
	echo "127.0.0.1:$port replicates 127.0.0.1:$master"
}

# cmd_promote makes a replica a master, as an operator or orchestrator does
# in a failover: no replication left, writable.
cmd_promote() {
	[[ $# -eq 1 ]] || usage
	valid_port "$1"
	[[ -d $(inst_dir "$1")/data ]] || die "no instance for port $1 under $BASE_DIR"
	alive "$1" || die "127.0.0.1:$1 is not running"
	lock
	client mariadb "$1" -e 'STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0'
	rm -f "$(inst_dir "$1")/.replica"
	echo "127.0.0.1:$1 promoted: replicates nothing, read_only = 0"
}

# stop_instance shuts one instance down cleanly, killing it if it hangs.
stop_instance() {
	local port=$1 pid
	pid=$(inst_pid "$port") || pid=
	client mariadb-admin "$port" --connect-timeout=2 --shutdown-timeout=30 shutdown >/dev/null 2>&1 || true
	[[ -n $pid ]] || return 0
	local deadline=$((SECONDS + 30))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			echo "backends.sh: port $port: pid $pid ignored shutdown; killing" >&2
			kill -TERM "$pid" 2>/dev/null || true
			sleep 3
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
}

instances() {
	local d
	[[ -d $BASE_DIR ]] || return 0
	for d in "$BASE_DIR"/*/; do
		d=${d%/}
		[[ -d $d/data && ${d##*/} =~ ^[0-9]+$ ]] && echo "${d##*/}"
	done | sort -n
}

cmd_down() {
	[[ $# -eq 0 ]] || usage
	[[ -d $BASE_DIR ]] || return 0
	lock
	local port
	for port in $(instances); do
		stop_instance "$port"
		echo "127.0.0.1:$port stopped"
	done
	# Only ever delete a directory this script created.
	if [[ -f $BASE_DIR/$MARKER ]]; then
		rm -rf "$BASE_DIR"
	else
		die "$BASE_DIR has no $MARKER marker; not removing it"
	fi
}

cmd_status() {
	[[ $# -eq 0 ]] || usage
	local port pid state
	for port in $(instances); do
		pid=$(inst_pid "$port") || pid=-
		if alive "$port"; then state=up; else state=down; fi
		printf '%s\t%s\t%s\n' "$port" "$pid" "$state"
	done
}

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	valid_port "$1"
	[[ -d $(inst_dir "$1")/data ]] || die "no instance for port $1 under $BASE_DIR"
	lock
	stop_instance "$1"
}

cmd_start() {
	[[ $# -eq 1 ]] || usage
	valid_port "$1"
	local d
	d=$(inst_dir "$1")
	[[ -f $d/.initialized ]] || die "no instance for port $1 under $BASE_DIR (use up)"
	lock
	if alive "$1"; then
		return 0
	fi
	start_instance "$1"
}

cmd_sql() {
	[[ $# -ge 1 && $# -le 2 ]] || usage
	valid_port "$1"
	[[ -d $(inst_dir "$1")/data ]] || die "no instance for port $1 under $BASE_DIR"
	if [[ $# -eq 2 ]]; then
		client mariadb "$1" -e "$2"
	else
		client mariadb "$1"
	fi
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case $cmd in
	install) cmd_install "$@" ;;
	up) cmd_up "$@" ;;
	replica) cmd_replica "$@" ;;
	promote) cmd_promote "$@" ;;
	down) cmd_down "$@" ;;
	status) cmd_status "$@" ;;
	stop) cmd_stop "$@" ;;
	start) cmd_start "$@" ;;
	sql) cmd_sql "$@" ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
