package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
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

// TestRelayRows: buffered rows are copied with the destination's sequence
// ids, stopping before the terminator; what is not buffered is left.
func TestRelayRows(t *testing.T) {
	var in []byte
	for i := range 5 {
		in = append(in, frame(byte(3+i), []byte{2, 'r', byte('0' + i)})...)
	}
	in = append(in, frame(8, []byte{EOFHeader, 0, 0, 2, 0, 0, 0})...)
	src, _ := newTestConn(in)
	src.Seq = 3
	if _, err := src.br.Peek(len(in)); err != nil { // fill the buffer
		t.Fatal(err)
	}
	dst, out := newTestConn(nil)
	dst.Seq = 10
	rows, err := src.RelayRows(dst)
	if err != nil || rows != 5 {
		t.Fatalf("rows %d err %v", rows, err)
	}
	if err := dst.Flush(); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 5 {
		want = append(want, frame(byte(10+i), []byte{2, 'r', byte('0' + i)})...)
	}
	if !bytes.Equal(out.w.Bytes(), want) || dst.Written != uint64(len(want)) {
		t.Fatalf("copied %x, want %x", out.w.Bytes(), want)
	}
	// The terminator is left for ReadRaw, with the sequence ids in step.
	if src.Seq != 8 || dst.Seq != 15 {
		t.Fatalf("seq src %d dst %d", src.Seq, dst.Seq)
	}
	p, err := src.ReadRaw()
	if err != nil || !IsEOF(p) {
		t.Fatalf("after the rows: %x %v", p, err)
	}
	// Nothing buffered, an error or a packet out of sequence: nothing copied.
	for _, in := range [][]byte{frame(1, []byte{ErrHeader, 1, 2}), frame(2, []byte{1, 'x'}), frame(1, []byte{5, 'x'})[:5]} {
		src, _ := newTestConn(in)
		src.Seq = 1
		_, _ = src.br.Peek(len(in))
		if rows, _ := src.RelayRows(dst); rows != 0 {
			t.Errorf("%x: %d rows copied", in, rows)
		}
	}
}

// A packet header announcing 16 MiB followed by a few bytes costs what
// arrived, not what was announced; a big packet's buffer is not kept.
func TestAnnouncedSizeNotAllocated(t *testing.T) {
	in := append([]byte{0xff, 0xff, 0xfe, 0}, bytes.Repeat([]byte{'x'}, 100)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 20 {
		conn, _ := newTestConn(in)
		if _, err := conn.ReadPacket(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Fatalf("20 connections announcing 16 MiB each and sending 100 bytes allocated %d bytes", got)
	}
	// A 3 MiB packet is read whole; the connection does not keep its
	// buffer, but keeps a small one.
	conn, _ := newTestConn(append(frame(0, bytes.Repeat([]byte{'y'}, 3<<20)), frame(1, bytes.Repeat([]byte{'z'}, 8000))...))
	if p, err := conn.ReadPacket(); err != nil || len(p) != 3<<20 {
		t.Fatalf("3 MiB packet: %d bytes, %v", len(p), err)
	}
	if cap(conn.big) > keepBig {
		t.Fatalf("kept a %d-byte buffer after a big packet", cap(conn.big))
	}
	if p, err := conn.ReadPacket(); err != nil || len(p) != 8000 || p[0] != 'z' {
		t.Fatalf("the packet after: %d bytes, %v", len(p), err)
	}
}
