package control

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// shared is the one embedded etcd a test process shares among its tests.
var shared struct {
	mu   sync.Mutex
	etcd *Embedded
	next int
}

// sharedConfig is the shared test etcd: no fsync (its data dies with the process) and short
// single-member raft timings, so it starts in a few tens of milliseconds.
var sharedConfig = EmbedConfig{Name: "zaris-test", NoFsync: true, LogLevel: "fatal"}

// ForTest returns a client of the embedded etcd shared by every test of this process
// (started by the first call), and a key prefix no other call returns, so each test, or
// each cluster a test starts, keeps its state apart. The client is closed when t ends; the
// etcd itself runs until CloseShared.
func ForTest(t testing.TB) (*clientv3.Client, string) {
	t.Helper()
	shared.mu.Lock()
	if shared.etcd == nil {
		e, err := StartEmbedded(sharedConfig)
		if err != nil {
			shared.mu.Unlock()
			t.Fatalf("shared test etcd: %v", err)
		}
		shared.etcd = e
	}
	shared.next++
	endpoints, prefix := shared.etcd.Endpoints(), fmt.Sprintf("/zaris-test/%d/", shared.next)
	shared.mu.Unlock()
	cli, err := Connect(context.Background(), endpoints, 10*time.Second)
	if err != nil {
		t.Fatalf("shared test etcd: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, prefix
}

// CloseShared stops the shared test etcd if ForTest started one. A TestMain calls it after
// the tests ran, before checking for leaked goroutines.
func CloseShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.etcd != nil {
		shared.etcd.Close()
		shared.etcd = nil
	}
}
