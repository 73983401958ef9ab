package nft

import (
	"context"
	"errors"
)

// send commits one prepared batch through the transport. It returns the
// generation read after the commit, and whether the table is known to hold
// exactly what we programmed at that generation: only when the caller knew
// the table at generation want (wantKnown), the generation read just
// before sending is still want (no foreign commit landed since), and the
// one read after is one more (every commit bumps it by exactly one, so
// anything else means another commit came in between).
//
// tx holds the batch's operations (to name the one the kernel refuses);
// summary says what the whole transaction does.
func (t *Table) send(ctx context.Context, p prepared, tx *Transaction, summary string, want uint32, wantKnown bool) (uint32, bool, error) {
	g0, g1, err := t.tr.commit(ctx, p, tx)
	if err != nil {
		e := &Error{Table: t.describe(), Summary: summary, Err: err}
		var r *refusal
		if errors.As(err, &r) {
			e.Op, e.Err, e.More, e.unknown = r.op, r.err, r.more, r.unknown
		}
		return 0, false, e
	}
	if !g1.known {
		return 0, false, nil
	}
	if g1.gen == g0+1 && t.cfg.Generations != nil {
		t.cfg.Generations.committed(t, g0)
	}
	return g1.gen, wantKnown && g0 == want && g1.gen == g0+1, nil
}
