#!/usr/bin/env bash
# demo.sh: keyshard in front of two throwaway MariaDB servers.
#
# Builds bin/keyshard, starts backends on 127.0.0.1:3307 and :3308
# (scripts/backends.sh), runs keyshard with etc/ks.yaml on :9696, creates a
# small demo table through the proxy and waits. Ctrl-C stops keyshard and
# the backends (KEEP_BACKENDS=1 leaves the backends running).
#
# Env: KS_CONFIG (default etc/ks.yaml), KS_BIN (default bin/keyshard, built
# here unless set).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CONFIG=${KS_CONFIG:-etc/ks.yaml}
WORK=.tmp/demo
LOG=$WORK/keyshard.log
KS_PID=

die() {
	echo "demo: $*" >&2
	exit 1
}

# yaml_key prints the value of a top-level "key: value" line of CONFIG.
yaml_key() {
	sed -n "s/^$1:[[:space:]]*\([^[:space:]#]*\).*/\1/p" "$CONFIG" | head -n 1
}

cleanup() {
	trap - INT TERM EXIT
	echo
	if [[ -n $KS_PID ]] && kill -0 "$KS_PID" 2>/dev/null; then
		echo "demo: stopping keyshard (pid $KS_PID)"
		kill -TERM "$KS_PID" 2>/dev/null || true
		wait "$KS_PID" 2>/dev/null || true
	fi
	if [[ -z ${KEEP_BACKENDS:-} ]]; then
		echo "demo: stopping backends"
		scripts/backends.sh down || true
	else
		echo "demo: backends left running (scripts/backends.sh down stops them)"
	fi
}

[[ -f $CONFIG ]] || die "$CONFIG not found"
ADDR=$(yaml_key addr)
ADDR=${ADDR:-127.0.0.1:9696}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
[[ -n $HOST && $HOST != 0.0.0.0 ]] || HOST=127.0.0.1

if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
	die "$ADDR is already in use; stop whatever listens there first"
fi

if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
[[ -x $KS_BIN ]] || die "$KS_BIN is not executable"

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

unset KS_BACKENDS_DIR
scripts/backends.sh up 2 3307

"$KS_BIN" check-config "$CONFIG"
mkdir -p "$WORK"
"$KS_BIN" -config "$CONFIG" >"$LOG" 2>&1 &
KS_PID=$!

deadline=$((SECONDS + 30))
until (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; do
	if ! kill -0 "$KS_PID" 2>/dev/null; then
		tail -n 30 "$LOG" >&2
		die "keyshard exited during startup (log: $LOG)"
	fi
	((SECONDS < deadline)) || die "keyshard is not listening on $ADDR after 30s (log: $LOG)"
	sleep 0.2
done

MYSQL=(mariadb -h"$HOST" -P"$PORT" -uks -pks kingshard)
"${MYSQL[@]}" -e "
CREATE TABLE IF NOT EXISTS demo_users (
  id    INT PRIMARY KEY,
  name  VARCHAR(64) NOT NULL,
  email VARCHAR(128) NOT NULL
);
REPLACE INTO demo_users (id, name, email) VALUES
  (1, 'ada', 'ada@example.com'),
  (2, 'grace', 'grace@example.com'),
  (3, 'linus', 'linus@example.com');
SELECT * FROM demo_users ORDER BY id;
CREATE TABLE IF NOT EXISTS test_shard_hash (
  id    BIGINT PRIMARY KEY,
  name  VARCHAR(64) NOT NULL
);
REPLACE INTO test_shard_hash (id, name) VALUES (1, 'one'), (2, 'two'), (5, 'five'), (6, 'six');
SELECT * FROM test_shard_hash WHERE id IN (1, 2, 5, 6);
EXPLAIN SHARD SELECT * FROM test_shard_hash WHERE id IN (1, 6);
INSERT INTO test_shard_hash (name) VALUES ('id from the sequence');
SELECT LAST_INSERT_ID();
CREATE TABLE IF NOT EXISTS demo_country (
  code  CHAR(2) PRIMARY KEY,
  name  VARCHAR(64) NOT NULL
);
REPLACE INTO demo_country (code, name) VALUES ('FR', 'France'), ('JP', 'Japan');
EXPLAIN SHARD REPLACE INTO demo_country (code, name) VALUES ('FR', 'France');"

cat <<EOF

keyshard $("$KS_BIN" -version 2>/dev/null | awk '{print $NF}') is listening on $ADDR (pid $KS_PID), backends on 127.0.0.1:3307 and :3308.

  connect:   mariadb -h$HOST -P$PORT -uks -pks kingshard
  sharded:   test_shard_hash is hash-sharded on id over test_shard_hash_0000..0003 (node1, :3307)
             and _0004..0007 (node2, :3308); demo_users lives on node1;
             demo_country is a global table, copied on both nodes.
             Try: EXPLAIN SHARD SELECT * FROM test_shard_hash WHERE id = 7;
  log:       tail -f $LOG
EOF
metrics=0
for key in web_addr prometheus_addr; do
	a=$(yaml_key "$key")
	if [[ -n $a ]]; then
		echo "  metrics:   curl http://$a/metrics   ($key)"
		metrics=1
	fi
done
if ((!metrics)); then
	echo "  metrics:   off in $CONFIG; set web_addr (e.g. 127.0.0.1:9797) for /metrics, /debug/pprof/, /healthz"
fi
echo
echo "Ctrl-C stops keyshard and the backends."

# wait returns early on a signal; the traps then exit and clean up.
wait "$KS_PID" || true
echo "demo: keyshard exited; last log lines:" >&2
tail -n 20 "$LOG" >&2
