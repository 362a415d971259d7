// Package proof holds the evidence behind zaris-go's promise that ownership churn is the
// store's problem and nothing acknowledged is lost. It has no API: everything lives in its
// tests.
//
// # Linearizability
//
// The tests record concurrent histories of zaris-go clients (made by zarisclient.Dial:
// the typed client over the default stack over a runtime.Engine) running Get, Put, guarded
// Put (ifMatchVersion, ifAbsent), Delete, guarded Delete and Increment against an
// in-process store (store.StartCluster) while the store goes through each kind of churn: kill and failover,
// scale-out (join), restart and failback, leave, segment migration, and all of them in one
// run. Each history is checked with porcupine (github.com/anishathalye/porcupine) against a
// key-value model partitioned per key. The model carries each key's value and version and
// checks versions as "strictly greater than the one before", because the store numbers
// versions per segment, not per key.
//
// One test mixes MultiGet and MultiPut calls (one to four items, keys may repeat, some puts
// guarded) with the single-key workload under kill, migration and join. Each item is an
// operation of its own on its key, spanning its batch's invocation and return (a batch is
// not atomic); an item without an answer, and each attempt of an item that was sent without
// a reply, is possibly applied.
//
// An operation whose outcome the client does not know is possibly applied, as in Jepsen:
// it may take effect at any point after its invocation, and its return time is the end of
// the history. That covers a call that ended in an error (a *runtime.CallError, including
// in-doubt writes, errors.Is(err, runtime.ErrInDoubt)) and every attempt of a call that was
// sent and got no reply before the call was retried (rules R9, B2): a replayed guarded Put
// answers Conflict although its first attempt applied, and the model sees that first
// attempt as a possibly-applied operation of its own.
//
// The checker is shown to bite: the same workload through a deliberately broken store (a
// connection wrapper that acknowledges some writes without sending them, one that does so
// for some MultiPut calls, or one that serves stale reads) must be reported as not
// linearizable. When a check does not come
// out as expected, porcupine's visualization of the history is written to a new
// zaris-proof-* directory under the system's temporary directory (kept after the test, so
// it can be opened) and its path is logged.
//
// Run them with:
//
//	go -C tools test -race ./proof
//
// # Network faults
//
// A TCP proxy in front of every node of an in-process cluster (faultproxy_test.go) can be
// switched at run time to delay every chunk, blackhole (read and never answer), drop
// (close connections, new ones at once) or reset (RST) the connections through it; it
// counts connections and requests by Thrift method. A client whose dialer goes through the
// proxies, with maxAttempts 3, a 300 ms attempt timeout and a 1.5 s request timeout, calls
// a key owned by the faulted node (faults_test.go). Every call returns within its deadline
// plus a generous slack (asserted only as an upper bound); a delay below the attempt
// timeout still answers; otherwise the call returns a *runtime.CallError naming the bound
// that tripped and unwrapping to runtime.ErrAttemptTimeout (blackhole, long delay) or
// runtime.ErrTransport (drop, reset), with the deadline's context.DeadlineExceeded allowed
// for an attempt it cut short. The proxy sees no more requests or connections than
// maxAttempts; an Increment (not idempotent, not guarded) is never replayed and fails with
// runtime.ErrInDoubt. Once the fault is lifted the same client answers again, and closing
// it leaves no connection open at the proxy.
//
// # Faults on the store's own paths
//
// The store's peer traffic is attacked too (peerproxy_test.go, peerfaults_test.go): a proxy
// in front of every node's peer port (store.ClusterConfig.PeerFront) delays, drops or
// duplicates request frames by Thrift method, a duplicate landing on a connection of its own
// up to 300 ms later, after newer frames (a reordering). The tests run the porcupine-checked
// workload while Replicate, Fetch and PushMap frames are faulted at random through a
// migration, a failover, a restart and a failback (again with three copies of each segment);
// while every map push and ping reaches
// each node up to 40 ms late (a delayed coordinator) through migrations and a join; and with
// the old owner answering the coordinator 2 or 10 ms late (store.Cluster.SlowDown) at a
// migration, a join, a failback and a leave. One test replays the ghost after a delete: the
// first Replicate of a Put is held 1.2 s, past the owner's 500 ms peer timeout, so it lands
// after the owner resent it, acknowledged it and the key was deleted; once the owner is
// killed the replica must still answer NotFound. The store's own tests (tools/store,
// TestCutover_*, TestTombstone_*) attack the fenced cut-over and tombstone collection on the
// raw protocol. Through the client the stale read at a cut-over is rare even without the
// fence (the client follows the newest map it sees; with the fence switched off the
// migration test here still passed three runs out of three), so the reproduction that fails
// without the fence is the raw one, TestCutover_SlowOldOwnerServesNoStaleRead.
//
// # Fuzzing
//
// Fuzz targets live next to the code they fuzz, each with a committed seed corpus under
// testdata/fuzz/<FuzzName>/ that plain `go test` runs. To fuzz one for longer:
//
//	go test -run '^$' -fuzz '^FuzzNewConfigEnv$' -fuzztime 30s ./runtime
//	go test -run '^$' -fuzz '^FuzzMalformedReply$' -fuzztime 30s ./runtime
//	go -C tools test -run '^$' -fuzz '^FuzzParseProgram$' -fuzztime 30s ./zarisgen
//	go -C tools test -run '^$' -fuzz '^FuzzIDLNames$' -fuzztime 30s ./zarisgen
//	go -C tools test -run '^$' -fuzz '^FuzzNodeHeaderPort$' -fuzztime 30s ./store
//	go -C tools test -run '^$' -fuzz '^FuzzNodeJSONPort$' -fuzztime 30s ./store
//
// Go runs one fuzz target at a time, so each needs its own command.
package proof
