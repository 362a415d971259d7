package demo

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	zrt "github.com/clustron/zaris-go/runtime"
)

// fakeRecorder is a recorder whose workload clock is *now.
func fakeRecorder(workers int, now *time.Duration) *recorder {
	r := newRecorder(time.Now(), workers)
	r.since = func() time.Duration { return *now }
	return r
}

// Calls count in the phase and the second in which they started, even when added after the
// next phase began; a phase and a second report counts, latency percentiles, errors,
// retried attempts by cause and multi-key calls.
func TestRecorderPhasesAndSeconds(t *testing.T) {
	var now time.Duration
	r := fakeRecorder(2, &now)
	r.startPhase("steady", fetches{performed: 5, background: 1})
	// Worker 0: 100 calls of 1..100 ms starting in second 0.
	for i := 1; i <= 100; i++ {
		r.add(0, record{start: time.Duration(i) * time.Millisecond, latency: time.Duration(i) * time.Millisecond, attempts: 1})
	}
	now = 1500 * time.Millisecond
	r.startPhase("kill n3", fetches{performed: 7, background: 2})
	// Worker 1's call started before the kill phase but ends after it: it is steady's.
	r.add(1, record{start: 1400 * time.Millisecond, latency: 300 * time.Millisecond, attempts: 2, refReq: 1,
		retries: []string{"transport"}})
	r.add(1, record{start: 1800 * time.Millisecond, latency: 100 * time.Millisecond, attempts: 3, refReq: 2,
		retries: []string{"Moved", "Unavailable"}, class: "deadline (last: Unavailable)", ownerWaits: 2, ownerWait: 40 * time.Millisecond})
	r.add(1, record{start: 1900 * time.Millisecond, latency: time.Millisecond, attempts: 2,
		batch: &batchRecord{items: 4, itemsRetried: 2}, ownerWaits: 1, ownerWait: 70 * time.Millisecond})
	r.add(1, record{start: 1950 * time.Millisecond, latency: time.Millisecond, attempts: 1,
		batch: &batchRecord{put: true, items: 4, itemErrors: 1}, class: "in doubt"})
	r.done(0)
	r.done(1)
	phases, total, seconds := r.summarize(2500*time.Millisecond, fetches{performed: 10, background: 4})

	require.Len(t, phases, 2)
	steady, kill := phases[0], phases[1]
	assert.Equal(t, "steady", steady.Name)
	assert.Equal(t, 101, steady.Ops)
	assert.InDelta(t, 51, steady.P50Ms, 0.1) // nearest rank of 101 calls
	assert.InDelta(t, 100, steady.P99Ms, 0.1)
	assert.InDelta(t, 300, steady.MaxMs, 0.001)
	assert.Equal(t, map[string]int{"transport": 1}, steady.Retries)
	assert.Equal(t, 2, steady.AttemptsMax)
	assert.Equal(t, 1, steady.RefreshesRequested)
	assert.Equal(t, 2, steady.RefreshesPerformed)
	assert.Equal(t, 1, steady.RefreshesBackground)
	assert.InDelta(t, 1.5, steady.EndSec, 1e-9)

	assert.Equal(t, BatchReport{}, steady.Batches)
	assert.Zero(t, steady.OwnerWaitCalls)
	assert.Zero(t, steady.OwnerWaits)

	assert.Equal(t, "kill n3", kill.Name)
	assert.Equal(t, 3, kill.Ops)
	assert.Equal(t, 2, kill.ErrorCount)
	assert.Equal(t, map[string]int{"deadline (last: Unavailable)": 1, "in doubt": 1}, kill.Errors)
	assert.Equal(t, map[string]int{"Moved": 1, "Unavailable": 1}, kill.Retries)
	assert.Equal(t, 2, kill.RefreshesRequested)
	assert.Equal(t, 3, kill.RefreshesPerformed)
	assert.Equal(t, 2, kill.RefreshesBackground)
	wantBatches := BatchReport{MultiGets: 1, MultiPuts: 1, Items: 8, ItemsRetried: 2, ItemErrors: 1}
	assert.Equal(t, wantBatches, kill.Batches)
	assert.Equal(t, 2, kill.OwnerWaitCalls, "calls that waited for a new owner (rule B7)")
	assert.Equal(t, 3, kill.OwnerWaits)
	assert.InDelta(t, 70, kill.OwnerWaitMaxMs, 0.001, "the longest one call waited")

	assert.Equal(t, 104, total.Ops)
	assert.Equal(t, wantBatches, total.Batches)
	assert.Equal(t, map[string]int{"transport": 1, "Moved": 1, "Unavailable": 1}, total.Retries)
	assert.InDelta(t, 300, total.MaxMs, 0.001)
	assert.Equal(t, 3, total.RefreshesRequested)
	assert.Equal(t, 5, total.RefreshesPerformed)
	assert.Equal(t, 3, total.RefreshesBackground)
	assert.Equal(t, 2, total.OwnerWaitCalls)
	assert.Equal(t, 3, total.OwnerWaits)
	assert.InDelta(t, 70, total.OwnerWaitMaxMs, 0.001)

	require.Len(t, seconds, 2) // whole seconds only
	assert.Equal(t, 100, seconds[0].Ops)
	assert.InDelta(t, 99, seconds[0].P99Ms, 1) // a second keeps 2 significant digits
	assert.Equal(t, map[string]int{}, seconds[0].Retries)
	assert.Equal(t, 4, seconds[1].Ops)
	assert.Equal(t, 2, seconds[1].Errors)
	assert.Equal(t, map[string]int{"transport": 1, "Moved": 1, "Unavailable": 1}, seconds[1].Retries)
	assert.InDelta(t, 300, seconds[1].P99Ms, 3)
	assert.Zero(t, seconds[0].Waiting, "no call was in flight past 100 ms in second 0")
	assert.Equal(t, 1, seconds[1].Waiting, "the 300 ms call from 1.4 s waited from 1.5 s")
}

