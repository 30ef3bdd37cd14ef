package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Compression is the algorithm of the compressed protocol.
type Compression uint8

// The compressed protocol's algorithms: zlib is CLIENT_COMPRESS, zstd is
// CLIENT_ZSTD_COMPRESSION_ALGORITHM (MySQL 8.0.18+ clients).
const (
	CompressNone Compression = iota
	CompressZlib
	CompressZstd
)

func (c Compression) String() string {
	switch c {
	case CompressZlib:
		return "zlib"
	case CompressZstd:
		return "zstd"
	}
	return "none"
}

// minCompress is the payload size below which a frame goes uncompressed,
// as MySQL's MIN_COMPRESS_LENGTH.
const minCompress = 50

// ErrCompressed reports a malformed compressed frame.
var ErrCompressed = errors.New("malformed compressed packet")

// Compress switches c to the compressed protocol with algo (zstd at level,
// 0 for the default 3). Every packet from then on travels inside compressed
// frames: a 7-byte header (compressed length, frame sequence id,
// uncompressed length, 0 when the payload is stored as is) and the zlib or
// zstd payload. Frames carry the packet stream in slices of any size; the
// packet layer above is unchanged.
//
// Call it between packets, with nothing buffered for writing (after the
// handshake's OK was flushed).
//
// As in MySQL, a compressed frame's sequence id is the one checked; the
// packets inside keep their own ids, which readers do not check.
func (c *Conn) Compress(algo Compression, level int) {
	if algo == CompressNone || c.comp != nil {
		return
	}
	if level <= 0 {
		level = 3
	}
	cc := &compressor{algo: algo, level: level, src: c.br, dst: c.nc}
	c.comp = cc
	c.br = bufio.NewReaderSize(&compReader{cc}, c.br.Size())
	c.bw = bufio.NewWriterSize(&compWriter{cc}, c.bw.Size())
}

// Compression reports the connection's compression algorithm.
func (c *Conn) Compression() Compression {
	if c.comp == nil {
		return CompressNone
	}
	return c.comp.algo
}

// compressor holds the framing state shared by the two directions.
type compressor struct {
	algo  Compression
	level int
	src   *bufio.Reader // raw frames in
	dst   net.Conn      // raw frames out
	seq   uint8         // next frame sequence id (reads set it, writes advance it)
	zenc  *zstd.Encoder // shared encoder for level, looked up once

	pending []byte // decompressed bytes not yet consumed
	in      []byte // decompressed frame storage
	zin     []byte // compressed payload scratch
	out     []byte // outgoing frames scratch
	hdr     [7]byte
}

// compReader yields the packet stream carried by compressed frames.
type compReader struct{ c *compressor }

func (r *compReader) Read(p []byte) (int, error) {
	c := r.c
	for len(c.pending) == 0 {
		if err := c.readFrame(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if len(c.pending) == 0 && cap(c.in) > 1<<20 {
		c.in = nil // a big frame's storage is not kept
	}
	return n, nil
}

// readFrame reads one frame into c.pending.
func (c *compressor) readFrame() error {
	if _, err := io.ReadFull(c.src, c.hdr[:]); err != nil {
		return err
	}
	clen := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
	c.seq = c.hdr[3] + 1
	ulen := int(c.hdr[4]) | int(c.hdr[5])<<8 | int(c.hdr[6])<<16
	if ulen == 0 {
		// Stored as is: the frame is the bytes themselves.
		c.in = grow(c.in, clen)
		if _, err := io.ReadFull(c.src, c.in); err != nil {
			return noEOF(err)
		}
		c.pending = c.in
		return nil
	}
	c.zin = grow(c.zin, clen)
	if _, err := io.ReadFull(c.src, c.zin); err != nil {
		return noEOF(err)
	}
	c.in = grow(c.in, ulen)
	var err error
	switch c.algo {
	case CompressZlib:
		err = inflate(c.zin, c.in)
	case CompressZstd:
		var out []byte
		out, err = zstdDecoder().DecodeAll(c.zin, c.in[:0])
		if err == nil && len(out) != ulen {
			err = fmt.Errorf("%w: %d bytes decompressed, header says %d", ErrCompressed, len(out), ulen)
		}
	}
	if cap(c.zin) > 1<<20 {
		c.zin = nil
	}
	if err != nil {
		if !errors.Is(err, ErrCompressed) {
			err = fmt.Errorf("%w: %v", ErrCompressed, err)
		}
		return err
	}
	c.pending = c.in
	return nil
}

// grow returns b resized to n bytes, reallocated if too small.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

var zlibReaders sync.Pool

// inflate decompresses the zlib stream src into exactly len(dst) bytes.
func inflate(src, dst []byte) error {
	br := bytes.NewReader(src)
	var zr io.ReadCloser
	if v := zlibReaders.Get(); v != nil {
		zr = v.(io.ReadCloser)
		if err := zr.(zlib.Resetter).Reset(br, nil); err != nil {
			return err
		}
	} else {
		var err error
		if zr, err = zlib.NewReader(br); err != nil {
			return err
		}
	}
	defer zlibReaders.Put(zr)
	if _, err := io.ReadFull(zr, dst); err != nil {
		return fmt.Errorf("%w: shorter than its header says (%v)", ErrCompressed, err)
	}
	// The stream must end here: reading on checks the adler32 trailer.
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			return fmt.Errorf("%w: longer than its header says", ErrCompressed)
		}
		return err
	}
	return nil
}

