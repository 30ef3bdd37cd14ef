#!/usr/bin/env bash
# demo-cluster.sh: two keyshard instances sharing one config through etcd.
#
# Builds bin/keyshard, starts backends on 127.0.0.1:3307 and :3308
# (scripts/backends.sh) and a throwaway etcd on 127.0.0.1:2479
# (scripts/etcd.sh, data in /tmp/keyshard-demo-cluster-etcd), pushes
# etc/ks.yaml to etcd://127.0.0.1:2479/keyshard, runs ks-a on :9696 (web
# :9797) and ks-b on :9697 (web :9798) from it, creates the demo tables
# through ks-a and waits; logs in .tmp/demo-cluster. Ctrl-C stops both
# instances, etcd and the backends (KEEP_BACKENDS=1 leaves the backends and
# etcd running).
#
# Env: KS_CONFIG (default etc/ks.yaml), KS_BIN (default bin/keyshard, built
# here unless set), KS_ETCD_PORT (default 2479; peers on the next port),
# KS_DEMO_PORT (default 9696: ks-a's port, ks-b's is the next one, their web
# ports 101 and 102 above), KS_BACKEND_PORT (default 3307: other ports get
# a backends directory of their own and a copy of the config naming them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CONFIG=${KS_CONFIG:-etc/ks.yaml}
WORK=.tmp/demo-cluster
ETCD_PORT=${KS_ETCD_PORT:-2479}
DEMO_PORT=${KS_DEMO_PORT:-9696}
BACKEND_PORT=${KS_BACKEND_PORT:-3307}
URL=etcd://127.0.0.1:$ETCD_PORT/keyshard
NAMES=(ks-a ks-b)
ADDRS=("127.0.0.1:$DEMO_PORT" "127.0.0.1:$((DEMO_PORT + 1))")
WEBS=("127.0.0.1:$((DEMO_PORT + 101))" "127.0.0.1:$((DEMO_PORT + 102))")
PIDS=()

# A directory of its own: etcd.sh down stops only this demo's etcd, never
# the tests' (nor the system etcd service, which etcd.sh never touches).
export KS_ETCD_DIR=/tmp/keyshard-demo-cluster-etcd
if [[ $BACKEND_PORT == 3307 ]]; then
	unset KS_BACKENDS_DIR
else
	export KS_BACKENDS_DIR=/tmp/keyshard-demo-cluster-backends-$BACKEND_PORT
fi

die() {
	echo "demo-cluster: $*" >&2
	exit 1
}

port_in_use() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

cleanup() {
	trap - INT TERM EXIT
	echo
	local i
	for i in "${!PIDS[@]}"; do
		if kill -0 "${PIDS[i]}" 2>/dev/null; then
			echo "demo-cluster: stopping ${NAMES[i]} (pid ${PIDS[i]})"
			kill -TERM "${PIDS[i]}" 2>/dev/null || true
		fi
	done
	for i in "${!PIDS[@]}"; do
		wait "${PIDS[i]}" 2>/dev/null || true
	done
	if [[ -z ${KEEP_BACKENDS:-} ]]; then
		echo "demo-cluster: stopping etcd"
		scripts/etcd.sh down || true
		echo "demo-cluster: stopping backends"
		scripts/backends.sh down || true
	else
		echo "demo-cluster: etcd and backends left running; to stop them:"
		echo "  KS_ETCD_DIR=$KS_ETCD_DIR scripts/etcd.sh down"
		echo "  ${KS_BACKENDS_DIR:+KS_BACKENDS_DIR=$KS_BACKENDS_DIR }scripts/backends.sh down"
	fi
}

[[ -f $CONFIG ]] || die "$CONFIG not found"
[[ $ETCD_PORT =~ ^[0-9]+$ && $DEMO_PORT =~ ^[0-9]+$ && $BACKEND_PORT =~ ^[0-9]+$ ]] ||
	die "KS_ETCD_PORT, KS_DEMO_PORT and KS_BACKEND_PORT must be port numbers"

for a in "${ADDRS[@]}" "${WEBS[@]}"; do
	if port_in_use "$a"; then
		die "$a is already in use; stop whatever listens there first (or set KS_DEMO_PORT)"
	fi
done
# An etcd left by KEEP_BACKENDS=1 is reused; anything else on its ports is not.
etcd_state=$(scripts/etcd.sh status 2>/dev/null || true)
if ! grep -q "^${ETCD_PORT}[[:space:]].*up$" <<<"$etcd_state"; then
	for p in "$ETCD_PORT" "$((ETCD_PORT + 1))"; do
		if port_in_use "127.0.0.1:$p"; then
			die "127.0.0.1:$p is already in use; stop whatever listens there first (or set KS_ETCD_PORT)"
		fi
	done
fi

if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
[[ -x $KS_BIN ]] || die "$KS_BIN is not executable"

scripts/backends.sh install
scripts/etcd.sh install

mkdir -p "$WORK"
if [[ $BACKEND_PORT != 3307 ]]; then
	# The config names the backends 127.0.0.1:3307 and :3308.
	sed -e "s/127\.0\.0\.1:3307\b/127.0.0.1:$BACKEND_PORT/g" \
		-e "s/127\.0\.0\.1:3308\b/127.0.0.1:$((BACKEND_PORT + 1))/g" "$CONFIG" >"$WORK/ks.yaml"
	CONFIG=$WORK/ks.yaml
