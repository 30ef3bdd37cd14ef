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
	"github.com/keyshard/keyshard/proxy/frontend/frontendtest"
)

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
	seeds := frontendtest.HandshakeSeeds()
	for _, s := range seeds {
		f.Add(s, []byte(nil))
	}
	nopw := (&frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, Collation: 45, User: "nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD}).Append(nil)
	// TLS, then the response.
	f.Add(frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(nopw))
	f.Add(frontendtest.SSLRequest(frontendtest.CapsMySQL), joinPackets(seeds[0]))
	// Auth switch answers: to native for sha2nopw, from native for sha2.
	f.Add((&frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD}).Append(nil), joinPackets(nil))
	f.Add((&frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2", Auth: []byte("0123456789abcdefghij"), Plugin: mysql.AUTH_NATIVE_PASSWORD}).Append(nil),
		joinPackets(bytes.Repeat([]byte{1}, 32), []byte{2}, bytes.Repeat([]byte{7}, 128)))
	// caching_sha2 full authentication over TLS: the password in clear.
	f.Add(frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(
		(&frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2", Auth: bytes.Repeat([]byte{9}, 32), Plugin: mysql.AUTH_CACHING_SHA2_PASSWORD}).Append(nil),
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
	plain := func(c frontendtest.ClientResponse) []byte { return c.Append(nil) }
	nopw := plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, Collation: 45, User: "nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD})
	sha2 := plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2", Auth: bytes.Repeat([]byte{9}, 32), Plugin: mysql.AUTH_CACHING_SHA2_PASSWORD})
	cases := []struct {
		name         string
		resp, follow []byte
		want         string
	}{
		{"no password", nopw, nil, "ok"},
		{"mariadb client, zlib", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsMariaDB | mysql.CLIENT_COMPRESS, Ext: 1 << 3, User: "nopw",
			Plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "ok"},
		{"old client", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsOld, User: "nopw"}), nil, "ok"},
		{"zstd level", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsMySQL | mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM, User: "nopw",
			Plugin: mysql.AUTH_NATIVE_PASSWORD, Attrs: map[string]string{"a": "b"}, ZstdLevel: 19}), nil, "ok"},
		{"database", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "plain", DB: "kingshard", Plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "1045"},
		{"database, no schema", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "nopw", DB: "kingshard", Plugin: mysql.AUTH_NATIVE_PASSWORD}),
			nil, "1044"},
		{"switch to caching_sha2", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD}),
			joinPackets(nil), "ok"},
		{"switch, no answer", plain(frontendtest.ClientResponse{Caps: frontendtest.CapsSimple, User: "sha2nopw", Plugin: mysql.AUTH_NATIVE_PASSWORD}), nil, "closed"},
		{"full auth in clear without TLS", sha2, joinPackets([]byte("sha2pw\x00")), "1045"},
		{"full auth, RSA key, bad cipher", sha2, joinPackets([]byte{2}, bytes.Repeat([]byte{7}, 128)), "1045"},
		{"TLS", frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(nopw), "ok"},
		{"TLS, nothing after", frontendtest.SSLRequest(frontendtest.CapsSimple), nil, "closed"},
		{"TLS, full auth in clear", frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(sha2, []byte("sha2pw\x00")), "ok"},
		{"TLS, full auth, wrong password", frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(sha2, []byte("nope\x00")), "1045"},
		{"TLS, cached after full auth", frontendtest.SSLRequest(frontendtest.CapsSimple), joinPackets(sha2, []byte("sha2pw\x00")), "1045"}, // the scramble differs
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
