package nft

import (
	"fmt"
	"strings"
)

// A transaction: the operations one Apply sends, and how they print.

// OpKind is the kind of one operation of a transaction.
type OpKind uint8

// The operations a transaction is made of, in the nft command they mirror.
const (
	// OpAddTable is `add table`: idempotent, and with flags 0 it also wakes a
	// table someone made dormant.
	OpAddTable OpKind = iota + 1
	// OpFlushChain is `flush chain`: removes a chain's rules, and with them
	// their references to other chains and sets.
	OpFlushChain
	// OpDeleteElements is `delete element`.
	OpDeleteElements
	// OpDeleteChain is `delete chain`. The kernel refuses (EBUSY) while a
	// rule or map element still refers to the chain, so references are
	// removed earlier in the same transaction.
	OpDeleteChain
	// OpDeleteSet is `delete set` / `delete map` (EBUSY while a rule refers
	// to it).
	OpDeleteSet
	// OpAddChain is `add chain`; on an existing base chain it updates the
	// policy in place.
	OpAddChain
	// OpAddSet is `add set` / `add map` followed by its elements.
	OpAddSet
	// OpAddRules is one `add rule` per rule of Chain, appended in order.
	OpAddRules
	// OpAddElements is `add element`.
	OpAddElements
	// OpDeleteTable is `delete table`.
	OpDeleteTable
)

var opKindNames = map[OpKind]string{
	OpAddTable:       "add table",
	OpFlushChain:     "flush chain",
	OpDeleteElements: "delete element",
	OpDeleteChain:    "delete chain",
	OpDeleteSet:      "delete set",
	OpAddChain:       "add chain",
	OpAddSet:         "add set",
	OpAddRules:       "add rule",
	OpAddElements:    "add element",
	OpDeleteTable:    "delete table",
}

