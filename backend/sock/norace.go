//go:build !race

package sock

import (
	"syscall"
	"unsafe"
)

// sysRead reads b (not empty) from fd with a raw system call.
func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

// sysWrite writes b (not empty) to fd with a raw system call.
func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}
