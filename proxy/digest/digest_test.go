package digest

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	if bucket(0) != 0 || bucket(firstBound-1) != 0 || bucket(firstBound) != 1 {
		t.Fatalf("first buckets: %d %d %d", bucket(0), bucket(firstBound-1), bucket(firstBound))
	}
	for i := 1; i < Buckets-1; i++ {
		lo, hi := bucketLow(i), bucketLow(i+1)
		if hi <= lo {
			t.Fatalf("bucket %d: [%d, %d) is empty", i, lo, hi)
		}
		if bucket(lo) != i || bucket(hi-1) != i || bucket(hi) != i+1 {
			t.Fatalf("bucket %d [%d, %d): bucket(lo)=%d bucket(hi-1)=%d bucket(hi)=%d", i, lo, hi, bucket(lo), bucket(hi-1), bucket(hi))
		}
		// Half an octave: the bounds grow by 1.5 or 4/3.
		if r := float64(hi) / float64(lo); r < 1.3 || r > 1.51 {
			t.Fatalf("bucket %d ratio %.2f", i, r)
		}
	}
	if got := bucket(int64(time.Hour)); got != Buckets-1 {
		t.Fatalf("an hour lands in bucket %d", got)
	}
	if lo := time.Duration(bucketLow(Buckets - 1)); lo < 60*time.Second || lo > 80*time.Second {
		t.Fatalf("last bucket starts at %v", lo)
	}
}

func sample(d time.Duration) *Sample {
	return &Sample{Start: time.Now(), Total: d}
}

func TestRecordAndQuantiles(t *testing.T) {
	d := New(10)
	e := d.Lookup([]byte("db\x00select * from t where id = ?"))
	// 98 fast statements at 100 µs, one at 10 ms and one at 1 s.
	for range 98 {
		e.Record(sample(100 * time.Microsecond))
	}
	e.Record(&Sample{Start: time.Now(), Total: 10 * time.Millisecond, Rows: 5, Bytes: 100, Err: true,
		Stages: [NumStages]time.Duration{Parse: time.Millisecond, Backend: 8 * time.Millisecond, Relay: time.Millisecond}})
	e.Record(&Sample{Start: time.Now(), Total: time.Second, Affected: 3})
	st := e.Stats()
	if st.Count != 100 || st.Errors != 1 || st.Rows != 5 || st.Affected != 3 || st.Bytes != 100 {
		t.Fatalf("counters: %+v", st)
	}
	if st.Schema != "db" || st.Text != "select * from t where id = ?" || len(st.ID) != 16 {
		t.Fatalf("identity: %q %q %q", st.Schema, st.Text, st.ID)
	}
	if st.Min != 100*time.Microsecond || st.Max != time.Second {
		t.Fatalf("min %v max %v", st.Min, st.Max)
	}
	wantTotal := 98*100*time.Microsecond + 10*time.Millisecond + time.Second
	if st.Total != wantTotal || st.Avg != wantTotal/100 {
		t.Fatalf("total %v avg %v", st.Total, st.Avg)
	}
	// The histogram is half-octave: an estimate within 50 % of the truth.
	if st.P50 < 67*time.Microsecond || st.P50 > 150*time.Microsecond {
		t.Fatalf("p50 %v, want about 100µs", st.P50)
	}
	if st.P99 < 6*time.Millisecond || st.P99 > 15*time.Millisecond {
		t.Fatalf("p99 %v, want about 10ms", st.P99)
	}
	if st.Stages[Parse] != time.Millisecond || st.Stages[Backend] != 8*time.Millisecond || st.Stages[Route] != 0 {
		t.Fatalf("stages %v", st.Stages)
	}
}

func TestQuantileSingleValue(t *testing.T) {
	e := New(1).Lookup([]byte("\x00select 1"))
	for range 10 {
		e.Record(sample(3 * time.Millisecond))
	}
	st := e.Stats()
	if st.P50 != 3*time.Millisecond || st.P99 != 3*time.Millisecond {
		t.Fatalf("one value: p50 %v p99 %v (clamped to min/max)", st.P50, st.P99)
	}
}

func TestBoundedAndReset(t *testing.T) {
	d := New(2)
	a := d.Lookup([]byte("x\x00a"))
	b := d.Lookup([]byte("x\x00b"))
	c := d.Lookup([]byte("x\x00c"))
	if a == b || c == a || c == b || c.Text != OtherText {
		t.Fatalf("third shape should count as other: %q", c.Text)
	}
	if d.Lookup([]byte("x\x00a")) != a {
		t.Fatal("lookup of a known shape gave another entry")
	}
	c.Record(sample(time.Millisecond))
	if all := d.All(); len(all) != 3 || all[2].Text != OtherText || all[2].Count != 1 || d.Len() != 2 {
		t.Fatalf("all: %+v len %d", all, d.Len())
	}
	r := &Ref{Key: "x\x00a"}
	if d.Get(r) != a {
		t.Fatal("ref did not find a")
	}
	before := d.Since()
	d.Reset()
	if len(d.All()) != 0 || d.Len() != 0 || !d.Since().After(before) && !d.Since().Equal(before) {
		t.Fatalf("after reset: %d digests", len(d.All()))
	}
	if e := d.Get(r); e == a || e == nil || e.Text != "a" {
		t.Fatalf("ref kept the entry of the dropped table")
	}
	d.SetSize(0)
	if d.On() || d.Lookup([]byte("x\x00a")) != nil || d.Get(r) != nil {
		t.Fatal("size 0 should turn digests off")
	}
}

