package proxy

import (
	"errors"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
)

// routed runs a COM_QUERY in a schema with shard rules. handled is false
// when the statement is not the router's business (SET, SHOW, ...); the
// caller then forwards it as usual.
func (s *Session) routed(p []byte, sql string, info router.Info) (handled bool, err error) {
	switch info.Kind {
	case router.KindBegin:
		if s.pinned == nil {
			// Opened on the node of the transaction's first statement.
			s.txBegin = strings.Clone(sql)
			return true, s.writeOK(0, 0)
		}
		return false, nil
	case router.KindCommit, router.KindRollback:
		if s.txBegin != "" && s.pinned == nil {
			s.txBegin = ""
			return true, s.writeOK(0, 0)
		}
		return false, nil
	case router.KindPrepare:
		return s.textPrepare(sql)
	case router.KindExecute:
		return s.textExecute(sql, info)
	case router.KindDeallocate:
		return s.textDeallocate(sql)
	case router.KindSelect, router.KindInsert, router.KindUpdate, router.KindDelete, router.KindReplace, router.KindDDL:
	default:
		return false, nil
	}
	if n, ok := s.hintNode(sql[:info.Start]); ok {
		return true, s.forwardTo(n, p, nil, info)
	}
	var pl *router.Plan
	var lits []router.Literal
	if s.tr.shaped {
		pl, lits, err = s.route.PlanShaped(s.getParser(), sql, s.db, info.Kind)
	} else {
		pl, lits, err = s.route.Plan(s.getParser(), sql, s.db, info.Kind)
	}
	s.mark(digest.Parse)
	if err != nil {
		return true, s.fail(err)
	}
	if pl.Kind == router.PlanDefault {
		if info.Flags&router.FlagSessionFunc != 0 && s.pinned == nil {
			// LAST_INSERT_ID() and friends are answered for the client by
			// the caller's rewrite, on the default node.
			return false, nil
		}
		return true, s.forwardTo(s.node, p, nil, info)
	}
	rt := &s.rt
	err = pl.BindTo(rt, lits, leadingComments(sql, info))
	s.mark(digest.Route)
	if err != nil {
		return true, s.fail(err)
	}
	if rt.Merge != "" {
		return true, s.fail(mergeErr(rt, pl))
	}
	if rt.Spec != nil {
		return true, s.merged(rt, false, router.ReadOnly(info), sendQuery)
	}
	if rt.Targets() == 1 {
		r := &rt.Routes[0]
		return true, s.forwardTo(s.snap.nodes[r.Node], nil, &r.SQL[0], info)
	}
	return true, s.scatter(rt, info)
}

// leadingComments returns the comments in front of the statement (not
// other text such as an opening parenthesis), kept in front of every
// rewritten statement.
func leadingComments(sql string, info router.Info) string {
	return router.LeadingComments(sql[:info.Start])
}

// hintNode reads a kingshard node hint, /*node2*/, in front of a statement.
// /*master*/ is accepted and changes nothing yet: every statement goes to
// a master.
func (s *Session) hintNode(lead string) (*backend.Node, bool) {
	lead = strings.TrimSpace(lead)
	if !strings.HasPrefix(lead, "/*") {
		return nil, false
	}
	end := strings.Index(lead, "*/")
	if end < 0 {
		return nil, false
	}
	name := strings.TrimSpace(lead[2:end])
	if name == "" || s.schema == nil {
		return nil, false
	}
	for _, n := range s.schema.Nodes {
		if n == name {
			return s.snap.nodes[n], true
		}
	}
	return nil, false
}

// leg is one node's part of a fan-out: its connection and statements.
type leg struct {
	bc       *backend.Conn
	route    *router.Route
	done     int  // statements whose answer has been read
	finished bool // the last packet of the batch's answer has been read
	// pipelined: each statement was sent as its own command (prepared
	// statements), so each has its own answer; else the statements form
	// one multi-statement batch that stops at the first error.
	pipelined bool
}

// next reports whether more answers follow on the leg after one that ended
// with status.
func (l *leg) next(status uint16) bool {
	if status&wire.StatusMoreResultsExists != 0 {
		return true
	}
	if l.pipelined && l.done < len(l.route.SQL) {
		// The next command's answer starts its own packet sequence.
		l.bc.Packets().Seq = 1
		return true
	}
	return false
}

