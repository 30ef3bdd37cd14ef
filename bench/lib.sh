# bench/lib.sh: shared by bench/loaddata.sh and bench/xa.sh (sourced).

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
