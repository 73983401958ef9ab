package nft

// The ruleset generation id: a per-namespace counter the kernel bumps by
// exactly one on every committed nf_tables transaction (nf_tables_commit in
// the kernel's net/netfilter/nf_tables_api.c; an aborted batch and a read
// leave it alone) and returns for NFT_MSG_GETGEN (nf_tables_getgen, the
// NFTA_GEN_ID attribute, a be32). google/nftables v0.3.0 has no GetGen, so
// NFT_MSG_GETGEN is built by hand.

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// getGen returns the ruleset generation id of the socket's namespace.
func (s *nlSock) getGen(ctx context.Context) (uint32, error) {
	m, err := s.request(ctx, unix.NFT_MSG_GETGEN, unix.AF_UNSPEC, nil)
	if err != nil {
		return 0, fmt.Errorf("get ruleset generation: %w", err)
	}
	if m.typ != msgType(unix.NFT_MSG_NEWGEN) {
		return 0, fmt.Errorf("get ruleset generation: unexpected reply type %#x", m.typ)
	}
	gen, ok := parseGen(m.data)
	if !ok {
		return 0, fmt.Errorf("get ruleset generation: reply without NFTA_GEN_ID")
	}
	return gen, nil
}

// parseGen extracts NFTA_GEN_ID (a be32) from a NEWGEN message's payload
// (nfgenmsg first).
func parseGen(data []byte) (uint32, bool) {
	if len(data) < 4 {
		return 0, false
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return 0, false
	}
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID && len(ad.Bytes()) == 4 {
			return binary.BigEndian.Uint32(ad.Bytes()), true
		}
	}
	return 0, false
}

// GetGeneration returns the ruleset generation id of the network namespace
// netnsFd refers to (≤ 0: the caller's). Tests use it to show that an apply
// with nothing to do commits nothing.
func GetGeneration(ctx context.Context, netnsFd int) (uint32, error) {
	s, err := dialNetfilter(netnsFd)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.getGen(ctx)
}