// A call counts as waiting in every second in which it had been in flight longer than
// 100 ms, whichever second it started in; a call of 100 ms or less never waits.
func TestRecorderCountsWaitingCallsPerSecond(t *testing.T) {
	var now time.Duration
	r := fakeRecorder(3, &now)
	r.startPhase("steady", fetches{})
	r.add(0, record{start: 500 * time.Millisecond, latency: 3200 * time.Millisecond, attempts: 1}) // waits 0.6 s to 3.7 s
	r.add(1, record{start: 950 * time.Millisecond, latency: 100 * time.Millisecond, attempts: 1})  // never waits
	r.add(1, record{start: 1950 * time.Millisecond, latency: 200 * time.Millisecond, attempts: 1}) // waits 2.05 s to 2.15 s
	r.add(2, record{start: 4100 * time.Millisecond, latency: time.Millisecond, attempts: 1})
	r.done(0)
	r.done(1)
	r.done(2)
	_, _, seconds := r.summarize(5*time.Second, fetches{})
	var waiting []int
	for _, s := range seconds {
		waiting = append(waiting, s.Waiting)
	}
	assert.Equal(t, []int{1, 1, 2, 1, 0}, waiting)
}

// recordCalls adds calls calls, spread evenly over seconds seconds and round-robin over the
// workers, each worker's in the order it made them, and returns the recorder.
func recordCalls(workers, calls, seconds int) *recorder {
	var now time.Duration
	r := fakeRecorder(workers, &now)
	r.startPhase("steady", fetches{})
	step := time.Duration(seconds) * time.Second / time.Duration(calls)
	for i := range calls {
		start := time.Duration(i) * step
		lat := time.Duration(i%1000+1) * 10 * time.Microsecond
		var retries []string
		if i%100 == 0 {
			retries = []string{"Moved"}
		}
		r.add(i%workers, record{start: start, latency: lat, attempts: 1 + len(retries), retries: retries})
	}
	return r
}

