//go:build race

package sock

import "syscall"

// Under the race detector, reads and writes go through package syscall's
// Read and Write: they tell the detector that bytes passed through the
// kernel (syscall's ioSync), as net.Conn's do, so that what a goroutine did
// before writing happens before what the reader of those bytes does after.
// They enter the scheduler's syscall state; race builds are for tests.

func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return n, errnoOf(err)
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return n, errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
