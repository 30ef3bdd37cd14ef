package frontend

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// serverCaps are the capabilities keyshard offers clients. CLIENT_SSL is
// added when TLS is configured. Those in backend.FlavorCaps take effect on
// the backend connections that serve the client (see backend.Flavor).
const serverCaps = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_IGNORE_SPACE |
	mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_PROTOCOL_41 |
	mysql.CLIENT_INTERACTIVE | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_SECURE_CONNECTION |
	mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS |
	mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA |
	mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_COMPRESS | mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM |
	mysql.CLIENT_SESSION_TRACK

// DefaultCollationID is the collation greeted with: utf8mb4_general_ci.
const DefaultCollationID = 45

// newScramble returns 20 random printable bytes (no NUL, as MySQL does).
func newScramble() []byte {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = b[i]%94 + 33
	}
	return b
}

// handshakeResponse is the decoded HandshakeResponse41.
type handshakeResponse struct {
	caps      uint32
	ext       uint32 // MariaDB extended capabilities
	collation uint8
	user      string
	auth      []byte
	db        string
	plugin    string
	zstdLevel int // zstd_compression_level, 0 if not sent
}

func parseHandshakeResponse(p []byte) (*handshakeResponse, error) {
	if len(p) < 32 {
		return nil, newErr(MalformedPacket, "handshake response too short")
	}
	r := &handshakeResponse{}
	r.caps = binary.LittleEndian.Uint32(p)
	if r.caps&mysql.CLIENT_PROTOCOL_41 == 0 {
		return nil, newErr(NotSupported, "client does not support protocol 4.1")
	}
	r.collation = p[8]
	if r.caps&mysql.CLIENT_LONG_PASSWORD == 0 { // no CLIENT_MYSQL: a MariaDB client
		r.ext = binary.LittleEndian.Uint32(p[28:])
	}
	pos := 32
	user, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return nil, newErr(MalformedPacket, "handshake response: bad user name")
	}
	r.user = string(user)
	switch {
	case r.caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		auth, _, next, err := wire.ReadLenEncString(p, pos)
		if err != nil {
			return nil, newErr(MalformedPacket, "handshake response: bad auth data")
		}
		r.auth, pos = bytes.Clone(auth), next
	case r.caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return nil, newErr(MalformedPacket, "handshake response: bad auth data")
		}
		n := int(p[pos])
		r.auth = bytes.Clone(p[pos+1 : pos+1+n])
		pos += 1 + n
	default:
		auth, next, err := wire.ReadNulString(p, pos)
		if err != nil {
			return nil, newErr(MalformedPacket, "handshake response: bad auth data")
		}
		r.auth, pos = bytes.Clone(auth), next
	}
	if r.caps&mysql.CLIENT_CONNECT_WITH_DB != 0 && pos < len(p) {
		db, next, err := wire.ReadNulString(p, pos)
		if err != nil {
			return nil, newErr(MalformedPacket, "handshake response: bad database name")
		}
		r.db, pos = string(db), next
	}
	if r.caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		name, next, err := wire.ReadNulString(p, pos)
		if err != nil {
			name, next = p[pos:], len(p)
		}
		r.plugin, pos = string(name), next
	}
	if r.caps&mysql.CLIENT_CONNECT_ATTRS != 0 && pos < len(p) {
		// Attributes are not used; a bad length only loses the zstd level.
		n, next, err := wire.ReadLenEncInt(p, pos)
		if err != nil || n > uint64(len(p)-next) {
			return r, nil
		}
		pos = next + int(n)
	}
	if r.caps&mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0 && pos < len(p) {
		r.zstdLevel = int(p[pos])
	}
	return r, nil
}

// greetingCaps are the capabilities a greeting announces.
func greetingCaps(g Greeting, tls bool) uint32 {
	caps := uint32(serverCaps)
	if tls {
		caps |= mysql.CLIENT_SSL
	}
	if g.MariaDB {
		// MariaDB greets without CLIENT_MYSQL (CLIENT_LONG_PASSWORD's
		// bit), which is how its own clients tell it apart.
		caps &^= mysql.CLIENT_LONG_PASSWORD
	}
	return caps
}

// writeGreeting sends Protocol::HandshakeV10.
func (c *Conn) writeGreeting(g Greeting, scramble []byte, plugin string) error {
	c.greetExt, c.mariaDB = g.Ext, g.MariaDB
	caps := greetingCaps(g, c.l.tls != nil)
	b := make([]byte, 0, 128)
	b = append(b, 10)
	b = append(b, g.Version...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, c.id)
	b = append(b, scramble[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps))
	b = append(b, DefaultCollationID)
	b = binary.LittleEndian.AppendUint16(b, g.Status)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps>>16))
	b = append(b, byte(len(scramble)+1))
	b = append(b, make([]byte, 6)...)
	b = binary.LittleEndian.AppendUint32(b, g.Ext) // MariaDB's extended capabilities
	b = append(b, scramble[8:]...)
	b = append(b, 0)
	b = append(b, plugin...)
	b = append(b, 0)
	return c.writeFlush(b)
}

