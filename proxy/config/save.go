package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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
// and each node's master and slave list. Everything else stays as written,
// byte for byte (comments, blank lines, quoting): only the values that
// change are replaced in the text, and a key the file lacks is added on a
// line of its own. A file too unusual for that (flow style, block
// scalars) is re-encoded whole instead: comments stay, layout may not.
func (c *Config) Rewrite(orig []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(orig, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a YAML mapping", c.src)
	}
	top := doc.Content[0]
	var sets []setting
	sets = append(sets,
		setting{m: top, key: "allow_ips", val: c.AllowIPs, want: c.AllowIPs != ""},
		setting{m: top, key: "log_sql", val: c.LogSQL, want: c.LogSQL != "" && c.LogSQL != "off", plain: true},
		setting{m: top, key: "slow_log_time", val: strconv.Itoa(c.SlowLogTime), want: c.SlowLogTime != 0, plain: true})
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
				sets = append(sets, setting{m: item, key: "master", val: nc.Master, want: true},
					setting{m: item, key: "slave", val: nc.Slave, want: nc.Slave != ""})
			}
		}
	}
	// A default left out may still be inherited (a <<: merge key): then
	// every key is written out.
	for _, explicit := range []bool{false, true} {
		if explicit {
			for i := range sets {
				sets[i].want = true
			}
		}
		if out, ok := splice(orig, top, sets); ok && c.writtenIn(out) == nil {
			return out, nil
		}
	}
	for _, st := range sets {
		setScalar(st.m, st.key, st.val, st.want)
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
	if err := c.writtenIn(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("%s: the change cannot be written into the file: %w", c.src, err)
	}
	return buf.Bytes(), nil
}

// writtenIn checks that the file out reads back with c's run-time
// settings (what Rewrite writes).
func (c *Config) writtenIn(out []byte) error {
	back, _, err := Parse(out, c.src)
	if err != nil {
		return err
	}
	if back.AllowIPs != c.AllowIPs || back.LogSQL != c.LogSQL || back.SlowLogTime != c.SlowLogTime {
		return fmt.Errorf("it would read back as allow_ips %q, log_sql %q, slow_log_time %d", back.AllowIPs, back.LogSQL, back.SlowLogTime)
	}
	for _, n := range c.Nodes {
		if b, ok := back.Node(n.Name); ok && (b.Master != n.Master || b.Slave != n.Slave) {
			return fmt.Errorf("it would read back with node %s's master %q and slaves %q", n.Name, b.Master, b.Slave)
		}
	}
	return nil
}

// setting is one key Rewrite sets in mapping m (added if absent only when
// want: the value is not the default).
type setting struct {
	m        *yaml.Node
	key, val string
	want     bool
	plain    bool // written as is (a number, on/off: yaml.Marshal would quote them)
}

// text is the setting's value as YAML.
func (st setting) text() string {
	if st.plain {
		return st.val
	}
	return yamlScalar(st.val)
}

// splice makes the settings as edits of the text of orig (see Rewrite);
// ok is false when the file's shape does not allow it. Rewrite checks
// that the result reads back as meant.
func splice(orig []byte, top *yaml.Node, sets []setting) ([]byte, bool) {
	lines := strings.SplitAfter(string(orig), "\n")
	eol := "\n"
	if strings.Contains(string(orig), "\r\n") {
		eol = "\r\n"
	}
	type edit struct {
		line, from, to int // 0-based line, byte range in it
		text           string
		insert         bool // a new line before line (to unused)
		n              int  // the order it was made in
	}
	var edits []edit
	add := func(e edit) {
		e.n = len(edits)
		edits = append(edits, e)
	}
	for _, st := range sets {
		if st.m.Style&yaml.FlowStyle != 0 {
			return nil, false
		}
		v := mapValue(st.m, st.key)
		if v != nil {
			if v.Kind != yaml.ScalarNode || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || v.Value == st.val {
				if v.Kind != yaml.ScalarNode || v.Value != st.val {
					return nil, false
				}
				continue
			}
			l := v.Line - 1
			if l < 0 || l >= len(lines) {
				return nil, false
			}
			from := v.Column - 1
			if v.Value == "" && v.Tag == "!!null" {
				// An empty value (kingshard's "slave:"): yaml.v3 puts it
				// right after the colon.
				add(edit{line: l, from: from, to: from, text: " " + st.text()})
				continue
			}
			to, ok := scalarEnd(lines[l], from)
			if !ok {
				return nil, false
			}
			add(edit{line: l, from: from, to: to, text: st.text()})
			continue
		}
		if !st.want {
			continue
		}
		if st.m == top {
			add(edit{line: len(lines), insert: true, text: st.key + ": " + st.text() + eol})
			continue
		}
		// In a node: after its name line, indented as its keys.
		k := st.m.Content[0] // the keys of a block mapping share its column
		name := mapValue(st.m, "name")
		if name == nil {
			return nil, false
		}
		add(edit{line: name.Line, insert: true, text: strings.Repeat(" ", k.Column-1) + st.key + ": " + st.text() + eol})
	}
	if len(edits) == 0 {
		return orig, true
	}
	// From the end, so that earlier positions hold (lines inserted at one
	// place: the last made first, so they read in the order made).
	slices.SortFunc(edits, func(a, b edit) int {
		if a.line != b.line {
			return b.line - a.line
		}
		if a.from != b.from {
			return b.from - a.from
		}
		return b.n - a.n
	})
	for _, e := range edits {
		if e.insert {
			if last := len(lines) - 1; e.line == len(lines) && last >= 0 && lines[last] != "" && !strings.HasSuffix(lines[last], "\n") {
				lines[len(lines)-1] += eol
			}
			lines = slices.Insert(lines, e.line, e.text)
			continue
		}
		lines[e.line] = lines[e.line][:e.from] + e.text + lines[e.line][e.to:]
	}
	return []byte(strings.Join(lines, "")), true // (Rewrite reads it back: writtenIn)
}

// scalarEnd returns where the scalar starting at from in line ends: after
// its closing quote, or (plain) before a comment or the line's end,
// trailing blanks left out.
func scalarEnd(line string, from int) (int, bool) {
	if from >= len(line) {
		return 0, false
	}
	switch q := line[from]; q {
	case '"', '\'':
		for i := from + 1; i < len(line); i++ {
			switch {
			case q == '"' && line[i] == '\\':
				i++
			case line[i] == q && q == '\'' && i+1 < len(line) && line[i+1] == '\'':
				i++
			case line[i] == q:
				return i + 1, true
			}
		}
		return 0, false // continues on the next line
	}
	end := len(strings.TrimRight(line, "\r\n"))
	for i := from + 1; i < end; i++ {
		if line[i] == '#' && (line[i-1] == ' ' || line[i-1] == '\t') {
			end = i
			break
		}
	}
	return from + len(strings.TrimRight(line[from:end], " \t")), true
}

// yamlScalar is val as a YAML scalar: plain if it reads back the same,
// else quoted.
func yamlScalar(val string) string {
	b, err := yaml.Marshal(val)
	if err != nil {
		return strconv.Quote(val)
	}
	return strings.TrimSuffix(string(b), "\n")
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
