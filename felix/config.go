package felix

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is Felix's configuration as its driver receives it (ConfigUpdate,
// or a state file's `config:`): one map of settings, read the way Felix
// reads them. Keys match case-insensitively and values are trimmed; an empty
// value counts as absent (the default applies). Every typed read that meets
// a malformed value records an error naming the key, and Err joins them, so
// one message lists every bad setting. render.ParseConfig and
// dataplane.ParseConfig read their keys through one Config.
type Config struct {
	values map[string]string // lower-case key → trimmed value
	errs   []error
}

// NewConfig returns the Config of kv (nil: every setting at its default).
func NewConfig(kv map[string]string) *Config {
	c := &Config{values: make(map[string]string, len(kv))}
	for k, v := range kv {
		c.values[strings.ToLower(k)] = strings.TrimSpace(v)
	}
	return c
}

// Get returns key's value, and whether it is set (present and not empty).
func (c *Config) Get(key string) (string, bool) {
	v := c.values[strings.ToLower(key)]
	return v, v != ""
}

// String returns key's value, or def.
func (c *Config) String(key, def string) string {
	if v, ok := c.Get(key); ok {
		return v
	}
	return def
}

// Bool returns key as a boolean (strconv.ParseBool's spellings), or def.
func (c *Config) Bool(key string, def bool) bool {
	v, ok := c.Get(key)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		c.Fail(key, v, "not a boolean")
		return def
	}
	return b
}

// OneOf returns key's value in upper case if it is one of allowed (upper
// case), or def.
func (c *Config) OneOf(key, def string, allowed ...string) string {
	v := strings.ToUpper(c.String(key, def))
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	c.Fail(key, v, "want one of "+strings.Join(allowed, ", "))
	return def
}

// Seconds returns key as a duration: Felix's number of seconds (fractions
// allowed) or a Go duration ("90s"); zero is allowed, negative is not.
func (c *Config) Seconds(key string, def time.Duration) time.Duration {
	v, ok := c.Get(key)
	if !ok {
		return def
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d
	}
	c.Fail(key, v, "not a number of seconds")
	return def
}

// Fail records that key's value v is malformed, saying why.
func (c *Config) Fail(key, v, why string) {
	c.errs = append(c.errs, fmt.Errorf("%s=%q: %s", key, v, why))
}

// Failf records an error about key.
func (c *Config) Failf(key, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// AddError records err, which names its key.
func (c *Config) AddError(err error) { c.errs = append(c.errs, err) }

// Err returns every error recorded, joined, or nil.
func (c *Config) Err() error { return errors.Join(c.errs...) }

// Int returns key as a decimal integer in [lo, hi], or def.
func (c *Config) Int(key string, def, lo, hi int) int {
	v, ok := c.Get(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		c.Fail(key, v, "not an integer")
		return def
	}
	if n < lo || n > hi {
		c.Failf(key, "%d is out of range %d-%d", n, lo, hi)
		return def
	}
	return n
}