// String returns the nft command the kind mirrors.
func (k OpKind) String() string {
	if s, ok := opKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one operation of a transaction.
type Op struct {
	Kind OpKind
	// Name is the chain or set the operation is about (empty for table
	// operations).
	Name string
	// Chain is the chain to add (OpAddChain: its name and hook) or whose
	// rules are appended (OpAddRules).
	Chain *Chain
	// Set is the set to add (OpAddSet) or whose elements change.
	Set *Set
	// Elements are added or deleted (OpAddSet, OpAddElements,
	// OpDeleteElements), sorted by key.
	Elements []Element
	// Policy marks an OpAddChain of a base chain that exists already: it
	// changes the policy in place.
	Policy bool
}

// NumOperations counts the objects the op adds or removes: one per rule and
// per element, one for anything else.
func (op *Op) NumOperations() int {
	switch op.Kind {
	case OpAddRules:
		return len(op.Chain.Rules)
	case OpAddElements, OpDeleteElements:
		return len(op.Elements)
	case OpAddSet:
		return 1 + len(op.Elements)
	}
	return 1
}

// Transaction is the record of one kernel transaction: what was planned and,
// once sent, how big the batch was. Table.LastTransaction returns the last
// one, for tests (knftables' Fake.LastTransaction).
type Transaction struct {
	// Family and Table name the table the transaction is for.
	Family Family
	Table  string
	// Ops are the operations in batch order.
	Ops []Op
	// Messages is the number of netlink messages in the batch, without the
	// batch begin and end markers; 0 when nothing was sent.
	Messages int
	// Bytes is the size of the batch on the wire.
	Bytes int
	// Batches is the number of kernel transactions the operations went in:
	// 1, or a few more for a large cold start, whose new chains are
	// prepared in batches before one last batch publishes them (see
	// Table.Apply).
	Batches int
	// Gen is the ruleset generation id the transaction produced, when known.
	Gen uint32
	// Foreign are removals of objects in other tables, sent first in the
	// same kernel transaction (the last batch of a staged one): see
	// Table.SetForeign.
	Foreign []ForeignOp
}

// NumOperations returns the number of objects the transaction adds or
// removes (see Op.NumOperations). Zero means nothing was sent.
func (tx *Transaction) NumOperations() int {
	n := len(tx.Foreign)
	for i := range tx.Ops {
		n += tx.Ops[i].NumOperations()
	}
	return n
}

// String prints the transaction as nft commands, one per line (rules by
// their comment only; see Model.String for the full table text).
func (tx *Transaction) String() string {
	var b strings.Builder
	for _, o := range tx.Foreign {
		b.WriteString(o.String() + "\n")
	}
	tbl := string(tx.Family) + " " + tx.Table
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddTable, OpDeleteTable:
			fmt.Fprintf(&b, "%s %s\n", op.Kind, tbl)
		case OpAddChain:
			if bc := op.Chain.Base; bc != nil {
				fmt.Fprintf(&b, "add chain %s %s { type %s hook %s priority %d; policy %s; }\n",
					tbl, op.Name, bc.Type, bc.Hook, bc.Priority, bc.Policy)
			} else {
				fmt.Fprintf(&b, "add chain %s %s\n", tbl, op.Name)
			}
		case OpFlushChain, OpDeleteChain:
			fmt.Fprintf(&b, "%s %s %s\n", op.Kind, tbl, op.Name)
		case OpAddRules:
			for j, r := range op.Chain.Rules {
				fmt.Fprintf(&b, "add rule %s %s # rule %d: %q\n", tbl, op.Name, j+1, r.Comment)
			}
		case OpAddSet:
			fmt.Fprintf(&b, "add %s %s %s { type %s; }\n", setNoun(op.Set), tbl, op.Name, setTypeString(op.Set))
			if len(op.Elements) > 0 {
				fmt.Fprintf(&b, "add element %s %s { %s }\n", tbl, op.Name, elementList(op.Elements))
			}
		case OpDeleteSet:
			fmt.Fprintf(&b, "delete %s %s %s\n", setNoun(op.Set), tbl, op.Name)
		case OpAddElements, OpDeleteElements:
			fmt.Fprintf(&b, "%s %s %s { %s }\n", op.Kind, tbl, op.Name, elementList(op.Elements))
		}
	}
	return b.String()
}

func setNoun(s *Set) string {
	if s != nil && s.Data != DataNone {
		return "map"
	}
	return "set"
}

func setTypeString(s *Set) string {
	k := make([]string, len(s.Key))
	for i, t := range s.Key {
		k[i] = string(t)
	}
	t := strings.Join(k, " . ")
	if s.Data != DataNone {
		t += " : " + string(s.Data)
	}
	if s.Interval {
		t += "; flags interval"
	}
	return t
}

func elementList(es []Element) string {
	parts := make([]string, len(es))
	for i, e := range es {
		switch {
		case e.Verdict != nil && e.Verdict.Chain != "":
			parts[i] = fmt.Sprintf("%s : %s %s", e.Key, e.Verdict.Kind, e.Verdict.Chain)
		case e.Verdict != nil:
			parts[i] = fmt.Sprintf("%s : %s", e.Key, e.Verdict.Kind)
		default:
			parts[i] = e.Key
		}
	}
	return strings.Join(parts, ", ")
}

