package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// defaultWait bounds zaris wait without --timeout.
const defaultWait = 60 * time.Second

// waitRetry is the pause between two tries of zaris wait.
const waitRetry = 100 * time.Millisecond

// runWait waits until the cluster answers: a seed serves a cluster map in which every
// segment has an owner. It exits 0 then, printing the map's epoch and size; 5 when
// --timeout (default 60s) passes first or the run is interrupted, saying what the last try
// met; 2 for a configuration error.
func runWait(ctx context.Context, c *cli, _ []string) int {
	limit := c.timeout
	if limit == 0 {
		limit = defaultWait
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	r := &result{Command: "wait"}
	last := "no try ended before the deadline"
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Status, r.Exit = statusGaveUp, exitGaveUp
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				r.Error = fmt.Sprintf("the cluster did not answer within %s: %s", limit, last)
			} else {
				r.Error = "interrupted before the cluster answered: " + last
			}
			return c.finish(r, nil)
		case <-retry.C:
		}
		m, err := c.fetchFirstMap(ctx)
		var cfgErr *runtime.ConfigError
		switch {
		case errors.As(err, &cfgErr), errors.Is(err, errConfig):
			fmt.Fprintf(c.stderr, "zaris: %s\n", reason(err))
			return exitUsage
		case err != nil:
			if !expired(ctx) {
				last = reason(err)
			}
		default:
			if n := unowned(m); n > 0 {
				last = fmt.Sprintf("the map (epoch %d) leaves %d of %d segments without an owner", m.Epoch, n, len(m.Segments))
				break
			}
			r.Status, r.Exit = zaris.KvStatus_Ok.String(), exitOK
			r.MapEpoch = &m.Epoch
			r.out = fmt.Sprintf("ok: the cluster answers (map epoch %d, %d nodes, %d segments) after %s",
				m.Epoch, len(m.Nodes), len(m.Segments), time.Since(start).Round(time.Millisecond))
			return c.finish(r, nil)
		}
		retry.Reset(waitRetry)
	}
}

// fetchFirstMap connects as a command does and returns the first map.
func (c *cli) fetchFirstMap(ctx context.Context) (*clustermap.Map, error) {
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.kv.Engine().Map(), nil
}

// unowned counts the segments of m that have no owner.
func unowned(m *clustermap.Map) int {
	n := 0
	for _, s := range m.Segments {
		if s.Owner == nil {
			n++
		}
	}
	return n
}
