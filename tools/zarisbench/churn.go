package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/zaris/demo"
)

// churnResult is section 4: one demo run with every churn kind once.
type churnResult struct {
	Schedule string `json:"schedule"`
	Workers  int    `json:"workers"`
	Nodes    int    `json:"nodes"`
	// Steady is the steady phase (before the first event, less its first second of
	// warm-up for the answer rate).
	Steady churnPhase `json:"steady"`
	// Events has one row per event.
	Events []churnPhase `json:"events"`
	// Kill is the time from the kill to the first answer on the killed node's segments.
	Kill *killResult `json:"kill,omitempty"`
	// Stall is the time from the stall (demo.StallFor, as SIGSTOP) to the first answer on
	// the stalled node's segments from another node (rule B6 of the client).
	Stall *killResult `json:"stall,omitempty"`
	// LostHost is the time from a host's loss (demo.LostHost: it stops answering without
	// refusing, and stays lost past the failover) to the first answer on each of its
	// segments from another node, against the store's first map with new owners.
	LostHost *killResult `json:"lostHost,omitempty"`
	// KillAfterRefresh is the kill of the callers' keys' owner right after a map refresh,
	// inside the debounce window (a cluster of its own; rule B7).
	KillAfterRefresh *refreshKillResult `json:"killAfterRefresh,omitempty"`
	// MapFetches counts the map fetches the client made during the workload (GetClusterMap
	// calls on the wire) and RefreshesRequested the refreshes calls asked for; EpochChanges
	// is how far the epoch the answers carried moved. Target: MapFetches <= EpochChanges.
	MapFetches         int   `json:"mapFetches"`
	RefreshesPerformed int   `json:"refreshesPerformed"`
	RefreshesRequested int   `json:"refreshesRequested"`
	EpochChanges       int64 `json:"epochChanges"`
	// Verified is the demo's read-back verdict: no acknowledged write lost.
	Verified bool   `json:"verified"`
	Problem  string `json:"problem,omitempty"`
}

