package nft

import "testing"

func TestSetLookup(t *testing.T) {
	s := &Set{Name: "s", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true, Elements: map[string]Element{}}
	for _, k := range []string{"cali-a . 10.65.0.0/24", "eth* . 192.168.1.1-192.168.1.9"} {
		s.Elements[k] = Element{Key: k}
	}
	for _, tc := range []struct {
		vals []string
		want string
	}{
		{[]string{"cali-a", "10.65.0.7"}, "cali-a . 10.65.0.0/24"},
		{[]string{"cali-a", "10.65.1.7"}, ""},
		{[]string{"cali-b", "10.65.0.7"}, ""},
		{[]string{"eth0", "192.168.1.9"}, "eth* . 192.168.1.1-192.168.1.9"},
		{[]string{"eth0", "192.168.1.10"}, ""},
	} {
		e, ok, err := s.Lookup(tc.vals...)
		if err != nil {
			t.Fatal(err)
		}
		if got := map[bool]string{true: e.Key}[ok]; got != tc.want {
			t.Errorf("Lookup(%q) = %q, want %q", tc.vals, got, tc.want)
		}
	}
	if _, _, err := s.Lookup("cali-a"); err == nil {
		t.Error("a lookup of one field in a two-field set succeeded")
	}
	if _, _, err := s.Lookup("cali-a", "10.0.0.0/8"); err == nil {
		t.Error("a lookup of a prefix succeeded; want a single value")
	}
	ports := &Set{Name: "p", Key: []KeyType{TypeInetService}, Interval: true, Elements: map[string]Element{"8080-8090": {Key: "8080-8090"}}}
	if _, ok, _ := ports.Lookup("8085"); !ok {
		t.Error("8085 not in 8080-8090")
	}
	marks := &Set{Name: "m", Key: []KeyType{TypeMark}, Data: DataVerdict, Elements: map[string]Element{"0x00010000": {Key: "0x00010000", Verdict: &Verdict{Kind: Accept}}}}
	if e, ok, _ := marks.Lookup("0x10000"); !ok || e.Verdict.Kind != Accept {
		t.Error("mark 0x10000 not found in a mark map")
	}
}
