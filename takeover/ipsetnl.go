package takeover

// A minimal client of ip_set's netlink protocol (nfnetlink subsystem
// IPSET): list set names with their reference counts, destroy a set. The
// vishvananda/netlink client logs every attribute it does not know (the
// bucket size and initval of current kernels) on the standard logger, and
// lists every member, which this needs neither of.

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ip_set's protocol (linux/netfilter/ipset/ip_set.h).
const (
	ipsetProtocol       = 6 // IPSET_PROTOCOL_MIN: every kernel that has ip_set speaks it
	ipsetCmdDestroy     = 3 // IPSET_CMD_DESTROY
	ipsetCmdList        = 7 // IPSET_CMD_LIST
	ipsetAttrProtocol   = 1 // IPSET_ATTR_PROTOCOL
	ipsetAttrSetname    = 2 // IPSET_ATTR_SETNAME
	ipsetAttrData       = 7 // IPSET_ATTR_DATA
	ipsetAttrReferences = 25
)

// ipsetConn is a NETLINK_NETFILTER socket in a namespace.
type ipsetConn struct{ c *netlink.Conn }

func dialIPSet(netnsFd int) (*ipsetConn, error) {
	cfg := &netlink.Config{}
	if netnsFd > 0 {
		cfg.NetNS = netnsFd
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return &ipsetConn{c}, nil
}

func (c *ipsetConn) Close() error { return c.c.Close() }

// request builds an ip_set message: nfgenmsg (family unspecified), the
// protocol version, and the set's name if any.
func ipsetRequest(cmd uint16, flags netlink.HeaderFlags, set string) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint8(ipsetAttrProtocol, ipsetProtocol)
	if set != "" {
		ae.String(ipsetAttrSetname, set)
	}
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_IPSET<<8 | cmd), Flags: netlink.Request | flags},
		Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}, nil
}

// list returns every set's name and reference count.
func (c *ipsetConn) list() (map[string]int, error) {
	req, err := ipsetRequest(ipsetCmdList, netlink.Dump, "")
	if err != nil {
		return nil, err
	}
	msgs, err := c.c.Execute(req)
	if err != nil {
		return nil, err
	}
	sets := map[string]int{}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		name, refs := "", -1
		for ad.Next() {
			switch ad.Type() {
			case ipsetAttrSetname:
				name = ad.String()
			case ipsetAttrData:
				ad.Nested(func(nd *netlink.AttributeDecoder) error {
					nd.ByteOrder = bigEndian
					for nd.Next() {
						if nd.Type() == ipsetAttrReferences {
							refs = int(nd.Uint32())
						}
					}
					return nil
				})
			}
		}
		if name == "" {
			continue
		}
		// A set comes as its header (with the references) and then
		// messages of members: keep what the header said.
		if old, ok := sets[name]; !ok || old < 0 {
			sets[name] = refs
		}
	}
	return sets, nil
}

// destroy destroys one set. The kernel refuses a set in use with
// IPSET_ERR_BUSY.
func (c *ipsetConn) destroy(set string) error {
	req, err := ipsetRequest(ipsetCmdDestroy, netlink.Acknowledge, set)
	if err != nil {
		return err
	}
	_, err = c.c.Execute(req)
	return err
}

// bigEndian is the byte order of ip_set's numbers.
var bigEndian = binary.BigEndian
