package admin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/reshard"
)

// parseReshard reads ADMIN RESHARD START [db.table, ...] | STATUS |
// CANCEL (toks after ADMIN RESHARD).
func parseReshard(toks []token) (command, error) {
	const want = "want ADMIN RESHARD START [db.table, ...], ADMIN RESHARD STATUS, ADMIN RESHARD CANCEL or ADMIN RESHARD COMPLETE"
	if len(toks) == 0 || toks[0].quoted {
		return command{}, syntaxErr(want)
	}
	op := strings.ToLower(toks[0].text)
	switch op {
	case "status", "cancel", "complete":
		if len(toks) != 1 {
			return command{}, syntaxErr(want)
		}
		return command{region: "reshard", vals: []string{op}}, nil
	case "start":
		vals := []string{op}
		for i, t := range toks[1:] {
			if i%2 == 1 {
				if t.quoted || t.text != "," {
					return command{}, syntaxErr("want a comma between the tables of ADMIN RESHARD START")
				}
				continue
			}
			if t.text == "," || !strings.Contains(t.text, ".") {
				return command{}, syntaxErr("ADMIN RESHARD START takes tables as db.table, got %q", t.text)
			}
			vals = append(vals, strings.ReplaceAll(t.text, "`", ""))
		}
		return command{region: "reshard", vals: vals}, nil
	}
	return command{}, syntaxErr(want)
}

// reshardCmd runs a parsed ADMIN RESHARD.
func reshardCmd(ctl control.Controls, vals []string) (*proxy.AdminResult, error) {
	switch vals[0] {
	case "start":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lines, err := ctl.ReshardStart(ctx, vals[1:])
		if err != nil {
			return nil, err
		}
		rows := make([][]string, 0, len(lines))
		for _, l := range lines {
			rows = append(rows, []string{l})
		}
		return table([]string{"reshard started"}, rows), nil
	case "cancel":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ctl.ReshardCancel(ctx); err != nil {
			return nil, err
		}
		return &proxy.AdminResult{Info: "reshard cancelled; the sub-tables it created are dropped"}, nil
	case "complete":
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dropped, err := ctl.ReshardComplete(ctx)
		if err != nil {
			return nil, err
		}
		rows := make([][]string, 0, len(dropped))
		for _, d := range dropped {
			rows = append(rows, []string{d})
		}
		return table([]string{"dropped"}, rows), nil
	}
	return reshardStatus(ctl), nil
}

// reshardStatus answers SHOW RESHARD STATUS: one row per table of the
// workflow that runs or ran last.
func reshardStatus(ctl control.Controls) *proxy.AdminResult {
	cols := []string{"table", "phase", "rows_copied", "changes_applied", "started", "elapsed", "cutover_tries", "last_hold", "error", "plan"}
	st, ok := ctl.ReshardStatus()
	if !ok {
		return table(cols, nil)
	}
	elapsed := time.Since(st.Started)
	if st.Phase == reshard.Switched || st.Phase == reshard.Complete {
		elapsed = st.Switched.Sub(st.Started)
	}
	msg := st.Error
	if len(st.Diffs) > 0 {
		msg += " | " + strings.Join(st.Diffs, " | ")
	}
	var rows [][]string
	for i, t := range st.Tables {
		rows = append(rows, []string{t, string(st.Phase), strconv.FormatInt(st.Copied, 10), strconv.FormatInt(st.Applied, 10),
			st.Started.UTC().Format(time.RFC3339), elapsed.Round(time.Millisecond).String(), strconv.Itoa(st.Tries),
			st.Held.Round(time.Microsecond).String(), msg, fmt.Sprint(st.Plans[i])})
	}
	return table(cols, rows)
}
