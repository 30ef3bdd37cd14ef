package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// nodeBudget bounds the values visited after alias expansion: yaml.v3
// leaves aliases unexpanded in a yaml.Node tree, so a "billion laughs"
// document or a self-referencing anchor would otherwise make the walk
// exponential or endless.
// 256k values is two orders of magnitude above a large real config.
const nodeBudget = 1 << 18

// maxMergeDepth bounds nested "<<" merge keys; with fan-out, nested merges
// grow exponentially even without a cycle.
const maxMergeDepth = 16

// decoder walks a yaml.Node tree into the config structs by their yaml tags.
// It reports every problem rather than stopping at the first.
type decoder struct {
	problems
	warns  []warning
	budget int
	legacy legacyState
}

func newDecoder(src string) *decoder {
	return &decoder{problems: problems{src: src}, budget: nodeBudget}
}

type warning struct {
	line int
	text string
}

func (d *decoder) warn(line int, path, format string, args ...any) {
	e := &Error{Source: d.src, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
	d.warns = append(d.warns, warning{line, e.Error()})
}

// warnings returns the warnings in file order.
func (d *decoder) warnings() []string {
	slices.SortStableFunc(d.warns, func(a, b warning) int { return cmp.Compare(a.line, b.line) })
	out := make([]string, len(d.warns))
	for i, w := range d.warns {
		out[i] = w.text
	}
	return out
}

var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlErr turns a yaml.v3 syntax error into an *Error with its line.
func (d *decoder) yamlErr(err error) {
	if m := yamlErrLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.add(line, "", "%s", m[2])
		return
	}
	d.add(0, "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
}

// decodeFile decodes the single YAML document in data into cfg.
func (d *decoder) decodeFile(data []byte, cfg *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.yamlErr(err)
		}
		return // an empty file: Validate says what is missing
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.yamlErr(err)
		return
	default:
		d.add(extra.Line, "", "more than one YAML document")
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	root = d.resolve(root)
	if root == nil || isNull(root) {
		return
	}
	d.decodeValue(root, "", reflect.ValueOf(cfg).Elem())
	// A missing top-level key has no line; "line 1" would mislead.
	cfg.line = 0
}

// resolve follows an alias to its anchor and charges the node budget.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	d.budget--
	if d.budget == 0 {
		d.add(n.Line, "", "document too large: more than %d values after expanding aliases", nodeBudget)
	}
	return n
}

// exhausted reports that walking on is pointless: the budget is spent or
// enough problems are known.
func (d *decoder) exhausted() bool { return d.budget <= 0 || d.full() }

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func (d *decoder) wrongType(n *yaml.Node, path, want string) {
	if path == "" {
		path = "top level"
	}
	d.add(n.Line, path, "want %s, got %s", want, describe(n))
}

// in renders " in nodes[0]" for messages about keys inside path.
func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var durationType = reflect.TypeFor[Duration]()

