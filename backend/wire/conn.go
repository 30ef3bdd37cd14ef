package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
)

// MaxPayload is the largest payload of one physical packet; a logical packet
// of this size or more continues in the next physical packet.
const MaxPayload = 1<<24 - 1

// ErrPacketTooLarge is returned by ReadPacket when a logical packet would
// exceed the connection's read limit.
var ErrPacketTooLarge = errors.New("packet larger than max_allowed_packet")

// ErrSequence is returned when a packet arrives with an unexpected sequence id.
var ErrSequence = errors.New("packets out of order")

// Conn is a MySQL packet connection. It is not safe for concurrent use,
// except Close and NetConn which may be called from any goroutine.
type Conn struct {
	nc net.Conn
	br *bufio.Reader
	bw *bufio.Writer

	// Seq is the sequence id expected on the next read and used on the next
	// write. Callers reset it to 0 at the start of each command.
	Seq uint8

	// MaxRead bounds the size of a logical packet read by ReadPacket.
	MaxRead int

	// Written counts the bytes of packets written (headers included,
	// before compression), for statistics.
	Written uint64

	big    []byte      // scratch for packets that do not fit the reader's buffer
	comp   *compressor // nil unless the compressed protocol is on
	header [4]byte

	// A capture keeps a copy of the packets written (headers included,
	// before compression) up to captureMax bytes; past it, it is dropped.
	capture    []byte
	capturing  bool
	captureMax int

	// ahead, when set, reads the answers to commands written ahead of
	// the one whose answer the next read starts (see SetAhead).
	ahead func() error
}

// SetAhead has f read the answers to commands written ahead of the next
// one, before the first packet of that one's answer is read: a command
// pipelined in front of another costs no round trip of its own, and the
// reader of the other's answer need not know. An error from f is the
// read's error. The next read runs f once (it is cleared first).
func (c *Conn) SetAhead(f func() error) { c.ahead = f }

// StartCapture starts keeping a copy of what is written, up to max bytes.
func (c *Conn) StartCapture(max int) {
	c.capture, c.capturing, c.captureMax = c.capture[:0], true, max
}

// StopCapture ends the capture: the packets written since StartCapture
// (valid until the next StartCapture), or ok false if they grew past its
// max.
func (c *Conn) StopCapture() (packets []byte, ok bool) {
	ok, c.capturing = c.capturing, false
	packets = c.capture
	if cap(c.capture) > 64<<10 {
		c.capture = nil // a session keeps no big buffer for the next one
	}
	return packets, ok
}

// keep adds b to the capture.
func (c *Conn) keep(b []byte) {
	if len(c.capture)+len(b) > c.captureMax {
		c.capturing, c.capture = false, c.capture[:0]
		return
	}
	c.capture = append(c.capture, b...)
}

// WriteCaptured writes packets a capture kept (an earlier answer, sent
// again as it was: its sequence ids included).
func (c *Conn) WriteCaptured(packets []byte) error {
	c.Written += uint64(len(packets))
	_, err := c.bw.Write(packets)
	return err
}

// NewConn wraps nc with a reader and a writer of the given buffer sizes.
func NewConn(nc net.Conn, readBuf, writeBuf int) *Conn {
	if readBuf < 4096 {
		readBuf = 4096
	}
	if writeBuf < 4096 {
		writeBuf = 4096
	}
	return &Conn{
		nc:      nc,
		br:      bufio.NewReaderSize(nc, readBuf),
		bw:      bufio.NewWriterSize(nc, writeBuf),
		MaxRead: 64 << 20,
	}
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Reset points the connection at a new net.Conn (after a TLS upgrade) with
// fresh buffers of the same size. Bytes still in the read buffer are lost:
// hand the old connection on through Unread first.
func (c *Conn) Reset(nc net.Conn) {
	c.nc = nc
	c.br.Reset(nc)
	c.bw.Reset(nc)
}

// Unread returns the underlying connection with whatever the read buffer
// already holds put back in front of it. A client may send its TLS
// ClientHello in the same segment as the SSLRequest; the TLS layer must see
// those bytes too.
func (c *Conn) Unread() net.Conn {
	n := c.br.Buffered()
	if n == 0 {
		return c.nc
	}
	b, _ := c.br.Peek(n)
	return &prefixConn{Conn: c.nc, prefix: append([]byte(nil), b...)}
}

// prefixConn reads prefix before reading from Conn.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// Buffered reports how many bytes are waiting in the read buffer.
func (c *Conn) Buffered() int {
	if c.comp != nil {
		return c.br.Buffered() + len(c.comp.pending)
	}
	return c.br.Buffered()
}

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.nc.Close() }

