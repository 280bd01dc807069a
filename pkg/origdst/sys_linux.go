package origdst

import (
	"os"
	"syscall"
	"unsafe"
)

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

func getsockopt(fd uintptr, level, name int, val unsafe.Pointer, size *uint32) error {
	_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(name), uintptr(val), uintptr(unsafe.Pointer(size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func fileFromFD(fd int) *os.File { return os.NewFile(uintptr(fd), "probe") }
