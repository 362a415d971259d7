package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// The commands on one key: get, put, delete and incr. Each builds its request from its
// arguments; callKey sends it, records the answer and prints the result.

// runGet reads a key and prints its value.
func runGet(ctx context.Context, c *cli, pos []string) int {
	req := &zaris.GetRequest{Key: []byte(pos[0])}
	return callKey(ctx, c, "get", pos[0], (*zarisclient.Client).Get, req, func(r *result, resp *zaris.GetResponse) {
		if resp.Status == zaris.KvStatus_Ok {
			r.setValue(resp.Value)
			r.out = string(resp.Value)
		}
	})
}

// setupPut declares put's value file and guards; put writes a key, optionally guarded by its
// version or its absence, and prints the new version. The value is the second argument, or
// stdin when that is "-", or the contents of --value-file; exactly one of them.
func setupPut(fs *flag.FlagSet) body {
	ifAbsent := fs.Bool("if-absent", false, "write only if the key does not exist")
	valueFile := fs.String("value-file", "", "write the contents of `FILE` (instead of VALUE)")
	return guarded(fs, "put", "write", func(ctx context.Context, c *cli, pos []string, ifVersion *int64) int {
		value, code, ok := c.putValue(pos, *valueFile)
		if !ok {
			return code
		}
		req := &zaris.PutRequest{Key: []byte(pos[0]), Value: value, IfMatchVersion: ifVersion}
		if *ifAbsent {
			req.IfAbsent = ifAbsent
		}
		return callKey(ctx, c, "put", pos[0], (*zarisclient.Client).Put, req, printVersion)
	})
}

// putValue returns put's value: pos[1], stdin when pos[1] is "-", or the contents of
// file; giving none or two of them, or a file or stdin that cannot be read, is a usage error.
func (c *cli) putValue(pos []string, file string) ([]byte, int, bool) {
	switch {
	case len(pos) == 2 && file != "":
		return nil, c.usageError("put: give VALUE or --value-file, not both (got VALUE %q and --value-file %s)", pos[1], file), false
	case file != "":
		v, err := os.ReadFile(file)
		if err != nil {
			return nil, c.usageError("put: --value-file: %v", err), false
		}
		return v, exitOK, true
	case len(pos) < 2:
		return nil, c.usageError("put: missing VALUE (or - to read it from stdin, or --value-file FILE)"), false
	case pos[1] == "-":
		v, err := io.ReadAll(c.stdin)
		if err != nil {
			return nil, c.usageError("put: reading the value from stdin: %v", err), false
		}
		return v, exitOK, true
	}
	return []byte(pos[1]), exitOK, true
}

// setupDelete declares delete's guard; delete removes a key, optionally guarded by its
// version, and prints the deleted version.
func setupDelete(fs *flag.FlagSet) body {
	return guarded(fs, "delete", "delete", func(ctx context.Context, c *cli, pos []string, ifVersion *int64) int {
		req := &zaris.DeleteRequest{Key: []byte(pos[0]), IfMatchVersion: ifVersion}
		return callKey(ctx, c, "delete", pos[0], (*zarisclient.Client).Delete, req, printVersion)
	})
}

// runIncr adds a delta to a counter key and prints the sum.
func runIncr(ctx context.Context, c *cli, pos []string) int {
	req := &zaris.IncrementRequest{Key: []byte(pos[0]), Delta: 1}
	if len(pos) == 2 {
		d, code, ok := c.parseInt64("incr", "DELTA", pos[1])
		if !ok {
			return code
		}
		req.Delta = d
	}
	return callKey(ctx, c, "incr", pos[0], (*zarisclient.Client).Increment, req, func(r *result, resp *zaris.IncrementResponse) {
		if resp.Status == zaris.KvStatus_Ok {
			r.Value = resp.Value
			r.out = strconv.FormatInt(resp.Value, 10)
		}
	})
}

// guarded declares --if-version on fs, the version guard of the command name that does verb,
// and returns run as a body that gets the version asked for (nil when none); a value that
// is not a number is a usage error.
func guarded(fs *flag.FlagSet, name, verb string, run func(ctx context.Context, c *cli, pos []string, ifVersion *int64) int) body {
	s := fs.String("if-version", "", verb+" only if the key's current version is `N`")
	return func(ctx context.Context, c *cli, pos []string) int {
		if *s == "" {
			return run(ctx, c, pos, nil)
		}
		v, code, ok := c.parseInt64(name, "--if-version", *s)
		if !ok {
			return code
		}
		return run(ctx, c, pos, &v)
	}
}

// printVersion is the result line of a write: the version it wrote.
func printVersion[R answered](r *result, resp R) {
	r.out = fmt.Sprintf("ok version=%d", resp.GetVersion())
}

// send is a typed client method, such as (*zarisclient.Client).Get.
type send[Req, Resp any] func(*zarisclient.Client, context.Context, Req, ...runtime.CallOption) (Resp, error)

// answered is the response of a single-key call.
type answered interface {
	GetStatus() zaris.KvStatus
	GetVersion() int64
	GetMapEpoch() int64
}

// callKey sends req for the command name on key, records the answer, and lets done, when
// not nil, fill in the rest of the result from the response.
func callKey[Req any, Resp answered](ctx context.Context, c *cli, name, key string, method send[Req, Resp], req Req, done func(*result, Resp)) int {
	r := &result{Command: name, Key: &key}
	return c.call(ctx, r, func(ctx context.Context, s *session, r *result) error {
		resp, err := method(s.kv, ctx, req)
		if err != nil {
			return err
		}
		r.answer(resp.GetStatus(), resp.GetVersion(), resp.GetMapEpoch())
		if done != nil {
			done(r, resp)
		}
		return nil
	})
}