// The recorder's memory does not grow with the number of calls: ten times as many calls over
// the same seconds leave it holding the same histograms and no more live heap, and a second's
// histogram is released (kept for reuse) once every worker moved past it.
func TestRecorderMemoryIsConstantInCalls(t *testing.T) {
	const workers, seconds, calls = 8, 20, 20_000

	heapOf := func(n int) (int, uint64, *recorder) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := recordCalls(workers, n, seconds)
		runtime.GC()
		runtime.ReadMemStats(&after)
		return r.histograms(), after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), r
	}
	hSmall, heapSmall, small := heapOf(calls)
	hLarge, heapLarge, large := heapOf(10 * calls)

	assert.Equal(t, hSmall, hLarge, "histograms held")
	// Every worker moved past all but the last second or two: one phase histogram and at
	// most a few second histograms, live or kept for reuse.
	assert.LessOrEqual(t, hLarge, 1+3)
	// 180,000 more calls: a recorder keeping each call (over 48 bytes) would hold > 8 MiB more.
	assert.Less(t, int64(heapLarge)-int64(heapSmall), int64(2<<20), "live heap grew with the calls: %d → %d bytes", heapSmall, heapLarge)

	_, totalSmall, _ := small.summarize(seconds*time.Second, fetches{})
	_, totalLarge, secs := large.summarize(seconds*time.Second, fetches{})
	assert.Equal(t, calls, totalSmall.Ops)
	assert.Equal(t, 10*calls, totalLarge.Ops)
	assert.Equal(t, map[string]int{"Moved": 10 * calls / 100}, totalLarge.Retries)
	assert.Len(t, secs, seconds)
	runtime.KeepAlive(small)
}

// A multi-key call's attempts are its sub-requests: captureCallInfo records its batch and
// no retried attempts; a single-key call's attempts but the last are its retries.
func TestCaptureCallInfoBatchSubRequestsAreNotRetries(t *testing.T) {
	attempts := func(call *zrt.Call, statuses ...zaris.KvStatus) {
		for _, s := range statuses {
			a := call.StartAttempt()
			a.Answered, a.Status = true, zrt.Status(s)
		}
	}
	run := func(call *zrt.Call) callInfo {
		var ci callInfo
		h := captureCallInfo(func(context.Context, *zrt.Call) (zrt.Response, error) { return nil, nil })
		_, _ = h(context.WithValue(context.Background(), callInfoKey{}, &ci), call)
		return ci
	}

	single := zrt.NewCall(zarisclient.OpGet, []byte("k"), nil, false)
	attempts(single, zaris.KvStatus_Moved, zaris.KvStatus_Ok)
	ci := run(single)
	assert.Equal(t, []string{"Moved status"}, ci.retries)
	assert.Nil(t, ci.batch)

	batch := zrt.NewCall(zarisclient.OpMultiGet, nil, nil, false)
	batch.Batch = &zrt.Batch{Items: mwt.Items(4), Errs: []error{nil, nil, nil, errors.New("no answer")},
		Stats: zrt.BatchStats{Rounds: 2, SubRequests: 3, ItemsRetried: 2}}
	attempts(batch, zaris.KvStatus_Ok, zaris.KvStatus_Ok, zaris.KvStatus_Ok)
	ci = run(batch)
	assert.Empty(t, ci.retries, "sub-requests are not retries")
	assert.Equal(t, 2, ci.attempts, "a batch's attempts are its rounds, not its sub-requests")
	assert.Equal(t, &batchRecord{items: 4, itemsRetried: 2, itemErrors: 1}, ci.batch)
}

// An event that began after the workload's end (its timer and the end of the workload were
// both due on a loaded machine, and the end's timer had not fired yet) has an empty phase that
// ends where it starts, not before.
func TestSummarizeEventAfterTheEnd(t *testing.T) {
	var now time.Duration
	r := fakeRecorder(1, &now)
	r.startPhase("steady", fetches{})
	for _, at := range []time.Duration{time.Second, 2 * time.Second, 3900 * time.Millisecond} {
		r.add(0, record{start: at, latency: time.Millisecond, attempts: 1})
	}
	now = 4100 * time.Millisecond
	r.startPhase("leave", fetches{})
	r.done(0)
	phases, total, _ := r.summarize(4*time.Second, fetches{})

	require.Len(t, phases, 2)
	assert.Equal(t, 3, phases[0].Ops)
	assert.Equal(t, 0, phases[1].Ops)
	assert.InDelta(t, 4.1, phases[1].StartSec, 1e-9)
	assert.InDelta(t, 4.1, phases[1].EndSec, 1e-9)
	assert.Zero(t, phases[1].OpsPerS)
	assert.Equal(t, 3, total.Ops)
}
