package main

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
)

// mputCommand writes many keys in one call.
var mputCommand = &command{
	name:    "mput",
	args:    "KEY=VALUE...",
	summary: "write each VALUE to its KEY in one batch call, not atomically; print each new version",
	run:     runMput,
}

func runMput(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("mput", "KEY=VALUE...")
	pos, code, ok := c.parse(fs, args, 1, runtime.MaxBatchItems)
	if !ok {
		return code
	}
	keys, values, bad := splitAssignments(pos)
	if bad != "" {
		return c.usageError("mput: %q is not KEY=VALUE", bad)
	}
	req := &zaris.MultiPutRequest{}
	for i, k := range keys {
		req.Items = append(req.Items, &zaris.PutItem{Key: []byte(k), Value: []byte(values[i])})
	}
	r := &result{Command: "mput"}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		res, err := s.kv.MultiPut(ctx, req)
		if res == nil {
			return err
		}
		for i, out := range res.Response.Results {
			ir := itemAnswer(keys[i], out.Status, out.Version, res.Response.MapEpoch)
			if e := res.Err(i); e != nil {
				ir.fail(e)
			} else {
				ir.out = keys[i] + " ok version=" + itoa(out.Version)
			}
			r.Items = append(r.Items, ir)
		}
		c.finishItems(r)
		return err
	})
}
