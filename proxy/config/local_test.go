package config

import "testing"

// An instance's own settings win over the shared document's, from flags
// first, then the environment; a bad address is an error naming the key.
func TestLocal(t *testing.T) {
	c, _ := mustParse(t, "addr: 127.0.0.1:9696\nweb_addr: 127.0.0.1:9797\nlog_path: /var/log/shared\n"+minimal)
	t.Setenv("KEYSHARD_ADDR", "127.0.0.1:1111")
	t.Setenv("KEYSHARD_LOG_PATH", "/var/log/env")
	t.Setenv("KEYSHARD_NAME", "from-env")
	l := Local{Addr: "127.0.0.1:2222", Name: "from-flag"}.FromEnv()
	if err := l.Apply(c); err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:2222" || c.WebAddr != "127.0.0.1:9797" || c.LogPath != "/var/log/env" || l.Name != "from-flag" {
		t.Errorf("applied: addr %s, web_addr %s, log_path %s, name %s", c.Addr, c.WebAddr, c.LogPath, l.Name)
	}
	if err := (Local{WebAddr: "nowhere"}).Apply(c); err == nil {
		t.Error("a bad -web-addr was taken")
	}
}