// scatter runs a statement that touches several sub-tables. Each node gets
// its statements as one multi-statement batch on one connection; all
// batches are sent before any answer is read, so the nodes work in
// parallel and the latency is the slowest node's. SELECT results are
// relayed as one result set (rows in sub-table order, never buffered);
// writes report the summed affected rows.
func (s *Session) scatter(rt *router.Routing, info router.Info) error {
	return s.fanOut(rt, info.Kind == router.KindSelect, router.ReadOnly(info), func(l *leg) error {
		if len(l.route.SQL) > 1 {
			if err := l.bc.Sync(s.db, true, s.state); err != nil {
				return err
			}
		}
		bp := l.bc.Packets()
		if err := bp.WriteCommandString(mysql.COM_QUERY, strings.Join(l.route.SQL, ";")); err != nil {
			return err
		}
		return bp.Flush()
	})
}

// sendQuery sends a merge leg's statement as a COM_QUERY.
func sendQuery(l *leg) error {
	bp := l.bc.Packets()
	if err := bp.WriteCommandString(mysql.COM_QUERY, l.route.SQL[0]); err != nil {
		return err
	}
	return bp.Flush()
}

// fanOut runs rt's statements on one connection per node: send writes a
// leg's statements (and flushes them) and is called for every leg before
// any answer is read. The answers are relayed as one result set (isSelect)
// or summed into one OK.
func (s *Session) fanOut(rt *router.Routing, isSelect, read bool, send func(l *leg) error) error {
	if len(rt.Routes) > 1 && (s.txBegin != "" || s.inTx()) {
		return s.fail(newErr(errCrossNodeTx, "keyshard: inside a transaction this statement would touch nodes %s and %s; "+
			"a transaction can touch one node only (the transaction is still open)", rt.Routes[0].Node, rt.Routes[1].Node))
	}
	legs := make([]leg, 0, len(rt.Routes))
	releaseAll := func() {
		for i := range legs {
			s.release(legs[i].bc)
		}
	}
	for i := range rt.Routes {
		r := &rt.Routes[i]
		bc, _, err := s.connFor(s.snap.nodes[r.Node], read, nil)
		if err != nil {
			releaseAll()
			return s.fail(err)
		}
		legs = append(legs, leg{bc: bc, route: r})
	}
	if err := s.sendLegs(legs, send, false); err != nil {
		releaseAll()
		return s.fail(err)
	}
	s.cur.Store(legs[0].bc)
	var err error
	if isSelect {
		err = s.relayScatter(legs)
	} else {
		err = s.collectOKs(legs, rt)
	}
	s.cur.Store(nil)
	// A connection whose answer was not read to the end must not go back
	// to the pool: the next user would read the rest.
	for i := range legs {
		if !legs[i].finished {
			legs[i].bc.MarkBroken()
		}
	}
	var ce *clientError
	if errors.As(err, &ce) {
		releaseAll()
		return errCloseAfterReply
	}
	releaseAll()
	return err
}

// sendLegs sends every leg its statements. On an error the legs already
// sent are marked broken (their answers would reach the pool's next user)
// and the error is returned for the client: a statement refused before
// anything was sent (state sync, PREPARE) as the server gave it (named
// by node and sub-table when name), a lost connection as such. The
// caller releases the legs.
func (s *Session) sendLegs(legs []leg, send func(l *leg) error, name bool) error {
	for i := range legs {
		l := &legs[i]
		err := send(l)
		if err == nil {
			continue
		}
		var me *mysql.MyError
		if errors.As(err, &me) {
			if name {
				err = legError(l, me)
			}
			if !l.bc.Broken() && i == 0 {
				return err
			}
		}
		for j := 0; j <= i; j++ {
			legs[j].bc.MarkBroken()
		}
		var be *backend.Error
		if !errors.As(err, &be) && me == nil {
			err = &backend.Error{Kind: backend.KindLost, Node: l.bc.Node(), Addr: l.bc.Addr(), Msg: "sending statement", Err: err}
		}
		return err
	}
	return nil
}

// legError names the node and sub-table of a backend error; the errno and
// SQLSTATE stay the backend's.
func legError(l *leg, e *mysql.MyError) *mysql.MyError {
	sub := ""
	if l.done < len(l.route.SubTables) {
		sub = " " + l.route.SubTables[l.done]
	}
	return &mysql.MyError{Code: e.Code, State: e.State, Message: "keyshard: node " + l.bc.Node() + sub + ": " + e.Message}
}

// first reads the first packet of the leg's next answer (never empty).
func (l *leg) first() ([]byte, error) {
	p, err := l.bc.Packets().ReadPacket()
	if err != nil {
		return nil, lostLeg(l, err)
	}
	if len(p) == 0 {
		return nil, lostLeg(l, wire.ErrMalformed)
	}
	return p, nil
}

