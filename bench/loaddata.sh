#!/usr/bin/env bash
# bench/loaddata.sh: LOAD DATA LOCAL INFILE of a large file into a sharded
# table through keyshard (2 nodes x 4 sub-tables), against the same load
# into a plain table straight on one MariaDB: time, and keyshard's peak RSS
# (VmHWM) before and after, which must not grow with the file.
#
#   bench/loaddata.sh                 (SIZE_MB=1024: a 1 GiB file)
#
# Env: SIZE_MB (file size), KS_BIN (default: bin/keyshard, built here),
# DIRECT=0 to skip the direct reference, DOWN=1 to stop the backends after.
# Backends: scripts/backends.sh on 127.0.0.1:23400-23401 under
# /tmp/keyshard-bench (the OLTP bench's); keyshard on 127.0.0.1:23496.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export LC_ALL=C
export KS_BACKENDS_DIR=/tmp/keyshard-bench
SIZE_MB=${SIZE_MB:-1024}
DIRECT=${DIRECT:-1}
KS_PORT=23496
WORK=$PWD/.tmp/loadbench
mkdir -p "$WORK"
log() { printf '[loaddata %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [[ -z ${KS_BIN:-} ]]; then
	make -s build
	KS_BIN=bin/keyshard
fi
scripts/backends.sh install >/dev/null
scripts/backends.sh up 2 23400 >&2

FILE=$WORK/load_${SIZE_MB}m.csv
if [[ ! -s $FILE ]]; then
	# ~64-byte lines: id,name,padding
	lines=$((SIZE_MB * 1024 * 1024 / 64))
	log "writing $FILE ($lines lines)"
	seq 1 "$lines" | awk '{ printf "%d,name%d,%s\n", $1, $1, substr("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuv", 1, 62 - length($1) * 2 - 6) }' >"$FILE"
fi
lines=$(wc -l <"$FILE")
bytes=$(stat -c %s "$FILE")
log "file: $bytes bytes, $lines lines"

for port in 23400 23401; do
	scripts/backends.sh sql "$port" "DROP DATABASE IF EXISTS ks_load; CREATE DATABASE ks_load; SET GLOBAL local_infile = 1"
done
two_node_yaml "127.0.0.1:$KS_PORT" ks_load t_load >"$WORK/ks.yaml"
start_keyshard "$KS_BIN" "$WORK/ks.yaml" "$WORK/keyshard.log" "$KS_PORT"

ks() { mariadb --local-infile=1 -h127.0.0.1 -P"$KS_PORT" -uks -pks ks_load "$@"; }
ddl="(id BIGINT PRIMARY KEY, name VARCHAR(32), pad VARCHAR(64)) ENGINE=InnoDB"
ks -e "CREATE TABLE t_load $ddl"
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$KS_PID/status"; }
rss_before=$(hwm)
log "keyshard peak RSS before: ${rss_before} kB"
start=$(date +%s.%N)
ks -e "LOAD DATA LOCAL INFILE '$FILE' INTO TABLE t_load FIELDS TERMINATED BY ','"
ks_secs=$(echo "$(date +%s.%N) - $start" | bc)
rss_after=$(hwm)
loaded=$(ks -N -e "SELECT COUNT(*) FROM t_load")
log "keyshard: ${ks_secs}s, $loaded rows; peak RSS ${rss_before} -> ${rss_after} kB"
[[ $loaded == "$lines" ]] || {
	log "error: loaded $loaded rows, want $lines"
	exit 1
}
# Every row where the rule puts it: id % 8 is the sub-table.
bad=0
for sub in 0 1 2 3 4 5 6 7; do
	port=23400
	((sub >= 4)) && port=23401
	b=$(scripts/backends.sh sql "$port" "SELECT COUNT(*) FROM ks_load.t_load_000$sub WHERE id % 8 <> $sub" | tail -n 1)
	bad=$((bad + b))
done
log "rows in the wrong sub-table: $bad"
((bad == 0)) || exit 1

direct_secs=-
if [[ $DIRECT == 1 ]]; then
	mariadb -h127.0.0.1 -P23400 -uks -pks ks_load -e "CREATE TABLE t_plain $ddl"
	start=$(date +%s.%N)
	mariadb --local-infile=1 -h127.0.0.1 -P23400 -uks -pks ks_load -e "LOAD DATA LOCAL INFILE '$FILE' INTO TABLE t_plain FIELDS TERMINATED BY ','"
	direct_secs=$(echo "$(date +%s.%N) - $start" | bc)
	log "direct into one plain table on one MariaDB: ${direct_secs}s"
fi
printf '| file | lines | keyshard (2 nodes x 4 sub-tables) | direct (1 table, 1 node) | keyshard peak RSS before -> after |\n'
printf '|---|---:|---:|---:|---|\n'
[[ $direct_secs == - ]] || direct_secs=$(printf '%.1f' "$direct_secs")
printf '| %d MiB | %d | %.1f s | %s s | %d -> %d kB |\n' "$((bytes / 1048576))" "$lines" "$ks_secs" "$direct_secs" "$rss_before" "$rss_after"