// Summary says in a few words what the transaction does, for errors and
// logs: "3 chains added, 1 rewritten, 2 elements added to map filter-from-wl".
func (tx *Transaction) Summary() string {
	adds, dels, rewrites := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var policies, setsAdded, setsDeleted int
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddChain:
			if op.Policy {
				policies++
			} else {
				adds[op.Name] = true
			}
		case OpDeleteChain:
			dels[op.Name] = true
		case OpFlushChain, OpAddRules:
			rewrites[op.Name] = true
		case OpAddSet:
			setsAdded++
		case OpDeleteSet:
			setsDeleted++
		}
	}
	var added, recreated, deleted, rewritten int
	for name := range adds {
		if dels[name] {
			recreated++ // a hook change
		} else {
			added++
		}
	}
	for name := range dels {
		if !adds[name] {
			deleted++ // flushed first only to drop its references
		}
	}
	for name := range rewrites {
		if !adds[name] && !dels[name] {
			rewritten++
		}
	}
	var parts []string
	for i := range tx.Ops {
		if tx.Ops[i].Kind == OpDeleteTable {
			parts = append(parts, "table deleted")
			break
		}
	}
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(added, "chain added", "chains added")
	count(recreated, "chain recreated", "chains recreated")
	count(rewritten, "rewritten", "rewritten")
	count(deleted, "deleted", "deleted")
	count(policies, "policy changed", "policies changed")
	count(setsAdded, "set added", "sets added")
	count(setsDeleted, "set deleted", "sets deleted")
	if len(tx.Foreign) > 0 {
		parts = append(parts, describeForeign(tx.Foreign))
	}
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddElements:
			count(len(op.Elements), "element added to "+setNoun(op.Set)+" "+op.Name, "elements added to "+setNoun(op.Set)+" "+op.Name)
		case OpDeleteElements:
			count(len(op.Elements), "element deleted from "+setNoun(op.Set)+" "+op.Name, "elements deleted from "+setNoun(op.Set)+" "+op.Name)
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}

// describeOp names operation op for an error: sub is the index of the rule
// (OpAddRules) or element (element operations) it is about.
func describeOp(op *Op, sub int) string {
	switch op.Kind {
	case OpAddTable:
		return "add table"
	case OpDeleteTable:
		return "delete table"
	case OpAddChain:
		if op.Chain.Base != nil {
			return fmt.Sprintf("add base chain %q (hook %s priority %d)", op.Name, op.Chain.Base.Hook, op.Chain.Base.Priority)
		}
		return fmt.Sprintf("add chain %q", op.Name)
	case OpFlushChain:
		return fmt.Sprintf("flush chain %q", op.Name)
	case OpDeleteChain:
		return fmt.Sprintf("delete chain %q", op.Name)
	case OpAddRules:
		return describeRule(op, sub, "add rule")
	case OpAddSet:
		if sub < len(op.Elements) && sub > 0 {
			return fmt.Sprintf("add element %q to new %s %q", op.Elements[sub].Key, setNoun(op.Set), op.Name)
		}
		return fmt.Sprintf("add %s %q", setNoun(op.Set), op.Name)
	case OpDeleteSet:
		return fmt.Sprintf("delete %s %q", setNoun(op.Set), op.Name)
	case OpAddElements, OpDeleteElements:
		return describeElements(op, sub, 1)
	}
	return op.Kind.String()
}

// describeRule names rule sub of an OpAddRules, with its comment.
func describeRule(op *Op, sub int, what string) string {
	if sub >= len(op.Chain.Rules) {
		return fmt.Sprintf("%s to chain %q", what, op.Name)
	}
	s := fmt.Sprintf("%s %d to chain %q", what, sub+1, op.Name)
	if c := op.Chain.Rules[sub].Comment; c != "" {
		s += fmt.Sprintf(" (comment %q)", c)
	}
	return s
}

// describeElements names n elements of an element operation from index
// first.
func describeElements(op *Op, first, n int) string {
	verb, prep := "add", "to"
	if op.Kind == OpDeleteElements {
		verb, prep = "delete", "from"
	}
	if first >= len(op.Elements) {
		return fmt.Sprintf("%s elements %s %s %q", verb, prep, setNoun(op.Set), op.Name)
	}
	s := fmt.Sprintf("%s element %q", verb, op.Elements[first].Key)
	if n > 1 {
		s = fmt.Sprintf("%s %d elements from %q", verb, n, op.Elements[first].Key)
	}
	return fmt.Sprintf("%s %s %s %q", s, prep, setNoun(op.Set), op.Name)
}
