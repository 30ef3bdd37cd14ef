package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// pipeConn feeds raw bytes to a Conn.
type pipeConn struct {
	net.Conn
	r io.Reader
	w bytes.Buffer
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error                { return nil }

func newTestConn(in []byte) (*Conn, *pipeConn) {
	pc := &pipeConn{r: bytes.NewReader(in)}
	return NewConn(pc, 4096, 4096), pc
}

func frame(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

func TestRoundTripSmallAndLarge(t *testing.T) {
	for _, size := range []int{0, 1, 100, 4096, 10000, MaxPayload - 1, MaxPayload, MaxPayload + 5, 2*MaxPayload + 1} {
		payload := bytes.Repeat([]byte{0xab}, size)
		out, pc := newTestConn(nil)
		if err := out.WritePacket(payload); err != nil {
			t.Fatal(err)
		}
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
		in, _ := newTestConn(pc.w.Bytes())
		in.MaxRead = 3 * MaxPayload
		got, err := in.ReadPacket()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("size %d: payload differs (got %d bytes)", size, len(got))
		}
	}
}

func TestReadErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated header", []byte{5, 0}, io.EOF},
		{"truncated payload", []byte{5, 0, 0, 0, 'a'}, io.ErrUnexpectedEOF},
		{"wrong sequence", frame(3, []byte("x")), ErrSequence},
		{"huge length, no data", []byte{0xff, 0xff, 0xff, 0}, io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		conn, _ := newTestConn(c.in)
		_, err := conn.ReadPacket()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestMaxRead(t *testing.T) {
	payload := bytes.Repeat([]byte{1}, MaxPayload+10)
	out, pc := newTestConn(nil)
	_ = out.WritePacket(payload)
	_ = out.Flush()
	in, _ := newTestConn(pc.w.Bytes())
	in.MaxRead = MaxPayload + 1
	if _, err := in.ReadPacket(); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("got %v, want ErrPacketTooLarge", err)
	}
}

func TestOKAndErrCodec(t *testing.T) {
	p := AppendOK(nil, 300, 1<<40, StatusAutocommit|StatusInTrans, 2, "info")
	ok, err := ParseOK(p)
	if err != nil || ok.AffectedRows != 300 || ok.InsertID != 1<<40 || ok.Status != StatusAutocommit|StatusInTrans || ok.Warnings != 2 || string(ok.Info) != "info" {
		t.Fatalf("ParseOK = %+v, %v", ok, err)
	}
	e := ParseErr(AppendErr(nil, 1045, "28000", "Access denied"))
	if e.Code != 1045 || e.State != "28000" || e.Message != "Access denied" {
		t.Fatalf("ParseErr = %+v", e)
	}
	w, st := ParseEOF(AppendEOF(nil, 3, StatusMoreResultsExists))
	if w != 3 || st != StatusMoreResultsExists {
		t.Fatalf("ParseEOF = %d %d", w, st)
	}
}

// FuzzReadPacket feeds arbitrary bytes to the packet reader and decoders:
// they must return errors, never panic or allocate without bound.
func FuzzReadPacket(f *testing.F) {
	f.Add(frame(0, []byte{0x03, 's', 'e', 'l'}))
	f.Add([]byte{0xff, 0xff, 0xff, 0x00, 1, 2, 3})
	f.Add(frame(0, AppendOK(nil, 1, 2, 3, 4, "")))
	f.Add(frame(0, []byte{0xfc, 0xff}))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, _ := newTestConn(in)
		c.MaxRead = 1 << 20
		for range 4 {
			p, err := c.ReadPacket()
			if err != nil {
				return
			}
			_, _ = ParseOK(p)
			_ = ParseErr(p)
			_, _ = ParseEOF(p)
			_, _ = ColumnName(p)
			_, _, _, _ = ReadLenEncString(p, 0)
			_, _, _ = ReadLenEncInt(p, 0)
			_, _, _ = ReadNulString(p, 0)
		}
	})
}
