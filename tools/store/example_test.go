package store_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/clustron/zaris-go/tools/store"
)

// A three-node cluster in one process, a node killed and brought back, and its segments
// handed back to it. Clients dial any of the seeds.
func ExampleNewCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	fmt.Println("seeds:", cluster.Seeds())

	// Kill node 2 like kill -9; the coordinator fails it over within a heartbeat or so.
	if err := cluster.Kill(2); err != nil {
		log.Fatal(err)
	}
	if err := cluster.Coordinator().WaitNode(ctx, 2, false); err != nil {
		log.Fatal(err)
	}
	// Bring it back on the same ports: it catches up as a replica, then takes back the
	// segments it prefers.
	if err := cluster.Restart(ctx, 2); err != nil {
		log.Fatal(err)
	}
	if err := cluster.Failback(ctx, 2); err != nil {
		log.Fatal(err)
	}
	fmt.Println("epoch:", cluster.Map().Epoch)
}

// Hold a migration at its cut-over to watch the old owner answer Migrating to writes.
func ExampleCluster_HoldChurn() {
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3, Segments: 16})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	release := cluster.HoldChurn()
	done := make(chan error, 1)
	go func() { done <- cluster.MigrateSegment(ctx, 0, 3) }()
	// ... writes to segment 0 at its owner now answer Migrating ...
	release()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
}
