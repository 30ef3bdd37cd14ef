// Package testenv starts the real servers keyshard's tests run against:
// throwaway MariaDB instances from scripts/backends.sh, each set of them in
// a directory of its own so that test packages running at once do not
// meet. It is for tests only.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Port is the integer in environment variable name, or def.
func Port(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// Backends runs scripts/backends.sh with args on the instances under dir.
func Backends(dir string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(RepoRoot(), "scripts", "backends.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "KS_BACKENDS_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("backends.sh %v: %v\n%s", args, err, out)
	}
	return string(out), nil
}

// Up starts n instances on 127.0.0.1:port.. under dir (idempotent).
func Up(dir string, n, port int) error {
	if _, err := Backends(dir, "install"); err != nil {
		return err
	}
	_, err := Backends(dir, "up", strconv.Itoa(n), strconv.Itoa(port))
	return err
}

// Down stops every instance under dir and removes it, unless
// KEEP_BACKENDS is set.
func Down(dir string) {
	if os.Getenv("KEEP_BACKENDS") == "" {
		_, _ = Backends(dir, "down")
	}
}
