#!/usr/bin/env bash
# run.sh: the driver matrix. Real client drivers run the same cases straight
# against MariaDB (the reference) and through keyshard; the normalized answers
# are compared case by case (test/drivers/compare.py) and printed as a table.
# Exit status 1 when any case differs, 2 when the harness itself failed.
#
#   test/drivers/run.sh            (or: make compat)
#
# Drivers (one file of cases each):
#   connector-j, mariadb-j   java/src/main/java/compat/Main.java (+ HikariCP)
#   mysql2                   node/cases.js
#   pymysql, mysqlclient     python/cases.py
#   libmariadb               c/cases.c (MariaDB Connector/C from libmariadb-dev)
#   go-mysql                 go/main.go (github.com/go-sql-driver/mysql)
#
# Env: DRIVERS (space-separated subset of the names above); KS_BIN (default
# bin/keyshard, built here unless set) to try another build; KEEP=1 leaves
# MariaDB and keyshard running afterwards; SKIP_INSTALL=1 skips
# apt/npm/mvn/pip; SELFCHECK=1 runs the "keyshard" side straight against
# MariaDB too, to check that the harness itself reports no difference.
#
# It installs what is missing (apt-get: JDK, maven, nodejs/npm, python3-venv,
# python3-dev, libmariadb-dev, pkg-config; npm ci, mvn package and pip into
# .tmp/compat), starts its own MariaDB on 127.0.0.1:25300 (data in
# /tmp/keyshard-drivers) and keyshard on 127.0.0.1:25396 (web 25397), and
# stops both at the end. Nothing else is touched.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD

WORK=$ROOT/.tmp/compat
DB_PORT=25300
KS_PORT=25396
WEB_PORT=25397
export KS_BACKENDS_DIR=/tmp/keyshard-drivers
ALL_DRIVERS="connector-j mariadb-j mysql2 pymysql mysqlclient libmariadb go-mysql"
DRIVERS=${DRIVERS:-$ALL_DRIVERS}
RUN_TIMEOUT=${RUN_TIMEOUT:-180} # seconds per driver run
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
KS_PID=

log() { printf '[compat %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() {
	log "error: $*"
	exit 2
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -z ${KEEP:-} ]]; then
		if [[ -n $KS_PID ]] && kill -0 "$KS_PID" 2>/dev/null; then
			kill -TERM "$KS_PID" 2>/dev/null || true
			wait "$KS_PID" 2>/dev/null || true
		fi
		scripts/backends.sh down >/dev/null 2>&1 || true
	else
		log "KEEP=1: MariaDB 127.0.0.1:$DB_PORT and keyshard 127.0.0.1:$KS_PORT (pid ${KS_PID:-?}) left running"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

has_driver() { [[ " $DRIVERS " == *" $1 "* ]]; }

# ---------------------------------------------------------------- install
install_all() {
	local pkgs=()
	need_java=0 need_node=0 need_py=0 need_c=0
	has_driver connector-j && need_java=1
	has_driver mariadb-j && need_java=1
	has_driver mysql2 && need_node=1
	has_driver pymysql && need_py=1
	has_driver mysqlclient && need_py=1
	has_driver libmariadb && need_c=1
	if ((need_java)); then
		command -v javac >/dev/null || pkgs+=(openjdk-17-jdk-headless)
		command -v mvn >/dev/null || pkgs+=(maven)
	fi
	if ((need_node)); then
		command -v node >/dev/null || pkgs+=(nodejs)
		command -v npm >/dev/null || pkgs+=(npm)
	fi
	if ((need_py)); then
		dpkg -s python3-venv >/dev/null 2>&1 || pkgs+=(python3-venv)
		dpkg -s python3-dev >/dev/null 2>&1 || pkgs+=(python3-dev)
	fi
	if ((need_py || need_c)); then
		dpkg -s libmariadb-dev >/dev/null 2>&1 || pkgs+=(libmariadb-dev)
		command -v pkg-config >/dev/null || pkgs+=(pkg-config)
	fi
	# backends.sh install: apt-get update, then apt-get install -y of
	# MariaDB/gcc and the packages named, only when something is missing.
	scripts/backends.sh install "${pkgs[@]}"

	mkdir -p "$WORK"
	if ((need_java)); then
		log "mvn package (test/drivers/java)"
		mvn -q -B -f test/drivers/java/pom.xml -Dks.compat.dir="$WORK" package >"$WORK/mvn.log" 2>&1 || {
			tail -n 40 "$WORK/mvn.log" >&2
			die "mvn package failed (log: $WORK/mvn.log)"
		}
	fi
	if ((need_node)); then
		# npm ci in a copy under .tmp, so node_modules stays out of the tree.
		mkdir -p "$WORK/node"
		if ! cmp -s test/drivers/node/package-lock.json "$WORK/node/package-lock.json" ||
			[[ ! -d $WORK/node/node_modules ]]; then
			log "npm ci (mysql2)"
			cp test/drivers/node/package.json test/drivers/node/package-lock.json "$WORK/node/"
			(cd "$WORK/node" && npm ci --no-audit --no-fund --loglevel=error)
		fi
	fi
	if ((need_py)); then
		if ! cmp -s test/drivers/python/requirements.txt "$WORK/venv/requirements.txt"; then
			log "venv + pip install (PyMySQL, mysqlclient)"
			rm -rf "$WORK/venv"
			"$PY" -m venv "$WORK/venv"
			"$WORK/venv/bin/pip" install -q -r test/drivers/python/requirements.txt
			cp test/drivers/python/requirements.txt "$WORK/venv/requirements.txt"
		fi
	fi
}

