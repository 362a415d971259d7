package main

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
)

// getCommand reads a key and prints its value.
var getCommand = &command{
	name:    "get",
	args:    "KEY",
	summary: "print KEY's value (exit 3 if there is none)",
	run:     runGet,
}

func runGet(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("get", "KEY")
	pos, code, ok := c.parse(fs, args, 1, 1)
	if !ok {
		return code
	}
	r := &result{Command: "get", Key: &pos[0]}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		resp, err := s.kv.Get(ctx, &zaris.GetRequest{Key: []byte(pos[0])})
		if err != nil {
			return err
		}
		r.answer(resp.Status, resp.Version, resp.MapEpoch)
		if resp.Status == zaris.KvStatus_Ok {
			r.setValue(resp.Value)
			r.out = string(resp.Value)
		}
		return nil
	})
}
