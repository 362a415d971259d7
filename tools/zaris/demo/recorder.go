package demo

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Latencies are recorded in microseconds, from 1 µs to maxLatency (longer ones count as
// maxLatency). A phase keeps 3 significant digits, a second (which only plots its p99) 2.
const (
	maxLatency       = time.Hour
	phaseSigFigs     = 3
	secondSigFigs    = 2
	latencyUnit      = time.Microsecond
	noCallInProgress = time.Duration(math.MaxInt64)
)

// waitingAfter is how long a call is in flight before the timeline counts it as waiting.
const waitingAfter = 100 * time.Millisecond

// fetches is what the refresher's counters say of its map fetches at one moment.
type fetches struct {
	performed  uint64 // fetches that brought a map
	background uint64 // of them, those no call's request started (clustermap.RefreshStats.Background)
}

// fetchesOf picks the fetch counts out of the refresher's counters.
func fetchesOf(s clustermap.RefreshStats) fetches {
	return fetches{performed: s.Performed, background: s.Background}
}

// record is one application call as the application saw it.
type record struct {
	start    time.Duration // from the start of the workload
	latency  time.Duration
	attempts int
	refReq   int
	// ownerWaits counts the call's waits for a map naming a new owner of a key whose owner
	// it could not reach (rule B7), ownerWait the time it spent in them.
	ownerWaits int
	ownerWait  time.Duration
	class      string       // "" for a success or an answer; otherwise why the call failed
	retries    []string     // why each attempt but the last was retried (causeName), nil if none
	batch      *batchRecord // a multi-key call's items, nil for a single-key call
}

// phaseAcc sums the calls that started in one phase.
type phaseAcc struct {
	name     string
	start    time.Duration
	fetched  fetches // the refresher's fetch counts when the phase started
	ops      int
	errors   map[string]int
	retries  map[string]int
	attempts int
	attMax   int
	refReq   int
	owner    ownerWaits
	batches  BatchReport
	max      time.Duration
	lat      *hdrhistogram.Histogram
}

// ownerWaits sums the waits of rule B7 over a phase's calls.
type ownerWaits struct {
	calls, waits int           // calls that waited, and their waits
	max          time.Duration // the longest time one call spent waiting
}

func (o *ownerWaits) add(rec record) {
	if rec.ownerWaits > 0 {
		o.calls++
		o.waits += rec.ownerWaits
		o.max = max(o.max, rec.ownerWait)
	}
}

func (o *ownerWaits) merge(p ownerWaits) {
	o.calls += p.calls
	o.waits += p.waits
	o.max = max(o.max, p.max)
}

// secondAcc sums the calls that started in one second of the workload; its histogram is
// released once no call that started in that second can still be running.
type secondAcc struct {
	ops, errors int
	waiting     int // calls in flight longer than waitingAfter during the second
	retries     map[string]int
	lat         *hdrhistogram.Histogram // nil once closed
	p99         time.Duration
}

// recorder keeps what the report needs of every call in memory that does not grow with the
// number of calls: per phase and per second, counts and an HDR latency histogram. A second's
// histogram is reduced to its p99 as soon as every worker has moved past that second, so
// only the seconds a call in progress started in hold one.
type recorder struct {
	mu      sync.Mutex
	since   func() time.Duration // time since the start of the workload
	phases  []*phaseAcc
	seconds []*secondAcc
	closed  int             // seconds[:closed] have released their histograms
	low     []time.Duration // per worker: no call it records later started before this
	spare   []*hdrhistogram.Histogram
}

func newRecorder(start time.Time, workers int) *recorder {
	return &recorder{since: func() time.Duration { return time.Since(start) }, low: make([]time.Duration, workers)}
}

// startPhase begins a phase now, with the refresher's fetch counts, and returns when it
// began. Calls that started earlier stay in the previous phase, even if they are recorded
// later; calls that start later go to this one.
func (r *recorder) startPhase(name string, fetched fetches) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := r.since()
	if len(r.phases) == 0 {
		at = 0
	}
	r.phases = append(r.phases, &phaseAcc{name: name, start: at, fetched: fetched, errors: map[string]int{},
		retries: map[string]int{}, lat: hdrhistogram.New(1, int64(maxLatency/latencyUnit), phaseSigFigs)})
	return at
}

// add records one call of worker w. A worker's calls must be added in the order it made
// them.
func (r *recorder) add(w int, rec record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lat := min(max(rec.latency/latencyUnit, 1), maxLatency/latencyUnit)

	i, _ := slices.BinarySearchFunc(r.phases, rec.start, func(p *phaseAcc, t time.Duration) int {
		if p.start <= t {
			return -1
		}
		return 1
	})
	p := r.phases[max(i-1, 0)]
	p.ops++
	p.attempts += rec.attempts
	p.attMax = max(p.attMax, rec.attempts)
	p.refReq += rec.refReq
	p.owner.add(rec)
	p.batches.add(rec.batch)
	p.max = max(p.max, rec.latency)
	_ = p.lat.RecordValue(int64(lat))
	if rec.class != "" {
		p.errors[rec.class]++
	}
	for _, why := range rec.retries {
		p.retries[why]++
	}

	s := int(rec.start / time.Second)
	last := s
	if rec.latency > waitingAfter {
		last = int((rec.start + rec.latency) / time.Second)
	}
	for len(r.seconds) <= last {
		r.seconds = append(r.seconds, &secondAcc{retries: map[string]int{}, lat: r.histLocked()})
	}
	if rec.latency > waitingAfter {
		// Waiting from waitingAfter in to its end, in every second it overlapped.
		for i := int((rec.start + waitingAfter) / time.Second); i <= last; i++ {
			r.seconds[i].waiting++
		}
	}
	sec := r.seconds[s]
	sec.ops++
	if rec.class != "" {
		sec.errors++
	}
	for _, why := range rec.retries {
		sec.retries[why]++
	}
	if sec.lat != nil { // always, when every worker adds its calls in order
		_ = sec.lat.RecordValue(int64(lat))
	}

	// Worker w's next call starts no earlier than this one ended.
	r.low[w] = rec.start + rec.latency
	r.closeLocked(slices.Min(r.low))
}

