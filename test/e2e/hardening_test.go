package e2e

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Clients that never log in cost keyshard what they sent, not what they
// announced: a packet header announcing 16 MiB after the greeting
// allocates nothing up front; one address may hold only
// max_unauthenticated_per_host connections that have not logged in; a
// packet over 64 KiB before login is refused with 1153; and a normal
// client logs in afterwards.
func TestHostilePreAuth(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"max_unauthenticated_per_host: 12\n")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Announcing 16 MiB before login: refused at once, nothing read.
	big := dialRaw(t, p.Addr)
	big.mustRead() // the greeting
	big.nc.Write([]byte{0xff, 0xff, 0xfe, 1})
	big.anySeq = true
	wantErrPacket(t, big.mustRead(), 1153, "before login")
	// Announcing 60 KiB and sending 10 bytes, 12 times: held, each
	// costing what arrived.
	var hostile []*rawConn
	for range 12 {
		r := dialRaw(t, p.Addr)
		r.mustRead()
		r.nc.Write([]byte{0x00, 0xf0, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		hostile = append(hostile, r)
	}
	// Let keyshard read the 12 headers and wait for the bodies.
	time.Sleep(300 * time.Millisecond)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Fatalf("13 connections that never logged in made the heap grow by %d MiB", grew>>20)
	}
	// A 13th from the same address is refused at once.
	r := dialRaw(t, p.Addr)
	wantErrPacket(t, r.mustRead(), 1040, "still logging in (max_unauthenticated_per_host 12)")
	for _, h := range hostile {
		h.nc.Close()
	}
	waitFor(t, "the hostile connections to go", func() bool {
		r := dialRaw(t, p.Addr)
		pk := r.mustRead()
		r.nc.Close()
		return pk[0] != 0xff
	})
	// A client that logs in is served.
	db := p.open(t, "ks:ks", "", "")
	if got := queryCol(t, db, "SELECT 1"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("a login after the hostile connections: %v", got)
	}
}

// wantErrPacket fails unless p is an ERR packet with errno code whose
// message contains substr.
func wantErrPacket(t *testing.T, p []byte, code uint16, substr string) {
	t.Helper()
	if len(p) < 9 || p[0] != 0xff {
		t.Fatalf("want ERR %d, got %q", code, p)
	}
	got := binary.LittleEndian.Uint16(p[1:])
	msg := string(p[3:])
	if len(msg) > 6 && msg[0] == '#' {
		msg = msg[6:]
	}
	if got != code || !strings.Contains(msg, substr) {
		t.Fatalf("want ERR %d containing %q, got %d %q", code, substr, got, msg)
	}
}
