// Package sysctl writes the per-interface kernel settings that a workload
// interface needs (configureInterface in Felix's
// felix/dataplane/linux/endpoint_mgr.go) through files under /proc/sys.
//
// Two layers:
//   - Writer is the file system: ProcWriter is the real one and Fake records
//     what was written, in order, for the endpoint manager's tests.
//   - Interfaces keeps the set of workload interfaces to configure, writes
//     their settings while they are up, and retries an interface until its
//     writes succeed, reporting errors per interface.
//
// /proc/sys/net shows the network namespace of the thread that opens the
// file, not of the process, so ProcWriter can run every file operation
// through a hook that switches a locked thread into another namespace (tests
// pass netnstest's NS.Do). Production passes no hook and sees the daemon's
// own namespace.
package sysctl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Writer reads and writes sysctl files. Paths are absolute and start with
// /proc/sys/, exactly as the kernel documents them (for example
// /proc/sys/net/ipv4/conf/cali12ab/rp_filter), so that logs, errors and the
// Fake's record read the same as the kernel's documentation
// (Documentation/networking/ip-sysctl.rst).
type Writer interface {
	// Set writes value to the file at path, with no trailing newline, like
	// `echo -n value > path`. A short write is an error.
	Set(path, value string) error
	// Get returns the contents of the file at path, without the trailing
	// newline the kernel adds.
	Get(path string) (string, error)
	// Exists reports whether path (a file or a directory) exists. It is how
	// callers tell "the interface is gone" from other write failures.
	Exists(path string) (bool, error)
}

// ProcWriter is the real Writer: it opens files under its root.
type ProcWriter struct {
	root string
	run  func(func() error) error
}

var _ Writer = (*ProcWriter)(nil)

// ProcOption configures a ProcWriter.
type ProcOption func(*ProcWriter)

// InNamespace makes the ProcWriter run each file operation through run, which
// must call its argument on an OS thread that is in the wanted network
// namespace (netnstest's NS.Do does exactly that). A nil run means the
// calling thread's namespace.
func InNamespace(run func(func() error) error) ProcOption {
	return func(w *ProcWriter) { w.run = run }
}

// NewProcWriter returns a Writer for the files under root. Root is prepended
// to every path: "" or "/" is the real file system; a test may pass a
// temporary directory that holds a proc/sys tree of plain files.
func NewProcWriter(root string, opts ...ProcOption) *ProcWriter {
	w := &ProcWriter{root: root}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Set is part of Writer.
func (w *ProcWriter) Set(path, value string) error {
	full, err := w.resolve(path)
	if err == nil {
		plain := w.root != "" && w.root != "/"
		err = w.do(func() error { return writeFile(full, value, plain) })
	}
	if err != nil {
		return fmt.Errorf("set %s=%s: %w", path, value, err)
	}
	return nil
}

// writeFile writes value the way Felix does: write-only, no create, no
// newline. O_TRUNC is not used: proc files ignore it; plain says the file
// is a test root's regular file, whose old value must not outlive a
// shorter new one, hence the ftruncate for those.
//
// A value the file already holds is not written again: on a node of
// thousands of workloads every apply sets every interface's sysctls, and
// some writes (forwarding) make the kernel flush and notify even when
// nothing changes; the read costs less than the write.
//
// Plain system calls rather than an *os.File: a cold apply of 10,000
// workloads writes 80,000 of these files, and os.OpenFile adds an epoll
// registration (refused for these files), the read a seek back, and the
// check for a regular file an fstat: seven system calls a file instead of
// four (open, pread, write, close), which took twice the time. pread
// leaves the offset at 0, where a sysctl write must start (a write past
// it is ignored: kernel.sysctl_writes_strict).
func writeFile(path, value string, plain bool) error {
	fd, err := openFile(path, unix.O_RDWR)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		fd, err = openFile(path, unix.O_WRONLY)
	} else if err == nil {
		var buf [64]byte
		n, rerr := ignoringEINTR(func() (int, error) { return unix.Pread(fd, buf[:], 0) })
		if rerr == nil && n < len(buf) && strings.TrimSpace(string(buf[:n])) == value {
			return unix.Close(fd)
		}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, []byte(value)) })
	switch {
	case err != nil:
		err = &fs.PathError{Op: "write", Path: path, Err: err}
	case n < len(value):
		err = io.ErrShortWrite
	case plain:
		if terr := unix.Ftruncate(fd, int64(len(value))); terr != nil {
			err = &fs.PathError{Op: "truncate", Path: path, Err: terr}
		}
	}
	if cerr := unix.Close(fd); err == nil && cerr != nil {
		err = &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return err
}

