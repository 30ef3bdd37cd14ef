package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// Client capability sets the seeds use, as real clients send them.
const (
	// libmysqlclient 8 / Connector/J: CLIENT_MYSQL, lenenc auth data,
	// attributes.
	fuzzCapsMySQL = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_CONNECT_WITH_DB |
		mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_INTERACTIVE | mysql.CLIENT_TRANSACTIONS |
		mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS |
		mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA |
		mysql.CLIENT_SESSION_TRACK | mysql.CLIENT_DEPRECATE_EOF
	// MariaDB Connector/C: no CLIENT_MYSQL, so extended capabilities follow.
	fuzzCapsMariaDB = fuzzCapsMySQL &^ (mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_DEPRECATE_EOF)
	// PyMySQL, go-sql-driver: one-byte auth length, no attributes.
	fuzzCapsSimple = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS |
		mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_WITH_DB
	// A pre-4.1 style answer: NUL-terminated auth data, nothing after it.
	fuzzCapsOld = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS
)

// handshakeSeeds are handshake responses real clients send (auth data made
// for a scramble of zeros: they log in as users without a password only).
func handshakeSeeds() [][]byte {
	zero := make([]byte, 20)
	rs := []clientResponse{
		{caps: fuzzCapsMySQL, collation: 255, user: "ks", auth: authFor(mysql.AUTH_CACHING_SHA2_PASSWORD, zero, "ks"), db: "kingshard",
			plugin: mysql.AUTH_CACHING_SHA2_PASSWORD, attrs: map[string]string{"_client_name": "libmysql", "_os": "Linux"}},
		{caps: fuzzCapsMySQL | mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM, collation: 45, user: "nopw", plugin: mysql.AUTH_NATIVE_PASSWORD,
			attrs: map[string]string{"program_name": "mysql"}, zstdLevel: 7},
		{caps: fuzzCapsMariaDB, ext: 1<<0 | 1<<2 | 1<<3, collation: 45, user: "plain", auth: authFor(mysql.AUTH_NATIVE_PASSWORD, zero, "plain"),
			plugin: mysql.AUTH_NATIVE_PASSWORD, attrs: map[string]string{"_client_name": "libmariadb"}},
		{caps: fuzzCapsMariaDB | mysql.CLIENT_COMPRESS, collation: 33, user: "nopw", db: "kingshard", plugin: mysql.AUTH_NATIVE_PASSWORD},
		{caps: fuzzCapsSimple, collation: 46, user: "nopw", db: "kingshard", plugin: mysql.AUTH_NATIVE_PASSWORD},
		{caps: fuzzCapsSimple, collation: 46, user: "sha2nopw", plugin: mysql.AUTH_CACHING_SHA2_PASSWORD},
		{caps: fuzzCapsSimple, collation: 8, user: "sha2", auth: []byte("x"), plugin: mysql.AUTH_CACHING_SHA2_PASSWORD},
		{caps: fuzzCapsSimple, collation: 8, user: "root", auth: zero, plugin: "mysql_clear_password"},
		{caps: fuzzCapsOld, collation: 8, user: "nopw"},
		{caps: fuzzCapsOld | mysql.CLIENT_CONNECT_WITH_DB, collation: 8, user: "nopw", db: "fake_error"},
		{caps: fuzzCapsSimple, collation: 45, user: "nobody", auth: zero[:8]},
	}
	var out [][]byte
	for _, r := range rs {
		out = append(out, r.append(nil))
	}
	return append(out,
		sslRequest(fuzzCapsMySQL),
		sslRequest(fuzzCapsMariaDB),
		make([]byte, 31),
		bytes.Repeat([]byte{0xff}, 40),
		append(binary.LittleEndian.AppendUint32(nil, fuzzCapsMySQL), make([]byte, 28)...), // user name not terminated
	)
}