fi
"$KS_BIN" check-config "$CONFIG"

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/etcd.sh up "$ETCD_PORT" >/dev/null
echo "demo-cluster: etcd on 127.0.0.1:$ETCD_PORT (data in $KS_ETCD_DIR)"
scripts/backends.sh up 2 "$BACKEND_PORT"

"$KS_BIN" config push "$CONFIG" "$URL"

for i in "${!NAMES[@]}"; do
	"$KS_BIN" -config "$URL" -addr "${ADDRS[i]}" -web-addr "${WEBS[i]}" -name "${NAMES[i]}" \
		>"$WORK/${NAMES[i]}.log" 2>&1 &
	PIDS[i]=$!
done

deadline=$((SECONDS + 30))
for i in "${!NAMES[@]}"; do
	until port_in_use "${ADDRS[i]}"; do
		if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
			tail -n 30 "$WORK/${NAMES[i]}.log" >&2
			die "${NAMES[i]} exited during startup (log: $WORK/${NAMES[i]}.log)"
		fi
		((SECONDS < deadline)) || die "${NAMES[i]} is not listening on ${ADDRS[i]} after 30s (log: $WORK/${NAMES[i]}.log)"
		sleep 0.2
	done
done

A_HOST=${ADDRS[0]%:*} A_PORT=${ADDRS[0]##*:}
B_HOST=${ADDRS[1]%:*} B_PORT=${ADDRS[1]##*:}
mariadb -h"$A_HOST" -P"$A_PORT" -uks -pks kingshard -e "
CREATE TABLE IF NOT EXISTS demo_users (
  id    INT PRIMARY KEY,
  name  VARCHAR(64) NOT NULL,
  email VARCHAR(128) NOT NULL
);
REPLACE INTO demo_users (id, name, email) VALUES
  (1, 'ada', 'ada@example.com'),
  (2, 'grace', 'grace@example.com'),
  (3, 'linus', 'linus@example.com');
CREATE TABLE IF NOT EXISTS test_shard_hash (
  id    BIGINT PRIMARY KEY,
  name  VARCHAR(64) NOT NULL
);
REPLACE INTO test_shard_hash (id, name) VALUES (1, 'one'), (2, 'two'), (5, 'five'), (6, 'six');
CREATE TABLE IF NOT EXISTS demo_country (
  code  CHAR(2) PRIMARY KEY,
  name  VARCHAR(64) NOT NULL
);
REPLACE INTO demo_country (code, name) VALUES ('FR', 'France'), ('JP', 'Japan');"
# Through the other instance: same config, same backends, same rows.
mariadb -h"$B_HOST" -P"$B_PORT" -uks -pks kingshard -t -e "SELECT * FROM test_shard_hash WHERE id IN (1, 2, 5, 6);"
mariadb -h"$B_HOST" -P"$B_PORT" -uroot -proot -t -e "SHOW PROXIES"

ROOT_A="mariadb -h$A_HOST -P$A_PORT -uroot -proot"
ROOT_B="mariadb -h$B_HOST -P$B_PORT -uroot -proot"
cat <<EOF

keyshard $("$KS_BIN" -version 2>/dev/null | awk '{print $NF}'): ks-a on ${ADDRS[0]} (web ${WEBS[0]}, pid ${PIDS[0]}) and ks-b on ${ADDRS[1]} (web ${WEBS[1]}, pid ${PIDS[1]}),
both on the config at $URL; backends on 127.0.0.1:$BACKEND_PORT and :$((BACKEND_PORT + 1)).

  connect:   mariadb -h$A_HOST -P$A_PORT -uks -pks kingshard     (ks-a)
             mariadb -h$B_HOST -P$B_PORT -uks -pks kingshard     (ks-b)
  members:   $ROOT_A -e 'SHOW PROXIES'
  a change:  $ROOT_A -e "admin server(opt,k,v) values('change','slow_log_time','50')"
             $ROOT_B -e 'SHOW PROXY CONFIG' | grep slow_log_time   (ks-b has it within a second)
  the doc:   $KS_BIN config pull $URL
             $KS_BIN config diff $CONFIG $URL   (exit 1: the change above is in etcd, not in the file)
             $KS_BIN config push $CONFIG $URL   (puts the file back; every instance applies it)
  ready:     curl http://${WEBS[0]}/readyz; curl http://${WEBS[1]}/readyz
  REST:      pull the doc, set web_user/web_password in it, push it: then
             curl -u USER:PASSWORD http://${WEBS[0]}/api/v1/proxies
  one gone:  kill -9 ${PIDS[1]}; ks-b leaves SHOW PROXIES on ks-a within 10s (its lease)
  logs:      tail -f $WORK/ks-a.log $WORK/ks-b.log

EOF
if [[ -z ${KEEP_BACKENDS:-} ]]; then
	echo "Ctrl-C stops both instances, etcd and the backends."
else
	echo "Ctrl-C stops both instances (KEEP_BACKENDS: etcd and the backends stay)."
fi

# Until both instances are gone (kill one to watch it leave SHOW PROXIES):
# wait returns early on a signal; the traps then exit and clean up.
declare -A running
for i in "${!NAMES[@]}"; do running[$i]=${PIDS[i]}; done
while ((${#running[@]})); do
	wait -n "${running[@]}" || true
	for i in "${!running[@]}"; do
		if ! kill -0 "${running[$i]}" 2>/dev/null; then
			unset "running[$i]"
			echo "demo-cluster: ${NAMES[i]} exited; last log lines:" >&2
			tail -n 5 "$WORK/${NAMES[i]}.log" >&2
		fi
	done
done
