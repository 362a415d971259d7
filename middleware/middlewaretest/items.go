package middlewaretest

import "github.com/clustron/zaris-go/runtime"

// Items is a runtime.BatchItems of n items with key "k", for a multi-key call that never
// reaches a transport (a test of call-level middleware sets the call's Batch by hand).
type Items int

func (n Items) Len() int                      { return int(n) }
func (Items) Key(int) []byte                  { return []byte("k") }
func (Items) Invalid(int) bool                { return false }
func (Items) Guarded(int) bool                { return false }
func (Items) Size(int) int                    { return 0 }
func (Items) SubRequest([]int) any            { return nil }
func (Items) Response(int64) runtime.Response { return nil }
func (Items) Record(runtime.Response, []int) ([]runtime.Status, error) {
	return nil, nil
}