// FuzzHandshakeResponse: parseHandshakeResponse never panics; a refusal is
// a keyshard *Error that maps to ER_MALFORMED_PACKET (or, for a client
// without protocol 4.1, ER_NOT_SUPPORTED_YET); what it accepts is read
// from inside the packet (user, database and plugin without NULs, auth data
// copied out of the read buffer) and comes back the same from a client's
// encoding of it.
func FuzzHandshakeResponse(f *testing.F) {
	for _, s := range handshakeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p := bytes.Clone(in)
		r, err := parseHandshakeResponse(p)
		if err != nil {
			if r != nil {
				t.Fatal("a response returned with an error")
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.msg == "" {
				t.Fatalf("error %T %v is not a keyshard error with a message", err, err)
			}
			want := errMalformedPacket
			if len(p) >= 32 && binary.LittleEndian.Uint32(p)&mysql.CLIENT_PROTOCOL_41 == 0 {
				want = errNotSupported
			}
			if pe.kind != want {
				t.Fatalf("error kind %d (%v), want %d", pe.kind, err, want)
			}
			if me := toMySQL(err); me.Code != mysql.ER_MALFORMED_PACKET && me.Code != mysql.ER_NOT_SUPPORTED_YET {
				t.Fatalf("maps to errno %d", me.Code)
			}
			return
		}
		checkParsedResponse(t, p, r)
		// The auth data is kept across later reads (an auth switch): it
		// must not alias the packet.
		auth := bytes.Clone(r.auth)
		for i := range p {
			p[i] ^= 0xa5
		}
		if !bytes.Equal(auth, r.auth) {
			t.Fatal("auth data aliases the packet")
		}
		// A client encoding the same fields gets them back.
		enc := (&clientResponse{caps: r.caps, ext: r.ext, collation: r.collation, user: r.user, auth: r.auth, db: r.db,
			plugin: r.plugin, zstdLevel: uint8(r.zstdLevel)}).append(nil)
		r2, err := parseHandshakeResponse(enc)
		if err != nil {
			t.Fatalf("re-encoded response %q refused: %v", enc, err)
		}
		if r2.caps != r.caps || r2.ext != r.ext || r2.collation != r.collation || r2.user != r.user || !bytes.Equal(r2.auth, r.auth) ||
			r2.db != r.db || r2.plugin != r.plugin || r2.zstdLevel != r.zstdLevel {
			t.Fatalf("round trip changed the response:\n%+v\n%+v", r, r2)
		}
	})
}

// checkParsedResponse checks what parseHandshakeResponse read from p.
func checkParsedResponse(t *testing.T, p []byte, r *handshakeResponse) {
	t.Helper()
	if len(p) < 32 {
		t.Fatalf("accepted a %d-byte response", len(p))
	}
	if r.caps != binary.LittleEndian.Uint32(p) || r.caps&mysql.CLIENT_PROTOCOL_41 == 0 {
		t.Fatalf("caps %#x from %#x", r.caps, binary.LittleEndian.Uint32(p))
	}
	if r.collation != p[8] {
		t.Fatalf("collation %d, packet says %d", r.collation, p[8])
	}
	wantExt := uint32(0)
	if r.caps&mysql.CLIENT_LONG_PASSWORD == 0 {
		wantExt = binary.LittleEndian.Uint32(p[28:])
	}
	if r.ext != wantExt {
		t.Fatalf("ext %#x, want %#x", r.ext, wantExt)
	}
	if !bytes.HasPrefix(p[32:], append([]byte(r.user), 0)) {
		t.Fatalf("user %q is not the NUL-terminated string at 32", r.user)
	}
	for name, v := range map[string]string{"user": r.user, "db": r.db, "plugin": r.plugin} {
		if bytes.IndexByte([]byte(v), 0) >= 0 {
			t.Fatalf("%s %q holds a NUL", name, v)
		}
	}
	if n := len(r.user) + 1 + len(r.auth) + len(r.db) + len(r.plugin); n > len(p)-32 {
		t.Fatalf("fields of %d bytes read from %d", n, len(p)-32)
	}
	if r.caps&mysql.CLIENT_SECURE_CONNECTION != 0 && r.caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA == 0 && len(r.auth) > 255 {
		t.Fatalf("%d bytes of auth data behind a one-byte length", len(r.auth))
	}
	if r.db != "" && r.caps&mysql.CLIENT_CONNECT_WITH_DB == 0 || r.plugin != "" && r.caps&mysql.CLIENT_PLUGIN_AUTH == 0 ||
		r.zstdLevel != 0 && r.caps&mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM == 0 {
		t.Fatalf("field read without its capability: %+v", r)
	}
	if r.zstdLevel < 0 || r.zstdLevel > 255 {
		t.Fatalf("zstd level %d", r.zstdLevel)
	}
}

