package main

import (
	"context"
	"fmt"
	"net"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// scaleResult is section 3: throughput and p99 against callers and against nodes, and the
// heap one pooled connection holds.
type scaleResult struct {
	// Callers runs a 3-node store (or fewer, see the config) with more and more callers;
	// each Ratio is to the first row's throughput.
	Callers []scaleRow `json:"byCallers"`
	// Nodes runs NodesCallers callers against stores of more and more nodes.
	Nodes        []scaleRow `json:"byNodes"`
	NodesCallers int        `json:"nodesCallers"`
	// ConnBytes is the client heap one open connection holds (binary over framed), measured
	// over ConnCount connections to a listener that only accepts.
	ConnBytes float64 `json:"heapBytesPerConn"`
	ConnCount int     `json:"connCount"`
	// PoolSize is the client's pool size per node (the default) in these runs.
	PoolSize int `json:"poolSizePerNode"`
	// PipelineConns is the client's pipelined connections per node (the default), 0 when
	// pipelining is off.
	PipelineConns int `json:"pipelineConnsPerNode"`
}

// scaleRow is one load.
type scaleRow struct {
	Nodes int `json:"nodes"`
	loadResult
	Ratio float64 `json:"ratioToFirst"`
}

// scale measures section 3.
func scale(ctx context.Context, callerCounts, nodeCounts []int, callerNodes, nodesCallers int, d time.Duration, connCount int) (scaleResult, error) {
	r := scaleResult{NodesCallers: nodesCallers}
	ks := keys("scale", 1024)
	run := func(nodes int, callerCounts []int) ([]scaleRow, error) {
		cluster, err := startCluster(ctx, nodes, 0)
		if err != nil {
			return nil, err
		}
		defer cluster.Close()
		cl, err := dial(ctx, cluster)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		r.PoolSize = cl.Engine().Config().PoolSize
		if cfg := cl.Engine().Config(); cfg.Pipelining {
			r.PipelineConns = cfg.PipelineConns
		}
		if err := preload(ctx, cl, ks); err != nil {
			return nil, err
		}
		var rows []scaleRow
		for _, c := range callerCounts {
			runLoad(ctx, c, d/4, mixed(cl, ks)) // warm up: fill the pools
			l := runLoad(ctx, c, d, mixed(cl, ks))
			if l.Errors > 0 {
				return nil, fmt.Errorf("%d nodes, %d callers: %d calls failed, first: %s", nodes, c, l.Errors, l.FirstError)
			}
			rows = append(rows, scaleRow{Nodes: nodes, loadResult: l})
		}
		return rows, nil
	}
	var err error
	if r.Callers, err = run(callerNodes, callerCounts); err != nil {
		return r, err
	}
	for _, n := range nodeCounts {
		rows, err := run(n, []int{nodesCallers})
		if err != nil {
			return r, err
		}
		r.Nodes = append(r.Nodes, rows...)
	}
	for _, rows := range [][]scaleRow{r.Callers, r.Nodes} {
		for i := range rows {
			rows[i].Ratio = ratio(rows[i].OpsPerS, rows[0].OpsPerS)
		}
	}
	r.ConnCount = connCount
	r.ConnBytes, err = connHeap(ctx, connCount)
	return r, err
}

// connHeap opens n client connections with the built-in dialer (binary over framed) to a
// listener that accepts and holds them, and returns the heap growth per connection.
func connHeap(ctx context.Context, n int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var mu sync.Mutex // protects accepted
	var accepted []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	})
	defer func() {
		ln.Close()
		wg.Wait()
		for _, c := range accepted {
			c.Close()
		}
	}()
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(noEnv), runtime.WithSeeds(ln.Addr().String()))
	if err != nil {
		return 0, err
	}
	dialer := runtime.DefaultDialer(cfg)
	conns := make([]runtime.Conn, 0, n)
	// The accepted side is counted too; it holds a few hundred bytes per socket against
	// the client's buffers of tens of KiB, so it is left in.
	heap := func() uint64 {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// A cluster closed just before (its embedded etcd, its connections) may still be
	// releasing memory: wait for the heap to settle, or the growth measured can be negative.
	before := heap()
	for range 40 {
		time.Sleep(25 * time.Millisecond)
		now := heap()
		if diff := int64(now) - int64(before); diff < 16<<10 && diff > -16<<10 {
			break
		}
		before = now
	}
	for range n {
		c, err := dialer(ctx, ln.Addr().String())
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
	}
	after := heap()
	for _, c := range conns {
		c.Close()
	}
	return (float64(after) - float64(before)) / float64(n), nil
}
