package clientexamples_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// newClient dials cluster and returns the typed client on the default stack.
func newClient(ctx context.Context, cluster *store.Cluster, opts ...runtime.Option) *zarisclient.Client {
	kv, err := zarisclient.Dial(ctx, append([]runtime.Option{runtime.WithSeeds(cluster.Seeds()...)}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return kv
}

// Compare-and-set: IfMatchVersion applies a write only if the key is still at the version
// the caller read; otherwise the answer is Conflict, with the current version, and a nil
// error. IfAbsent creates a key only if it does not exist. A guarded write that the client
// replays after a lost reply also comes back Conflict, never applied twice (rule R9).
// A version is opaque: it only grows, across restarts too, so compare versions, never count
// them.
func Example_compareAndSet() {
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	kv := newClient(ctx, cluster)
	defer kv.Close()

	key := []byte("account:7")
	yes := true
	created, err := kv.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("100"), IfAbsent: &yes})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("create:", created.Status)

	again, err := kv.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("0"), IfAbsent: &yes})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("create again:", again.Status)

	// Read, compute, write back only if nobody wrote in between.
	read, err := kv.Get(ctx, &zaris.GetRequest{Key: key})
	if err != nil {
		log.Fatal(err)
	}
	v := read.Version
	updated, err := kv.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("90"), IfMatchVersion: &v})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("update at the version read ->", updated.Status, "with a newer version:", updated.Version > v)

	// The same write again: the version has moved on.
	stale, err := kv.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte("80"), IfMatchVersion: &v})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the same update again ->", stale.Status, "with the current version:", stale.Version == updated.Version)

	cur := stale.Version
	del, err := kv.Delete(ctx, &zaris.DeleteRequest{Key: key, IfMatchVersion: &cur})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delete at the current version ->", del.Status)
	// Output:
	// create: Ok
	// create again: Conflict
	// update at the version read -> Ok with a newer version: true
	// the same update again -> Conflict with the current version: true
	// delete at the current version -> Ok
}

// A call that gets no answer returns a *runtime.CallError: the bound that stopped it and
// every attempt's node, map epoch and outcome. Here the only node of a one-node cluster is
// killed after the client has its map, and no replica can take over. Once an attempt finds
// node 1 gone (its dial refused), the client waits up to 5 s for a map that names another
// owner (rule B7), and the refused attempt it waited after is not counted; no such map
// comes, so the call then spends its three counted attempts (the default maxAttempts) on
// node 1 as well, and the map refreshes between them find no node to ask.
func Example_callError() {
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 1, ReplicationFactor: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	kv := newClient(ctx, cluster)
	defer kv.Close()
	if err := cluster.Kill(1); err != nil {
		log.Fatal(err)
	}

	_, err = kv.Put(ctx, &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("ada")})
	var ce *runtime.CallError
	if errors.As(err, &ce) {
		fmt.Println("op:", ce.Op, "bound:", ce.Bound, "attempts:", len(ce.Attempts))
		for _, a := range ce.Attempts {
			fmt.Println("attempt", a.N, "node", a.Node, "answered:", a.Answered, "class:", a.Class)
		}
	}
	// The error unwraps to the last attempt's cause.
	fmt.Println("node unavailable:", errors.Is(err, runtime.ErrNodeUnavailable))
	// Output:
	// op: Put bound: maxAttempts attempts: 4
	// attempt 1 node 1 answered: false class: refresh-retry
	// attempt 2 node 1 answered: false class: refresh-retry
	// attempt 3 node 1 answered: false class: refresh-retry
	// attempt 4 node 1 answered: false class: refresh-retry
	// node unavailable: true
}

// WithRetriesDisabled (or ZARIS_DISABLE_RETRIES=true) makes every call a single attempt:
// the first failure is the call's error. runtime.WithMaxAttempts(1) does the same for one
// call.
func Example_withRetriesDisabled() {
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 1, ReplicationFactor: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	kv := newClient(ctx, cluster, runtime.WithRetriesDisabled())
	defer kv.Close()
	engine := kv.Engine()
	fmt.Println("max attempts:", engine.Config().Retry.MaxAttempts, "disabled:", engine.Config().Retry.Disabled)
	if err := cluster.Kill(1); err != nil {
		log.Fatal(err)
	}

	_, err = kv.Get(ctx, &zaris.GetRequest{Key: []byte("user:42")})
	var ce *runtime.CallError
	if errors.As(err, &ce) {
		fmt.Println("bound:", ce.Bound, "attempts:", len(ce.Attempts), "refreshes:", engine.Refresher().Stats().Requested)
	}
	// Output:
	// max attempts: 1 disabled: true
	// bound: maxAttempts attempts: 1 refreshes: 0
}
