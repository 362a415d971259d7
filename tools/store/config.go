package store

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/tools/store/control"
)

// Defaults of NodeConfig and CoordinatorConfig. A zero field takes its default.
const (
	// DefaultSegments is the number of segments of a new cluster.
	DefaultSegments = 64
	// DefaultReplicationFactor is the number of copies of each segment (owner included).
	DefaultReplicationFactor = 2
	// DefaultHeartbeat is the interval of the coordinator's heartbeat to each node.
	DefaultHeartbeat = 50 * time.Millisecond
	// DefaultFailureTimeout is how long a node may miss heartbeats before the coordinator
	// suspects it and probes it (see DefaultProbeTimeout).
	DefaultFailureTimeout = 250 * time.Millisecond
	// DefaultProbeTimeout is how long a suspected node has to answer the coordinator's probe
	// (a ping on a fresh connection) before it is failed over. A node that answers is slow,
	// not dead, and keeps its segments.
	DefaultProbeTimeout = time.Second
	// DefaultMaxKeySize is the largest key a node accepts, in bytes (64 KiB).
	DefaultMaxKeySize = 64 << 10
	// DefaultMaxValueSize is the largest value a node accepts, in bytes (1 MiB).
	DefaultMaxValueSize = 1 << 20
	// DefaultIdleTimeout is how long a client connection may stay silent before the node
	// closes it.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultLeaseTTL is the TTL of a node's etcd lease. A node renews it every third of
	// the TTL and may serve until TTL (less a tenth for clock rates) after it sent its last
	// successful renewal; a node whose renewals stop is failed over when etcd expires its key.
	DefaultLeaseTTL = 2 * time.Second
	// DefaultReplicationTimeout bounds how long a write's caller waits while the owner
	// replicates it (an unreachable replica holds it until a map drops that replica). The
	// caller is then answered Unavailable if no copy can hold the write, else nothing (in
	// doubt), and the owner goes on until every copy applied the write or was dropped.
	DefaultReplicationTimeout = 2 * time.Second
	// DefaultLeaseWait is how long a request that finds the node's right to serve run out
	// waits for the next renewal of its etcd lease before it answers Unavailable. A stall of
	// the whole process (a loaded machine) runs the right out without any failure, and the
	// renewal goes out as soon as the stall ends.
	DefaultLeaseWait = 5 * DefaultHeartbeat
	// DefaultCutoverWait is how long a request that finds its segment in a handoff's
	// cut-over waits for the map that ends it before it answers Migrating (a write) or
	// Unavailable (a read at the old owner). A fenced handoff takes a map push or two, so
	// most such requests are answered from the next map a few milliseconds later, where the
	// client would otherwise back off 100 ms, or 800 ms after Migrating.
	DefaultCutoverWait = 100 * time.Millisecond
	// DefaultDedupWindow is how long a node keeps the first outcome of a tokened write
	// (zaris.RequestToken) and answers a replay of it with that outcome (rule B8); its map
	// advertises it as dedupWindowMs.
	DefaultDedupWindow = 10 * time.Minute
	// DefaultDedupOutcomes is the most outcomes a node keeps per segment (about 100 bytes
	// each: make bench measures it). Past it the oldest goes even inside its window; with
	// the default 64 segments that holds a full window at 1,700 tokened writes a second
	// per node.
	DefaultDedupOutcomes = 16384
)