// FuzzLogin drives the whole connection phase of a real Server: the
// greeting, the client's handshake response (or an SSLRequest and a TLS
// upgrade), the auth switch and caching_sha2 exchanges, each answered by
// the next packet of follow (see splitPackets) until none is left. The
// proxy must never panic; every packet it sends must be in order and
// well formed; the phase must end with an OK or an ERR (the errnos of
// login failures only, the message short whatever the client sent) and
// nothing after an ERR, or with the connection closed when the client
// stopped answering; and the session must end and release everything
// once the client leaves (fuzzProxy.settle).
func FuzzLogin(f *testing.F) {
	h := newFuzzProxy(f, true)
	seeds := handshakeSeeds()
	for _, s := range seeds {
		f.Add(s, []byte(nil))
	}
	nopw := (&clientResponse{caps: fuzzCapsSimple, collation: 45, user: "nopw", plugin: mysql.AUTH_NATIVE_PASSWORD}).append(nil)
	// TLS, then the response.
	f.Add(sslRequest(fuzzCapsSimple), joinPackets(nopw))
	f.Add(sslRequest(fuzzCapsMySQL), joinPackets(seeds[0]))
	// Auth switch answers: to native for sha2nopw, from native for sha2.
	f.Add((&clientResponse{caps: fuzzCapsSimple, user: "sha2nopw", plugin: mysql.AUTH_NATIVE_PASSWORD}).append(nil), joinPackets(nil))
	f.Add((&clientResponse{caps: fuzzCapsSimple, user: "sha2", auth: []byte("0123456789abcdefghij"), plugin: mysql.AUTH_NATIVE_PASSWORD}).append(nil),
		joinPackets(bytes.Repeat([]byte{1}, 32), []byte{2}, bytes.Repeat([]byte{7}, 128)))
	// caching_sha2 full authentication over TLS: the password in clear.
	f.Add(sslRequest(fuzzCapsSimple), joinPackets(
		(&clientResponse{caps: fuzzCapsSimple, user: "sha2", auth: bytes.Repeat([]byte{9}, 32), plugin: mysql.AUTH_CACHING_SHA2_PASSWORD}).append(nil),
		[]byte("sha2pw\x00")))
	f.Fuzz(func(t *testing.T, resp, follow []byte) {
		h.resetLoginFailures()
		_, err := h.login(t, resp, splitPackets(follow, 4))
		h.settle(t, err)
	})
}

// maxFuzzPacket bounds the packets the harness sends before login, below
// the proxy's preAuthMaxPacket.
const maxFuzzPacket = 16 << 10

