// Package binlog follows one node's row binlog: every committed row change
// of the tables asked for, in commit order, each with the position to
// resume from. It is how keyshard's online resharding (proxy/reshard)
// catches up with writes made while it copies rows, and what causal reads
// and cache invalidation can build on.
//
// It reads the binlog with go-mysql's replication package (a replica's
// COM_BINLOG_DUMP: the server pushes events as they are written) and turns
// rows events into Changes with column names, which needs the server's
// binlog_format=ROW, binlog_row_image=FULL and binlog_row_metadata=FULL
// (Requirements checks them, and the grant). Positions are file and
// offset, not GTIDs: they work on every MariaDB and MySQL with a binlog,
// and a follower is only ever asked to resume where it has been.
//
// It imports go-mysql and backend (for Conn, to ask a node its settings and
// position); never router or proxy.
package binlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Position is a place in a node's binlog: a file and the offset of the
// next event in it.
type Position struct {
	File string
	Pos  uint32
}

func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// IsZero says the position is not set.
func (p Position) IsZero() bool { return p.File == "" }

// Compare orders positions of one server: by the file's sequence number
// (mysql-bin.000012 after mysql-bin.000009), then the offset.
func (p Position) Compare(q Position) int {
	if c := compareFiles(p.File, q.File); c != 0 {
		return c
	}
	switch {
	case p.Pos < q.Pos:
		return -1
	case p.Pos > q.Pos:
		return 1
	}
	return 0
}

func compareFiles(a, b string) int {
	if a == b {
		return 0
	}
	ia, ea := fileSeq(a)
	ib, eb := fileSeq(b)
	if ea == nil && eb == nil && ia != ib {
		if ia < ib {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func fileSeq(name string) (uint64, error) {
	i := strings.LastIndexByte(name, '.')
	return strconv.ParseUint(name[i+1:], 10, 64)
}

// Kind is what a Change does to its row.
type Kind uint8

const (
	Insert Kind = iota + 1
	Update
	Delete
)

func (k Kind) String() string {
	switch k {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return "?"
}

// Change is one row changed by a committed statement. Before is nil for an
// Insert, After for a Delete. Values are as go-mysql decodes them with
// this package's settings: nil (NULL), int64/uint64 (integers, unsigned
// ones as uint64), float32/float64, string: the bytes as stored for
// character and binary columns (in the column's character set, not
// converted), DECIMAL and temporal types as text.
type Change struct {
	Kind    Kind
	Schema  string
	Table   string
	Columns []string
	Before  []any
	After   []any
}

// Event is what Next returns: a committed transaction (Commit, with the
// changes of the tables asked for, in order; none for a transaction that
// changed none of them), a statement that is not a transaction's (DDL, as
// text), or only a new position between transactions; each with the
// position after it: resuming there neither repeats nor skips it. An XA
// transaction's rows are returned at its XA COMMIT (not at its XA
// PREPARE, which MariaDB writes first, with the rows), never when it is
// rolled back; a position between the two is no place to resume from
// (see Follower.Pending).
type Event struct {
	Changes []Change
	Commit  bool
	DDL     string
	Pos     Position
}

// ErrPurged says the binlog the follower needs is gone from the server
// (purged or expired): the changes in it can no longer be read.
var ErrPurged = errors.New("binlog: the position is no longer in the server's binary logs (purged)")

// Config says which server to follow and which tables.
type Config struct {
	Host     string
	Port     uint16
	User     string
	Password string
	// ServerID is the replica id the follower registers with; it must be
	// unique among the server's replicas (and differ from every server's
	// own server_id).
	ServerID uint32
	// Flavor is "mariadb" (default) or "mysql".
	Flavor string
	// Tables picks the tables whose changes Next returns; nil takes all.
	Tables func(schema, table string) bool
}

// Follower streams one server's binlog from a position.
type Follower struct {
	cfg      Config
	syncer   *replication.BinlogSyncer
	streamer *replication.BinlogStreamer
	file     string
	inTx     bool                // between a transaction's first event and its end
	group    []Change            // the changes of the transaction being read
	xid      string              // its XA id, once its XA END is read
	prepared map[string][]Change // XA transactions prepared, by XA id: their changes
}

// Follow starts reading the binlog of cfg's server at from.
func Follow(cfg Config, from Position) (*Follower, error) {
	if cfg.Flavor == "" {
		cfg.Flavor = mysql.MariaDBFlavor
	}
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:        cfg.ServerID,
		Flavor:          cfg.Flavor,
		Host:            cfg.Host,
		Port:            cfg.Port,
		User:            cfg.User,
		Password:        cfg.Password,
		HeartbeatPeriod: time.Second,
		// TIMESTAMP values as UTC text; the workflow's connections use
		// time_zone '+00:00'.
		TimestampStringLocation: time.UTC,
		ReadTimeout:             10 * time.Second,
		// A reconnect would resume where go-mysql last read, inside a
		// transaction maybe: the caller starts again from a boundary.
		DisableRetrySync: true,
		Logger:           slog.New(slog.DiscardHandler),
	})
	st, err := s.StartSync(mysql.Position{Name: from.File, Pos: from.Pos})
	if err != nil {
		s.Close()
		return nil, classify(err)
	}
	return &Follower{cfg: cfg, syncer: s, streamer: st, file: from.File, prepared: map[string][]Change{}}, nil
}

// Close stops the follower and its connection.
func (f *Follower) Close() { f.syncer.Close() }

// Next waits for the next transaction to end (its changes of the tables
// asked for come with it), a DDL statement, or the position to move on
// between transactions (a new binlog file, a heartbeat while the server is
// idle: so that a caller waiting to reach a position, Snapshot's or
// Current's, gets there even when nothing is written).
func (f *Follower) Next(ctx context.Context) (Event, error) {
	for {
		ev, err := f.streamer.GetEvent(ctx)
		if err != nil {
			return Event{}, classify(err)
		}
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			f.file = string(r.NextLogName)
			if ev.Header.Timestamp == 0 || f.inTx {
				// The server's own rotation at the start of the dump.
				continue
			}
			return Event{Pos: Position{File: f.file, Pos: uint32(r.Position)}}, nil
		}
		pos := Position{File: f.file, Pos: ev.Header.LogPos}
		if ev.Header.EventType == replication.XA_PREPARE_LOG_EVENT {
			// The end of an XA transaction's first part: its rows wait
			// for its XA COMMIT.
			if f.xid != "" {
				f.prepared[f.xid] = f.group
			}
			f.group, f.xid, f.inTx = nil, "", false
			return Event{Pos: pos}, nil
		}
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent, *replication.GTIDEvent:
			f.inTx, f.group, f.xid = true, nil, ""
			continue
		case *replication.XIDEvent:
			return f.commit(f.takeGroup(), pos), nil
		case *replication.QueryEvent:
			q := strings.TrimSpace(string(e.Query))
			up := strings.ToUpper(q)
			switch {
			case up == "BEGIN" || strings.HasPrefix(up, "XA START"):
				f.inTx = true
				continue
			case up == "COMMIT":
				return f.commit(f.takeGroup(), pos), nil
			case up == "ROLLBACK":
				f.takeGroup()
				return f.commit(nil, pos), nil
			case strings.HasPrefix(up, "SAVEPOINT") || strings.HasPrefix(up, "ROLLBACK TO"):
				continue
			case strings.HasPrefix(up, "XA END"):
				f.xid = strings.TrimSpace(q[len("XA END"):])
				continue
			case strings.HasPrefix(up, "XA COMMIT"):
				xid := strings.TrimSpace(q[len("XA COMMIT"):])
				if strings.HasSuffix(strings.ToUpper(xid), " ONE PHASE") {
					// Committed in one phase: the rows are this group's.
					return f.commit(f.takeGroup(), pos), nil
				}
				ch := f.prepared[xid]
				delete(f.prepared, xid)
				f.takeGroup()
				return f.commit(ch, pos), nil
			case strings.HasPrefix(up, "XA ROLLBACK"):
				delete(f.prepared, strings.TrimSpace(q[len("XA ROLLBACK"):]))
				f.takeGroup()
				return f.commit(nil, pos), nil
			}
			f.takeGroup()
			f.inTx = false
			return Event{DDL: q, Pos: pos}, nil
		case *replication.RowsEvent:
			schema, table := string(e.Table.Schema), string(e.Table.Table)
			if f.cfg.Tables != nil && !f.cfg.Tables(schema, table) {
				continue
			}
			cols := e.Table.ColumnNameString()
			if cols == nil {
				return Event{}, fmt.Errorf("binlog: %s.%s at %s has no column names: the server needs binlog_row_metadata=FULL", schema, table, pos)
			}
			f.group = append(f.group, changes(e, schema, table, cols)...)
			continue
		}
		if !f.inTx && ev.Header.LogPos > 0 {
			return Event{Pos: pos}, nil
		}
	}
}

