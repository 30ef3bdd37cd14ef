package backend

import (
	"bytes"
	"crypto/sha1"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// NativeToken from SHA1(password) is the answer the password gives.
func TestNativeToken(t *testing.T) {
	pw := []byte("s3cret")
	key := sha1.Sum(pw)
	for _, scramble := range [][]byte{[]byte("abcdefghij0123456789"), bytes.Repeat([]byte{'x'}, 20)} {
		if got, want := NativeToken(key[:], scramble), mysql.CalcNativePassword(scramble, pw); !bytes.Equal(got, want) {
			t.Errorf("NativeToken(%q) = %x, want %x", scramble, got, want)
		}
	}
	o := Options{NativeKey: key[:]}
	if got := o.authResponse(mysql.AUTH_NATIVE_PASSWORD, []byte("abcdefghij0123456789")); !bytes.Equal(got, mysql.CalcNativePassword([]byte("abcdefghij0123456789"), pw)) {
		t.Errorf("authResponse with a key = %x", got)
	}
	if got := o.authResponse(mysql.AUTH_CACHING_SHA2_PASSWORD, []byte("abcdefghij0123456789")); got != nil {
		t.Errorf("caching_sha2 with only a key = %x, want nothing", got)
	}
	empty := Options{NativeKey: []byte{}}
	if got := empty.authResponse(mysql.AUTH_NATIVE_PASSWORD, []byte("abcdefghij0123456789")); got != nil {
		t.Errorf("no password = %x", got)
	}
}
