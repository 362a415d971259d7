package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
)

// lagNode answers each Get with the key as the value, one request at a time per connection:
// a quarter of them after a lag taken from the key (up to 15 ms), and keys ending in "!"
// only once hold is closed, holding every reply behind them on their connection. It records
// every key it received.
type lagNode struct {
	zarisserver.UnimplementedZarisKv // the other methods are not called
	cmap                             atomic.Pointer[zaris.ClusterMap]
	hold                             chan struct{}
	received                         sync.Map
}

func (n *lagNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	return n.cmap.Load(), nil
}

func (n *lagNode) Get(_ context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	key := string(req.Key)
	n.received.Store(key, true)
	if key[len(key)-1] == '!' {
		<-n.hold
	} else {
		h := fnv.New32a()
		h.Write(req.Key)
		if v := h.Sum32(); v%4 == 0 {
			time.Sleep(time.Duration(v%16) * time.Millisecond)
		}
	}
	return &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: req.Key, MapEpoch: 1}, nil
}

// pipeConnWatch collects every pipelined connection the engine opens to addr, sampling
// the slots until stop is closed, and records a pending count seen below zero.
func pipeConnWatch(t *testing.T, cl *Engine, addr string, stop <-chan struct{}) (conns func() []*pipeConn) {
	var mu sync.Mutex
	seen := map[*pipeConn]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if g := (*cl.pipes.groups.Load())[addr]; g != nil {
				for i := range g.slots {
					if c := g.slots[i].conn.Load(); c != nil {
						if n := c.pending.Load(); n < 0 {
							t.Errorf("pending %d", n)
						}
						mu.Lock()
						seen[c] = true
						mu.Unlock()
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	return func() []*pipeConn {
		<-done
		mu.Lock()
		defer mu.Unlock()
		var out []*pipeConn
		for c := range seen {
			out = append(out, c)
		}
		return out
	}
}

// TestPipelineSweep_ShortAttemptsUnderCancelsAndKills runs many pipelined callers with a
// 10 ms attempt timeout against a node that answers late or not at all, while callers cancel
// their contexts, carry short deadlines of their own (with or without their context) and
// the node's connections are cut. Every call must end; a reply must be its own call's; a
// request reported unsent must never have reached the node; once the node answers again
// every connection must carry no call and run no sweep; Close must leave no goroutine.
func TestPipelineSweep_ShortAttemptsUnderCancelsAndKills(t *testing.T) {
	h := &lagNode{hold: make(chan struct{})}
	release := sync.OnceFunc(func() { close(h.hold) })
	t.Cleanup(release)
	node := StartKillableNode(t, h)
	h.cmap.Store(OneNodeMap(node.Addr))
	cl := dialPipelined(t, node.Addr, 2, WithProtocol(ProtocolHeader), WithAttemptTimeout(10*time.Millisecond))
	stopWatch := make(chan struct{})
	conns := pipeConnWatch(t, cl, node.Addr, stopWatch)

	const callers, perCaller = 24, 40
	var (
		mu        sync.Mutex
		notSent   []string
		errKinds  = map[string]int{}
		answered  atomic.Int32
		wg        sync.WaitGroup
		loadEnded = make(chan struct{})
	)
	for i := range callers {
		wg.Go(func() {
			for j := range perCaller {
				key := fmt.Sprintf("k%d-%d", i, j)
				if j == 7 && i%6 == 0 {
					key += "!"
				}
				call := getCall(key)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				switch (i + j) % 5 {
				case 1: // a cancel storm: the context ends at some point in the call
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(time.Duration(j%4)*time.Millisecond, cancel)
				case 2: // the call's deadline, carried by the context
					ctx, cancel = context.WithTimeout(ctx, time.Duration(1+j%6)*time.Millisecond)
					call.Deadline, _ = ctx.Deadline()
				case 3: // the call's deadline, not carried by the context: its own timer
					call.Deadline = time.Now().Add(time.Duration(1+j%6) * time.Millisecond)
				case 4: // a context deadline past the attempt timeout
					ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				}
				resp, err := cl.Invoke(ctx, call)
				cancel()
				if err != nil {
					mu.Lock()
					errKinds[errKind(err)]++
					mu.Unlock()
				} else {
					answered.Add(1)
					assert.Equal(t, key, string(resp.(*zaris.GetResponse).Value), "the reply of another call")
				}
				sent := false
				for _, a := range call.Attempts {
					sent = sent || a.Sent
				}
				if !sent {
					mu.Lock()
					notSent = append(notSent, key)
					mu.Unlock()
				}
			}
		})
	}
	go func() {
		defer close(loadEnded)
		wg.Wait()
	}()
	// Cut the node's connections now and then while the load runs.
	hang := time.NewTimer(20 * time.Second) // a hang detector, armed once for the whole load
	defer hang.Stop()
	for cuts := 0; ; cuts++ {
		select {
		case <-loadEnded:
		case <-time.After(15 * time.Millisecond):
			if cuts%4 == 3 {
				node.DropConns()
			}
			continue
		case <-hang.C:
			t.Fatal("pipelined callers did not all return")
		}
		break
	}
	t.Logf("%d of %d calls answered, %d not sent; errors %v", answered.Load(), callers*perCaller, len(notSent), errKinds)

	// The node answers everything again: every connection drains.
	release()
	for i := range 8 {
		eventually(t, func() bool {
			_, err := cl.Invoke(context.Background(), getCall(fmt.Sprintf("after-%d", i)))
			return err == nil
		})
	}
	close(stopWatch)
	all := conns()
	require.NotEmpty(t, all)
	for _, c := range all {
		// A failed connection's sweep goroutine ends on its failure (counted below, after Close).
		if !waitFor(func() bool { return c.pending.Load() == 0 && (c.failed.Load() || !c.sweepRunning()) }) {
			c.mu.Lock()
			t.Fatalf("a connection still carries calls: pending %d, sweeping %v, failed %v (%v), queued %d, in flight %d, reading %v",
				c.pending.Load(), c.sweeping, c.failed.Load(), c.err, len(c.queue), len(c.inflight)-c.head, c.reading.Load() != nil)
			c.mu.Unlock()
		}
	}
	for _, key := range notSent {
		_, ok := h.received.Load(key)
		assert.False(t, ok, "%s was reported unsent but reached the node", key)
	}
	require.NoError(t, cl.Close())
	eventually(t, func() bool { return clientGoroutines() == 0 })
	for _, c := range all {
		assert.Zero(t, c.pending.Load())
	}
}

// waitFor reports whether cond holds within 10 s, a hang detector.
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

func errKind(err error) string {
	for _, k := range []error{context.Canceled, context.DeadlineExceeded, ErrAttemptTimeout, ErrTransport, ErrNodeUnavailable, ErrClosed} {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	return err.Error()
}

// TestPipelineSweep_CloseDuringLoad: Close while pipelined callers with short attempts run
// against a node that answers late or not at all ends every call, leaves every connection
// with no call counted in, and leaves no goroutine.
func TestPipelineSweep_CloseDuringLoad(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			h := &lagNode{hold: make(chan struct{})}
			t.Cleanup(func() { close(h.hold) })
			node := StartKillableNode(t, h)
			h.cmap.Store(OneNodeMap(node.Addr))
			cl := dialPipelined(t, node.Addr, 2, WithProtocol(ProtocolHeader), WithAttemptTimeout(20*time.Millisecond))
			stopWatch := make(chan struct{})
			conns := pipeConnWatch(t, cl, node.Addr, stopWatch)

			var wg sync.WaitGroup
			var calls atomic.Int32
			for i := range 16 {
				wg.Go(func() {
					for j := 0; ; j++ {
						key := fmt.Sprintf("k%d-%d", i, j)
						if j%9 == 4 {
							key += "!"
						}
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						if i%2 == 1 {
							ctx, cancel = context.WithTimeout(ctx, time.Duration(1+j%30)*time.Millisecond)
						}
						resp, err := cl.Invoke(ctx, getCall(key))
						cancel()
						calls.Add(1)
						if err == nil {
							assert.Equal(t, key, string(resp.(*zaris.GetResponse).Value), "the reply of another call")
						}
						if errors.Is(err, ErrClosed) {
							return
						}
					}
				})
			}
			eventually(t, func() bool { return calls.Load() >= int32(50*(round+1)) })
			require.NoError(t, cl.Close())
			ended := make(chan struct{})
			go func() {
				wg.Wait()
				close(ended)
			}()
			select {
			case <-ended:
			case <-time.After(10 * time.Second): // a hang detector
				t.Fatal("callers in flight at Close did not all return")
			}
			close(stopWatch)
			all := conns()
			require.NotEmpty(t, all)
			eventually(t, func() bool { return clientGoroutines() == 0 })
			for _, c := range all {
				assert.True(t, c.failed.Load(), "Close closed every connection")
				assert.Zero(t, c.pending.Load())
			}
		})
	}
}
