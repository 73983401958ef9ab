package render

import "testing"

// TestMarkMapperGolden pins Felix's allocation (the marks Felix's own
// felix/rules tests expect: eth0 0xa200, cali2333 0xa700, …): mask 0xff00,
// non-Cali 0x0100, names allocated in sorted order.
func TestMarkMapperGolden(t *testing.T) {
	m := NewMarkMapper(0xff00, 0x0100)
	for _, tc := range []struct {
		name string
		want uint32
	}{
		{"cali11", 0x200},
		{"cali12", 0x300}, // probed past positions 1 (non-Cali) and 2 (cali11)
		{"cali13", 0x400},
		{"cali1234", 0xd400},
		{"cali21", 0xf700},
		{"cali22", 0xf400},
		{"cali2333", 0xa700},
		{"cali2444", 0x5200},
		{"eth0", 0xa200},
	} {
		got, err := m.EndpointMark(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("EndpointMark(%q) = %#x, %v; want %#x", tc.name, got, err, tc.want)
		}
	}
}

// TestMarkMapperPinRelease covers SetEndpointMark, release and errors.
func TestMarkMapperPinRelease(t *testing.T) {
	m := NewMarkMapper(0xff00, 0x0100)
	if err := m.SetEndpointMark("a", 0x0100); err == nil {
		t.Errorf("pinning the non-Cali mark succeeded")
	}
	if err := m.SetEndpointMark("a", 0x4200); err != nil {
		t.Fatalf("SetEndpointMark: %v", err)
	}
	if got, _ := m.EndpointMark("a"); got != 0x4200 {
		t.Errorf("pinned mark %#x, want 0x4200", got)
	}
	if err := m.SetEndpointMark("a", 0x4300); err == nil {
		t.Errorf("re-pinning to another mark succeeded")
	}
	if err := m.SetEndpointMark("b", 0x4200); err == nil {
		t.Errorf("pinning a taken mark succeeded")
	}
	if err := m.SetEndpointMark("b", 0x10000); err == nil {
		t.Errorf("pinning outside the mask succeeded")
	}
	m.ReleaseEndpointMark("a")
	if err := m.SetEndpointMark("b", 0x4200); err != nil {
		t.Errorf("released mark not reusable: %v", err)
	}
	if _, err := m.EndpointMark(""); err == nil {
		t.Errorf("empty name got a mark")
	}
	small := NewMarkMapper(0x3, 0x1) // positions 1 (non-Cali), 2, 3
	for _, n := range []string{"x", "y"} {
		if _, err := small.EndpointMark(n); err != nil {
			t.Fatalf("EndpointMark(%q): %v", n, err)
		}
	}
	if _, err := small.EndpointMark("z"); err == nil {
		t.Errorf("full mapper allocated a mark")
	}
}
