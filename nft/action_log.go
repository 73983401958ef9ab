package nft

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Log logs the packet to the kernel log with Prefix.
type Log struct {
	Prefix string
}

// NFLog sends the packet to nflog Group with Prefix (at most 63 bytes).
type NFLog struct {
	Group  uint16
	Prefix string
}

func (a Log) printAction(c *ruleContext) string {
	if a.Prefix == "" {
		return "log"
	}
	return "log prefix " + quote(a.Prefix)
}

func (a Log) encodeAction(e *encoder) error {
	l := &expr.Log{}
	if a.Prefix != "" {
		l.Key |= logPrefixAttr
		l.Data = []byte(a.Prefix)
	}
	e.add(l)
	return nil
}

func (a Log) checkAction(rc *ruleCheck) error {
	return checkText("log prefix", a.Prefix, maxLogPrefixLen)
}

func (a Log) inARP() bool { return true }

func (a Log) refs(chain, set func(string)) {}

func (a NFLog) printAction(c *ruleContext) string {
	if a.Prefix == "" {
		return fmt.Sprintf("log group %d", a.Group)
	}
	return fmt.Sprintf("log prefix %s group %d", quote(a.Prefix), a.Group)
}

func (a NFLog) encodeAction(e *encoder) error {
	l := &expr.Log{Key: logGroupAttr, Group: a.Group}
	if a.Prefix != "" {
		l.Key |= logPrefixAttr
		l.Data = []byte(a.Prefix)
	}
	e.add(l)
	return nil
}

func (a NFLog) checkAction(rc *ruleCheck) error {
	return checkText("nflog prefix", a.Prefix, maxNFLogPrefix)
}

func (a NFLog) inARP() bool { return true }

func (a NFLog) refs(chain, set func(string)) {}

// Log attributes present (expr.Log.Key is a bitmap of NFTA_LOG_*).
const (
	logPrefixAttr = 1 << unix.NFTA_LOG_PREFIX
	logGroupAttr  = 1 << unix.NFTA_LOG_GROUP
)

// decodeLog reads `log [prefix "p"]` and `log [prefix "p"] group N`.
func decodeLog(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	l, ok := at[*expr.Log](xs, 0)
	if !ok || len(xs) != 1 {
		return nil, false
	}
	if l.Key&logGroupAttr != 0 {
		return NFLog{Group: l.Group, Prefix: string(l.Data)}, true
	}
	return Log{Prefix: string(l.Data)}, true
}
