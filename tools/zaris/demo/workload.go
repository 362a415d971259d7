package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
)

// The workload mix, in percent of operations; the rest are guarded (CAS) puts.
const (
	getPercent  = 45
	putPercent  = 30
	mgetPercent = 5 // MultiGet of batchSize of the worker's keys
	mputPercent = 5 // MultiPut of batchSize of the worker's keys
	incrPercent = 5 // Increment by one of one of the worker's counters
)

// keyState is what a key's only writer knows of it: the last acknowledged value, and the
// values of later writes whose outcome it never learned (they may or may not have applied).
type keyState struct {
	key     []byte
	acked   []byte // nil when no write has been acknowledged
	version int64  // the version of acked
	unknown [][]byte
}

// consistent reports whether value (nil for NotFound) is a value the key may hold now, and
// advances the state when it proves an unknown write applied.
func (k *keyState) consistent(value []byte, version int64) bool {
	if value == nil {
		return k.acked == nil // nothing acknowledged; writes of unknown outcome may have failed
	}
	for i, u := range k.unknown {
		if bytes.Equal(value, u) {
			k.acked, k.version, k.unknown = u, version, k.unknown[i+1:]
			return true
		}
	}
	return bytes.Equal(value, k.acked)
}

// callInfo carries a call's attempt count and refresh requests from the stack back to the
// worker that made it.
type callInfo struct {
	attempts int
	refReq   int
	// ownerWaits and ownerWait are the call's waits for a map naming a new owner (rule
	// B7) and the time it spent in them.
	ownerWaits int
	ownerWait  time.Duration
	sent       bool // an attempt that may have applied failed without an answer
	history    []runtime.Attempt
	retries    []string     // why each attempt but the last was retried
	batch      *batchRecord // set by a multi-key call
}

type callInfoKey struct{}

// captureCallInfo is a call-level middleware that copies the call's cost into the callInfo
// in its context, if any.
func captureCallInfo(next middleware.Handler) middleware.Handler {
	return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		resp, err := next(ctx, call)
		if ci, ok := ctx.Value(callInfoKey{}).(*callInfo); ok {
			ci.attempts = len(call.Attempts)
			ci.refReq = call.Stats.RefreshesRequested
			ci.ownerWaits, ci.ownerWait = call.Stats.OwnerWaits, call.Stats.OwnerWait
			if call.Batch != nil {
				// A multi-key call's attempts are its sub-requests, one per owner, not
				// retries: its attempts are its rounds (what its slowest item took), and
				// the batch record counts its item retries.
				ci.attempts = call.Batch.Stats.Rounds
				ci.batch = newBatchRecord(call.Batch)
			} else if len(call.Attempts) > 1 {
				ci.history = slices.Clone(call.Attempts)
				for _, a := range call.Earlier() {
					ci.retries = append(ci.retries, attemptCause(a))
				}
			}
			for _, a := range call.Attempts {
				if !a.Answered && a.Sent {
					ci.sent = true
				}
			}
		}
		return resp, err
	}
}

// worker is one application goroutine: it owns its keys (no other worker writes them), so
// it knows exactly what each may hold.
type worker struct {
	id       int
	kv       *zarisclient.Client
	keys     []*keyState
	counters []*counterState
	rng      *rand.Rand
	seq      int
	start    time.Time
	ops      *atomic.Int64
	errs     *atomic.Int64
	rec      *recorder
	misses   []string // misreported answers
	failed   []string // the first few errors the application saw, in full
}

// keepErrors is how many full error messages each worker keeps for the report.
const keepErrors = 3

func newWorker(id, keys int, kv *zarisclient.Client, start time.Time, ops, errs *atomic.Int64, rec *recorder) *worker {
	w := &worker{id: id, kv: kv, rng: rand.New(rand.NewPCG(uint64(id), 7)), start: start, ops: ops, errs: errs, rec: rec}
	for i := range keys {
		w.keys = append(w.keys, &keyState{key: fmt.Appendf(nil, "demo/w%02d/k%03d", id, i)})
	}
	for i := range countersPerWorker {
		w.counters = append(w.counters, &counterState{key: fmt.Appendf(nil, "demo/w%02d/c%d", id, i)})
	}
	return w
}

// run issues calls until ctx ends.
func (w *worker) run(ctx context.Context) {
	defer w.rec.done(w.id)
	for ctx.Err() == nil {
		k := w.keys[w.rng.IntN(len(w.keys))]
		var ci callInfo
		cctx := context.WithValue(context.Background(), callInfoKey{}, &ci)
		began := time.Now()
		var err error
		switch p := w.rng.IntN(100); {
		case p < getPercent:
			err = w.get(cctx, k, &ci)
		case p < getPercent+putPercent:
			err = w.put(cctx, k, false, &ci)
		case p < getPercent+putPercent+mgetPercent:
			err = w.mget(cctx, &ci)
		case p < getPercent+putPercent+mgetPercent+mputPercent:
			err = w.mput(cctx, &ci)
		case p < getPercent+putPercent+mgetPercent+mputPercent+incrPercent:
			err = w.incr(cctx)
		default:
			err = w.put(cctx, k, true, &ci)
		}
		r := record{start: began.Sub(w.start), latency: time.Since(began), attempts: ci.attempts, refReq: ci.refReq,
			ownerWaits: ci.ownerWaits, ownerWait: ci.ownerWait, retries: ci.retries, batch: ci.batch}
		if err != nil {
			r.class = errorClass(err)
			w.errs.Add(1)
			if len(w.failed) < keepErrors {
				w.failed = append(w.failed, fmt.Sprintf("%.3fs: %v", r.start.Seconds(), err))
			}
		}
		w.rec.add(w.id, r)
		w.ops.Add(1)
	}
}

