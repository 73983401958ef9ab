package dataplane

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ControlSocketName is the Unix socket a running daemon (run, driver)
// answers on in its run directory: `nftep show` and `nftep status` ask it
// for the live ruleset and statuses.
//
// A daemon does not rewrite ruleset.nft after every apply: printing the
// whole ruleset costs time in proportion to the table (about 3 MB of text
// at 1,000 endpoints) and blocked the loop after every change. It prints
// it when asked, from the loop, between batches, so the answer is always
// the ruleset as last programmed. ruleset.nft is written when a daemon
// stops and by `nftep apply`, for `nftep show` to read when no daemon
// answers.
const ControlSocketName = "control.sock"

// Control requests: one line, the answer is the rest of the connection.
const (
	controlRuleset     = "ruleset"      // the programmed tables in nft syntax
	controlRulesetJSON = "ruleset-json" // the programmed tables as JSON ([]TableJSON)
	controlStatus      = "status"       // the Status as JSON
)

// controlTimeout bounds one control connection: the request line, the
// loop's answer (it may be in the middle of a large apply) and writing it.
const controlTimeout = 30 * time.Second

// evControl is a control request handed to the loop; the loop answers on
// reply (buffered).
type evControl struct {
	what  string
	reply chan controlAnswer
}

type controlAnswer struct {
	body []byte
	err  error
}

// serveControl listens on the run directory's control socket and hands
// each request to the loop, until the returned stop is called (it closes
// and removes the socket). A socket it cannot create is only logged: the
// daemon works without it (show and status then read the files).
func (l *loop) serveControl(ctx context.Context) (stop func()) {
	stop = func() {}
	if l.opts.RunDir == "" {
		return stop
	}
	path := filepath.Join(l.opts.RunDir, ControlSocketName)
	if err := EnsureRunDir(l.opts.RunDir); err != nil {
		l.log.Warn("no control socket: cannot create the run directory", "error", err)
		return stop
	}
	// A socket file left by a daemon that died is in the way; a live
	// daemon's is not ours to take (two daemons must not share a run
	// directory).
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		l.log.Warn("no control socket: another nftep answers on it", "socket", path)
		return stop
	}
	os.Remove(path)
	// The socket ends up 0600 (nftep's state is root's). Until the chmod
	// below, the run directory (0700, nftep's user's: EnsureRunDir)
	// keeps everyone else from connecting. The process umask is not
	// narrowed around the bind: it is process-wide, and a file or a child
	// process made meanwhile by another goroutine would inherit it (a
	// test's `go build` did, and made a binary without execute bits).
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		l.log.Warn("no control socket", "socket", path, "error", err)
		return stop
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		l.log.Warn("no control socket", "socket", path, "error", err)
		return stop
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			go l.answerControl(ctx, c)
		}
	}()
	return func() {
		ln.Close()
		<-done
		os.Remove(path)
	}
}

// answerControl reads one request from c, has the loop answer it and
// writes the answer.
func (l *loop) answerControl(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(controlTimeout))
	line, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	if err != nil {
		return
	}
	ev := evControl{what: strings.TrimSpace(line), reply: make(chan controlAnswer, 1)}
	l.send(ctx, ev)
	var a controlAnswer
	select {
	case a = <-ev.reply:
	case <-ctx.Done():
		a.err = errors.New("nftep is stopping")
	case <-time.After(controlTimeout):
		a.err = errors.New("the loop did not answer in time")
	}
	if a.err != nil {
		fmt.Fprintf(c, "error: %v\n", a.err)
		return
	}
	c.Write([]byte("ok\n"))
	c.Write(a.body)
}

// onControl answers a control request from the loop's state.
func (l *loop) onControl(ev evControl) {
	var a controlAnswer
	switch ev.what {
	case controlRuleset, controlRulesetJSON:
		switch {
		case l.eng == nil || l.lastApply.IsZero():
			a.err = errors.New("nothing programmed yet")
		case l.nftFailed:
			a.err = fmt.Errorf("the last apply failed (%v): the kernel holds the ruleset before it; `nft list table inet %s` shows it", l.applyErr, l.eng.cfg.Render.TableName)
		case ev.what == controlRulesetJSON:
			a.body, a.err = json.Marshal(l.eng.tablesJSON())
		default:
			a.body = []byte(l.eng.ruleset())
		}
	case controlStatus:
		a.body, a.err = json.MarshalIndent(l.status(), "", "  ")
	default:
		a.err = fmt.Errorf("unknown request %q", ev.what)
	}
	ev.reply <- a
}

// askDaemon asks the daemon answering on runDir's control socket; it
// returns an error wrapping os.ErrNotExist when none answers (no socket,
// or the one a dead daemon left).
func askDaemon(runDir, what string) ([]byte, error) {
	path := filepath.Join(runDir, ControlSocketName)
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, fmt.Errorf("no nftep answers on %s: %w (%w)", path, os.ErrNotExist, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(controlTimeout + 5*time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", what); err != nil {
		return nil, fmt.Errorf("ask nftep on %s: %w", path, err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("ask nftep on %s: %w", path, err)
	}
	if msg, ok := strings.CutPrefix(head, "error: "); ok {
		return nil, fmt.Errorf("nftep on %s: %s", path, strings.TrimSpace(msg))
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("ask nftep on %s: %w", path, err)
	}
	return body, nil
}

// LiveStatus asks the daemon running with runDir for its status.
func LiveStatus(runDir string) (*Status, error) {
	body, err := askDaemon(runDir, controlStatus)
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("status from nftep: %w", err)
	}
	return &s, nil
}
