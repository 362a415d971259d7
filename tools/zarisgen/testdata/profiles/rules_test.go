// The client rules, held by a client generated from idl/profiles.thrift: zarisgen's
// TestSecondService generates gen/ of this module and runs these tests against scripted
// Profiles nodes on loopback.
package rules_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"

	"example.com/profiles/gen/profiles"
	"example.com/profiles/gen/profilesclient"
	"example.com/profiles/gen/profilesserver"
)

// segments is how many segments the scripted cluster has; one node owns them all.
const segments = 4

// cluster is the scripted state the nodes answer from: the map (its epoch and the owner of
// every segment) and, per node, statuses to answer before answering as the map says.
type cluster struct {
	mu       sync.Mutex // protects the fields below
	epoch    int64
	owner    int32
	addrs    map[int32]string
	script   map[int32][]profiles.ProfileStatus
	describe int // map fetches answered
}

// answer is what node id answers a data call with: its next scripted status, else
// WrongShard when it does not own the segments, else Found; and the map epoch.
func (c *cluster) answer(id int32) (profiles.ProfileStatus, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.script[id]; len(s) > 0 {
		c.script[id] = s[1:]
		return s[0], c.epoch
	}
	if c.owner != id {
		return profiles.ProfileStatus_WrongShard, c.epoch
	}
	return profiles.ProfileStatus_Found, c.epoch
}

// play makes node id answer statuses, in order, to its next data calls.
func (c *cluster) play(id int32, statuses ...profiles.ProfileStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.script[id] = append(c.script[id], statuses...)
}

// move gives every segment to node owner, in a map of the next epoch.
func (c *cluster) move(owner int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner, c.epoch = owner, c.epoch+1
}

// fetches is how many times a node answered the map operation.
func (c *cluster) fetches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.describe
}

func (c *cluster) topology() *profiles.Topology {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.describe++
	m := &profiles.Topology{Epoch: c.epoch, SegmentCount: segments}
	for id := int32(1); int(id) <= len(c.addrs); id++ {
		host, port, _ := net.SplitHostPort(c.addrs[id])
		p, _ := strconv.Atoi(port)
		m.Nodes = append(m.Nodes, &profiles.Member{ID: id, Host: host, Port: int32(p)})
	}
	for s := int32(0); s < segments; s++ {
		owner := c.owner
		m.Segments = append(m.Segments, &profiles.Shard{ID: s, Owner: &owner})
	}
	return m
}

// node is one scripted Profiles server. It embeds the generated Unimplemented base, as a
// real server does.
type node struct {
	profilesserver.UnimplementedProfiles
	id    int32
	c     *cluster
	calls atomic.Int32
	// hold, when set, is called by Lookup before it answers.
	hold func()
}

func (n *node) Lookup(_ context.Context, req *profiles.LookupRequest) (*profiles.LookupResponse, error) {
	n.calls.Add(1)
	if n.hold != nil {
		n.hold()
	}
	status, epoch := n.c.answer(n.id)
	resp := &profiles.LookupResponse{Status: status, MapEpoch: epoch}
	if status == profiles.ProfileStatus_Found {
		name := "name of " + req.UserId
		resp.Name = &name
	}
	return resp, nil
}

func (n *node) Save(_ context.Context, _ *profiles.SaveRequest) (*profiles.SaveResponse, error) {
	n.calls.Add(1)
	status, epoch := n.c.answer(n.id)
	return &profiles.SaveResponse{Status: status, MapEpoch: epoch}, nil
}

func (n *node) Describe(context.Context) (*profiles.Topology, error) { return n.c.topology(), nil }

