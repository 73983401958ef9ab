package felix

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfig(t *testing.T) {
	c := NewConfig(map[string]string{
		"ipv6support": " false ", "InterfacePrefix": "cali,tap", "RouteRefreshInterval": "1.5",
		"Other": "2m", "Empty": "", "Bad": "yes please", "Action": "drop",
	})
	assert.False(t, c.Bool("Ipv6Support", true), "Ipv6Support: keys match case-insensitively and values are trimmed")
	assert.Equal(t, "cali,tap", c.String("interfaceprefix", "x"))
	assert.Equal(t, "default", c.String("Empty", "default"), "an empty value is absent")
	assert.Equal(t, 1500*time.Millisecond, c.Seconds("RouteRefreshInterval", 0), "seconds")
	assert.Equal(t, 2*time.Minute, c.Seconds("Other", 0), "a Go duration")
	assert.Equal(t, "DROP", c.OneOf("Action", "ACCEPT", "DROP", "ACCEPT"))
	require.NoError(t, c.Err(), "errors before any bad value")
	// Malformed values give the defaults, and each is an error naming the
	// key.
	assert.True(t, c.Bool("Bad", true))
	assert.Equal(t, "ACCEPT", c.OneOf("Bad", "ACCEPT", "DROP"))
	assert.Equal(t, time.Second, c.Seconds("Bad", time.Second))
	err := c.Err()
	if assert.Error(t, err) {
		assert.Equal(t, 3, strings.Count(err.Error(), `Bad="`), "three errors naming the key: %v", err)
	}
}
