package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Limits on the proxy root's size, so that it stays the data plane's
// session and server and what is not theirs lives in a package of its own
// (proxy/frontend, proxy/xa, proxy/control, ...): see proxy/doc.go.
const (
	maxSessionFields  = 36
	maxSessionMethods = 60
	maxServerFields   = 34
	maxFileLines      = 600  // any non-test file under proxy/
	maxRootLines      = 7500 // all non-test files of package proxy
)

func TestProxyRootSize(t *testing.T) {
	dir := filepath.Join("..", "..", "proxy")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]int{}
	methods := map[string]int{}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(src, []byte("\n"))
		total += n
		if n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by concern", f, n, maxFileLines)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok {
						continue
					}
					if st, ok := ts.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							fields[ts.Name.Name] += max(len(fl.Names), 1)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				typ := d.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					methods[id.Name]++
				}
			}
		}
	}
	// Every non-test file under proxy/, subpackages included.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, "testdata") || filepath.Dir(path) == dir {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by concern", path, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > maxRootLines {
		t.Errorf("the proxy root has %d lines of non-test code (at most %d)", total, maxRootLines)
	}
	if n := fields["Session"]; n == 0 || n > maxSessionFields {
		t.Errorf("Session has %d fields (at most %d)", n, maxSessionFields)
	}
	if n := methods["Session"]; n == 0 || n > maxSessionMethods {
		t.Errorf("Session has %d methods (at most %d)", n, maxSessionMethods)
	}
	if n := fields["Server"]; n == 0 || n > maxServerFields {
		t.Errorf("Server has %d fields (at most %d)", n, maxServerFields)
	}
	t.Logf("proxy root: %d lines; Session: %d fields, %d methods; Server: %d fields, %d methods",
		total, fields["Session"], methods["Session"], fields["Server"], methods["Server"])
}
