package store

import (
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// tokenKey is a request token (zaris.RequestToken): a client id and its call's number.
type tokenKey struct{ client, sequence int64 }

// outcomeRec is the first outcome of a tokened write, and when this copy of the segment
// learned it, on the node's monotonic clock.
type outcomeRec struct {
	version, value int64
	at             time.Duration
}

// outcomes are a segment's first outcomes of tokened writes (rule B8): a replay of a token
// it holds is answered with the outcome and applies nothing. Each is kept for the node's
// dedup window from when this copy learned it (never less than from the write itself:
// the owner records it when it applies the write, a copy when the write or the segment's
// copy reaches it), and at most cap of them per segment: beyond that the oldest goes even
// inside its window, and the node counts it (Stats.OutcomesEvictedEarly). Callers hold the
// segment's mu.
type outcomes struct {
	byToken map[tokenKey]outcomeRec
	order   []tokenKey // oldest first; order[head:] are live (some may be re-learned later)
	head    int
}

// lookup returns the outcome recorded for tok, if it is kept and within window at now.
func (o *outcomes) lookup(tok tokenKey, now, window time.Duration) (outcomeRec, bool) {
	r, ok := o.byToken[tok]
	if !ok || now-r.at >= window {
		return outcomeRec{}, false
	}
	return r, true
}

// remember records out, learned at now, unless its token is already kept, then drops what
// window and cap no longer keep. It returns how many outcomes went before their window
// ended.
func (o *outcomes) remember(out *zarispeer.Outcome, now, window time.Duration, cap int) (early int) {
	if out == nil {
		return 0
	}
	tok := tokenKey{out.Client, out.Sequence}
	if o.byToken == nil {
		o.byToken = make(map[tokenKey]outcomeRec)
	}
	if _, ok := o.byToken[tok]; !ok {
		o.byToken[tok] = outcomeRec{version: out.Version, value: out.Value, at: now}
		o.order = append(o.order, tok)
	}
	return o.prune(now, window, cap)
}

// prune drops the outcomes older than window and, past cap, the oldest ones; it returns
// how many of those were still within their window.
func (o *outcomes) prune(now, window time.Duration, cap int) (early int) {
	for o.head < len(o.order) {
		tok := o.order[o.head]
		r := o.byToken[tok]
		young := now-r.at < window
		if young && len(o.byToken) <= cap {
			break
		}
		delete(o.byToken, tok)
		o.order[o.head] = tokenKey{}
		o.head++
		if young {
			early++
		}
	}
	if o.head > len(o.order)/2 && o.head > 64 {
		o.order = append(o.order[:0], o.order[o.head:]...)
		o.head = 0
	}
	return early
}

// list returns the kept outcomes, oldest first, for a learner's copy of the segment.
func (o *outcomes) list(now, window time.Duration) []*zarispeer.Outcome {
	out := make([]*zarispeer.Outcome, 0, len(o.byToken))
	for _, tok := range o.order[o.head:] {
		if r, ok := o.lookup(tok, now, window); ok {
			out = append(out, &zarispeer.Outcome{Client: tok.client, Sequence: tok.sequence, Version: r.version, Value: r.value})
		}
	}
	return out
}

// firstOutcome returns the outcome seg keeps for tok (nil: none), if the node keeps
// outcomes. Callers hold seg.mu.
func (n *Node) firstOutcome(seg *segment, tok *zaris.RequestToken) (outcomeRec, bool) {
	if tok == nil || n.cfg.DisableDedup {
		return outcomeRec{}, false
	}
	return seg.outcomes.lookup(tokenKey{tok.Client, tok.Sequence}, n.cfg.Clock.Mono(), n.cfg.DedupWindow)
}

// remember keeps out (nil: none) in seg, learned now, and counts the outcomes that had to
// go before their window ended, logging the first. Callers hold seg.mu.
func (n *Node) remember(seg *segment, out *zarispeer.Outcome) {
	if out == nil || n.cfg.DisableDedup {
		return
	}
	if early := seg.outcomes.remember(out, n.cfg.Clock.Mono(), n.cfg.DedupWindow, n.cfg.DedupOutcomes); early > 0 {
		if n.outcomesEvictedEarly.Add(int64(early)) == int64(early) {
			n.cfg.Logger.Warn("a segment holds DedupOutcomes outcomes of tokened writes: the oldest go before their dedup window ends, and a replay of one would apply again",
				"cap", n.cfg.DedupOutcomes, "window", n.cfg.DedupWindow)
		}
	}
}

// OutcomesEvictedEarly is how many outcomes of tokened writes this node dropped before their
// dedup window ended because a segment held DedupOutcomes of them: a replay of one of those
// would apply again.
func (n *Node) OutcomesEvictedEarly() int64 { return n.outcomesEvictedEarly.Load() }
