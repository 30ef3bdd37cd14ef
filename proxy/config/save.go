package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Clone returns a copy of c that can be edited (by admin commands) without
// touching c: the lists an edit may change are copied.
func (c *Config) Clone() *Config {
	n := *c
	n.Nodes = slices.Clone(c.Nodes)
	n.UserList = slices.Clone(c.UserList)
	n.SchemaList = slices.Clone(c.SchemaList)
	n.AdminUsers = slices.Clone(c.AdminUsers)
	return &n
}

// Rewrite returns the YAML file orig with the settings that admin commands
// change at run time set to c's values: allow_ips, log_sql, slow_log_time
// and each node's master and slave list (a failover changes both).
// Everything else, comments included, stays as written; a key the file
// lacks is added.
func (c *Config) Rewrite(orig []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(orig, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a YAML mapping", c.src)
	}
	top := doc.Content[0]
	setScalar(top, "allow_ips", c.AllowIPs, c.AllowIPs != "")
	setScalar(top, "log_sql", c.LogSQL, c.LogSQL != "" && c.LogSQL != "off")
	setScalar(top, "slow_log_time", strconv.Itoa(c.SlowLogTime), c.SlowLogTime != 0)
	if nodes := mapValue(top, "nodes"); nodes != nil && nodes.Kind == yaml.SequenceNode {
		for _, item := range nodes.Content {
			if item.Kind != yaml.MappingNode {
				continue
			}
			name := mapValue(item, "name")
			if name == nil {
				continue
			}
			if nc, ok := c.Node(name.Value); ok {
				setScalar(item, "master", nc.Master, true) // a failover changes it
				setScalar(item, "slave", nc.Slave, nc.Slave != "")
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Save writes c's run-time settings into the file it was loaded from (see
// Rewrite), atomically: a temporary file renamed over it.
func (c *Config) Save() error {
	if c.src == "" {
		return fmt.Errorf("config: no file to save to")
	}
	orig, err := os.ReadFile(c.src)
	if err != nil {
		return err
	}
	out, err := c.Rewrite(orig)
	if err != nil {
		return err
	}
	return WriteFileAtomic(c.src, out)
}

// WriteFileAtomic writes data to a temporary file next to path and renames
// it over path, keeping path's permissions.
func WriteFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// mapValue returns the value node of key in mapping m (nil if absent).
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setScalar sets key to val in mapping m. A key the file lacks is added
// only when want (the value is not the default).
func setScalar(m *yaml.Node, key, val string, want bool) {
	if v := mapValue(m, key); v != nil {
		if v.Kind == yaml.ScalarNode && v.Value == val {
			return
		}
		*v = yaml.Node{Kind: yaml.ScalarNode, Value: val, LineComment: v.LineComment}
		return
	}
	if !want {
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Value: val})
}
