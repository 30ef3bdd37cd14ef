// Command pipeline measures what pipelining would buy on a backend
// connection (issue 21): C connections straight to MariaDB, each sending
// D point selects in one write and reading the D answers in order, for a
// fixed time. With C×D held constant, the runs differ only in how many
// statements share a write and a read: bench/pipeline.sh runs it under
// perf for the syscalls and CPU per query of both sides.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:23400", "MariaDB")
	user := flag.String("user", "ks", "")
	pass := flag.String("password", "ks", "")
	db := flag.String("db", "sbtest", "")
	conns := flag.Int("conns", 16, "connections")
	depth := flag.Int("depth", 1, "statements per write on each connection")
	rows := flag.Int("table-size", 10000, "sbtest1's rows")
	dur := flag.Duration("time", 5*time.Second, "")
	flag.Parse()
	var total atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	deadline := time.Now().Add(*dur + 200*time.Millisecond)
	var firstErr atomic.Value
	for range *conns {
		c, err := client.Connect(*addr, *user, *pass, *db)
		if err != nil {
			log.Fatal(err)
		}
		w := wire.NewConn(c.Conn.Conn, 16384, 16384)
		classic, err := probe(w)
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			<-start
			for time.Now().Before(deadline) {
				for range *depth {
					q := "SELECT c FROM sbtest1 WHERE id=" + strconv.Itoa(1+rand.IntN(*rows))
					if err := w.WriteCommandString(mysql.COM_QUERY, q); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
				if err := w.Flush(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				for range *depth {
					w.Seq = 1 // each answer's sequence starts after its command's
					if err := readResult(w, classic); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
				total.Add(int64(*depth))
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // let perf attach
	t0 := time.Now()
	close(start)
	wg.Wait()
	el := time.Since(t0)
	if err, ok := firstErr.Load().(error); ok {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "%d %.0f\n", total.Load(), float64(total.Load())/el.Seconds())
}

// probe finds out whether result sets end their column definitions with
// an EOF packet (classic: no CLIENT_DEPRECATE_EOF).
func probe(w *wire.Conn) (classic bool, err error) {
	if err := w.WriteCommandString(mysql.COM_QUERY, "SELECT 1"); err != nil {
		return false, err
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	// count, definition, then EOF (classic) or the row.
	for range 2 {
		if _, err := w.ReadPacket(); err != nil {
			return false, err
		}
	}
	p, err := w.ReadPacket()
	if err != nil {
		return false, err
	}
	classic = p[0] == 0xfe && len(p) < 9
	if classic {
		if _, err := w.ReadPacket(); err != nil { // the row
			return false, err
		}
	}
	_, err = w.ReadPacket() // EOF or OK
	return classic, err
}

// readResult reads one text result set (column count, definitions, EOF
// if classic, rows, EOF or OK) or an error.
func readResult(w *wire.Conn, classic bool) error {
	p, err := w.ReadPacket()
	if err != nil {
		return err
	}
	switch p[0] {
	case 0xff:
		return errors.New("server error: " + string(p[min(len(p), 9):]))
	case 0x00:
		return nil // OK: no result set
	}
	n := int(p[0]) // a handful of columns: one byte
	if classic {
		n++
	}
	for range n {
		if _, err := w.ReadPacket(); err != nil {
			return err
		}
	}
	for {
		p, err := w.ReadPacket()
		if err != nil {
			return err
		}
		if p[0] == 0xfe && len(p) < 0xffffff && len(p) < 9+64 {
			return nil
		}
		if p[0] == 0xff {
			return fmt.Errorf("server error in rows: %s", p[min(len(p), 9):])
		}
	}
}
