package overlay

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The test vectors of the spec (§4.2) and the recording's nodes.
func TestVTEPMAC(t *testing.T) {
	for _, c := range []struct {
		node string
		v6   bool
		want string
	}{
		{"remotehostname", false, "66:3e:ca:a4:db:65"},
		{"localhostname", false, "66:48:f6:56:dc:f1"},
		{"remotehostname", true, "66:a0:68:c9:4c:79"},
		{"node2", false, "66:2d:bf:44:a6:8b"},
		{"node2", true, "66:32:42:ed:de:d5"},
		{"node1", false, "66:f9:37:c3:7e:94"},
	} {
		assert.Equal(t, c.want, VTEPMAC(c.node, c.v6).String(), "%s v6=%v", c.node, c.v6)
	}
}
