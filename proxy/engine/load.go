package engine

import (
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// loadChunk is how many bytes of lines a sub-table's stream gathers before
// they are sent as one packet.
const loadChunk = 64 << 10

// loadLeg is one sub-table's LOAD DATA of a sharded load.
type loadLeg struct {
	bc      *backend.Conn
	sub     string
	buf     []byte
	reading bool // the server asked for the file: it reads until the empty packet
	clean   bool // its transaction ended (COMMIT or ROLLBACK answered): reusable
}

// LoadData runs LOAD DATA LOCAL INFILE into a sharded table: one LOAD DATA
// per sub-table, each on a connection of its own inside a transaction;
// the client's file is read once, split line by line by shard key, each
// line sent as it is to its sub-table. If all succeed, each sub-table's
// transaction commits, and the answer sums their rows and warnings; if
// any fails, or a line's key maps to no sub-table, all roll back and the
// error says where (the line, or the sub-table). Memory is one line and a
// buffer per sub-table, whatever the file's size.
func (e *Engine) LoadData(ld *router.Load) error {
	t := ld.Table
	if !e.Client.LocalFiles() {
		return e.Fail(&mysql.MyError{Code: mysql.ER_NOT_ALLOWED_COMMAND, State: "42000",
			Message: "The used command is not allowed with this MariaDB version: the client did not enable LOCAL INFILE"})
	}
	if e.Conns.TxOpen() {
		return e.Fail(Errorf(KindNotSupported, "keyshard: LOAD DATA into %s cannot run inside a transaction: "+
			"it loads each sub-table on a connection of its own (the transaction is still open)", t.Named()))
	}
	n := len(t.Rule.Tables())
	legs := make([]loadLeg, 0, n)
	var start time.Time // when the sub-tables' LOAD DATA were sent
	defer func() {
		// A connection whose transaction or file stream did not end
		// cleanly (an error, a panic) is closed, never reused.
		for i := range legs {
			if !legs[i].clean {
				legs[i].bc.MarkBroken()
			}
			if !start.IsZero() {
				legs[i].bc.Pool().Observe(time.Since(start), !legs[i].clean)
			}
			e.Conns.Release(legs[i].bc)
		}
	}()
	for i := range n {
		bc, err := e.Conns.Acquire(e.Nodes[t.NodeOf(i)], Extra|AutocommitOn)
		if err != nil {
			return e.Fail(err)
		}
		legs = append(legs, loadLeg{bc: bc, sub: t.SubTableName(i)})
	}
	// Open each sub-table's transaction and its LOAD DATA.
	start = time.Now()
	for i := range legs {
		l := &legs[i]
		if _, err := l.bc.Exec("BEGIN"); err != nil {
			return e.Fail(err)
		}
		bp := l.bc.Packets()
		if err := bp.WriteCommandString(mysql.COM_QUERY, ld.Sub(i)); err != nil || bp.Flush() != nil {
			return e.Fail(lostConn(l.bc, err))
		}
	}
	var failed error
	for i := range legs {
		l := &legs[i]
		p, err := readAnswer(l.bc)
		switch {
		case err != nil:
			l.bc.MarkBroken()
			failed = lostConn(l.bc, err)
		case len(p) > 0 && p[0] == wire.LocalInfileHdr:
			l.reading = true
		case len(p) > 0 && p[0] == wire.ErrHeader:
			me := wire.ParseErr(p)
			if failed == nil {
				failed = &mysql.MyError{Code: me.Code, State: me.State, Message: "keyshard: node " + l.bc.Node() + " " + l.sub + ": " + me.Message}
			}
		default:
			l.bc.MarkBroken()
			failed = lostConn(l.bc, wire.ErrMalformed)
		}
	}
	if failed == nil {
		failed = e.loadFile(ld, legs)
	}
	var ce *ClientError
	if cerr, ok := failed.(*ClientError); ok {
		ce = cerr
	}
	// End every file stream, read every answer.
	var affected, warnings uint64
	var records, deleted, skipped uint64
	for i := range legs {
		l := &legs[i]
		if !l.reading || l.bc.Broken() {
			continue
		}
		bp := l.bc.Packets()
		if len(l.buf) > 0 && ce == nil && failed == nil {
			if err := bp.WritePacket(l.buf); err != nil {
				l.bc.MarkBroken()
				failed = lostConn(l.bc, err)
				continue
			}
		}
		if err := bp.WritePacket(nil); err != nil || bp.Flush() != nil {
			l.bc.MarkBroken()
			if failed == nil {
				failed = lostConn(l.bc, err)
			}
			continue
		}
		p, err := readAnswer(l.bc)
		switch {
		case err != nil:
			l.bc.MarkBroken()
			if failed == nil {
				failed = lostConn(l.bc, err)
			}
		case len(p) > 0 && p[0] == wire.ErrHeader:
			me := wire.ParseErr(p)
			if failed == nil {
				failed = &mysql.MyError{Code: me.Code, State: me.State, Message: "keyshard: node " + l.bc.Node() + " " + l.sub + ": " + me.Message}
			}
		default:
			ok, perr := wire.ParseOK(p)
			if perr != nil {
				l.bc.MarkBroken()
				if failed == nil {
					failed = lostConn(l.bc, perr)
				}
				continue
			}
			l.bc.SetStatus(ok.Status)
			if i > 0 && t.Global {
				// The copies of a global table count as one table; one
				// that took other rows (IGNORE, REPLACE on copies not
				// alike) is not kept.
				if ok.AffectedRows != affected && failed == nil {
					failed = Errorf(KindNotSupported, "keyshard: LOAD DATA into %s: the copies changed different numbers of rows "+
						"(node %s: %d, node %s: %d): they are not alike, nothing was loaded; see ADMIN CHECK SHARDS",
						t.Named(), legs[0].bc.Node(), affected, l.bc.Node(), ok.AffectedRows)
				}
				continue
			}
			affected += ok.AffectedRows
			warnings = min(warnings+uint64(ok.Warnings), 65535)
			r, d, s := loadInfo(string(ok.Info))
			records, deleted, skipped = records+r, deleted+d, skipped+s
		}
	}
	// All or nothing: commit every sub-table's rows, or none.
	e.Trace.Committing()
	end := "COMMIT"
	if failed != nil {
		end = "ROLLBACK"
	}
	var committed []string
	for i := range legs {
		l := &legs[i]
		if l.bc.Broken() {
			continue
		}
		if _, err := l.bc.Exec(end); err != nil {
			if failed == nil {
				failed = err
				if len(committed) > 0 {
					failed = Errorf(KindNotSupported, "keyshard: LOAD DATA into %s: COMMIT failed on %s (%v) after it "+
						"succeeded on %s, whose rows stay", t.Named(), l.sub, err, strings.Join(committed, ", "))
				}
				end = "ROLLBACK" // the sub-tables not committed yet are not
			}
			continue
		}
		l.clean = true
		if end == "COMMIT" {
			committed = append(committed, l.sub)
		}
	}
	if ce != nil {
		return ce
	}
	if failed != nil {
		return e.Fail(failed)
	}
	e.Last.RowCount = int64(affected)
	e.Trace.Sent(0, affected)
	info := "Records: " + strconv.FormatUint(records, 10) + "  Deleted: " + strconv.FormatUint(deleted, 10) +
		"  Skipped: " + strconv.FormatUint(skipped, 10) + "  Warnings: " + strconv.FormatUint(warnings, 10)
	return e.Client.OK(affected, 0, e.Conns.Status(), uint16(warnings), info)
}

// loadFile asks the client for the file and splits it between the legs
// (those reading: all, when it is called). The file is read to its end
// whatever happens, as the protocol wants; the first problem is returned.
func (e *Engine) loadFile(ld *router.Load, legs []loadLeg) error {
	cp := e.Client.pkt
	if err := e.Client.Packet(append([]byte{wire.LocalInfileHdr}, ld.Path...)); err != nil {
		return err
	}
	if err := cp.Flush(); err != nil {
		return &ClientError{err}
	}
	var failed error
	skip := ld.IgnoreLines
	sc := router.NewLoadScanner(ld.Format, ld.Key)
	emit := func(l *router.LoadLine) error {
		if failed != nil {
			return nil
		}
		if skip > 0 {
			skip--
			return nil
		}
		if ld.Table.Global {
			// A copy of every line for every copy of the table.
			for i := range legs {
				if failed = legs[i].add(l.Raw); failed != nil {
					return nil
				}
			}
			return nil
		}
		i := 0 // a line the server skips (no LINES STARTING BY prefix) goes to the first sub-table
		if !l.Skip {
			why := ""
			switch {
			case l.NoKey:
				why = "has no field for it"
			case l.Null:
				why = "is NULL"
			}
			v, ok := router.KeyValue(l.Key, ld.IntKey)
			if why == "" && !ok {
				why = "is not a number: " + strconv.Quote(string(l.Key))
			}
			if why != "" {
				failed = Errorf(KindNotSupported, "keyshard: LOAD DATA into sharded table %s, line %d: shard key %s %s",
					ld.Table.Table, l.N, ld.Table.Key, why)
				return nil
			}
			var err error
			if i, err = ld.Find(v, l.N); err != nil {
				failed = err
				return nil
			}
		}
		failed = legs[i].add(l.Raw)
		return nil
	}
	for {
		p, err := cp.ReadPacket()
		if err != nil {
			for i := range legs {
				legs[i].bc.MarkBroken() // mid-file: their streams cannot end cleanly
			}
			return &ClientError{err}
		}
		if len(p) == 0 {
			break
		}
		_ = sc.Feed(p, emit)
	}
	_ = sc.End(emit)
	return failed
}

// add buffers a line of the file for the leg, sending the buffer once it
// holds a chunk.
func (leg *loadLeg) add(raw []byte) error {
	leg.buf = append(leg.buf, raw...)
	if len(leg.buf) < loadChunk {
		return nil
	}
	bp := leg.bc.Packets()
	if err := bp.WritePacket(leg.buf); err != nil || bp.Flush() != nil {
		leg.bc.MarkBroken()
		return lostConn(leg.bc, err)
	}
	leg.buf = leg.buf[:0]
	return nil
}

// readAnswer reads the first packet of an answer on bc, skipping MariaDB
// progress reports (one load of several: none is relayed).
func readAnswer(bc *backend.Conn) ([]byte, error) {
	p, err := bc.Packets().ReadPacket()
	for err == nil && wire.IsProgress(p) {
		p, err = bc.Packets().ReadPacket()
	}
	return p, err
}

// loadInfo reads the counts of a LOAD DATA's OK info ("Records: 3
// Deleted: 0  Skipped: 0  Warnings: 0").
func loadInfo(info string) (records, deleted, skipped uint64) {
	f := strings.Fields(info)
	for i := 0; i+1 < len(f); i += 2 {
		v, _ := strconv.ParseUint(f[i+1], 10, 64)
		switch f[i] {
		case "Records:":
			records = v
		case "Deleted:":
			deleted = v
		case "Skipped:":
			skipped = v
		}
	}
	return records, deleted, skipped
}
