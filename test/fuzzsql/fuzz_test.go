package fuzzsql

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// TestFuzzSQL runs the differential fuzzer. Without flags it runs a few
// fixed seeds, fuzzsql.statements statements each (make test). Flags (or
// their environment variables):
//
//	-fuzzsql.seed N        (KS_FUZZSQL_SEED) the first seed; 0: the fixed ones
//	-fuzzsql.time D        (KS_FUZZSQL_TIME) run seed after seed for D
//	-fuzzsql.statements N  (KS_FUZZSQL_STATEMENTS) statements per seed
//
// Each seed is a run of its own: a new schema, new rows, a new keyshard,
// and statements generated from the seed alone, so that
// -fuzzsql.seed N -fuzzsql.statements M replays it.
var (
	flagSeed       = flag.Uint64("fuzzsql.seed", 0, "first seed (0: the fixed seeds of make test)")
	flagTime       = flag.Duration("fuzzsql.time", 0, "run seed after seed for this long")
	flagStatements = flag.Int("fuzzsql.statements", 0, "statements per seed (default 500)")
)

// defaultSeeds are make test's: fixed, so that its run is the same every time.
var defaultSeeds = []uint64{1, 2, 3}

const defaultStatements = 500

func envOr[T any](name string, v T, parse func(string) (T, error)) T {
	if s := os.Getenv(name); s != "" {
		x, err := parse(s)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", name, s, err))
		}
		return x
	}
	return v
}

// tally counts what a run saw.
type tally struct {
	statements, same, refused, different, prepared int
	txns, warned, showWarnOne, showWarnMulti       int // transactions; statements whose warnings were compared; of those, SHOW WARNINGS differing on one and on several sub-tables (known)
	warnIgnore1526                                 int // of those, INSERT IGNORE leaving out rows no sub-table holds without their warning (known)
	reasons                                        map[string]int
	bothErr                                        map[string]int // same error on both sides, by errno
	diffs                                          []string
}

func (t *tally) add(o tally) {
	t.statements += o.statements
	t.same += o.same
	t.refused += o.refused
	t.different += o.different
	t.prepared += o.prepared
	t.txns += o.txns
	t.warned += o.warned
	t.showWarnOne += o.showWarnOne
	t.showWarnMulti += o.showWarnMulti
	t.warnIgnore1526 += o.warnIgnore1526
	for k, v := range o.reasons {
		t.reasons[k] += v
	}
	for k, v := range o.bothErr {
		t.bothErr[k] += v
	}
	t.diffs = append(t.diffs, o.diffs...)
}

func (t *tally) summary() string {
	var rs []string
	for _, k := range slices.Sorted(maps.Keys(t.reasons)) {
		rs = append(rs, fmt.Sprintf("%d %q", t.reasons[k], k))
	}
	return fmt.Sprintf("statements %d (%d prepared, %d transactions, %d with warnings compared: SHOW WARNINGS differing %d on one sub-table, %d on several; INSERT IGNORE without the 1526 warnings %d), same %d (the same error: %v), refused %d, different %d; refused by reason: [%s]",
		t.statements, t.prepared, t.txns, t.warned, t.showWarnOne, t.showWarnMulti, t.warnIgnore1526, t.same, t.bothErr, t.refused, t.different, strings.Join(rs, ", "))
}

func TestFuzzSQL(t *testing.T) {
	seed := envOr("KS_FUZZSQL_SEED", *flagSeed, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
	budget := envOr("KS_FUZZSQL_TIME", *flagTime, time.ParseDuration)
	n := envOr("KS_FUZZSQL_STATEMENTS", *flagStatements, strconv.Atoi)
	if n <= 0 {
		n = defaultStatements
	}
	seeds := defaultSeeds
	if seed != 0 {
		seeds = []uint64{seed}
	}
	total := tally{reasons: map[string]int{}, bothErr: map[string]int{}}
	start := time.Now()
	nseeds := 0
	for i := 0; ; i++ {
		var s uint64
		switch {
		case i < len(seeds):
			s = seeds[i]
		case budget > 0 && time.Since(start) < budget:
			s = seeds[len(seeds)-1] + uint64(i-len(seeds)+1)
		default:
			i = -1
		}
		if i < 0 {
			break
		}
		var one tally
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			one = runSeed(t, s, n)
			t.Logf("seed %d: %s", s, one.summary())
		})
		total.add(one)
		nseeds++
		if one.statements == 0 {
			t.Fatalf("seed %d did not start (see above): stopping", s)
		}
		if budget == 0 && i == len(seeds)-1 {
			break
		}
	}
	t.Logf("fuzzsql: %d seeds in %v: %s", nseeds, time.Since(start).Round(time.Second), total.summary())
	fmt.Printf("fuzzsql summary: %s\n", total.summary())
}

// run is one seed's state.
type run struct {
	t      *testing.T
	seed   uint64
	schema *schema
	ks     *sql.DB
	ref    *sql.DB
	ksMin  *sql.DB // database fzmin, where differences are minimized
	refMin *sql.DB
	rules  string
	g      *gen
	// Warnings (warn_test.go): go-mysql connections, and how many
	// statements on one and on several sub-tables listed other warnings
	// than the reference in SHOW WARNINGS (known: counted, not failed).
	wks, wref                  *client.Conn
	showWarnOne, showWarnMulti int
	warnIgnore1526             int // INSERT IGNORE rows no sub-table holds: no warning (known)
}

