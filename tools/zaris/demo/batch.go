package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
)

// batchSize is how many of its keys a worker reads or writes in one multi-key call.
const batchSize = 4

// batchRecord is what one multi-key call did, per item.
type batchRecord struct {
	put          bool
	items        int
	itemsRetried int
	itemErrors   int
}

func newBatchRecord(b *runtime.Batch) *batchRecord {
	r := &batchRecord{items: b.Items.Len(), itemsRetried: b.Stats.ItemsRetried}
	for _, err := range b.Errs {
		if err != nil {
			r.itemErrors++
		}
	}
	return r
}

// BatchReport sums the multi-key calls of a phase: MultiGet and MultiPut calls, their items,
// the item retries (only items that met churn are retried) and the items that got no answer
// (each also makes its call count as an error).
type BatchReport struct {
	MultiGets    int `json:"multiGets"`
	MultiPuts    int `json:"multiPuts"`
	Items        int `json:"items"`
	ItemsRetried int `json:"itemsRetried"`
	ItemErrors   int `json:"itemErrors"`
}

func (b *BatchReport) add(r *batchRecord) {
	if r == nil {
		return
	}
	if r.put {
		b.MultiPuts++
	} else {
		b.MultiGets++
	}
	b.Items += r.items
	b.ItemsRetried += r.itemsRetried
	b.ItemErrors += r.itemErrors
}

// merge adds o's counts.
func (b *BatchReport) merge(o BatchReport) {
	b.MultiGets += o.MultiGets
	b.MultiPuts += o.MultiPuts
	b.Items += o.Items
	b.ItemsRetried += o.ItemsRetried
	b.ItemErrors += o.ItemErrors
}

// writeBatches prints the multi-key calls per phase.
func (r *Report) writeBatches(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tMultiGet\tMultiPut\titems\titems retried\titem errors\t")
	for _, p := range append(slices.Clone(r.Phases), r.Total) {
		b := p.Batches
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", p.Name, b.MultiGets, b.MultiPuts, b.Items, b.ItemsRetried, b.ItemErrors)
	}
	tw.Flush()
}

// batchKeys picks batchSize distinct keys of the worker.
func (w *worker) batchKeys() []*keyState {
	n := min(batchSize, len(w.keys))
	ks := make([]*keyState, 0, n)
	for _, i := range w.rng.Perm(len(w.keys))[:n] {
		ks = append(ks, w.keys[i])
	}
	return ks
}

// mget reads batchKeys in one MultiGet and checks each answer as get does. The call's error
// is the first item's that got no answer.
func (w *worker) mget(ctx context.Context, ci *callInfo) error {
	ks := w.batchKeys()
	req := &zaris.MultiGetRequest{}
	for _, k := range ks {
		req.Items = append(req.Items, &zaris.GetItem{Key: k.key})
	}
	res, err := w.kv.MultiGet(ctx, req)
	if res == nil {
		return err
	}
	var first error
	for i, k := range ks {
		if e := res.Err(i); e != nil {
			first = cmpOr(first, e)
			continue
		}
		r := res.Response.Results[i]
		w.checkRead(k, r.Status, r.Value, r.Version)
	}
	return first
}

// mput writes a fresh value to each of batchKeys in one MultiPut. An item without an answer
// is a write of unknown outcome.
func (w *worker) mput(ctx context.Context, ci *callInfo) error {
	ks := w.batchKeys()
	req := &zaris.MultiPutRequest{}
	values := make([][]byte, len(ks))
	for i, k := range ks {
		w.seq++
		values[i] = fmt.Appendf(nil, "w%02d-%d", w.id, w.seq)
		req.Items = append(req.Items, &zaris.PutItem{Key: k.key, Value: values[i]})
	}
	res, err := w.kv.MultiPut(ctx, req)
	if ci.batch != nil {
		ci.batch.put = true
	}
	if res == nil {
		for i, k := range ks {
			k.unknown = append(k.unknown, values[i])
		}
		return err
	}
	var first error
	for i, k := range ks {
		if e := res.Err(i); e != nil {
			k.unknown = append(k.unknown, values[i])
			first = cmpOr(first, e)
			continue
		}
		switch r := res.Response.Results[i]; r.Status {
		case zaris.KvStatus_Ok:
			k.acked, k.version, k.unknown = values[i], r.Version, nil
		default:
			w.miss("mput %s answered %s", k.key, r.Status)
		}
	}
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
