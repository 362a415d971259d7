package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Member is one store node as the cluster state records it.
type Member struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
	// State is the store's word for the member (up, down, leaving, ...); opaque here.
	State string `json:"state,omitempty"`
	// PeerAddr is the member's address for peer traffic, host:port.
	PeerAddr string `json:"peer_addr,omitempty"`
	// Incarnation names the member's process: a restarted process has another.
	Incarnation int64 `json:"incarnation,omitempty"`
	// Lease is the etcd lease that process registered under, LeaseTTL its TTL: a
	// coordinator taking over can still end the lease of a process whose key another
	// process of the member replaced.
	Lease    int64         `json:"lease,omitempty"`
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
}

// ChurnStep is the churn operation in progress: what it is, and how far it got, so that a
// coordinator taking over resumes it.
type ChurnStep struct {
	Kind    string `json:"kind"` // failover, join, failback, leave, migrate
	Node    int32  `json:"node,omitempty"`
	Segment int32  `json:"segment,omitempty"`
	// Step counts the steps of the operation done so far.
	Step int `json:"step"`
	// Data is the store's own detail of the step; opaque here.
	Data json.RawMessage `json:"data,omitempty"`
}

// State is a cluster's control state as kept in etcd.
type State struct {
	// Epoch is the epoch of Map. A commit never lowers it, and raises it whenever Map changes.
	Epoch uint64
	// Map is the encoded cluster map at Epoch; opaque here.
	Map []byte
	// Members are the store's nodes by id.
	Members map[int32]Member
	// Segments are the segment assignments: each segment's replica nodes, primary first.
	Segments map[int32][]int32
	// Churn is the churn step in progress, nil when none.
	Churn *ChurnStep
	// Revision is the etcd revision of the commit this state was read from (0: nothing was
	// ever committed). Commit uses it to detect any write in between.
	Revision int64
}

var (
	// ErrStale means the state changed in etcd since it was loaded: another writer
	// committed first. Load again and decide again.
	ErrStale = errors.New("control: cluster state changed since it was loaded")
	// ErrNotLeader means the write was fenced by a leadership that has ended.
	ErrNotLeader = errors.New("control: no longer the leader")
	// ErrEpochBackwards means a commit would lower the epoch, or change the map without
	// raising it.
	ErrEpochBackwards = errors.New("control: epoch must not go back")
)

// Fence ties a write to a leadership: the write applies only while the leader key Key still
// exists with create revision Revision (Elector.Fence gives it). The zero Fence checks no
// leadership: only for a cluster with a single writer.
type Fence struct {
	Key      string
	Revision int64
}

// cmp is the comparison that holds while the leadership lasts.
func (f Fence) cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Revision)
}

// StateStore reads and writes one cluster's State under a key prefix.
type StateStore struct {
	kv     clientv3.KV
	prefix string
}

// NewStateStore returns the store of the cluster whose keys live under prefix (its state
// under prefix+"state/").
func NewStateStore(kv clientv3.KV, prefix string) *StateStore {
	return &StateStore{kv: kv, prefix: prefix + "state/"}
}

func (s *StateStore) epochKey() string          { return s.prefix + "epoch" }
func (s *StateStore) mapKey() string            { return s.prefix + "map" }
func (s *StateStore) segmentsKey() string       { return s.prefix + "segments" }
func (s *StateStore) churnKey() string          { return s.prefix + "churn" }
func (s *StateStore) membersPrefix() string     { return s.prefix + "members/" }
func (s *StateStore) memberKey(id int32) string { return s.membersPrefix() + strconv.Itoa(int(id)) }

// Epoch reads the committed epoch alone (0 for a cluster never committed).
func (s *StateStore) Epoch(ctx context.Context) (uint64, error) {
	resp, err := s.kv.Get(ctx, s.epochKey())
	if err != nil {
		return 0, fmt.Errorf("read the cluster's epoch: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
}

// Load reads the whole state at one etcd revision. A cluster never committed loads as the
// zero State (Revision 0).
func (s *StateStore) Load(ctx context.Context) (State, error) {
	resp, err := s.kv.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return State{}, fmt.Errorf("load cluster state: %w", err)
	}
	st := State{Members: map[int32]Member{}, Segments: map[int32][]int32{}}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case key == s.epochKey():
			if st.Epoch, err = strconv.ParseUint(string(kv.Value), 10, 64); err != nil {
				return State{}, fmt.Errorf("load cluster state: %s: %w", key, err)
			}
			st.Revision = kv.ModRevision
		case key == s.mapKey():
			st.Map = bytes.Clone(kv.Value)
		case key == s.segmentsKey():
			err = json.Unmarshal(kv.Value, &st.Segments)
		case key == s.churnKey():
			st.Churn = new(ChurnStep)
			err = json.Unmarshal(kv.Value, st.Churn)
		case strings.HasPrefix(key, s.membersPrefix()):
			var m Member
			if err = json.Unmarshal(kv.Value, &m); err == nil {
				st.Members[m.ID] = m
			}
		}
		if err != nil {
			return State{}, fmt.Errorf("load cluster state: %s: %w", key, err)
		}
	}
	return st, nil
}

