package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime/batch"
)

// The output of the multi-key commands (mget, mput): one item result per key, in the order
// given. Without --json each answered item is a line on stdout (mget: KEY=VALUE; mput:
// KEY ok version=N) and each other item a line on stderr. The command exits 0 when every
// item got an answer, whatever the answers, and 5 (gave up) when some did not.

// itemAnswer records item it's answer: status, version and the node's epoch, as result.answer
// does for one key, and the line describing it.
func itemAnswer(key string, status zaris.KvStatus, version, epoch int64) *result {
	ir := &result{Key: &key}
	ir.answer(status, version, epoch)
	return ir
}

// finishItems sets r from its items: exit 0 when every item got an answer, else gave up;
// and writes each item's line unless --json.
func (c *cli) finishItems(r *result) {
	missing := 0
	for _, ir := range r.Items {
		if ir.Status == statusGaveUp || ir.Status == statusError {
			missing++
		}
	}
	r.Status, r.Exit = zaris.KvStatus_Ok.String(), exitOK
	if missing > 0 {
		r.Status, r.Exit = statusGaveUp, exitGaveUp
		r.Error = fmt.Sprintf("%d of %d items got no answer", missing, len(r.Items))
	}
	if c.json {
		return
	}
	for _, ir := range r.Items {
		switch {
		case ir.Exit == exitOK:
			fmt.Fprintf(c.stdout, "%s\n", ir.out)
		case ir.brief != "":
			fmt.Fprintf(c.stderr, "zaris: %s %q: %s\n", r.Command, *ir.Key, ir.brief)
		default:
			fmt.Fprintf(c.stderr, "zaris: %s %q: %s\n", r.Command, *ir.Key, ir.Error)
		}
	}
}

// valueText is a value as the item line shows it: the string, or base64 when not UTF-8.
func valueText(ir *result) string {
	if ir.ValueBase64 != "" {
		return "base64:" + ir.ValueBase64
	}
	s, _ := ir.Value.(string)
	return s
}

// splitAssignments splits KEY=VALUE arguments at their first '='.
func splitAssignments(args []string) (keys, values []string, bad string) {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, nil, a
		}
		keys, values = append(keys, k), append(values, v)
	}
	return keys, values, ""
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// runMget reads many keys in one call and prints each KEY=VALUE.
func runMget(ctx context.Context, c *cli, pos []string) int {
	req := &zaris.MultiGetRequest{}
	for _, k := range pos {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	return callItems(ctx, c, "mget", pos, (*zarisclient.Client).MultiGet, req, func(ir *result, key string, out *zaris.GetOutcome) {
		if out.Status == zaris.KvStatus_Ok {
			ir.setValue(out.Value)
			ir.out = key + "=" + valueText(ir)
		}
	})
}

// runMput writes many keys in one call and prints each new version.
func runMput(ctx context.Context, c *cli, pos []string) int {
	keys, values, bad := splitAssignments(pos)
	if bad != "" {
		return c.usageError("mput: %q is not KEY=VALUE", bad)
	}
	req := &zaris.MultiPutRequest{}
	for i, k := range keys {
		req.Items = append(req.Items, &zaris.PutItem{Key: []byte(k), Value: []byte(values[i])})
	}
	return callItems(ctx, c, "mput", keys, (*zarisclient.Client).MultiPut, req, func(ir *result, key string, out *zaris.PutOutcome) {
		ir.out = key + " ok version=" + itoa(out.Version)
	})
}

// itemOutcome is one item's answer in a batch response.
type itemOutcome interface {
	GetStatus() zaris.KvStatus
	GetVersion() int64
}

// batchResponse is the response of a multi-key call: one itemOutcome per item.
type batchResponse[O itemOutcome] interface {
	GetResults() []O
	GetMapEpoch() int64
}

// callItems sends req, a batch of one item per key, for the command name, and records one
// item result per key (finishItems); answered fills in an item that got an answer.
func callItems[Req any, O itemOutcome, Resp batchResponse[O]](ctx context.Context, c *cli, name string, keys []string, method send[Req, *batch.Result[Resp]], req Req, answered func(ir *result, key string, out O)) int {
	r := &result{Command: name}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		res, err := method(s.kv, ctx, req)
		if res == nil {
			return err
		}
		for i, out := range res.Response.GetResults() {
			ir := itemAnswer(keys[i], out.GetStatus(), out.GetVersion(), res.Response.GetMapEpoch())
			if e := res.Err(i); e != nil {
				ir.fail(e)
			} else {
				answered(ir, keys[i], out)
			}
			r.Items = append(r.Items, ir)
		}
		c.finishItems(r)
		return err
	})
}
