package nft

import (
	"encoding/binary"
	"hash/maphash"
)

// digest identifies the rules of a chain: 128 bits of maphash over the rule
// hashes (the ones kept in rule userdata), in order. Comparing digests lets
// a resync compare 20,000 chains without keeping 240,000 hash strings.
// Digests never leave the process, so per-process random seeds do (and keep
// anyone from crafting collisions).
type digest [16]byte

var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

type digester struct {
	h [2]maphash.Hash
	n int
}

func newDigester() *digester {
	d := &digester{}
	d.h[0].SetSeed(digestSeeds[0])
	d.h[1].SetSeed(digestSeeds[1])
	return d
}

func (d *digester) add(ruleHash string) {
	for i := range d.h {
		d.h[i].WriteString(ruleHash)
		d.h[i].WriteByte(0)
	}
	d.n++
}

func (d *digester) sum() digest {
	var out digest
	// The rule count goes in last, so that no two lists collide by
	// splitting differently.
	for i := range d.h {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(d.n))
		d.h[i].Write(n[:])
		binary.LittleEndian.PutUint64(out[8*i:], d.h[i].Sum64())
	}
	return out
}

// chainDigest computes c's digest from its rules.
func chainDigest(c *Chain) digest {
	d := newDigester()
	for _, r := range c.Rules {
		d.add(ruleHash(r))
	}
	return d.sum()
}
