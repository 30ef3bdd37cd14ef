package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/engine"
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

const defaultCollationID = 45 // utf8mb4_general_ci

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
		return nil, newErr(errMalformedPacket, "handshake response too short")
	}
	r := &handshakeResponse{}
	r.caps = binary.LittleEndian.Uint32(p)
	if r.caps&mysql.CLIENT_PROTOCOL_41 == 0 {
		return nil, newErr(errNotSupported, "client does not support protocol 4.1")
	}
	r.collation = p[8]
	if r.caps&mysql.CLIENT_LONG_PASSWORD == 0 { // no CLIENT_MYSQL: a MariaDB client
		r.ext = binary.LittleEndian.Uint32(p[28:])
	}
	pos := 32
	user, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return nil, newErr(errMalformedPacket, "handshake response: bad user name")
	}
	r.user = string(user)
	switch {
	case r.caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		auth, _, next, err := wire.ReadLenEncString(p, pos)
		if err != nil {
			return nil, newErr(errMalformedPacket, "handshake response: bad auth data")
		}
		r.auth, pos = bytes.Clone(auth), next
	case r.caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return nil, newErr(errMalformedPacket, "handshake response: bad auth data")
		}
		n := int(p[pos])
		r.auth = bytes.Clone(p[pos+1 : pos+1+n])
		pos += 1 + n
	default:
		auth, next, err := wire.ReadNulString(p, pos)
		if err != nil {
			return nil, newErr(errMalformedPacket, "handshake response: bad auth data")
		}
		r.auth, pos = bytes.Clone(auth), next
	}
	if r.caps&mysql.CLIENT_CONNECT_WITH_DB != 0 && pos < len(p) {
		db, next, err := wire.ReadNulString(p, pos)
		if err != nil {
			return nil, newErr(errMalformedPacket, "handshake response: bad database name")
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

// writeInitialHandshake sends Protocol::HandshakeV10.
func (s *Session) writeInitialHandshake(scramble []byte, plugin string) error {
	id := s.srv.identity(s.snap)
	s.greetExt, s.greetMariaDB = id.ext, id.mariaDB
	caps := greetingCaps(id, s.srv.tlsConf != nil)
	b := make([]byte, 0, 128)
	b = append(b, 10)
	b = append(b, id.version...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, s.id)
	b = append(b, scramble[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps))
	b = append(b, defaultCollationID)
	b = binary.LittleEndian.AppendUint16(b, newSessionStatus(s.srv.ctx, s.snap.identityNode(), false))
	b = binary.LittleEndian.AppendUint16(b, uint16(caps>>16))
	b = append(b, byte(len(scramble)+1))
	b = append(b, make([]byte, 6)...)
	b = binary.LittleEndian.AppendUint32(b, id.ext) // MariaDB's extended capabilities
	b = append(b, scramble[8:]...)
	b = append(b, 0)
	b = append(b, plugin...)
	b = append(b, 0)
	if err := s.pkt.WritePacket(b); err != nil {
		return err
	}
	return s.pkt.Flush()
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
// authentication (with auth switch and caching_sha2 full authentication).
func (s *Session) handshake() error {
	cfg := s.snap.cfg
	// Before login a client sends a handshake response and maybe an auth
	// switch answer, a few hundred bytes: nothing bigger is read.
	s.pkt.MaxRead = preAuthMaxPacket
	defer func() { s.pkt.MaxRead = cfg.MaxAllowedPacket }()
	plugin := defaultPlugin(cfg.DefaultAuthPlugin)
	scramble := newScramble()
	s.scramble = scramble
	if err := s.writeInitialHandshake(scramble, plugin); err != nil {
		return err
	}
	p, err := s.pkt.ReadPacket()
	if err != nil {
		return err
	}
	if len(p) >= 4 && binary.LittleEndian.Uint32(p)&mysql.CLIENT_SSL != 0 && len(p) == 32 {
		if s.srv.tlsConf == nil {
			return newErr(errNotSupported, "TLS requested but keyshard has no tls_cert/tls_key")
		}
		tc := tls.Server(s.pkt.Unread(), s.srv.tlsConf)
		if err := tc.Handshake(); err != nil {
			return err
		}
		s.nc = tc
		s.tls = true
		s.pkt.Reset(tc)
		if p, err = s.pkt.ReadPacket(); err != nil {
			return err
		}
	}
	r, err := parseHandshakeResponse(p)
	if err != nil {
		return err
	}
	s.loginUser = r.user
	s.caps = r.caps & (serverCaps | mysql.CLIENT_SSL)
	ext := r.ext & s.greetExt
	s.cl.SetCaps(s.caps, ext)
	s.lease.Caps, s.lease.Ext = s.caps, ext
	clientPlugin := r.plugin
	if r.caps&mysql.CLIENT_PLUGIN_AUTH == 0 {
		// A client without auth plugins answered the scramble the 4.1
		// way, as COM_CHANGE_USER assumes too (an auth switch would be
		// the pre-4.1 "use the old password" request to it).
		clientPlugin = mysql.AUTH_NATIVE_PASSWORD
	}
	if err := s.authenticate(r.user, clientPlugin, r.auth, scramble); err != nil {
		return err
	}
	if err := s.setUser(r.user); err != nil {
		return err
	}
	if !s.srv.ctl.Online() && !s.srv.mayLoginOffline(s.snap.cfg, r.user) {
		s.srv.metrics.rejected("offline").Inc()
		return newErr(errOffline, "keyshard is offline (admin 'change proxy offline'); new connections are refused, but for admin users")
	}
	s.collation = r.collation
	s.zstdLevel = r.zstdLevel
	if err := s.startSession(r.db); err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) {
			// A database for a user without a schema: refused with its
			// errno like any other login error (the caller answers only
			// the error types it knows), not by closing the connection.
			return toMySQL(err)
		}
		return err
	}
	return nil
}

// compression is the algorithm the client negotiated: zlib when it asked
// for CLIENT_COMPRESS (as MySQL, which prefers it when both are set), else
// zstd with CLIENT_ZSTD_COMPRESSION_ALGORITHM.
func (s *Session) compression() wire.Compression {
	switch {
	case s.caps&mysql.CLIENT_COMPRESS != 0:
		return wire.CompressZlib
	case s.caps&mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0:
		return wire.CompressZstd
	}
	return wire.CompressNone
}

func defaultPlugin(name string) string {
	if name == mysql.AUTH_CACHING_SHA2_PASSWORD {
		return name
	}
	return mysql.AUTH_NATIVE_PASSWORD
}

// authenticate checks the client's credentials. clientPlugin and auth are
// what the client sent for scramble; an auth switch happens when the user's
// configured plugin differs or the client's is not supported.
func (s *Session) authenticate(user, clientPlugin string, auth, scramble []byte) error {
	denied := newErr(errAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", echoName(user), s.remoteHost, yesNo(len(auth) > 0))
	uc, ok := s.snap.cfg.UserPassword(user)
	want := clientPlugin
	if ok && uc.AuthPlugin != "" {
		want = uc.AuthPlugin
	}
	if want != mysql.AUTH_NATIVE_PASSWORD && want != mysql.AUTH_CACHING_SHA2_PASSWORD {
		want = defaultPlugin(s.snap.cfg.DefaultAuthPlugin)
	}
	if want != clientPlugin {
		scramble = newScramble()
		s.scramble = scramble // a later COM_CHANGE_USER answers this one, as with MariaDB
		b := make([]byte, 0, 64)
		b = append(b, wire.EOFHeader)
		b = append(b, want...)
		b = append(b, 0)
		b = append(b, scramble...)
		b = append(b, 0)
		if err := s.writeFlush(b); err != nil {
			return err
		}
		p, err := s.pkt.ReadPacket()
		if err != nil {
			return err
		}
		auth = bytes.Clone(p)
		denied = newErr(errAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", echoName(user), s.remoteHost, yesNo(len(auth) > 0))
	}
	if !ok {
		return denied
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
	return s.cachingSha2(uc.User, uc.Password, auth, scramble, denied)
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
func (s *Session) cachingSha2(user, password string, auth, scramble []byte, denied error) error {
	if password == "" {
		if len(auth) != 0 {
			return denied
		}
		return nil
	}
	if len(auth) == 0 {
		return denied
	}
	if _, cached := s.srv.sha2Cache.Load(user + "\x00" + password); cached {
		if subtle.ConstantTimeCompare(auth, mysql.CalcCachingSha2Password(scramble, []byte(password))) != 1 {
			return denied
		}
		return s.writeFlush([]byte{0x01, 0x03}) // fast auth success; OK follows
	}
	if err := s.writeFlush([]byte{0x01, 0x04}); err != nil { // perform full authentication
		return err
	}
	p, err := s.pkt.ReadPacket()
	if err != nil {
		return err
	}
	var clear []byte
	switch {
	case s.tls:
		clear = bytes.TrimRight(p, "\x00")
	case len(p) == 1 && p[0] == 0x02: // request public key
		b := append([]byte{0x01}, s.srv.rsaPubPEM...)
		if err := s.writeFlush(b); err != nil {
			return err
		}
		enc, err := s.pkt.ReadPacket()
		if err != nil {
			return err
		}
		plain, err := rsa.DecryptOAEP(sha1.New(), rand.Reader, s.srv.rsaKey, enc, nil)
		if err != nil {
			return denied
		}
		for i := range plain {
			plain[i] ^= scramble[i%len(scramble)]
		}
		clear = bytes.TrimRight(plain, "\x00")
	default:
		return newErr(errAccessDenied, "Access denied for user '%s'@'%s': caching_sha2_password full authentication needs TLS or the RSA public key exchange", echoName(user), s.remoteHost)
	}
	if subtle.ConstantTimeCompare(clear, []byte(password)) != 1 {
		return denied
	}
	s.srv.sha2Cache.Store(user+"\x00"+password, struct{}{})
	return nil
}

func (s *Session) writeFlush(b []byte) error {
	if err := s.pkt.WritePacket(b); err != nil {
		return err
	}
	return s.pkt.Flush()
}

// changeUser handles COM_CHANGE_USER as MariaDB does: the client's answer
// was computed over the scramble of the greeting (or of the last auth
// switch), so it is checked against that one, with an auth switch only
// when the user's plugin differs from the client's. Then the session is
// reset as for a new connection. A failed change (the error is a keyshard
// *Error) leaves the old session as it was.
func (s *Session) changeUser(p []byte) error {
	pos := 1
	user, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return newErr(errMalformedPacket, "COM_CHANGE_USER: bad user name")
	}
	var auth []byte
	if s.caps&mysql.CLIENT_SECURE_CONNECTION != 0 {
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return newErr(errMalformedPacket, "COM_CHANGE_USER: bad auth data")
		}
		auth = p[pos+1 : pos+1+int(p[pos])]
		pos += 1 + int(p[pos])
	} else if auth, pos, err = wire.ReadNulString(p, pos); err != nil {
		return newErr(errMalformedPacket, "COM_CHANGE_USER: bad auth data")
	}
	auth = bytes.Clone(auth) // p is the read buffer; an auth switch reads on
	db, pos, err := wire.ReadNulString(p, pos)
	if err != nil {
		return newErr(errMalformedPacket, "COM_CHANGE_USER: bad database name")
	}
	collation := s.collation
	if pos+2 <= len(p) {
		collation = p[pos]
		pos += 2
	}
	plugin := mysql.AUTH_NATIVE_PASSWORD
	if s.caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		if name, _, err := wire.ReadNulString(p, pos); err == nil {
			plugin = string(name)
		}
	}
	userS, dbS := string(user), string(db)
	if err := s.authenticate(userS, plugin, auth, s.scramble); err != nil {
		// As MariaDB: a refusal is answered after a pause, and the third
		// on a connection ends it, so that one connection cannot try
		// password after password.
		var pe *Error
		if errors.As(err, &pe) && pe.kind == errAccessDenied {
			time.Sleep(changeUserPause)
		}
		if s.badChange++; s.badChange >= 3 {
			return &endingError{err}
		}
		return err
	}
	if err := s.setUser(userS); err != nil {
		return err
	}
	s.endSession()
	s.collation = collation
	if err := s.startSession(dbS); err != nil {
		// The old session is gone already: the connection ends with the
		// error rather than go on half changed.
		return &endingError{err}
	}
	return nil
}

// changeUserPause is how long a refused COM_CHANGE_USER waits before its
// answer (MariaDB waits about as long). A variable only so that the
// session fuzz test can send many refused changes.
var changeUserPause = time.Second

// endingError is an error after which the connection is closed.
type endingError struct{ err error }

func (e *endingError) Error() string { return e.err.Error() }
func (e *endingError) Unwrap() error { return e.err }

// setUser makes user the session's user, counting the session against the
// user's max_connections (user_list); past it, ER_USER_LIMIT_REACHED.
func (s *Session) setUser(user string) error {
	uc, _ := s.snap.cfg.UserPassword(user)
	v, ok := s.srv.userConns.Load(user)
	if !ok {
		v, _ = s.srv.userConns.LoadOrStore(user, new(atomic.Int64))
	}
	c := v.(*atomic.Int64)
	if n := c.Add(1); uc.MaxConnections > 0 && n > int64(uc.MaxConnections) {
		c.Add(-1)
		s.srv.metrics.rejected("user_max_connections").Inc()
		return newErr(errUserLimit, "User '%s' has exceeded the 'max_connections' resource of its user_list entry (current value: %d)", user, uc.MaxConnections)
	}
	if s.userConns != nil {
		s.userConns.Add(-1)
	}
	s.userConns = c
	s.user = user
	return nil
}