// Commit replaces the state prev (as loaded or as last committed) by next in one etcd
// transaction that applies only if nothing was committed since prev and fence's leadership
// still holds; it returns next with its new Revision. It fails with ErrStale if another
// commit came first, ErrNotLeader if the leadership ended, ErrEpochBackwards if next would
// lower the epoch or change the map at the same epoch; then nothing was written.
func (s *StateStore) Commit(ctx context.Context, fence Fence, prev, next State) (State, error) {
	if next.Epoch < prev.Epoch || (next.Epoch == prev.Epoch && !bytes.Equal(next.Map, prev.Map)) {
		return State{}, fmt.Errorf("%w: epoch %d to %d", ErrEpochBackwards, prev.Epoch, next.Epoch)
	}
	ops, err := s.writes(prev, next)
	if err != nil {
		return State{}, err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.epochKey()), "=", prev.Revision)}
	var orElse []clientv3.Op
	if fence != (Fence{}) {
		cmps = append(cmps, fence.cmp())
		orElse = append(orElse, clientv3.OpGet(fence.Key))
	}
	resp, err := s.kv.Txn(ctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
	if err != nil {
		return State{}, fmt.Errorf("commit cluster state at epoch %d: %w", next.Epoch, err)
	}
	if !resp.Succeeded {
		if fence != (Fence{}) && !fenceHolds(fence, resp) {
			return State{}, fmt.Errorf("commit cluster state at epoch %d: %w", next.Epoch, ErrNotLeader)
		}
		return State{}, fmt.Errorf("commit cluster state at epoch %d: %w", next.Epoch, ErrStale)
	}
	next.Revision = resp.Header.Revision
	return next, nil
}

// fenceHolds reports whether the failed transaction resp still saw fence's leader key.
func fenceHolds(fence Fence, resp *clientv3.TxnResponse) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	return len(kvs) == 1 && kvs[0].CreateRevision == fence.Revision
}

// writes are the operations that turn prev into next: the epoch key always (so that every
// commit moves its revision), the rest only where they differ.
func (s *StateStore) writes(prev, next State) ([]clientv3.Op, error) {
	ops := []clientv3.Op{clientv3.OpPut(s.epochKey(), strconv.FormatUint(next.Epoch, 10))}
	if !bytes.Equal(prev.Map, next.Map) {
		ops = append(ops, clientv3.OpPut(s.mapKey(), string(next.Map)))
	}
	put := func(key string, was, is any) error {
		a, err := json.Marshal(was)
		if err != nil {
			return err
		}
		b, err := json.Marshal(is)
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			ops = append(ops, clientv3.OpPut(key, string(b)))
		}
		return nil
	}
	if err := put(s.segmentsKey(), prev.Segments, next.Segments); err != nil {
		return nil, err
	}
	switch {
	case next.Churn == nil && prev.Churn != nil:
		ops = append(ops, clientv3.OpDelete(s.churnKey()))
	case next.Churn != nil:
		if err := put(s.churnKey(), prev.Churn, next.Churn); err != nil {
			return nil, err
		}
	}
	ids := slices.Sorted(maps.Keys(next.Members))
	for _, id := range ids {
		if next.Members[id].ID != id {
			return nil, fmt.Errorf("member under id %d has id %d", id, next.Members[id].ID)
		}
		was, had := prev.Members[id]
		if !had || was != next.Members[id] {
			if err := put(s.memberKey(id), nil, next.Members[id]); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(prev.Members)) {
		if _, kept := next.Members[id]; !kept {
			ops = append(ops, clientv3.OpDelete(s.memberKey(id)))
		}
	}
	return ops, nil
}
