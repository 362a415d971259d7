package proof

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
)

// history records operations as they are invoked and return. Times are nanoseconds on the
// monotonic clock since the history began. It is safe for concurrent use.
type history struct {
	start time.Time

	mu  sync.Mutex // protects ops
	ops []porcupine.Operation

	n atomic.Int64 // completed calls
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// unknownReturn marks an operation that is possibly applied; finish moves it to the end.
const unknownReturn = -1

// add records one call: the answered operation (unless out is outUnknown) and one
// possibly-applied operation per attempt that was sent without a reply (lost), or at least
// one when the call got no answer at all.
func (h *history) add(client int, in kvInput, out kvOutput, call, ret int64, lost int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if out.out == outUnknown {
		lost = max(lost, 1)
	} else {
		h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	}
	if in.kind == opGet {
		lost = 0 // a read that got no answer changed nothing
	}
	for range lost {
		h.ops = append(h.ops, porcupine.Operation{
			ClientId: client, Input: in, Call: call, Output: kvOutput{out: outUnknown}, Return: unknownReturn,
		})
	}
	h.n.Add(1)
}

// finish returns the recorded operations with every possibly-applied one returning at the
// end of the history.
func (h *history) finish() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.now()
	ops := make([]porcupine.Operation, len(h.ops))
	copy(ops, h.ops)
	for i := range ops {
		if ops[i].Return == unknownReturn {
			ops[i].Return = end
		}
	}
	return ops
}

// waitCalls waits until n more calls have completed since it was called, or ctx ends.
func (h *history) waitCalls(ctx context.Context, n int64) error {
	target := h.n.Load() + n
	for h.n.Load() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d calls: %w", n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// callSlot receives the *runtime.Call of one application call from captureCall.
type callSlot struct{ call *runtime.Call }

type slotKey struct{}

// captureCall is call-level middleware that hands the call (with its attempt history) to
// the callSlot in the context, so the recorder can see which attempts were sent and got
// no reply.
func captureCall(next middleware.Handler) middleware.Handler {
	return func(ctx context.Context, c *runtime.Call) (runtime.Response, error) {
		resp, err := next(ctx, c)
		if s, ok := ctx.Value(slotKey{}).(*callSlot); ok {
			s.call = c
		}
		return resp, err
	}
}

// lostAttempts counts the attempts of c that may have reached a node and got no reply.
func lostAttempts(c *runtime.Call) int {
	if c == nil {
		return 0
	}
	n := 0
	for _, a := range c.Attempts {
		if a.Sent && !a.Answered {
			n++
		}
	}
	return n
}

// newClient dials a zaris-go client at seeds with the default stack plus captureCall.
func newClient(t *testing.T, seeds []string, opts ...runtime.Option) *zarisclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]runtime.Option{runtime.WithSeeds(seeds...), runtime.WithAttemptTimeout(2 * time.Second)}, opts...)
	kv, err := zarisclient.Dial(ctx, append(opts, runtime.WithCallMiddleware(captureCall))...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return kv
}

// workload runs workers that each loop over random operations on a few keys through
// their client until stopped, recording every call in a history.
type workload struct {
	t    *testing.T
	h    *history
	keys []string
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex // protects errs
	errs []error

	batchItems, itemsRetried atomic.Int64 // counted by the batch workers (batch_test.go)
}

// startWorkload starts workersPer workers on each client.
func startWorkload(t *testing.T, clients []*zarisclient.Client, workersPer int, keys []string) *workload {
	w := &workload{t: t, h: newHistory(), keys: keys, stop: make(chan struct{})}
	id := 0
	for _, c := range clients {
		for range workersPer {
			w.wg.Add(1)
			go w.run(id, c, rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))))
			id++
		}
	}
	return w
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// finish stops the workers, fails the test on any unexpected outcome and returns the history.
func (w *workload) finish() []porcupine.Operation {
	close(w.stop)
	w.wg.Wait()
	require.NoError(w.t, errors.Join(w.errs...))
	return w.h.finish()
}