// echoName is a name the client sent, as an error message repeats it: cut
// to MariaDB's longest user name, so a client cannot have keyshard echo a
// big packet back.
func echoName(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// preAuthMaxPacket bounds a packet read before the client has logged in.
const preAuthMaxPacket = 64 << 10

// handshake runs the connection phase: greeting, optional TLS upgrade,
// authentication (with auth switch and caching_sha2 full authentication),
// then the handler's login.
func (c *Conn) handshake(h Handler, st *Settings) error {
	// Before login a client sends a handshake response and maybe an auth
	// switch answer, a few hundred bytes: nothing bigger is read.
	c.pkt.MaxRead = preAuthMaxPacket
	defer func() { c.pkt.MaxRead = st.MaxPacket }()
	plugin := defaultPlugin(h.DefaultPlugin())
	scramble := newScramble()
	c.scramble = scramble
	if err := c.writeGreeting(h.Greeting(), scramble, plugin); err != nil {
		return err
	}
	p, err := c.pkt.ReadPacket()
	if err != nil {
		return err
	}
	if len(p) >= 4 && binary.LittleEndian.Uint32(p)&mysql.CLIENT_SSL != 0 && len(p) == 32 {
		if c.l.tls == nil {
			return newErr(NotSupported, "TLS requested but keyshard has no tls_cert/tls_key")
		}
		tc := tls.Server(c.pkt.Unread(), c.l.tls)
		if err := tc.Handshake(); err != nil {
			return err
		}
		c.nc = tc
		c.tls = true
		c.pkt.Reset(tc)
		if p, err = c.pkt.ReadPacket(); err != nil {
			return err
		}
	}
	r, err := parseHandshakeResponse(p)
	if err != nil {
		return err
	}
	c.loginUser = r.user
	c.caps = r.caps & (serverCaps | mysql.CLIENT_SSL)
	c.ext = r.ext & c.greetExt
	clientPlugin := r.plugin
	if r.caps&mysql.CLIENT_PLUGIN_AUTH == 0 {
		// A client without auth plugins answered the scramble the 4.1
		// way, as COM_CHANGE_USER assumes too (an auth switch would be
		// the pre-4.1 "use the old password" request to it).
		clientPlugin = mysql.AUTH_NATIVE_PASSWORD
	}
	l := Login{User: r.user, DB: r.db, Collation: r.collation}
	if err := c.authenticate(h, &l, clientPlugin, r.auth, scramble); err != nil {
		return err
	}
	c.collation = r.collation
	c.zstdLevel = r.zstdLevel
	return h.Login(l)
}

func defaultPlugin(name string) string {
	if name == mysql.AUTH_CACHING_SHA2_PASSWORD {
		return name
	}
	return mysql.AUTH_NATIVE_PASSWORD
}

// denied is the error of a refused login.
func (c *Conn) denied(user string, withPassword bool) error {
	return newErr(AccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", echoName(user), c.host, yesNo(withPassword))
}

// authenticate checks the client's credentials for l.User. clientPlugin
// and auth are what the client sent for scramble; an auth switch happens
// when the user's configured plugin differs or the client's is not
// supported. For a Hashed account it sets l.Hashed and l.NativeKey.
func (c *Conn) authenticate(users Users, l *Login, clientPlugin string, auth, scramble []byte) error {
	user := l.User
	denied := c.denied(user, len(auth) > 0)
	uc, ok := users.User(user, c.host, false)
	if !ok {
		uc, ok = users.User(user, c.host, true)
	}
	want := clientPlugin
	if ok && uc.Plugin != "" {
		want = uc.Plugin
	}
	if ok && uc.Hashed {
		want = mysql.AUTH_NATIVE_PASSWORD
	}
	if want != mysql.AUTH_NATIVE_PASSWORD && want != mysql.AUTH_CACHING_SHA2_PASSWORD {
		want = defaultPlugin(users.DefaultPlugin())
	}
	if want != clientPlugin {
		scramble = newScramble()
		c.scramble = scramble // a later COM_CHANGE_USER answers this one, as with MariaDB
		b := make([]byte, 0, 64)
		b = append(b, wire.EOFHeader)
		b = append(b, want...)
		b = append(b, 0)
		b = append(b, scramble...)
		b = append(b, 0)
		if err := c.writeFlush(b); err != nil {
			return err
		}
		p, err := c.pkt.ReadPacket()
		if err != nil {
			return err
		}
		auth = bytes.Clone(p)
		denied = c.denied(user, len(auth) > 0)
	}
	if !ok {
		return denied
	}
	if uc.Hashed {
		key, match := uc.checkHashed(auth, scramble)
		if !match && uc.Refuse == "" {
			// The account may have a new password on the server since
			// it was read.
			if again, ok := users.User(user, c.host, true); ok && again.Hashed {
				uc = again
				key, match = uc.checkHashed(auth, scramble)
			}
		}
		if uc.Refuse != "" {
			return newErr(AccessDenied, "Access denied for user '%s'@'%s': %s", echoName(user), c.host, uc.Refuse)
		}
		if !match {
			return denied
		}
		l.Hashed, l.NativeKey = true, key
		return nil
	}
	if want == mysql.AUTH_NATIVE_PASSWORD {
		if uc.Password == "" {
			if len(auth) != 0 {
				return denied
			}
			return nil
		}
		if subtle.ConstantTimeCompare(auth, mysql.CalcNativePassword(scramble, []byte(uc.Password))) != 1 {
			return denied
		}
		return nil
	}
	return c.cachingSha2(user, uc.Password, auth, scramble, denied)
}

// checkHashed checks a mysql_native_password answer against a Hashed
// account and returns SHA1(password) (empty for no password).
func (u *User) checkHashed(auth, scramble []byte) ([]byte, bool) {
	if len(u.NativeHash) == 0 {
		return []byte{}, len(auth) == 0
	}
	return NativeKey(scramble, auth, u.NativeHash)
}

// NativeKey recovers SHA1(password) from a mysql_native_password answer
// (token) to scramble, given the server's stored hash, SHA1(SHA1(password)):
// token is SHA1(password) XOR SHA1(scramble + hash), so XOR gives it back,
// and it is right when its SHA1 is hash. With it keyshard can answer any
// other scramble as the account (backend.NativeToken), as MaxScale does.
func NativeKey(scramble, token, hash []byte) ([]byte, bool) {
	if len(token) != sha1.Size || len(hash) != sha1.Size {
		return nil, false
	}
	h := sha1.New()
	h.Write(scramble)
	h.Write(hash)
	key := h.Sum(nil)
	for i := range key {
		key[i] ^= token[i]
	}
	check := sha1.Sum(key)
	return key, subtle.ConstantTimeCompare(check[:], hash) == 1
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// cachingSha2 implements caching_sha2_password: the fast path for users
// whose hash is cached after an earlier full authentication, and full
// authentication over TLS (cleartext) or over a plain connection (RSA).
func (c *Conn) cachingSha2(user, password string, auth, scramble []byte, denied error) error {
	if password == "" {
		if len(auth) != 0 {
			return denied
		}
		return nil
	}
	if len(auth) == 0 {
		return denied
	}
	if _, cached := c.l.sha2.Load(user + "\x00" + password); cached {
		if subtle.ConstantTimeCompare(auth, mysql.CalcCachingSha2Password(scramble, []byte(password))) != 1 {
			return denied
		}
		return c.writeFlush([]byte{0x01, 0x03}) // fast auth success; OK follows
	}
	if err := c.writeFlush([]byte{0x01, 0x04}); err != nil { // perform full authentication
		return err
	}
	p, err := c.pkt.ReadPacket()
	if err != nil {
		return err
	}
	var clear []byte
	switch {
	case c.tls:
		clear = bytes.TrimRight(p, "\x00")
	case len(p) == 1 && p[0] == 0x02: // request public key
		b := append([]byte{0x01}, c.l.rsa.pubPEM...)
		if err := c.writeFlush(b); err != nil {
			return err
		}
		enc, err := c.pkt.ReadPacket()
		if err != nil {
			return err
		}
		plain, err := rsa.DecryptOAEP(sha1.New(), rand.Reader, c.l.rsa.key, enc, nil)
		if err != nil {
			return denied
		}
		for i := range plain {
			plain[i] ^= scramble[i%len(scramble)]
		}
		clear = bytes.TrimRight(plain, "\x00")
	default:
		return newErr(AccessDenied, "Access denied for user '%s'@'%s': caching_sha2_password full authentication needs TLS or the RSA public key exchange", echoName(user), c.host)
	}
	if subtle.ConstantTimeCompare(clear, []byte(password)) != 1 {
		return denied
	}
	c.l.sha2.Store(user+"\x00"+password, struct{}{})
	return nil
}

// ChangeUser runs COM_CHANGE_USER (p) as MariaDB does: the client's answer
// was computed over the scramble of the greeting (or of the last auth
// switch), so it is checked against that one, with an auth switch only
// when the user's plugin differs from the client's. Then h.Login restarts
// the session as the new user. A refused change leaves the session as it
// was; the third on a connection, or a Login that fails, is an
// *EndingError: the connection ends after its answer.
func (c *Conn) ChangeUser(h Handler, p []byte) error {
	if c.badChange >= maxBadChanges {
		// As MariaDB: the connection goes on, but takes no more
		// COM_CHANGE_USER (each refusal still answered after the pause).
		return c.changeRefused(newErr(UnknownCommand, "Unknown command"), 0)
	}
	pos := 1
	user, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return newErr(MalformedPacket, "COM_CHANGE_USER: bad user name")
	}
	var auth []byte
	if c.caps&mysql.CLIENT_SECURE_CONNECTION != 0 {
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return newErr(MalformedPacket, "COM_CHANGE_USER: bad auth data")
		}
		auth = p[pos+1 : pos+1+int(p[pos])]
		pos += 1 + int(p[pos])
	} else if auth, pos, err = wire.ReadNulString(p, pos); err != nil {
		return newErr(MalformedPacket, "COM_CHANGE_USER: bad auth data")
	}
	auth = bytes.Clone(auth) // p is the read buffer; an auth switch reads on
	db, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return newErr(MalformedPacket, "COM_CHANGE_USER: bad database name")
	}
	collation := c.collation
	if pos+2 <= len(p) {
		collation = p[pos]
		pos += 2
	}
	plugin := mysql.AUTH_NATIVE_PASSWORD
	if c.caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		if name, _, err := wire.ReadNulString(p, pos); err == nil {
			plugin = string(name)
		}
	}
	l := Login{User: string(user), DB: string(db)}
	if err := c.authenticate(h, &l, plugin, auth, c.scramble); err != nil {
		if isAccessDenied(err) && c.l != nil {
			// Counted with the address's failed logins: a guesser that
			// logs in once and tries passwords by COM_CHANGE_USER meets
			// the same lockout as one that reconnects.
			st := c.l.srv.Settings()
			return c.changeRefused(err, c.l.logins.Failed(c.log, "sql", l.User, c.host, "COM_CHANGE_USER: "+err.Error(),
				st.LockoutFailures, st.LockoutTime))
		}
		return c.changeRefused(err, 0)
	}
	prev := c.collation
	c.collation = collation
	l.Collation = collation
	if err := h.Login(l); err != nil {
		var end *EndingError
		if !errors.As(err, &end) {
			// Refused (a character set the server refuses for a
			// client, a user's connection limit): as a refused password.
			c.collation = prev
			return c.changeRefused(err, 0)
		}
		return err
	}
	return nil
}

