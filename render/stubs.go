package render

import (
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

func staticChains(cfg Config) []*nft.Chain                           { panic("TODO") }
func staticSets(cfg Config) []*nft.Set                               { panic("TODO") }
func hostDispatch(cfg Config, star *proto.HostEndpoint) []*nft.Chain { panic("TODO") }
func renderWorkload(cfg Config, in WorkloadInput) Output             { panic("TODO") }
func renderHost(cfg Config, in HostInput) Output                     { panic("TODO") }
func arpStatic(cfg Config) ([]*nft.Chain, []*nft.Set)                { panic("TODO") }
func chainName(layer Layer, kind, iface string) string               { panic("TODO") }
func policyChainName(layer Layer, dir Dir, tier string, id *proto.PolicyID) string {
	panic("TODO")
}
func profileChainName(layer Layer, dir Dir, profile string) string { panic("TODO") }
func isStaged(id *proto.PolicyID) bool                             { panic("TODO") }
