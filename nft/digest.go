package nft

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// digest identifies the rules of a chain: the first 128 bits of SHA-256
// over the rule hashes (the ones kept in rule userdata), in order.
// Comparing digests lets a resync compare 20,000 chains without keeping
// 240,000 hash strings. Digests are stable across processes (the run
// directory's record of the last apply keeps them, see Record), so the
// hash has no per-process seed; it is a cryptographic one so that nobody
// crafts two rule lists with one digest.
type digest [16]byte

type digester struct {
	h   hash.Hash
	n   int
	buf []byte
}

func newDigester() *digester {
	return &digester{h: sha256.New()}
}

func (d *digester) add(ruleHash string) {
	d.buf = append(append(d.buf[:0], ruleHash...), 0)
	d.h.Write(d.buf)
	d.n++
}

func (d *digester) sum() digest {
	// The rule count goes in last, so that no two lists collide by
	// splitting differently.
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(d.n))
	d.h.Write(n[:])
	var out digest
	copy(out[:], d.h.Sum(nil))
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