// changeRefused answers a refused COM_CHANGE_USER as MariaDB does: after
// a pause (one second, whatever the reason: an unknown user, a wrong
// password, a character set), counting it; after the third, the
// connection takes no more (UnknownCommand), so that one connection
// cannot try password after password. The session goes on as it was.
// delay is the login lockout's for the address, when longer.
func (c *Conn) changeRefused(err error, delay time.Duration) error {
	time.Sleep(max(ChangeUserPause, delay))
	c.badChange++
	return err
}

// maxBadChanges is the refused COM_CHANGE_USERs after which a connection
// takes no more (MariaDB's).
const maxBadChanges = 3

// ChangeUserPause is how long a refused COM_CHANGE_USER waits before its
// answer (MariaDB waits as long). A variable only so that the session
// fuzz test can send many refused changes.
var ChangeUserPause = time.Second

// rsaKey is caching_sha2_password's RSA key pair.
type rsaKey struct {
	key    *rsa.PrivateKey
	pubPEM []byte
}

// load reads the PEM key at path (PKCS#1 or PKCS#8), or makes a new key
// when path is "".
func (k *rsaKey) load(path string) error {
	var key *rsa.PrivateKey
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("rsa_key: %w", err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			return fmt.Errorf("rsa_key %s: no PEM block", path)
		}
		pk1, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			pk, err2 := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err2 != nil {
				return fmt.Errorf("rsa_key %s: %w", path, err)
			}
			var ok bool
			if pk1, ok = pk.(*rsa.PrivateKey); !ok {
				return fmt.Errorf("rsa_key %s: not an RSA key", path)
			}
		}
		key = pk1
	} else {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		key = k
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	k.key = key
	k.pubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return nil
}
