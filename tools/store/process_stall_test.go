package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// Rule B6 against real processes: the owner of a third of the keys is stopped (SIGSTOP),
// so its kernel still takes connections and requests and nothing answers. The client's
// attempt timeout is ten minutes, so only B6 can end the calls waiting on it: once the
// coordinator fails the stopped node over and the client learns the new map, every writer
// carries on, each Put answered Ok, and some attempts ended with ErrOwnerMoved.
func TestProcess_ClientCallsOnAStoppedOwnerEndWithTheFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	c := startThreeNodes(t, "500ms")

	var ownerMoved atomic.Int64
	countMoved := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			if errors.Is(err, runtime.ErrOwnerMoved) {
				ownerMoved.Add(1)
			}
			return resp, err
		}
	}
	kv, err := zarisclient.Dial(context.Background(), runtime.WithEnv(nil), runtime.WithSeeds(c.seeds...),
		runtime.WithAttemptTimeout(10*time.Minute), runtime.WithRequestTimeout(10*time.Minute),
		runtime.WithAttemptMiddleware(countMoved))
	require.NoError(t, err)
	defer kv.Close()

	const writers = 4
	var (
		mu       sync.Mutex
		acked    [writers]int
		failures []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				resp, err := kv.Put(context.Background(), &zaris.PutRequest{Key: []byte(key), Value: []byte(key)})
				mu.Lock()
				if err != nil || resp.Status != zaris.KvStatus_Ok {
					failures = append(failures, fmt.Errorf("put %s: %v %v", key, resp, err))
				} else {
					acked[w]++
				}
				mu.Unlock()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	// waitEach waits until every writer has n more answers than in before.
	waitEach := func(what string, before [writers]int, n int) [writers]int {
		deadline := time.Now().Add(90 * time.Second) // the attempt timeout is 10 minutes
		for {
			mu.Lock()
			now := acked
			mu.Unlock()
			done := true
			for w := range writers {
				done = done && now[w] >= before[w]+n
			}
			if done {
				return now
			}
			if time.Now().After(deadline) {
				mu.Lock()
				last := failures[max(0, len(failures)-3):]
				mu.Unlock()
				pm, _ := c.admin.PeerMap(context.Background())
				t.Fatalf("%s: writers answered %v, before %v; %d failed calls, the last %v; the client's map epoch %d, the coordinator's %v; %d attempts ended by ErrOwnerMoved",
					what, now, before, len(failures), last, kv.Engine().Map().Epoch, pm, ownerMoved.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before := waitEach("before the stop", [writers]int{}, 20)

	stopped := c.nodes[0]
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGSTOP))
	defer func() { _ = stopped.cmd.Process.Signal(syscall.SIGCONT) }()
	c.waitFailedOver(t, 1)
	// Every writer met the stopped owner (a third of the keys are its), and each carries on.
	waitEach("after the failover", before, 20)
	assert.Positive(t, ownerMoved.Load(), "no attempt ended with ErrOwnerMoved")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, failures, "the application saw the failover")
}