// ReadRaw reads one physical packet and returns its payload. The slice
// aliases an internal buffer and is valid until the next read. The sequence
// id is checked and advanced.
//
// With the compressed protocol the frames' sequence ids are the checked
// ones, and after a read Seq follows the frames, as in MySQL: a client whose
// command took three frames expects the answer's packets from id 3.
func (c *Conn) ReadRaw() ([]byte, error) {
	if c.ahead != nil {
		f := c.ahead
		c.ahead = nil
		if err := f(); err != nil {
			return nil, err
		}
	}
	p, err := c.readRaw()
	if c.comp != nil {
		c.Seq = c.comp.seq
	}
	return p, err
}

func (c *Conn) readRaw() ([]byte, error) {
	hdr, err := c.br.Peek(4)
	if err != nil {
		return nil, err
	}
	n := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16)
	seq := hdr[3]
	if seq != c.Seq && c.comp == nil {
		return nil, fmt.Errorf("%w: got sequence %d, want %d", ErrSequence, seq, c.Seq)
	}
	// The header counts as received: an error answering it carries the
	// next sequence id.
	c.Seq = seq + 1
	if n > c.MaxRead {
		return nil, ErrPacketTooLarge
	}
	if 4+n <= c.br.Size() {
		p, err := c.br.Peek(4 + n)
		if err != nil {
			return nil, noEOF(err)
		}
		// Discard cannot fail for bytes already peeked.
		_, _ = c.br.Discard(4 + n)
		return p[4:], nil
	}
	_, _ = c.br.Discard(4)
	// The body is read as it arrives, into a buffer that grows with what
	// came, never to the announced size up front: a peer announcing 16 MiB
	// and sending nothing costs nothing. A scratch buffer up to keepBig is
	// kept for the next big packet; a bigger one goes with the packet.
	buf := c.big[:0]
	if cap(buf) < n && n > keepBig {
		buf = nil
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, max(2*cap(buf), 64<<10)))
			copy(nb, buf)
			buf = nb
		}
		m, err := c.br.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			return nil, noEOF(err)
		}
	}
	if cap(buf) <= keepBig {
		c.big = buf
	}
	return buf, nil
}

// keepBig is the largest scratch buffer a connection keeps between
// packets: a session or a pooled connection that once read a huge
// statement or row does not hold its size for life.
const keepBig = 1 << 20

// RelayRows copies to dst, in one write, the result set rows that c has
// already received (no read is made): each packet gets dst's next
// sequence id, and nothing else is looked at. It stops before the first
// packet that is not a whole row: a terminator (EOF/OK) or an error, a
// packet of MaxPayload bytes or more (split rows take the packet-by-packet
// path), or one not fully received. rows is how many it copied (0 with
// the compressed protocol on either side); an error is dst's.
func (c *Conn) RelayRows(dst *Conn) (rows uint64, err error) {
	n := c.br.Buffered()
	if n < 5 || c.comp != nil || dst.comp != nil {
		return 0, nil
	}
	buf, _ := c.br.Peek(n) // buffered bytes: cannot fail
	off := 0
	for off+4 < n {
		l := int(buf[off]) | int(buf[off+1])<<8 | int(buf[off+2])<<16
		if l == 0 || l >= MaxPayload || off+4+l > n || buf[off+3] != c.Seq {
			break
		}
		if h := buf[off+4]; h == ErrHeader || h == EOFHeader {
			break // a row never starts so below MaxPayload (0xfe: an 8-byte length)
		}
		buf[off+3] = dst.Seq
		c.Seq++
		dst.Seq++
		off += 4 + l
		rows++
	}
	if off == 0 {
		return 0, nil
	}
	dst.Written += uint64(off)
	if dst.capturing {
		dst.keep(buf[:off])
	}
	_, err = dst.bw.Write(buf[:off])
	_, _ = c.br.Discard(off)
	return rows, err
}

