package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// Member states as the coordinator records them in etcd.
const (
	memberUp      = "up"
	memberDown    = "down"
	memberLeaving = "leaving"
	memberLeft    = "left"
)

// throwawayEtcd is the embedded etcd of a cluster whose state dies with the process: a
// temporary directory, no fsync, and only fatal errors logged (its shutdown logs errors).
var throwawayEtcd = control.EmbedConfig{NoFsync: true, LogLevel: "fatal"}

// commitTimeout bounds one commit of the cluster state to etcd.
const commitTimeout = 5 * time.Second

// churnData is the coordinator's own detail of the churn in progress, kept in etcd as the
// ChurnStep's Data so that a coordinator taking over resumes it.
type churnData struct {
	// Handoffs are the pending handoffs: segment to wanted owner and kind.
	Handoffs map[int32]handoffRec `json:"handoffs,omitempty"`
	// LastOwner are the segments left without a copy: segment to the process that owned it last.
	LastOwner map[int32]ownerJSON `json:"last_owner,omitempty"`
	// Synced are the learner copies reported complete: "seg/node" to the owner copied from.
	Synced map[string]int32 `json:"synced,omitempty"`
	// LearnerAt are the epochs each learner was added in: "seg/node" to epoch.
	LearnerAt map[string]int64 `json:"learner_at,omitempty"`
	// Revoking are the nodes whose etcd lease the coordinator is revoking: node to lease.
	Revoking map[int32]revokeIntent `json:"revoking,omitempty"`
}

// revokeIntent is a revoke of a node's etcd lease, committed before the revoke is sent.
type revokeIntent struct {
	Lease int64         `json:"lease"`
	TTL   time.Duration `json:"ttl"`
}

type handoffRec struct {
	Owner int32       `json:"owner"`
	Kind  handoffKind `json:"kind"`
}

type ownerJSON struct {
	ID          int32 `json:"id"`
	Incarnation int64 `json:"incarnation"`
}

func syncKeyString(k syncKey) string { return fmt.Sprintf("%d/%d", k.seg, k.node) }

func parseSyncKey(s string) (syncKey, error) {
	var k syncKey
	_, err := fmt.Sscanf(s, "%d/%d", &k.seg, &k.node)
	return k, err
}

// stateLocked is the coordinator's state as it is kept in etcd, with m as the map. Callers
// hold c.mu.
func (c *Coordinator) stateLocked(m *zarispeer.PeerMap) (control.State, error) {
	enc, err := json.Marshal(m)
	if err != nil {
		return control.State{}, err
	}
	st := control.State{
		Epoch:    uint64(m.Epoch),
		Map:      enc,
		Members:  map[int32]control.Member{},
		Segments: map[int32][]int32{},
	}
	for ref := range c.left {
		st.Members[ref.id] = control.Member{ID: ref.id, State: memberLeft, Incarnation: ref.incarnation}
	}
	for id, r := range c.nodes {
		state := memberDown
		switch {
		case r.alive && r.leaving:
			state = memberLeaving
		case r.alive:
			state = memberUp
		}
		st.Members[id] = control.Member{ID: id, Addr: r.dataAddr(), PeerAddr: r.info.PeerAddr, State: state, Incarnation: r.incarnation,
			Lease: int64(r.lease), LeaseTTL: r.ttl}
	}
	var cd churnData
	for s, w := range c.want {
		if len(w.members) > 0 {
			st.Segments[int32(s)] = w.members
		}
		if w.owner != noOwner {
			if cd.Handoffs == nil {
				cd.Handoffs = map[int32]handoffRec{}
			}
			cd.Handoffs[int32(s)] = handoffRec{Owner: w.owner, Kind: w.kind}
		}
		if lo := c.lastOwner[s]; lo.id != 0 {
			if cd.LastOwner == nil {
				cd.LastOwner = map[int32]ownerJSON{}
			}
			cd.LastOwner[int32(s)] = ownerJSON{lo.id, lo.incarnation}
		}
	}
	for k, v := range c.synced {
		if cd.Synced == nil {
			cd.Synced = map[string]int32{}
		}
		cd.Synced[syncKeyString(k)] = v
	}
	for k, v := range c.learnerAt {
		if cd.LearnerAt == nil {
			cd.LearnerAt = map[string]int64{}
		}
		cd.LearnerAt[syncKeyString(k)] = v
	}
	for id, r := range c.nodes {
		intent := r.inherited
		if r.revoking {
			intent = revokeIntent{Lease: int64(r.lease), TTL: r.ttl}
		}
		if r.alive && intent.Lease != 0 {
			if cd.Revoking == nil {
				cd.Revoking = map[int32]revokeIntent{}
			}
			cd.Revoking[id] = intent
		}
	}
	if cd.Handoffs != nil || cd.LastOwner != nil || cd.Synced != nil || cd.LearnerAt != nil || cd.Revoking != nil {
		data, err := json.Marshal(cd)
		if err != nil {
			return control.State{}, err
		}
		st.Churn = &control.ChurnStep{Kind: "reconcile", Step: len(cd.Handoffs), Data: data}
	}
	return st, nil
}

