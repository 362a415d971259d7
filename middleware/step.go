package middleware

import (
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// retryStep is what the rules put between an attempt that asked for a retry and the next
// one: the backoff of rule R5 and the shared map refresh R2 and R3 ask for, or in their
// place the wait for a new owner of rule B7, which a refresh follows when it runs out. A
// single call takes one before each retry (callStep: Backoff sleeps its backoff with
// sleepBackoff, RefreshOnMoved takes the rest with awaitThenRefresh); a multi-key call
// takes its pending items' between rounds, together (batchRun.step).
type retryStep struct {
	backoff time.Duration       // how long to back off (R5)
	refresh bool                // whether to refresh the map before the retry (R2, R3)
	ev      clustermap.Evidence // the refresh's evidence (evidenceOf the attempt; the newest, merged)
	awaits  bool                // whether wait stands in for backoff and refresh (B7)
	wait    ownerWait
}

// ownerWait is one wait of rule B7: for a map that moves key's segment away from node
// gone, until until. ev is the evidence of the attempt that could not reach gone, which
// the refresh after a wait that ran out carries.
type ownerWait struct {
	key   []byte
	gone  int32
	until time.Time
	ev    clustermap.Evidence
}

// stepAfter returns the step before the attempt that follows prior (the attempts so far of
// a call of call.Op with call.Deadline, or of one item of a multi-key call, whose key is
// key; at least one), at now: a wait for a new owner when OwnerWaitUntil says so and await
// is set; else R5's Delay after len(prior) attempts with the last one's SlowFactor (none
// when AtOnce), and a refresh when the last attempt is RefreshRetry.
func stepAfter(p runtime.RetryPolicy, call *runtime.Call, prior []runtime.Attempt, key []byte, await bool, now time.Time) retryStep {
	last := &prior[len(prior)-1]
	s := retryStep{ev: evidenceOf(last)}
	if until, ok := OwnerWaitUntil(p, prior, call.Deadline, now); ok && await {
		s.awaits, s.wait = true, ownerWait{key: key, gone: last.Node, until: until, ev: s.ev}
		return s
	}
	if !AtOnce(last) {
		s.backoff = Delay(p, len(prior), SlowFactor(p, call, last), now, call.Deadline)
	}
	s.refresh = last.Class == runtime.RefreshRetry
	return s
}

// callStep returns the step before the attempt in flight of a single call (the last of
// call.Attempts, not the first), at now. A call sent to a fixed node (call.Target: a
// multi-key sub-request) waits for no new owner.
func callStep(p runtime.RetryPolicy, call *runtime.Call, now time.Time) retryStep {
	return stepAfter(p, call, call.Earlier(), call.Key, call.Target == nil, now)
}

// evidenceOf is the evidence attempt a gives a refresh: its end, and its answer's epoch
// when it was answered.
func evidenceOf(a *runtime.Attempt) clustermap.Evidence {
	ev := clustermap.Evidence{At: a.End}
	if a.Answered {
		ev.Epoch = a.AnswerEpoch
	}
	return ev
}

// newer merges two refresh requests' evidence: the newer epoch and the later time.
func newer(a, b clustermap.Evidence) clustermap.Evidence {
	if b.At.After(a.At) {
		a.At = b.At
	}
	a.Epoch = max(a.Epoch, b.Epoch)
	return a
}