// decodeValue decodes n into v. A null leaves v at its zero value, as
// kingshard's `slave :` and `password :` mean "empty".
func (d *decoder) decodeValue(n *yaml.Node, path string, v reflect.Value) {
	if n = d.resolve(n); n == nil || d.exhausted() {
		return
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	if v.Type() == durationType {
		if n.Kind != yaml.ScalarNode {
			d.wrongType(n, path, "a duration")
			return
		}
		dur, err := ParseDuration(n.Value)
		if err != nil {
			d.add(n.Line, path, "%v", err)
			return
		}
		v.Set(reflect.ValueOf(dur))
		return
	}
	switch v.Kind() {
	case reflect.String:
		// Any scalar is its literal text: `password: 0123` is "0123", and
		// `log_sql: off` stays "off" rather than a YAML 1.1 boolean.
		if n.Kind != yaml.ScalarNode {
			d.wrongType(n, path, "a string")
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		i, ok := decodeInt(n)
		if !ok {
			d.wrongType(n, path, "an integer")
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
			d.wrongType(n, path, "true or false")
			return
		}
		v.SetBool(b)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decodeValue(n, path, p.Elem())
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Slice:
		d.decodeSlice(n, path, v)
	default:
		panic("config: no decoder for " + v.Type().String())
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.wrongType(n, path, "a list")
		return
	}
	et := v.Type().Elem()
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		if d.exhausted() {
			return
		}
		ip := fmt.Sprintf("%s[%d]", path, i)
		if et.Kind() == reflect.Struct {
			r := d.resolve(item)
			if r == nil {
				continue
			}
			if isNull(r) {
				// kingshard writes "shard:\n  -" for "no shard rules".
				if et != reflect.TypeFor[ShardConfig]() {
					d.warn(r.Line, ip, "empty item ignored")
				}
				continue
			}
			item = r
		}
		e := reflect.New(et).Elem()
		d.decodeValue(item, ip, e)
		out = reflect.Append(out, e)
	}
	v.Set(out)
}

// decodeInt reads a YAML integer. Plain decimals, nearly every integer in
// a config, skip yaml.v3's comparatively slow Node.Decode.
func decodeInt(n *yaml.Node) (int, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	if n.Tag == "!!int" {
		if i, err := strconv.Atoi(n.Value); err == nil {
			return i, true
		}
	}
	var i int
	return i, n.Decode(&i) == nil
}

// positioned is implemented by the structs that embed pos.
type positioned interface{ setPos(pos) }

func (d *decoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.wrongType(n, path, "a mapping")
		return
	}
	fields := fieldsOf(v.Type())
	keys := map[string]int{}
	for _, e := range d.entries(n, path, nil) {
		if d.exhausted() {
			return
		}
		name := e.key.Value
		keys[name] = e.key.Line
		if i, ok := fields[name]; ok {
			d.decodeValue(e.val, join(path, name), v.Field(i))
			continue
		}
		if d.legacyKey(v, path, name, e.key, e.val) {
			continue
		}
		d.add(e.key.Line, "", "unknown key %q%s", name, in(path))
	}
	if p, ok := v.Addr().Interface().(positioned); ok {
		p.setPos(pos{path: path, line: n.Line, keys: keys})
	}
}

type entry struct{ key, val *yaml.Node }

// entries lists a mapping's pairs, rejecting duplicate and non-scalar keys
// and expanding "<<" merge keys; explicit keys win over merged ones, and
// earlier merged mappings over later ones, as the YAML merge spec says.
func (d *decoder) entries(n *yaml.Node, path string, merging []*yaml.Node) []entry {
	var out []entry
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i])
		if k == nil || d.exhausted() {
			return out
		}
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, path, "keys must be plain strings, got %s", describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, "", "duplicate key %q%s (first at line %d)", k.Value, in(path), first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, entry{k, n.Content[i+1]})
	}
	for _, m := range merges {
		if m = d.resolve(m); m == nil || d.exhausted() {
			return out
		}
		if len(merging) >= maxMergeDepth {
			d.add(m.Line, path, "merge keys nested more than %d deep", maxMergeDepth)
			return out
		}
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = srcs[:0]
			for _, s := range m.Content {
				if s = d.resolve(s); s != nil {
					srcs = append(srcs, s)
				}
			}
		}
		for _, s := range srcs {
			if s.Kind != yaml.MappingNode {
				d.add(s.Line, join(path, "<<"), "want a mapping or a list of mappings, got %s", describe(s))
				continue
			}
			if s == n || slices.Contains(merging, s) {
				d.add(s.Line, join(path, "<<"), "merges a mapping into itself")
				return out
			}
			for _, e := range d.entries(s, path, append(merging, n)) {
				if _, ok := seen[e.key.Value]; !ok {
					seen[e.key.Value] = e.key.Line
					out = append(out, e)
				}
			}
		}
	}
	return out
}

var fieldCache sync.Map // reflect.Type -> map[string]int

// fieldsOf maps yaml key names to field indexes of struct type t.
func fieldsOf(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	fieldCache.Store(t, m)
	return m
}