// commitLocked writes the coordinator's state with map m to etcd, fenced by the leadership
// the coordinator was started with. A coordinator whose commit fails stops acting (its
// context ends, Done is closed): another leader got in, or etcd is unreachable, and the
// state it holds in memory can no longer be trusted. Callers hold c.mu, and tell the nodes
// about m only when commitLocked succeeded.
func (c *Coordinator) commitLocked(m *zarispeer.PeerMap) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	next, err := c.stateLocked(m)
	if err == nil {
		ctx, cancel := context.WithTimeout(c.ctx, commitTimeout)
		next, err = c.states.Commit(ctx, c.cfg.Fence, c.committed, next)
		cancel()
	}
	if err != nil {
		c.stopErr = fmt.Errorf("store: coordinator stops acting: %w", err)
		c.cfg.Logger.Error("committing the cluster state failed; the coordinator stops acting", "epoch", m.Epoch, "err", err)
		c.cancel()
		return c.stopErr
	}
	c.committed = next
	return nil
}

// persistLocked commits the churn the coordinator plans without a new map (the same epoch).
// Callers hold c.mu.
func (c *Coordinator) persistLocked() error { return c.commitLocked(c.m) }

// openControl connects the coordinator to etcd as cfg says: cfg.Etcd if set, else an etcd at
// cfg.EtcdEndpoints, else one embedded in this process. It returns the backend to close
// with the coordinator (nil for cfg.Etcd).
func openControl(cfg CoordinatorConfig) (*clientv3.Client, *control.Backend, error) {
	if cfg.Etcd != nil {
		return cfg.Etcd, nil, nil
	}
	embed := control.EmbedConfig{Dir: cfg.EtcdDir}
	if cfg.EtcdDir == "" {
		embed = throwawayEtcd
	}
	b, err := control.Open(context.Background(), control.Options{
		Endpoints: cfg.EtcdEndpoints,
		Embed:     embed,
		Prefix:    cfg.EtcdPrefix,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: coordinator: %w", err)
	}
	return b.Client, b, nil
}

// restoreLocked makes the state loaded from etcd the coordinator's: the map (and with it the
// cluster id), the nodes, the wanted placement and the churn in progress. Every node it
// records as up is heartbeaten again; one that died meanwhile is failed over as usual.
// Callers hold c.mu.
func (c *Coordinator) restoreLocked(st control.State) error {
	m := new(zarispeer.PeerMap)
	if err := json.Unmarshal(st.Map, m); err != nil {
		return fmt.Errorf("store: cluster map in etcd: %w", err)
	}
	if m.SegmentCount != c.cfg.Segments || len(m.Segments) != int(m.SegmentCount) {
		return fmt.Errorf("store: the cluster in etcd has %d segments, configured %d", m.SegmentCount, c.cfg.Segments)
	}
	c.m, c.public = m, publicMap(m)
	for id, mem := range st.Members {
		if mem.State == memberLeft {
			c.left[ownerRef{id, mem.Incarnation}] = true
			continue
		}
		host, port, err := net.SplitHostPort(mem.Addr)
		if err != nil {
			return fmt.Errorf("store: member %d in etcd: %w", id, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return fmt.Errorf("store: member %d in etcd: %w", id, err)
		}
		c.nodes[id] = &nodeRec{
			info:        &zarispeer.PeerNode{ID: id, Host: host, Port: int32(p), PeerAddr: mem.PeerAddr},
			incarnation: mem.Incarnation,
			alive:       mem.State == memberUp || mem.State == memberLeaving,
			leaving:     mem.State == memberLeaving,
			lease:       clientv3.LeaseID(mem.Lease),
			ttl:         mem.LeaseTTL,
			kick:        make(chan struct{}, 1),
		}
	}
	for s, members := range st.Segments {
		if s >= 0 && s < c.cfg.Segments {
			c.want[s].members = members
			c.initialized = true
		}
	}
	if st.Churn != nil && len(st.Churn.Data) > 0 {
		var cd churnData
		if err := json.Unmarshal(st.Churn.Data, &cd); err != nil {
			return fmt.Errorf("store: churn in etcd: %w", err)
		}
		for s, h := range cd.Handoffs {
			if s >= 0 && s < c.cfg.Segments {
				c.want[s].owner, c.want[s].kind = h.Owner, h.Kind
			}
		}
		for s, o := range cd.LastOwner {
			if s >= 0 && s < c.cfg.Segments {
				c.lastOwner[s] = ownerRef{o.ID, o.Incarnation}
			}
		}
		for ks, v := range cd.Synced {
			if k, err := parseSyncKey(ks); err == nil {
				c.synced[k] = v
			}
		}
		for ks, v := range cd.LearnerAt {
			if k, err := parseSyncKey(ks); err == nil {
				c.learnerAt[k] = v
			}
		}
		for id, intent := range cd.Revoking {
			if r := c.nodes[id]; r != nil {
				r.inherited = intent
			}
		}
	}
	c.committed = st
	return nil
}

// resume carries on the handoffs a previous coordinator left half done: a segment in
// cut-over continues from the confirm step, a failback still marked transitioning is pushed
// to every node and then cleared.
func (c *Coordinator) resume() {
	defer c.wg.Done()
	c.mu.Lock()
	var cutover, transitioning []int32
	for s, sg := range c.m.Segments {
		switch {
		case sg.Cutover:
			cutover = append(cutover, int32(s))
		case sg.Transitioning:
			transitioning = append(transitioning, int32(s))
		}
	}
	c.mu.Unlock()
	for _, s := range cutover {
		c.mu.Lock()
		sg := c.m.Segments[s]
		w := c.want[s]
		from := ownerOf(sg)
		old := c.nodes[from]
		if !sg.Cutover || old == nil || w.owner == noOwner || w.owner == from {
			// Nothing to hand over any more: end the cut-over.
			if sg.Cutover {
				m := cloneMap(c.m)
				m.Segments[s].Cutover = false
				_ = c.publishLocked(m) // a failure stops the coordinator
			}
			c.mu.Unlock()
			continue
		}
		m := c.m
		hold := c.hold
		c.startHandoffLocked(s, from, func() { c.completeHandoff(s, w, from, w.owner, old, m, hold) })
		c.mu.Unlock()
	}
	if len(transitioning) == 0 {
		return
	}
	c.mu.Lock()
	m := c.m
	recs := c.liveRecsLocked()
	c.mu.Unlock()
	c.pushAll(recs, m)
	c.mu.Lock()
	defer c.mu.Unlock()
	m2 := cloneMap(c.m)
	cleared := false
	for _, s := range transitioning {
		if sg := m2.Segments[s]; sg.Transitioning {
			sg.Transitioning = false
			if c.want[s].owner == ownerOf(sg) {
				c.want[s].owner = noOwner
			}
			cleared = true
		}
	}
	if cleared {
		_ = c.publishLocked(m2) // a failure stops the coordinator
	}
}

// Done is closed when the coordinator stops acting: on Close, or when a commit of the
// cluster state failed (Err says why).
func (c *Coordinator) Done() <-chan struct{} { return c.ctx.Done() }

// Err returns why the coordinator stopped acting on its own, or nil.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopErr
}
