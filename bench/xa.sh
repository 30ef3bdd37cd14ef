#!/usr/bin/env bash
# bench/xa.sh: what writes over several nodes cost through keyshard
# (bench/xabench: alternating rounds, one run): an autocommit INSERT on two
# nodes (XA) vs on one, a transaction on two nodes vs on one, an INSERT
# taking its id from a sequence vs one giving it. Backends:
# scripts/backends.sh on 127.0.0.1:23400-23401 under /tmp/keyshard-bench;
# keyshard on 127.0.0.1:23497. Env: KS_BIN, ITERS (500), ROUNDS (4).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
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
{
	two_node_yaml 127.0.0.1:23497 ks_xa t_xa
	for t in "t_seq 1000" "t_seq1 1"; do
		set -- $t
		cat <<YAML
      - db: ks_xa
        table: $1
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [4, 4]
        auto_increment: id
        sequence_cache: $2
YAML
	done
} >"$WORK/ks.yaml"
start_keyshard "$KS_BIN" "$WORK/ks.yaml" "$WORK/keyshard.log" 23497
go run ./bench/xabench -proxy 127.0.0.1:23497 -iters "${ITERS:-500}" -rounds "${ROUNDS:-4}"
