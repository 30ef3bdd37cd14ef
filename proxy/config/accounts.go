package config

// BackendAccounts lets clients log in as the accounts of a backend server
// as well as user_list's (MaxScale's way): keyshard reads them from
// mysql.global_priv (MariaDB 10.4+; mysql.user on MySQL) of node, with
// the node's own account, and each such client runs on the backends as
// itself. They share TemplateUser's schema and its user_list limits
// (read_only, no_ddl, rw_split, max_execution_time); etc/ks.yaml and the
// README say the rest.
type BackendAccounts struct {
	// TemplateUser is the user_list entry whose schema (schema_list) and
	// limits the backend's accounts get. Required.
	TemplateUser string `yaml:"template_user"`
	// Node is where the accounts are read; default: TemplateUser's
	// schema's default node.
	Node string `yaml:"node"`

	pos `yaml:"-"`
}

// AccountsNode is the node the backend's accounts are read from ("" when
// backend_accounts is off).
func (c *Config) AccountsNode() string {
	b := c.BackendAccounts
	if b == nil {
		return ""
	}
	if b.Node != "" {
		return b.Node
	}
	if sc, ok := c.SchemaFor(b.TemplateUser); ok {
		return sc.Default
	}
	return ""
}

// validateAccounts checks backend_accounts against the users and nodes.
func (c *Config) validateAccounts(p *problems, users map[string]*UserConfig, nodes map[string]*NodeConfig) {
	b := c.BackendAccounts
	if b == nil {
		return
	}
	bp := b.pathOr("backend_accounts")
	switch {
	case b.TemplateUser == "":
		p.add(b.lineOf("template_user"), join(bp, "template_user"), "required: the user_list entry whose schema and limits the backend's accounts get")
	case users[b.TemplateUser] == nil:
		p.add(b.lineOf("template_user"), join(bp, "template_user"), "user %q is not in user_list", b.TemplateUser)
	default:
		if _, ok := c.SchemaFor(b.TemplateUser); !ok {
			p.add(b.lineOf("template_user"), join(bp, "template_user"), "user %q has no schema in schema_list: the backend's accounts would have none", b.TemplateUser)
		}
	}
	if b.Node != "" && nodes[b.Node] == nil {
		p.add(b.lineOf("node"), join(bp, "node"), "unknown node %q", b.Node)
	}
}