// takeGroup ends the transaction being read and returns its changes.
func (f *Follower) takeGroup() []Change {
	g := f.group
	f.group, f.xid, f.inTx = nil, "", false
	return g
}

func (f *Follower) commit(ch []Change, pos Position) Event {
	return Event{Commit: true, Changes: ch, Pos: pos}
}

// Pending is how many XA transactions the follower has read prepared and
// not yet decided: while there are any, its position is no place to resume
// from (their rows were read before it).
func (f *Follower) Pending() int { return len(f.prepared) }

func changes(e *replication.RowsEvent, schema, table string, cols []string) []Change {
	var out []Change
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		for _, r := range e.Rows {
			out = append(out, Change{Kind: Insert, Schema: schema, Table: table, Columns: cols, After: r})
		}
	case replication.EnumRowsEventTypeDelete:
		for _, r := range e.Rows {
			out = append(out, Change{Kind: Delete, Schema: schema, Table: table, Columns: cols, Before: r})
		}
	case replication.EnumRowsEventTypeUpdate:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			out = append(out, Change{Kind: Update, Schema: schema, Table: table, Columns: cols, Before: e.Rows[i], After: e.Rows[i+1]})
		}
	}
	return out
}

// classify maps the server's "binlog gone" answer (1236) to ErrPurged.
func classify(err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG {
		return fmt.Errorf("%w: %s", ErrPurged, me.Message)
	}
	if strings.Contains(err.Error(), "1236") && strings.Contains(err.Error(), "binary log") {
		return fmt.Errorf("%w: %v", ErrPurged, err)
	}
	return err
}