func TestKeyCut(t *testing.T) {
	long := "db\x00select '" + strings.Repeat("é", MaxText) + "'"
	k := Key([]byte(long))
	if len(k)-3 > MaxText || len(k)-3 < MaxText-1 {
		t.Fatalf("cut to %d bytes of text", len(k)-3)
	}
	if !strings.HasPrefix(long, string(k)) || strings.ContainsRune(string(k), '\uFFFD') {
		t.Fatal("cut inside a character")
	}
	short := []byte("db\x00select 1")
	if string(Key(short)) != string(short) {
		t.Fatal("short key changed")
	}
	if ID(string(k)) == ID(string(short)) || len(Key([]byte(long))) != len(k) {
		t.Fatal("IDs of different keys are equal, or Key is not stable")
	}
}

func TestSortAndTop(t *testing.T) {
	d := New(10)
	d.Lookup([]byte("\x00slow")).Record(sample(time.Second))
	for range 5 {
		d.Lookup([]byte("\x00often")).Record(sample(time.Millisecond))
	}
	top, ok := d.Top(1, "total")
	if !ok || len(top) != 1 || top[0].Text != "slow" {
		t.Fatalf("top by total: %+v", top)
	}
	top, _ = d.Top(0, "count")
	if len(top) != 2 || top[0].Text != "often" {
		t.Fatalf("top by count: %+v", top)
	}
	if _, ok := d.Top(1, "nonsense"); ok {
		t.Fatal("unknown order accepted")
	}
}

// TestConcurrent records from many goroutines (run with -race): every
// statement is counted once.
func TestConcurrent(t *testing.T) {
	d := New(100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				key := []byte("db\x00q" + string(rune('a'+(i+g)%4)))
				d.Lookup(key).Record(sample(time.Duration(i) * time.Microsecond))
			}
		}()
		if g == 4 {
			_ = d.All()
		}
	}
	wg.Wait()
	var n uint64
	for _, st := range d.All() {
		n += st.Count
	}
	if n != 8000 || d.Len() != 4 {
		t.Fatalf("counted %d statements in %d digests, want 8000 in 4", n, d.Len())
	}
}

func BenchmarkLookupRecord(b *testing.B) {
	d := New(1000)
	key := []byte("sbtest\x00SELECT c FROM sbtest1 WHERE id=?")
	s := sample(100 * time.Microsecond)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d.Lookup(key).Record(s)
		}
	})
}

func TestRecordFetch(t *testing.T) {
	e := New(4).Lookup([]byte("db\x00select * from t"))
	e.Record(&Sample{Start: time.Now(), Total: time.Millisecond, Rows: 0, Bytes: 10})
	e.RecordFetch(&Sample{Start: time.Now(), Total: 3 * time.Millisecond, Rows: 5, Bytes: 100,
		Stages: [NumStages]time.Duration{Relay: 3 * time.Millisecond}})
	st := e.Stats()
	if st.Count != 1 || st.Rows != 5 || st.Bytes != 110 || st.Total != 4*time.Millisecond || st.Max != time.Millisecond ||
		st.Stages[Relay] != 3*time.Millisecond {
		t.Fatalf("after a fetch: %+v", st)
	}
}

// TestRefOther: a statement that found the table full is not stuck in
// "other" once there is room.
func TestRefOther(t *testing.T) {
	d := New(1)
	d.Lookup([]byte("\x00a"))
	r := &Ref{Key: "\x00b"}
	if e := d.Get(r); !e.IsOther() {
		t.Fatal("want other with the table full")
	}
	d.SetSize(2)
	if e := d.Get(r); e.IsOther() || e.Text != "b" {
		t.Fatalf("after raising the size: %q", e.Text)
	}
}

// TestBoundUnderConcurrency: many sessions adding new shapes at once do not
// push the table past its size.
func TestBoundUnderConcurrency(t *testing.T) {
	d := New(10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				d.Lookup([]byte("\x00q" + strconv.Itoa(g*1000+i))).Record(sample(time.Microsecond))
			}
		}()
	}
	wg.Wait()
	var n uint64
	all := d.All()
	for _, st := range all {
		n += st.Count
	}
	if d.Len() != 10 || len(all) != 11 || n != 1600 {
		t.Fatalf("%d digests (%d rows), %d statements; want 10 + other, 1600", d.Len(), len(all), n)
	}
}
