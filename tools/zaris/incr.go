package main

import (
	"context"
	"strconv"

	"github.com/clustron/zaris-go/gen/zaris"
)

// incrCommand adds a delta to a counter key.
var incrCommand = &command{
	name:    "incr",
	args:    "KEY [DELTA]",
	summary: "add DELTA (default 1, may be negative) to KEY's decimal value; print the sum",
	run:     runIncr,
}

func runIncr(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("incr", "KEY [DELTA]")
	pos, code, ok := c.parse(fs, args, 1, 2)
	if !ok {
		return code
	}
	req := &zaris.IncrementRequest{Key: []byte(pos[0]), Delta: 1}
	if len(pos) == 2 {
		d, code, ok := c.parseInt64("incr", "DELTA", pos[1])
		if !ok {
			return code
		}
		req.Delta = d
	}
	r := &result{Command: "incr", Key: &pos[0]}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		resp, err := s.kv.Increment(ctx, req)
		if err != nil {
			return err
		}
		r.answer(resp.Status, resp.Version, resp.MapEpoch)
		if resp.Status == zaris.KvStatus_Ok {
			r.Value = resp.Value
			r.out = strconv.FormatInt(resp.Value, 10)
		}
		return nil
	})
}
