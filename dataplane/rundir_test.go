package dataplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsureRunDir: a missing run directory is created 0700, an existing
// one narrowed to 0700; a symbolic link, a file, and a directory of
// another user are refused, naming the directory.
func TestEnsureRunDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "run")
	if err := EnsureRunDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("created %v, want 0700", fi.Mode().Perm())
	}
	wide := filepath.Join(base, "wide")
	os.Mkdir(wide, 0o777)
	if err := EnsureRunDir(wide); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(wide); fi.Mode().Perm() != 0o700 {
		t.Errorf("kept %v, want 0700", fi.Mode().Perm())
	}
	if err := WriteFileAtomic(filepath.Join(wide, "status.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(wide, "status.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("file written %v, want 0600", fi.Mode().Perm())
	}

	link := filepath.Join(base, "link")
	os.Symlink(wide, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	cases := map[string]string{
		link: "is a symbolic link: refusing it",
		file: "is not a directory",
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[other] = "belongs to uid 65534, not to nftep's user (uid 0): refusing it"
	} else if os.Getenv("CI") != "" {
		t.Fatal("a run directory of another user needs root to make (CI runs as root)")
	}
	for dir, want := range cases {
		err := EnsureRunDir(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming it with %q", dir, err, want)
		}
		// Nothing is written through a refused directory.
		if err := WriteFileAtomic(filepath.Join(dir, "status.json"), []byte("{}")); err == nil {
			t.Errorf("%s: a file was written through it", dir)
		}
	}
}
