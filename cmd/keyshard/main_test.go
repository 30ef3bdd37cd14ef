package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command line a kingshard user meets: every word and flag either does
// what it says or is an error (exit 2), never a start.
func TestCommandLine(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("addr: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, c := range []struct {
		args     []string
		code     int
		out, err string // substrings of stdout and stderr
	}{
		{args: []string{"help"}, out: "keyshard check-config [-h] FILE"},
		{args: []string{"help"}, out: "SIGHUP"},
		{args: []string{"-h"}, out: "-log-level LEVEL"},
		{args: []string{"-h"}, out: "-log-path DIR"},
		{args: []string{"-h"}, out: "etcd://host:port"},
		{args: []string{"config", "help"}, out: "keyshard config push [-rev N] [-force] [-blacklist FILE] FILE URL"},
		{args: []string{"config", "bogus", "x"}, code: 2, err: "usage:"},
		{args: []string{"--help"}, out: "Signals:"},
		{args: []string{"help", "config"}, out: "user_list:"},
		{args: []string{"version"}, out: "keyshard dev"},
		{args: []string{"-version"}, out: "keyshard dev"},
		{args: []string{"-v"}, out: "keyshard dev"},
		{args: []string{"check-config", "-h"}, out: "usage: keyshard check-config FILE"},
		{args: []string{"check-config", "../../etc/ks.yaml"}, out: "../../etc/ks.yaml: ok"},
		{args: []string{"check-config", bad}, code: 1, err: "bad.yaml"},
		{args: []string{"check-config"}, code: 2, err: "usage: keyshard check-config FILE"},
		{args: []string{"check-config", "a", "b"}, code: 2, err: "usage"},
		{args: []string{"serve"}, code: 2, err: `unknown command "serve"`},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"-config", missing, "extra"}, code: 2, err: `unexpected "extra"`},
		{args: []string{"-log-level", "loud", "-config", missing}, code: 2, err: "-log-level"},
		// kingshard's flags are taken; the missing file is the only problem.
		{args: []string{"-config", missing, "-log-level", "debug"}, code: 1, err: "missing.yaml"},
		// This instance's own addresses, over the config's, are checked.
		{args: []string{"-config", "../../etc/ks.yaml", "-addr", "no-port"}, code: 2, err: "-addr/-web-addr"},
		{args: []string{"-h"}, out: "-web-addr HOST:PORT"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.err) {
			t.Errorf("keyshard %s: exit %d, stdout %.200q, stderr %.200q; want exit %d, stdout with %q, stderr with %q",
				strings.Join(c.args, " "), code, out.String(), errb.String(), c.code, c.out, c.err)
		}
	}
}
