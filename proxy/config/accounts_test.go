package config

import (
	"strings"
	"testing"
)

// backend_accounts needs a template user of user_list with a schema, and
// a known node if it names one; the node defaults to the schema's default.
func TestBackendAccounts(t *testing.T) {
	const base = `
user_list:
  - {user: ks, password: ks}
  - {user: noschema, password: x}
nodes:
  - {name: node1, user: ks, master: "127.0.0.1:3306"}
  - {name: node2, user: ks, master: "127.0.0.1:3307"}
schema_list:
  - {user: ks, nodes: [node1, node2], default: node2}
`
	c, _, err := Parse([]byte(base+"backend_accounts:\n  template_user: ks\n"), "ks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.AccountsNode(); got != "node2" {
		t.Errorf("AccountsNode = %q, want the schema's default node2", got)
	}
	c, _, err = Parse([]byte(base+"backend_accounts: {template_user: ks, node: node1}\n"), "ks.yaml")
	if err != nil || c.AccountsNode() != "node1" {
		t.Fatalf("node1: %v %q", err, c.AccountsNode())
	}
	for _, tc := range []struct{ yaml, want string }{
		{"backend_accounts: {node: node1}", "backend_accounts.template_user: required"},
		{"backend_accounts: {template_user: nobody}", `user "nobody" is not in user_list`},
		{"backend_accounts: {template_user: noschema}", `user "noschema" has no schema in schema_list`},
		{"backend_accounts: {template_user: ks, node: node9}", `backend_accounts.node: unknown node "node9"`},
		{"backend_accounts: {template_user: ks, nodes: node1}", `unknown key "nodes"`},
	} {
		_, _, err := Parse([]byte(base+tc.yaml+"\n"), "ks.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	var off Config
	if off.AccountsNode() != "" {
		t.Error("off: a node")
	}
}
