// Package examples holds example state files for nftep, and embeds the one
// `nftep demo` applies (Go's embed cannot reach a parent directory, so the
// demo imports it from here).
package examples

import _ "embed"

// Demo is examples/demo.yaml.
//
//go:embed demo.yaml
var Demo []byte
