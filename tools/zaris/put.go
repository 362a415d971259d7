package main

import (
	"context"
	"fmt"

	"github.com/clustron/zaris-go/gen/zaris"
)

// putCommand writes a key, optionally guarded by its version or its absence.
var putCommand = &command{
	name:    "put",
	args:    "KEY VALUE [--if-version N] [--if-absent]",
	summary: "write VALUE to KEY; print the new version (exit 4 if a guard fails)",
	run:     runPut,
}

func runPut(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("put", "KEY VALUE [--if-version N] [--if-absent]")
	ifVersion := fs.String("if-version", "", "write only if the key's current version is `N`")
	ifAbsent := fs.Bool("if-absent", false, "write only if the key does not exist")
	pos, code, ok := c.parse(fs, args, 2, 2)
	if !ok {
		return code
	}
	req := &zaris.PutRequest{Key: []byte(pos[0]), Value: []byte(pos[1])}
	if *ifVersion != "" {
		v, code, ok := c.parseInt64("put", "--if-version", *ifVersion)
		if !ok {
			return code
		}
		req.IfMatchVersion = &v
	}
	if *ifAbsent {
		req.IfAbsent = ifAbsent
	}
	r := &result{Command: "put", Key: &pos[0]}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		resp, err := s.kv.Put(ctx, req)
		if err != nil {
			return err
		}
		r.answer(resp.Status, resp.Version, resp.MapEpoch)
		r.out = fmt.Sprintf("ok version=%d", resp.Version)
		return nil
	})
}
