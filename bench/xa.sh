#!/usr/bin/env bash
# bench/xa.sh: what writes over several nodes cost through keyshard
# (bench/xabench: alternating rounds, one run): an autocommit INSERT on two
# nodes (XA) vs on one, a transaction on two nodes vs on one. Backends:
# scripts/backends.sh on 127.0.0.1:23400-23401 under /tmp/keyshard-bench;
# keyshard on 127.0.0.1:23497. Env: KS_BIN, ITERS (500), ROUNDS (4).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KS_BACKENDS_DIR=/tmp/keyshard-bench
WORK=$PWD/.tmp/xabench
mkdir -p "$WORK"
if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23400 >&2
for port in 23400 23401; do
	scripts/backends.sh sql "$port" "DROP DATABASE IF EXISTS ks_xa; CREATE DATABASE ks_xa"
done
cat >"$WORK/ks.yaml" <<YAML
addr: 127.0.0.1:23497
log_level: warn
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:23400
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:23401
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      - db: ks_xa
        table: t_xa
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
YAML
"$KS_BIN" -config "$WORK/ks.yaml" >"$WORK/keyshard.log" 2>&1 &
KS_PID=$!
trap 'kill -TERM $KS_PID 2>/dev/null || true; wait $KS_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/23497) 2>/dev/null && break; sleep 0.2; done
go run ./bench/xabench -proxy 127.0.0.1:23497 -iters "${ITERS:-500}" -rounds "${ROUNDS:-4}"
