package hold

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var inTx, idle, later Mark
	inTx.Set(true)
	g := Close([]string{"Db.T"}, []*Mark{&inTx, &idle, &later})
	if !g.Touches("db", "t") || g.Touches("db", "u") {
		t.Fatal("Touches")
	}
	// The transaction open at Close passes; others wait.
	if !g.Passes(&inTx) || g.Passes(&idle) {
		t.Fatalf("Passes: in a transaction %v, idle %v", g.Passes(&inTx), g.Passes(&idle))
	}
	// A transaction begun after Close waits too.
	later.Set(true)
	if g.Passes(&later) {
		t.Fatal("a transaction begun after Close passes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := g.Drained(ctx); !errors.Is(err, context.DeadlineExceeded) || g.Busy() != 1 {
		t.Fatalf("Drained with a transaction open: %v, busy %d", err, g.Busy())
	}
	cancel()
	// Its transaction ends: drained; a new one of the same session waits.
	inTx.Set(false)
	if err := g.Drained(context.Background()); err != nil {
		t.Fatal(err)
	}
	inTx.Set(true)
	if g.Passes(&inTx) {
		t.Fatal("the session's next transaction passes")
	}
	done := make(chan error)
	go func() { done <- g.Wait(context.Background(), time.Minute) }()
	for g.Held() == 0 {
		time.Sleep(time.Millisecond)
	}
	g.Open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !g.Passes(&idle) {
		t.Fatal("an open gate holds")
	}
	g.Open()
	if err := Close(nil, nil).Wait(context.Background(), time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait past its bound: %v", err)
	}
}

func TestMarkEpoch(t *testing.T) {
	var m Mark
	m.Set(false)
	if e, in := m.state(); e != 0 || in {
		t.Fatalf("%d %v", e, in)
	}
	m.Set(true)
	m.Set(true)
	m.Set(false)
	m.Set(false)
	if e, in := m.state(); e != 1 || in {
		t.Fatalf("after one transaction: epoch %d, in %v", e, in)
	}
}
