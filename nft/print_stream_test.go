package nft

import (
	"strings"
	"testing"
)

// TestPrintIsString: Model.Print writes exactly what String returns.
func TestPrintIsString(t *testing.T) {
	m := NewModel(FamilyINet, testTable)
	baseModel(m)
	m.SetChain(regular("filter-fw-v3", rule("v3", accept)))
	var b strings.Builder
	if err := m.Print(&b); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), m.String(); got != want {
		t.Errorf("Print:\n%s\nString:\n%s", got, want)
	}
}
