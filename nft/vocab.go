package nft

// The vocabulary of rules: the matches and actions nftep renders, each kind
// in a file of its own (match_*.go, action_*.go) that holds the type and
// everything the engine does with it: print it as nft lists it, encode it
// as the kernel expressions nft generates, validate it, and name the chains
// and sets it refers to. Adding a kind is one file and its tests; the
// interfaces below make the compiler ask for every part.

// Match is one condition of a rule. The types that implement it are the
// whole vocabulary; the interface is closed (its methods are unexported).
type Match interface {
	// printMatch returns the match as `nft list` prints it. c follows the
	// rule's protocol context, whose implicit dependencies nft leaves out
	// of its listing (see ruleContext).
	printMatch(c *ruleContext) string
	// encodeMatch appends the match's kernel expressions to e, with the
	// dependencies e's context does not establish yet.
	encodeMatch(e *encoder) error
	// checkMatch validates the match where rc says the rule stands.
	checkMatch(rc *ruleCheck) error
	// arp says whether the match applies in an arp-family table.
	arp() arpUse
	// sets calls fn with each named set the match reads.
	sets(fn func(string))
}

// Action is what a rule does once its matches hold. Verdicts end the chain
// (or jump); the statements SetMark, Notrack, Log and NFLog let the packet go
// on to the next rule. Like Match, the interface is closed.
type Action interface {
	// printAction returns the action as `nft list` prints it.
	printAction(c *ruleContext) string
	// encodeAction appends the action's kernel expressions to e.
	encodeAction(e *encoder) error
	// checkAction validates the action where rc says the rule stands.
	checkAction(rc *ruleCheck) error
	// inARP reports whether the action applies in an arp-family table.
	inARP() bool
	// refs calls chain with the chain the action jumps to and set with the
	// map it reads.
	refs(chain, set func(string))
}

// arpUse says where a match applies. An arp-family table sees ARP packets
// only: no layer-3 or layer-4 headers, no conntrack.
type arpUse uint8

const (
	arpNo   arpUse = iota // inet tables only
	arpAlso               // any table
	arpOnly               // arp tables only: it reads the ARP header
)

func arpIf(ok bool) arpUse {
	if ok {
		return arpAlso
	}
	return arpNo
}

// markAllOnes is a mask that keeps the whole mark.
const markAllOnes uint32 = 0xffffffff
