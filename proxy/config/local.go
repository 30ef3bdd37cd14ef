package config

import (
	"cmp"
	"os"
)

// Local are one instance's own settings, from flags or the environment
// (KEYSHARD_ADDR, KEYSHARD_WEB_ADDR, KEYSHARD_NAME, KEYSHARD_LOG_PATH):
// they override the
// shared document on every load (start, reload), so that several
// instances can run on one document.
type Local struct {
	Addr    string // the MySQL protocol listener (addr)
	WebAddr string // the web listener (web_addr)
	Name    string // the instance's name (logs, status, membership)
	LogPath string // the directory of keyshard.log, sql.log and slow.log (log_path)
	Version string // this binary's version (SHOW PROXIES, the member list)
}

// FromEnv fills what l leaves empty from the environment.
func (l Local) FromEnv() Local {
	l.Addr = cmp.Or(l.Addr, os.Getenv("KEYSHARD_ADDR"))
	l.WebAddr = cmp.Or(l.WebAddr, os.Getenv("KEYSHARD_WEB_ADDR"))
	l.Name = cmp.Or(l.Name, os.Getenv("KEYSHARD_NAME"))
	l.LogPath = cmp.Or(l.LogPath, os.Getenv("KEYSHARD_LOG_PATH"))
	return l
}

// Apply overrides c's settings with l's, then checks c again (a bad
// address from a flag is an error naming the key).
func (l Local) Apply(c *Config) error {
	if l.LogPath != "" {
		c.LogPath = l.LogPath
	}
	if l.Addr == "" && l.WebAddr == "" {
		return nil
	}
	if l.Addr != "" {
		c.Addr = l.Addr
	}
	if l.WebAddr != "" {
		c.WebAddr = l.WebAddr
	}
	return c.Validate()
}
