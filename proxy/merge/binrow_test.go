package merge

import (
	"bytes"
	"testing"

	"github.com/keyshard/keyshard/backend/wire"
)

// Text values become the binary protocol's row: NULL bitmap, then each
// value encoded for its type.
func TestAppendBinaryRow(t *testing.T) {
	cols := []Column{{Type: wire.TypeLong}, {Type: wire.TypeVarString}, {Type: wire.TypeDatetime}, {Type: wire.TypeTiny, Flags: flagUnsigned}, {Type: wire.TypeNewDecimal}}
	got := AppendBinaryRow(nil, [][]byte{[]byte("-2"), nil, []byte("2020-01-02 03:04:05"), []byte("200"), []byte("1.50")}, cols)
	want := []byte{0, 1 << 3, // header, NULL bitmap: column 1 (bit 3)
		0xfe, 0xff, 0xff, 0xff, // -2
		7, 0xe4, 0x07, 1, 2, 3, 4, 5, // datetime
		200,
		4, '1', '.', '5', '0'}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}