# build_programs compiles the C and Go case programs (a second or two).
build_programs() {
	mkdir -p "$WORK"
	if has_driver libmariadb; then
		# shellcheck disable=SC2046
		gcc -O1 -Wall -Wextra -o "$WORK/cases_c" test/drivers/c/cases.c $(pkg-config --cflags --libs libmariadb)
	fi
	if has_driver go-mysql; then
		go build -o "$WORK/cases_go" ./test/drivers/go
	fi
}

# ---------------------------------------------------------------- servers
reset_db() {
	scripts/backends.sh sql "$DB_PORT" <test/drivers/schema.sql
}

start_keyshard() {
	cat >"$WORK/ks.yaml" <<EOF
# Generated by test/drivers/run.sh: one node; user orm has one sharded table.
addr: 127.0.0.1:$KS_PORT
web_addr: 127.0.0.1:$WEB_PORT
log_level: warn
user_list:
  - user: ks
    password: ks
  - user: ks2
    password: ks2
  - user: orm
    password: orm
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:$DB_PORT
    max_conns_limit: 16
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
  - user: ks2
    nodes: [node1]
    default: node1
  # The ORM cases' user: orm_items is sharded (directly it is a plain
  # table), so ORMs are checked to see one table.
  - user: orm
    nodes: [node1]
    default: node1
    shard:
      - db: ks_compat
        table: orm_items
        key: id
        nodes: [node1]
        type: hash
        locations: [4]
EOF
	"$KS_BIN" check-config "$WORK/ks.yaml" >/dev/null
	if (exec 3<>"/dev/tcp/127.0.0.1/$KS_PORT") 2>/dev/null; then
		die "127.0.0.1:$KS_PORT is already in use"
	fi
	"$KS_BIN" -config "$WORK/ks.yaml" >"$WORK/keyshard.log" 2>&1 &
	KS_PID=$!
	local deadline=$((SECONDS + 30))
	until (exec 3<>"/dev/tcp/127.0.0.1/$KS_PORT") 2>/dev/null; do
		kill -0 "$KS_PID" 2>/dev/null || {
			tail -n 20 "$WORK/keyshard.log" >&2
			die "keyshard exited during startup"
		}
		((SECONDS < deadline)) || die "keyshard not listening on :$KS_PORT after 30s"
		sleep 0.2
	done
}

# run_driver NAME PORT OUT: the driver's cases against 127.0.0.1:PORT as
# ks/ks, JSON lines on OUT, stderr on OUT.err.
run_driver() {
	local name=$1 port=$2 out=$3 cmd
	case $name in
	connector-j) cmd=(java -cp "$WORK/java/compat.jar:$WORK/java/lib/*" compat.Main mysql) ;;
	mariadb-j) cmd=(java -cp "$WORK/java/compat.jar:$WORK/java/lib/*" compat.Main mariadb) ;;
	mysql2) cmd=(env NODE_PATH="$WORK/node/node_modules" node test/drivers/node/cases.js) ;;
	pymysql | mysqlclient) cmd=("$WORK/venv/bin/python" test/drivers/python/cases.py "$name") ;;
	libmariadb) cmd=("$WORK/cases_c") ;;
	go-mysql) cmd=("$WORK/cases_go") ;;
	*) die "unknown driver $name" ;;
	esac
	local rc=0
	timeout "$RUN_TIMEOUT" "${cmd[@]}" 127.0.0.1 "$port" >"$out" 2>"$out.err" || rc=$?
	echo "$rc" >"$out.rc"
}

# ---------------------------------------------------------------- main
for d in $DRIVERS; do
	[[ " $ALL_DRIVERS " == *" $d "* ]] || die "unknown driver $d (have: $ALL_DRIVERS)"
done
t0=$SECONDS
if [[ -z ${SKIP_INSTALL:-} ]]; then
	log "install step"
	install_all
fi
t_install=$((SECONDS - t0))
log "install step took ${t_install}s"
build_programs

if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
[[ -x $KS_BIN ]] || die "$KS_BIN is not executable"
log "$("$KS_BIN" -version 2>&1 | head -n 1)"
scripts/backends.sh up 1 "$DB_PORT" >&2
reset_db
start_keyshard
log "MariaDB 127.0.0.1:$DB_PORT, keyshard 127.0.0.1:$KS_PORT (pid $KS_PID)"

rm -rf "$WORK/out"
mkdir -p "$WORK/out"
for d in $DRIVERS; do
	for target in direct keyshard; do
		port=$DB_PORT
		[[ $target == keyshard && -z ${SELFCHECK:-} ]] && port=$KS_PORT
		reset_db
		t1=$SECONDS
		run_driver "$d" "$port" "$WORK/out/$d.$target.jsonl"
		log "$d via $target: $(wc -l <"$WORK/out/$d.$target.jsonl") cases, exit $(<"$WORK/out/$d.$target.jsonl.rc"), $((SECONDS - t1))s"
	done
done

rc=0
{
	echo "driver matrix, $(date -u '+%Y-%m-%d %H:%M UTC'): $("$KS_BIN" -version 2>&1 | head -n 1)" \
		"vs MariaDB $(scripts/backends.sh sql "$DB_PORT" 'SELECT VERSION()' | tail -n 1)${SELFCHECK:+ (SELFCHECK: both sides direct)}"
	echo
	# shellcheck disable=SC2086
	"$PY" test/drivers/compare.py "$WORK/out" $DRIVERS || rc=$?
} >"$WORK/report.txt"
cat "$WORK/report.txt"
log "total $((SECONDS - t0))s (install ${t_install}s); report in ${WORK#"$ROOT"/}/report.txt"
exit "$rc"
