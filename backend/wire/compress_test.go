package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/packet"
	"github.com/klauspost/compress/zlib"
)

// testPayloads are packets of every shape a frame must carry: empty, below
// the compression threshold, compressible, incompressible, and logical
// packets spanning several physical packets and frames.
func testPayloads() [][]byte {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 70000)
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	return [][]byte{
		{},
		{0x03, 'S', 'E', 'L'},
		bytes.Repeat([]byte("select 1 from t where id = 42; "), 400),
		random,
		bytes.Repeat([]byte{0xcd}, MaxPayload),
		append(bytes.Repeat([]byte("ab"), MaxPayload), random[:999]...),
	}
}

func TestCompressRoundTrip(t *testing.T) {
	for _, algo := range []Compression{CompressZlib, CompressZstd} {
		t.Run(algo.String(), func(t *testing.T) {
			out, pc := newTestConn(nil)
			out.Compress(algo, 0)
			if out.Compression() != algo {
				t.Fatalf("Compression() = %v", out.Compression())
			}
			payloads := testPayloads()
			raw := 0
			for _, p := range payloads {
				raw += len(p) + 4*(1+len(p)/MaxPayload)
				if err := out.WritePacket(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := out.Flush(); err != nil {
				t.Fatal(err)
			}
			if pc.w.Len() >= raw {
				t.Errorf("%v: %d bytes on the wire for %d bytes of packets: nothing was compressed", algo, pc.w.Len(), raw)
			}
			in, _ := newTestConn(pc.w.Bytes())
			in.MaxRead = 3 * MaxPayload
			in.Compress(algo, 0)
			for i, want := range payloads {
				got, err := in.ReadPacket()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("packet %d: %d bytes, want %d", i, len(got), len(want))
				}
			}
			if _, err := in.ReadPacket(); err != io.EOF {
				t.Fatalf("after the last packet: %v, want EOF", err)
			}
		})
	}
}

// TestCompressInterop talks to go-mysql's client packet layer, an
// independent implementation of the compressed protocol: a command in, a
// multi-packet answer (one packet larger than a frame) out.
func TestCompressInterop(t *testing.T) {
	for _, tc := range []struct {
		algo Compression
		gm   uint8
	}{{CompressZlib, mysql.MYSQL_COMPRESS_ZLIB}, {CompressZstd, mysql.MYSQL_COMPRESS_ZSTD}} {
		t.Run(tc.algo.String(), func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			srv := NewConn(a, 4096, 4096)
			srv.MaxRead = 3 * MaxPayload
			srv.Compress(tc.algo, 0)
			cli := packet.NewConn(b)
			cli.Compression = tc.gm

			cmd := append([]byte{0x03}, bytes.Repeat([]byte("SELECT 'x', "), 300)...)
			answer := testPayloads()[1:5]
			errc := make(chan error, 1)
			go func() {
				errc <- func() error {
					srv.Seq = 0
					got, err := srv.ReadPacket()
					if err != nil {
						return err
					}
					if !bytes.Equal(got, cmd) {
						return errors.New("server read a different command")
					}
					for _, p := range answer {
						if err := srv.WritePacket(p); err != nil {
							return err
						}
					}
					return srv.Flush()
				}()
			}()
			cli.Sequence = 0
			if err := cli.WritePacket(append(make([]byte, 4), cmd...)); err != nil {
				t.Fatal(err)
			}
			for i, want := range answer {
				got, err := cli.ReadPacket()
				if err != nil {
					t.Fatalf("client reading packet %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("client packet %d: %d bytes, want %d", i, len(got), len(want))
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// compFrame builds one frame by hand.
func compFrame(seq byte, ulen int, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq, byte(ulen), byte(ulen >> 8), byte(ulen >> 16)}, payload...)
}

func zlibBytes(t testing.TB, p []byte) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCompressBadFrames(t *testing.T) {
	pkt := frame(0, bytes.Repeat([]byte("x"), 200))
	z := zlibBytes(t, pkt)
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"stored frame", compFrame(0, 0, frame(0, []byte{1, 2, 3})), nil},
		{"compressed frame", compFrame(0, len(pkt), z), nil},
		{"header says more", compFrame(0, len(pkt)+10, z), ErrCompressed},
		{"header says less", compFrame(0, len(pkt)-10, z), ErrCompressed},
		{"not zlib", compFrame(0, 100, bytes.Repeat([]byte{7}, 40)), ErrCompressed},
		{"bad checksum", compFrame(0, len(pkt), append(z[:len(z)-1:len(z)-1], z[len(z)-1]^1)), ErrCompressed},
		{"truncated frame", compFrame(0, len(pkt), z)[:20], io.ErrUnexpectedEOF},
		{"truncated header", []byte{5, 0, 0, 0}, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		c, _ := newTestConn(tc.in)
		c.Compress(CompressZlib, 0)
		_, err := c.ReadPacket()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	c, _ := newTestConn(compFrame(0, 50, bytes.Repeat([]byte{7}, 40)))
	c.Compress(CompressZstd, 0)
	if _, err := c.ReadPacket(); !errors.Is(err, ErrCompressed) {
		t.Errorf("not zstd: %v, want ErrCompressed", err)
	}
}

// FuzzCompressedRead feeds arbitrary frames to both decoders: errors are
// fine, panics and runaway allocations are not.
func FuzzCompressedRead(f *testing.F) {
	pkt := frame(0, bytes.Repeat([]byte("ab"), 100))
	f.Add(compFrame(0, len(pkt), zlibBytes(f, pkt)), false)
	f.Add(compFrame(0, 0, pkt), true)
	f.Add(compFrame(3, 9, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0}), true)
	f.Fuzz(func(t *testing.T, in []byte, zstd bool) {
		c, _ := newTestConn(in)
		c.MaxRead = 1 << 20
		if zstd {
			c.Compress(CompressZstd, 0)
		} else {
			c.Compress(CompressZlib, 0)
		}
		for range 8 {
			if _, err := c.ReadPacket(); err != nil {
				return
			}
		}
	})
}