// ReadPacket reads one logical packet, joining physical packets of
// MaxPayload bytes. The slice is valid until the next read.
func (c *Conn) ReadPacket() ([]byte, error) {
	p, err := c.ReadRaw()
	if err != nil || len(p) < MaxPayload {
		return p, err
	}
	// A logical packet spanning several physical ones: copy into an owned
	// buffer, bounded by MaxRead, growing with what arrives.
	buf := append([]byte(nil), p...)
	for {
		p, err = c.ReadRaw()
		if err != nil {
			return nil, err
		}
		if len(buf)+len(p) > c.MaxRead {
			return nil, ErrPacketTooLarge
		}
		buf = append(buf, p...)
		if len(p) < MaxPayload {
			return buf, nil
		}
	}
}

// PeekLength returns the payload length of the next physical packet without
// consuming it. Used to refuse oversized packets before reading them.
func (c *Conn) PeekLength() (int, error) {
	hdr, err := c.br.Peek(4)
	if err != nil {
		return 0, err
	}
	return int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WritePacket buffers payload as one logical packet (split into physical
// packets as needed) with consecutive sequence ids.
func (c *Conn) WritePacket(payload []byte) error {
	for {
		n := len(payload)
		if n > MaxPayload {
			n = MaxPayload
		}
		if err := c.writeHeader(n); err != nil {
			return err
		}
		if c.capturing {
			c.keep(payload[:n])
		}
		if _, err := c.bw.Write(payload[:n]); err != nil {
			return err
		}
		payload = payload[n:]
		if n < MaxPayload {
			return nil
		}
	}
}

// WriteRaw buffers payload as exactly one physical packet; the caller is
// relaying physical packets and has already split them.
func (c *Conn) WriteRaw(payload []byte) error {
	if err := c.writeHeader(len(payload)); err != nil {
		return err
	}
	if c.capturing {
		c.keep(payload)
	}
	_, err := c.bw.Write(payload)
	return err
}

func (c *Conn) writeHeader(n int) error {
	c.header[0] = byte(n)
	c.header[1] = byte(n >> 8)
	c.header[2] = byte(n >> 16)
	c.header[3] = c.Seq
	c.Seq++
	c.Written += uint64(n) + 4
	if c.capturing {
		c.keep(c.header[:])
	}
	_, err := c.bw.Write(c.header[:])
	return err
}

// Flush writes buffered packets to the socket.
func (c *Conn) Flush() error { return c.bw.Flush() }

// WriteBuffered reports how many bytes wait in the write buffer.
func (c *Conn) WriteBuffered() int { return c.bw.Buffered() }

// WriteCommand starts a new command: it resets the sequence id and buffers
// one logical packet made of the command byte followed by arg, without
// copying arg into a temporary slice.
func (c *Conn) WriteCommand(cmd byte, arg []byte) error {
	c.Seq = 0
	n := 1 + len(arg)
	if n >= MaxPayload {
		p := make([]byte, 0, n)
		p = append(p, cmd)
		return c.WritePacket(append(p, arg...))
	}
	if err := c.writeHeader(n); err != nil {
		return err
	}
	if err := c.bw.WriteByte(cmd); err != nil {
		return err
	}
	_, err := c.bw.Write(arg)
	return err
}

// WriteCommandString is WriteCommand for a string argument (COM_QUERY).
func (c *Conn) WriteCommandString(cmd byte, arg string) error {
	c.Seq = 0
	n := 1 + len(arg)
	if n >= MaxPayload {
		p := make([]byte, 0, n)
		p = append(p, cmd)
		return c.WritePacket(append(p, arg...))
	}
	if err := c.writeHeader(n); err != nil {
		return err
	}
	if err := c.bw.WriteByte(cmd); err != nil {
		return err
	}
	_, err := c.bw.WriteString(arg)
	return err
}