// done tells the recorder that worker w makes no more calls.
func (r *recorder) done(w int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.low[w] = noCallInProgress
	r.closeLocked(slices.Min(r.low))
}

// closeLocked reduces every second that ended before t to its p99 and keeps its histogram
// for reuse.
func (r *recorder) closeLocked(t time.Duration) {
	for r.closed < len(r.seconds) && time.Duration(r.closed+1)*time.Second <= t {
		sec := r.seconds[r.closed]
		if sec.lat != nil {
			sec.p99 = time.Duration(sec.lat.ValueAtQuantile(99)) * latencyUnit
			sec.lat.Reset()
			r.spare = append(r.spare, sec.lat)
			sec.lat = nil
		}
		r.closed++
	}
}

// histLocked returns an empty histogram for a second.
func (r *recorder) histLocked() *hdrhistogram.Histogram {
	if n := len(r.spare); n > 0 {
		h := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return h
	}
	return hdrhistogram.New(1, int64(maxLatency/latencyUnit), secondSigFigs)
}

// histograms counts the latency histograms the recorder holds (open or kept for reuse).
func (r *recorder) histograms() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.phases) + len(r.spare)
	for _, s := range r.seconds[r.closed:] {
		if s.lat != nil {
			n++
		}
	}
	return n
}

// summarize builds the phases, the total and the timeline. end is when the workload ended
// and endFetched the refresher's fetch counts then; every worker must be done.
func (r *recorder) summarize(end time.Duration, endFetched fetches) ([]PhaseReport, PhaseReport, []Second) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked(noCallInProgress)
	total := &phaseAcc{name: "total", errors: map[string]int{}, retries: map[string]int{},
		lat: hdrhistogram.New(1, int64(maxLatency/latencyUnit), phaseSigFigs)}
	var phases []PhaseReport
	for i, p := range r.phases {
		stop, stopFetched := end, endFetched
		if i+1 < len(r.phases) {
			stop, stopFetched = r.phases[i+1].start, r.phases[i+1].fetched
		}
		// An event that began after the workload ended (a late wake-up on a loaded machine,
		// before the end's own timer fired) has an empty phase.
		stop = max(stop, p.start)
		phases = append(phases, p.report(stop, stopFetched))
		total.ops += p.ops
		total.attempts += p.attempts
		total.attMax = max(total.attMax, p.attMax)
		total.refReq += p.refReq
		total.owner.merge(p.owner)
		total.batches.merge(p.batches)
		total.max = max(total.max, p.max)
		total.lat.Merge(p.lat)
		for k, v := range p.errors {
			total.errors[k] += v
		}
		for k, v := range p.retries {
			total.retries[k] += v
		}
	}
	if len(r.phases) > 0 {
		total.fetched = r.phases[0].fetched
	}
	tr := total.report(end, endFetched)

	// Whole seconds only: a partial last second would plot as a fall in throughput.
	seconds := make([]Second, max(int(end/time.Second), 1))
	for i := range seconds {
		seconds[i] = Second{T: i, Retries: map[string]int{}}
		if i < len(r.seconds) {
			s := r.seconds[i]
			seconds[i].Ops, seconds[i].Errors, seconds[i].Waiting, seconds[i].P99Ms = s.ops, s.errors, s.waiting, ms(s.p99)
			seconds[i].Retries = maps.Clone(s.retries)
		}
	}
	return phases, tr, seconds
}

// report is the phase's summary, for a phase that ended at stop with the refresher's fetch
// counts stopFetched.
func (p *phaseAcc) report(stop time.Duration, stopFetched fetches) PhaseReport {
	pr := PhaseReport{
		Name: p.name, StartSec: p.start.Seconds(), EndSec: stop.Seconds(), Ops: p.ops,
		Errors: maps.Clone(p.errors), Retries: maps.Clone(p.retries), AttemptsMax: p.attMax,
		RefreshesRequested: p.refReq, RefreshesPerformed: int(stopFetched.performed - p.fetched.performed),
		RefreshesBackground: int(stopFetched.background - p.fetched.background), Batches: p.batches,
		OwnerWaitCalls: p.owner.calls, OwnerWaits: p.owner.waits, OwnerWaitMaxMs: ms(p.owner.max),
		P50Ms: ms(time.Duration(p.lat.ValueAtQuantile(50)) * latencyUnit),
		P99Ms: ms(time.Duration(p.lat.ValueAtQuantile(99)) * latencyUnit),
		MaxMs: ms(p.max),
	}
	for _, n := range p.errors {
		pr.ErrorCount += n
	}
	if d := (stop - p.start).Seconds(); d > 0 {
		pr.OpsPerS = float64(p.ops) / d
	}
	if p.ops > 0 {
		pr.AttemptsAvg = float64(p.attempts) / float64(p.ops)
	}
	return pr
}
