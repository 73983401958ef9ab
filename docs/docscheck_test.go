package docs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// example is one command of a documented example and its expected output.
type example struct {
	line int    // of the "$ " line, 1-based
	cmd  string // without "$ "; continuation lines joined with newlines
	want []string
}

// block is one marked fenced block.
type block struct {
	file     string
	line     int    // of the opening fence
	scenario string // empty when skipped
	skip     string // the reason, when skipped
	examples []example
}

var markerRE = regexp.MustCompile(`^<!-- docs-check: (scenario|skip) (.+?) -->$`)

// parseDoc returns the marked blocks of one Markdown file, or an error for
// a block with commands and no marker, a marker with no block, or a marked
// block without commands.
func parseDoc(file, text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var out []block
	var errs []string
	var marker []string // kind, argument
	markerLine := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := markerRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			if marker != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: marker without a fenced block after it", file, markerLine))
			}
			marker, markerLine = m[1:], i+1
			continue
		}
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" && marker != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: marker not followed by a fenced block", file, markerLine))
				marker = nil
			}
			continue
		}
		fence := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		b := block{file: file, line: fence}
		b.examples = parseExamples(body, fence)
		switch {
		case marker == nil && len(b.examples) > 0:
			errs = append(errs, fmt.Sprintf("%s:%d: a block with commands (\"$ \" lines) needs a docs-check marker (scenario or skip)", file, fence))
		case marker != nil && len(b.examples) == 0:
			errs = append(errs, fmt.Sprintf("%s:%d: docs-check marker on a block without \"$ \" commands", file, markerLine))
		case marker != nil && marker[0] == "scenario":
			b.scenario = marker[1]
			out = append(out, b)
		case marker != nil:
			b.skip = marker[1]
			out = append(out, b)
		}
		marker = nil
	}
	if marker != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: marker without a fenced block after it", file, markerLine))
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// parseExamples splits a fenced block's lines into commands and outputs.
func parseExamples(body []string, fence int) []example {
	var out []example
	for i := 0; i < len(body); i++ {
		l := body[i]
		if !strings.HasPrefix(l, "$ ") {
			if len(out) > 0 {
				out[len(out)-1].want = append(out[len(out)-1].want, l)
			}
			continue
		}
		ex := example{line: fence + 1 + i, cmd: strings.TrimPrefix(l, "$ ")}
		for strings.HasSuffix(ex.cmd, `\`) && i+1 < len(body) {
			i++
			ex.cmd += "\n" + body[i]
		}
		out = append(out, ex)
	}
	return out
}

// volatile are the parts of an output that change from run to run, and
// what they are replaced with on both sides of the comparison.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	// slog's time field is dropped: the documentation shows logs without it.
	{regexp.MustCompile(`(?m)^time=\S+ `), ""},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?`), "<TIME>"},
	{regexp.MustCompile(`\bpid (\d+)`), "pid <PID>"},
	{regexp.MustCompile(`"pid": \d+`), `"pid": <PID>`},
	{regexp.MustCompile(`\btook=\S+`), "took=<DURATION>"},
	{regexp.MustCompile(`\bin \d+(\.\d+)?(ns|µs|us|ms|s)\b`), "in <DURATION>"},
	{regexp.MustCompile(`after \d+ milliseconds`), "after <N> milliseconds"},
	{regexp.MustCompile(`uptime=\S+`), "uptime=<DURATION>"},
	{regexp.MustCompile(`nftep-demo-[0-9a-f]{6}`), "nftep-demo-<ID>"},
	{regexp.MustCompile(`\bgeneration \d+`), "generation <N>"},
	// conntrack -L: the entry's remaining lifetime and the client's port.
	{regexp.MustCompile(`(?m)^(tcp|udp|icmp)(\s+)(\d+) \d+ `), "$1$2$3 <TTL> "},
	// Ephemeral ports (Linux's default range, 32768-60999), wherever nft
	// or conntrack prints a port.
	{regexp.MustCompile(`\b(sport|dport)([= ])(3[2-9]\d{3}|[4-6]\d{4})\b`), "$1$2<PORT>"},
	// nft monitor trace: trace ids and the packet's IP id.
	{regexp.MustCompile(`\btrace id [0-9a-f]+`), "trace id <ID>"},
	{regexp.MustCompile(`\bip id \d+`), "ip id <N>"},
	{regexp.MustCompile(`\bbytes \d+`), "bytes <N>"},
}

// normalise replaces the volatile parts of s and splits it into lines
// without trailing spaces or trailing empty lines.
func normalise(s string) []string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// matchLines reports whether got matches want, where a want line "..."
// stands for any number of lines.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && matchLines(want[1:], got[1:])
}

// docFiles are the files checked: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return append([]string{filepath.Join("..", "README.md")}, files...)
}

// TestDocsMarked needs no root: every example in the documentation is
// marked, and every marker names a known scenario.
func TestDocsMarked(t *testing.T) {
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDoc(f, string(data))
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			if b.skip == "" && scenarios[b.scenario] == nil {
				t.Errorf("%s:%d: unknown scenario %q", b.file, b.line, b.scenario)
			}
		}
	}
}

// TestDocs runs every marked example and compares its output (see the
// package documentation). `make docs-check` runs it alone, verbosely.
func TestDocs(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("runs the documented commands (-short)")
	}
	start := time.Now()
	bin := buildBinaries(t)
	// The commands' mount point for their own /run/nftep; removed again
	// when this test made it.
	if _, err := os.Stat("/run/nftep"); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll("/run/nftep", 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove("/run/nftep")
	}
	var ran, skipped int
	var skips []string
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDoc(f, string(data))
		if err != nil {
			t.Error(err)
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			live := map[string]*instance{}
			defer func() {
				for _, in := range live {
					in.close(t)
				}
			}()
			for _, b := range blocks {
				if b.skip != "" {
					skipped += len(b.examples)
					for _, ex := range b.examples {
						skips = append(skips, fmt.Sprintf("%s:%d: %s (%s)", b.file, ex.line, firstLine(ex.cmd), b.skip))
					}
					continue
				}
				in := live[b.scenario]
				if in == nil {
					in = newInstance(t, b.scenario, bin)
					live[b.scenario] = in
				}
				for _, ex := range b.examples {
					ran++
					got := in.run(t, ex.cmd)
					want := normalise(strings.Join(ex.want, "\n"))
					gotLines := normalise(got)
					if !matchLines(want, gotLines) {
						t.Errorf("%s:%d: $ %s\noutput differs from the documentation (-documented +real, after normalising):\n%s\nreal output:\n%s",
							b.file, ex.line, ex.cmd, cmp.Diff(want, gotLines), got)
					}
				}
			}
		})
	}
	t.Logf("docs-check: %d commands run, %d not run (marked), in %s", ran, skipped, time.Since(start).Round(100*time.Millisecond))
	for _, s := range skips {
		t.Logf("not run: %s", s)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("docs-check needs root (network namespaces), and CI is set")
	}
	t.Skip("docs-check needs root (network namespaces)")
}

// buildBinaries builds nftep and nftep-felix-driver into a temporary
// directory and returns it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/nftep", "../cmd/nftep-felix-driver")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("build: %v\n%s", err, out.String())
	}
	return dir
}