func runSeed(t *testing.T, seed uint64, n int) tally {
	res := tally{reasons: map[string]int{}, bothErr: map[string]int{}}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	sch := newSchema(r)
	freshDB(t, "fz", basePort, basePort+1)
	freshDB(t, "fzmin", basePort, basePort+1)
	freshDB(t, "fzref", refPort)
	freshDB(t, "fzminref", refPort)
	rules := sch.rules("fz") + sch.rules("fzmin")
	addr := startProxy(t, rules)
	ru := &run{t: t, seed: seed, schema: sch, rules: rules,
		ks:     openDB(t, addr, "fz"),
		ref:    openDB(t, fmt.Sprintf("127.0.0.1:%d", refPort), "fzref"),
		ksMin:  openDB(t, addr, "fzmin"),
		refMin: openDB(t, fmt.Sprintf("127.0.0.1:%d", refPort), "fzminref"),
	}
	ru.g = &gen{r: r, s: sch, v: newValueGen(r), rows: map[string]int{}}
	ru.load(r)
	ru.openWarnConns(addr)
	for i := 0; i < n; {
		if ru.g.chance(txnPct) {
			i += ru.txn(&res, i)
			continue
		}
		s := ru.g.next()
		prepared := r.IntN(4) == 0
		ru.step(&res, i, &s, prepared, side{ks: ru.ks, ref: ru.ref, warn: !prepared && r.IntN(100) < warnPct})
		i++
	}
	res.showWarnOne, res.showWarnMulti, res.warnIgnore1526 = ru.showWarnOne, ru.showWarnMulti, ru.warnIgnore1526
	for _, tb := range sch.tables {
		if why := ru.compareTable(tb); why != "" {
			t.Errorf("seed %d, at the end: %s", seed, why)
		}
	}
	return res
}

// side is where a statement runs: the pools, or inside a transaction one
// connection on each side.
type side struct {
	ks, ref querier
	tx      *txLog // the open transaction, or nil
	warn    bool   // compare warnings too (text protocol, autocommit)
}

// step runs statement i on both sides, compares, and counts it in res.
func (ru *run) step(res *tally, i int, s *stmt, prepared bool, on side) {
	t, seed := ru.t, ru.seed
	if prepared {
		res.prepared++
	}
	res.statements++
	// What a minimal reproduction starts from: the rows of the
	// tables the statement names, before it runs (a read's only once it
	// differs: it changed nothing).
	before := map[string][][]string{}
	snapshot := func() {
		for _, tb := range ru.tablesOf(s) {
			before[tb.name] = fetch(context.Background(), on.ref, false, tableQuery(tb)).rows
		}
	}
	if on.tx == nil && s.write {
		snapshot()
	}
	var why string
	var ks, ref answer
	if on.warn {
		res.warned++
		why, ks, ref = ru.checkWarn(s)
	} else {
		why, ks, ref = check(on.ks, on.ref, s, prepared)
	}
	switch {
	case why == "" && refusal(ks.err) != "" && errno(ref.err) != erNotSupportedYet:
		res.refused++
		res.reasons[refusal(ks.err)]++
	case why == "":
		res.same++
		if ks.err != nil {
			res.bothErr[fmt.Sprint(errno(ks.err))]++
		}
		if os.Getenv("KS_FUZZSQL_TRACE") != "" {
			t.Logf("%d: %s -> %v", i, s.text, ks.err)
		}
	default:
		res.different++
		text, how := s.text, "text protocol"
		if prepared {
			text, how = s.ptext, fmt.Sprintf("binary protocol, args %v", s.args)
		}
		msg := fmt.Sprintf("seed %d, statement %d (%s): %s\n    %s\n    reference: %s\n    keyshard:  %s",
			seed, i, how, why, text, ref, ks)
		if on.tx != nil {
			msg += on.tx.String()
			on.tx.failed = true
		} else {
			if !s.write {
				snapshot()
			}
			msg += ru.reproduce(s, prepared, fmt.Sprintf("seed %d, statement %d: %s", seed, i, why), before)
		}
		res.diffs = append(res.diffs, msg)
		t.Error(msg)
	}
	if on.tx != nil {
		on.tx.add(s, prepared)
	}
	if s.write {
		why2, n := compareTableRows(on.ks, on.ref, s.table)
		ru.g.rows[s.table.name] = n
		if why2 != "" {
			msg := fmt.Sprintf("seed %d, statement %d: after %s\n    %s", seed, i, s.text, why2)
			if why == "" {
				res.different++
				res.same--
				if on.tx != nil {
					msg += on.tx.String()
				} else {
					msg += ru.reproduce(s, prepared, fmt.Sprintf("seed %d, statement %d: %s", seed, i, "the table differs after it"), before)
				}
			}
			res.diffs = append(res.diffs, msg)
			t.Error(msg)
			if on.tx != nil {
				on.tx.failed = true
			} else {
				ru.resync(s.table)
			}
		}
	}
}

