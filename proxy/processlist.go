package proxy

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Process is one client session for SHOW PROCESSLIST, the REST API and the
// status page: MySQL's columns (id is the one KILL and CONNECTION_ID()
// use) and the nodes the running statement is on.
type Process struct {
	ID      uint32   `json:"id"`
	User    string   `json:"user"`
	Host    string   `json:"host"` // the client's host:port, as MySQL's
	DB      string   `json:"db"`
	Command string   `json:"command"`
	Time    int64    `json:"time"` // seconds in this command (or asleep)
	State   string   `json:"state"`
	Info    string   `json:"info"` // the statement running ("" asleep)
	Nodes   []string `json:"nodes"`
}

// maxProcessInfo bounds a statement's text in Process.Info unless the full
// text is asked for (SHOW FULL PROCESSLIST), as MySQL's 100 characters.
const maxProcessInfo = 100

// Where a running statement is, for Process.State.
const (
	procStarting int32 = iota // parsing, routing
	procPoolWait              // waiting for a backend connection
	procBackend               // sent, waiting for the backend's answer
	procSending               // relaying the answer
)

// procState is what another goroutine may read of a session: the
// session's goroutine publishes it at each statement's start and end,
// and the stage atomically as it moves.
type procState struct {
	since atomic.Int64 // unix nanos: the command's start, or the last one's end (asleep)
	cmd   atomic.Int32 // the command running; -1 asleep
	stage atomic.Int32 // procStarting ...

	// mu guards these and the trace's nodes (written by the session's
	// goroutine under it; read by it without).
	mu   sync.Mutex
	user string
	db   string
	text string // the running statement (aliases the session's read buffer while it runs)
}

// publishStart records the command cmd with statement text sql (which
// must stay valid until publishEnd).
func (p *procState) publishStart(now time.Time, cmd byte, sql string) {
	p.since.Store(now.UnixNano())
	p.stage.Store(procStarting)
	p.cmd.Store(int32(cmd))
	p.setText(sql)
}

// setText records the running statement's text (a prepared statement's,
// once it is known).
func (p *procState) setText(sql string) {
	p.mu.Lock()
	p.text = sql
	p.mu.Unlock()
}

// publishEnd marks the session asleep, with its current user and database.
func (p *procState) publishEnd(user, db string) {
	p.cmd.Store(-1)
	p.since.Store(time.Now().UnixNano())
	p.mu.Lock()
	p.text = ""
	if p.user != user {
		p.user = strings.Clone(user)
	}
	if p.db != db {
		p.db = strings.Clone(db)
	}
	p.mu.Unlock()
}

// userName is the session's user as last published (other goroutines
// read it here, never from Session.user).
func (p *procState) userName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.user
}

// procCommands are SHOW PROCESSLIST's names of client commands.
var procCommands = map[byte]string{
	mysql.COM_QUERY: "Query", mysql.COM_INIT_DB: "Init DB", mysql.COM_FIELD_LIST: "Field List",
	mysql.COM_STATISTICS: "Statistics", mysql.COM_PROCESS_KILL: "Kill", mysql.COM_PING: "Ping",
	mysql.COM_CHANGE_USER: "Change user", mysql.COM_SET_OPTION: "Set option",
	mysql.COM_RESET_CONNECTION: "Reset connection", mysql.COM_STMT_PREPARE: "Prepare",
	mysql.COM_STMT_EXECUTE: "Execute", mysql.COM_STMT_CLOSE: "Close stmt", mysql.COM_STMT_RESET: "Reset stmt",
	mysql.COM_STMT_SEND_LONG_DATA: "Long Data", mysql.COM_STMT_FETCH: "Fetch", comStmtBulkExecute: "Execute",
}

// process reads the session's published state; full keeps the whole text.
func (s *Session) process(now time.Time, full bool) Process {
	p := &s.tr.proc
	pr := Process{ID: s.c.ID(), Host: s.c.Addr(), Command: "Sleep"}
	cmd := p.cmd.Load()
	pr.Time = max(0, int64(now.Sub(time.Unix(0, p.since.Load()))/time.Second))
	if !p.mu.TryLock() {
		// A KILL holds it while it reaches the backends (seconds, for
		// one that does not answer): the list does not wait for it.
		pr.State, pr.Nodes = "killing", []string{}
		return pr
	}
	pr.User, pr.DB = p.user, p.db
	if cmd >= 0 {
		pr.Info = p.text
		if !full && len(pr.Info) > maxProcessInfo {
			end := maxProcessInfo
			for end > 0 && !utf8.RuneStart(pr.Info[end]) {
				end-- // not in the middle of a character
			}
			pr.Info = pr.Info[:end]
		}
		pr.Info = strings.Clone(pr.Info)
		pr.Nodes = slices.Clone(s.tr.nodes)
	}
	piped := ""
	if s.tr.turn != nil {
		piped = s.tr.turn.Node()
	}
	p.mu.Unlock()
	if pr.Nodes == nil {
		pr.Nodes = []string{}
	}
	if cmd < 0 {
		return pr
	}
	if pr.Command = procCommands[byte(cmd)]; pr.Command == "" {
		pr.Command = "Command"
	}
	switch p.stage.Load() {
	case procStarting:
		pr.State = "starting"
	case procPoolWait:
		pr.State = "pool wait"
	case procBackend:
		pr.State = "backend"
		if bc := s.tr.cur.Load(); bc != nil {
			pr.State = "backend " + bc.Node()
		} else if piped != "" {
			pr.State = "backend " + piped + " (pipelined)"
		}
	case procSending:
		pr.State = "sending data"
	}
	if s.c.Killed() {
		pr.State = "killed"
	}
	return pr
}

// Processes lists the client sessions that are logged in, by id: every
// one, or with user set that user's only (as MySQL without the PROCESS
// privilege). full keeps the statements' whole text.
func (s *Server) Processes(user string, full bool) []Process {
	now := time.Now()
	out := []Process{}
	s.sessions.Range(func(_, v any) bool {
		sess := v.(*Session)
		if pr := sess.process(now, full); pr.User != "" && (user == "" || pr.User == user) {
			out = append(out, pr)
		}
		return true
	})
	slices.SortFunc(out, func(a, b Process) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
