package docs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDoc(t *testing.T) {
	doc := strings.Join([]string{
		"text",
		"<!-- docs-check: scenario node1 -->",
		"",
		"```",
		"$ echo a \\",
		"  b",
		"a b",
		"$ true",
		"```",
		"<!-- docs-check: skip needs Calico -->",
		"```",
		"$ kubectl get pods",
		"```",
		"```",
		"$ unmarked",
		"```",
		"```",
		"no commands here",
		"```",
		"<!-- docs-check: scenario node1 -->",
		"a paragraph",
	}, "\n")
	blocks, err := parseDoc("x.md", doc)
	wantErr := "x.md:14: a block with commands (\"$ \" lines) needs a docs-check marker (scenario or skip)\n" +
		"x.md:20: marker not followed by a fenced block"
	if err == nil || err.Error() != wantErr {
		t.Errorf("error:\n%v\nwant:\n%s", err, wantErr)
	}
	want := []block{
		{file: "x.md", line: 4, scenario: "node1", examples: []example{
			{line: 5, cmd: "echo a \\\n  b", want: []string{"a b"}},
			{line: 8, cmd: "true"},
		}},
		{file: "x.md", line: 11, skip: "needs Calico", examples: []example{{line: 12, cmd: "kubectl get pods"}}},
	}
	if diff := cmp.Diff(want, blocks, cmp.AllowUnexported(block{}, example{})); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
}

func TestNormaliseAndMatch(t *testing.T) {
	doc := normalise("time=2026-12-02T16:49:22.123Z level=INFO msg=applied took=3.27ms\nnftep run (pid 852)  \n...\nlast\n\n")
	got := normalise("time=2027-01-01T00:00:00Z level=INFO msg=applied took=1.1s\nnftep run (pid 9)\nx\ny\nlast")
	if !matchLines(doc, got) {
		t.Errorf("no match:\n%q\n%q", doc, got)
	}
	if matchLines(doc, got[:2]) {
		t.Error("matched without the last line")
	}
	if matchLines([]string{"a"}, []string{"a", "b"}) {
		t.Error("matched an extra line")
	}
}
