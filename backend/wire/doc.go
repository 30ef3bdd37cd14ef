// Package wire is MySQL packet framing and the few packet codecs that both
// sides of keyshard need: the frontend (proxy) speaking to clients and the
// backend client speaking to MariaDB/MySQL servers.
//
// A Conn owns one buffered reader and one buffered writer over a net.Conn.
// Reads hand out slices that alias the reader's buffer and stay valid only
// until the next read, so relaying a packet is one copy (reader buffer ->
// writer buffer) and nothing is decoded unless the caller asks. Writes are
// buffered and reach the socket only on Flush (or when the buffer fills), so
// a small response is one write syscall.
//
// wire imports nothing from keyshard; proxy and backend both import it.
package wire
