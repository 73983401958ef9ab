package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDedent(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\n\t\tchain c {\n\t\t\taccept\n\t\t}\n\t\t", "chain c {\n\taccept\n}\n"},
		{"\n\ta\n\t \n\tb", "a\n\nb"},
		{"no indent\n", "no indent\n"},
	} {
		assert.Equal(t, c.want, Dedent(c.in), "Dedent(%q)", c.in)
	}
}

func TestGoldenMatches(t *testing.T) {
	if *update {
		t.Skip("-update rewrites instead of comparing")
	}
	path := filepath.Join(t.TempDir(), "case.nft")
	require.NoError(t, os.WriteFile(path, []byte("table inet t {\n}\n"), 0o644))
	Golden(t, path, "table inet t {\n}\n")
}

// felixRecordings is every file of testdata/felix. Tests of several
// packages replay them; none may go missing.
var felixRecordings = []string{
	"README.md",
	"real-felix-session.bin", "real-felix-session.jsonl",
	"real-felix-rules.bin", "real-felix-rules.jsonl",
	"real-felix-rules-restart.bin", "real-felix-rules-restart.jsonl",
	"two-node/README.md",
	"two-node/scenario1-n1.bin", "two-node/scenario1-n1.txt",
	"two-node/scenario1-n2.bin", "two-node/scenario1-n2.txt",
	"two-node/scenario2-delta-n1.bin", "two-node/scenario2-delta-n1.txt",
	"two-node/scenario2-delta-n2.bin", "two-node/scenario2-delta-n2.txt",
	"two-node/scenario3-n1.bin", "two-node/scenario3-n1.txt",
	"two-node/scenario3-n2.bin", "two-node/scenario3-n2.txt",
	"two-node/scenario4-n1.bin", "two-node/scenario4-n1.txt",
	"two-node/scenario4-n2.bin", "two-node/scenario4-n2.txt",
	"leftovers/README.md",
	"leftovers/felix-nft-mode.nft",
	"leftovers/felix-iptables-nft.iptables-save",
	"leftovers/felix-iptables-nft.ip6tables-save",
	"leftovers/felix-iptables-nft.ipset-save",
	"leftovers/felix-iptables-nft.nft",
}

// TestFelixRecordingsPresent: every recording is in the repository and not
// empty, and the directory holds nothing this list does not name (a new
// recording is added here, and to the README).
func TestFelixRecordingsPresent(t *testing.T) {
	for _, name := range felixRecordings {
		b := ReadFelixRecording(t, name)
		assert.NotEmpty(t, b, name)
	}
	root := filepath.Dir(FelixRecording(t, "README.md"))
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		found = append(found, filepath.ToSlash(rel))
		return err
	}))
	assert.ElementsMatch(t, felixRecordings, found)
}

// recorder is a testing.TB that records failures and skips instead of
// ending the test.
type recorder struct {
	testing.TB
	fatals, skips []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skips = append(r.skips, fmt.Sprintf(format, args...))
}
func (r *recorder) Skip(args ...any) { r.skips = append(r.skips, fmt.Sprint(args...)) }
func (r *recorder) SkipNow()         { r.skips = append(r.skips, "SkipNow") }

// TestFelixRecordingMissingFails: a recording that is not there fails the
// test that wants it, naming the file and where it belongs; it is never a
// skip. Paths that leave testdata/felix fail too.
func TestFelixRecordingMissingFails(t *testing.T) {
	for _, name := range []string{"no-such-recording.bin", "../felix/README.md", "/etc/passwd", ""} {
		r := &recorder{TB: t}
		assert.Empty(t, FelixRecording(r, name), name)
		assert.Empty(t, r.skips, "%q skipped the test", name)
		if assert.Len(t, r.fatals, 1, name) && name != "" {
			assert.Contains(t, r.fatals[0], name)
			assert.Contains(t, r.fatals[0], FelixDir)
		}
	}
	r := &recorder{TB: t}
	assert.Nil(t, ReadFelixRecording(r, "no-such-recording.bin"))
	assert.Len(t, r.fatals, 1)
	assert.Empty(t, r.skips)
}

// TestFelixRecordingFromAnyPackage: the path does not depend on the
// working directory (each package's tests run in their own).
func TestFelixRecordingFromAnyPackage(t *testing.T) {
	want := FelixRecording(t, "real-felix-session.bin")
	root, err := repoRoot()
	require.NoError(t, err)
	t.Chdir(filepath.Join(root, "nft"))
	assert.Equal(t, want, FelixRecording(t, "real-felix-session.bin"))
	assert.True(t, strings.HasPrefix(want, root+string(filepath.Separator)), "%s outside %s", want, root)
}