func lostLeg(l *leg, err error) error {
	l.bc.MarkBroken()
	return &backend.Error{Kind: backend.KindLost, Node: l.bc.Node(), Addr: l.bc.Addr(), Msg: "connection lost during query", Err: err}
}

// relayScatter relays the result sets of every leg as one: the first
// result's column definitions, then the rows of each, then one end packet.
func (s *Session) relayScatter(legs []leg) error {
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	var ncols uint64
	started := false
	var warnings uint16
	var rows uint64
	var failed *mysql.MyError
	for i := range legs {
		l := &legs[i]
		bp := l.bc.Packets()
		if failed != nil {
			// Not worth draining: the connection is closed instead.
			l.bc.MarkBroken()
			continue
		}
		for more := true; more; {
			p, err := l.first()
			if err != nil {
				return s.fail(err)
			}
			s.firstByte()
			switch p[0] {
			case wire.ErrHeader:
				failed = legError(l, wire.ParseErr(p))
				more = false
				l.finished = true
				continue
			case wire.OKHeader:
				// A statement without a result set in a SELECT fan-out.
				ok, _ := wire.ParseOK(p)
				l.bc.Status = ok.Status
				l.done++
				more = l.next(ok.Status)
				l.finished = !more
				continue
			}
			n, _, perr := wire.ReadLenEncInt(p, 0)
			if perr != nil {
				return s.fail(lostLeg(l, perr))
			}
			if !started {
				ncols = n
				if err := s.pkt.WritePacket(p); err != nil {
					return &clientError{err}
				}
			} else if n != ncols {
				failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
					Message: "keyshard: node " + l.bc.Node() + " " + l.route.SubTables[l.done] + " returned a different number of columns than the other sub-tables"}
				l.bc.MarkBroken()
				more = false
				continue
			}
			for range n {
				cp, err := bp.ReadPacket()
				if err != nil {
					return s.fail(lostLeg(l, err))
				}
				if !started {
					if err := s.pkt.WritePacket(cp); err != nil {
						return &clientError{err}
					}
				}
			}
			if !started && clientEOF {
				s.buf = wire.AppendEOF(s.buf[:0], 0, s.status())
				if err := s.pkt.WritePacket(s.buf); err != nil {
					return &clientError{err}
				}
			}
			started = true
			// Rows, one physical packet at a time.
			cont := false
			for {
				rp, err := bp.ReadRaw()
				if err != nil {
					return s.fail(lostLeg(l, err))
				}
				if cont {
					cont = len(rp) == wire.MaxPayload
					if err := s.pkt.WriteRaw(rp); err != nil {
						return &clientError{err}
					}
					continue
				}
				if len(rp) > 0 && rp[0] == wire.ErrHeader && len(rp) < wire.MaxPayload {
					failed = legError(l, wire.ParseErr(rp))
					more = false
					l.finished = true
					break
				}
				if wire.IsEOF(rp) {
					ok, perr := wire.ParseOK(rp)
					if perr != nil {
						return s.fail(lostLeg(l, perr))
					}
					l.bc.Status = ok.Status
					warnings += ok.Warnings
					l.done++
					more = l.next(ok.Status)
					l.finished = !more
					break
				}
				rows++
				cont = len(rp) == wire.MaxPayload
				if err := s.pkt.WriteRaw(rp); err != nil {
					return &clientError{err}
				}
			}
		}
	}
	s.rowCount = -1
	s.foundRows = rows
	s.tr.rows += rows
	if failed != nil {
		s.writeError(failed)
		return failed
	}
	if !started {
		s.writeError(newErr(errNotSupported, "keyshard: the fan-out returned no result set"))
		return nil
	}
	s.appendResultEnd(warnings)
	if err := s.pkt.WritePacket(s.buf); err != nil {
		return &clientError{err}
	}
	return nil
}