// reproduce minimizes a difference and says where its case went.
func (ru *run) reproduce(s *stmt, prepared bool, found string, before map[string][][]string) string {
	c, ok := ru.minimize(s, prepared, found, before)
	if !ok {
		return "\n    (it does not reproduce on its own rows: no regression case written)"
	}
	how := c.Stmt.Text
	if c.Binary {
		how = fmt.Sprintf("%s (prepared, args %v)", c.Stmt.PText, c.Args)
	}
	return fmt.Sprintf("\n    minimal reproduction (written to %s):\n      %s\n      %s\n      %s",
		regressionsFile, strings.Join(c.KSSetup, "\n      "), strings.Join(c.Rows, "\n      "), how)
}

// check runs s on both sides and says why the answers differ, or "".
// A write keyshard refuses does not run on the reference.
func check(ksDB, refDB querier, s *stmt, prepared bool) (why string, ks, ref answer) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, args := s.text, []any(nil)
	if prepared {
		q, args = s.ptext, s.args
	}
	if s.write {
		ks = execute(ctx, ksDB, prepared, q, args...)
		if refusal(ks.err) != "" {
			return "", ks, ref
		}
		ref = execute(ctx, refDB, prepared, q, args...)
		return compareWrite(ks, ref), ks, ref
	}
	ks = fetch(ctx, ksDB, prepared, q, args...)
	if refusal(ks.err) != "" {
		return "", ks, ref
	}
	ref = fetch(ctx, refDB, prepared, q, args...)
	var full answer
	if s.limit && ks.err == nil && ref.err == nil {
		fq := s.full
		if prepared {
			fq = s.fullP
		}
		fargs := args
		if prepared {
			fargs = args[:s.nfull]
		}
		full = fetch(ctx, refDB, prepared, fq, fargs...)
	}
	return compareRead(s, ks, ref, full), ks, ref
}

// tableQuery reads a whole table in key order.
func tableQuery(t *table) string {
	return "SELECT * FROM " + t.name + " ORDER BY " + t.key().name
}

// compareTable compares t's rows through keyshard with the reference's,
// and notes the reference's row count for the generator.
func (ru *run) compareTable(t *table) string {
	ru.g.rows[t.name] = len(fetch(context.Background(), ru.ref, false, tableQuery(t)).rows)
	return compareTableOn(ru.ks, ru.ref, t)
}

// resync makes keyshard's copy of t the reference's again, after a
// difference.
func (ru *run) resync(t *table) {
	ctx := context.Background()
	ref := fetch(ctx, ru.ref, false, tableQuery(t))
	if _, err := ru.ks.ExecContext(ctx, "DELETE FROM "+t.name); err != nil {
		ru.t.Fatalf("resync %s: %v", t.name, err)
	}
	for _, q := range insertRows(t, ref.rows) {
		if _, err := ru.ks.ExecContext(ctx, q); err != nil {
			ru.t.Fatalf("resync %s: %v", t.name, err)
		}
	}
}

// insertRows turns fetched rows of t back into INSERT statements.
func insertRows(t *table, rows [][]string) []string {
	var out []string
	for start := 0; start < len(rows); start += 100 {
		var b strings.Builder
		b.WriteString("INSERT INTO " + t.name + " (" + names(t.cols) + ") VALUES ")
		for i, row := range rows[start:min(start+100, len(rows))] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for j, v := range row {
				if j > 0 {
					b.WriteString(", ")
				}
				if v == nullText {
					b.WriteString("NULL")
				} else {
					b.WriteString("'" + strings.ReplaceAll(v, "'", "''") + "'")
				}
			}
			b.WriteString(")")
		}
		out = append(out, b.String())
	}
	return out
}

// load creates the tables on both sides and fills them with the same rows.
func (ru *run) load(r *rand.Rand) {
	t := ru.t
	for _, tb := range ru.schema.tables {
		if _, err := ru.ks.Exec(tb.ksDDL); err != nil {
			t.Fatalf("keyshard: %s: %v", tb.ksDDL, err)
		}
		if _, err := ru.ref.Exec(tb.refDDL); err != nil {
			t.Fatalf("reference: %s: %v", tb.refDDL, err)
		}
		nrows := 20 + r.IntN(100)
		if tb.name == "g" {
			nrows = 12
		}
		for start := 0; start < nrows; start += 40 {
			var b strings.Builder
			b.WriteString("INSERT IGNORE INTO " + tb.name + " (" + names(tb.cols) + ") VALUES ")
			for i := range min(40, nrows-start) {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(" + strings.Join(ru.g.v.row(tb, false), ", ") + ")")
			}
			for _, db := range []*sql.DB{ru.ks, ru.ref} {
				if _, err := db.Exec(b.String()); err != nil {
					t.Fatalf("loading %s: %v\n%s", tb.name, err, b.String())
				}
			}
		}
		if why := ru.compareTable(tb); why != "" {
			t.Fatalf("after loading: %s", why)
		}
	}
}