// churnPhase is one phase of the demo, with what the transport saw during it.
type churnPhase struct {
	Name     string  `json:"name"`
	AtSec    float64 `json:"atSec"`
	TookMs   float64 `json:"tookMs"`
	Errors   int     `json:"errors"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	OpsPerS  float64 `json:"phaseOpsPerSec"`
	P99Ratio float64 `json:"p99RatioToSteady"`
	// DuringOpsPerS is the answer rate over the event's own span (at least eventWindow);
	// BeforeOpsPerS is the rate over the eventWindow just before the event, the steady
	// state next to it in time (the load of a shared machine drifts over a run).
	// DuringRatio is during over before (target >= 0.8 for migrate, join, failback and
	// leave); SteadyRatio is during over the steady phase's rate.
	DuringOpsPerS float64 `json:"duringOpsPerSec"`
	BeforeOpsPerS float64 `json:"beforeOpsPerSec"`
	DuringRatio   float64 `json:"duringRatio"`
	SteadyRatio   float64 `json:"steadyRatio"`
	// ZeroWindowMs is the longest time in the phase with no answered call at all.
	ZeroWindowMs float64 `json:"zeroWindowMs"`
	// RefreshesRequested are the refreshes the phase's calls asked for, RefreshesPerformed
	// the map fetches, RefreshesBackground those of them no call's request started.
	RefreshesRequested  int `json:"refreshesRequested"`
	RefreshesPerformed  int `json:"refreshesPerformed"`
	RefreshesBackground int `json:"refreshesBackground"`
	// OwnerWaitCalls counts the calls that waited for a map naming a new owner (rule B7),
	// OwnerWaitMaxMs the longest one call spent so.
	OwnerWaitCalls int     `json:"ownerWaitCalls"`
	OwnerWaitMaxMs float64 `json:"ownerWaitMaxMs"`
}

// killResult is the kill's effect on the dead node's segments.
type killResult struct {
	Node     string `json:"node"`
	Segments int    `json:"segments"`
	// FirstMs is the time from the kill to the first answer on any of the dead node's
	// segments from another node; AllMs to the moment every one of them had answered.
	FirstMs float64 `json:"firstMs"`
	AllMs   float64 `json:"allMs"`
	// TargetMs is the store's failure timeout plus one backoff step (a kill), its failover
	// plus 500 ms (a stall), or its first map with new owners plus 600 ms (a lost host).
	TargetMs float64 `json:"targetMs"`
	// FailoverMs, for a stall or a lost host, is when the store had failed the node over;
	// NewOwnerMs when its first map with new owners for the node's segments appeared.
	FailoverMs float64 `json:"failoverMs,omitempty"`
	NewOwnerMs float64 `json:"newOwnerMs,omitempty"`
	// LostMs, for a lost host, is how long it stayed lost.
	LostMs float64 `json:"lostMs,omitempty"`
}

// eventWindow is the shortest span an event's "during" rate is taken over: a kill
// returns at once, but its effect lasts until the failover.
const eventWindow = time.Second

// churn runs the demo engine with schedule and summarizes section 4.
func churn(ctx context.Context, workers int, duration time.Duration, schedule string) (churnResult, error) {
	r := churnResult{Schedule: schedule, Workers: workers, Nodes: 3}
	events, err := demo.ParseSchedule(schedule)
	if err != nil {
		return r, err
	}
	base, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(noEnv), runtime.WithSeeds("127.0.0.1:1"))
	if err != nil {
		return r, err
	}
	rec := newRecorder(defaultSegments)
	rep, err := demo.Run(ctx, demo.Config{
		Nodes: r.Nodes, Workers: workers, KeysPerWorker: 4, Duration: duration, Schedule: events,
		Protocol:      runtime.ProtocolBinary,
		ClientOptions: []runtime.Option{runtime.WithEnv(noEnv), runtime.WithDialer(rec.dialer(runtime.DefaultDialer(base)))},
	})
	if err != nil {
		return r, err
	}
	r.Verified = rep.OK()
	if !r.Verified {
		r.Problem = fmt.Sprintf("lost %d, misreported %d, %s", len(rep.Verification.Lost), len(rep.Verification.Misreported), rep.Verification.Error)
	}
	answers, addrs := rec.snapshot()
	r.MapFetches = int(rec.fetches.Load())
	if lo, hi := rec.minEpoch.Load(), rec.maxEpoch.Load(); hi >= lo {
		r.EpochChanges = hi - lo
	}
	r.RefreshesPerformed = rep.Total.RefreshesPerformed
	r.RefreshesRequested = rep.Total.RefreshesRequested
	end := time.Duration(rep.Phases[len(rep.Phases)-1].EndSec * float64(time.Second))
	var stallFailover float64
	for i, p := range rep.Phases {
		start := time.Duration(p.StartSec * float64(time.Second))
		stop := time.Duration(p.EndSec * float64(time.Second))
		cp := churnPhase{Name: p.Name, AtSec: p.StartSec, Errors: p.ErrorCount, P99Ms: p.P99Ms, MaxMs: p.MaxMs, OpsPerS: p.OpsPerS,
			RefreshesRequested: p.RefreshesRequested, RefreshesPerformed: p.RefreshesPerformed, RefreshesBackground: p.RefreshesBackground,
			OwnerWaitCalls: p.OwnerWaitCalls, OwnerWaitMaxMs: p.OwnerWaitMaxMs}
		cp.ZeroWindowMs = ms(longestGap(answers, start, stop))
		if i == 0 {
			warm := min(time.Second, stop/2)
			cp.DuringOpsPerS = rate(answers, warm, stop)
			cp.BeforeOpsPerS = cp.DuringOpsPerS
			cp.DuringRatio, cp.SteadyRatio, cp.P99Ratio = 1, 1, 1
			r.Steady = cp
			continue
		}
		if i-1 < len(rep.Events) {
			cp.TookMs = rep.Events[i-1].TookMs
		}
		span := max(time.Duration(cp.TookMs*float64(time.Millisecond)), eventWindow)
		cp.DuringOpsPerS = rate(answers, start, min(start+span, end))
		cp.BeforeOpsPerS = rate(answers, max(start-eventWindow, 0), start)
		cp.DuringRatio = ratio(cp.DuringOpsPerS, cp.BeforeOpsPerS)
		cp.SteadyRatio = ratio(cp.DuringOpsPerS, r.Steady.DuringOpsPerS)
		cp.P99Ratio = ratio(cp.P99Ms, r.Steady.P99Ms)
		r.Events = append(r.Events, cp)
		if strings.HasPrefix(p.Name, "kill") {
			r.Kill = killEffect(answers, addrs, start, stop)
		}
		if strings.HasPrefix(p.Name, "stall") && i-1 < len(rep.Events) {
			// Within the stall only: the node answers again once it is back.
			r.Stall = killEffect(answers, addrs, start, min(stop, start+demo.StallFor))
			stallFailover = rep.Events[i-1].FailoverMs
			if r.Stall != nil {
				r.Stall.FailoverMs = stallFailover
				r.Stall.NewOwnerMs = rep.Events[i-1].NewOwnerMs
			}
		}
		if strings.HasPrefix(p.Name, "lost-host") && i-1 < len(rep.Events) {
			// While the host is lost only: its replacement serves nothing until a failback,
			// but the measure is the failover's.
			ev := rep.Events[i-1]
			r.LostHost = lostHostEffect(answers, addrs, start, stop, ev)
		}
	}
	if r.Kill != nil {
		r.Kill.TargetMs = ms(base.Retry.Backoff + 250*time.Millisecond) // store.DefaultFailureTimeout
	}
	if r.Stall != nil {
		r.Stall.TargetMs = stallFailover + 500 // the store's failover, plus 500 ms (rule B6)
	}
	return r, nil
}

// lostHostEffect is killEffect over the time the host of event ev (a lost host that
// started at start, in a phase that ended at stop) was lost, with the store's failover,
// its first map with new owners and the target: that map plus 600 ms (one debounce window
// of 500 ms, rules B6 and B7, and 100 ms for the retry itself). Without a new owner the
// target is 0: nothing is kept.
func lostHostEffect(as []answer, addrs []string, start, stop time.Duration, ev demo.EventReport) *killResult {
	lost := time.Duration(ev.LostMs * float64(time.Millisecond))
	if lost <= 0 {
		lost = stop - start
	}
	k := killEffect(as, addrs, start, min(stop, start+lost))
	if k == nil {
		return nil
	}
	k.FailoverMs, k.NewOwnerMs, k.LostMs = ev.FailoverMs, ev.NewOwnerMs, ev.LostMs
	if ev.NewOwnerMs > 0 {
		k.TargetMs = ev.NewOwnerMs + 600
	}
	return k
}

// rate is the answers per second in [from, to).
func rate(as []answer, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	lo, hi := span(as, from, to)
	return float64(hi-lo) / (to - from).Seconds()
}

// span returns the indexes of the answers in [from, to).
func span(as []answer, from, to time.Duration) (lo, hi int) {
	cmp := func(a answer, t time.Duration) int { return int(a.at - t) }
	lo, _ = slices.BinarySearchFunc(as, from, cmp)
	hi, _ = slices.BinarySearchFunc(as, to, cmp)
	return lo, hi
}

// longestGap is the longest time in [from, to) with no answer.
func longestGap(as []answer, from, to time.Duration) time.Duration {
	lo, hi := span(as, from, to)
	prev, gap := from, time.Duration(0)
	for _, a := range as[lo:hi] {
		gap = max(gap, a.at-prev)
		prev = a.at
	}
	return max(gap, to-prev)
}

// killEffect finds the killed node (the address that answered before the kill and never
// in the rest of the phase), its segments (those it answered last before the kill) and
// how long after the kill other nodes answered for them.
func killEffect(as []answer, addrs []string, at, stop time.Duration) *killResult {
	lo, hi := span(as, at-time.Second, at)
	before := map[uint16]int{}
	lastBy := map[int16]uint16{}
	for _, a := range as[lo:hi] {
		before[a.addr]++
		lastBy[a.seg] = a.addr
	}
	lo2, hi2 := span(as, at+50*time.Millisecond, stop)
	after := map[uint16]int{}
	for _, a := range as[lo2:hi2] {
		after[a.addr]++
	}
	dead := -1
	for addr := range before {
		if after[addr] == 0 {
			dead = int(addr)
		}
	}
	if dead < 0 {
		return nil
	}
	first := map[int16]time.Duration{}
	for _, a := range as[hi:] {
		if a.at >= stop {
			break
		}
		if lastBy[a.seg] == uint16(dead) && a.addr != uint16(dead) {
			if _, ok := first[a.seg]; !ok {
				first[a.seg] = a.at - at
			}
		}
	}
	k := &killResult{Node: addrs[dead]}
	for seg, addr := range lastBy {
		if addr != uint16(dead) {
			continue
		}
		k.Segments++
		t, ok := first[seg]
		if !ok {
			t = stop - at // never answered in the phase
		}
		if k.FirstMs == 0 || ms(t) < k.FirstMs {
			k.FirstMs = ms(t)
		}
		k.AllMs = max(k.AllMs, ms(t))
	}
	return k
}

// sortAnswers puts answers in time order (they are stamped before the recorder's lock).
func sortAnswers(as []answer) {
	slices.SortFunc(as, func(a, b answer) int { return int(a.at - b.at) })
}
