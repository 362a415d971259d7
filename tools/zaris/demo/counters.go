package demo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/clustron/zaris-go/gen/zaris"
)

// countersPerWorker is how many counter keys each worker increments (and alone writes).
const countersPerWorker = 2

// counterState is what a counter's only writer knows of it: its value as the last
// acknowledged Increment answered it, and how many later increments failed without an
// answer (each may or may not have applied, now or later).
type counterState struct {
	key     []byte
	value   int64
	unknown int64
}

// answered checks the value an acknowledged increment of one answered against what the
// writer knows, and reports whether it is one it may hold: one more than the last, plus any
// of the unknown increments that applied meanwhile.
func (c *counterState) answered(sum int64) bool {
	applied := sum - c.value - 1 // unknown increments the answer proves applied
	if applied < 0 || applied > c.unknown {
		return false
	}
	c.value, c.unknown = sum, c.unknown-applied
	return true
}

// holds reports whether read, the counter's value read back, is one it may hold.
func (c *counterState) holds(read int64) bool { return read >= c.value && read <= c.value+c.unknown }

// incr adds one to one of the worker's counters. Rule B8 makes a replay after a lost reply
// safe, so the application sees no in-doubt error and the counter counts each call once.
func (w *worker) incr(ctx context.Context) error {
	c := w.counters[w.rng.IntN(len(w.counters))]
	resp, err := w.kv.Increment(ctx, &zaris.IncrementRequest{Key: c.key, Delta: 1})
	if err != nil {
		c.unknown++
		return err
	}
	before := c.value
	if resp.Status != zaris.KvStatus_Ok {
		w.miss("increment %s answered %s", c.key, resp.Status)
	} else if !c.answered(resp.Value) {
		w.miss("increment %s answered %d, but its writer last had %d (and %d increments of unknown outcome)", c.key, resp.Value, before, c.unknown)
	}
	return nil
}

// verifyCounters reads every counter back and returns those that do not hold exactly the
// increments their writer had acknowledged (or a value some unanswered ones explain).
func (w *worker) verifyCounters(ctx context.Context) (checked int, wrong []string, err error) {
	for _, c := range w.counters {
		resp, err := w.kv.Get(ctx, &zaris.GetRequest{Key: c.key})
		if err != nil {
			return checked, wrong, fmt.Errorf("reading back %s: %w", c.key, err)
		}
		checked++
		var read int64
		if resp.Status == zaris.KvStatus_Ok {
			if read, err = strconv.ParseInt(string(resp.Value), 10, 64); err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: read %q, not a number", c.key, resp.Value))
				continue
			}
		}
		if !c.holds(read) {
			wrong = append(wrong, fmt.Sprintf("%s: read %d (%s), acknowledged increments %d, of unknown outcome %d", c.key, read, resp.Status, c.value, c.unknown))
		}
	}
	return checked, wrong, nil
}
