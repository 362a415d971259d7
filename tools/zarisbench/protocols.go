package main

import (
	"context"
	"fmt"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// protocolResult is one protocol and transport: throughput of a 50/50 mix of Get and Put
// of a 100-byte value, and the bytes one call puts on the wire.
type protocolResult struct {
	Protocol  string `json:"protocol"`
	Transport string `json:"transport"`
	Callers   int    `json:"callers"`
	// OpsPerS is the mix's throughput, the best of the rounds; Ratio is it over the
	// best combination's.
	OpsPerS float64 `json:"opsPerSec"`
	Ratio   float64 `json:"ratioToBest"`
	P99Ms   float64 `json:"p99Ms"`
	// PutUp and PutDown are the bytes of one Put (request and response); GetUp and GetDown
	// of one Get of the same key, measured through a counting proxy.
	PutUp   float64 `json:"putBytesUp"`
	PutDown float64 `json:"putBytesDown"`
	GetUp   float64 `json:"getBytesUp"`
	GetDown float64 `json:"getBytesDown"`
}

// protocolCombos are the combinations measured. The header transport frames itself, so
// the transport option does not apply to it.
var protocolCombos = []struct {
	p runtime.Protocol
	t runtime.Transport
}{
	{runtime.ProtocolBinary, runtime.TransportFramed},
	{runtime.ProtocolBinary, runtime.TransportBuffered},
	{runtime.ProtocolCompact, runtime.TransportFramed},
	{runtime.ProtocolCompact, runtime.TransportBuffered},
	{runtime.ProtocolHeader, runtime.TransportFramed},
}

// protocols measures section 2 against a one-node store (its port accepts every
// combination): each combination's throughput in rounds interleaved with the others, then
// its bytes per call through a counting proxy.
func protocols(ctx context.Context, callers, rounds int, d time.Duration, wireOps int) ([]protocolResult, error) {
	cluster, err := startCluster(ctx, 1, 1)
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	out := make([]protocolResult, len(protocolCombos))
	clients := make([]*zarisclient.Client, len(protocolCombos))
	ks := keys("proto", 256)
	for i, c := range protocolCombos {
		cl, err := dial(ctx, cluster, runtime.WithProtocol(c.p), runtime.WithTransport(c.t))
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", c.p, c.t, err)
		}
		defer cl.Close()
		clients[i] = cl
		out[i] = protocolResult{Protocol: string(c.p), Transport: string(c.t), Callers: callers}
		if c.p == runtime.ProtocolHeader {
			out[i].Transport = "header"
		}
		if i == 0 {
			if err := preload(ctx, cl, ks); err != nil {
				return nil, err
			}
		}
		runLoad(ctx, callers, d/4, mixed(cl, ks)) // warm up: fill the pool
	}
	for range rounds {
		for i, cl := range clients {
			r := runLoad(ctx, callers, d, mixed(cl, ks))
			if r.Errors > 0 {
				return nil, fmt.Errorf("%s/%s: %d calls failed, first: %s", out[i].Protocol, out[i].Transport, r.Errors, r.FirstError)
			}
			if r.OpsPerS > out[i].OpsPerS {
				out[i].OpsPerS, out[i].P99Ms = r.OpsPerS, r.P99Ms
			}
		}
	}
	best := 0.0
	for _, r := range out {
		best = max(best, r.OpsPerS)
	}
	for i, c := range protocolCombos {
		out[i].Ratio = ratio(out[i].OpsPerS, best)
		if err := wireBytes(ctx, cluster.Seeds(), c.p, c.t, wireOps, &out[i]); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", c.p, c.t, err)
		}
	}
	return out, nil
}

// wireBytes counts the bytes of ops sequential Puts, then as many Gets, of one key through
// a counting proxy, after a warm-up call of each, and stores the averages in r.
func wireBytes(ctx context.Context, seeds []string, p runtime.Protocol, t runtime.Transport, ops int, r *protocolResult) error {
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(noEnv), runtime.WithSeeds(seeds...), runtime.WithProtocol(p), runtime.WithTransport(t))
	if err != nil {
		return err
	}
	var ps proxies
	defer ps.close()
	cl, err := zarisclient.Dial(ctx, runtime.WithEnv(noEnv), runtime.WithSeeds(seeds...), runtime.WithProtocol(p),
		runtime.WithTransport(t), runtime.WithDialer(ps.dialer(runtime.DefaultDialer(cfg))))
	if err != nil {
		return err
	}
	defer cl.Close()
	key := []byte("wire-key")
	put := &zaris.PutRequest{Key: key, Value: value}
	get := &zaris.GetRequest{Key: key}
	measure := func(f func() error) (up, down float64, err error) {
		if err := f(); err != nil { // warm-up: the connection is open before counting
			return 0, 0, err
		}
		u0, d0 := settledBytes(&ps)
		for range ops {
			if err := f(); err != nil {
				return 0, 0, err
			}
		}
		u1, d1 := settledBytes(&ps)
		return float64(u1-u0) / float64(ops), float64(d1-d0) / float64(ops), nil
	}
	if r.PutUp, r.PutDown, err = measure(func() error { _, err := cl.Put(ctx, put); return err }); err != nil {
		return err
	}
	r.GetUp, r.GetDown, err = measure(func() error { _, err := cl.Get(ctx, get); return err })
	return err
}

// settledBytes reads the proxies' counters once they stop moving: the proxy may still be
// counting a reply the client already has.
func settledBytes(ps *proxies) (up, down int64) {
	up, down = ps.bytes()
	for range 100 {
		time.Sleep(2 * time.Millisecond)
		u, d := ps.bytes()
		if u == up && d == down {
			return up, down
		}
		up, down = u, d
	}
	return up, down
}
