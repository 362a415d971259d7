package middlewaretest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarismock"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

func TestClock(t *testing.T) {
	c := mwt.NewClock()
	assert.Equal(t, mwt.Epoch, c.Now())

	require.NoError(t, c.Sleep(context.Background(), time.Second))
	require.NoError(t, c.Sleep(context.Background(), 0))
	assert.Equal(t, mwt.Epoch.Add(time.Second), c.Now(), "a sleep moves time at once")
	assert.Equal(t, []time.Duration{time.Second}, c.Sleeps(), "zero sleeps are not recorded")

	timer := c.NewTimer(2 * time.Second)
	stopped := c.NewTimer(time.Second)
	assert.True(t, stopped.Stop())
	c.Advance(time.Second)
	select {
	case <-timer.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Second)
	assert.Equal(t, mwt.Epoch.Add(3*time.Second), <-timer.C())
	assert.False(t, timer.Stop(), "already fired")
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}

	ctx, cancel := context.WithCancel(context.Background())
	c.OnSleep = func(context.Context, time.Duration) { cancel() }
	assert.ErrorIs(t, c.Sleep(ctx, time.Minute), context.Canceled)
	assert.Equal(t, mwt.Epoch.Add(3*time.Second), c.Now(), "a cancelled sleep does not move time")
	assert.ErrorIs(t, c.Sleep(ctx, time.Minute), context.Canceled)
}

func TestTransport(t *testing.T) {
	c := mwt.NewClock()
	slow := mwt.AnswerAt(zaris.KvStatus_Moved, 4)
	slow.Took = time.Second
	tr := mwt.Script(slow, mwt.Fail(runtime.ErrNodeUnavailable, false))
	tr.Clock, tr.MapEpoch = c, 3
	call := zt.GetCall("k")

	resp, err := tr.Invoke(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Moved, kvStatus(resp))
	a := call.Attempts[0]
	assert.Equal(t, runtime.Attempt{N: 1, Node: 1, Addr: "node1:9090", MapEpoch: 3, Answered: true, Status: runtime.Status(zaris.KvStatus_Moved), AnswerEpoch: 4, Sent: true, Duration: time.Second, End: mwt.Epoch.Add(time.Second)}, a)
	assert.Equal(t, mwt.Epoch.Add(time.Second), c.Now())

	for range 2 { // the last outcome repeats
		call.StartAttempt()
		_, err = tr.Invoke(context.Background(), call)
		assert.ErrorIs(t, err, runtime.ErrNodeUnavailable)
		assert.Equal(t, clustermap.NoNode, call.Current().Node)
		assert.False(t, call.Current().Sent)
	}
	assert.Equal(t, 3, tr.Attempts())
	assert.Equal(t, []int{1, 2, 3}, []int{tr.Seen()[0].N, tr.Seen()[1].N, tr.Seen()[2].N})
	assert.Equal(t, "Get", tr.Seen()[0].Op, "Seen names the call's operation")
	assert.Same(t, call.Request, tr.Seen()[0].Request)
}

func TestRefresher(t *testing.T) {
	r := mwt.NewRefresher(2)
	assert.Equal(t, clustermap.RefreshResult{Performed: true, Epoch: 5}, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 5}))
	assert.Equal(t, clustermap.RefreshResult{Performed: true, Epoch: 5}, r.Refresh(context.Background(), clustermap.Evidence{}))
	r.Observe(9)
	assert.Equal(t, int64(5), r.Epoch())
	assert.Equal(t, []int64{5, 0}, r.Requests())
	assert.Equal(t, []int64{9}, r.Observed())

	until := time.Unix(100, 0)
	assert.Equal(t, clustermap.RefreshResult{Performed: true, Epoch: 5}, r.AwaitOwner(context.Background(), []byte("k"), 3, until))
	r.OnAwaitOwner = func(_ context.Context, w mwt.OwnerWait) clustermap.RefreshResult {
		return clustermap.RefreshResult{TimedOut: true, Epoch: int64(w.Gone)}
	}
	assert.Equal(t, clustermap.RefreshResult{TimedOut: true, Epoch: 4}, r.AwaitOwner(context.Background(), []byte("j"), 4, until), "the hook answers")
	assert.Equal(t, []mwt.OwnerWait{{Key: []byte("k"), Gone: 3, Until: until}, {Key: []byte("j"), Gone: 4, Until: until}}, r.OwnerWaits())
}

// ClientTransport sends each attempt through the operation's Invoke on the client and
// fills it as node 1's answer; an error from the client is the attempt's, unanswered.
func TestClientTransport(t *testing.T) {
	kv := zarismock.NewMockZarisKv(gomock.NewController(t))
	boom := errors.New("boom")
	gomock.InOrder(
		kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(&zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 4}, nil),
		kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, boom),
	)
	tr := mwt.ClientTransport(kv)
	call := zt.GetCall("k")

	call.StartAttempt()
	resp, err := tr(context.Background(), call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, kvStatus(resp))
	a := call.Current()
	assert.True(t, a.Answered)
	assert.Equal(t, runtime.Status(zaris.KvStatus_NotFound), a.Status)
	assert.EqualValues(t, 4, a.AnswerEpoch)
	assert.Equal(t, int32(1), a.Node)

	call.StartAttempt()
	resp, err = tr(context.Background(), call)
	assert.ErrorIs(t, err, boom)
	assert.Nil(t, resp)
	assert.False(t, call.Current().Answered)
}

// The fake clock behind the R4-R6 tests: a timer of zero fires at once, as a real one does.
func TestClock_ZeroTimerFiresAtOnce(t *testing.T) {
	timer := mwt.NewClock().NewTimer(0)
	select {
	case <-timer.C():
	default:
		t.Fatal("a timer of zero has not fired")
	}
}