// NodeConfig configures one storage node.
type NodeConfig struct {
	// ID is the node's id, unique in the cluster and positive. A node that restarts keeps it.
	ID int32
	// Listen is the data address (ZarisKv), host:port; default "127.0.0.1:0".
	Listen string
	// PeerListen is the address of the node's internal ZarisPeer service; default "127.0.0.1:0".
	PeerListen string
	// PeerAdvertise is the peer address the node registers with the coordinator, the one
	// the coordinator and the other nodes dial; default the address PeerListen bound. Tests
	// put a fault-injecting proxy in front of the peer port with it.
	PeerAdvertise string
	// Coordinator is the coordinator's address, host:port, or a comma-separated list of the
	// addresses of coordinators of which one leads. Required.
	Coordinator string
	// Protocol selects the data port's protocols; default ProtocolHeader.
	Protocol Protocol
	// TLS, when set, serves the data port over TLS. Set ClientAuth and ClientCAs for mutual
	// TLS. It does not touch the peer port (Credentials).
	TLS *tls.Config
	// Credentials, when set, make the peer port and every call the node makes to its peers
	// and coordinators mutual TLS with the cluster's CA: only members talk to members. Nil
	// is plain TCP, for a cluster on loopback only.
	Credentials *Credentials
	// MaxKeySize is the largest key accepted, in bytes; default DefaultMaxKeySize.
	MaxKeySize int
	// MaxValueSize is the largest value accepted, in bytes; default DefaultMaxValueSize.
	MaxValueSize int
	// IdleTimeout closes a data connection that stays silent (or stalls mid-message) this
	// long; default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ReplicationTimeout: see DefaultReplicationTimeout.
	ReplicationTimeout time.Duration
	// LeaseWait: see DefaultLeaseWait.
	LeaseWait time.Duration
	// CutoverWait: see DefaultCutoverWait.
	CutoverWait time.Duration
	// DedupWindow: see DefaultDedupWindow.
	DedupWindow time.Duration
	// DedupOutcomes: see DefaultDedupOutcomes.
	DedupOutcomes int
	// DisableDedup makes the node keep no outcomes and advertise no dedup window, as a
	// store without rule B8: a replay of a tokened write applies again.
	DisableDedup bool
	// Etcd is a client of the cluster's etcd, where the node registers under a lease
	// (EtcdPrefix, default "/zaris/", as the coordinator's); when nil the node connects to
	// EtcdEndpoints. One of them is required.
	Etcd          *clientv3.Client
	EtcdEndpoints []string
	// EtcdTLS, when set, reaches EtcdEndpoints over TLS with it (an etcd that requires the
	// cluster's member certificates: Credentials.ClientTLS).
	EtcdTLS    *tls.Config
	EtcdPrefix string
	// LeaseTTL is the TTL of the node's etcd lease, whole seconds; default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Clock is the node's clock (default the system's): its right to serve is measured on
	// Clock.Mono only, never on the wall clock. Tests inject one.
	Clock control.Clock
	// Logger receives the node's log; default discards.
	Logger *slog.Logger
}

// withDefaults checks c and returns it with its defaults filled in.
func (c NodeConfig) withDefaults() (NodeConfig, error) {
	if c.ID <= 0 {
		return c, fmt.Errorf("store: node id must be positive, got %d", c.ID)
	}
	if c.Coordinator == "" {
		return c, errors.New("store: node needs a coordinator address")
	}
	if c.Etcd == nil && len(c.EtcdEndpoints) == 0 {
		return c, errors.New("store: node needs etcd (Etcd or EtcdEndpoints)")
	}
	c = fillDefaults(c, nodeDefaults)
	if c.LeaseTTL < time.Second {
		c.LeaseTTL = DefaultLeaseTTL
	}
	c.LeaseTTL = c.LeaseTTL.Truncate(time.Second)
	if c.Clock == nil {
		c.Clock = control.SystemClock()
	}
	c.Logger = orDiscard(c.Logger)
	return c, nil
}

// peerMaxRequest is the peer port's largest request frame: a replicated write of the largest
// key and value, or a map of many segments (PushMap), whichever is larger.
func (c NodeConfig) peerMaxRequest() int32 {
	return max(c.maxMessage()+64<<10, 8<<20)
}

// coordMaxRequest is the coordinator port's largest request frame: its requests (a
// registration, a report, a churn command) are small.
const coordMaxRequest = 1 << 20

// maxMessage is the data port's largest frame and message: the largest key and value plus
// room for the rest of a request.
func (c NodeConfig) maxMessage() int32 {
	n := c.MaxKeySize + c.MaxValueSize + 64<<10
	return int32(max(n, 4<<20))
}

