package runtime

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/runtime/clock"
)

// Rule B6, second half: a node that owes replies and has answered nothing for longer than
// its silence threshold is suspected, and a suspicion asks for one shared map refresh in
// the background under R6's debounce, so that a caller whose keys are all on a stalled
// node learns of the failover with no other traffic. A suspected node is also asked for
// the map last.

const (
	// silenceFloor is the least silence (rule B6) after which a node that owes replies is
	// suspected, however fast its recent replies were.
	silenceFloor = 200 * time.Millisecond
	// silenceCeiling is the most: a node silent this long while it owes replies is
	// suspected however slow its recent replies were (the attempt timeout, if shorter).
	silenceCeiling = time.Second
	// silenceFactor times a node's recent reply time (a moving average) is its threshold,
	// between the floor and the ceiling.
	silenceFactor = 8
)

// nodeHealth is what the client knows of one node's replies: the requests it owes, when
// it last made progress (a reply, or the start of a debt after owing nothing), and its
// recent reply time. Each is one atomic word, updated by the calls themselves.
type nodeHealth struct {
	owed   atomic.Int64
	since  atomic.Int64 // on the engine's clock, ns since health.base
	recent atomic.Int64 // moving average of reply times, ns; 0 before the first
}

// health is an engine's nodeHealth per node address, and the watcher that suspects the
// silent ones: a goroutine that runs every silenceFloor/4 while any node owes a reply and
// sleeps on kick otherwise.
type health struct {
	clock   clock.Clock
	base    time.Time
	ceiling time.Duration
	nodes   atomic.Pointer[map[string]*nodeHealth] // replaced copy-on-write under mu
	mu      sync.Mutex
	kick    chan struct{} // wakes the watcher when a node starts owing
	done    chan struct{}
	stopped sync.WaitGroup
	// suspect is told the address of a silent node (Engine.suspected).
	suspect func(addr string)
	// suspicions counts them, for tests and Engine.Suspicions.
	suspicions atomic.Uint64
}

func newHealth(clock clock.Clock, attemptTimeout time.Duration, suspect func(string)) *health {
	h := &health{clock: clock, base: clock.Now(), ceiling: min(silenceCeiling, attemptTimeout),
		kick: make(chan struct{}, 1), done: make(chan struct{}), suspect: suspect}
	h.ceiling = max(h.ceiling, silenceFloor)
	h.nodes.Store(&map[string]*nodeHealth{})
	h.stopped.Add(1)
	go h.watch()
	return h
}

// node returns addr's record, making it on first use.
func (h *health) node(addr string) *nodeHealth {
	return getOrAdd(&h.nodes, &h.mu, addr, func() (*nodeHealth, bool) { return &nodeHealth{}, true })
}

// begin notes a request written to n's node.
func (h *health) begin(n *nodeHealth) {
	if n.owed.Add(1) == 1 {
		n.since.Store(int64(h.clock.Now().Sub(h.base)))
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// end notes the end of a request begun at start that took d, answered or not.
func (h *health) end(n *nodeHealth, start time.Time, d time.Duration, answered bool) {
	if answered {
		n.since.Store(int64(start.Add(d).Sub(h.base)))
		if old := n.recent.Load(); old == 0 {
			n.recent.Store(int64(d))
		} else {
			n.recent.Store(old + (int64(d)-old)/8)
		}
	}
	n.owed.Add(-1)
}

// debt is the reply one attempt makes its node owe, from when its request is written (or
// queued, on a pipelined connection) to its end: time spent dialing, waiting for a
// connection or encoding is the client's, not the node's.
type debt struct {
	h    *health
	n    *nodeHealth
	owed bool
}

// owe makes the node owe the reply, once.
func (d *debt) owe() {
	if !d.owed && d.n != nil {
		d.owed = true
		d.h.begin(d.n)
	}
}

// settle ends the debt of an attempt that started at start and took took in all.
func (d *debt) settle(start time.Time, took time.Duration, answered bool) {
	if d.owed {
		d.h.end(d.n, start, took, answered)
	}
	*d = debt{}
}

// threshold is how long n may owe replies and answer nothing before it is suspected.
func (h *health) threshold(n *nodeHealth) time.Duration {
	return min(max(silenceFactor*time.Duration(n.recent.Load()), silenceFloor), h.ceiling)
}

// silent reports whether n owes replies and has been silent past its threshold at now.
func (h *health) silent(n *nodeHealth, now time.Time) bool {
	return n.owed.Load() > 0 && now.Sub(h.base)-time.Duration(n.since.Load()) > h.threshold(n)
}

// watch suspects, every silenceFloor/4 while any node owes a reply, the silent nodes.
func (h *health) watch() {
	defer h.stopped.Done()
	owing := false
	for {
		if !owing {
			select {
			case <-h.kick:
			case <-h.done:
				return
			}
		}
		t := h.clock.NewTimer(silenceFloor / 4)
		select {
		case <-t.C():
		case <-h.done:
			t.Stop()
			return
		}
		now := h.clock.Now()
		owing = false
		for addr, n := range *h.nodes.Load() {
			if n.owed.Load() == 0 {
				continue
			}
			owing = true
			if h.silent(n, now) {
				h.suspicions.Add(1)
				h.suspect(addr)
			}
		}
	}
}

// close stops the watcher and waits for it.
func (h *health) close() {
	close(h.done)
	h.stopped.Wait()
}

// last returns addrs with the silent nodes moved to the end, in their order.
func (h *health) last(addrs []string) []string {
	now := h.clock.Now()
	nodes := *h.nodes.Load()
	silent := func(a string) bool { n := nodes[a]; return n != nil && h.silent(n, now) }
	if !slices.ContainsFunc(addrs, silent) {
		return addrs
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if !silent(a) {
			out = append(out, a)
		}
	}
	for _, a := range addrs {
		if silent(a) {
			out = append(out, a)
		}
	}
	return out
}

// suspected is told a silent node: it asks for one shared background refresh, which R6's
// debounce turns into a no-op within the window of the last one.
func (c *Engine) suspected(string) { c.refresher.refreshInBackground() }

// Suspicions returns how many times a node that owed replies was found silent past its
// threshold (rule B6); each asked for a map refresh, subject to R6's debounce.
func (c *Engine) Suspicions() uint64 { return c.health.suspicions.Load() }

// refreshInBackground starts a shared fetch without waiting for it, unless one runs, or
// the last completed within the debounce window (R6): then, unless that fetch started
// after this request, one is deferred to the window's end (B7). It counts as a request.
func (r *Refresher) refreshInBackground() {
	r.requested.Add(1)
	if r.stopped.Load() || r.inflight.Load() {
		r.coalesced.Add(1)
		return
	}
	if r.withinDebounce() {
		r.debouncedFor(r.clock.Now())
		return
	}
	r.group.DoChan(flightKey, r.flight(nil, true))
}
