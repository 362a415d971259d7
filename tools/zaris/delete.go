package main

import (
	"context"
	"fmt"

	"github.com/clustron/zaris-go/gen/zaris"
)

// deleteCommand removes a key, optionally guarded by its version.
var deleteCommand = &command{
	name:    "delete",
	args:    "KEY [--if-version N]",
	summary: "delete KEY; print the deleted version (exit 3 if absent, 4 if the guard fails)",
	run:     runDelete,
}

func runDelete(ctx context.Context, c *cli, args []string) int {
	fs := c.flagSet("delete", "KEY [--if-version N]")
	ifVersion := fs.String("if-version", "", "delete only if the key's current version is `N`")
	pos, code, ok := c.parse(fs, args, 1, 1)
	if !ok {
		return code
	}
	req := &zaris.DeleteRequest{Key: []byte(pos[0])}
	if *ifVersion != "" {
		v, code, ok := c.parseInt64("delete", "--if-version", *ifVersion)
		if !ok {
			return code
		}
		req.IfMatchVersion = &v
	}
	r := &result{Command: "delete", Key: &pos[0]}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		resp, err := s.kv.Delete(ctx, req)
		if err != nil {
			return err
		}
		r.answer(resp.Status, resp.Version, resp.MapEpoch)
		r.out = fmt.Sprintf("ok version=%d", resp.Version)
		return nil
	})
}