// rig is a cluster of two scripted nodes, node 1 owning every segment at epoch 1, and a
// client dialed to it on a fake clock whose sleeps return at once and are recorded. The
// client uses a connection per call in flight (no pipelining), since a scripted node
// answers one call at a time per connection and a test holds calls at a node.
type rig struct {
	c      *cluster
	nodes  map[int32]*node
	clock  *middlewaretest.Clock
	client *profilesclient.Client
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{
		c:     &cluster{epoch: 1, owner: 1, addrs: map[int32]string{}, script: map[int32][]profiles.ProfileStatus{}},
		nodes: map[int32]*node{},
		clock: middlewaretest.NewClock(),
	}
	cfg := &thrift.TConfiguration{ConnectTimeout: 5 * time.Second, SocketTimeout: 10 * time.Second}
	for id := int32(1); id <= 2; id++ {
		n := &node{id: id, c: r.c}
		sock, err := thrift.NewTServerSocket("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := thrift.NewTSimpleServer4(profiles.NewProfilesProcessor(n), sock,
			thrift.NewTHeaderTransportFactoryConf(nil, cfg), thrift.NewTHeaderProtocolFactoryConf(cfg))
		if err := srv.Listen(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Serve() }()
		t.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
			<-done
		})
		r.nodes[id], r.c.addrs[id] = n, sock.Addr().String()
	}
	client, err := profilesclient.Dial(context.Background(), runtime.WithEnv(nil),
		runtime.WithSeeds(r.c.addrs[1]), runtime.WithClock(r.clock), runtime.WithPipelining(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	r.client = client
	// Past the debounce after the first map fetch, as a long-running client is.
	r.clock.Advance(time.Second)
	return r
}

// callCtx bounds a test's call in wall-clock time, so that a broken rule fails the test
// instead of hanging it.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A node that no longer owns the key answers WrongShard, in the refresh class: every call
// that met it waits for one map refresh, shared by all of them, and its next attempt goes
// to the new owner, which answers.
func TestWrongShardMeansOneSharedRefreshThenTheNewOwner(t *testing.T) {
	r := newRig(t)
	ctx := callCtx(t)
	if got := r.c.fetches(); got != 1 {
		t.Fatalf("%d map fetches after Dial, want 1", got)
	}
	flights := r.client.Engine().Refresher().Stats().Performed
	r.c.move(2)
	const calls = 8
	// The old owner answers once every call has reached it, so that all of them meet it.
	var arrived sync.WaitGroup
	arrived.Add(calls)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var arrivals atomic.Int32
	r.nodes[1].hold = func() {
		if arrivals.Add(1) > calls {
			return
		}
		arrived.Done()
		select {
		case <-all:
		case <-ctx.Done():
		}
	}
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			id := fmt.Sprintf("user-%d", i)
			resp, err := r.client.Lookup(ctx, &profiles.LookupRequest{UserId: id})
			switch {
			case err != nil:
				errs <- err
			case resp.Status != profiles.ProfileStatus_Found || resp.GetName() != "name of "+id:
				errs <- fmt.Errorf("%s: %s %q", id, resp.Status, resp.GetName())
			default:
				errs <- nil
			}
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// One refresh: a flight may ask a second node when the first is silent past its B6
	// threshold (the fake clock moves with every backoff), so count flights, not fetches.
	if got := r.client.Engine().Refresher().Stats().Performed - flights; got != 1 {
		t.Errorf("%d map refreshes, want 1 shared by every call", got)
	}
	if got := r.c.fetches(); got < 2 {
		t.Errorf("%d map fetches, want the first and the refresh's", got)
	}
	if got1, got2 := r.nodes[1].calls.Load(), r.nodes[2].calls.Load(); got1 != calls || got2 != calls {
		t.Errorf("node 1 had %d calls and node 2 %d, want %d each: one attempt on the old owner, one on the new", got1, got2, calls)
	}
}

// Overloaded and Resharding are both retried without a refresh; Resharding backs off
// four times longer (zaris.slow_backoff = "Resharding:4").
func TestSlowStatusBacksOffByItsFactor(t *testing.T) {
	r := newRig(t)
	ctx := callCtx(t)
	for _, status := range []profiles.ProfileStatus{profiles.ProfileStatus_Overloaded, profiles.ProfileStatus_Resharding} {
		r.c.play(1, status)
		resp, err := r.client.Save(ctx, &profiles.SaveRequest{UserId: "user-1", Name: "Ada"})
		if err != nil || resp.Status != profiles.ProfileStatus_Found {
			t.Fatalf("Save after %s: %v, %v", status, resp, err)
		}
	}
	base := runtime.DefaultRetryPolicy.Backoff
	if got, want := r.clock.Sleeps(), []time.Duration{base, 4 * base}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
	if got := r.c.fetches(); got != 1 {
		t.Errorf("%d map fetches, want 1: a retried status needs no refresh", got)
	}
}

// An answer (Found, Absent) goes straight back to the application, never retried.
func TestAnswerIsNeverRetried(t *testing.T) {
	r := newRig(t)
	ctx := callCtx(t)
	r.c.play(1, profiles.ProfileStatus_Absent)
	resp, err := r.client.Lookup(ctx, &profiles.LookupRequest{UserId: "nobody"})
	if err != nil || resp.Status != profiles.ProfileStatus_Absent {
		t.Fatalf("Lookup: %v, %v; want Absent", resp, err)
	}
	if got := r.nodes[1].calls.Load(); got != 1 {
		t.Errorf("%d attempts, want 1", got)
	}
	if got := r.clock.Sleeps(); len(got) != 0 {
		t.Errorf("backoffs %v, want none", got)
	}
}

// A node that keeps answering a retried status ends the call at its attempt bound, or at
// its deadline, whichever comes first, with a CallError naming the bound and the status.
func TestBothBoundsHold(t *testing.T) {
	overloaded := make([]profiles.ProfileStatus, 100)
	for i := range overloaded {
		overloaded[i] = profiles.ProfileStatus_Overloaded
	}
	for _, tc := range []struct {
		name  string
		opts  []runtime.CallOption
		bound runtime.Bound
	}{
		{"attempts", []runtime.CallOption{runtime.WithMaxAttempts(3)}, runtime.BoundAttempts},
		{"deadline", []runtime.CallOption{runtime.WithMaxAttempts(50), runtime.WithTimeout(time.Second)}, runtime.BoundDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.c.play(1, overloaded...)
			start := r.clock.Now()
			_, err := r.client.Lookup(callCtx(t), &profiles.LookupRequest{UserId: "user-1"}, tc.opts...)
			var ce *runtime.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Lookup: %v, want a *runtime.CallError", err)
			}
			if ce.Bound != tc.bound || !strings.Contains(err.Error(), "Overloaded") {
				t.Errorf("Lookup: bound %s, %v; want bound %s and the last status Overloaded", ce.Bound, err, tc.bound)
			}
			attempts := int(r.nodes[1].calls.Load())
			if attempts != len(ce.Attempts) {
				t.Errorf("the node had %d attempts, the error lists %d", attempts, len(ce.Attempts))
			}
			switch tc.bound {
			case runtime.BoundAttempts:
				if attempts != 3 {
					t.Errorf("%d attempts, want 3", attempts)
				}
			case runtime.BoundDeadline:
				if elapsed := r.clock.Now().Sub(start); attempts >= 50 || elapsed > time.Second {
					t.Errorf("%d attempts over %s, want the 1s deadline to end the call first", attempts, elapsed)
				}
			}
		})
	}
}
