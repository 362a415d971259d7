package store

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// increment sends one Increment of key by delta with token tok (nil: none) through r until
// it is answered, and returns the answer.
func (r *router) increment(t testing.TB, key []byte, delta int64, tok *zaris.RequestToken) *zaris.IncrementResponse {
	t.Helper()
	var resp *zaris.IncrementResponse
	st, err := r.do(key, nil, func(c *rawClient) (zaris.KvStatus, int64, error) {
		var err error
		resp, err = c.Increment(context.Background(), &zaris.IncrementRequest{Key: key, Delta: delta, Token: tok})
		if err != nil {
			return 0, 0, err
		}
		return resp.Status, resp.MapEpoch, nil
	})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	return resp
}

// counter reads key's value through r as a number.
func (r *router) counter(t testing.TB, key []byte) int64 {
	t.Helper()
	st, v, err := r.get1(string(key))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, st)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// TestB8_ReplayIsAnsweredWithTheFirstOutcome: a node keeps the outcome of a tokened
// Increment and answers a replay of its token with it (same value, same version) and
// changes nothing; a new token applies. Its map advertises the window. With DisableDedup
// the node advertises none and a replay applies again, as at a store without rule B8.
func TestB8_ReplayIsAnsweredWithTheFirstOutcome(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			cfg := fastCluster()
			cfg.Node.DisableDedup = disabled
			c := StartCluster(t, cfg)
			r := newRouter(c.Seeds())
			defer r.close()
			key := []byte("counter")
			first := r.increment(t, key, 5, &zaris.RequestToken{Client: 7, Sequence: 1})
			replay := r.increment(t, key, 5, &zaris.RequestToken{Client: 7, Sequence: 1})
			m, err := mustDial(t, c.Seeds()[0]).GetClusterMap(context.Background())
			require.NoError(t, err)
			if disabled {
				assert.EqualValues(t, 10, replay.Value, "applied again")
				assert.Nil(t, m.DedupWindowMs, "no window advertised")
				return
			}
			assert.Equal(t, first.Value, replay.Value)
			assert.Equal(t, first.Version, replay.Version)
			assert.EqualValues(t, 5, r.counter(t, key), "the replay changed nothing")
			next := r.increment(t, key, 5, &zaris.RequestToken{Client: 7, Sequence: 2})
			assert.EqualValues(t, 10, next.Value)
			assert.Greater(t, next.Version, first.Version)
			other := r.increment(t, key, 1, &zaris.RequestToken{Client: 8, Sequence: 1})
			assert.EqualValues(t, 11, other.Value, "another client's sequence 1 is another call")
			untokened := r.increment(t, key, 1, nil)
			assert.EqualValues(t, 12, untokened.Value)
			require.NotNil(t, m.DedupWindowMs)
			assert.EqualValues(t, DefaultDedupWindow.Milliseconds(), *m.DedupWindowMs)
		})
	}
}

