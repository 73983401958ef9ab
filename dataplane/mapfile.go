package dataplane

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile returns the content of the regular file at path mapped read-only
// into memory (populated at once), and what unmaps it; the caller must not
// keep any part of data after calling release. A file that cannot be
// mapped (empty, not regular) is read instead.
//
// Why not read it: a one-shot `nftep apply` at 10,000 workloads reads
// megabytes (the state file, the record of the last apply), and each page
// of a fresh process's heap costs a page fault the first time it is
// touched, which on a virtual machine is microseconds a page. A mapping of
// the page cache populated in one call costs a fraction of that, and no
// copy.
func mapFile(path string, limit int64) (data []byte, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() || st.Size() == 0 || st.Size() > limit {
		return nil, nil, errNotMapped
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s: %w", path, err)
	}
	return data, func() { _ = unix.Munmap(data) }, nil
}

// errNotMapped says that mapFile does not map this file: read it instead.
var errNotMapped = fmt.Errorf("not a file to map")
