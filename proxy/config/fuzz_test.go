package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse asserts that Parse never panics or hangs, and that what it
// accepts stays valid: go test -fuzz FuzzParse ./proxy/config/
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/kingshard/*.yaml")
	files = append(files, "../../etc/ks.yaml", "../../etc/unshard.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		minimal,
		minimal + "schema:\n  nodes: [node1]\n  rules: {default: node1, shard: [~]}\n",
		"ups: a:b,c:d\n" + minimal,
		"a: &a [*a]\n",
		"x: &x {<<: *x}\n",
		minimal + "  - <<: [{name: n2}, {user: u}]\n    master: h:1\n",
		"? [a]\n: b\n",
		"--- \n...\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		for i := range cfg.Nodes {
			if _, err := cfg.Nodes[i].Slaves(); err != nil {
				t.Fatalf("accepted node with bad slaves: %v", err)
			}
		}
	})
}