// collectOKs reads the OK packets of a write fan-out and answers with one
// OK: affected rows summed, the insert id of the statement holding the
// client's first row, warnings summed. The first error (naming its node and
// sub-table) is reported instead; statements on other sub-tables may have
// been applied, as with any multi-statement batch.
func (s *Session) collectOKs(legs []leg, rt *router.Routing) error {
	var affected, insertID uint64
	var warnings uint16
	var failed *mysql.MyError
	for i := range legs {
		l := &legs[i]
		for more := true; more; {
			p, err := l.first()
			if err != nil {
				return s.fail(err)
			}
			s.firstByte()
			switch p[0] {
			case wire.ErrHeader:
				if failed == nil {
					failed = legError(l, wire.ParseErr(p))
				}
				// A batch stops at its first error; pipelined statements
				// each answer.
				l.done++
				more = l.next(0)
				l.finished = !more
			case wire.OKHeader:
				ok, perr := wire.ParseOK(p)
				if perr != nil {
					return s.fail(lostLeg(l, perr))
				}
				l.bc.Status = ok.Status
				affected += ok.AffectedRows
				warnings += ok.Warnings
				if i == rt.FirstRoute && l.done == rt.FirstSQL {
					insertID = ok.InsertID
				}
				l.done++
				more = l.next(ok.Status)
				l.finished = !more
			default:
				// A result set where none was expected: not ours to relay.
				l.bc.MarkBroken()
				if failed == nil {
					failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
						Message: "keyshard: node " + l.bc.Node() + ": unexpected result set in a write fan-out"}
				}
				more = false
			}
		}
	}
	if failed != nil {
		s.writeError(failed)
		return failed
	}
	s.rowCount = int64(affected)
	s.tr.changed += affected
	if insertID != 0 {
		s.lastInsertID = insertID
	}
	s.buf = wire.AppendOK(s.buf[:0], affected, insertID, s.status(), warnings, "")
	return s.pkt.WritePacket(s.buf)
}

// explainShard answers EXPLAIN SHARD <statement> with the node, sub-table
// and SQL each part would run, without running anything.
func (s *Session) explainShard(stmt string) error {
	stmt = strings.TrimRight(stmt, "; \t\r\n")
	if s.route == nil {
		return s.fail(newErr(errNoSchema, "keyshard: user '%s' has no schema in schema_list", s.user))
	}
	info := router.Classify(stmt)
	var rows [][]string
	if n, ok := s.hintNode(stmt[:info.Start]); ok {
		rows = append(rows, []string{n.Name, "", stmt})
	} else {
		pl, lits, err := s.route.Plan(s.getParser(), stmt, s.db, info.Kind)
		if err != nil {
			return s.fail(err)
		}
		if pl.Kind == router.PlanDefault {
			rows = append(rows, []string{s.route.Default, "", stmt})
		} else {
			rt, err := pl.Bind(lits, leadingComments(stmt, info))
			if err != nil {
				return s.fail(err)
			}
			if rt.Merge != "" {
				return s.fail(mergeErr(rt, pl))
			}
			for _, e := range rt.Explain() {
				rows = append(rows, []string{e[0], e[1], e[2]})
			}
		}
	}
	return s.writeResultSet([]string{"node", "sub_table", "sql"}, rows)
}

// writeResultSet sends a small text result set made by keyshard itself.
func (s *Session) writeResultSet(cols []string, rows [][]string) error {
	clientEOF := s.caps&mysql.CLIENT_DEPRECATE_EOF == 0
	s.buf = mysql.AppendLengthEncodedInteger(s.buf[:0], uint64(len(cols)))
	if err := s.pkt.WritePacket(s.buf); err != nil {
		return err
	}
	for _, c := range cols {
		b := s.buf[:0]
		b = wire.AppendLenEncString(b, "def")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, "")
		b = wire.AppendLenEncString(b, c)
		b = wire.AppendLenEncString(b, c)
		b = append(b, 0x0c, 45, 0) // utf8mb4_general_ci
		b = append(b, 0, 0, 1, 0)  // column length 65536
		b = append(b, mysql.MYSQL_TYPE_VAR_STRING, 0, 0, 0x1f, 0, 0)
		s.buf = b
		if err := s.pkt.WritePacket(s.buf); err != nil {
			return err
		}
	}
	if clientEOF {
		s.buf = wire.AppendEOF(s.buf[:0], 0, s.status())
		if err := s.pkt.WritePacket(s.buf); err != nil {
			return err
		}
	}
	for _, r := range rows {
		b := s.buf[:0]
		for _, v := range r {
			b = wire.AppendLenEncString(b, v)
		}
		s.buf = b
		if err := s.pkt.WritePacket(s.buf); err != nil {
			return err
		}
	}
	s.appendResultEnd(0)
	return s.pkt.WritePacket(s.buf)
}

// cutPrefixFold returns s after prefix (ASCII, lower case) matched without
// regard to case, a space in prefix matching any run of blanks.
func cutPrefixFold(s, prefix string) (string, bool) {
	i := 0
	for j := 0; j < len(prefix); j++ {
		if i >= len(s) {
			return "", false
		}
		if prefix[j] == ' ' {
			if !isBlank(s[i]) {
				return "", false
			}
			for i < len(s) && isBlank(s[i]) {
				i++
			}
			continue
		}
		if s[i]|0x20 != prefix[j] {
			return "", false
		}
		i++
	}
	return s[i:], true
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