func (w *worker) get(ctx context.Context, k *keyState, _ *callInfo) error {
	resp, err := w.kv.Get(ctx, &zaris.GetRequest{Key: k.key})
	if err != nil {
		return err
	}
	w.checkRead(k, resp.Status, resp.Value, resp.Version)
	return nil
}

// checkRead checks a read's answer against what k's writer knows.
func (w *worker) checkRead(k *keyState, status zaris.KvStatus, value []byte, version int64) {
	switch status {
	case zaris.KvStatus_Ok:
		if !k.consistent(value, version) {
			w.miss("get %s returned %q, but its writer last had %q acknowledged", k.key, value, k.acked)
		}
	case zaris.KvStatus_NotFound:
		if !k.consistent(nil, 0) {
			w.miss("get %s answered NotFound, but %q was acknowledged", k.key, k.acked)
		}
	default:
		w.miss("get %s answered %s", k.key, status)
	}
}

// put writes a fresh value; guarded, it is a compare-and-set on the version the writer knows
// (or ifAbsent for a key it never wrote).
func (w *worker) put(ctx context.Context, k *keyState, guarded bool, ci *callInfo) error {
	w.seq++
	value := fmt.Appendf(nil, "w%02d-%d", w.id, w.seq)
	req := &zaris.PutRequest{Key: k.key, Value: value}
	if guarded {
		if k.acked == nil {
			yes := true
			req.IfAbsent = &yes
		} else {
			v := k.version
			req.IfMatchVersion = &v
		}
	}
	resp, err := w.kv.Put(ctx, req)
	if err != nil {
		k.unknown = append(k.unknown, value)
		return err
	}
	switch resp.Status {
	case zaris.KvStatus_Ok:
		k.acked, k.version, k.unknown = value, resp.Version, nil
	case zaris.KvStatus_Conflict:
		switch {
		case ci.sent:
			// An earlier attempt may have applied this very write; its replay answers
			// Conflict (rule R9), so the write's outcome is unknown.
			k.unknown = append(k.unknown, value)
		case len(k.unknown) > 0:
			// An earlier write of unknown outcome may have moved the version.
		default:
			w.miss("guarded put %s answered Conflict (version %d) with no concurrent writer (expected version %d; attempts %v)", k.key, resp.Version, k.version, ci.history)
		}
	default:
		w.miss("put %s answered %s", k.key, resp.Status)
	}
	return nil
}

func (w *worker) miss(format string, args ...any) {
	w.misses = append(w.misses, fmt.Sprintf(format, args...))
}

// errorClass names why a call failed, the way the report groups failures: the bound that
// tripped and the last attempt's outcome.
func errorClass(err error) string {
	var ce *runtime.CallError
	if !errors.As(err, &ce) {
		return "error: " + err.Error()
	}
	if errors.Is(err, runtime.ErrInDoubt) {
		return "in doubt"
	}
	bound := ce.Bound.String()
	if ce.Bound == runtime.BoundNone {
		bound = "fatal"
	}
	return bound + " (last: " + causeName(ce.Err) + ")"
}

// causeName names an attempt's cause briefly: a status ("Moved status"), or the kind of
// failure. No two causes share a word that names a status ("owner moved away" is rule B6,
// not the Moved status).
func causeName(err error) string {
	var se *runtime.StatusError
	switch {
	case errors.As(err, &se):
		return statusCause(se.Name)
	case errors.Is(err, runtime.ErrNodeUnavailable):
		return "node unavailable"
	case errors.Is(err, runtime.ErrPartitionUnavailable):
		return "partition unavailable"
	case errors.Is(err, runtime.ErrAttemptTimeout):
		return "attempt timeout"
	case errors.Is(err, runtime.ErrOwnerMoved):
		return "B6: owner moved away"
	case errors.Is(err, runtime.ErrTransport):
		return "transport"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case err == nil:
		return "none"
	}
	return "other"
}

// attemptCause names why an attempt did not end the call: its answer's status, or the kind
// of failure (causeName) when no answer arrived.
func attemptCause(a runtime.Attempt) string {
	if a.Answered {
		return statusCause(zarisclient.Statuses.Name(int64(a.Status)))
	}
	return causeName(a.Err)
}

// statusCause names an answer's status as a cause: "Moved status".
func statusCause(name string) string { return name + " status" }

// verify reads every key back and returns the keys whose value is not the one its writer
// last had acknowledged (or a later write of unknown outcome).
func (w *worker) verify(ctx context.Context) (checked int, lost []string, err error) {
	for _, k := range w.keys {
		resp, err := w.kv.Get(ctx, &zaris.GetRequest{Key: k.key})
		if err != nil {
			return checked, lost, fmt.Errorf("reading back %s: %w", k.key, err)
		}
		checked++
		var value []byte
		if resp.Status == zaris.KvStatus_Ok {
			value = resp.Value
		}
		if !k.consistent(value, resp.Version) {
			lost = append(lost, fmt.Sprintf("%s: read %q (%s), acknowledged %q", k.key, value, resp.Status, k.acked))
		}
	}
	slices.Sort(lost)
	return checked, lost, nil
}