// compWriter frames whatever the packet layer flushes.
type compWriter struct{ c *compressor }

func (w *compWriter) Write(p []byte) (int, error) {
	c := w.c
	c.out = c.out[:0]
	for rest := p; len(rest) > 0; {
		n := min(len(rest), MaxPayload)
		c.out = c.appendFrame(c.out, rest[:n])
		rest = rest[n:]
	}
	if _, err := c.dst.Write(c.out); err != nil {
		return 0, err
	}
	if cap(c.out) > 1<<20 {
		c.out = nil
	}
	return len(p), nil
}

// appendFrame appends one frame holding chunk (at most MaxPayload bytes).
func (c *compressor) appendFrame(b, chunk []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, c.seq, 0, 0, 0)
	c.seq++
	ulen := 0
	if len(chunk) >= minCompress {
		switch c.algo {
		case CompressZlib:
			b = deflate(b, chunk)
		case CompressZstd:
			if c.zenc == nil {
				c.zenc = zstdEncoder(c.level)
			}
			b = c.zenc.EncodeAll(chunk, b)
		}
		if len(b)-start-7 < len(chunk) {
			ulen = len(chunk)
		} else {
			b = b[:start+7] // no gain: store it as is
		}
	}
	if ulen == 0 {
		b = append(b, chunk...)
	}
	clen := len(b) - start - 7
	b[start], b[start+1], b[start+2] = byte(clen), byte(clen>>8), byte(clen>>16)
	b[start+4], b[start+5], b[start+6] = byte(ulen), byte(ulen>>8), byte(ulen>>16)
	return b
}

var zlibWriters = sync.Pool{New: func() any {
	// Fastest level: the proxy's CPU is the budget, and zlib's default
	// level costs several times more for a little better ratio.
	w, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return w
}}

// sliceWriter appends to a byte slice.
type sliceWriter struct{ b []byte }

func (s *sliceWriter) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// deflate appends the zlib stream of src to b.
func deflate(b, src []byte) []byte {
	zw := zlibWriters.Get().(*zlib.Writer)
	sw := &sliceWriter{b: b}
	zw.Reset(sw)
	// Writes to a slice cannot fail.
	_, _ = zw.Write(src)
	_ = zw.Close()
	zlibWriters.Put(zw)
	return sw.b
}

// zstd encoders and the decoder are safe for concurrent use and hold their
// own bounded pools of state: one per level for the whole process, made on
// first use.
var (
	zstdMu   sync.Mutex
	zstdEncs = map[int]*zstd.Encoder{}
	zstdDec  = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(1<<25), zstd.WithDecoderMaxWindow(1<<24))
		if err != nil {
			panic(err) // only for invalid options
		}
		return d
	})
)

func zstdDecoder() *zstd.Decoder { return zstdDec() }

func zstdEncoder(level int) *zstd.Encoder {
	zstdMu.Lock()
	defer zstdMu.Unlock()
	e := zstdEncs[level]
	if e == nil {
		var err error
		e, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithWindowSize(1<<20))
		if err != nil {
			panic(err) // only for invalid options
		}
		zstdEncs[level] = e
	}
	return e
}
