// Command hostile measures what clients that misbehave cost keyshard in
// memory: it reads keyshard's RSS (VmRSS of -pid) at rest, then while N
// connections that never log in each announce a 16 MiB packet after the
// greeting ("announce": sends the 4-byte header only) or announce 60 KiB
// and send 10 bytes ("hold": a login held open), and then while S
// sessions each hold the answer of one big statement they sent (15 MB).
// bench/hostile.sh runs it against a base and a new build; it prints
// markdown rows.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:23495", "keyshard address")
	pid := flag.Int("pid", 0, "keyshard's pid, for its RSS")
	label := flag.String("label", "", "build label for the rows")
	web := flag.String("web", "", "keyshard's web_addr, for its Go heap")
	flag.Parse()
	row := func(what string, mib float64) { fmt.Printf("| %s | %s | %.1f |\n", *label, what, mib) }
	row("at rest", rss(*pid))
	for _, n := range []int{300, 1000} {
		for _, mode := range []string{"announce", "hold"} {
			conns := hostile(*addr, n, mode)
			time.Sleep(time.Second)
			row(fmt.Sprintf("%d connections, %s", n, mode), rss(*pid))
			for _, c := range conns {
				c.Close()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)
	row("after they closed", rss(*pid))
	// 50 sessions, each sends one 15 MB statement, then stays idle.
	db, err := sql.Open("mysql", "ks:ks@tcp("+*addr+")/?maxAllowedPacket=0")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxIdleConns(50)
	db.SetMaxOpenConns(50)
	big := "SELECT LENGTH('" + strings.Repeat("x", 15<<20) + "')"
	done := make(chan error, 50)
	for range 50 {
		go func() {
			var n int
			done <- db.QueryRow(big).Scan(&n)
		}()
	}
	for range 50 {
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	row("50 idle sessions after one 15 MB statement each", rss(*pid))
	if *web != "" {
		row("the same: Go heap in use after a collection", heapInuse(*web))
	}
	time.Sleep(30 * time.Second)
	row("the same, 30 s later (freed memory returned to the OS)", rss(*pid))
	db.Close()
}

// heapInuse reads go_memstats_heap_inuse_bytes from keyshard's /metrics,
// in MiB, after a collection.
func heapInuse(web string) float64 {
	// A heap profile with gc=1 runs a collection first: what is in use
	// then is what is held, not garbage not yet collected.
	if resp, err := http.Get("http://bench:bench@" + web + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v / (1 << 20)
		}
	}
	return -1
}

// hostile opens n connections that read the greeting and then announce a
// packet they never send whole.
func hostile(addr string, n int, mode string) []net.Conn {
	var out []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			log.Fatalf("dial %d: %v", len(out), err)
		}
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			log.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, c, int64(hdr[0])|int64(hdr[1])<<8|int64(hdr[2])<<16); err != nil {
			log.Fatal(err)
		}
		if mode == "announce" {
			_, _ = c.Write([]byte{0xff, 0xff, 0xff, 1})
		} else {
			_, _ = c.Write([]byte{0x00, 0xf0, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
		}
		out = append(out, c)
	}
	return out
}

// rss is a process's resident set in MiB.
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}
