package proof

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
)

// Batches mixed with single-key calls under churn: each item of a MultiGet or MultiPut is
// recorded as an operation of its own on its key, from the batch's invocation to its return
// (a batch is not atomic, so its items may take effect in any order within that span). An
// item that got no answer, and each attempt of an item that was sent without a reply, is
// possibly applied, as for a single-key call.
func TestLinearizable_BatchesAndSingleKeyCallsUnderChurn(t *testing.T) {
	c := startCluster(t)
	ctx := testCtx(t)
	clients := []*zarisclient.Client{
		newClient(t, c.Seeds()),
		newClient(t, c.Seeds(), runtime.WithProtocol(runtime.ProtocolHeader)),
	}
	w := startWorkload(t, clients, 2, testKeys)
	w.startBatchWorkers(clients, 2, 100)
	require.NoError(t, w.h.waitCalls(ctx, calls))
	steps(t, ctx, w, kill(c, ctx, 2), migrate(c, ctx, "k0", "k5"), join(c, ctx))
	ops := w.finish()
	t.Logf("%d batch items, %d items retried", w.batchItems.Load(), w.itemsRetried.Load())
	require.Positive(t, w.batchItems.Load(), "the batch workers ran")
	require.Equal(t, porcupine.Ok, check(t, ops, porcupine.Ok), "the history is not linearizable")
}

// startBatchWorkers starts per batch workers on each client, with ids from firstID.
func (w *workload) startBatchWorkers(clients []*zarisclient.Client, per, firstID int) {
	id := firstID
	for _, c := range clients {
		for range per {
			w.wg.Add(1)
			go w.runBatches(id, c, rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))))
			id++
		}
	}
}

// runBatches is one worker of MultiGet and MultiPut calls of one to four items (keys may
// repeat), a third of the puts guarded by the last version the worker saw.
func (w *workload) runBatches(id int, c *zarisclient.Client, rng *rand.Rand) {
	defer w.wg.Done()
	seen := map[string]int64{}
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		ins := make([]kvInput, 1+rng.IntN(4))
		get := rng.IntN(2) == 0
		for i := range ins {
			ins[i].key = w.keys[rng.IntN(len(w.keys))]
			if get {
				ins[i].kind = opGet
				continue
			}
			ins[i].kind, ins[i].value = opPut, strconv.Itoa(id*1_000_000+seq*10+i)
			if rng.IntN(3) == 0 {
				ins[i].hasMatch, ins[i].ifMatch = true, seen[ins[i].key]
			}
		}
		slot := &callSlot{}
		ctx := context.WithValue(context.Background(), slotKey{}, slot)
		call := w.h.now()
		outs, err := executeBatch(ctx, c, ins)
		ret := w.h.now()
		if err != nil {
			w.fail(err)
			return
		}
		w.batchItems.Add(int64(len(ins)))
		var b *runtime.Batch
		if slot.call != nil {
			b = slot.call.Batch
		}
		if b != nil {
			w.itemsRetried.Add(int64(b.Stats.ItemsRetried))
		}
		for i, in := range ins {
			if outs[i].version > 0 {
				seen[in.key] = outs[i].version
			}
			lost := 0
			if b != nil && i < len(b.Attempts) {
				for _, a := range b.Attempts[i] {
					if a.Sent && !a.Answered {
						lost++
					}
				}
			}
			w.h.add(id, in, outs[i], call, ret, lost)
		}
	}
}

// executeBatch runs ins (all gets or all puts) as one batch through c and translates each
// item's answer; an item with an error is possibly applied. It fails on an error other
// than a *batch.Error and on an item answered with a status the application must
// never see.
func executeBatch(ctx context.Context, c *zarisclient.Client, ins []kvInput) ([]kvOutput, error) {
	outs := make([]kvOutput, len(ins))
	var (
		statuses []zaris.KvStatus
		itemErrs []error
		err      error
	)
	if ins[0].kind == opGet {
		req := &zaris.MultiGetRequest{}
		for _, in := range ins {
			req.Items = append(req.Items, &zaris.GetItem{Key: []byte(in.key)})
		}
		var res *batch.Result[*zaris.MultiGetResponse]
		if res, err = c.MultiGet(ctx, req); res != nil {
			itemErrs = res.Errs
			for i, r := range res.Response.Results {
				statuses = append(statuses, r.Status)
				outs[i] = kvOutput{value: string(r.Value), version: r.Version}
			}
		}
	} else {
		req := &zaris.MultiPutRequest{}
		for _, in := range ins {
			it := &zaris.PutItem{Key: []byte(in.key), Value: []byte(in.value)}
			if in.hasMatch {
				it.IfMatchVersion = &in.ifMatch
			}
			req.Items = append(req.Items, it)
		}
		var res *batch.Result[*zaris.MultiPutResponse]
		if res, err = c.MultiPut(ctx, req); res != nil {
			itemErrs = res.Errs
			for i, r := range res.Response.Results {
				statuses = append(statuses, r.Status)
				outs[i] = kvOutput{version: r.Version}
			}
		}
	}
	if be := (*batch.Error)(nil); err != nil && !errors.As(err, &be) {
		return nil, fmt.Errorf("batch: an error that is not a *batch.Error: %w", err)
	}
	if len(statuses) != len(ins) || len(itemErrs) != len(ins) {
		return nil, fmt.Errorf("batch of %d items: %d results, %d item errors", len(ins), len(statuses), len(itemErrs))
	}
	for i := range ins {
		if itemErrs[i] != nil {
			outs[i] = kvOutput{out: outUnknown}
			continue
		}
		var aerr error
		if outs[i], aerr = answer(statuses[i], outs[i]); aerr != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, aerr)
		}
	}
	return outs, nil
}

// The checker bites on batches: a store that acknowledges some MultiPut calls without
// applying them is found not linearizable.
func TestChecker_BitesOnLostBatchWrites(t *testing.T) {
	runBroken(t, func(kv zaris.ZarisKv, b *broken) zaris.ZarisKv { return &losesBatchWrites{ZarisKv: kv, b: b} }, 2)
}

// losesBatchWrites acknowledges every third MultiPut without guards without sending it,
// each item Ok with a version above any the store gives.
type losesBatchWrites struct {
	zaris.ZarisKv
	b *broken
}

func (l *losesBatchWrites) MultiPut(ctx context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	guarded := false
	for _, it := range req.Items {
		guarded = guarded || it.IsSetIfMatchVersion() || it.GetIfAbsent()
	}
	if !guarded {
		l.b.mu.Lock()
		l.b.puts++
		lose := l.b.puts%3 == 0
		l.b.mu.Unlock()
		if lose {
			resp := &zaris.MultiPutResponse{Status: zaris.KvStatus_Ok}
			for range req.Items {
				resp.Results = append(resp.Results, &zaris.PutOutcome{Status: zaris.KvStatus_Ok, Version: 1 << 40})
			}
			return resp, nil
		}
	}
	return l.ZarisKv.MultiPut(ctx, req)
}
