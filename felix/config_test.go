package felix

import (
	"strings"
	"testing"
	"time"
)

func TestConfig(t *testing.T) {
	c := NewConfig(map[string]string{
		"ipv6support": " false ", "InterfacePrefix": "cali,tap", "RouteRefreshInterval": "1.5",
		"Other": "2m", "Empty": "", "Bad": "yes please", "Action": "drop",
	})
	if c.Bool("Ipv6Support", true) {
		t.Errorf("Ipv6Support: keys match case-insensitively and values are trimmed")
	}
	if got := c.String("interfaceprefix", "x"); got != "cali,tap" {
		t.Errorf("InterfacePrefix = %q", got)
	}
	if got := c.String("Empty", "default"); got != "default" {
		t.Errorf("an empty value is absent: %q", got)
	}
	if got := c.Seconds("RouteRefreshInterval", 0); got != 1500*time.Millisecond {
		t.Errorf("seconds: %v", got)
	}
	if got := c.Seconds("Other", 0); got != 2*time.Minute {
		t.Errorf("a Go duration: %v", got)
	}
	if got := c.OneOf("Action", "ACCEPT", "DROP", "ACCEPT"); got != "DROP" {
		t.Errorf("OneOf = %q", got)
	}
	if c.Err() != nil {
		t.Fatalf("errors before any bad value: %v", c.Err())
	}
	if !c.Bool("Bad", true) || c.OneOf("Bad", "ACCEPT", "DROP") != "ACCEPT" || c.Seconds("Bad", time.Second) != time.Second {
		t.Errorf("malformed values must give the defaults")
	}
	err := c.Err()
	if err == nil || strings.Count(err.Error(), `Bad="`) != 3 {
		t.Errorf("Err = %v; want three errors naming the key", err)
	}
}
