package engine

import (
	"testing"

	"github.com/keyshard/keyshard/backend/wire"
)

// While SetMore is on, the packet ending each answer says
// SERVER_MORE_RESULTS_EXISTS: a relayed OK (whatever its length-encoded
// counts), a classic EOF and a 0xfe-headed OK, without changing the rest.
func TestClientMoreIn(t *testing.T) {
	c := &Client{}
	const st = 0x0002 // autocommit
	for _, p := range [][]byte{
		wire.AppendOK(nil, 1, 0, st, 0, ""),
		wire.AppendOK(nil, 300, 70000, st, 3, "Rows matched: 300"),
		wire.AppendOK(nil, 1<<40, 0, st, 0, ""),
		wire.AppendEOF(nil, 2, st),
		wire.AppendResultEndOK(nil, 2, st),
	} {
		if got := c.moreIn(p, st); &got[0] != &p[0] {
			t.Errorf("%x: changed while SetMore is off", p)
		}
		c.SetMore(true)
		got := append([]byte(nil), c.moreIn(p, st)...)
		c.SetMore(false)
		ok, err := wire.ParseEnd(got)
		if wire.IsOldEOF(p) {
			ok.Warnings, ok.Status = wire.ParseEOF(got)
		} else if p[0] == wire.OKHeader {
			ok, err = wire.ParseOK(got)
		}
		if err != nil || ok.Status != st|wire.StatusMoreResultsExists {
			t.Errorf("%x -> %x: status %#x %v", p, got, ok.Status, err)
		}
		for i := range p {
			if got[i] != p[i] && got[i] != p[i]|byte(wire.StatusMoreResultsExists) {
				t.Errorf("%x -> %x: byte %d changed", p, got, i)
			}
		}
	}
}