// login runs one connection phase (see FuzzLogin) and says how it ended:
// "ok", "closed", or the errno of the refusal.
func (h *fuzzProxy) login(t *testing.T, resp []byte, follow [][]byte) (string, error) {
	nc := h.dial(t)
	defer nc.Close()
	pc := wire.NewConn(nc, 4096, 4096)
	p, err := pc.ReadPacket()
	if err != nil {
		return "", fmt.Errorf("reading the greeting: %v", err)
	}
	g, err := parseGreeting(p)
	if err != nil {
		return "", err
	}
	if h.tls != (g.caps&mysql.CLIENT_SSL != 0) {
		return "", fmt.Errorf("greeting offers CLIENT_SSL %v with TLS %v", g.caps&mysql.CLIENT_SSL != 0, h.tls)
	}
	// send writes a packet. next is the client's next answer; when it has
	// none left it half-closes instead, and the proxy owes no answer.
	send := func(b []byte) error {
		if len(b) > maxFuzzPacket {
			b = b[:maxFuzzPacket]
		}
		if err := pc.WritePacket(b); err != nil {
			return err
		}
		return pc.Flush()
	}
	next := func() ([]byte, bool) {
		if len(follow) == 0 {
			return nil, false
		}
		b := follow[0]
		follow = follow[1:]
		return b, true
	}
	if err := send(resp); err != nil {
		return "", fmt.Errorf("writing the response: %v", err)
	}
	owed := true // the proxy read a packet it must answer
	if len(resp) == 32 && binary.LittleEndian.Uint32(resp)&mysql.CLIENT_SSL != 0 {
		tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"})
		if err := tc.Handshake(); err != nil {
			return "", fmt.Errorf("TLS upgrade: %v", err)
		}
		pc.Reset(tc)
		nc = tc
		b, ok := next()
		if owed = ok; ok {
			if err := send(b); err != nil {
				return "", fmt.Errorf("writing the response after TLS: %v", err)
			}
		}
	}
	if !owed {
		halfClose(nc)
	}
	for {
		p, err := pc.ReadPacket()
		if err != nil {
			if closedErr(err) && !owed {
				return "closed", nil
			}
			return "", fmt.Errorf("connection phase: no answer (%v)", err)
		}
		if len(p) == 0 {
			return "", errors.New("connection phase: empty packet")
		}
		switch {
		case p[0] == wire.OKHeader:
			if _, err := wire.ParseOK(p); err != nil {
				return "", fmt.Errorf("login OK %q: %v", p, err)
			}
			return "ok", nil // logged in: the session runs until the client leaves
		case p[0] == wire.ErrHeader:
			e, err := checkErr(p)
			if err != nil {
				return "", err
			}
			if !loginErrno[e.Code] {
				return "", fmt.Errorf("login refused with errno %d: %s", e.Code, e.Message)
			}
			if len(e.Message) > 512 {
				return "", fmt.Errorf("login error message of %d bytes echoes the client", len(e.Message))
			}
			if p, err := pc.ReadPacket(); err == nil {
				return "", fmt.Errorf("packet %q after the login error", p)
			} else if !closedErr(err) {
				return "", fmt.Errorf("connection not closed after the login error: %v", err)
			}
			return fmt.Sprint(e.Code), nil
		case p[0] == wire.EOFHeader: // auth switch: plugin name and scramble
			if _, _, err := wire.ReadNulString(p, 1); err != nil || len(p) < 2 {
				return "", fmt.Errorf("malformed auth switch %q", p)
			}
		case p[0] == 0x01 && len(p) == 2 && p[1] == 3: // caching_sha2 fast auth: the OK follows
			if !owed {
				return "", errors.New("fast auth success with nothing to answer")
			}
			continue
		case p[0] == 0x01 && len(p) == 2 && p[1] == 4: // full authentication
		case p[0] == 0x01 && bytes.HasPrefix(p[1:], []byte("-----BEGIN PUBLIC KEY-----")):
		default:
			return "", fmt.Errorf("unexpected packet %q in the connection phase", p)
		}
		if !owed {
			return "", fmt.Errorf("packet %q sent for a packet the client never sent", p)
		}
		b, ok := next()
		if owed = ok; ok {
			if err := send(b); err != nil {
				return "", fmt.Errorf("writing: %v", err)
			}
		} else {
			halfClose(nc)
		}
	}
}

// loginErrno are the errnos a login may be refused with.
var loginErrno = map[uint16]bool{
	mysql.ER_ACCESS_DENIED_ERROR:   true,
	mysql.ER_MALFORMED_PACKET:      true,
	mysql.ER_NOT_SUPPORTED_YET:     true,
	mysql.ER_NET_PACKET_TOO_LARGE:  true,
	mysql.ER_USER_LIMIT_REACHED:    true,
	mysql.ER_DBACCESS_DENIED_ERROR: true, // a database for a user without a schema
	mysql.ER_BAD_DB_ERROR:          true, // the backend's, for the database
}

