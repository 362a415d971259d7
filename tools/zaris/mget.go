package main

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
)

// mgetCommand reads many keys in one call.
var mgetCommand = &command{
	name:    "mget",
	args:    "KEY...",
	summary: "print each KEY=VALUE in one batch call (exit 5 if some key got no answer)",
	run:     runMget,
}

func runMget(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("mget", "KEY...")
	pos, code, ok := c.parse(fs, args, 1, runtime.MaxBatchItems)
	if !ok {
		return code
	}
	req := &zaris.MultiGetRequest{}
	for _, k := range pos {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	r := &result{Command: "mget"}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		res, err := s.kv.MultiGet(ctx, req)
		if res == nil {
			return err
		}
		for i, out := range res.Response.Results {
			ir := itemAnswer(pos[i], out.Status, out.Version, res.Response.MapEpoch)
			if e := res.Err(i); e != nil {
				ir.fail(e)
			} else if out.Status == zaris.KvStatus_Ok {
				ir.setValue(out.Value)
				ir.out = pos[i] + "=" + valueText(ir)
			}
			r.Items = append(r.Items, ir)
		}
		c.finishItems(r)
		return err
	})
}