func openFile(path string, mode int) (int, error) {
	return ignoringEINTR(func() (int, error) { return unix.Open(path, mode|unix.O_CLOEXEC, 0) })
}

// ignoringEINTR repeats fn while it is interrupted by a signal (the Go
// runtime's preemption signals interrupt system calls).
func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// Get is part of Writer.
func (w *ProcWriter) Get(path string) (string, error) {
	full, err := w.resolve(path)
	var b []byte
	if err == nil {
		err = w.do(func() (err error) {
			b, err = readFile(full)
			return err
		})
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// Exists is part of Writer.
func (w *ProcWriter) Exists(path string) (bool, error) {
	full, err := w.resolve(path)
	if err != nil {
		return false, err
	}
	var exists bool
	err = w.do(func() error {
		_, err := os.Stat(full)
		switch {
		case err == nil:
			exists = true
			return nil
		case errors.Is(err, os.ErrNotExist):
			return nil
		default:
			return err
		}
	})
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	return exists, nil
}

func (w *ProcWriter) do(fn func() error) error {
	if w.run == nil {
		return fn()
	}
	return w.run(fn)
}

// Batch runs fn inside one switch into the namespace, giving it a Writer
// that works on the calling thread: on a node of thousands of interfaces
// the two setns calls around each file cost more than the file. fn must use
// that Writer from its own goroutine only, and must not wait on other
// goroutines (it runs on a locked OS thread that is in the other
// namespace). w itself stays usable from elsewhere meanwhile.
func (w *ProcWriter) Batch(fn func(Writer) error) error {
	if w.run == nil {
		return fn(w)
	}
	here := &ProcWriter{root: w.root}
	return w.run(func() error { return fn(here) })
}

// Batcher is a Writer that can run many operations in one switch into its
// namespace (ProcWriter).
type Batcher interface {
	Batch(fn func(Writer) error) error
}

// resolve checks that path is a clean path under /proc/sys, so that an
// interface name can never lead a write somewhere else ("..", a slash), and
// joins it to the root.
func (w *ProcWriter) resolve(path string) (string, error) {
	if err := checkPath(path); err != nil {
		return "", err
	}
	if w.root == "" || w.root == "/" {
		return path, nil
	}
	return filepath.Join(w.root, path), nil
}

func checkPath(path string) error {
	if !strings.HasPrefix(path, procSys+"/") || filepath.Clean(path) != path {
		return fmt.Errorf("invalid sysctl path %q: want a clean path under %s", path, procSys)
	}
	return nil
}

const procSys = "/proc/sys"

// readFile returns the contents of the file at path, read with plain
// system calls (open, read until end of file, close). The periodic check of
// every workload interface's settings (Interfaces.Verify) reads tens of
// thousands of these files on a large node: through an *os.File, each one
// also cost an fstat, an epoll registration and its removal (sysctl files
// can be polled), and about one context switch, which made that check most
// of what an idle daemon did.
func readFile(path string) ([]byte, error) {
	fd, err := retryEINTR(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	// Sysctl values are short: one read takes the whole file. A read
	// that does not fill the buffer has reached the end (a sysctl file
	// hands over its whole value at once, a regular file all it has), so
	// no second read is needed to find it.
	buf := make([]byte, 0, 128)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		want := cap(buf) - len(buf)
		n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n < want {
			return buf, nil
		}
	}
}

// retryEINTR repeats fn while a signal interrupts it (the Go runtime's
// preemption signals interrupt system calls).
func retryEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
}
