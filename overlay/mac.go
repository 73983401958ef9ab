package overlay

import (
	"crypto/sha1"
	"net"
)

// VTEPMAC returns the MAC Felix's calc graph gives a node's VXLAN device
// when the Node names none (cluster-networking spec §4.2): 0x66 (unicast,
// locally administered), then the first five bytes of SHA-1 of the node
// name, or of the name with "-v6" appended for the IPv6 device. Felix sends
// the MAC in every VTEP message; nftep uses the message's. This serves
// tests and tools that play Felix.
func VTEPMAC(node string, v6 bool) net.HardwareAddr {
	if v6 {
		node += "-v6"
	}
	sum := sha1.Sum([]byte(node))
	return net.HardwareAddr{0x66, sum[0], sum[1], sum[2], sum[3], sum[4]}
}
