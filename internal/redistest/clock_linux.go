package redistest

import (
	"os"
	"syscall"
	"unsafe"
)

// mapWord maps the first 8 bytes of the file at path, shared, for atomic
// stores that a process under the clock shim, which maps the same file,
// sees at its next clock reading.
func mapWord(path string) (*int64, func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	// A mapping starts on a page: the word is aligned for atomic access.
	return (*int64)(unsafe.Pointer(&b[0])), func() { _ = syscall.Munmap(b) }, nil
}
