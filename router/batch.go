package router

import (
	"errors"
	"strings"
)

// SplitBatch splits a multi-statement batch into its statements, as the
// parser reads them: each is the batch's own text of one statement (its
// comments, executable ones included), without the ';' that ends it. A
// batch the parser cannot read is an error: keyshard cannot tell where its
// statements end (a compound statement's body holds ';' too).
func (p *Parser) SplitBatch(sql string) ([]string, error) {
	stmts, err := p.Parse(sql)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(stmts))
	pos := 0
	for _, st := range stmts {
		// Each statement's text is its piece of the batch, in order (with
		// its ';', maybe not all the blanks before it).
		text := st.Text()
		i := strings.Index(sql[pos:], text)
		if i < 0 {
			return nil, errors.New("cannot place a statement in the batch")
		}
		pos += i + len(text)
		text = strings.TrimRight(text, "; \t\r\n")
		if strings.TrimSpace(text) == "" {
			continue
		}
		out = append(out, text)
	}
	if len(out) == 0 {
		return nil, errors.New("no statement in the batch")
	}
	return out, nil
}
