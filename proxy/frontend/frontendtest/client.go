// Package frontendtest builds what MySQL clients send at login
// (handshake responses, SSL requests, auth data), for the tests and fuzz
// targets of the frontend and of the proxy behind it.
package frontendtest

import (
	"bytes"
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// ClientResponse is a HandshakeResponse41 as clients build it.
type ClientResponse struct {
	Caps      uint32
	Ext       uint32 // MariaDB's, sent without CLIENT_MYSQL (CLIENT_LONG_PASSWORD)
	Collation uint8
	User      string
	Auth      []byte
	DB        string
	Plugin    string
	Attrs     map[string]string
	ZstdLevel uint8
}

// Append appends the response to b.
func (r *ClientResponse) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, r.Caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, r.Collation)
	b = append(b, make([]byte, 19)...)
	if r.Caps&mysql.CLIENT_LONG_PASSWORD == 0 {
		b = binary.LittleEndian.AppendUint32(b, r.Ext)
	} else {
		b = append(b, 0, 0, 0, 0)
	}
	b = append(b, r.User...)
	b = append(b, 0)
	switch {
	case r.Caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		b = wire.AppendLenEncString(b, string(r.Auth))
	case r.Caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		b = append(b, byte(len(r.Auth)))
		b = append(b, r.Auth...)
	default:
		b = append(b, r.Auth...)
		b = append(b, 0)
	}
	if r.Caps&mysql.CLIENT_CONNECT_WITH_DB != 0 {
		b = append(b, r.DB...)
		b = append(b, 0)
	}
	if r.Caps&mysql.CLIENT_PLUGIN_AUTH != 0 {
		b = append(b, r.Plugin...)
		b = append(b, 0)
	}
	if r.Caps&mysql.CLIENT_CONNECT_ATTRS != 0 {
		var kv []byte
		for k, v := range r.Attrs {
			kv = wire.AppendLenEncString(wire.AppendLenEncString(kv, k), v)
		}
		b = wire.AppendLenEncString(b, string(kv))
	}
	if r.Caps&mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 {
		b = append(b, r.ZstdLevel)
	}
	return b
}

// SSLRequest is the 32-byte SSLRequest that starts a TLS upgrade.
func SSLRequest(caps uint32) []byte {
	r := ClientResponse{Caps: caps | mysql.CLIENT_SSL, Collation: 45}
	return r.Append(nil)[:32]
}

// AuthFor answers scramble for password with plugin.
func AuthFor(plugin string, scramble []byte, password string) []byte {
	if password == "" {
		return nil
	}
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD {
		return mysql.CalcCachingSha2Password(scramble, []byte(password))
	}
	return mysql.CalcNativePassword(scramble, []byte(password))
}

// Client capability sets the seeds use, as real clients send them.
const (
	// libmysqlclient 8 / Connector/J: CLIENT_MYSQL, lenenc auth data,
	// attributes.
	CapsMySQL = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_CONNECT_WITH_DB |
		mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_INTERACTIVE | mysql.CLIENT_TRANSACTIONS |
		mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS |
		mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA |
		mysql.CLIENT_SESSION_TRACK | mysql.CLIENT_DEPRECATE_EOF
	// MariaDB Connector/C: no CLIENT_MYSQL, so extended capabilities follow.
	CapsMariaDB = CapsMySQL &^ (mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_DEPRECATE_EOF)
	// PyMySQL, go-sql-driver: one-byte auth length, no attributes.
	CapsSimple = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS |
		mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_WITH_DB
	// A pre-4.1 style answer: NUL-terminated auth data, nothing after it.
	CapsOld = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS
)

// HandshakeSeeds are handshake responses real clients send (auth data made
// for a scramble of zeros: they log in as users without a password only).
func HandshakeSeeds() [][]byte {
	zero := make([]byte, 20)
	rs := []ClientResponse{
		{Caps: CapsMySQL, Collation: 255, User: "ks", Auth: AuthFor(mysql.AUTH_CACHING_SHA2_PASSWORD, zero, "ks"), DB: "kingshard",
			Plugin: mysql.AUTH_CACHING_SHA2_PASSWORD, Attrs: map[string]string{"_client_name": "libmysql", "_os": "Linux"}},
		{Caps: CapsMySQL | mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM, Collation: 45, User: "nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD,
			Attrs: map[string]string{"program_name": "mysql"}, ZstdLevel: 7},
		{Caps: CapsMariaDB, Ext: 1<<0 | 1<<2 | 1<<3, Collation: 45, User: "plain", Auth: AuthFor(mysql.AUTH_NATIVE_PASSWORD, zero, "plain"),
			Plugin: mysql.AUTH_NATIVE_PASSWORD, Attrs: map[string]string{"_client_name": "libmariadb"}},
		{Caps: CapsMariaDB | mysql.CLIENT_COMPRESS, Collation: 33, User: "nopw", DB: "kingshard", Plugin: mysql.AUTH_NATIVE_PASSWORD},
		{Caps: CapsSimple, Collation: 46, User: "nopw", DB: "kingshard", Plugin: mysql.AUTH_NATIVE_PASSWORD},
		{Caps: CapsSimple, Collation: 46, User: "sha2nopw", Plugin: mysql.AUTH_CACHING_SHA2_PASSWORD},
		{Caps: CapsSimple, Collation: 8, User: "sha2", Auth: []byte("x"), Plugin: mysql.AUTH_CACHING_SHA2_PASSWORD},
		{Caps: CapsSimple, Collation: 8, User: "root", Auth: zero, Plugin: "mysql_clear_password"},
		{Caps: CapsOld, Collation: 8, User: "nopw"},
		{Caps: CapsOld | mysql.CLIENT_CONNECT_WITH_DB, Collation: 8, User: "nopw", DB: "fake_error"},
		{Caps: CapsSimple, Collation: 45, User: "nobody", Auth: zero[:8]},
	}
	var out [][]byte
	for _, r := range rs {
		out = append(out, r.Append(nil))
	}
	return append(out,
		SSLRequest(CapsMySQL),
		SSLRequest(CapsMariaDB),
		make([]byte, 31),
		bytes.Repeat([]byte{0xff}, 40),
		append(binary.LittleEndian.AppendUint32(nil, CapsMySQL), make([]byte, 28)...), // user name not terminated
	)
}