// halfClose ends the client's side of the conversation: the proxy reads
// EOF, the client can still read what it says.
func halfClose(nc net.Conn) {
	switch c := nc.(type) {
	case *net.TCPConn:
		_ = c.CloseWrite()
	case *tls.Conn:
		_ = c.CloseWrite()
	default:
		_ = nc.SetReadDeadline(time.Now().Add(time.Second))
	}
}

// TestLoginOutcomes checks that FuzzLogin's harness reaches what its seeds
// aim at (logins that succeed in each way, and the refusals), and pins the
// answer to a database for a user without a schema: an ERR, not a closed
// connection.
func TestLoginOutcomes(t *testing.T) {
	h := newFuzzProxy(t, true)
	plain := func(c clientResponse) []byte { return c.append(nil) }
	nopw := plain(clientResponse{caps: fuzzCapsSimple, collation: 45, user: "nopw", plugin: mysql.AUTH_NATIVE_PASSWORD})
	sha2 := plain(clientResponse{caps: fuzzCapsSimple, user: "sha2", auth: bytes.Repeat([]byte{9}, 32), plugin: mysql.AUTH_CACHING_SHA2_PASSWORD})
	cases := []struct {
		name         string
		resp, follow []byte
		want         string
	}{
		{"no password", nopw, nil, "ok"},
		{"mariadb client, zlib", plain(clientResponse{caps: fuzzCapsMariaDB | mysql.CLIENT_COMPRESS, ext: 1 << 3, user: "nopw",
			plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "ok"},
		{"old client", plain(clientResponse{caps: fuzzCapsOld, user: "nopw"}), nil, "ok"},
		{"zstd level", plain(clientResponse{caps: fuzzCapsMySQL | mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM, user: "nopw",
			plugin: mysql.AUTH_NATIVE_PASSWORD, attrs: map[string]string{"a": "b"}, zstdLevel: 19}), nil, "ok"},
		{"database", plain(clientResponse{caps: fuzzCapsSimple, user: "plain", db: "kingshard", plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "1045"},
		{"database, no schema", plain(clientResponse{caps: fuzzCapsSimple, user: "nopw", db: "kingshard", plugin: mysql.AUTH_NATIVE_PASSWORD}),
			nil, "1044"},
		{"switch to caching_sha2", plain(clientResponse{caps: fuzzCapsSimple, user: "sha2nopw", plugin: mysql.AUTH_NATIVE_PASSWORD}),
			joinPackets(nil), "ok"},
		{"switch, no answer", plain(clientResponse{caps: fuzzCapsSimple, user: "sha2nopw", plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "closed"},
		{"full auth in clear without TLS", sha2, joinPackets([]byte("sha2pw\x00")), "1045"},
		{"full auth, RSA key, bad cipher", sha2, joinPackets([]byte{2}, bytes.Repeat([]byte{7}, 128)), "1045"},
		{"TLS", sslRequest(fuzzCapsSimple), joinPackets(nopw), "ok"},
		{"TLS, nothing after", sslRequest(fuzzCapsSimple), nil, "closed"},
		{"TLS, full auth in clear", sslRequest(fuzzCapsSimple), joinPackets(sha2, []byte("sha2pw\x00")), "ok"},
		{"TLS, full auth, wrong password", sslRequest(fuzzCapsSimple), joinPackets(sha2, []byte("nope\x00")), "1045"},
		{"TLS, cached after full auth", sslRequest(fuzzCapsSimple), joinPackets(sha2, []byte("sha2pw\x00")), "1045"}, // the scramble differs
		{"short", make([]byte, 31), nil, "1835"},
		{"no protocol 4.1", make([]byte, 40), nil, "1235"},
	}
	for _, c := range cases {
		h.resetLoginFailures()
		got, err := h.login(t, c.resp, splitPackets(c.follow, 4))
		if err != nil {
			err = fmt.Errorf("%s: %v", c.name, err)
		}
		h.settle(t, err)
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