// run is one worker: it picks an operation, runs it and records it until stopped.
func (w *workload) run(id int, c *zarisclient.Client, rng *rand.Rand) {
	defer w.wg.Done()
	seen := map[string]int64{} // the last version this worker saw per key, for guards
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		in := kvInput{key: w.keys[rng.IntN(len(w.keys))]}
		switch p := rng.IntN(100); {
		case p < 35:
			in.kind = opGet
		case p < 55:
			in.kind, in.value = opPut, strconv.Itoa(id*1_000_000+seq)
		case p < 70:
			in.kind, in.value = opPut, strconv.Itoa(id*1_000_000+seq)
			in.hasMatch, in.ifMatch = true, seen[in.key]
		case p < 73:
			in.kind, in.value, in.ifAbsent = opPut, strconv.Itoa(id*1_000_000+seq), true
		case p < 80:
			in.kind = opDelete
		case p < 85:
			in.kind, in.hasMatch, in.ifMatch = opDelete, true, seen[in.key]
		default:
			in.kind, in.delta = opIncrement, int64(1+rng.IntN(5))
		}
		slot := &callSlot{}
		ctx := context.WithValue(context.Background(), slotKey{}, slot)
		call := w.h.now()
		out, err := execute(ctx, c, in)
		ret := w.h.now()
		if err != nil {
			var ce *runtime.CallError
			if !errors.As(err, &ce) {
				w.fail(fmt.Errorf("%s %s: an error that is not a *runtime.CallError: %w", in.kind, in.key, err))
			}
			out = kvOutput{out: outUnknown}
		}
		if out.version > 0 {
			seen[in.key] = out.version
		}
		w.h.add(id, in, out, call, ret, lostAttempts(slot.call))
	}
}

// execute runs in through c and translates the answer.
func execute(ctx context.Context, c *zarisclient.Client, in kvInput) (kvOutput, error) {
	key := []byte(in.key)
	switch in.kind {
	case opGet:
		r, err := c.Get(ctx, &zaris.GetRequest{Key: key})
		if err != nil {
			return kvOutput{}, err
		}
		return answer(r.Status, kvOutput{value: string(r.Value), version: r.Version})
	case opPut:
		req := &zaris.PutRequest{Key: key, Value: []byte(in.value)}
		if in.hasMatch {
			req.IfMatchVersion = &in.ifMatch
		}
		if in.ifAbsent {
			req.IfAbsent = &in.ifAbsent
		}
		r, err := c.Put(ctx, req)
		if err != nil {
			return kvOutput{}, err
		}
		return answer(r.Status, kvOutput{version: r.Version})
	case opDelete:
		req := &zaris.DeleteRequest{Key: key}
		if in.hasMatch {
			req.IfMatchVersion = &in.ifMatch
		}
		r, err := c.Delete(ctx, req)
		if err != nil {
			return kvOutput{}, err
		}
		return answer(r.Status, kvOutput{version: r.Version})
	default:
		r, err := c.Increment(ctx, &zaris.IncrementRequest{Key: key, Delta: in.delta})
		if err != nil {
			return kvOutput{}, err
		}
		return answer(r.Status, kvOutput{sum: r.Value, version: r.Version})
	}
}

// answer sets the outcome for an answered status; a status the application must never see
// (churn is the client's business) is an error.
func answer(st zaris.KvStatus, out kvOutput) (kvOutput, error) {
	switch st {
	case zaris.KvStatus_Ok:
		out.out = outOk
	case zaris.KvStatus_NotFound:
		out.out = outNotFound
	case zaris.KvStatus_Conflict:
		out.out = outConflict
	case zaris.KvStatus_InvalidRequest:
		out.out = outInvalid
	default:
		return out, fmt.Errorf("the application saw status %s", st)
	}
	return out, nil
}

// checkTimeout bounds one porcupine check; a check that runs out fails the test.
const checkTimeout = 30 * time.Second

// check runs porcupine on ops and returns the result, writing the visualization (and
// logging its path) unless the result is want. It goes to a directory of its own under the
// system's temporary directory, not t.TempDir(), which is removed when the test ends.
func check(t *testing.T, ops []porcupine.Operation, want porcupine.CheckResult) porcupine.CheckResult {
	t.Helper()
	model := kvModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	unknown := 0
	for _, op := range ops {
		if op.Output.(kvOutput).out == outUnknown {
			unknown++
		}
	}
	t.Logf("porcupine: %s on %d operations (%d possibly applied)", res, len(ops), unknown)
	if res != want {
		dir, err := os.MkdirTemp("", "zaris-proof-")
		if err != nil {
			t.Logf("no directory for the visualization: %v", err)
			return res
		}
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("writing the visualization: %v", err)
		} else {
			t.Logf("history visualization: %s", path)
		}
	}
	return res
}
