package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
)

// TestB6_PipelinedCallsUnderAStormOfInstalls runs many pipelined callers against two nodes
// while maps are installed one after another, every fourth moving every segment from one
// node to the other and the rest leaving them where they are, so that installs land on
// calls wherever they are: about to be queued, queued, taken by a flush, in flight, their
// reply being read. Every call must end, with its own reply or with ErrOwnerMoved and
// nothing else; a request reported unsent must never have reached a node; once the
// installs stop, every connection must carry no call.
func TestB6_PipelinedCallsUnderAStormOfInstalls(t *testing.T) {
	h1, h2 := &lagNode{hold: make(chan struct{})}, &lagNode{hold: make(chan struct{})}
	t.Cleanup(func() { close(h1.hold); close(h2.hold) })
	k1, k2 := StartKillableNode(t, h1), StartKillableNode(t, h2)
	addrs := []string{k1.Addr, k2.Addr}
	h1.cmap.Store(ownedBy(1, 1, addrs...))
	h2.cmap.Store(ownedBy(1, 1, addrs...))
	cl := dialPipelined(t, k1.Addr, 2, WithAttemptTimeout(time.Minute))

	const callers, perCaller = 24, 60
	var (
		mu      sync.Mutex
		notSent []string
		moved   atomic.Int32
		wg      sync.WaitGroup
	)
	for i := range callers {
		wg.Go(func() {
			for j := range perCaller {
				key := fmt.Sprintf("k%d-%d", i, j)
				call := getCall(key)
				resp, err := cl.Invoke(context.Background(), call)
				switch {
				case err == nil:
					assert.Equal(t, key, string(resp.(*zaris.GetResponse).Value), "the reply of another call")
				case errors.Is(err, ErrOwnerMoved):
					moved.Add(1)
				default:
					t.Errorf("%s: %v", key, err)
				}
				if !call.Attempts[0].Sent {
					mu.Lock()
					notSent = append(notSent, key)
					mu.Unlock()
				}
			}
		})
	}
	loadEnded := make(chan struct{})
	go func() {
		defer close(loadEnded)
		wg.Wait()
	}()
	hang := time.NewTimer(30 * time.Second) // a hang detector, armed once for the whole load
	defer hang.Stop()
	for epoch := int64(2); ; epoch++ {
		select {
		case <-loadEnded:
		case <-hang.C:
			t.Fatal("pipelined callers did not all return")
		default:
			require.NoError(t, cl.refresher.install(fromIDL(ownedBy(epoch, int32(1+epoch/4%2), addrs...))))
			time.Sleep(2 * time.Millisecond)
			continue
		}
		break
	}
	t.Logf("%d of %d calls ended by a moved owner, %d of them not sent", moved.Load(), callers*perCaller, len(notSent))
	require.Positive(t, moved.Load(), "no install met a call in flight")
	require.Less(t, int(moved.Load()), callers*perCaller, "no call was answered")

	// Each node serves a connection's requests in order: once a later call on every
	// connection has its reply, every request written before it has reached its node.
	for i := range 16 {
		eventually(t, func() bool {
			_, err := cl.Invoke(context.Background(), getCall(fmt.Sprintf("after-%d", i)))
			return err == nil
		})
	}
	for _, key := range notSent {
		_, at1 := h1.received.Load(key)
		_, at2 := h2.received.Load(key)
		assert.False(t, at1 || at2, "%s was reported unsent but reached a node", key)
	}
	for _, addr := range addrs {
		for _, c := range pipeConnsOf(cl, addr) {
			assert.True(t, waitFor(func() bool { return c.pending.Load() == 0 }), "a connection to %s still carries calls", addr)
		}
	}
}
