// Package layout checks the package map: which keyshard packages may
// import which (see proxy/doc.go). It runs `go list -deps`, so it sees
// every import, direct or not.
package layout

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/keyshard/keyshard/"

// forbidden lists, for each package, keyshard packages it must never
// depend on, directly or through another; "x/..." is x and every package
// below it.
var forbidden = map[string][]string{
	"proxy/engine":    {"proxy", "proxy/admin", "proxy/config", "cmd/keyshard"},
	"router":          {"backend", "proxy/..."},
	"router/shard":    {"backend", "proxy/...", "router"},
	"backend":         {"router", "proxy/..."},
	"backend/wire":    {"backend", "router", "proxy/..."},
	"backend/binlog":  {"router", "proxy/..."},
	"proxy/merge":     {"proxy", "proxy/engine", "backend"},
	"proxy/join":      {"proxy", "proxy/engine", "proxy/admin", "proxy/control", "backend", "cmd/keyshard"},
	"proxy/control":   {"proxy", "proxy/admin", "cmd/keyshard"},
	"proxy/blacklist": {"proxy", "proxy/engine", "backend"},
	"proxy/xa":        {"proxy", "proxy/admin", "proxy/control", "cmd/keyshard"},
	"proxy/catalog":   {"proxy", "proxy/admin", "proxy/control", "proxy/engine", "cmd/keyshard"},
	"proxy/deadlock":  {"proxy", "proxy/admin", "proxy/control", "cmd/keyshard"},
	"proxy/reshard":   {"proxy", "proxy/admin", "proxy/control", "proxy/engine", "cmd/keyshard"},
}

// only lists, for a package, every keyshard package it may depend on: the
// frontend is the wire layer, with no business logic below it; the
// blacklist, the etcd store and the digests are leaves.
var only = map[string][]string{
	"proxy/frontend":  {"backend/wire", "backend/sock"},
	"proxy/config":    {"router", "router/shard"},
	"proxy/blacklist": {"router", "router/shard"},
	"proxy/users":     {"backend", "backend/wire", "backend/sock"},
	"proxy/cluster":   {},
	"proxy/digest":    {},
	"proxy/hold":      {},
}

func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	set := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(line, module); ok {
			set[rest] = true
		}
	}
	if !set[pkg] {
		t.Fatalf("go list -deps %s did not list the package itself: %q", pkg, out)
	}
	return set
}

func TestImportDirection(t *testing.T) {
	for pkg, bad := range forbidden {
		d := deps(t, pkg)
		for _, b := range bad {
			for dep := range d {
				if dep == b || strings.HasSuffix(b, "/...") && (dep == strings.TrimSuffix(b, "/...") || strings.HasPrefix(dep, strings.TrimSuffix(b, "...")) && dep != pkg) {
					t.Errorf("%s depends on %s; the package map forbids %s", pkg, dep, b)
				}
			}
		}
	}
	for pkg, allowed := range only {
		for d := range deps(t, pkg) {
			if d != pkg && !slices.Contains(allowed, d) {
				t.Errorf("%s depends on %s; it may depend only on %s of keyshard's packages", pkg, d, strings.Join(allowed, ", "))
			}
		}
	}
	// The engine is what the proxy runs statements with: the dependency
	// goes one way only.
	if !deps(t, "proxy")["proxy/engine"] {
		t.Errorf("proxy does not use proxy/engine")
	}
}
