package clientexamples_test

import (
	"context"
	"fmt"
	"log"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// A service's use of the client, end to end against an in-process cluster: one call
// dials the cluster with a call-level middleware in front of the retry layer (it sees each
// call once, with its final outcome and attempt history), then typed calls. NotFound and
// Conflict come back as answers with a nil error.
func Example_service() {
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	// A call-level middleware: once per call, in front of the deadline and retry layers.
	audit := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			if err == nil {
				fmt.Printf("audit: %s %s -> %s\n", call.Op, call.Key, call.Op.StatusName(resp))
			}
			return resp, err
		}
	}
	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(cluster.Seeds()...), runtime.WithCallMiddleware(audit))
	if err != nil {
		log.Fatal(err)
	}
	defer kv.Close()

	put, err := kv.Put(ctx, &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("ada")})
	if err != nil {
		log.Fatal(err)
	}
	// A compare-and-set on a stale version is answered Conflict, with the current version.
	stale := put.Version - 1
	cas, err := kv.Put(ctx, &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("bob"), IfMatchVersion: &stale})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("conflict carries the current version:", cas.Version == put.Version)
	get, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("user:42")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("value:", string(get.Value))
	if _, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("user:43")}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// audit: Put user:42 -> Ok
	// audit: Put user:42 -> Conflict
	// conflict carries the current version: true
	// audit: Get user:42 -> Ok
	// value: ada
	// audit: Get user:43 -> NotFound
}
