// Package examples holds example state files for nftep, and embeds the ones
// `nftep demo` applies (Go's embed cannot reach a parent directory, so the
// demo imports it from here).
package examples

import _ "embed"

// ClusterNode1 and ClusterNode2 are examples/cluster-node1.yaml and
// cluster-node2.yaml: the two nodes of the demo's cluster over VXLAN.
var (
	//go:embed cluster-node1.yaml
	ClusterNode1 []byte
	//go:embed cluster-node2.yaml
	ClusterNode2 []byte
)

// Demo is examples/demo.yaml.
//
//go:embed demo.yaml
var Demo []byte
