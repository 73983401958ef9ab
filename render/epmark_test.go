package render

import "testing"

// TestMarkMapperGolden pins Felix's allocation (spec §7.1): mask 0xff00,
// non-Cali 0x0100, names allocated in sorted order.
func TestMarkMapperGolden(t *testing.T) {
	m := NewMarkMapper(0xff00, 0x0100)
	for _, tc := range []struct {
		name string
		want uint32
	}{
		{"cali1234", 0xd400},
		{"eth0", 0xa200},
		{"cali2333", 0xa700},
		{"cali2444", 0x5200},
		{"cali11", 0x200},
		{"cali12", 0x300}, // probed past positions 1 (non-Cali) and 2 (cali11)
		{"cali13", 0x400},
		{"cali21", 0xf700},
		{"cali22", 0xf400},
	} {
		got, err := m.EndpointMark(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("EndpointMark(%q) = %#x, %v; want %#x", tc.name, got, err, tc.want)
		}
	}
}