// CoordinatorConfig configures the coordinator.
type CoordinatorConfig struct {
	// Listen is the coordinator's address, host:port; default "127.0.0.1:0".
	Listen string
	// InitialNodes is how many nodes must register before the first map places segments
	// on them; default 1. A node registering later joins (scale-out).
	InitialNodes int
	// Segments is the number of segments; default DefaultSegments.
	Segments int32
	// ReplicationFactor is the number of copies of each segment; default
	// DefaultReplicationFactor.
	ReplicationFactor int
	// Heartbeat is the heartbeat interval; default DefaultHeartbeat.
	Heartbeat time.Duration
	// FailureTimeout is how long a node may go without an answered heartbeat before it is
	// suspected; default DefaultFailureTimeout. A suspected node is probed with a ping on a
	// fresh connection and failed over only if that goes unanswered for ProbeTimeout. A
	// node whose connection drops and whose data port then refuses a connection (a killed
	// process) is failed over at once.
	FailureTimeout time.Duration
	// ProbeTimeout bounds the probe of a suspected node; default DefaultProbeTimeout. A stalled
	// (not killed) node is failed over once etcd expires its lease, or once it failed the
	// probe, the coordinator revoked its lease and the lease's TTL ran out, whichever is first.
	ProbeTimeout time.Duration
	// AutoFailback hands a returning node its preferred segments back as soon as it has
	// caught up; without it, Failback does.
	AutoFailback bool
	// Etcd is a client of the etcd that keeps the cluster state, under EtcdPrefix. When nil,
	// the coordinator connects to EtcdEndpoints, or with none embeds a single-member etcd in
	// EtcdDir (empty: a temporary directory, removed by Close, written without fsync).
	Etcd *clientv3.Client
	// EtcdEndpoints are an existing etcd cluster's client addresses, host:port.
	EtcdEndpoints []string
	// EtcdDir is the embedded etcd's data directory; see Etcd.
	EtcdDir string
	// EtcdPrefix is the key prefix of the cluster's state in etcd; default "/zaris/".
	EtcdPrefix string
	// Fence ties every commit of the cluster state to a leadership (control.Elector.Fence):
	// once it ends, the coordinator's commits fail and it stops acting. The zero Fence is for
	// a coordinator that is the cluster's only one.
	Fence control.Fence
	// Credentials, when set, make the coordinator's port and its calls to nodes mutual TLS
	// with the cluster's CA, as NodeConfig.Credentials. Nil is plain TCP.
	Credentials *Credentials
	// Logger receives the coordinator's log; default discards.
	Logger *slog.Logger

	// dial opens the connection that checks whether a silent node's data port still
	// accepts; default net.DialTimeout. Tests cut the coordinator off from a node with it.
	dial func(network, addr string, timeout time.Duration) (net.Conn, error)
}

// withDefaults checks c and returns it with its defaults filled in.
func (c CoordinatorConfig) withDefaults() (CoordinatorConfig, error) {
	c = fillDefaults(c, coordinatorDefaults)
	if c.FailureTimeout < c.Heartbeat {
		return c, fmt.Errorf("store: failure timeout %v is shorter than the heartbeat %v", c.FailureTimeout, c.Heartbeat)
	}
	c.Logger = orDiscard(c.Logger)
	if c.dial == nil {
		c.dial = net.DialTimeout
	}
	return c, nil
}

// nodeDefaults and coordinatorDefaults are the defaults fillDefaults gives a field left zero
// (or a number left negative); the other defaults (LeaseTTL, Clock, Logger) are in withDefaults.
var (
	nodeDefaults = NodeConfig{
		Listen: defaultListen, PeerListen: defaultListen, EtcdPrefix: defaultEtcdPrefix,
		MaxKeySize: DefaultMaxKeySize, MaxValueSize: DefaultMaxValueSize, IdleTimeout: DefaultIdleTimeout,
		ReplicationTimeout: DefaultReplicationTimeout, LeaseWait: DefaultLeaseWait, CutoverWait: DefaultCutoverWait,
		DedupWindow: DefaultDedupWindow, DedupOutcomes: DefaultDedupOutcomes,
	}
	coordinatorDefaults = CoordinatorConfig{
		Listen: defaultListen, EtcdPrefix: defaultEtcdPrefix, InitialNodes: 1, Segments: DefaultSegments,
		ReplicationFactor: DefaultReplicationFactor, Heartbeat: DefaultHeartbeat,
		FailureTimeout: DefaultFailureTimeout, ProbeTimeout: DefaultProbeTimeout,
	}
)

const (
	defaultListen     = "127.0.0.1:0"
	defaultEtcdPrefix = "/zaris/"
)

// fillDefaults returns c with each exported field that is zero, or a negative number, set
// to def's value where def has one: the one rule of every default of the configurations.
func fillDefaults[T any](c, def T) T {
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(def)
	for i := range dst.NumField() {
		f, d := dst.Field(i), src.Field(i)
		if !f.CanSet() || d.IsZero() {
			continue
		}
		if f.IsZero() || (f.CanInt() && f.Int() < 0) {
			f.Set(d)
		}
	}
	return c
}

// orDiscard is l, or a logger that discards when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discardLogger()
	}
	return l
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
