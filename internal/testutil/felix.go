package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// FelixDir is where the recordings of real Felix runs live, relative to
// the repository's root: testdata/felix (see its README.md).
const FelixDir = "testdata/felix"

// module is the module path whose go.mod marks the repository's root.
const module = "github.com/nftep/nftep"

// FelixRecording returns the path of the recording name (a file under
// testdata/felix, such as "real-felix-session.bin" or
// "two-node/scenario1-n1.bin"). The recordings are part of the repository:
// a missing one fails the test, it never skips it.
func FelixRecording(t testing.TB, name string) string {
	t.Helper()
	if name == "" || filepath.IsAbs(name) || !filepath.IsLocal(name) {
		t.Fatalf("recorded Felix stream %q: not a path inside %s", name, FelixDir)
		return ""
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatalf("recorded Felix stream %s: %v", name, err)
		return ""
	}
	path := filepath.Join(root, filepath.FromSlash(FelixDir), filepath.FromSlash(name))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("recorded Felix stream %s is missing from the repository (%v); it belongs in %s", name, err, FelixDir)
		return ""
	}
	return path
}

// ReadFelixRecording returns the content of the recording name (see
// FelixRecording).
func ReadFelixRecording(t testing.TB, name string) []byte {
	t.Helper()
	path := FelixRecording(t, name)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("recorded Felix stream %s: %v", name, err)
	}
	return b
}

// repoRoot returns the repository's root: the directory of this module's
// go.mod, found from this file's own path or else (a build with -trimpath)
// from the working directory up. A test's working directory is its
// package's directory, inside the repository.
func repoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for {
			if isModuleRoot(dir) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("no go.mod of %s in %s or above", module, strings.Join(starts, " or "))
}

// isModuleRoot reports whether dir holds the go.mod of this module.
func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(first)) == "module "+module
}