// TestB8_OutcomesTravelWithTheirSegments: one tokened Increment in every segment, then
// ownership moves (failover of a killed node, a migration, a join, a leave, a failback to
// a node that was restarted before the writes):
// a replay of each token at whatever node owns its segment now is answered with the first
// outcome, and every counter still holds one increment.
func TestB8_OutcomesTravelWithTheirSegments(t *testing.T) {
	for _, tc := range []struct {
		name           string
		prepare, churn func(t *testing.T, c *Cluster) // prepare runs before the writes
	}{
		{"failover", nil, func(t *testing.T, c *Cluster) {
			require.NoError(t, c.Kill(1))
			require.NoError(t, c.Coordinator().WaitNode(testCtx(t), 1, false))
		}},
		{"migration", nil, func(t *testing.T, c *Cluster) {
			for _, s := range c.Map().Segments {
				if *s.Owner == 1 {
					require.NoError(t, c.MigrateSegment(testCtx(t), s.ID, 2))
				}
			}
		}},
		{"join", nil, func(t *testing.T, c *Cluster) {
			_, err := c.Join(testCtx(t))
			require.NoError(t, err)
		}},
		{"leave", nil, func(t *testing.T, c *Cluster) { require.NoError(t, c.Leave(testCtx(t), 1)) }},
		{"failback", func(t *testing.T, c *Cluster) {
			require.NoError(t, c.Kill(1))
			require.NoError(t, c.Coordinator().WaitNode(testCtx(t), 1, false))
			require.NoError(t, c.Restart(testCtx(t), 1))
			require.NoError(t, c.WaitSettled(testCtx(t)))
		}, func(t *testing.T, c *Cluster) { require.NoError(t, c.Failback(testCtx(t), 1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCluster(t, fastCluster())
			r := newRouter(c.Seeds())
			defer r.close()
			if tc.prepare != nil {
				tc.prepare(t, c)
				r.refresh()
			}
			before := c.Map()
			firsts := make([]*zaris.IncrementResponse, before.SegmentCount)
			for s := range before.SegmentCount {
				firsts[s] = r.increment(t, keyIn(s, before.SegmentCount, "c"), 3, &zaris.RequestToken{Client: 1, Sequence: int64(s) + 1})
			}
			tc.churn(t, c)
			require.NoError(t, c.WaitSettled(testCtx(t)))
			moved := 0
			after := c.Map()
			for s := range before.SegmentCount {
				if *before.Segments[s].Owner != *after.Segments[s].Owner {
					moved++
				}
			}
			require.Positive(t, moved, "no segment changed owner")
			r.refresh()
			for s := range before.SegmentCount {
				key := keyIn(s, before.SegmentCount, "c")
				replay := r.increment(t, key, 3, &zaris.RequestToken{Client: 1, Sequence: int64(s) + 1})
				assert.Equal(t, firsts[s].Value, replay.Value, "segment %d", s)
				assert.Equal(t, firsts[s].Version, replay.Version, "segment %d", s)
				assert.EqualValues(t, 3, r.counter(t, key), "segment %d: applied once", s)
			}
		})
	}
}

// TestB8_OutcomesAreKeptForTheWindowAndUpToTheCap: an outcome older than the window is
// forgotten, so a replay of it applies again (the client never sends one: it is in doubt
// by then); a segment keeps at most DedupOutcomes of them, dropping the oldest first and
// counting the ones that went before their window ended.
func TestB8_OutcomesAreKeptForTheWindowAndUpToTheCap(t *testing.T) {
	t.Run("window", func(t *testing.T) {
		cfg := fastCluster()
		cfg.Node.DedupWindow = 100 * time.Millisecond
		c := StartCluster(t, cfg)
		r := newRouter(c.Seeds())
		defer r.close()
		key, tok := []byte("w"), &zaris.RequestToken{Client: 1, Sequence: 1}
		r.increment(t, key, 1, tok)
		time.Sleep(200 * time.Millisecond) // past the window, however slow the machine
		assert.EqualValues(t, 2, r.increment(t, key, 1, tok).Value, "a replay past the window applies as new")
	})
	t.Run("cap", func(t *testing.T) {
		cfg := fastCluster()
		cfg.Node.DedupOutcomes = 4
		c := StartCluster(t, cfg)
		r := newRouter(c.Seeds())
		defer r.close()
		m := c.Map()
		key := keyIn(0, m.SegmentCount, "cap")
		for i := range int64(6) {
			r.increment(t, key, 1, &zaris.RequestToken{Client: 1, Sequence: i + 1})
		}
		owner := c.Node(*m.Segments[0].Owner)
		assert.EqualValues(t, 2, owner.OutcomesEvictedEarly(), "the two oldest went before their window")
		assert.EqualValues(t, 6, r.increment(t, key, 1, &zaris.RequestToken{Client: 1, Sequence: 6}).Value, "the newest is kept")
		assert.EqualValues(t, 7, r.increment(t, key, 1, &zaris.RequestToken{Client: 1, Sequence: 1}).Value, "the oldest was dropped")
	})
}
