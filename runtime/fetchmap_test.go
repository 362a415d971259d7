package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Rule B6 for map fetches: a node that takes the map request and answers nothing (a
// stopped process) costs a refresh its silence threshold, not the attempt timeout: the next
// node is then asked too, and its map is installed. Here the attempt timeout is ten
// minutes; the fake clock moves in steps of a quarter of the silence floor until the
// refresh ends, and it ends with node 2's map within the silence ceiling.
func TestB6_AStalledNodeCostsAMapFetchItsSilenceThreshold(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 3), WithAttemptTimeout(10*time.Minute))
	mc.clock.Advance(time.Second)  // past the bootstrap's debounce window
	_, calls := mc.blockingMaps(1) // node 1 takes the request and never answers
	mc.node(2).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(2, 16, 3), nil)

	done := make(chan clustermap.RefreshResult, 1)
	go func() { done <- mc.Refresher().Refresh(context.Background(), clustermap.Evidence{}) }()
	eventually(t, func() bool { return calls.Load() == 1 })
	start := mc.clock.Now()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case res := <-done:
			require.NoError(t, res.Err)
			assert.False(t, res.TimedOut, "the caller gave up waiting")
			assert.Equal(t, int64(2), res.Epoch, "node 2's map")
			assert.LessOrEqual(t, mc.clock.Now().Sub(start), silenceCeiling)
			return
		case <-deadline:
			t.Fatal("the refresh did not end")
		case <-time.After(time.Millisecond):
			mc.clock.Advance(silenceFloor / 4)
		}
	}
}

// A node that answers the map request with no map is a node without an answer
// (ErrNoResponse); a node whose map request fails is reported with its own error.
func TestFetchMap_NoMapIsNoResponse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fetched error
		want    error
	}{{"no map", nil, ErrNoResponse}, {"failed", assert.AnError, assert.AnError}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := *testService
			svc.FetchMap = func(context.Context, any) (*clustermap.Map, error) { return nil, tc.fetched }
			dial := func(context.Context, string) (Conn, error) { return &fakeConn{}, nil }
			_, err := Dial(context.Background(), WithService(&svc), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"), WithDialer(dial))
			require.ErrorIs(t, err, ErrNoSeeds)
			assert.ErrorIs(t, err, tc.want)
			if tc.fetched != nil {
				assert.NotErrorIs(t, err, ErrNoResponse)
			}
		})
	}
}
