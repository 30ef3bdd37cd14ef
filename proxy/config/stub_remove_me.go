package config

// TEMPORARY stand-in until the real config package lands; deleted then.

import (
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

type Config struct {
	Addr               string         `yaml:"addr"`
	PrometheusAddr     string         `yaml:"prometheus_addr"`
	UserList           []UserConfig   `yaml:"user_list"`
	WebAddr            string         `yaml:"web_addr"`
	WebUser            string         `yaml:"web_user"`
	WebPassword        string         `yaml:"web_password"`
	LogPath            string         `yaml:"log_path"`
	LogLevel           string         `yaml:"log_level"`
	LogSQL             string         `yaml:"log_sql"`
	SlowLogTime        int            `yaml:"slow_log_time"`
	AllowIPs           string         `yaml:"allow_ips"`
	BlacklistSQLFile   string         `yaml:"blacklist_sql_file"`
	ProxyCharset       string         `yaml:"proxy_charset"`
	Nodes              []NodeConfig   `yaml:"nodes"`
	SchemaList         []SchemaConfig `yaml:"schema_list"`
	MaxConnections     int            `yaml:"max_connections"`
	TCPNoDelay         *bool          `yaml:"tcp_nodelay"`
	BackendTCPNoDelay  *bool          `yaml:"backend_tcp_nodelay"`
	ClientWriteBuffer  int            `yaml:"client_write_buffer"`
	BackendWriteBuffer int            `yaml:"backend_write_buffer"`
	ReadBuffer         int            `yaml:"read_buffer"`
	PoolWaitTimeout    Duration       `yaml:"pool_wait_timeout"`
	PoolIdleTimeout    Duration       `yaml:"pool_idle_timeout"`
	PoolMaxLifetime    Duration       `yaml:"pool_max_lifetime"`
	PoolMinIdle        int            `yaml:"pool_min_idle"`
	ConnectTimeout     Duration       `yaml:"connect_timeout"`
	ShutdownTimeout    Duration       `yaml:"shutdown_timeout"`
	MaxAllowedPacket   int            `yaml:"max_allowed_packet"`
	TLSCert            string         `yaml:"tls_cert"`
	TLSKey             string         `yaml:"tls_key"`
	RSAKey             string         `yaml:"rsa_key"`
	DefaultAuthPlugin  string         `yaml:"default_auth_plugin"`
	AdminUsers         []string       `yaml:"admin_users"`
	LogMaxSizeMB       int            `yaml:"log_max_size_mb"`
	LogMaxBackups      int            `yaml:"log_max_backups"`
	LogMaxAgeDays      int            `yaml:"log_max_age_days"`
	LogCompress        *bool          `yaml:"log_compress"`
}
type UserConfig struct {
	User       string `yaml:"user"`
	Password   string `yaml:"password"`
	AuthPlugin string `yaml:"auth_plugin"`
}
type NodeConfig struct {
	Name             string `yaml:"name"`
	DownAfterNoAlive int    `yaml:"down_after_noalive"`
	MaxConnsLimit    int    `yaml:"max_conns_limit"`
	User             string `yaml:"user"`
	Password         string `yaml:"password"`
	Master           string `yaml:"master"`
	Slave            string `yaml:"slave"`
}
type SchemaConfig struct {
	User      string         `yaml:"user"`
	Nodes     []string       `yaml:"nodes"`
	Default   string         `yaml:"default"`
	ShardRule []*ShardConfig `yaml:"shard"`
}
type ShardConfig struct {
	DB            string   `yaml:"db"`
	Table         string   `yaml:"table"`
	Key           string   `yaml:"key"`
	Nodes         []string `yaml:"nodes"`
	Locations     []int    `yaml:"locations"`
	Type          string   `yaml:"type"`
	TableRowLimit int      `yaml:"table_row_limit"`
	DateRange     []string `yaml:"date_range"`
}
type Duration time.Duration

func (d Duration) D() time.Duration { return time.Duration(d) }
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	*d = Duration(v)
	return err
}
func Load(path string) (*Config, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return Parse(b, path)
}
func Parse(data []byte, source string) (*Config, []string, error) {
	c := &Config{}
	if err := yaml.Unmarshal(data, c); err != nil {
		return nil, nil, err
	}
	if c.PoolWaitTimeout == 0 {
		c.PoolWaitTimeout = Duration(5 * time.Second)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = Duration(10 * time.Second)
	}
	if c.MaxAllowedPacket == 0 {
		c.MaxAllowedPacket = 64 << 20
	}
	if c.PoolMinIdle == 0 {
		c.PoolMinIdle = 2
	}
	return c, nil, nil
}
func (c *Config) UserPassword(user string) (UserConfig, bool) {
	for _, u := range c.UserList {
		if u.User == user {
			return u, true
		}
	}
	return UserConfig{}, false
}
func (c *Config) SchemaFor(user string) (*SchemaConfig, bool) {
	for i := range c.SchemaList {
		if c.SchemaList[i].User == user {
			return &c.SchemaList[i], true
		}
	}
	return nil, false
}
func (c *Config) IsAdmin(user string) bool {
	if user == "root" {
		return true
	}
	for _, a := range c.AdminUsers {
		if strings.EqualFold(a, user) {
			return true
		}
	}
	return false
}
