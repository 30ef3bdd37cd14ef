package frontend

import (
	"bytes"
	"crypto/sha1"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// From a client's mysql_native_password answer and the server's stored
// hash, NativeKey gives back SHA1(password), which answers any other
// scramble as the client would; a wrong password gives nothing.
func TestNativeKey(t *testing.T) {
	pw := []byte("s3cret pässword")
	stage1 := sha1.Sum(pw)
	hash := sha1.Sum(stage1[:])
	scramble := []byte("abcdefghij0123456789")
	key, ok := NativeKey(scramble, mysql.CalcNativePassword(scramble, pw), hash[:])
	if !ok || !bytes.Equal(key, stage1[:]) {
		t.Fatalf("NativeKey = %x %v, want %x", key, ok, stage1)
	}
	if _, ok := NativeKey(scramble, mysql.CalcNativePassword(scramble, []byte("wrong")), hash[:]); ok {
		t.Error("a wrong password recovered a key")
	}
	other := []byte("ZYXWVUTSRQ9876543210")
	if _, ok := NativeKey(other, mysql.CalcNativePassword(scramble, pw), hash[:]); ok {
		t.Error("an answer to another scramble recovered a key")
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, make([]byte, 21)} {
		if _, ok := NativeKey(scramble, bad, hash[:]); ok {
			t.Errorf("token %x accepted", bad)
		}
	}
	// An account without a password: only an empty answer.
	u := User{Hashed: true}
	if k, ok := u.checkHashed(nil, scramble); !ok || k == nil || len(k) != 0 {
		t.Errorf("no password: %x %v", k, ok)
	}
	if _, ok := u.checkHashed([]byte{1}, scramble); ok {
		t.Error("no password: a non-empty answer accepted")
	}
}
