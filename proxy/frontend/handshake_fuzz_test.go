package frontend

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy/frontend/frontendtest"
)

// FuzzHandshakeResponse: parseHandshakeResponse never panics; a refusal is
// an *Error of kind MalformedPacket (or, for a client without protocol
// 4.1, NotSupported); what it accepts is read
// from inside the packet (user, database and plugin without NULs, auth data
// copied out of the read buffer) and comes back the same from a client's
// encoding of it.
func FuzzHandshakeResponse(f *testing.F) {
	for _, s := range frontendtest.HandshakeSeeds() {
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
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("error %T %v is not a frontend error with a message", err, err)
			}
			want := MalformedPacket
			if len(p) >= 32 && binary.LittleEndian.Uint32(p)&mysql.CLIENT_PROTOCOL_41 == 0 {
				want = NotSupported
			}
			if pe.Kind != want {
				t.Fatalf("error kind %d (%v), want %d", pe.Kind, err, want)
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
		enc := (&frontendtest.ClientResponse{Caps: r.caps, Ext: r.ext, Collation: r.collation, User: r.user, Auth: r.auth, DB: r.db,
			Plugin: r.plugin, ZstdLevel: uint8(r.zstdLevel)}).Append(nil)
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
